"""``~/trajectory_seed`` (ros2_ik_interfaces/action/TrajectorySeed): IK along a path between
keyframe poses (:func:`ros2_ik.api.trajectory_seed`), with feedback and cancel.

The goal runs in the actions' pool; feedback (nodes done / total / failed) at most every
:data:`FEEDBACK_PERIOD`, the last always; a cancel is seen between chunks and inside the
solver; the terminal state and the result are set on the executor thread.
"""

from __future__ import annotations

import math
import time

import numpy as np
from ros2_ik_interfaces.action import TrajectorySeed

from ... import api
from ...ik.terms.step import velocity_steps
from .. import codes
from ..codes import RequestError
from ..conversions import check_poses, describe_bad_pose, f64_array, i32_array, poses_to_pq
from ..conversions import sec_to_duration
from ...api import waiting_for_builds
from ..params import TRAJECTORY_MODES
from ..request import (Context, collisions_flag, config, overall_code, solver_name, stamp_model,
                       summary,
                       to_base)

__all__ = ["handle", "register", "FEEDBACK_PERIOD"]

FEEDBACK_PERIOD = 0.05  # [s] fewest seconds between two feedback messages (the last always)


def register(w):
    """``~/trajectory_seed`` on the node of ``w``; returns the action server (destroyed by the
    node)."""
    from rclpy.action import CancelResponse, GoalResponse  # noqa: PLC0415 - (handle: no rclpy)
    from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: PLC0415

    from ..executor import WorkerActionServer, goal_finisher  # noqa: PLC0415

    def accept(goal_request):
        return GoalResponse.ACCEPT

    def run(goal_handle, ctx):
        """A goal (in a worker); returns ``finish(goal_handle) -> result`` for the executor
        thread, which sets the terminal state."""
        result = TrajectorySeed.Result()
        last = [0.0]

        def should_stop() -> bool:
            return w.stopping() or goal_handle.is_cancel_requested or not goal_handle.is_active

        def progress(done: int, total: int, failed: int) -> None:
            now = time.monotonic()
            if done < total and now - last[0] < FEEDBACK_PERIOD:
                return
            last[0] = now
            fb = TrajectorySeed.Feedback()
            fb.nodes_done, fb.nodes_total, fb.nodes_failed = int(done), int(total), int(failed)
            w.post(goal_handle.publish_feedback, fb)  # rcl calls on the executor thread

        stats = None
        ctx.should_stop = should_stop
        try:
            with waiting_for_builds(False):  # kernels not built yet: the reference answers
                stats = handle(ctx, goal_handle.request, result, progress=progress)
            code = int(result.error_code.val)
        except Exception as exc:  # noqa: BLE001
            code, message = w.fail("trajectory_seed", exc)
            result = TrajectorySeed.Result()
            result.error_code.val = code
            result.message = message
        stamp_model(result, ctx.robot if ctx.model_wait is None else None)
        nodes = stats["nodes"] if stats else 0
        w.stats.record("trajectory_seed", code, nodes, stats["solved"] if stats else 0,
                       message=result.message)
        if code not in (codes.SUCCESS, codes.PREEMPTED):
            w.log("info", f"trajectory_seed: {codes.name_of(code)}: {result.message}")
        return goal_finisher(result, code, "every node was solved")

    return WorkerActionServer(w.node, TrajectorySeed, "~/trajectory_seed", run,
                              submit=w.pool("actions").submit, post=w.post,
                              context=w.context, goal_callback=accept,
                  cancel_callback=lambda _handle: CancelResponse.ACCEPT,
                  callback_group=ReentrantCallbackGroup())


