"""Point clouds as the node's world holds them: a ``sensor_msgs/PointCloud2`` read in NumPy,
its points in range placed in the base frame, the robot's own points removed (a self-filter on
the current joint states, as MoveIt's point-cloud updater does), and the cells of
``point_cloud.resolution`` they fall in as box obstacles ``<cloud>/k``
(:mod:`ros2_ik.world.voxels`); each cloud replaces the last. No rclpy here.

A cloud that cannot be used (no x / y / z float fields, offsets past ``point_step``, ``data``
shorter than its rows, a frame the node cannot place (the base frame, a link, an alias, or the
frame ``point_cloud.frame_transform`` places), too many cells) removes the last cloud
and marks the scene (:attr:`~.scene.Scene.unsupported`): collision-aware answers are
``COLLISION_CHECKING_UNAVAILABLE`` naming it until a good cloud comes. The robot's own points
are removed only where joint states gave every joint (before, the mid-range configuration is
not where the robot is: every point is kept).
"""

from __future__ import annotations

import numpy as np

from ..errors import IKError
from .codes import INVALID_REQUEST, RequestError
from .scene import CLOUD, replace_cells, replace_sensed

__all__ = ["cloud_points", "apply_cloud", "frame_transform", "PREFIX", "MAX_POINTS"]

#: the obstacle ids of a cloud's boxes
PREFIX = CLOUD
#: points one cloud may carry
MAX_POINTS = 10_000_000
_FLOAT = {7: "f4", 8: "f8"}  # sensor_msgs/PointField FLOAT32, FLOAT64


def cloud_points(msg, what: str = "point cloud") -> np.ndarray:
    """(N, 3) float64 the points of a sensor_msgs/PointCloud2 in its frame (NaN kept)."""
    fields = {str(f.name): f for f in msg.fields}
    missing = [n for n in "xyz" if n not in fields]
    if missing:
        raise RequestError(INVALID_REQUEST, f"{what}: no field {missing[0]!r} (it has "
                                            f"{sorted(fields)}); give x, y and z")
    h, w = int(msg.height), int(msg.width)
    step, row = int(msg.point_step), int(msg.row_step)
    n = h * w
    if n > MAX_POINTS:
        raise RequestError(INVALID_REQUEST, f"{what}: {n:,} points, more than {MAX_POINTS:,}; "
                                            "downsample it")
    if w and row < w * step:
        raise RequestError(INVALID_REQUEST, f"{what}: row_step {row} is less than width {w} x "
                                            f"point_step {step}")
    data = msg.data
    buf = np.frombuffer(data if isinstance(data, (bytes, bytearray, memoryview))
                        else bytes(np.asarray(data, dtype=np.uint8)), dtype=np.uint8)
    if buf.size < h * row:
        raise RequestError(INVALID_REQUEST, f"{what}: data holds {buf.size} bytes, its "
                                            f"{h} rows of row_step {row} need {h * row}")
    if not n:
        return np.zeros((0, 3))
    layout = []
    for name in "xyz":  # (every field checked before anything is allocated)
        f = fields[name]
        kind = _FLOAT.get(int(f.datatype))
        if kind is None:
            raise RequestError(INVALID_REQUEST, f"{what}: field {name!r} has datatype "
                                                f"{int(f.datatype)}; give FLOAT32 (7) or "
                                                "FLOAT64 (8)")
        off, size = int(f.offset), int(kind[1])
        if off < 0 or off + size > step:
            raise RequestError(INVALID_REQUEST, f"{what}: field {name!r} at offset {off} "
                                                f"passes point_step {step}")
        layout.append((off, size, kind))
    rows = buf[:h * row].reshape(h, row)[:, :w * step].reshape(n, step)
    order = ">" if bool(msg.is_bigendian) else "<"
    out = np.empty((n, 3))
    for k, (off, size, kind) in enumerate(layout):
        out[:, k] = np.ascontiguousarray(rows[:, off:off + size]).view(order + kind)[:, 0]
    return out


