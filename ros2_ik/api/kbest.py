"""Several distinct answers a problem, ranked (IKFast's "all solutions", cuRobo's top-k).

:meth:`ros2_ik.IKSolver.solve_k_best` solves every problem from ``S = max(num_seeds, 2 k)``
seeds, each seed a problem of its own (the same seeds a solve takes: the problem's own, then
the shared restarts), so that every answer is verified as any answer is: by FK against the
tolerances and the limits, and, with collision avoidance, by the exact distances (a seed's
answer that collides is not kept). The successful answers are ranked by the solve mode's
cost (speed: the fewest iterations; distance: the nearest the problem's seed, wrap-aware
L-infinity; manipulability: the largest), and kept in that order where each is at least
``min_distance`` (wrap-aware L-infinity: a continuous joint modulo 2 pi) from every answer
kept before it, up to ``k``. With ``distinct_branches`` the distance takes every angle modulo
2 pi, a limited revolute joint's too (:func:`ros2_ik.ik.seeds.branch_distance`): answers that
differ only by whole turns of joints place every link alike, and count as one configuration
branch, so that ``k = 8`` on a six-joint arm with +-2 pi joints (a UR) returns its shoulder /
elbow / wrist branches rather than copies of one turned by 2 pi; each problem then takes
``max(num_seeds, BRANCH_SEEDS_PER_ANSWER k)`` seeds, since the copies use up seeds. The
terms' arguments that default to the problem's seed (a posture's rest, a step bound's origin)
keep that default.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..ik.config import IKResult, SolveMode
from ..ik.seeds import (branch_distance, expand_seeds, finalize_q, movable_coordinates,
                        seed_distance)
from ..kinematics.jacobian import jacobians_all
from ..validate import check_number, describe

__all__ = ["KBestResult", "solve_k_best", "MAX_K", "BRANCH_SEEDS_PER_ANSWER"]

#: the most answers a problem may ask for
MAX_K = 64
#: seeds a problem per answer asked for with ``distinct_branches`` (2 without)
BRANCH_SEEDS_PER_ANSWER = 8


@dataclass
class KBestResult:
    """Up to ``k`` distinct answers for each of P problems, best first.

    ``q`` (P, k, nq), ``position_error`` / ``orientation_error`` / ``cost`` (P, k) (NaN past
    a problem's ``count``); ``cost`` the rank's key (iterations, distance [rad or m] or
    manipulability); ``clearance`` (P, k) with collision avoidance, ``goal_index`` (P, k)
    with a goal set (else None); ``best`` the :class:`IKResult` of the first answers (a
    problem with none: the attempt nearest its goal, with its status and message)."""

    q: np.ndarray
    count: np.ndarray
    position_error: np.ndarray
    orientation_error: np.ndarray
    cost: np.ndarray
    best: IKResult
    clearance: np.ndarray | None = None
    goal_index: np.ndarray | None = None
    solve_time: float = 0.0
    backend: str = ""

    def __len__(self):
        return int(self.count.shape[0])


def check_k(k, min_distance) -> tuple:
    """``k`` (a whole number in [1, MAX_K]) and ``min_distance`` (>= 0) checked."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise InvalidInputError(f"k must be a whole number in [1, {MAX_K}], got {describe(k)}")
    d = check_number(min_distance, "min_distance", low=0.0, high=1e6)
    return int(k), float(d)


def solve_k_best(solver, targets, k: int, *, min_distance: float = 0.1, seeds=None,
                 weights=(1, 1, 1, 1, 1, 1), should_stop=None, timeout=..., world=None,
                 start_time: float | None = None, distinct_branches: bool = False,
                 **term_args) -> KBestResult:
    """See :meth:`ros2_ik.IKSolver.solve_k_best`."""
    t0 = time.perf_counter() if start_time is None else float(start_time)
    k, min_distance = check_k(k, min_distance)
    m, cfg = solver.model, solver.config
    if solver.xp is not np:
        raise InvalidInputError("solve_k_best takes NumPy arrays (a GPU solver answers one "
                                "answer a problem); use a NumPy solver")
    xp = np
    t = solver.targets_of(targets)
    P = t.shape[0]
    if not isinstance(distinct_branches, (bool, np.bool_)):
        raise InvalidInputError(f"distinct_branches must be True or False, got "
                                f"{describe(distinct_branches)}")
    S = max(int(cfg.num_seeds), (BRANCH_SEEDS_PER_ANSWER if distinct_branches else 2) * k)
    # the seeds a solve takes, and the terms' arguments with their defaults (the seed) settled
    seeds_p = solver.seeds_of(seeds, P)
    calls = solver.term_calls(P, seeds_p, term_args, xp, t, weights)
    args = {}
    for term, call in calls:
        args.update({a: np.repeat(np.asarray(v), S, axis=0)
                     for a, v in term.arguments_of(call).items()})
    rows = expand_seeds(m, seeds_p, S, cfg.rng_seed, xp, movable_coordinates(m, solver.tips))
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim >= 2 and w.shape[0] == P:
        w = np.repeat(w, S, axis=0)
    one = solver.variant(dataclasses.replace(cfg, num_seeds=1))
    r = one.solve(np.repeat(t, S, axis=0), seeds=rows, weights=w, should_stop=should_stop,
                  timeout=timeout, start_time=t0, world=world, **args)
    apart = branch_distance if distinct_branches else seed_distance
    return _ranked(m, cfg, solver.tips, r, rows, np.repeat(seeds_p, S, axis=0), P, S, k,
                   min_distance, t0, apart)


def _ranked(m, cfg, tips, r: IKResult, rows, seed_rep, P: int, S: int, k: int,
            min_distance: float, t0: float, apart=seed_distance) -> KBestResult:
    """The answers of the P x S one-seed problems ``r`` grouped, ranked and thinned."""
    q = finalize_q(m, np.asarray(r.q), seed_rep)  # continuous joints near the problem's seed
    if cfg.solve_mode is SolveMode.DISTANCE:
        key = np.asarray(seed_distance(m, q, seed_rep))
    elif cfg.solve_mode is SolveMode.MANIPULABILITY:
        J, _ = jacobians_all(m, q, [tips[0]])
        Jm = J.reshape(J.shape[0], -1, J.shape[-1])
        key = -np.sqrt(np.clip(np.linalg.det(Jm @ np.swapaxes(Jm, 1, 2)), 0, None))
    else:  # speed: the fewest iterations, then the lowest seed
        key = np.asarray(r.iterations, dtype=float) * S + np.tile(np.arange(S), P)
    rank_cost = (np.asarray(r.iterations, dtype=float) if cfg.solve_mode is SolveMode.SPEED
                 else np.abs(key))  # (iterations, distance or manipulability)
    ok = np.asarray(r.success).reshape(P, S)
    key = np.where(ok, key.reshape(P, S), np.inf)
    nq = m.nq
    out_q = np.full((P, k, nq), np.nan)
    pe, re, cost = (np.full((P, k), np.nan) for _ in range(3))
    clr = None if r.clearance is None else np.full((P, k), np.nan)
    gi = None if r.goal_index is None else np.full((P, k), -1, dtype=np.int64)
    count = np.zeros(P, dtype=np.int64)
    first = np.zeros(P, dtype=np.int64)
    err = (np.asarray(r.position_error) / cfg.position_tolerance
           + np.asarray(r.orientation_error) / cfg.orientation_tolerance).reshape(P, S)
    qr = q.reshape(P, S, nq)
    for p in range(P):
        order = np.argsort(key[p], kind="stable")
        kept: list = []
        for j in order:
            if not ok[p, j] or len(kept) >= k:
                break
            if kept and float(np.min(apart(m, qr[p, kept], np.broadcast_to(
                    qr[p, j], (len(kept), nq))))) < min_distance:
                continue
            kept.append(int(j))
        first[p] = kept[0] if kept else int(np.nanargmin(np.where(np.isnan(err[p]), np.inf,
                                                                   err[p])))
        n = len(kept)
        count[p] = n
        idx = p * S + np.asarray(kept, dtype=np.int64)
        out_q[p, :n] = q[idx]
        pe[p, :n] = np.asarray(r.position_error)[idx]
        re[p, :n] = np.asarray(r.orientation_error)[idx]
        cost[p, :n] = rank_cost[p * S + np.asarray(kept, dtype=np.int64)]
        if clr is not None:
            clr[p, :n] = np.asarray(r.clearance)[idx]
        if gi is not None:
            gi[p, :n] = np.asarray(r.goal_index)[idx]
    best = r.take(np.arange(P) * S + first)
    best.q = q[np.arange(P) * S + first]
    best.seed_index = first
    best.solve_time = time.perf_counter() - t0
    return KBestResult(q=out_q, count=count, position_error=pe, orientation_error=re,
                       cost=cost, best=best, clearance=clr, goal_index=gi,
                       solve_time=time.perf_counter() - t0, backend=r.backend)
