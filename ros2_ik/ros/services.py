"""Request handling: convert the request, call the core, convert back.

Each handler takes a :class:`Context` (the model and parameter snapshot the request started
with, the default seed, a stop flag) and a request message, fills the response (or result)
message and returns a small outcome record for markers and statistics. A request that cannot be
served raises :class:`RequestError` with an IKErrorCode value and a message saying what was wrong
and what to do; the node turns that (and any other exception) into the response's
``error_code`` and ``message``. Handlers fill the response only once everything succeeded, so a
rejected request carries empty arrays.
"""

from __future__ import annotations

import array
import math
import types
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import api
from ..ik import SOLVERS
from ..backend import to_numpy
from ..api import fk_frames, jacobian
from ..kinematics import pose_inverse, pose_to_pq, pq_to_pose
from ..model import MAX_VALUE
from ..ik.config import MAX_SEEDS, IKConfig, SolveMode
from . import codes
from .codes import RequestError
from .conversions import (as_f64, check_poses, describe_bad_pose, duration_to_sec, f64_array,
                          i32_array, joint_states, poses_to_pq, pq_to_pose_stamped,
                          sec_to_duration, u32_array)
from .params import SPECS, TRAJECTORY_MODES, Settings, ik_config
from .robot import LoadedRobot

__all__ = ["Context", "IKOutcome", "compute_ik", "compute_fk", "compute_jacobian",
           "trajectory_seed_goal", "overall_code", "NO_MODEL_MESSAGE"]

NO_MODEL_MESSAGE = ("no robot model loaded yet: publish the URDF on the robot_description topic "
                    "(std_msgs/String, transient local, as robot_state_publisher does) or start "
                    "the node with one of the parameters robot_description, urdf_file or robot")


@dataclass
class Context:
    """What one request works with, fixed when it starts."""

    robot: LoadedRobot | None
    settings: Settings
    xp: types.ModuleType = np
    seed_base: Callable[[LoadedRobot], np.ndarray] | None = None  # latest joint_states, or None
    should_stop: Callable[[], bool] | None = None

    def require_robot(self) -> LoadedRobot:
        if self.robot is None:
            raise RequestError(codes.NO_ROBOT_MODEL, NO_MODEL_MESSAGE)
        return self.robot

    def current_q(self, robot: LoadedRobot) -> np.ndarray:
        """The robot's current state as the node knows it (nq,): mid-range, overwritten by the
        latest joint_states."""
        return self.seed_base(robot) if self.seed_base else robot.model.neutral_q()

    def seed_q(self, robot: LoadedRobot, js, what: str = "seed", *,
               ignore_unknown: bool = False) -> np.ndarray:
        """Seed (nq,): mid-range, then the latest joint_states, then the request's JointState
        (``ignore_unknown``: names the model lacks are skipped, not rejected)."""
        base = self.current_q(robot)
        names = list(js.name) if js is not None else []
        pos = as_f64(js.position) if js is not None else np.zeros(0)
        if not names and pos.size == 0:
            return base
        return robot.apply_joint_values(base, names, pos, what=what, strict=True, clip=True,
                                        ignore_unknown=ignore_unknown)


@dataclass
class IKOutcome:
    """What a ComputeIK request produced (for markers and statistics)."""

    robot: LoadedRobot
    tips: list[str]
    targets: np.ndarray           # (N, K, 7) in the base frame (identity where invalid)
    q: np.ndarray                 # (N, nq)
    status: np.ndarray            # (N,) IKErrorCode values
    code: int
    solve_time: float = 0.0

    @property
    def problems(self) -> int:
        return int(self.status.shape[0])

    @property
    def solved(self) -> int:
        return int(np.sum(self.status == codes.SUCCESS))


# ---------------------------------------------------------------------- shared option parsing
def _tolerance(value: float, name: str) -> float:
    """A request's tolerance: 0 (the node's parameter) or positive, at most the parameter's
    upper bound (1 m, pi rad: beyond, every pose would count as reached)."""
    v = float(value)
    top = SPECS[name].range[1]
    if not math.isfinite(v) or v < 0 or v > top:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{name} = {v!r} is invalid; give a positive tolerance of at most "
                           f"{top:g}, or 0 for the node default")
    return v