def handle(ctx: Context, goal, result, *, progress=None) -> dict:
    """Solve a TrajectorySeed goal into ``result``; returns statistics
    (``nodes``, ``solved``, ``cancelled``, ``code``)."""
    robot = ctx.require_robot()
    s = ctx.settings
    model = robot.model
    tip = robot.check_link(goal.tip_link or robot.default_tip, "tip_link")
    M = len(goal.keyframes)
    if M < 2:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{M} keyframe(s) given; give at least 2 (start and end pose)")
    nidx = np.asarray(list(goal.node_indices), dtype=np.int64)
    if nidx.shape[0] != M:
        raise RequestError(codes.INVALID_REQUEST,
                           f"node_indices has {nidx.shape[0]} entries for {M} keyframes; give one "
                           "node index per keyframe")
    if nidx[0] != 0 or np.any(np.diff(nidx) <= 0):
        raise RequestError(codes.INVALID_REQUEST,
                           f"node_indices {nidx.tolist()[:10]} must start at 0 and be strictly "
                           "increasing")
    N = int(nidx[-1]) + 1
    if N > s.max_batch:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{N} trajectory nodes exceed the node's max_batch = {s.max_batch}; "
                           "use fewer nodes or raise max_batch")
    mode = goal.mode or s.trajectory_mode
    if mode not in TRAJECTORY_MODES:
        raise RequestError(codes.INVALID_REQUEST,
                           f"unknown mode {goal.mode!r}; use one of {list(TRAJECTORY_MODES)} or "
                           "'' for the node default")
    dt = float(goal.time_step)
    if not math.isfinite(dt) or dt < 0:
        raise RequestError(codes.INVALID_REQUEST,
                           f"time_step = {dt!r} is invalid; give a positive value [s] or 0 for "
                           "the node default")
    dt = dt if dt > 0 else s.trajectory_time_step
    solver = solver_name(goal.solver, s)
    cfg = config(s, position_tolerance=goal.position_tolerance,
                  orientation_tolerance=goal.orientation_tolerance, timeout=goal.timeout,
                  num_seeds=goal.num_seeds, solve_mode="distance",
                  avoid_collisions=collisions_flag(getattr(goal, "collisions", 0)))
    collision, world = ctx.collisions(robot, cfg)
    seed = ctx.seed_q(robot, goal.seed, "seed")
    raw, frames = poses_to_pq(goal.keyframes)
    pq, ok, reason = check_poses(raw)
    if not ok.all():
        k = int(np.nonzero(~ok)[0][0])
        raise RequestError(codes.INVALID_GOAL,
                           f"keyframe {k}: {describe_bad_pose(raw[k], int(reason[k]))}")
    pq = to_base(robot, pq, frames, seed, "keyframe header.frame_id")

    r = api.trajectory_seed(model, pq, nidx, tip=tip, mode=mode, seed=seed, config=cfg,
                            solver=solver, should_stop=ctx.should_stop, progress=progress,
                            world=world, collision=collision,
                            max_joint_step=_step_bound(goal, model, mode, dt))
    status = np.asarray(r.status, dtype=np.int32)
    full = robot.full_q(np.asarray(r.q))
    _fill_trajectory(result.trajectory, robot.out_names, full, dt)
    result.node_status = i32_array(status)
    result.position_errors = f64_array(r.position_error)
    result.orientation_errors = f64_array(r.orientation_error)
    result.max_joint_jump = float(r.max_joint_jump)
    if hasattr(result, "backend"):
        result.backend = r.backend
    code = codes.PREEMPTED if r.cancelled else overall_code(status)
    result.error_code.val = code
    msgs = {i: m for i, m in enumerate(r.messages) if m and status[i] != codes.SUCCESS}
    text = summary(status, msgs, what="node")
    if r.cancelled:
        text = "cancelled: " + (text or "every node had been solved")
    result.message = text
    return {"nodes": N, "solved": int(np.sum(status == codes.SUCCESS)),
            "cancelled": bool(r.cancelled), "code": code, "solve_time": r.solve_time}


def _fill_trajectory(traj, names, Q: np.ndarray, dt: float) -> None:
    from trajectory_msgs.msg import JointTrajectoryPoint  # noqa: PLC0415

    traj.joint_names = list(names)
    pts = []
    for i, row in enumerate(Q):
        p = JointTrajectoryPoint()
        p.positions = f64_array(row)
        sec_to_duration(i * dt, p.time_from_start)
        pts.append(p)
    traj.points = pts


def _step_bound(goal, model, mode: str, dt: float):
    """The goal's step bound between neighbouring nodes (nq,), or None."""
    step = float(getattr(goal, "max_joint_step", 0.0))
    by_velocity = bool(getattr(goal, "step_from_velocity", False))
    if not math.isfinite(step) or step < 0:
        raise RequestError(codes.INVALID_REQUEST, f"max_joint_step = {step!r} must be a finite "
                           "number >= 0 [rad or m] (0: no bound)")
    if step == 0 and not by_velocity:
        return None
    if mode != "sequential":
        raise RequestError(codes.INVALID_REQUEST, "max_joint_step bounds the step between "
                           "neighbouring nodes, which only mode 'sequential' solves one after "
                           "the other; use mode 'sequential'")
    bound = np.full(model.nq, step if step > 0 else np.inf)
    if by_velocity:
        bound = np.minimum(bound, velocity_steps(model, dt, "step_from_velocity"))
    return bound
