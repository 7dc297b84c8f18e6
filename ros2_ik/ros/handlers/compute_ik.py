"""``~/compute_ik`` (ros2_ik_interfaces/srv/ComputeIK): batched IK for one or several tips.

Goals come as PoseStamped messages (one per problem and tip, any frame of the model) or as a
compact array (N*K*7 values in ``compact_frame_id``); the seed is mid-range, overwritten by
the latest joint_states, then by the request's ``seed``; options the request leaves at 0 or
'' are the node's parameters. Every problem is answered (status, errors, iterations), every
success verified by FK against the tolerances the request asked for.

The objectives beyond the pose goal are terms of the solve (:mod:`ros2_ik.ik.terms`): a rest
posture (``rest_posture``, ``posture_weight``: :class:`~ros2_ik.ik.terms.Posture`), a step
bound (``max_joint_step``, ``step_time``: :class:`~ros2_ik.ik.terms.StepBound`), goal sets
(``goals_per_problem``: :class:`~ros2_ik.ik.terms.GoalSet`, the answer's ``goal_indices``),
and several ranked answers (``max_solutions``, ``min_solution_distance``:
:meth:`ros2_ik.IKSolver.solve_k_best`, ``solution_counts`` and ``more_solutions``).
"""

from __future__ import annotations

import array
import math

import numpy as np
from ros2_ik_interfaces.srv import ComputeIK

from ... import api
from ...backend import to_numpy
from ...ik.terms import GoalSet, Posture, StepBound
from ...ik.terms.goalset import MAX_GOALS
from ...ik.terms.step import velocity_steps
from ...api.kbest import MAX_K
from .. import codes
from ..codes import RequestError
from ..conversions import (as_f64, check_poses, describe_bad_pose, f64_array, i32_array,
                           joint_states, poses_to_pq, u32_array)
from ..request import (Context, IKOutcome, collisions_flag, config, fill_solutions,
                       overall_code, solver_name,
                       summary, to_base, weights)
from ..robot import LoadedRobot

__all__ = ["handle", "register", "small", "ONE_GOAL_PATH", "INLINE_SEEDS", "INLINE_ITERATIONS"]

#: answered on the executor thread: a one-goal IK for the default tip with at most this many
#: seeds x iterations (the compiled solve of an unreachable goal then stays within a few
#: milliseconds); anything else in the services' pool
INLINE_SEEDS = 64
INLINE_ITERATIONS = 200


def register(w) -> None:
    """``~/compute_ik`` on the node of ``w`` (a :class:`~ros2_ik.ros.wiring.Wiring`)."""
    def answer(ctx, req, resp):
        resp, out = w.serve("compute_ik", handle, ctx, req, resp, ComputeIK.Response)
        w.markers(out)
        return resp

    w.service(ComputeIK, "~/compute_ik", answer, inline=lambda req: small(w, req))


def small(w, req) -> bool:
    """A one-goal request for the default tip with few seeds: it takes well under a
    millisecond on the host backend, less than a hand-off to a worker costs."""
    s = w.settings()
    robot = w.robot()
    avoid = {0: s.collision_enabled, 1: True}.get(int(getattr(req, "collisions", 0)), False)
    return (robot is not None and len(req.goals) + len(req.compact_goals) // 7 <= 1
            # (a collision solver not yet built is a compiler run: a worker's job)
            and robot.compiled_ready and (not avoid or robot.collision_prepared(s))
            and (not req.tip_links or list(req.tip_links) == [robot.default_tip])
            and not getattr(req, "group_name", "") and (req.solver or s.solver) == "dls"
            and (req.num_seeds or s.num_seeds) <= INLINE_SEEDS
            and s.max_iterations <= INLINE_ITERATIONS)


#: [s] a wait in the node's queues this long is said in a TIMED_OUT answer's message
SAY_WAIT = 1e-3


def handle(ctx: Context, req, resp) -> IKOutcome:
    """Answer a ComputeIK request into ``resp`` (see the module docstring). Its timeout counts
    from the request's arrival (``ctx.arrived``): a TIMED_OUT answer says how long it waited in
    the node's queues before its handling began, when it did."""
    queued = ctx.waited()
    out = _handle(ctx, req, resp)
    if out.code == codes.TIMED_OUT and queued >= SAY_WAIT:
        resp.message += (f"; the request waited {1e3 * queued:.1f} ms in the node's queues "
                         "before its handling began (its timeout counts from its arrival: a "
                         "busy node; raise timeout, or call less often)")
    return out