def _timeout(d) -> float:
    if not 0 <= int(d.nanosec) < 1_000_000_000:
        raise RequestError(codes.INVALID_REQUEST,
                           f"timeout.nanosec = {d.nanosec} is not a valid Duration (0 to "
                           "999999999; whole seconds go in timeout.sec)")
    t = duration_to_sec(d)
    if not math.isfinite(t) or t < 0:
        raise RequestError(codes.INVALID_REQUEST,
                           f"timeout = {t:g} s is negative; give a positive duration, or 0 for "
                           "the node default")
    return t


def _solver(name: str, s: Settings) -> str:
    solver = name or s.solver
    if solver not in SOLVERS:
        raise RequestError(codes.INVALID_REQUEST,
                           f"unknown solver {solver!r}; use one of {list(SOLVERS)} or '' "
                           "for the node default")
    return solver


def _config(s: Settings, *, position_tolerance, orientation_tolerance, timeout, num_seeds,
            solve_mode="", rng_seed=-1) -> IKConfig:
    modes = [m.value for m in SolveMode]
    if solve_mode and solve_mode not in modes:
        raise RequestError(codes.INVALID_REQUEST,
                           f"unknown solve_mode {solve_mode!r}; use one of {modes} or '' for the "
                           "node default")
    if int(rng_seed) < -1:
        raise RequestError(codes.INVALID_REQUEST,
                           f"rng_seed = {rng_seed} is invalid; give -1 (node default) or a value "
                           ">= 0")
    if int(num_seeds) > MAX_SEEDS:
        raise RequestError(codes.INVALID_REQUEST,
                           f"num_seeds = {num_seeds} is too large; give at most {MAX_SEEDS} (0 = "
                           "node default)")
    return ik_config(s, position_tolerance=_tolerance(position_tolerance, "position_tolerance"),
                     orientation_tolerance=_tolerance(orientation_tolerance,
                                                      "orientation_tolerance"),
                     timeout=_timeout(timeout), num_seeds=int(num_seeds), solve_mode=solve_mode,
                     rng_seed=int(rng_seed))


def _weights(axis_weights, position_only: bool) -> tuple[float, ...]:
    """The request's axis weights, checked, as a tuple (the solvers keep the check of a tuple
    they have seen: a request's default weights cost nothing after the first)."""
    if len(axis_weights) == 0:
        return (1.0, 1.0, 1.0, 0.0, 0.0, 0.0) if position_only else (1.0,) * 6
    w = as_f64(axis_weights).copy()
    if w.size != 6 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RequestError(codes.INVALID_REQUEST,
                           f"axis_weights must be empty or 6 finite values >= 0 (x y z rx ry rz), "
                           f"got {np.round(w, 6).tolist()}")
    if position_only:
        w[3:] = 0.0
    if not np.any(w > 0):
        raise RequestError(codes.INVALID_REQUEST,
                           "every axis weight is 0 (after position_only), so nothing would be "
                           "solved; give at least one positive weight")
    return tuple(w.tolist())


def _to_base(robot: LoadedRobot, pq: np.ndarray, frames: list[str] | str, seed: np.ndarray,
             what: str) -> np.ndarray:
    """Goals pq (..., 7) in their frames -> pq (..., 7) in the base frame.

    ``frames`` is one frame for all, or a list with one frame per goal (flattened order).
    """
    uniq = [frames] if isinstance(frames, str) else list(dict.fromkeys(frames))
    moving = [f for f in uniq if f not in ("", robot.base)]
    if not moving:  # ('' and the base need no transform, nor a check)
        return pq
    T_frames = robot.frame_transforms(moving, seed, what=what)
    flat = pq.reshape(-1, 7)
    T = pq_to_pose(flat)
    if isinstance(frames, str):
        T = T_frames[frames] @ T
    else:
        farr = np.asarray(frames, dtype=object)
        for f in moving:
            m = farr == f
            T[m] = T_frames[f] @ T[m]
    return pose_to_pq(T).reshape(pq.shape)


