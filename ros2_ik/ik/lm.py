"""Damped least squares / Levenberg-Marquardt IK, batched over problems x seeds.

Per row, with the stacked residual ``r`` and Jacobian ``J`` of all objectives (Buss, "Introduction
to Inverse Kinematics with Jacobian Transpose, Pseudoinverse and Damped Least Squares methods",
2004; Marquardt's diagonal scaling)::

    (J^T J + lambda (diag(J^T J) + E I + eps I)) dq = -J^T r,    E = 0.5 |r|^2

(the ``E I`` term: damping that scales with the error, Yamashita and Fukushima, "On the rate
of convergence of the Levenberg-Marquardt method", 2001; the damped least squares of Chan and
Lawrence and of Robotics Toolbox's ``ik_LM`` uses it alone).
``dq`` is applied with ``q (+) dq`` (frozen coordinates untouched), the result clipped to the hard
joint limits (a revolute joint stepping past the arc outside its limits goes around by 2 pi,
the same pose: :func:`.common.clip_to_limits`), and accepted if its cost ``E`` is below the
reference: in the row's first ``nonmonotone_iterations`` iterations the cost the row started
from (non-monotone acceptance, after Grippo, Lampariello and Lucidi, "A nonmonotone line search
technique for Newton's method", 1986, with a window as long as the phase: a step may raise the
cost on the way out of a shallow basin), afterwards the current cost (classic LM). An accepted
step shrinks lambda (``lambda_down``); otherwise lambda grows (``lambda_up``, capped at
``lambda_max``) and the row retries from the same point. A joint already at a limit that ``dq``
pushes further out (and not round to the far side of that arc) leaves the system, and ``dq`` is
solved again without it (active set).
A row stops when its goal errors meet the tolerances (converged; never touched again), at the
iteration cap, at the deadline, (``stall_iterations``) after that many slow iterations in a
row, or when a step is rejected and lambda cannot grow any more (at ``lambda_max``): the next
iteration would take the same step from the same point and be rejected again, for ever, so
stopping there changes no answer.

The limit excursion (``excursion_iterations``, ``excursion_stall``; :class:`.common.IKConfig`):
a row that may not be given up (a problem's last seed, or any seed without
``stall_iterations``) and that has stalled at a limit of a revolute joint with a range under
2 pi starts once more from its seed with the limits of its revolute joints lifted, so it can
cross the arc outside a joint's limits (Robotics Toolbox's ``ik_LM`` solves without limits
throughout and rejects an answer outside them). The answer of the excursion is kept if it
converges and every revolute joint, moved by whole turns, lies inside its limits; otherwise the
row goes back to where it stood and goes on inside the limits, monotone. The one compiled
source (:mod:`ros2_ik.backends.codegen`) spells the same steps for every compiled backend.
"""

from __future__ import annotations

import math
import time

import numpy as np


from ..backend import const, get_xp, to_numpy
from ..kinematics.fk import integrate
from ..model import Model
from .config import IKConfig
from .seeds import clip_to_limits, limited_revolute
from .residuals import constraints, evaluate, goal_errors

__all__ = ["lm_solve_rows", "fixed_columns"]


def fixed_columns(model: Model, movable):
    """Active Jacobian columns (indices into ``v_active``) of joints with no movable
    coordinate, or None when there are none."""
    if movable is None:
        return None
    mov = np.asarray(movable, dtype=bool)
    if mov.all():
        return None
    moving_links = {int(l) for l in np.asarray(model.q_joint)[mov]}
    cols = [c for c, v in enumerate(model.v_active) if int(model.v_joint[v]) not in moving_links]
    return np.array(cols, dtype=np.int64) if cols else None


