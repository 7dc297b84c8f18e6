"""The node's ``~/base_placement`` action (ros2_ik_interfaces/action/BasePlacement): where
should the robot stand?

A goal runs a base placement search (:mod:`ros2_ik.reach.placement`, the same core as the
``ros2_ik_base_placement`` command) on the node's current model, its collision model (meshes,
spheres file, the planning scene's attached objects, padding and allowed collisions) and its
live world (the planning scene's obstacles when the goal starts), in its own worker thread. The
task frame is the node's base frame (or a name in ``collision.base_frame_aliases``): the task
poses, the region, the world and the answers are in it. Solver options are the node's (the
refinement's seeds ``num_seeds`` and the rng seed may be overridden per goal; no IK time limit:
a goal's ``timeout`` and cancel stop it). Feedback after every coarse shard and refinement
level (at most every :data:`FEEDBACK_PERIOD` s, and the last of a stage always); cancel is
checked between shards and inside the solver.
"""

from __future__ import annotations

import array
import dataclasses
import math
import time
import types

import numpy as np
from geometry_msgs.msg import Pose
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup

from ros2_ik_interfaces.action import BasePlacement

from ...errors import IKError
from .. import codes
from ..codes import RequestError, code_of_exception
from ..conversions import as_f64, f64_array
from ..executor import WorkerActionServer, goal_finisher
from ..params import ik_config
from ..request import duration, stamp_model

__all__ = ["register", "BasePlacementServer", "build_placement"]

FEEDBACK_PERIOD = 0.05          # [s] fewest seconds between two feedback messages
DEFAULT_RESOLUTION = 0.1        # [m]
DEFAULT_YAW_STEP = math.pi / 8  # [rad]
DEFAULT_TOP = 10
DEFAULT_COARSE_SEEDS = 4
DEFAULT_SHARD = 100


def register(w) -> "BasePlacementServer":
    """Add ``~/base_placement`` to the node of ``w`` (a :class:`~ros2_ik.ros.wiring.Wiring`)."""
    return BasePlacementServer(w)


class BasePlacementServer:
    """See the module docstring."""

    def __init__(self, w):
        self._w = w
        self.server = WorkerActionServer(
            w.node, BasePlacement, "~/base_placement", self._run,
            submit=w.pool("placement").submit, context=w.context, post=w.post,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup())

    def destroy(self) -> None:
        self.server.destroy()

    # ------------------------------------------------------------------ one goal
    def _run(self, gh, ctx):
        from ...reach.placement import run_placement  # noqa: PLC0415

        w = self._w
        result = BasePlacement.Result()
        t0 = time.monotonic()
        last = [0.0, ""]
        stage_t0 = {}

        def should_stop() -> bool:
            return w.stopping() or gh.is_cancel_requested or not gh.is_active

        def progress(stage: str, done: int, total: int, best: float) -> None:
            now = time.monotonic()
            stage_t0.setdefault(stage, now)
            if done < total and stage == last[1] and now - last[0] < FEEDBACK_PERIOD:
                return
            last[0], last[1] = now, stage
            fb = BasePlacement.Feedback()
            fb.stage = stage
            fb.candidates_done, fb.candidates_total = int(done), int(total)
            fb.best_fraction = float(best)
            fb.elapsed = now - t0
            el = now - stage_t0[stage]
            fb.eta = el * (total - done) / done if done and el > 0 else -1.0
            w.post(gh.publish_feedback, fb)  # rcl calls on the executor thread

        code = codes.FAILURE
        try:
            robot = ctx.require_robot()  # (a long job: it waits for the compiled kernels)
            stamp_model(result, robot)
            placement, timeout, world = build_placement(ctx, robot, gh.request)
            result.frame_id = robot.base
            result.world_version = 0 if world is None else int(world.version)
            out = run_placement(placement, progress=progress, should_stop=should_stop,
                                timeout=timeout if timeout > 0 else None)
            s = out.summary
            result.solve_time = time.monotonic() - t0
            result.candidates = int(s["candidates"] + s.get("refined_candidates", 0))
            result.solves = int(s.get("solves_coarse", 0) + s.get("solves_fine", 0))
            result.pruned = int(s.get("pruned", 0))
            if out.coarse is not None:
                result.map_bases = f64_array(out.coarse["base"])
                result.map_fraction = _f32(out.coarse["fraction"])
            if out.complete:
                _fill(result, robot, out)
                code = codes.SUCCESS
            else:
                code = codes.TIMED_OUT if out.status == "timed_out" else codes.PREEMPTED
                result.message = (f"{out.status.replace('_', ' ')} after "
                                  f"{s['shards_done']} of {s['shards']} coarse shards"
                                  + (" and the coarse pass" if out.coarse is not None else ""))
        except (RequestError, IKError) as exc:
            code = code_of_exception(exc)
            result.message = exc.message if isinstance(exc, RequestError) else str(exc)
            w.log("info", f"base_placement: {codes.name_of(code)}: {result.message}")
        except Exception as exc:  # noqa: BLE001  (the node never dies on a goal)
            code, result.message = w.fail("base_placement", exc)
        result.error_code.val = code
        return goal_finisher(result, code, "the search was finished")