def _fill_solutions(robot: LoadedRobot, req, resp, q: np.ndarray) -> None:
    """A ComputeIK response's joint names and solutions (N, nq) -> mimic joints added, in the
    compact or the friendly form the request asked for."""
    full = robot.full_q(q)
    resp.joint_names = list(robot.out_names)
    if req.compact_response:
        resp.compact_solutions = f64_array(full)
    else:
        resp.solutions = joint_states(robot.out_names, full)


def overall_code(status: np.ndarray) -> int:
    """Whole-request code from per-problem codes: SUCCESS if all succeeded, else the most
    telling failure (an invalid goal, then a time-out, then no solution)."""
    st = np.asarray(status)
    if st.size and np.all(st == codes.SUCCESS):
        return codes.SUCCESS
    for c in (codes.INVALID_GOAL, codes.PREEMPTED, codes.TIMED_OUT, codes.NO_IK_SOLUTION):
        if np.any(st == c):
            return c
    return codes.FAILURE


def _summary(status: np.ndarray, messages: dict[int, str], what: str = "problem") -> str:
    N = int(status.shape[0])
    ok = int(np.sum(status == codes.SUCCESS))
    if ok == N:
        return ""
    parts = [f"{ok}/{N} {what}s solved"]
    for c, label, hint in (
            (codes.INVALID_GOAL, "invalid goal", "fix these goals"),
            (codes.TIMED_OUT, "timed out", "raise timeout or lower num_seeds / batch size"),
            (codes.NO_IK_SOLUTION, "without a solution within the tolerances",
             "the goal may be unreachable; try more num_seeds, another seed or looser "
             "tolerances"),
            (codes.PREEMPTED, "cancelled", "")):
        idx = np.nonzero(status == c)[0]
        if idx.size:
            first = int(idx[0])
            detail = messages.get(first, "")
            parts.append(f"{idx.size} {label} (first: {what} {first}"
                         f"{': ' + detail if detail else ''})" + (f"; {hint}" if hint else ""))
    return "; ".join(parts)


