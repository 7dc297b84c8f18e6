"""Residual evaluation shared by every solver: the objectives' stacked residual, Jacobian and
cost at a batch of rows, and the goal errors (position, orientation) the tolerances test."""

from __future__ import annotations

from ..backend import get_xp
from ..model import Model
from .objectives import EvalContext

__all__ = ["evaluate", "goal_errors", "constraints"]


def evaluate(model: Model, objectives, q, seed_q, problem_idx, *, need_jacobian: bool = True):
    """Stacked residual (N, m), Jacobian (N, m, nv_active), cost (N,), and the context."""
    xp = get_xp(q)
    ctx = EvalContext(model, q, seed_q)
    rs, Js = [], []
    for obj in objectives:
        r, J = obj.residual(ctx, problem_idx)
        rs.append(r)
        Js.append(J)
    r = xp.concatenate(rs, axis=1)
    J = xp.concatenate(Js, axis=1) if need_jacobian else None
    return r, J, 0.5 * xp.sum(r * r, axis=1), ctx


def goal_errors(objectives, ctx, problem_idx):
    """Largest position and orientation error over the goal objectives, (N,) each."""
    xp = ctx.xp
    N = ctx.q.shape[0]
    pe = xp.zeros(N)
    re = xp.zeros(N)
    for obj in objectives:
        e = obj.errors(ctx, problem_idx)
        if e is not None:
            pe = xp.maximum(pe, e[0])
            re = xp.maximum(re, e[1])
    return pe, re


def constraints(objectives, ctx, problem_idx):
    """(N,) the smallest of the objectives' constraint values (>= 0: satisfied), or None when
    no objective has one."""
    out = None
    for obj in objectives:
        c = obj.constraint(ctx, problem_idx)
        if c is not None:
            out = c if out is None else ctx.xp.minimum(out, c)
    return out