def _handle(ctx: Context, req, resp) -> IKOutcome:
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
    G, k_best, min_dist = _shape_options(req)
    n_friendly, n_compact = len(req.goals), len(req.compact_goals)
    if n_friendly and n_compact:
        raise RequestError(codes.INVALID_REQUEST,
                           "both `goals` and `compact_goals` are filled; use exactly one form")
    if not n_friendly and not n_compact:
        raise RequestError(codes.INVALID_REQUEST,
                           "empty batch: no goals given; fill `goals` (one PoseStamped per "
                           "problem and tip) or `compact_goals` (N*K*7 values)")
    per = "" if G == 1 else f" x {G} goals_per_problem"
    if n_compact:
        if n_compact % (7 * K * G):
            raise RequestError(codes.INVALID_REQUEST,
                               f"compact_goals has {n_compact} values, not a multiple of 7 x "
                               f"{K} tip(s){per}; give N*{G * K}*7 values (x y z qx qy qz qw "
                               "per goal)")
        N = n_compact // (7 * K * G)
    else:
        if n_friendly % (K * G):
            raise RequestError(codes.INVALID_REQUEST,
                               f"{n_friendly} goals are not a multiple of the {K} tip links "
                               f"{tips}{per}; give one goal per problem{', candidate' * (G > 1)}"
                               f" and tip (index {'(p*G + g)*K' if G > 1 else 'p*K'} + k)")
        N = n_friendly // (K * G)
    if N > s.max_batch:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{N} problems exceed the node's max_batch = {s.max_batch}; split the "
                           "request into batches of at most max_batch problems (or raise the "
                           "max_batch parameter)")
    solver = solver_name(req.solver, s)
    cfg = config(s, position_tolerance=req.position_tolerance,
                  orientation_tolerance=req.orientation_tolerance, timeout=req.timeout,
                  num_seeds=req.num_seeds, solve_mode=req.solve_mode, rng_seed=req.rng_seed,
                  avoid_collisions=collisions_flag(getattr(req, "collisions", 0)))
    collision, world = ctx.collisions(robot, cfg)
    w = weights(req.axis_weights, req.position_only)
    seed = ctx.seed_q(robot, req.seed, "seed",
                      ignore_unknown=getattr(req, "ignore_unknown_joints", False))
    terms, term_args = _terms(ctx, req, robot, seed, G)

    if n_compact:
        raw = as_f64(req.compact_goals).reshape(N * G, K, 7)
        frames: list[str] | str = req.compact_frame_id
        what = "compact_frame_id"
    else:
        raw, frames = poses_to_pq(req.goals)
        raw = raw.reshape(N * G, K, 7)
        what = "goal header.frame_id"
    pq, ok, reason = check_poses(raw, position_only=req.position_only)
    if N == 1 and K == 1 and G == 1 and k_best == 1 and not terms and ONE_GOAL_PATH:
        return _one(ctx, req, resp, robot, tips, raw, pq, bool(ok[0, 0]), int(reason[0, 0]),
                    frames, what, seed, solver, cfg, w, group, collision, world)
    pq = to_base(robot, pq, frames, seed, what).reshape(N, G, K, 7)
    ok, raw, reason = ok.reshape(N, G, K), raw.reshape(N, G, K, 7), reason.reshape(N, G, K)
    ok_p = ok.all(axis=(1, 2))
    messages: dict[int, str] = {}
    for p in np.nonzero(~ok_p)[0][:100]:
        g, k = (int(i[0]) for i in np.nonzero(~ok[p]))
        which = f"candidate {g}, " if G > 1 else ""
        messages[int(p)] = (f"{which}tip {tips[k]!r}: "
                            f"{describe_bad_pose(raw[p, g, k], int(reason[p, g, k]))}")

    q = np.tile(seed, (N, 1))
    status = np.full(N, codes.INVALID_GOAL, dtype=np.int32)
    pe = np.full(N, np.nan)
    re = np.full(N, np.nan)
    iters = np.zeros(N, dtype=np.uint32)
    clear = np.full(N, np.nan) if collision is not None else None
    goal_index = np.full(N, -1, dtype=np.int32)
    counts = np.zeros(N, dtype=np.uint32)
    more: list = []
    solve_time = 0.0
    idx = np.nonzero(ok_p)[0]
    if idx.size:
        targets = pq if idx.size == N else pq[idx]
        targets = targets[:, 0] if G == 1 else targets
        xp = ctx.xp if k_best == 1 else np
        # the timeout counts from the request's arrival (its wait in the node's queues in it)
        s_ik, _, t_call = api.pose_solver(model, tips=tips, config=cfg, solver=solver,
                                       should_stop=ctx.should_stop, group=group, xp=xp,
                                       collision=collision, terms=terms,
                                       start_time=ctx.arrived)
        if k_best == 1:
            res = s_ik.solve(xp.asarray(targets), seeds=seed, weights=w,
                             should_stop=ctx.should_stop, timeout=cfg.timeout,
                             start_time=t_call, world=world, **term_args)
        else:
            kb = s_ik.solve_k_best(targets, k_best, min_distance=min_dist, seeds=seed,
                                   weights=w, should_stop=ctx.should_stop,
                                   timeout=cfg.timeout, world=world, start_time=t_call,
                                   distinct_branches=bool(getattr(req, "distinct_branches",
                                                                  False)),
                                   **term_args)
            res = kb.best
            counts[idx] = kb.count.astype(np.uint32)
            more = [kb.q[j, 1:int(kb.count[j])] for j in range(idx.size)]
        if res.goal_index is not None:
            goal_index[idx] = np.asarray(res.goal_index, dtype=np.int32)
        q[idx] = to_numpy(res.q)
        if clear is not None and res.clearance is not None:
            clear[idx] = res.clearance
        status[idx] = np.asarray(res.status, dtype=np.int32)
        pe[idx] = res.position_error
        re[idx] = res.orientation_error
        iters[idx] = np.asarray(res.iterations).astype(np.uint32)
        solve_time = res.solve_time
        if hasattr(resp, "backend"):
            resp.backend = res.backend
        for j in np.nonzero(~np.asarray(res.success))[0][:100]:
            messages[int(idx[j])] = res.messages[j]

    fill_solutions(robot, req, resp, q)
    if G > 1 and hasattr(resp, "goal_indices"):
        resp.goal_indices = i32_array(goal_index)
    if k_best > 1 and hasattr(resp, "solution_counts"):
        resp.solution_counts = u32_array(counts)
        rest = np.concatenate(more) if more else np.zeros((0, model.nq))
        full = robot.full_q(rest)
        if req.compact_response:
            resp.compact_more_solutions = f64_array(full)
        else:
            resp.more_solutions = joint_states(robot.out_names, full)
    resp.status = i32_array(status)
    resp.position_errors = f64_array(pe)
    resp.orientation_errors = f64_array(re)
    resp.iterations = u32_array(iters)
    if clear is not None and hasattr(resp, "clearances"):
        resp.clearances = f64_array(clear)
        resp.world_version = int(world.version)
    code = overall_code(status)
    resp.error_code.val = code
    resp.message = summary(status, messages)
    shown = pq[np.arange(N), np.maximum(goal_index, 0)]  # (the candidate reached, else the first)
    return IKOutcome(robot=robot, tips=tips, targets=shown, q=q, status=status, code=code,
                     solve_time=solve_time, clearance=clear, world=world, collision=collision)


