"""IK objectives: the extension point of the solvers (Newton's ``IKObjective`` idea).

Each objective declares its residual size ``dim`` and writes, for every expanded row (a problem
x seed), its residual rows ``r (N, dim)`` and their analytic Jacobian block ``J (N, dim,
nv_active)`` with respect to the model's active velocity coordinates. Per-problem data (targets,
weights) is stored once per problem, shape ``(P, ...)``, and reached through ``problem_idx (N,)``,
so seeds never copy targets. The solver stacks every objective's rows into one global system
and minimizes ``0.5 * |r|^2``.

To add your own objective, subclass :class:`Objective` and implement :meth:`residual`; the
context gives you ``q``, the link poses and world Jacobians of any link (see
:class:`EvalContext`).
"""

from __future__ import annotations


import numpy as np

from ..backend import const, get_xp, to_numpy
from ..errors import InvalidInputError, ShapeError
from ..validate import as_float_array, bad_last_rows, bad_rotations
from ..kinematics.jacobian import screws, world_jacobians_from_screws
from ..kinematics.se3 import so3_log
from ..model import MAX_VALUE, Model

__all__ = ["Objective", "EvalContext", "PoseObjective", "PositionObjective",
           "OrientationObjective", "JointLimitObjective", "PostureObjective"]


class EvalContext:
    """What objectives see at one solver iteration (rows N = problems x seeds).

    Attributes: ``model``, ``q (N, nq)``, ``T (N, L, 4, 4)`` link poses in the base frame,
    ``seed_q (N, nq)`` the row's starting configuration, ``xp``.
    """

    def __init__(self, model: Model, q, seed_q):
        from ..kinematics.fk import fk  # noqa: PLC0415

        self.model, self.q, self.seed_q = model, q, seed_q
        self.xp = get_xp(q)
        self.T = fk(model, q, check=False)
        self._axes = None  # (the screws' axes and points, once per iteration)
        self._jac: dict[int, object] = {}

    def world_jacobian(self, link: int):
        """World Jacobian (N, 6, nv_active) of link index ``link`` (cached per iteration)."""
        J = self._jac.get(link)
        if J is None:
            if self._axes is None:
                self._axes = screws(self.model, self.T)
            a, p = self._axes
            J = world_jacobians_from_screws(self.model, self.T, a, p, [link])[:, 0]
            J = J[:, :, const(self.xp, self.model.v_active)]
            self._jac[link] = J
        return J


class Objective:
    """Base class. Subclasses set ``dim`` and implement :meth:`residual`."""

    dim: int = 0

    def residual(self, ctx: EvalContext, problem_idx):
        """Return ``(r (N, dim), J (N, dim, nv_active))`` for rows mapped by ``problem_idx``."""
        raise NotImplementedError

    def errors(self, ctx: EvalContext, problem_idx):
        """Task-space errors used for the success test: ``(pos_err (N,), rot_err (N,))`` or None
        when this objective is not a goal (regularizers)."""
        return None

    def constraint(self, ctx: EvalContext, problem_idx):
        """(N,) values a solution must keep >= 0 to succeed (the collision objective's
        clearance beyond its margin), or None."""
        return None

    def invalid_problems(self) -> np.ndarray | None:
        """Boolean mask (P,) of problems whose data is unusable (NaN targets, ...), or None."""
        return None

    def take(self, start: int, stop: int) -> "Objective | None":
        """This objective for problems ``start:stop`` only (the solvers split a large batch into
        chunks with it), or None when it cannot be split (the batch is then solved at once).
        Objectives without per-problem data (regularizers) return themselves."""
        return None


def _as_targets(targets, xp):
    T = as_float_array(targets, "targets", "shape (P, 4, 4) or (P, 7)", xp).astype(xp.float64,
                                                                                   copy=False)
    if T.ndim == 2 and T.shape == (4, 4):
        T = T[None]
    if T.ndim == 2 and T.shape[-1] == 7:
        from ..kinematics.se3 import pq_to_pose  # noqa: PLC0415

        T = pq_to_pose(T)
    if T.ndim != 3 or T.shape[1:] != (4, 4):
        raise ShapeError(f"targets must have shape (P, 4, 4) or (P, 7) [x y z qx qy qz qw], "
                         f"got {tuple(xp.asarray(targets).shape)}")
    return T


