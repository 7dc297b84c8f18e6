"""The step bound: a hard bound on how far each joint may move from where it stands.

Per coordinate the solve moves, ``|q_i - origin_i| <= max_step_i`` (a continuous joint's
difference taken modulo 2 pi, the shorter way round): a constraint every success keeps, as the
joint limits (cuRobo's velocity-scaled step, teleoperation and servoing: an answer one control
period away). ``origin`` is the problem's seed unless given; ``max_step`` a number for every
joint, one per coordinate, one set per problem, or the joints' velocity limits times ``dt``.

Rows (one per moved coordinate): a hinge ``w * sign(d) * max(0, |d| - inner)`` with ``inner =
max_step - min(STEP_MARGIN_FRACTION * max_step, STEP_MARGIN)``, Jacobian ``w`` on its column
where the hinge stands: zero inside the bound, so the answer is found as without it
wherever the bound does not bind, and pushed back inside (by a margin) where it does. The
constraint value is ``min_i (max_step_i - |d_i|)``: an answer the LM leaves past the bound is
not converged, and the selection checks it once more in float64 (NO_IK_SOLUTION, the message
names the joint). The compiled side is :mod:`ros2_ik.backends.terms.step`.
"""

from __future__ import annotations

import math

import numpy as np

from ...backend import const, get_xp
from ...errors import InvalidInputError, ShapeError
from ...validate import as_float_array, describe
from ..objectives import Objective
from .base import Term

__all__ = ["StepBound", "StepRows", "STEP_MARGIN", "STEP_MARGIN_FRACTION", "STEP_WEIGHT",
           "velocity_steps", "wrapped"]

#: the hinge stands this far inside the bound (at most): the LM keeps its answers inside by a
#: margin, so an answer at the bound is not lost to rounding [rad or m]
STEP_MARGIN = 1e-3
STEP_MARGIN_FRACTION = 0.02
#: the hinge rows' weight (the pose rows' is 1 per metre and radian)
STEP_WEIGHT = 10.0


def wrapped(d, continuous, xp):
    """``d`` (N, n) with the columns ``continuous`` (n,) bool taken modulo 2 pi into
    [-pi, pi) (the shorter way round)."""
    two_pi = 2 * math.pi
    w = d - two_pi * xp.floor((d + math.pi) / two_pi)
    return xp.where(const(xp, continuous), w, d)


class StepRows(Objective):
    """The reference rows of a step bound on the coordinates ``coords``: ``origin`` (P, nq),
    ``max_step`` (P, nq), ``weight`` (P,) per problem."""

    def __init__(self, model, coords, origin, max_step, weight):
        self.model = model
        self.coords = np.asarray(coords, dtype=np.int64)
        self.origin, self.max_step, self.weight = origin, max_step, weight
        self.dim = int(self.coords.size)
        v = np.asarray(model.q_to_v)[self.coords]
        active = {int(c): k for k, c in enumerate(model.v_active)}
        self._cols = np.array([active[int(c)] for c in v], dtype=np.int64)
        self._cont = np.asarray(model.q_continuous, dtype=bool)[self.coords]

    @property
    def num_problems(self) -> int:
        return int(self.origin.shape[0])

    def take(self, start, stop):
        return StepRows(self.model, self.coords, self.origin[start:stop],
                        self.max_step[start:stop], self.weight[start:stop])

    def _parts(self, ctx, problem_idx):
        xp = ctx.xp
        c = xp.asarray(self.coords)
        d = wrapped(ctx.q[:, c] - self.origin[problem_idx][:, c], self._cont, xp)
        return d, self.max_step[problem_idx][:, c]

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        N = ctx.q.shape[0]
        d, s = self._parts(ctx, problem_idx)
        inner = s - xp.minimum(STEP_MARGIN_FRACTION * s, STEP_MARGIN)
        h = xp.maximum(xp.abs(d) - inner, 0.0)
        w = self.weight[problem_idx][:, None]
        J = xp.zeros((N, self.dim, self.model.nv_active))
        J[:, xp.arange(self.dim), xp.asarray(self._cols)] = xp.where(h > 0, w, 0.0)
        return xp.where(d < 0, -w, w) * h, J

    def constraint(self, ctx, problem_idx):
        if not self.dim:
            return None
        d, s = self._parts(ctx, problem_idx)
        return ctx.xp.min(s - ctx.xp.abs(d), axis=1)


