"""Goal sets: several acceptable goals a problem, any of which will do.

A problem gives ``n`` candidate goals (each a pose for every tip: a grasp set, the poses of a
symmetric part), up to the term's ``max_goals`` (cuRobo's goalset). The rows at a point are
those of the candidate nearest there (the least weighted cost: a row heads for whichever goal
it is nearest); the errors judged against the tolerances are those of the candidate nearest
within them (the least ``max(pe / tol_p, re / tol_r)``), so a row converges when it reaches
any candidate, and the answer says which (:attr:`ros2_ik.ik.IKResult.goal_index`). A goal
term: it takes the place of the pose goal (:class:`ros2_ik.IKSolver` then takes, for one tip,
targets (P, n, 4, 4) or (P, n, 7), for T tips (P, n, T, 4, 4) or (P, n, T, 7)). The compiled
side is :mod:`ros2_ik.backends.terms.goalset`.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_xp, to_numpy
from ...errors import InvalidInputError, ShapeError
from ...validate import as_float_array, describe
from ..objectives import Objective, PoseObjective
from .base import Term

__all__ = ["GoalSet", "GoalSetRows", "MAX_GOALS"]

#: the most candidates a goal set may have (its compiled rows hold them all, per lane)
MAX_GOALS = 64


class GoalSetRows(Objective):
    """The reference rows of a goal set: ``targets`` (P, N, T, 4, 4) for the links ``tips``,
    ``weights`` (P, T, 6), the tolerances ``tol`` (position, orientation) that rank the
    candidates for the errors."""

    def __init__(self, model, tips, targets, weights, tol):
        self.model, self.tips, self.tol = model, list(tips), tol
        self.targets, self.weights = targets, weights
        self.links = tuple(model.link_index(t) for t in self.tips)
        N, T = targets.shape[1], targets.shape[2]
        self.dim = 6 * T
        self._poses = [[PoseObjective(model, tip, targets[:, n, k], weights[:, k])
                        for k, tip in enumerate(self.tips)] for n in range(N)]

    @property
    def num_problems(self) -> int:
        return int(self.targets.shape[0])

    def take(self, start, stop):
        return GoalSetRows(self.model, self.tips, self.targets[start:stop],
                           self.weights[start:stop], self.tol)

    def sanitized(self, invalid):
        """This goal set with the goals of the problems ``invalid`` (P,) bool made harmless
        (the identity), so that the batch's arithmetic stays finite."""
        xp = get_xp(self.targets)
        t = self.targets.copy()
        t[xp.asarray(invalid)] = xp.eye(4)
        return GoalSetRows(self.model, self.tips, t, self.weights, self.tol)

    def invalid_problems(self):
        bad = None
        for row in self._poses:
            for obj in row:
                b = obj.invalid_problems()
                bad = b if bad is None else bad | b
        return bad

    def _candidates(self, ctx, problem_idx, jacobian: bool):
        xp = ctx.xp
        rs, Js, pes, res = [], [], [], []
        for row in self._poses:
            parts = [obj.residual(ctx, problem_idx) if jacobian else None for obj in row]
            errs = [obj.errors(ctx, problem_idx) for obj in row]
            if jacobian:
                rs.append(xp.concatenate([p[0] for p in parts], axis=1))
                Js.append(xp.concatenate([p[1] for p in parts], axis=1))
            pes.append(xp.max(xp.stack([e[0] for e in errs]), axis=0))
            res.append(xp.max(xp.stack([e[1] for e in errs]), axis=0))
        return rs, Js, xp.stack(pes, axis=1), xp.stack(res, axis=1)

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        rs, Js, _, _ = self._candidates(ctx, problem_idx, True)
        cost = xp.stack([xp.sum(r * r, axis=1) for r in rs], axis=1)
        k = xp.argmin(cost, axis=1)  # (the first on ties)
        rows = xp.arange(ctx.q.shape[0])
        return xp.stack(rs, axis=1)[rows, k], xp.stack(Js, axis=1)[rows, k]

    def nearest(self, ctx, problem_idx):
        """(N,) the candidate nearest within the tolerances, and its errors (pe, re)."""
        xp = ctx.xp
        _, _, pe, re = self._candidates(ctx, problem_idx, False)
        k = xp.argmin(xp.maximum(pe / self.tol[0], re / self.tol[1]), axis=1)
        rows = xp.arange(ctx.q.shape[0])
        return k, pe[rows, k], re[rows, k]

    def errors(self, ctx, problem_idx):
        _, pe, re = self.nearest(ctx, problem_idx)
        return pe, re