def _fill(result, robot, out) -> None:
    c = out.candidates
    result.compact_bases = f64_array(c["base"])
    poses = []
    for x, y, z, yaw in c["base"].tolist():
        p = Pose()
        p.position.x, p.position.y, p.position.z = float(x), float(y), float(z)
        p.orientation.z, p.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
        poses.append(p)
    result.base_poses = poses
    result.fraction = f64_array(c["fraction"])
    result.reached = [int(v) for v in c["reached"]]
    result.worst_manipulability = f64_array(c["worst_manipulability"])
    result.mean_manipulability = f64_array(c["mean_manipulability"])
    result.min_clearance = f64_array(c["min_clearance"])
    result.answer_reached = c["success"].ravel().tolist()
    result.joint_names = list(robot.out_names)
    M, P, nq = c["q"].shape
    result.compact_solutions = f64_array(robot.full_q(c["q"].reshape(M * P, nq)))


def build_placement(ctx, robot, goal):
    """The :class:`~ros2_ik.reach.placement.Placement` a goal asks for on ``robot`` with the
    context ``ctx`` (a :class:`~ros2_ik.ros.request.Context`), its timeout [s] (0: none) and
    the world; RequestError for a goal that cannot be run."""
    from ...reach.placement import Placement, PlacementConfig, Region  # noqa: PLC0415

    s = ctx.settings
    tip = goal.tip_link or robot.default_tip
    robot.check_link(tip, "tip link")
    aliases = [a.strip() for a in s.collision_base_frame_aliases.split(",") if a.strip()]
    if goal.frame_id not in ("", robot.base, *aliases):
        raise RequestError(codes.FRAME_TRANSFORM_FAILURE,
                           f"frame_id {goal.frame_id!r} is not the task frame: give '' or "
                           f"{robot.base!r} (the base frame: the poses, the region and the "
                           f"world are in it) or one of collision.base_frame_aliases "
                           f"{aliases}")
    flat = as_f64(goal.compact_poses)
    if not flat.size or flat.size % 7:
        raise RequestError(codes.INVALID_REQUEST,
                           f"compact_poses has {flat.size} values; give N * 7 (x y z qx qy qz "
                           "qw per task pose, N >= 1)")
    for name in ("resolution", "yaw_step", "x_min", "x_max", "y_min", "y_max", "yaw_min",
                 "yaw_max"):
        v = float(getattr(goal, name))
        if not math.isfinite(v):
            raise RequestError(codes.INVALID_REQUEST, f"{name} = {v!r} is not finite")
    if int(goal.num_seeds) > 100_000 or int(goal.coarse_seeds) > 100_000 or \
            int(goal.rng_seed) < -1:
        raise RequestError(codes.INVALID_REQUEST, "num_seeds and coarse_seeds must be at most "
                           "100000 (0 = default) and rng_seed >= -1 (-1 = node parameter)")
    timeout = duration(goal.timeout)
    yaw = (float(goal.yaw_min), float(goal.yaw_max))
    if yaw == (0.0, 0.0):
        yaw = (-math.pi, math.pi)
    heights = tuple(float(h) for h in goal.heights) or (0.0,)
    fine = dataclasses.replace(ik_config(s, num_seeds=int(goal.num_seeds),
                                         rng_seed=int(goal.rng_seed), avoid_collisions=True),
                               timeout=None)
    coarse = dataclasses.replace(fine, num_seeds=int(goal.coarse_seeds) or DEFAULT_COARSE_SEEDS,
                                 stall_iterations=3, max_iterations=min(60, fine.max_iterations))
    cm, world = ctx.collisions(robot, types.SimpleNamespace(avoid_collisions=True))
    try:
        region = Region((float(goal.x_min), float(goal.x_max)),
                        (float(goal.y_min), float(goal.y_max)), yaw, heights)
        config = PlacementConfig(
            resolution=float(goal.resolution) or DEFAULT_RESOLUTION,
            yaw_step=float(goal.yaw_step) or DEFAULT_YAW_STEP,
            top=int(goal.top) or DEFAULT_TOP, coarse=coarse, fine=fine, solver=s.solver,
            shard_size=int(goal.shard_size) or DEFAULT_SHARD)
        n = math.prod(len(a) for a in region.axes(config.resolution, config.yaw_step))
        P = flat.size // 7
        if n * P > s.placement_max_problems:
            raise RequestError(codes.INVALID_REQUEST,
                               f"{n} candidates x {P} task poses = {n * P} pairs exceed the "
                               f"node's placement.max_problems = {s.placement_max_problems}; "
                               "give a coarser resolution or yaw_step, a smaller region or "
                               "fewer poses (or use the ros2_ik_base_placement command)")
        placement = Placement(robot.model, flat.reshape(-1, 7), region, tip, world, config, cm)
    except IKError as exc:
        raise RequestError(code_of_exception(exc), str(exc)) from None
    return placement, timeout, world


def _f32(a) -> array.array:
    out = array.array("f")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float32).tobytes())
    return out