class StepBound(Term):
    """A bound on each joint's change from the problem's seed (see the module docstring).

    ``max_step``: the default bound (a number for every joint [rad or m], or (nq,) one per
    coordinate; ``inf`` leaves a joint free); ``dt`` instead: the joints' velocity limits
    (URDF ``<limit velocity>``) times ``dt`` [s]. ``solve(max_joint_step=...)`` gives a call's
    bound (a number, (nq,) or (P, nq)), ``step_from=`` the configuration it counts from ((nq,)
    or (P, nq); default the seeds).
    """

    name = "step"
    kind = "constraint"
    arguments = ("max_joint_step", "step_from")

    def __init__(self, max_step=None, *, dt: float | None = None):
        if (max_step is None) == (dt is None):
            raise InvalidInputError("StepBound takes max_step [rad or m] or dt [s] (velocity "
                                    "limits x dt), one of them")
        if dt is not None and (isinstance(dt, bool) or not isinstance(dt, (int, float))
                               or not math.isfinite(dt) or dt <= 0):
            raise InvalidInputError(f"StepBound dt must be a number of seconds > 0, got "
                                    f"{describe(dt)}")
        self.dt = None if dt is None else float(dt)
        self.max_step = None if max_step is None else _steps(max_step, "max_step", None)

    def key(self) -> tuple:
        ms = None if self.max_step is None else tuple(np.ravel(self.max_step).tolist())
        return ("StepBound", ms, self.dt)

    def default_step(self, model) -> np.ndarray:
        """The bound (nq,) of a call that gives none."""
        if self.dt is not None:
            return velocity_steps(model, self.dt, "StepBound(dt=...)", "max_step")
        s = np.asarray(self.max_step, dtype=float)
        if s.ndim == 0:
            return np.full(model.nq, float(s))
        if s.shape != (model.nq,):
            raise ShapeError(f"StepBound max_step must be a number or shape ({model.nq},) "
                             f"(coordinates {list(model.q_names)}), got {s.shape}")
        return s

    def check(self, model, P: int, seeds, args: dict) -> dict:
        xp = get_xp(seeds)
        nq = model.nq
        s = args.get("max_joint_step")
        if s is None:
            s = xp.asarray(self.default_step(model))
        else:
            s = _steps(s, "max_joint_step", xp)
        if s.ndim == 0:
            s = xp.full(nq, float(s))
        if s.shape == (nq,):
            s = xp.broadcast_to(s, (P, nq))
        if s.shape != (P, nq):
            raise ShapeError(f"max_joint_step must be a number or have shape ({nq},) or "
                             f"({P}, {nq}) (coordinates {list(model.q_names)}), got {s.shape}")
        o = args.get("step_from")
        if o is None:
            o = seeds
        else:
            o = as_float_array(o, "step_from", f"shape ({nq},) or (P, {nq})", xp)
            if o.shape == (nq,):
                o = xp.broadcast_to(o, (P, nq))
            if o.shape != (P, nq):
                raise ShapeError(f"step_from must have shape ({nq},) or ({P}, {nq}) "
                                 f"(coordinates {list(model.q_names)}), got {o.shape}")
            if not bool(xp.all(xp.isfinite(o))):
                raise InvalidInputError("step_from contains NaN or infinity; give finite joint "
                                        "values [rad or m]")
        return {"origin": xp.ascontiguousarray(o, dtype=xp.float64),
                "max_step": xp.ascontiguousarray(s, dtype=xp.float64),
                "weight": xp.full(P, STEP_WEIGHT)}

    def arguments_of(self, call: dict) -> dict:
        return {"step_from": call["origin"], "max_joint_step": call["max_step"]}

    def objective(self, model, call: dict):
        return StepRows(model, call["coords"], call["origin"], call["max_step"],
                        call["weight"])

    def data(self, model, call: dict) -> dict:
        return {"origin": call["origin"], "max_step": call["max_step"],
                "weight": call["weight"].reshape(-1, 1)}

    def finish(self, model, call: dict, result) -> None:
        """The messages of the unsolved problems (NOT_CONVERGED) say what the bound did: the
        joint an answer would move past it, or, inside it, that the goal was not reached
        within it."""
        from ..config import Status  # noqa: PLC0415

        failed = np.nonzero(np.asarray(result.status) == int(Status.NOT_CONVERGED))[0][:1000]
        for p, text in zip(failed, self.explain(model, call, np.asarray(result.q)[failed],
                                                failed)):
            m = result.messages[p]
            result.messages[p] = f"{m}; {text}" if m else text

    def explain(self, model, call: dict, q, problems) -> list:
        """Why answers ``q`` (n, nq) of ``problems`` (n,) are not successes, as far as this
        term can tell: the joint that moves past its bound, or, inside it, that the goal was
        not reached within it."""
        c = np.asarray(call["coords"], dtype=np.int64)
        o = np.asarray(call["origin"])[problems][:, c]
        s = np.asarray(call["max_step"])[problems][:, c]
        d = np.abs(wrapped(np.asarray(q)[:, c] - o, np.asarray(model.q_continuous)[c], np))
        out = []
        for k in range(len(problems)):
            if not c.size:
                out.append(None)
                continue
            j = int(np.argmax(d[k] - s[k]))
            name = model.q_names[int(c[j])]
            if d[k, j] > s[k, j]:
                out.append(f"step bound: joint {name} would move {d[k, j]:.4g} from where it "
                           f"stands, more than its max_joint_step {s[k, j]:.4g}")
            else:
                out.append(f"within max_joint_step of where the joints stand (tightest: "
                           f"{name} {d[k, j]:.4g} of {s[k, j]:.4g})")
        return out


def velocity_steps(model, dt: float, what: str = "dt", instead: str = "max_joint_step"):
    """(nq,) each coordinate's URDF velocity limit x ``dt``; an IKError naming the joints
    without one (``what`` names the request, ``instead`` what to give)."""
    vel = np.asarray(model.velocity_limit, dtype=float)[np.asarray(model.q_to_v)]
    bad = [model.q_names[i] for i in np.nonzero(~(np.isfinite(vel) & (vel > 0)))[0]]
    if bad:
        raise InvalidInputError(f"{what} needs a velocity limit > 0 on every joint; {bad} have "
                                f"none in the URDF: give {instead} instead")
    return vel * float(dt)


def _steps(value, what: str, xp):
    """A bound: a number or an array of numbers >= 0 (inf: free), checked."""
    mod = np if xp is None else xp
    s = as_float_array(value, what, "a number >= 0 or an array of them", mod)
    if s.size and not bool(mod.all(~mod.isnan(s) & (s >= 0))):
        raise InvalidInputError(f"{what} must be >= 0 [rad or m] (inf: no bound), got "
                                f"{describe(value)}")
    return s
