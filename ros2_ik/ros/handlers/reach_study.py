"""The node's ``~/reach_study`` action (ros2_ik_interfaces/action/ReachStudy) and its map.

A goal runs a reach study (:mod:`ros2_ik.reach`, the same core as the ``reach_study`` command)
on the node's current model with the node's solver parameters (seeds, stall and iteration
limits, tolerances, rng seed; no time limit: cancel stops it), in its own worker thread. Feedback
after every shard (at most every :data:`FEEDBACK_PERIOD` s, and the last one always): targets
done / total, reached, elapsed time and an ETA. Cancel is checked between shards and inside the
solver. When a study finishes, the map is published on ``~/reach_map``
(sensor_msgs/PointCloud2, reliable + transient local: one point per voxel with fields ``x y z
reachability manipulability``, float32, in the base frame) and returned in the result.

The node registers it with one call (:func:`register`); nothing else of the node changes.
The goal's context (model, parameters) is made on the executor thread when it starts.
"""

from __future__ import annotations

import array
import dataclasses
import math
import time

import numpy as np
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import PointCloud2, PointField

from ros2_ik_interfaces.action import ReachStudy

from ...errors import IKError
from ...reach import Box, Sphere, Study, StudyConfig, from_poses, grid_targets, run_study
from .. import codes
from ..codes import RequestError, code_of_exception
from ..conversions import as_f64, f64_array
from ..executor import WorkerActionServer, goal_finisher, quiet_events
from ..params import ik_config
from ..request import stamp_model

__all__ = ["register", "ReachStudyServer", "MAP_QOS", "map_cloud", "cloud_fields"]

FEEDBACK_PERIOD = 0.05          # [s] fewest seconds between two feedback messages
DEFAULT_RESOLUTION = 0.05       # [m]
DEFAULT_DIRECTIONS, DEFAULT_ROLLS = 30, 4
DEFAULT_SHARD = 2048
MAX_TARGETS = 5_000_000         # per goal (the result and the map are held in memory)
#: ~/reach_map: latched, so rviz started later shows the last map
MAP_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)
_FIELDS = ("x", "y", "z", "reachability", "manipulability")


def register(w) -> "ReachStudyServer":
    """Add ``~/reach_study`` and ``~/reach_map`` to the node of ``w`` (a
    :class:`~ros2_ik.ros.wiring.Wiring`)."""
    return ReachStudyServer(w)


class ReachStudyServer:
    """See the module docstring."""

    def __init__(self, w):
        self._w = w
        self.map_pub = w.node.create_publisher(PointCloud2, "~/reach_map", MAP_QOS,
                                               event_callbacks=quiet_events(publisher=True))
        self.server = WorkerActionServer(
            w.node, ReachStudy, "~/reach_study", self._run, submit=w.pool("reach").submit,
            context=w.context, post=w.post, goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup())

    def destroy(self) -> None:
        self.server.destroy()

    # ------------------------------------------------------------------ one goal
    def _run(self, gh, ctx):
        w = self._w
        result = ReachStudy.Result()
        t0 = time.monotonic()
        last = [0.0]

        def should_stop() -> bool:
            return w.stopping() or gh.is_cancel_requested or not gh.is_active

        def progress(done: int, total: int, reached: int) -> None:
            now = time.monotonic()
            if done < total and now - last[0] < FEEDBACK_PERIOD:
                return
            last[0] = now
            fb = ReachStudy.Feedback()
            fb.targets_done, fb.targets_total, fb.reached = int(done), int(total), int(reached)
            fb.elapsed = now - t0
            fb.eta = (now - t0) * (total - done) / done if done else -1.0
            w.post(gh.publish_feedback, fb)  # rcl calls on the executor thread

        code = codes.FAILURE
        try:
            robot = ctx.require_robot()  # (a long job: it waits for the compiled kernels)
            stamp_model(result, robot)
            study = build_study(robot, gh.request, ctx.settings,
                                "cupy" if ctx.xp.__name__.startswith("cupy") else "numpy")
            out = run_study(study, None, progress=progress, should_stop=should_stop,
                            plots=False)
            result.targets = len(study.targets)
            result.frame_id = robot.base
            if out.complete:
                s = out.summary
                result.reached = s["reached"]
                result.out_of_reach = s["out_of_reach"]
                result.solve_time = float(s["solve_wall_seconds"])
                result.solves_per_second = float(s["solves_per_second"] or 0.0)
                v = out.voxels
                result.voxel_centers = f64_array(v["centre"])
                result.reachability = _f32(v["reachability"])
                result.mean_manipulability = _f32(v["mean_manipulability"])
                code = codes.SUCCESS
                cloud = map_cloud(v, robot.base, w.node.get_clock().now().to_msg())
                w.publish(self.map_pub, cloud)
            else:
                code = codes.PREEMPTED
                result.reached = int(out.summary.get("reached_so_far", 0))
                result.solve_time = time.monotonic() - t0
                result.message = (f"cancelled after {out.summary['shards_done']} of "
                                  f"{out.summary['shards']} shards")
        except (RequestError, IKError) as exc:
            code = code_of_exception(exc)
            result.message = exc.message if isinstance(exc, RequestError) else str(exc)
            w.log("info", f"reach_study: {codes.name_of(code)}: {result.message}")
        except Exception as exc:  # noqa: BLE001  (the node never dies on a goal)
            code, result.message = w.fail("reach_study", exc)
        result.error_code.val = code
        return goal_finisher(result, code, "the study was finished")