def _shape_options(req) -> tuple:
    """The request's goals per problem and answers per problem (checked), and the least
    distance between answers."""
    G = int(getattr(req, "goals_per_problem", 0)) or 1
    k = int(getattr(req, "max_solutions", 0)) or 1
    d = float(getattr(req, "min_solution_distance", 0.0)) or 0.1
    if G > MAX_GOALS:
        raise RequestError(codes.INVALID_REQUEST, f"goals_per_problem = {G} exceeds "
                           f"{MAX_GOALS}; give at most {MAX_GOALS} candidates a problem")
    if k > MAX_K:
        raise RequestError(codes.INVALID_REQUEST, f"max_solutions = {k} exceeds {MAX_K}; ask "
                           f"for at most {MAX_K} answers a problem")
    if not math.isfinite(d) or d < 0:
        raise RequestError(codes.INVALID_REQUEST, f"min_solution_distance = {d} must be a "
                           "finite number >= 0 [rad or m] (0: 0.1)")
    return G, k, d


def _terms(ctx: Context, req, robot: LoadedRobot, seed, G: int) -> tuple:
    """The terms a request asks for beyond the pose goal, and what they take per call."""
    terms: list = []
    args: dict = {}
    if G > 1:  # (solvers for 2, 4, 8 ... candidates: a request's count is padded up)
        terms.append(GoalSet(min(MAX_GOALS, 1 << (G - 1).bit_length())))
    rest = getattr(req, "rest_posture", None)
    if rest is not None and (len(rest.name) or len(rest.position)):
        weight = float(getattr(req, "posture_weight", 0.0)) or 1.0
        if not math.isfinite(weight) or weight <= 0:
            raise RequestError(codes.INVALID_REQUEST, f"posture_weight = {weight} must be a "
                               "finite number > 0 (0: 1)")
        terms.append(Posture())
        args.update(rest=robot.apply_joint_values(seed.copy(), list(rest.name),
                                                  as_f64(rest.position), what="rest_posture",
                                                  strict=True, clip=True),
                    posture_weight=weight)
    step, dt = (float(getattr(req, n, 0.0)) for n in ("max_joint_step", "step_time"))
    for name, v in (("max_joint_step", step), ("step_time", dt)):
        if not math.isfinite(v) or v < 0:
            raise RequestError(codes.INVALID_REQUEST, f"{name} = {v} must be a finite number "
                               ">= 0 (0: none)")
    if step > 0 or dt > 0:
        model = robot.model
        bound = np.full(model.nq, step if step > 0 else np.inf)
        if dt > 0:
            bound = np.minimum(bound, velocity_steps(model, dt, "step_time"))
        terms.append(StepBound(np.inf))
        args["max_joint_step"] = bound
    return terms, args