def _active_set_step(H, g, dq, q, cols, qidx, lower, upper, around, xp, release=None):
    """Joints at a limit that the step pushes outward leave the system, unless they are
    revolute (``around``) and the step goes past the arc outside the limits (2 pi on, the value
    is inside: :func:`.common.clip_to_limits`); rows where that happens solve again without
    them (they do not move). One re-solve, as the compiled rows. Rows in ``release`` (N,) bool (the
    limit excursion) never block a revolute joint."""
    qc = q[:, qidx]
    d = dq[:, cols]
    lo, hi, ar = lower[qidx], upper[qidx], around[qidx]
    two_pi = 2 * math.pi
    push = (((d < 0) & (qc <= lo) & ~(ar & (qc + d + two_pi <= hi)))
            | ((d > 0) & (qc >= hi) & ~(ar & (qc + d - two_pi >= lo))))
    if release is not None:
        push = push & ~(release[:, None] & ar[None, :])
    rows = xp.any(push, axis=1)
    if xp is np:  # NumPy: re-solve only the rows that need it
        if not rows.any():
            return dq
        sel, H, g, push = rows, H[rows], g[rows], push[rows]
    else:  # an array module on a device: every row, masked (no host sync to find them)
        sel = None
    blocked = xp.zeros(g.shape, dtype=bool)
    blocked[:, cols] = push
    Hb = xp.where(blocked[:, :, None] | blocked[:, None, :], 0.0, H)
    Hb = Hb + blocked[:, :, None] * xp.eye(g.shape[1])
    gb = xp.where(blocked, 0.0, g)
    new = -xp.linalg.solve(Hb, gb[..., None])[..., 0]
    if sel is None:
        return xp.where(rows[:, None], new, dq)
    dq = dq.copy()
    dq[sel] = new
    return dq


def _turn_inside(q, lower, upper, around, xp):
    """Revolute joints (``around``) of rows q moved by whole turns to their limits' side (the
    same pose): (those rows, (N,) whether every such joint is then inside its limits)."""
    two_pi = 2 * math.pi
    lo = xp.where(around, lower, 0.0)
    hi = xp.where(around, upper, 0.0)
    q = xp.where(around & (q < lo), q + two_pi * xp.ceil((lo - q) / two_pi), q)
    q = xp.where(around & (q > hi), q - two_pi * xp.ceil((q - hi) / two_pi), q)
    return q, xp.all(~around | ((q >= lo) & (q <= hi)), axis=1)


