"""The posture term: stay near a rest configuration, as a secondary objective.

Rows ``w * (q_i - rest_i)``, one per coordinate the solve moves, Jacobian ``w`` on its column
(mink's ``PostureTask``, Pink's and PyRoki's posture costs, a null-space preference). A cost:
the answer is found without it, then lowered within the goals' tolerances and the
constraints (:mod:`ros2_ik.ik.refine`), so success never depends on it and the distance to the
rest configuration only shrinks. Per problem: ``rest`` (nq,) — default the problem's seed
(mid-range without one) — and the ``weight``, which sets how fast a step moves towards it
(1: the whole of the gradient projected into the goals' null space).
"""

from __future__ import annotations

import math

import numpy as np

from ...backend import get_xp
from ...errors import InvalidInputError, ShapeError
from ...validate import as_float_array, describe
from ..objectives import Objective
from .base import Term

__all__ = ["Posture", "PostureRows"]


class PostureRows(Objective):
    """The reference rows of a posture term: ``w * (q - rest)`` on the coordinates
    ``coords``, ``rest`` (P, nq) per problem, ``weight`` (P,)."""

    def __init__(self, model, coords, rest, weight):
        self.model = model
        self.coords = np.asarray(coords, dtype=np.int64)
        self.rest = rest
        self.weight = weight
        self.dim = int(self.coords.size)
        v = np.asarray(model.q_to_v)[self.coords]
        active = {int(c): k for k, c in enumerate(model.v_active)}
        self._cols = np.array([active[int(c)] for c in v], dtype=np.int64)

    @property
    def num_problems(self) -> int:
        return int(self.rest.shape[0])

    def take(self, start, stop):
        return PostureRows(self.model, self.coords, self.rest[start:stop],
                           self.weight[start:stop])

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        N = ctx.q.shape[0]
        c = xp.asarray(self.coords)
        w = self.weight[problem_idx]
        r = w[:, None] * (ctx.q[:, c] - self.rest[problem_idx][:, c])
        J = xp.zeros((N, self.dim, self.model.nv_active))
        J[:, xp.arange(self.dim), xp.asarray(self._cols)] = w[:, None]
        return r, J


class Posture(Term):
    """A rest configuration to stay near (see the module docstring). ``weight`` (> 0, default
    1) is the default of every problem's; ``solve(rest=...)`` gives the rest configuration
    (nq,) for every problem or (P, nq) one each, and ``posture_weight=`` a weight per call (a
    number, or (P,))."""

    name = "posture"
    kind = "cost"
    arguments = ("rest", "posture_weight")

    def __init__(self, weight: float = 1.0):
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.floating)) \
                or not math.isfinite(float(weight)) or float(weight) <= 0:
            raise InvalidInputError(f"Posture weight must be a number > 0, got "
                                    f"{describe(weight)}")
        self.weight = float(weight)

    def key(self) -> tuple:
        return ("Posture", self.weight)  # (data to the kernels: one compiled source for any)

    def check(self, model, P: int, seeds, args: dict) -> dict:
        xp = get_xp(seeds)
        rest = args.get("rest")
        if rest is None:
            rest = seeds
        else:
            rest = as_float_array(rest, "rest", f"shape ({model.nq},) or (P, {model.nq})", xp)
            if rest.shape == (model.nq,):
                rest = xp.broadcast_to(rest, (P, model.nq))
            if rest.shape != (P, model.nq):
                raise ShapeError(f"rest must have shape ({model.nq},) or ({P}, {model.nq}) "
                                 f"(coordinates {list(model.q_names)}), got {rest.shape}")
            if not bool(xp.all(xp.isfinite(rest))):
                raise InvalidInputError("rest contains NaN or infinity; give finite joint "
                                        "values [rad or m]")
        w = args.get("posture_weight")
        if w is None:
            w = xp.full(P, self.weight)
        else:
            w = as_float_array(w, "posture_weight", "a number or shape (P,)", xp)
            w = xp.broadcast_to(w, (P,)) if w.ndim == 0 or w.shape == (1,) else w
            if w.shape != (P,) or not bool(xp.all(xp.isfinite(w) & (w > 0))):
                raise InvalidInputError(f"posture_weight must be a number > 0 or shape ({P},) "
                                        f"of them, got {describe(args.get('posture_weight'))}")
        return {"rest": xp.ascontiguousarray(rest, dtype=xp.float64),
                "weight": xp.ascontiguousarray(w, dtype=xp.float64)}

    def arguments_of(self, call: dict) -> dict:
        return {"rest": call["rest"], "posture_weight": call["weight"]}

    def objective(self, model, call: dict):
        return PostureRows(model, call["coords"], call["rest"], call["weight"])

    def data(self, model, call: dict) -> dict:
        return {"rest": call["rest"], "weight": call["weight"].reshape(-1, 1)}