def check_weights(weights, P, xp):
    w = as_float_array(weights, "weights", "shape (6,) or (P, 6)", xp).astype(xp.float64,
                                                                              copy=False)
    if w.ndim == 1:
        if w.shape != (6,):
            raise ShapeError(f"weights must have 6 entries (x y z rx ry rz) or shape (P, 6), "
                             f"got {tuple(w.shape)}")
        if not bool(to_numpy(xp.all(xp.isfinite(w) & (w >= 0)))):  # checked before broadcast
            raise InvalidInputError("weights must be finite and >= 0 (0 frees an axis)")
        return xp.broadcast_to(w, (P, 6))
    if w.shape != (P, 6):
        raise ShapeError(f"weights must have shape (6,) or ({P}, 6), got {tuple(w.shape)}")
    if not bool(to_numpy(xp.all(xp.isfinite(w) & (w >= 0)))):
        raise InvalidInputError("weights must be finite and >= 0 (0 frees an axis)")
    return w


class PoseObjective(Objective):
    """Pose of ``link`` at a target, with per-axis weights in the *target* frame.

    Residual (6 rows, target-frame axes): ``w * [R_t^T (p - p_t) ; log(R_t^T R)]``; its Jacobian
    ``w * blockdiag(R_t^T, R_t^T) J_world`` (the small-error approximation of the log map's
    Jacobian, as in Buss's DLS). A weight 0 frees that axis: e.g. ``weights=(1,1,1,1,1,0)`` leaves
    rotation about the tool z axis free. The success errors are the norms of the position and
    rotation residual components whose weight is non-zero (unweighted): with all weights set,
    exactly the Euclidean distance [m] and the geodesic angle [rad].
    """

    dim = 6

    def __init__(self, model: Model, link: str, targets, weights=(1, 1, 1, 1, 1, 1)):
        xp = get_xp(targets)
        self.model = model
        self.link_name = link
        self.link = model.link_index(link)
        self.targets = _as_targets(targets, xp)
        P = self.targets.shape[0]
        self.weights = check_weights(weights, P, xp)
        self._xp = xp

    @property
    def num_problems(self) -> int:
        return int(self.targets.shape[0])

    def invalid_problems(self):
        xp = self._xp
        T = self.targets
        bad = ~xp.all(xp.isfinite(T.reshape(T.shape[0], -1)), axis=1)
        if xp is np and not bad.any():  # (a large batch's usual case: no copies; 100,000
            #                              goals in 8 ms instead of 20, part of a deadline)
            R, p, M = T[:, :3, :3], T[:, :3, 3], T
        else:
            R = xp.where(bad[:, None, None], xp.eye(3), T[:, :3, :3])
            p = xp.where(bad[:, None], 0.0, T[:, :3, 3])
            M = xp.where(bad[:, None, None], xp.eye(4), T)
        far = xp.any(xp.abs(p) > MAX_VALUE, axis=1)
        return bad | bad_rotations(R, xp) | bad_last_rows(M, xp) | far

    def take(self, start, stop):
        o = object.__new__(type(self))
        o.__dict__.update(self.__dict__)
        o.targets, o.weights = self.targets[start:stop], self.weights[start:stop]
        return o

    def _local_error(self, ctx, problem_idx):
        xp = ctx.xp
        Tt = self.targets[problem_idx]
        Rt_T = xp.swapaxes(Tt[:, :3, :3], 1, 2)
        T = ctx.T[:, self.link]
        ep = (Rt_T @ (T[:, :3, 3] - Tt[:, :3, 3])[..., None])[..., 0]
        er = so3_log(Rt_T @ T[:, :3, :3])
        return ep, er, Rt_T

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        ep, er, Rt_T = self._local_error(ctx, problem_idx)
        w = self.weights[problem_idx]
        r = xp.concatenate([ep, er], axis=1) * w
        J = ctx.world_jacobian(self.link)
        Jl = xp.concatenate([Rt_T @ J[:, :3], Rt_T @ J[:, 3:]], axis=1) * w[:, :, None]
        return r, Jl

    def errors(self, ctx, problem_idx):
        xp = ctx.xp
        ep, er, _ = self._local_error(ctx, problem_idx)
        m = (self.weights[problem_idx] > 0).astype(ep.dtype)
        return (xp.linalg.norm(ep * m[:, :3], axis=1), xp.linalg.norm(er * m[:, 3:], axis=1))