def lm_solve_rows(model: Model, objectives, q0, seed_q, problem_idx, cfg: IKConfig, *,
                  deadline: float | None, active=None, first_per_problem: bool = False,
                  num_problems: int | None = None, should_stop=None, movable=None,
                  block_rows: int | None = None):
    """Run LM on rows q0 (N, nq). Returns (q, converged, iterations, pos_err, rot_err, timed_out).

    ``movable`` (nq,) bool (:func:`.common.movable_coordinates`; None: all): the Jacobian
    columns of the other coordinates are zeroed, so no objective (a posture regularizer
    included) moves them.

    ``active`` (N,) masks rows to solve; ``first_per_problem`` (speed mode) stops the rows of a
    problem after (in seed order) one that converged, the rows before it going on: the answer,
    the first converged seed in seed order, is the one the seeds run one after the other give.
    ``should_stop()`` is polled every iteration (cancellation); it and the deadline end the
    loop between iterations.

    ``block_rows``: rows evaluated together (None: all N). An iteration (and the first
    evaluation) runs block by block, the deadline and ``should_stop`` looked at between blocks,
    so that one step of a problem with many seeds (a thousand rows with collision terms take a
    tenth of a second) cannot carry the call far past its deadline; blocks without an active
    row are skipped. Rows are independent (``first_per_problem`` is decided at the top of an
    iteration for every block), so the blocks change no answer; a deadline in the middle of an
    iteration leaves the later blocks one iteration behind, and rows never evaluated (the
    deadline during the first evaluation) with infinite errors, not converged.
    """
    xp = get_xp(q0)
    N = q0.shape[0]
    va = const(xp, model.v_active)
    nva = model.nv_active
    q = clip_to_limits(model, q0)
    active = xp.ones(N, dtype=bool) if active is None else active.copy()
    fixed_cols = fixed_columns(model, movable)
    fixed_cols = None if fixed_cols is None else const(xp, fixed_cols)
    rows = N if not block_rows or block_rows >= N else int(block_rows)
    blocks = [slice(b, min(N, b + rows)) for b in range(0, N, rows)]
    whole = len(blocks) == 1
    timed_out = False

    def late() -> bool:
        """The deadline has passed or a stop was asked for (``timed_out`` set for the first)."""
        nonlocal timed_out
        if (deadline is not None and time.perf_counter() >= deadline) or (
                should_stop is not None and should_stop()):
            timed_out = deadline is not None and time.perf_counter() >= deadline
            return True
        return False

    if whole:
        r, J, cost, pe, re, cv = _evaluate(model, objectives, q, seed_q, problem_idx, fixed_cols)
    else:  # block by block; rows the deadline leaves unevaluated are not started
        parts = []
        for b, sl in enumerate(blocks):
            if b and late():
                break
            parts.append(_evaluate(model, objectives, q[sl], seed_q[sl], problem_idx[sl],
                                   fixed_cols))
        done = sum(int(part[0].shape[0]) for part in parts)
        r, J, cost, pe, re, cv = (xp.concatenate([part[i] for part in parts]) for i in range(6))
        if done < N:
            pad = N - done
            r = xp.concatenate([r, xp.zeros((pad,) + r.shape[1:], dtype=r.dtype)])
            J = xp.concatenate([J, xp.zeros((pad,) + J.shape[1:], dtype=J.dtype)])
            inf = xp.full(pad, np.inf)
            cost, pe, re = (xp.concatenate([a, inf]) for a in (cost, pe, re))
            cv = xp.concatenate([cv, -inf])
            active[done:] = False
    # converged: the goal errors within the tolerances and every constraint (the collision
    # objective's clearance) satisfied
    converged = (pe <= cfg.position_tolerance) & (re <= cfg.orientation_tolerance) & (cv >= 0)
    lim_cols = const(xp, model.tables.limited_columns)
    lim_q = const(xp, model.tables.limited_q)
    lower, upper = const(xp, model.lower), const(xp, model.upper)
    around = const(xp, limited_revolute(model))
    K = N // num_problems if num_problems else 1
    row_k = xp.arange(N) % K  # a row's seed index in its problem
    last_seed = row_k == K - 1
    # the limit excursion: phase 0 may start one, 1 in it, 2 not (any more); it0 is where a
    # row's non-monotone count starts, mono once it is back from an excursion
    narrow = np.asarray(limited_revolute(model)) & (model.upper - model.lower < 2 * math.pi)
    if movable is not None:  # (the compiled rows look at the joints they move)
        narrow = narrow & np.asarray(movable, dtype=bool)
    excursion = cfg.excursion_iterations > 0 and bool(narrow.any())
    narrow = const(xp, narrow)
    eye = xp.eye(nva)
    # every row's state (N, ...); an iteration reads and writes one block of rows at a time
    S = dict(q=q, r=r, J=J, cost=cost, pe=pe, re=re, cv=cv, converged=converged,
             cost0=cost,  # the non-monotone phase's reference
             lam=xp.full(N, cfg.lambda_initial), iters=xp.zeros(N, dtype=xp.int64),
             stall=xp.zeros(N, dtype=xp.int64),
             stuck=xp.zeros(N, dtype=bool),  # rejected with lambda unchanged: for ever
             active=active, it0=xp.zeros(N, dtype=xp.int64), mono=xp.zeros(N, dtype=bool),
             q_start=q, q_back=q, pe_back=pe, re_back=re,
             phase=(xp.where(last_seed | (cfg.stall_iterations == 0), 0, 2) if excursion
                    else None))
    if not whole:  # written block by block, in place: every row's state its own array
        S = {k: v if v is None or k == "active" else v.copy() for k, v in S.items()}

    def iteration(sl):
        """One LM iteration of the rows ``sl`` (every row's state in ``S``)."""
        (q, r, J, cost, pe, re, cv, converged, cost0, lam, iters, stall, stuck, active, it0,
         mono, q_start, q_back, pe_back, re_back, phase) = (
            None if S[k] is None else S[k] if whole else S[k][sl] for k in _STATE)
        seed_b, pidx_b = (seed_q, problem_idx) if whole else (seed_q[sl], problem_idx[sl])
        n = q.shape[0]
        if excursion:
            go = (active & (phase == 0) & (iters >= cfg.excursion_iterations)
                  & (stall >= cfg.excursion_stall)
                  & xp.any(narrow & ((q <= lower) | (q >= upper)), axis=1))
            if xp is not np or go.any():
                b = go[:, None]
                q_back, pe_back, re_back = (xp.where(b, q, q_back), xp.where(go, pe, pe_back),
                                            xp.where(go, re, re_back))
                q = xp.where(b, q_start, q)
                r, J, cost, pe, re, cv = _take(go, (r, J, cost, pe, re, cv),
                                               _evaluate(model, objectives, q, seed_b,
                                                         pidx_b, fixed_cols), xp)
                cost0 = xp.where(go, cost, cost0)
                lam = xp.where(go, cfg.lambda_initial, lam)
                stall = xp.where(go, 0, stall)
                phase = xp.where(go, 1, phase)
                it0 = xp.where(go, iters, it0)
        release = (phase == 1) if excursion else None
        JtJ = xp.swapaxes(J, 1, 2) @ J
        g = (xp.swapaxes(J, 1, 2) @ r[..., None])[..., 0]
        diag = xp.diagonal(JtJ, axis1=1, axis2=2)
        H = JtJ + lam[:, None, None] * ((diag + cost[:, None] + 1e-9)[:, :, None] * eye)
        dq = -xp.linalg.solve(H, g[..., None])[..., 0]
        if lim_cols.size:
            dq = _active_set_step(H, g, dq, q, lim_cols, lim_q, lower, upper, around, xp,
                                  release)
        if fixed_cols is not None:
            dq[:, fixed_cols] = 0.0
        dv = xp.zeros((n, model.nv))
        dv[:, va] = xp.where(active[:, None], dq, 0.0)
        q_try = integrate(model, q, dv)
        if excursion:  # an excursion's revolute joints go unclipped
            q_try = xp.where(release[:, None] & around, q_try, clip_to_limits(model, q_try))
        else:
            q_try = clip_to_limits(model, q_try)
        r2, J2, cost2, ctx2 = evaluate(model, objectives, q_try, seed_b, pidx_b)
        if fixed_cols is not None:
            J2[:, :, fixed_cols] = 0.0
        ref = xp.where(~mono & (iters - it0 < cfg.nonmonotone_iterations), cost0, cost)
        accepted = active & (cost2 < ref)
        slow = active & ~(accepted & (cost2 <= cost * cfg.stall_ratio))
        stall = xp.where(slow, stall + 1, xp.where(active, 0, stall))
        b = accepted[:, None]
        q = xp.where(b, q_try, q)
        r = xp.where(b, r2, r)
        J = xp.where(b[:, :, None], J2, J)
        cost = xp.where(accepted, cost2, cost)
        lam2 = xp.where(accepted, xp.maximum(lam * cfg.lambda_down, cfg.lambda_min),
                        xp.where(active, xp.minimum(lam * cfg.lambda_up, cfg.lambda_max), lam))
        stuck = stuck | (active & ~accepted & (lam2 == lam))
        lam = lam2
        iters = iters + active
        pe2, re2 = goal_errors(objectives, ctx2, pidx_b)
        cv2 = _constraints(objectives, ctx2, pidx_b)
        pe = xp.where(accepted, pe2, pe)
        re = xp.where(accepted, re2, re)
        cv = xp.where(accepted, cv2, cv)
        converged = converged | (accepted & (pe <= cfg.position_tolerance)
                                 & (re <= cfg.orientation_tolerance) & (cv >= 0))
        if excursion:
            end = active & (phase == 1) & (converged | (iters - it0 >= cfg.excursion_iterations))
            if xp is not np or end.any():
                q_turned, inside = _turn_inside(q, lower, upper, around, xp)
                keep = end & converged & inside
                back = end & ~keep
                q = xp.where(keep[:, None], q_turned, xp.where(back[:, None], q_back, q))
                r, J, cost, pe, re, cv = _take(back, (r, J, cost, pe, re, cv),
                                               _evaluate(model, objectives, q, seed_b,
                                                         pidx_b, fixed_cols), xp)
                lam = xp.where(back, cfg.lambda_initial, lam)
                stall = xp.where(back, 0, stall)
                converged = converged & ~back
                mono = mono | end
                phase = xp.where(end, 2, phase)
        new = dict(q=q, r=r, J=J, cost=cost, pe=pe, re=re, cv=cv, converged=converged,
                   cost0=cost0, lam=lam, iters=iters, stall=stall, stuck=stuck, it0=it0,
                   mono=mono, q_back=q_back, pe_back=pe_back, re_back=re_back, phase=phase)
        for k, v in new.items():
            if v is None:
                continue
            if whole:
                S[k] = v
            else:
                S[k][sl] = v

    # on a device, "is any row still active?" is a host sync: asked every 8th iteration only
    # (an iteration with no active row changes nothing)
    check_every = 1 if xp is np else 8
    for it in range(cfg.max_iterations):
        active = S["active"]
        if first_per_problem:
            # a row after its problem's first converged row (in seed order) stops: the rows
            # before it go on, so the answer is the one a run of the seeds one after the other
            # gives (the compiled rows' rule; rows are problem-major, K a problem)
            c = S["converged"].reshape(num_problems, K)
            first = xp.where(xp.any(c, axis=1), xp.argmax(c, axis=1), K)
            active &= row_k < first[problem_idx]
        active &= ~(S["converged"] | S["stuck"])
        if cfg.stall_iterations > 0:  # a problem's last seed is never given up
            active &= (S["stall"] < cfg.stall_iterations) | last_seed
        if it % check_every == check_every - 1 or check_every == 1:
            if not bool(to_numpy(xp.any(active))):
                break
        if late():
            break
        cut = False
        for b, sl in enumerate(blocks):
            if not whole:
                if b and late():
                    cut = True
                    break
                if not bool(active[sl].any()):
                    continue  # (an iteration changes no inactive row)
            iteration(sl)
        if cut:
            break
    else:
        if deadline is not None and time.perf_counter() >= deadline and bool(
                xp.any(S["active"] & ~S["converged"])):
            timed_out = True
    q, converged, iters, pe, re = S["q"], S["converged"], S["iters"], S["pe"], S["re"]
    if excursion:  # the iterations ran out in an excursion: where it started
        out = S["phase"] == 1
        q = xp.where(out[:, None], S["q_back"], q)
        pe, re = xp.where(out, S["pe_back"], pe), xp.where(out, S["re_back"], re)
        converged = converged & ~out
    return q, converged, iters, pe, re, timed_out


