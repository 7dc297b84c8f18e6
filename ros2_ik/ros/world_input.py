"""The world from ROS messages: ros2_ik's ``WorldUpdate`` and MoveIt's planning scene
(``moveit_msgs/CollisionObject``, ``moveit_msgs/PlanningScene``), as changes of an immutable
:class:`ros2_ik.world.World`. Plain attribute access on the messages, so it is tested with
stand-ins that mirror the moveit_msgs definitions field for field; no rclpy here.

Frames: a pose's ``frame_id`` is the robot's base frame when it is empty, the base link or one
of ``aliases`` (the node's ``collision.base_frame_aliases``, "world" by default: MoveIt's
planning frame is usually the base through a fixed virtual joint); a link of the robot places
the pose by FK at the robot's current state; any other frame is FRAME_TRANSFORM_FAILURE (there
is no tf here).

MoveIt's objects: each primitive of a ``CollisionObject`` is an obstacle, ``id`` for a single
one, ``id/k`` for several; ``ADD`` replaces the object, ``APPEND`` adds to it, ``MOVE`` moves
it (to ``pose``), ``REMOVE`` removes it (an empty id: every object). A mesh is covered by the
box of its vertices (in its pose), a plane by the half-space on the side its normal points away
from. A ``PlanningScene`` that is not a diff replaces the world; its other fields (robot state,
allowed collisions) are not used.
"""

from __future__ import annotations

import numpy as np

from ..errors import IKError
from ..kinematics.se3 import pq_to_pose
from ..world import Obstacle, World
from .codes import FRAME_TRANSFORM_FAILURE, INVALID_REQUEST, RequestError

__all__ = ["apply_update", "apply_collision_object", "apply_planning_scene", "Frames",
           "ADD", "MOVE", "REMOVE", "CLEAR"]

ADD, MOVE, REMOVE, CLEAR = 0, 1, 2, 3                 # WorldUpdate.operation
CO_ADD, CO_REMOVE, CO_APPEND, CO_MOVE = 0, 1, 2, 3    # moveit_msgs/CollisionObject.operation
BOX, SPHERE, CYLINDER, CONE = 1, 2, 3, 4              # shape_msgs/SolidPrimitive.type


class Frames:
    """Pose messages -> (4, 4) in the base frame (see the module docstring). ``robot``: the
    :class:`~ros2_ik.ros.robot.LoadedRobot` (None: only the base frame and aliases); ``q``: its
    current state."""

    def __init__(self, robot, q=None, aliases=("world",)):
        self.robot, self.q, self.aliases = robot, q, tuple(a for a in aliases if a)

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
        kind = int(prim.type)
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
    op = int(msg.operation)
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


def _members(world: World, oid: str) -> list:
    return [i for i in world.ids if i == oid or i.startswith(oid + "/")]


def apply_collision_object(world: World, co, frames: Frames, poses: dict, warn) -> World:
    """``world`` changed by a moveit_msgs/CollisionObject. ``poses``: object id -> its pose
    (kept by the caller across messages, for MOVE); ``warn(text)`` for what is approximated."""
    oid = str(co.id)
    op = int(co.operation)
    frame = co.header.frame_id
    if op == CO_REMOVE:
        if not oid:
            poses.clear()
            return world.clear()
        poses.pop(oid, None)
        gone = _members(world, oid)
        return world.remove(*gone) if gone else world
    has_pose = hasattr(co, "pose")
    T_obj = frames.pose(co.pose, frame, f"object {oid!r}") if has_pose else np.eye(4)
    if op == CO_MOVE:
        old = poses.get(oid)
        mine = _members(world, oid)
        if old is None or not mine:
            raise RequestError(INVALID_REQUEST, f"object {oid!r} to MOVE is not in the world")
        delta = T_obj @ np.linalg.inv(old)
        for i in mine:
            world = world.move(i, delta @ world[i].pose)
        poses[oid] = T_obj
        return world
    if op not in (CO_ADD, CO_APPEND):
        raise RequestError(INVALID_REQUEST, f"object {oid!r}: operation {op} is not ADD, "
                                            "REMOVE, APPEND or MOVE")
    if not oid:
        raise RequestError(INVALID_REQUEST, "a CollisionObject needs an id")
    parts = []
    for k, (prim, p) in enumerate(zip(co.primitives, co.primitive_poses)):
        parts.append((prim, "", T_obj @ frames.pose(p, "", f"object {oid!r} primitive {k}")))
    for k, (mesh, p) in enumerate(zip(co.meshes, co.mesh_poses)):
        V = np.array([[v.x, v.y, v.z] for v in mesh.vertices], dtype=np.float64).reshape(-1, 3)
        if not len(V) or not np.all(np.isfinite(V)):
            raise RequestError(INVALID_REQUEST, f"object {oid!r} mesh {k} has no finite "
                                                "vertices")
        lo, hi = V.min(axis=0), V.max(axis=0)
        T = T_obj @ frames.pose(p, "", f"object {oid!r} mesh {k}")
        C = np.eye(4)
        C[:3, 3] = 0.5 * (lo + hi)
        box = type("Box", (), {"type": BOX, "dimensions": list(np.maximum(hi - lo, 1e-3))})
        parts.append((box, "", T @ C))
        warn(f"object {oid!r}: mesh {k} is covered by the box of its vertices")
    for k, (plane, p) in enumerate(zip(co.planes, co.plane_poses)):
        a, b, c, d = (float(v) for v in plane.coef)
        n = np.array([a, b, c])
        norm = float(np.linalg.norm(n))
        if not np.isfinite(norm) or norm < 1e-9 or not np.isfinite(d):
            raise RequestError(INVALID_REQUEST, f"object {oid!r} plane {k} has no normal")
        n = n / norm
        z = np.array([0.0, 0.0, 1.0])
        axis = np.cross(z, n)
        s, cth = float(np.linalg.norm(axis)), float(np.dot(z, n))
        R = np.eye(3)
        if s > 1e-12:
            K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]],
                          [-axis[1], axis[0], 0]]) / s
            R = np.eye(3) + s * K + (1 - cth) * (K @ K)
        elif cth < 0:
            R = np.diag([1.0, -1.0, -1.0])
        P = np.eye(4)
        P[:3, :3] = R
        P[:3, 3] = -d / norm * n
        T = T_obj @ frames.pose(p, "", f"object {oid!r} plane {k}") @ P
        parts.append((None, "halfspace", T))
    if not parts:
        raise RequestError(INVALID_REQUEST, f"object {oid!r} has no primitives, meshes or "
                                            "planes")
    if op == CO_ADD:
        gone = _members(world, oid)
        if gone:
            world = world.remove(*gone)
        first = 0
    else:
        first = len(_members(world, oid))
    n = first + len(parts)
    obs = [_obstacle(oid if n == 1 else f"{oid}/{first + k}", prim, shape, T)
           for k, (prim, shape, T) in enumerate(parts)]
    poses[oid] = T_obj
    try:
        return world.add(*obs)
    except IKError as exc:
        raise RequestError(INVALID_REQUEST, str(exc)) from None


def apply_planning_scene(world: World, scene, frames: Frames, poses: dict, warn) -> World:
    """``world`` changed by a moveit_msgs/PlanningScene (its ``world.collision_objects``; not
    a diff: the world is replaced)."""
    if not bool(getattr(scene, "is_diff", True)):
        world = world.clear()
        poses.clear()
    for co in scene.world.collision_objects:
        world = apply_collision_object(world, co, frames, poses, warn)
    return world