# ---------------------------------------------------------------------- ComputeIK
def compute_ik(ctx: Context, req, resp) -> IKOutcome:
    robot = ctx.require_robot()
    s = ctx.settings
    model = robot.model
    group_name = getattr(req, "group_name", "")
    group = robot.group(group_name) if group_name else None
    tips = list(req.tip_links)
    if not tips and group is not None:
        if group.tip is None:
            raise RequestError(codes.INVALID_LINK_NAME,
                               f"group {group.name!r} has no single chain tip (joints "
                               f"{list(group.joints)}); name the tip link in the request")
        tips = [group.tip]
    tips = tips or [robot.default_tip]
    for t in tips:
        robot.check_link(t, "tip link")
    if len(set(tips)) != len(tips):
        raise RequestError(codes.INVALID_REQUEST,
                           f"tip_links {tips} names a link twice; give each tip once")
    K = len(tips)
    n_friendly, n_compact = len(req.goals), len(req.compact_goals)
    if n_friendly and n_compact:
        raise RequestError(codes.INVALID_REQUEST,
                           "both `goals` and `compact_goals` are filled; use exactly one form")
    if not n_friendly and not n_compact:
        raise RequestError(codes.INVALID_REQUEST,
                           "empty batch: no goals given; fill `goals` (one PoseStamped per "
                           "problem and tip) or `compact_goals` (N*K*7 values)")
    if n_compact:
        if n_compact % (7 * K):
            raise RequestError(codes.INVALID_REQUEST,
                               f"compact_goals has {n_compact} values, not a multiple of 7 x "
                               f"{K} tip(s); give N*{K}*7 values (x y z qx qy qz qw per goal)")
        N = n_compact // (7 * K)
    else:
        if n_friendly % K:
            raise RequestError(codes.INVALID_REQUEST,
                               f"{n_friendly} goals are not a multiple of the {K} tip links "
                               f"{tips}; give one goal per problem and tip (index p*K + k)")
        N = n_friendly // K
    if N > s.max_batch:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{N} problems exceed the node's max_batch = {s.max_batch}; split the "
                           "request into batches of at most max_batch problems (or raise the "
                           "max_batch parameter)")
    solver = _solver(req.solver, s)
    cfg = _config(s, position_tolerance=req.position_tolerance,
                  orientation_tolerance=req.orientation_tolerance, timeout=req.timeout,
                  num_seeds=req.num_seeds, solve_mode=req.solve_mode, rng_seed=req.rng_seed)
    weights = _weights(req.axis_weights, req.position_only)
    seed = ctx.seed_q(robot, req.seed, "seed",
                      ignore_unknown=getattr(req, "ignore_unknown_joints", False))

    if n_compact:
        raw = as_f64(req.compact_goals).reshape(N, K, 7)
        frames: list[str] | str = req.compact_frame_id
        what = "compact_frame_id"
    else:
        raw, frames = poses_to_pq(req.goals)
        raw = raw.reshape(N, K, 7)
        what = "goal header.frame_id"
    pq, ok, reason = check_poses(raw, position_only=req.position_only)
    if N == 1 and K == 1 and ONE_GOAL_PATH:
        return _compute_ik_one(ctx, req, resp, robot, tips, raw, pq, bool(ok[0, 0]),
                               int(reason[0, 0]), frames, what, seed, solver, cfg, weights,
                               group)
    pq = _to_base(robot, pq, frames, seed, what)
    ok_p = ok.all(axis=1)
    messages: dict[int, str] = {}
    for p in np.nonzero(~ok_p)[0][:100]:
        k = int(np.nonzero(~ok[p])[0][0])
        messages[int(p)] = f"tip {tips[k]!r}: {describe_bad_pose(raw[p, k], int(reason[p, k]))}"

    q = np.tile(seed, (N, 1))
    status = np.full(N, codes.INVALID_GOAL, dtype=np.int32)
    pe = np.full(N, np.nan)
    re = np.full(N, np.nan)
    iters = np.zeros(N, dtype=np.uint32)
    solve_time = 0.0
    idx = np.nonzero(ok_p)[0]
    if idx.size:
        targets = pq if idx.size == N else pq[idx]
        # (one goal for one tip: solve_pose answers it with a prepared ChainSolver)
        res = api.solve_pose(model, ctx.xp.asarray(targets), tips=tips, weights=weights,
                                 seeds=seed, config=cfg, solver=solver,
                                 should_stop=ctx.should_stop, group=group)
        q[idx] = to_numpy(res.q)
        status[idx] = np.asarray(res.status, dtype=np.int32)
        pe[idx] = res.position_error
        re[idx] = res.orientation_error
        iters[idx] = np.asarray(res.iterations).astype(np.uint32)
        solve_time = res.solve_time
        for j in np.nonzero(~np.asarray(res.success))[0][:100]:
            messages[int(idx[j])] = res.messages[j]

    _fill_solutions(robot, req, resp, q)
    resp.status = i32_array(status)
    resp.position_errors = f64_array(pe)
    resp.orientation_errors = f64_array(re)
    resp.iterations = u32_array(iters)
    code = overall_code(status)
    resp.error_code.val = code
    resp.message = _summary(status, messages)
    return IKOutcome(robot=robot, tips=tips, targets=pq, q=q, status=status, code=code,
                     solve_time=solve_time)


#: One goal for one tip (what MoveIt and most clients send) takes :func:`_compute_ik_one`: the
#: same answer as the batch code with a few Python scalars instead of a dozen small arrays
#: (about half of a one-goal request's handling time). False sends it the batch way (tests).
ONE_GOAL_PATH = True