def build_study(robot, goal, settings, backend: str = "numpy") -> Study:
    """The study a goal asks for, on ``robot`` (a LoadedRobot) with the node's parameters;
    RequestError for a goal that cannot be run."""
    tip = goal.tip_link or robot.default_tip
    robot.check_link(tip, "tip link")
    res = float(goal.resolution) or DEFAULT_RESOLUTION
    if not (math.isfinite(res) and res > 0):
        raise RequestError(codes.INVALID_REQUEST, f"resolution = {goal.resolution!r} m is "
                           "invalid; give a positive voxel edge, or 0 for 0.05 m")
    directions = int(goal.directions) or DEFAULT_DIRECTIONS
    rolls = int(goal.rolls) or DEFAULT_ROLLS
    centre, radius = np.asarray(goal.sphere_center, float), float(goal.sphere_radius)
    lo, hi = np.asarray(goal.box_min, float), np.asarray(goal.box_max, float)
    flat = as_f64(goal.compact_targets)
    try:
        if radius > 0:
            targets = grid_targets(Sphere(tuple(centre), radius), res, directions, rolls)
        elif np.all(hi > lo):
            targets = grid_targets(Box(tuple(lo), tuple(hi)), res, directions, rolls)
        elif flat.size:
            if flat.size % 7:
                raise RequestError(codes.INVALID_REQUEST, f"compact_targets has {flat.size} "
                                   "values, not a multiple of 7 (x y z qx qy qz qw per target)")
            targets = from_poses(flat.reshape(-1, 7), res)
        else:
            raise RequestError(codes.INVALID_REQUEST, "no targets: give sphere_radius > 0 "
                               "(and sphere_center), box_min < box_max on every axis, or "
                               "compact_targets")
    except IKError as exc:
        raise RequestError(codes.INVALID_REQUEST, str(exc)) from None
    if len(targets) > MAX_TARGETS:
        raise RequestError(codes.INVALID_REQUEST, f"{len(targets)} targets exceed the action's "
                           f"limit of {MAX_TARGETS}; use a coarser grid, fewer orientations, or "
                           "the reach_study command (no limit, results on disk)")
    if int(goal.num_seeds) > 100_000 or int(goal.rng_seed) < -1:
        raise RequestError(codes.INVALID_REQUEST, "num_seeds must be at most 100000 (0 = node "
                           "parameter) and rng_seed >= -1 (-1 = node parameter)")
    cfg = dataclasses.replace(ik_config(settings, num_seeds=int(goal.num_seeds),
                                        rng_seed=int(goal.rng_seed)), timeout=None)
    config = StudyConfig(ik=cfg, solver=settings.solver,
                         shard_size=int(goal.shard_size) or DEFAULT_SHARD,
                         backend="auto" if backend == "cupy" else "numpy")
    collision = None
    if cfg.avoid_collisions:  # the node's collision model (its meshes, spheres file, SRDF)
        collision = robot.collision_model(settings.collision_spheres_file,
                                          settings.collision_mesh_path,
                                          settings.collision_margin)
        if collision.missing and not collision.accept_missing:
            from ...model.collision import missing_message  # noqa: PLC0415

            raise RequestError(codes.COLLISION_CHECKING_UNAVAILABLE,
                               missing_message(collision.missing))
    return Study(robot.model, targets, tip, config, collision)


def cloud_fields() -> list:
    return [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
            for i, n in enumerate(_FIELDS)]


def map_cloud(voxels: dict, frame_id: str, stamp) -> PointCloud2:
    """PointCloud2 of a study's voxels: x y z [m], reachability index, mean manipulability."""
    pts = np.empty((len(voxels["reachability"]), len(_FIELDS)), np.float32)
    pts[:, :3] = voxels["centre"]
    pts[:, 3] = voxels["reachability"]
    pts[:, 4] = voxels["mean_manipulability"]
    msg = PointCloud2()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    msg.height, msg.width = 1, pts.shape[0]
    msg.fields = cloud_fields()
    msg.is_bigendian = False
    msg.point_step = 4 * len(_FIELDS)
    msg.row_step = msg.point_step * msg.width
    msg.is_dense = bool(np.isfinite(pts).all())
    msg.data = pts.astype("<f4").tobytes()
    return msg


def _f32(a) -> array.array:
    out = array.array("f")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float32).tobytes())
    return out