#: One goal for one tip (what MoveIt and most clients send) takes :func:`_one`: the
#: same answer as the batch code with a few Python scalars instead of a dozen small arrays
#: (about half of a one-goal request's handling time). False sends it the batch way (tests).
ONE_GOAL_PATH = True


#: prepared one-goal solvers kept per model (tip, options and weights of the requests seen)
CHAIN_SOLVERS = 64


def _chain_solver(robot: LoadedRobot, tip: str, cfg, w):
    """The kept :class:`ros2_ik.api.ChainSolver` of a one-goal request answered on the
    executor thread (no ``should_stop``: such a request is bounded by :func:`small`), or None
    where it would not run compiled."""
    def build():
        cs = api.ChainSolver(robot.model, tip, cfg, weights=w)
        return cs if cs.compiled or cs.building else None

    def stale(cs) -> bool:  # built in the background meanwhile: the compiled one now
        return cs is not None and cs.building is False and not cs.compiled

    one = robot.model.memo("ros.compute_ik.one_goal", (tip, cfg, w), build,
                           max_keys=CHAIN_SOLVERS, stale=stale)
    return one if one is not None and one.compiled else None


def _one(ctx: Context, req, resp, robot: LoadedRobot, tips: list[str], raw, pq, ok: bool,
         reason: int, frames, what: str, seed, solver: str, cfg, w, group, collision=None,
         world=None) -> IKOutcome:
    """:func:`handle` of one goal (raw and checked ``pq`` (1, 1, 7)) for one tip (with
    ``collision`` and ``world``: collision-aware)."""
    pq = to_base(robot, pq, frames, seed, what)
    messages: dict[int, str] = {}
    solve_time = 0.0
    clear = math.nan
    if ok:
        one = _chain_solver(robot, tips[0], cfg, w) if (
            collision is None and group is None and solver == "dls" and ctx.xp is np
            and ctx.inline) else None
        # (the timeout counts from the request's arrival: its wait in the queues in it)
        if one is not None:  # a prepared one-goal solver: the answer solve_pose gives (tested)
            res = one.solve(pq[0, 0], seed, start_time=ctx.arrived)
        else:
            res = api.solve_pose(robot.model, ctx.xp.asarray(pq), tips=tips, weights=w,
                                 seeds=seed, config=cfg, solver=solver,
                                 should_stop=ctx.should_stop, group=group, world=world,
                                 collision=collision, start_time=ctx.arrived)
            if collision is not None and res.clearance is not None:
                clear = float(res.clearance[0])
        q = np.asarray(to_numpy(res.q), dtype=np.float64).reshape(1, -1)
        status = int(res.status[0])
        pe, re = float(res.position_error[0]), float(res.orientation_error[0])
        iters = int(res.iterations[0])
        solve_time = res.solve_time
        if hasattr(resp, "backend"):
            resp.backend = res.backend
        if not bool(res.success[0]):
            messages[0] = res.messages[0]
    else:
        q = seed[None].copy()
        status, pe, re, iters = codes.INVALID_GOAL, math.nan, math.nan, 0
        messages[0] = f"tip {tips[0]!r}: {describe_bad_pose(raw[0, 0], reason)}"
    fill_solutions(robot, req, resp, q)
    resp.status = array.array("i", (status,))
    resp.position_errors = array.array("d", (pe,))
    resp.orientation_errors = array.array("d", (re,))
    resp.iterations = array.array("I", (iters,))
    if collision is not None and hasattr(resp, "clearances"):
        resp.clearances = array.array("d", (clear,))
        resp.world_version = int(world.version)
    st = np.array([status], dtype=np.int32)
    code = codes.SUCCESS if status == codes.SUCCESS else overall_code(st)
    resp.error_code.val = code
    resp.message = "" if status == codes.SUCCESS else summary(st, messages)
    return IKOutcome(robot=robot, tips=tips, targets=pq, q=q, status=st, code=code,
                     solve_time=solve_time,
                     clearance=None if collision is None else np.array([clear]),
                     world=world, collision=collision)
