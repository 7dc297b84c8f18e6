"""Secondary terms: lowering a cost within the goals' tolerances and the constraints.

A problem's answer is found with the goals and constraints only (the LM rows); then, for an
answer that meets them, up to ``IKConfig.secondary_iterations`` steps lower the secondary
terms' cost ``Es = 0.5 |r_s|^2`` (a rest posture) without giving up either:

1. the secondary gradient ``g = J_s^T r_s`` projected into the null space of the primary rows
   (the goals' and the constraints' penalty) the damped way: ``x = mu (J^T J + mu I)^-1 g``
   (``mu`` = ``secondary_damping``: a direction the primary rows do not see is kept whole, one
   they do is cut by ``mu / (sigma^2 + mu)``), the step ``-alpha x`` clipped to the limits;
2. one Gauss-Newton step back onto the primary rows (damped as LM at ``lambda_min``), clipped;
3. kept if there the goals are within the tolerances, every constraint holds and ``Es`` fell;
   then ``alpha`` doubles (at most 1), else it halves, and the refinement ends below 1/64.

The answer is never worse by the goals' measure, and its secondary cost only falls. The one
compiled source spells the same steps (:mod:`ros2_ik.backends.emit.refine`).
"""

from __future__ import annotations

from ..backend import get_xp, to_numpy
from ..kinematics.fk import integrate
from ..model import Model
from .config import IKConfig
from .residuals import constraints, evaluate, goal_errors
from .seeds import clip_to_limits

__all__ = ["refine"]

#: the refinement ends when its step scale falls below this
MIN_ALPHA = 1.0 / 64


def refine(model: Model, primary, secondary, q, seed_q, problem_idx, cfg: IKConfig, active,
           fixed_cols=None):
    """Rows ``q`` (N, nq) refined (see the module docstring) where ``active`` (N,); the
    primary objectives (goals, constraints' penalties) and the secondary ones are reference
    :class:`~ros2_ik.ik.objectives.Objective` s; ``fixed_cols``: active columns no step may
    move. Returns the refined rows."""
    xp = get_xp(q)
    if not secondary or cfg.secondary_iterations <= 0 or not bool(to_numpy(xp.any(active))):
        return q
    N = q.shape[0]
    nva = model.nv_active
    va = xp.asarray(model.v_active)
    eye = xp.eye(nva)
    mu = cfg.secondary_damping

    def prim(qq):
        r, J, cost, ctx = evaluate(model, primary, qq, seed_q, problem_idx)
        if fixed_cols is not None:
            J[:, :, fixed_cols] = 0.0
        return r, J, cost, ctx

    def sec(qq):
        r, J, cost, _ = evaluate(model, secondary, qq, seed_q, problem_idx)
        if fixed_cols is not None:
            J[:, :, fixed_cols] = 0.0
        return r, J, cost

    def step(qq, dq):
        dv = xp.zeros((N, model.nv))
        dv[:, va] = dq
        return clip_to_limits(model, integrate(model, qq, dv))

    r, J, _, _ = prim(q)
    rs, Js, cs = sec(q)
    alpha = xp.ones(N)
    active = active.copy()
    for _ in range(cfg.secondary_iterations):
        active &= alpha >= MIN_ALPHA
        if not bool(to_numpy(xp.any(active))):
            break
        # 1. the secondary gradient, projected
        H = xp.swapaxes(J, 1, 2) @ J + mu * eye
        g = (xp.swapaxes(Js, 1, 2) @ rs[..., None])[..., 0]
        x = xp.linalg.solve(H, g[..., None])[..., 0]
        q1 = step(q, xp.where(active[:, None], -(alpha * mu)[:, None] * x, 0.0))
        # 2. back onto the primary rows
        r1, J1, cost1, _ = prim(q1)
        JtJ = xp.swapaxes(J1, 1, 2) @ J1
        diag = xp.diagonal(JtJ, axis1=1, axis2=2)
        Hc = JtJ + cfg.lambda_min * ((diag + cost1[:, None] + 1e-9)[:, :, None] * eye)
        gc = (xp.swapaxes(J1, 1, 2) @ r1[..., None])[..., 0]
        dq = -xp.linalg.solve(Hc, gc[..., None])[..., 0]
        q2 = step(q1, xp.where(active[:, None], dq, 0.0))
        # 3. kept where the goals, the constraints and a lower cost say so
        r2, J2, _, ctx2 = prim(q2)
        pe, re = goal_errors(primary, ctx2, problem_idx)
        cv = constraints(primary, ctx2, problem_idx)
        rs2, Js2, cs2 = sec(q2)
        ok = active & (pe <= cfg.position_tolerance) & (re <= cfg.orientation_tolerance) & (
            cs2 < cs)
        if cv is not None:
            ok &= cv >= 0
        b = ok[:, None]
        q = xp.where(b, q2, q)
        r, J = xp.where(b, r2, r), xp.where(b[:, :, None], J2, J)
        rs, Js, cs = xp.where(b, rs2, rs), xp.where(b[:, :, None], Js2, Js), xp.where(ok, cs2, cs)
        alpha = xp.where(ok, xp.minimum(2 * alpha, 1.0), xp.where(active, 0.5 * alpha, alpha))
    return q
