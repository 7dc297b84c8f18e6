"""ros2_ik: batched kinematics and inverse kinematics for ROS 2, on NumPy or CuPy.

The core (``model``, ``kinematics``, ``solvers``, ``backend``) imports without rclpy and CuPy;
everything that touches ROS lives in ``ros2_ik.ros``.
"""

from .backend import Backend, get_backend, get_xp
from .errors import (BackendUnavailableError, IKError, InputTypeError, InvalidInputError,
                     ShapeError,
                     UnknownJointError, UnknownLinkError, UrdfError)
from .model import JointType, Model, load_robot

__version__ = "0.1.0"

__all__ = [
    "Model", "JointType", "load_robot", "Backend", "get_backend", "get_xp", "IKError",
    "UrdfError", "UnknownLinkError", "UnknownJointError", "ShapeError", "InvalidInputError",
    "InputTypeError", "BackendUnavailableError", "__version__",
]
