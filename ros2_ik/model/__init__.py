"""URDF -> immutable kinematic model (flat arrays). No rclpy, no CuPy."""

from .srdf import Group, Srdf, parse_srdf
from .tree import MAX_BATCH, JointType, Model, check_model
from .urdf import (JOINT_TYPES, MAX_URDF_BYTES, MAX_VALUE, JointDesc, RobotDesc, UrdfWarning,
                   parse_urdf)

__all__ = ["Model", "JointType", "parse_urdf", "RobotDesc", "JointDesc", "JOINT_TYPES",
           "MAX_URDF_BYTES", "MAX_VALUE", "UrdfWarning", "MAX_BATCH", "load_robot",
           "parse_srdf", "Srdf", "Group", "check_model"]


def load_robot(name: str, **kwargs) -> Model:
    """Load a bundled robot by name (see :data:`ros2_ik.robots.ROBOTS`)."""
    from .. import robots  # noqa: PLC0415
    from ..errors import UnknownRobotError  # noqa: PLC0415

    if not isinstance(name, str) or name not in robots.ROBOTS:
        raise UnknownRobotError(name, robots.names())
    model = Model.from_urdf(robots.urdf_string(name), **kwargs)
    srdf = robots.srdf_string(name)
    if srdf:  # its disabled collision pairs are the default collision model's
        model.memo("model.srdf", "bundled", lambda: srdf)
    return model