class PositionObjective(PoseObjective):
    """Position of ``link`` only (orientation free)."""

    def __init__(self, model, link, targets, weight: float = 1.0):
        xp = get_xp(targets)
        t = as_float_array(targets, "targets", "shape (P, 3) points or (P, 4, 4)",
                           xp).astype(xp.float64, copy=False)
        if t.ndim == 2 and t.shape[-1] == 3:  # points (P, 3)
            T = xp.tile(xp.eye(4), (t.shape[0], 1, 1))
            T[:, :3, 3] = t
            t = T
        super().__init__(model, link, t, (weight, weight, weight, 0.0, 0.0, 0.0))


class OrientationObjective(PoseObjective):
    """Orientation of ``link`` only (position free)."""

    def __init__(self, model, link, targets, weight: float = 1.0):
        super().__init__(model, link, targets, (0.0, 0.0, 0.0, weight, weight, weight))


class JointLimitObjective(Objective):
    """Soft joint-limit avoidance: a residual that grows when a bounded coordinate leaves the
    central ``1 - margin`` fraction of its range (zero inside it). Solvers still enforce limits
    as hard bounds; this only keeps solutions away from them."""

    def __init__(self, model: Model, weight: float = 0.1, margin: float = 0.1):
        self.model, self.weight, self.margin = model, float(weight), float(margin)
        cols = model.v_active
        qi = [int(np.nonzero(model.q_to_v == c)[0][0]) if np.any(model.q_to_v == c) else -1
              for c in cols]
        self._rows = np.array([k for k, i in enumerate(qi)
                               if i >= 0 and np.isfinite(model.lower[i])
                               and np.isfinite(model.upper[i])], dtype=np.int64)
        self._qi = np.array([qi[k] for k in self._rows], dtype=np.int64)
        self.dim = int(self._rows.size)

    def take(self, start, stop):
        return self  # no per-problem data

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        N = ctx.q.shape[0]
        lo = xp.asarray(self.model.lower[self._qi])
        hi = xp.asarray(self.model.upper[self._qi])
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        x = (ctx.q[:, xp.asarray(self._qi)] - mid) / xp.maximum(half, 1e-9)
        band = 1.0 - self.margin
        over = xp.abs(x) - band
        r = self.weight * xp.where(over > 0, xp.sign(x) * over, 0.0)
        d = self.weight * xp.where(over > 0, 1.0 / xp.maximum(half, 1e-9), 0.0)
        J = xp.zeros((N, self.dim, self.model.nv_active))
        J[:, xp.arange(self.dim), xp.asarray(self._rows)] = d
        return r, J


class PostureObjective(Objective):
    """Stay near a posture: ``r = w * (q - q_ref)`` on 1-DOF coordinates (minimal displacement
    from the seed when ``q_ref`` is None)."""

    def __init__(self, model: Model, weight: float = 0.01, q_ref=None):
        self.model, self.weight = model, float(weight)
        self.q_ref = None if q_ref is None else np.asarray(q_ref, dtype=float)
        cols = model.v_active
        self._rows = np.array([k for k, c in enumerate(cols) if np.any(model.q_to_v == c)],
                              dtype=np.int64)
        self._qi = np.array([int(np.nonzero(model.q_to_v == cols[k])[0][0]) for k in self._rows],
                            dtype=np.int64)
        self.dim = int(self._rows.size)

    def take(self, start, stop):
        return self  # no per-problem data

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        N = ctx.q.shape[0]
        ref = ctx.seed_q if self.q_ref is None else xp.broadcast_to(xp.asarray(self.q_ref),
                                                                     ctx.q.shape)
        qi = xp.asarray(self._qi)
        r = self.weight * (ctx.q[:, qi] - ref[:, qi])
        J = xp.zeros((N, self.dim, self.model.nv_active))
        J[:, xp.arange(self.dim), xp.asarray(self._rows)] = self.weight
        return r, J