_STATE = ("q", "r", "J", "cost", "pe", "re", "cv", "converged", "cost0", "lam", "iters", "stall",
          "stuck", "active", "it0", "mono", "q_start", "q_back", "pe_back", "re_back", "phase")


def _evaluate(model, objectives, q, seed_q, problem_idx, fixed_cols):
    """(r, J, cost, pos_err, rot_err, constraint) of rows q, the fixed columns of J zeroed."""
    r, J, cost, ctx = evaluate(model, objectives, q, seed_q, problem_idx)
    if fixed_cols is not None:
        J[:, :, fixed_cols] = 0.0
    pe, re = goal_errors(objectives, ctx, problem_idx)
    return r, J, cost, pe, re, _constraints(objectives, ctx, problem_idx)


def _constraints(objectives, ctx, problem_idx):
    """(N,) the objectives' smallest constraint value, +inf where they have none."""
    c = constraints(objectives, ctx, problem_idx)
    return ctx.xp.full(ctx.q.shape[0], np.inf) if c is None else c


def _take(rows, old, new, xp):
    """``new``'s arrays in ``rows`` (N,) bool, ``old``'s elsewhere."""
    return tuple(xp.where(rows.reshape((-1,) + (1,) * (a.ndim - 1)), b, a)
                 for a, b in zip(old, new))


