"""The world from ros2_ik's own ``WorldUpdate`` messages, as changes of an immutable
:class:`ros2_ik.world.World`, and the frames poses are given in (MoveIt's planning scene is
:mod:`.scene`'s). No rclpy here.

Frames: a pose's ``frame_id`` is the robot's base frame when it is empty, the base link or one
of ``aliases`` (the node's ``collision.base_frame_aliases``, "world" by default: MoveIt's
planning frame is usually the base through a fixed virtual joint); a link of the robot places
the pose by FK at the robot's current state; any other frame is FRAME_TRANSFORM_FAILURE (there
is no tf here).

"""

from __future__ import annotations

import numpy as np

from ..errors import IKError
from ..kinematics.se3 import pq_to_pose
from ..world import Obstacle, World
from .codes import FRAME_TRANSFORM_FAILURE, INVALID_REQUEST, RequestError

__all__ = ["apply_update", "Frames", "ADD", "MOVE", "REMOVE", "CLEAR"]

ADD, MOVE, REMOVE, CLEAR = 0, 1, 2, 3                 # WorldUpdate.operation
BOX, SPHERE, CYLINDER, CONE = 1, 2, 3, 4              # shape_msgs/SolidPrimitive.type


class Frames:
    """Pose messages -> (4, 4) in the base frame (see the module docstring). ``robot``: the
    :class:`~ros2_ik.ros.robot.LoadedRobot` (None: only the base frame and aliases); ``q``: its
    current state; ``q_known``: whether joint states gave every joint of it (default: ``q``
    was given)."""

    def __init__(self, robot, q=None, aliases=("world",), q_known=None):
        self.robot, self.q, self.aliases = robot, q, tuple(a for a in aliases if a)
        self.q_known = q is not None if q_known is None else bool(q_known)

    def pose(self, pose_msg, frame_id: str, what: str) -> np.ndarray:
        p, o = pose_msg.position, pose_msg.orientation
        v = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w], dtype=np.float64)
        if not np.all(np.isfinite(v)):
            raise RequestError(INVALID_REQUEST, f"{what}: pose has NaN or infinity; give finite "
                                                "values")
        n = float(np.linalg.norm(v[3:]))
        if abs(n - 1.0) > 1e-3:
            raise RequestError(INVALID_REQUEST, f"{what}: orientation quaternion (x y z w) has "
                                                f"norm {n:.6g}; give a unit quaternion")
        T = pq_to_pose(v)
        return self.to_base(frame_id, what) @ T

    def to_base(self, frame_id: str, what: str) -> np.ndarray:
        robot = self.robot
        if not frame_id or frame_id in self.aliases or (robot is not None
                                                        and frame_id == robot.base):
            return np.eye(4)
        if robot is not None and frame_id in robot.model.link_names:
            from ..api import fk_frames  # noqa: PLC0415

            q = robot.model.neutral_q() if self.q is None else self.q
            return np.asarray(fk_frames(robot.model, q[None], [frame_id]))[0, 0]
        known = "the base frame" + (f" {robot.base!r}" if robot is not None else "")
        raise RequestError(FRAME_TRANSFORM_FAILURE,
                           f"{what}: frame {frame_id!r} is unknown here (no tf): give poses in "
                           f"{known}, a link of the robot, or one of {list(self.aliases)} "
                           "(collision.base_frame_aliases)")


def _obstacle(oid: str, prim, shape: str, T: np.ndarray) -> Obstacle:
    """An obstacle from a shape_msgs/SolidPrimitive (or a half-space) at T."""
    try:
        if shape == "halfspace":
            return Obstacle.make(oid, "halfspace", (), T)
        from .scene import byte  # noqa: PLC0415

        kind = byte(prim.type, f"obstacle {oid!r} primitive type")
        dims = [float(v) for v in prim.dimensions]
        if shape == "capsule":
            if kind != CYLINDER or len(dims) < 2:
                raise RequestError(INVALID_REQUEST, f"obstacle {oid!r}: a capsule takes a "
                                                    "CYLINDER primitive (height, radius)")
            return Obstacle.make(oid, "capsule", (dims[1], dims[0]), T)
        if shape:
            raise RequestError(INVALID_REQUEST, f"obstacle {oid!r}: shape {shape!r} is not '', "
                                                "'capsule' or 'halfspace'")
        if kind == BOX:
            return Obstacle.make(oid, "box", dims[:3] if len(dims) >= 3 else dims, T)
        if kind == SPHERE:
            return Obstacle.make(oid, "sphere", dims[:1], T)
        if kind in (CYLINDER, CONE):  # a cone inside the cylinder of its height and radius
            if len(dims) < 2:
                raise RequestError(INVALID_REQUEST, f"obstacle {oid!r}: a cylinder needs "
                                                    "dimensions (height, radius)")
            return Obstacle.make(oid, "cylinder", (dims[1], dims[0]), T)
        raise RequestError(INVALID_REQUEST, f"obstacle {oid!r}: primitive type {kind} is not "
                                            "BOX (1), SPHERE (2), CYLINDER (3) or CONE (4)")
    except IKError as exc:
        if isinstance(exc, RequestError):
            raise
        raise RequestError(INVALID_REQUEST, str(exc)) from None


def apply_update(world: World, msg, frames: Frames) -> World:
    """``world`` changed by a ros2_ik_interfaces/WorldUpdate (RequestError naming what is
    wrong; nothing changes then)."""
    from .scene import byte  # noqa: PLC0415

    op = byte(msg.operation, "operation")
    ids = [str(i) for i in msg.ids]
    if op == CLEAR:
        return world.clear()
    if op not in (ADD, MOVE, REMOVE):
        raise RequestError(INVALID_REQUEST, f"operation {op} is not ADD (0), MOVE (1), REMOVE "
                                            "(2) or CLEAR (3)")
    if not ids:
        raise RequestError(INVALID_REQUEST, "no ids given; name the obstacles")
    if len(set(ids)) != len(ids):
        raise RequestError(INVALID_REQUEST, f"an id is given twice in {ids}")
    if op == REMOVE:
        missing = [i for i in ids if i not in world]
        if missing:
            raise RequestError(INVALID_REQUEST, f"no obstacles {missing} in the world; it has "
                                                f"{world.ids[:20]}")
        return world.remove(*ids)
    poses = list(msg.poses)
    if len(poses) != len(ids):
        raise RequestError(INVALID_REQUEST, f"{len(ids)} ids but {len(poses)} poses; give one "
                                            "pose per id")
    T = [frames.pose(p.pose, p.header.frame_id, f"obstacle {i!r}") for i, p in zip(ids, poses)]
    if op == MOVE:
        missing = [i for i in ids if i not in world]
        if missing:
            raise RequestError(INVALID_REQUEST, f"no obstacles {missing} to move; the world has "
                                                f"{world.ids[:20]}")
        for i, t in zip(ids, T):
            world = world.move(i, t)
        return world
    prims = list(msg.primitives)
    shapes = list(msg.shapes) or [""] * len(ids)
    if len(shapes) != len(ids) or (len(prims) != len(ids) and any(s != "halfspace"
                                                                  for s in shapes)):
        raise RequestError(INVALID_REQUEST, f"{len(ids)} ids, {len(prims)} primitives and "
                                            f"{len(shapes)} shapes; give one primitive per id "
                                            "(and shapes empty or one per id)")
    obs = [_obstacle(i, prims[k] if k < len(prims) else None, shapes[k], T[k])
           for k, i in enumerate(ids)]
    try:
        return world.add(*obs)
    except IKError as exc:
        raise RequestError(INVALID_REQUEST, str(exc)) from None