def frame_transform(text: str):
    """``point_cloud.frame_transform`` parsed: None for '', else ``(frame, parent, T (4, 4))``
    from ``"frame parent x y z qx qy qz qw"`` (the pose of the cloud's frame in ``parent``, as
    ``static_transform_publisher`` gives it, though with the cloud's frame first). A
    malformed one is a ``ValueError`` saying what is wrong."""
    from ..kinematics.se3 import pq_to_pose  # noqa: PLC0415
    from ..world import MAX_SIZE  # noqa: PLC0415

    words = str(text).split()
    if not words:
        return None
    form = "'frame parent x y z qx qy qz qw'"
    if len(words) != 9:
        raise ValueError(f"point_cloud.frame_transform must be {form} (9 fields), got "
                         f"{len(words)}: {text!r}")
    try:
        v = np.array([float(x) for x in words[2:]])
    except ValueError:
        raise ValueError(f"point_cloud.frame_transform: x y z qx qy qz qw must be numbers, got "
                         f"{words[2:]}") from None
    if not np.all(np.isfinite(v)) or np.abs(v[:3]).max() > MAX_SIZE:
        raise ValueError(f"point_cloud.frame_transform: x y z qx qy qz qw must be finite (a "
                         f"position within {MAX_SIZE:g} m), got {words[2:]}")
    n = float(np.linalg.norm(v[3:]))
    if abs(n - 1.0) > 1e-3:
        raise ValueError(f"point_cloud.frame_transform: the quaternion {words[5:]} is not a "
                         f"unit quaternion (norm {n:.6g}); give qx qy qz qw of norm 1")
    if words[0] == words[1]:
        raise ValueError(f"point_cloud.frame_transform: frame and parent are both "
                         f"{words[0]!r}")
    v[3:] /= n
    return words[0], words[1], pq_to_pose(v)


def apply_cloud(scene, msg, frames, robot, *, resolution: float, max_range: float,
                padding: float, cm=None, what: str = "point cloud", static=None):
    """(scene, points of the robot removed or None, points kept): ``scene`` with its cloud
    replaced by ``msg``'s: the points within ``max_range`` of the sensor, in the base frame,
    less those within ``padding`` of the robot's spheres ``cm`` at ``frames.q`` (only where
    joint states gave every joint, ``frames.q_known``: else every point is kept, None
    removed), as the boxes of the cells they fall in. ``static``: :func:`frame_transform`'s
    ``(frame, parent, T)`` (a cloud in ``frame`` is placed by ``T`` in ``parent``) or None. A
    cloud that cannot be used removes the last one and marks the scene
    (:attr:`~.scene.Scene.unsupported`: collision-aware answers are refused, naming it, until
    a good cloud comes)."""
    counts = [None, 0]  # (the robot's points removed, the points kept: once applied)

    def apply():
        cells, removed, kept = _cells(msg, frames, robot, resolution, max_range, padding, cm,
                                      what, static)
        new = replace_cells(scene, PREFIX, cells, np.eye(4), what=what,
                            hint="give a coarser point_cloud.resolution or a shorter max_range")
        counts[:] = removed, kept
        return new
    return (replace_sensed(scene, "cloud", PREFIX, apply).bumped(), *counts)


def _cells(msg, frames, robot, resolution, max_range, padding, cm, what, static=None):
    """(the boxes of the cloud's cells (centres, sizes) in the base frame, the robot's points
    removed or None, the points kept)."""
    from ..world import voxels  # noqa: PLC0415

    P = cloud_points(msg, what)
    P = P[np.all(np.isfinite(P), axis=1)]
    P = P[np.linalg.norm(P, axis=1) <= max_range]
    frame = str(msg.header.frame_id)
    if static is not None and frame == static[0]:
        T = frames.to_base(static[1], "point_cloud.frame_transform's parent") @ static[2]
    else:
        try:
            T = frames.to_base(frame, what + ".header.frame_id")
        except RequestError as exc:
            raise RequestError(exc.code, f"{exc.message}; or give the frame's pose in one of "
                                         "them (point_cloud.frame_transform)") from None
    P = P @ T[:3, :3].T + T[:3, 3]
    removed = 0 if frames.q_known else None
    if cm is not None and robot is not None and len(P) and cm.num_spheres and frames.q_known:
        from scipy.spatial import cKDTree  # noqa: PLC0415

        from ..api import fk_frames  # noqa: PLC0415
        from ..ik.collision_geometry import sphere_centers  # noqa: PLC0415

        q = robot.model.neutral_q() if frames.q is None else frames.q
        Tl = np.asarray(fk_frames(robot.model, np.asarray(q)[None], list(robot.model.link_names)))
        C = np.asarray(sphere_centers(robot.model, cm, Tl))[0]
        R = cm.radius + padding
        near = cKDTree(P).query_ball_point(C, R)
        mine = np.unique(np.concatenate([np.asarray(i, dtype=np.int64) for i in near]))
        removed = mine.size
        P = np.delete(P, mine, axis=0)
    try:
        cells = voxels.boxes(voxels.cloud_cells(P, resolution, what), what)
    except IKError as exc:
        raise RequestError(INVALID_REQUEST, str(exc)) from None
    return cells, removed, len(P)