def _compute_ik_one(ctx: Context, req, resp, robot: LoadedRobot, tips: list[str], raw, pq,
                    ok: bool, reason: int, frames, what: str, seed, solver: str, cfg, weights,
                    group) -> IKOutcome:
    """:func:`compute_ik` of one goal (raw and checked ``pq`` (1, 1, 7)) for one tip."""
    pq = _to_base(robot, pq, frames, seed, what)
    messages: dict[int, str] = {}
    solve_time = 0.0
    if ok:
        res = api.solve_pose(robot.model, ctx.xp.asarray(pq), tips=tips, weights=weights,
                                 seeds=seed, config=cfg, solver=solver,
                                 should_stop=ctx.should_stop, group=group)
        q = np.asarray(to_numpy(res.q), dtype=np.float64).reshape(1, -1)
        status = int(res.status[0])
        pe, re = float(res.position_error[0]), float(res.orientation_error[0])
        iters = int(res.iterations[0])
        solve_time = res.solve_time
        if not bool(res.success[0]):
            messages[0] = res.messages[0]
    else:
        q = seed[None].copy()
        status, pe, re, iters = codes.INVALID_GOAL, math.nan, math.nan, 0
        messages[0] = f"tip {tips[0]!r}: {describe_bad_pose(raw[0, 0], reason)}"
    _fill_solutions(robot, req, resp, q)
    resp.status = array.array("i", (status,))
    resp.position_errors = array.array("d", (pe,))
    resp.orientation_errors = array.array("d", (re,))
    resp.iterations = array.array("I", (iters,))
    st = np.array([status], dtype=np.int32)
    code = codes.SUCCESS if status == codes.SUCCESS else overall_code(st)
    resp.error_code.val = code
    resp.message = "" if status == codes.SUCCESS else _summary(st, messages)
    return IKOutcome(robot=robot, tips=tips, targets=pq, q=q, status=st, code=code,
                     solve_time=solve_time)


# ---------------------------------------------------------------------- ComputeFK
def compute_fk(ctx: Context, req, resp) -> int:
    """Fills the response; returns the number of poses computed."""
    robot = ctx.require_robot()
    model = robot.model
    links = list(req.link_names) or [robot.default_tip]
    for name in links:
        robot.check_link(name, "link")
    frame = req.frame_id
    L = len(links)
    n_friendly = len(req.states)
    names = list(req.joint_names)
    vals = as_f64(req.compact_positions)
    if n_friendly and (names or vals.size):
        raise RequestError(codes.INVALID_REQUEST,
                           "both `states` and `joint_names`/`compact_positions` are filled; use "
                           "exactly one form")
    if not n_friendly and not names and not vals.size:
        raise RequestError(codes.INVALID_REQUEST,
                           "no joint states given; fill `states` or `joint_names` + "
                           "`compact_positions`")
    if n_friendly:
        M = n_friendly
    else:
        if not names or vals.size % len(names):
            raise RequestError(codes.INVALID_REQUEST,
                               f"compact_positions has {vals.size} values for {len(names)} "
                               "joint_names; give M * len(joint_names) values (state-major)")
        M = vals.size // len(names)
        if M == 0:
            raise RequestError(codes.INVALID_REQUEST,
                               "compact form with joint_names but no compact_positions; give at "
                               "least one state")
    if M * L > ctx.settings.max_batch:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{M} states x {L} links = {M * L} poses exceed the node's max_batch = "
                           f"{ctx.settings.max_batch}; split the request")
    # joints a state leaves out: 0 clamped into the limits (ros2_ik's ComputeFK), or the
    # current state (MoveIt's GetPositionFK: move_group's current state, overwritten)
    lenient = getattr(req, "use_current_state", False)
    base = ctx.current_q(robot) if lenient else robot.zero_q
    if n_friendly:
        Q = np.empty((M, model.nq))
        for i, js in enumerate(req.states):
            Q[i] = robot.apply_joint_values(base, list(js.name), as_f64(js.position),
                                            what=f"states[{i}]", strict=True, clip=False,
                                            ignore_unknown=lenient)
    else:
        Q = np.tile(robot.zero_q, (M, 1))
        vals = vals.reshape(M, len(names))
        # Validate the names once (mimic joints are ignored), then assign whole columns.
        robot.apply_joint_values(robot.zero_q, names, np.zeros(len(names)), what="joint_names",
                                 strict=True, clip=False)
        cols = [(j, robot.q_index[n]) for j, n in enumerate(names) if n in robot.q_index]
        if cols:
            src, dst = zip(*cols)
            Q[:, list(dst)] = vals[:, list(src)]
        with np.errstate(invalid="ignore"):
            bad = ~np.all(np.isfinite(Q) & (np.abs(Q) <= MAX_VALUE), axis=1)
        if bad.any():
            m = int(np.nonzero(bad)[0][0])
            raise RequestError(codes.INVALID_ROBOT_STATE,
                               f"compact_positions of state {m} contain NaN, infinity or a value "
                               f"beyond +-{MAX_VALUE:g}; give finite joint values in metres or "
                               "radians")
    if frame not in ("", robot.base):
        robot.frame_transforms([frame], robot.zero_q, what="frame_id")  # validates the name
        T = fk_frames(model, Q, links + [frame])
        T = pose_inverse(T[:, -1:]) @ T[:, :-1]
    else:
        T = fk_frames(model, Q, links)
    pq = to_numpy(pose_to_pq(T)).reshape(M * L, 7)
    if n_friendly:
        resp.poses = pq_to_pose_stamped(pq, frame or robot.base)
    else:
        resp.compact_poses = f64_array(pq)
    resp.error_code.val = codes.SUCCESS
    resp.message = ""
    return M * L