class GoalSet(Term):
    """Up to ``max_goals`` candidate goals a problem, any of which will do (see the module
    docstring). A call may give fewer (the last is repeated up to ``max_goals``: the compiled
    rows hold ``max_goals``)."""

    name = "goalset"
    kind = "goal"
    arguments = ()

    def __init__(self, max_goals: int):
        if isinstance(max_goals, bool) or not isinstance(max_goals, (int, np.integer)) or not (
                1 <= max_goals <= MAX_GOALS):
            raise InvalidInputError(f"GoalSet max_goals must be a whole number in [1, "
                                    f"{MAX_GOALS}], got {describe(max_goals)}")
        self.max_goals = int(max_goals)

    def key(self) -> tuple:
        return ("GoalSet", self.max_goals)

    @property
    def compiled_name(self) -> str:
        return f"goalset/{self.max_goals}"

    def targets(self, targets, tips, xp):
        """``targets`` as (P, max_goals, T, 4, 4) float64: for one tip (P, n, 4, 4) /
        (P, n, 7), for T tips (P, n, T, 4, 4) / (P, n, T, 7); n <= max_goals (the last
        candidate repeated up to it)."""
        from ...kinematics.se3 import pq_to_pose  # noqa: PLC0415

        T = len(tips)
        t = as_float_array(targets, "targets", "a goal set: shape (P, n, 4, 4) or (P, n, 7) "
                           "per tip", xp).astype(xp.float64, copy=False)
        if T == 1 and ((t.ndim == 4 and t.shape[2:] == (4, 4))
                       or (t.ndim == 3 and t.shape[2] == 7)):
            t = t[:, :, None]  # one tip: (P, n, 4, 4) / (P, n, 7) -> (P, n, 1, ...)
        if t.ndim not in (4, 5) or t.shape[2] != T or t.shape[3:] not in ((4, 4), (7,)):
            raise ShapeError(f"a goal set's targets must have shape (P, n, 4, 4) / (P, n, 7) "
                             f"for one tip or (P, n, {T}, 4, 4) / (P, n, {T}, 7) for tips "
                             f"{list(tips)}, got {tuple(t.shape)}")
        P, n = t.shape[0], t.shape[1]
        if P == 0:
            raise InvalidInputError("empty batch: no targets given")
        if not 1 <= n <= self.max_goals:
            raise ShapeError(f"a goal set of this solver holds 1 to {self.max_goals} "
                             f"candidates a problem (GoalSet(max_goals)), got {n}")
        if t.shape[3:] == (7,):
            t = pq_to_pose(t.reshape(-1, 7)).reshape(P, n, T, 4, 4)
        if n < self.max_goals:
            t = xp.concatenate([t, xp.repeat(t[:, -1:], self.max_goals - n, axis=1)], axis=1)
        return xp.ascontiguousarray(t)

    def check(self, model, P: int, seeds, args: dict) -> dict:
        return {}  # (its targets and weights: IKSolver.solve's own)

    def objective(self, model, call: dict):
        cfg = call["config"]
        return GoalSetRows(model, call["tips"], call["targets"], call["weights"],
                           (cfg.position_tolerance, cfg.orientation_tolerance))

    def data(self, model, call: dict) -> dict:
        t, w = call["targets"], call["weights"]  # (weights (P, T, 6); one set if shared)
        return {"target": t.reshape(t.shape[0], -1),
                "weight": w[0].reshape(-1) if w.strides[0] == 0 else w.reshape(w.shape[0], -1)}

    def finish(self, model, call: dict, result) -> None:
        """``result.goal_index``: which candidate each answer reaches (the nearest within
        the tolerances, by FK; for the problems not solved, the nearest one)."""
        from ..objectives import EvalContext  # noqa: PLC0415

        obj = self.objective(model, call)
        q = np.asarray(result.q)
        k, _, _ = obj.nearest(EvalContext(model, q, q), np.arange(q.shape[0]))
        result.goal_index = to_numpy(k).astype(np.int64)