# ---------------------------------------------------------------------- ComputeJacobian
def compute_jacobian(ctx: Context, req, resp) -> None:
    robot = ctx.require_robot()
    link = robot.check_link(req.link_name or robot.default_tip, "link_name")
    ref = req.reference_link
    if ref == robot.base:
        ref = ""
    if ref:
        robot.check_link(ref, "reference_link")
    ex = req.expressed_in or "world"
    if ex not in ("world", "local"):
        raise RequestError(codes.INVALID_REQUEST,
                           f"expressed_in {req.expressed_in!r} is invalid; use 'world' (the axes "
                           "of reference_link, or of the base link) or 'local' (the axes of "
                           "link_name)")
    core_ex = ex if not ref else ("reference" if ex == "world" else "local")
    q = robot.apply_joint_values(robot.zero_q, list(req.state.name), as_f64(req.state.position),
                                 what="state", strict=True, clip=False)
    J = to_numpy(jacobian(robot.model, q, link, reference=ref or None, expressed_in=core_ex,
                          method="numerical" if req.numerical else "analytic"))[0]
    resp.joint_names = list(robot.jacobian_columns)
    resp.rows = int(J.shape[0])
    resp.cols = int(J.shape[1])
    resp.jacobian = f64_array(J)
    resp.error_code.val = codes.SUCCESS
    resp.message = ""


# ---------------------------------------------------------------------- TrajectorySeed action
def trajectory_seed_goal(ctx: Context, goal, result, *, progress=None) -> dict:
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
    solver = _solver(goal.solver, s)
    cfg = _config(s, position_tolerance=goal.position_tolerance,
                  orientation_tolerance=goal.orientation_tolerance, timeout=goal.timeout,
                  num_seeds=goal.num_seeds, solve_mode="distance")
    seed = ctx.seed_q(robot, goal.seed, "seed")
    raw, frames = poses_to_pq(goal.keyframes)
    pq, ok, reason = check_poses(raw)
    if not ok.all():
        k = int(np.nonzero(~ok)[0][0])
        raise RequestError(codes.INVALID_GOAL,
                           f"keyframe {k}: {describe_bad_pose(raw[k], int(reason[k]))}")
    pq = _to_base(robot, pq, frames, seed, "keyframe header.frame_id")

    r = api.trajectory_seed(model, pq, nidx, tip=tip, mode=mode, seed=seed, config=cfg,
                                solver=solver, should_stop=ctx.should_stop, progress=progress)
    status = np.asarray(r.status, dtype=np.int32)
    full = robot.full_q(np.asarray(r.q))
    _fill_trajectory(result.trajectory, robot.out_names, full, dt)
    result.node_status = i32_array(status)
    result.position_errors = f64_array(r.position_error)
    result.orientation_errors = f64_array(r.orientation_error)
    result.max_joint_jump = float(r.max_joint_jump)
    code = codes.PREEMPTED if r.cancelled else overall_code(status)
    result.error_code.val = code
    msgs = {i: m for i, m in enumerate(r.messages) if m and status[i] != codes.SUCCESS}
    text = _summary(status, msgs, what="node")
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

