"""Collision terms of the IK specification (the readable reference the generated kernels
follow, :mod:`ros2_ik.backends.codegen`).

- :func:`sdf`: signed distance (and its gradient) of points to the world's primitives
  (:mod:`ros2_ik.world`; negative inside).
- :func:`penalty`: the smooth penalty of a clearance ``x = distance - margin`` with activation
  distance ``eta`` (cuRobo's and PyRoki's shape): 0 for ``x >= eta``, ``(eta - x)^2 / (2 eta)``
  on ``[0, eta)``, ``eta / 2 - x`` below 0 (linear: a deep penetration is pushed out at the rate
  of a shallow one); ``eta = 0`` is the hinge ``max(0, -x)``.
- :class:`CollisionObjective`: one residual row ``w * penalty`` per checked sphere pair (the
  collision model's self pairs) and per sphere and obstacle, with its analytic Jacobian
  ``w * penalty' * n^T J_p`` (``n`` the distance's gradient, ``J_p`` the sphere centre's
  position Jacobian). Its :meth:`~CollisionObjective.constraint` is the smallest distance less
  the margin: a solve converges only where it is >= 0, and the answer is verified by it.
- :func:`clearance`: the exact check of configurations (distance, and which pair is nearest).
- :func:`sample_disabled_pairs`: the never-colliding link pairs, by sampling (as MoveIt's setup
  assistant does), for an SRDF.

Distances are between the collision model's spheres (:mod:`ros2_ik.model.collision`, fitted to
cover the URDF's geometry) and the world's primitives, exactly.
"""

from __future__ import annotations

import numpy as np

from ..backend import const, get_xp, to_numpy
from ..errors import InvalidInputError
from ..kinematics.fk import fk
from ..model import Model
from ..model.collision import CollisionModel
from ..world import SHAPE_CODES, World
from .objectives import EvalContext, Objective

__all__ = ["sdf", "penalty", "CollisionObjective", "clearance", "sample_disabled_pairs",
           "srdf_entries", "sphere_centers", "default_collision_model", "ALWAYS_SAMPLES"]

_SPHERE, _BOX, _CYL, _CAPS, _HALF = (SHAPE_CODES[s] for s in ("sphere", "box", "cylinder",
                                                               "capsule", "halfspace"))
_TINY = 1e-12
_FAR = 1e30  # the distance of a pair that is not checked


def sdf(packed, points):
    """Signed distances of ``points`` (..., 3) to the obstacles ``packed`` (O, 16)
    (:meth:`ros2_ik.world.World.packed`): (d (..., O), grad (..., O, 3)), the gradient a unit
    vector in the base frame (the direction in which the distance grows)."""
    xp = get_xp(points)
    ob = xp.asarray(packed)
    kind = ob[:, 0]
    R = ob[:, 1:10].reshape(-1, 3, 3)
    o = ob[:, 10:13]
    a, b, c = ob[:, 13], ob[:, 14], ob[:, 15]
    l = xp.einsum("oji,...oj->...oi", R, points[..., None, :] - o)  # R^T (p - o), (..., O, 3)
    lx, ly, lz = l[..., 0], l[..., 1], l[..., 2]
    one = xp.ones_like(lx)
    zero = xp.zeros_like(lx)
    sx, sy, sz = (xp.where(v < 0, -one, one) for v in (lx, ly, lz))

    # sphere: |l| - r
    n_s = xp.sqrt(lx * lx + ly * ly + lz * lz)
    safe = xp.where(n_s > _TINY, n_s, 1.0)
    d_s = n_s - a
    g_s = xp.stack([xp.where(n_s > _TINY, lx / safe, zero), xp.where(n_s > _TINY, ly / safe, zero),
                    xp.where(n_s > _TINY, lz / safe, one)], axis=-1)
    # box: half sizes (a, b, c)
    qx, qy, qz = xp.abs(lx) - a, xp.abs(ly) - b, xp.abs(lz) - c
    mx, my, mz = xp.maximum(qx, 0.0), xp.maximum(qy, 0.0), xp.maximum(qz, 0.0)
    out = xp.sqrt(mx * mx + my * my + mz * mz)
    inside = xp.minimum(xp.maximum(qx, xp.maximum(qy, qz)), 0.0)
    d_b = out + inside
    so = xp.where(out > _TINY, out, 1.0)
    kx = (qx >= qy) & (qx >= qz)
    ky = ~kx & (qy >= qz)
    kz = ~kx & ~ky
    g_b = xp.where((out > _TINY)[..., None],
                   xp.stack([sx * mx / so, sy * my / so, sz * mz / so], axis=-1),
                   xp.stack([xp.where(kx, sx, zero), xp.where(ky, sy, zero),
                             xp.where(kz, sz, zero)], axis=-1))
    # cylinder: radius a, half length b, axis z
    rho = xp.sqrt(lx * lx + ly * ly)
    sr = xp.where(rho > _TINY, rho, 1.0)
    ux, uy = xp.where(rho > _TINY, lx / sr, one), xp.where(rho > _TINY, ly / sr, zero)
    q1, q2 = rho - a, xp.abs(lz) - b
    m1, m2 = xp.maximum(q1, 0.0), xp.maximum(q2, 0.0)
    out_c = xp.sqrt(m1 * m1 + m2 * m2)
    d_c = out_c + xp.minimum(xp.maximum(q1, q2), 0.0)
    soc = xp.where(out_c > _TINY, out_c, 1.0)
    radial = q1 >= q2
    g_c = xp.where((out_c > _TINY)[..., None],
                   xp.stack([ux * m1 / soc, uy * m1 / soc, sz * m2 / soc], axis=-1),
                   xp.stack([xp.where(radial, ux, zero), xp.where(radial, uy, zero),
                             xp.where(radial, zero, sz)], axis=-1))
    # capsule: radius a, segment z in [-b, b]
    zc = xp.minimum(xp.maximum(lz, -b), b)
    vz = lz - zc
    n_k = xp.sqrt(lx * lx + ly * ly + vz * vz)
    sk = xp.where(n_k > _TINY, n_k, 1.0)
    d_k = n_k - a
    g_k = xp.stack([xp.where(n_k > _TINY, lx / sk, one), xp.where(n_k > _TINY, ly / sk, zero),
                    xp.where(n_k > _TINY, vz / sk, zero)], axis=-1)
    # half-space: below the x-y plane
    d_h = lz
    g_h = xp.stack([zero, zero, one], axis=-1)

    d = xp.where(kind == _SPHERE, d_s, xp.where(kind == _BOX, d_b, xp.where(
        kind == _CYL, d_c, xp.where(kind == _CAPS, d_k, d_h))))
    k = kind[:, None]
    g = xp.where(k == _SPHERE, g_s, xp.where(k == _BOX, g_b, xp.where(
        k == _CYL, g_c, xp.where(k == _CAPS, g_k, g_h))))
    return d, xp.einsum("oij,...oj->...oi", R, g)


def penalty(x, eta: float):
    """(value, derivative) of the penalty of clearances ``x`` (see the module docstring)."""
    xp = get_xp(x)
    if eta <= 0:
        return xp.maximum(-x, 0.0), xp.where(x < 0, -1.0, 0.0)
    in_band = (x >= 0) & (x < eta)
    v = xp.where(x >= eta, 0.0, xp.where(in_band, (eta - x) ** 2 / (2 * eta), 0.5 * eta - x))
    dv = xp.where(x >= eta, 0.0, xp.where(in_band, -(eta - x) / eta, -1.0))
    return v, dv


def sphere_centers(model: Model, cm: CollisionModel, T):
    """The spheres' centres (..., S, 3) in the base frame from link poses ``T`` (..., L, 4, 4)."""
    xp = get_xp(T)
    links = const(xp, cm.links[cm.sphere_link])
    Tl = T[..., links, :, :]
    return xp.einsum("...sij,sj->...si", Tl[..., :3, :3], const(xp, cm.center)) + Tl[..., :3, 3]


class CollisionObjective(Objective):
    """Keeps the robot clear of itself and of ``world`` (see the module docstring).

    Args:
        model, collision: the robot and its :class:`~ros2_ik.model.collision.CollisionModel`.
        world: a :class:`~ros2_ik.world.World`, or None (self-collision only).
        margin: [m] the clearance an answer must have.
        activation: [m] the penalty starts this far beyond the margin.
        weight: the rows' weight (1: a metre of penetration weighs as a metre of position
            error).
        self_collisions: check the collision model's self pairs.
    """

    def __init__(self, model: Model, collision: CollisionModel, world: World | None = None, *,
                 margin: float = 0.01, activation: float = 0.005, weight: float = 1.0,
                 self_collisions: bool = True):
        self.model, self.cm = model, collision
        self.world = world if world is not None else World()
        self.margin, self.activation, self.weight = float(margin), float(activation), float(weight)
        self.pairs = collision.sphere_pairs() if self_collisions else np.zeros((0, 2), np.int64)
        self.packed = self.world.packed()
        S, O = collision.num_spheres, len(self.world)
        self.dim = int(self.pairs.shape[0] + S * O)

    def take(self, start, stop):
        return self  # no per-problem data

    def _points(self, ctx: EvalContext):
        """Sphere centres (N, S, 3) and their position Jacobians (N, S, 3, nv_active)."""
        xp = ctx.xp
        cm = self.cm
        c = sphere_centers(self.model, cm, ctx.T)
        N, S = c.shape[0], c.shape[1]
        Jc = xp.zeros((N, S, 3, self.model.nv_active))
        for k, link in enumerate(cm.links):
            sl = cm.spheres_of(k)
            if sl.stop == sl.start:
                continue
            J = ctx.world_jacobian(int(link))  # (N, 6, nva) at the link's origin
            r = c[:, sl] - ctx.T[:, int(link), None, :3, 3]  # (N, s, 3)
            Jw = J[:, None, 3:]  # (N, 1, 3, nva)
            cross = xp.stack([Jw[:, :, 1] * r[..., 2:3] - Jw[:, :, 2] * r[..., 1:2],
                              Jw[:, :, 2] * r[..., 0:1] - Jw[:, :, 0] * r[..., 2:3],
                              Jw[:, :, 0] * r[..., 1:2] - Jw[:, :, 1] * r[..., 0:1]], axis=2)
            Jc[:, sl] = J[:, None, :3] + cross
        return c, Jc

    def distances(self, ctx: EvalContext):
        """(self distances (N, n_pairs), world distances (N, S, O)) with their gradients with
        respect to the first sphere's centre: ((d, n), (d, g))."""
        xp = ctx.xp
        c = sphere_centers(self.model, self.cm, ctx.T)
        return self._distances(c, xp)

    def _distances(self, c, xp):
        rad = const(xp, self.cm.radius)
        a, b = const(xp, self.pairs[:, 0]), const(xp, self.pairs[:, 1])
        diff = c[:, a] - c[:, b]
        dist = xp.sqrt(xp.sum(diff * diff, axis=-1))
        safe = xp.where(dist > _TINY, dist, 1.0)
        n = xp.where((dist > _TINY)[..., None], diff / safe[..., None], xp.asarray([0.0, 0.0,
                                                                                     1.0]))
        d_self = dist - rad[a] - rad[b]
        if self.packed.shape[0]:
            d_w, g_w = sdf(const(xp, self.packed), c)
            d_w = d_w - rad[None, :, None]
            # spheres rigidly attached to the base are not checked against the world
            fixed = const(xp, self.cm.static[self.cm.sphere_link])
            d_w = xp.where(fixed[None, :, None], _FAR, d_w)
        else:
            d_w, g_w = xp.zeros(c.shape[:2] + (0,)), xp.zeros(c.shape[:2] + (0, 3))
        return (d_self, n), (d_w, g_w)

    def residual(self, ctx, problem_idx):
        xp = ctx.xp
        c, Jc = self._points(ctx)
        (d_self, n), (d_w, g_w) = self._distances(c, xp)
        w = self.weight
        N, nva = c.shape[0], Jc.shape[-1]
        a, b = const(xp, self.pairs[:, 0]), const(xp, self.pairs[:, 1])
        v, dv = penalty(d_self - self.margin, self.activation)
        J_self = xp.einsum("nkx,nkxv->nkv", n, Jc[:, a] - Jc[:, b]) * (w * dv)[..., None]
        v2, dv2 = penalty(d_w - self.margin, self.activation)
        J_w = xp.einsum("nsox,nsxv->nsov", g_w, Jc) * (w * dv2)[..., None]
        r = xp.concatenate([w * v, (w * v2).reshape(N, -1)], axis=1)
        J = xp.concatenate([J_self, J_w.reshape(N, -1, nva)], axis=1)
        return r, J

    def constraint(self, ctx, problem_idx):
        """(N,) the smallest distance less the margin (>= 0: clear enough)."""
        return self.nearest(ctx)[0] - self.margin

    def nearest(self, ctx):
        """(N,) smallest distance, and (N,) which: an index into the self pairs, or
        ``n_pairs + s * O + o`` for sphere s and obstacle o (-1: nothing checked)."""
        xp = ctx.xp
        (d_self, _), (d_w, _) = self.distances(ctx)
        N = d_self.shape[0]
        allv = xp.concatenate([d_self, d_w.reshape(N, -1)], axis=1)
        if allv.shape[1] == 0:
            return xp.full(N, xp.inf), xp.full(N, -1)
        k = xp.argmin(allv, axis=1)
        return xp.take_along_axis(allv, k[:, None], axis=1)[:, 0], k

    def describe(self, which: int) -> str:
        """The pair ``which`` (:meth:`nearest`) in words."""
        cm = self.cm
        npairs = self.pairs.shape[0]
        if which < 0:
            return "nothing"
        if which < npairs:
            sa, sb = self.pairs[which]
            return (f"links {cm.link_names[cm.sphere_link[sa]]!r} and "
                    f"{cm.link_names[cm.sphere_link[sb]]!r}")
        s, o = divmod(which - npairs, max(len(self.world), 1))
        return (f"link {cm.link_names[cm.sphere_link[s]]!r} and obstacle "
                f"{self.world.ids[o]!r}")


def clearance(model: Model, cm: CollisionModel, q, world: World | None = None, *,
              self_collisions: bool = True):
    """The exact check of configurations ``q`` (B, nq): (distance (B,), pair index (B,),
    describe) with ``describe(index) -> str`` naming the nearest pair (see
    :meth:`CollisionObjective.nearest`)."""
    obj = CollisionObjective(model, cm, world, margin=0.0, self_collisions=self_collisions)
    xp = get_xp(q)
    q = xp.atleast_2d(xp.asarray(q, dtype=xp.float64))
    ctx = EvalContext(model, q, q)
    d, k = obj.nearest(ctx)
    return to_numpy(d), to_numpy(k), obj.describe


def sample_disabled_pairs(model: Model, cm: CollisionModel, samples: int = 10_000,
                          rng_seed: int = 0, batch: int = 1000,
                          always: float = 0.95) -> list:
    """The link pairs to disable, as MoveIt's setup assistant finds them: ``[(link, link,
    reason)]`` with reason "Adjacent" (the collision model's structural pairs), "Always" (their
    spheres overlap in at least ``always`` of ``samples`` random configurations within the
    limits: parts that are in contact by construction) or "Never" (no overlap in any sample),
    in the collision model's order. A "Never" pair was never seen to collide."""
    if not 1 <= int(samples) <= 10_000_000:
        raise InvalidInputError(f"samples must be in [1, 1e7], got {samples}")
    pairs = [tuple(p) for p in cm.pairs.tolist()]
    obj = CollisionObjective(model, cm, None, margin=0.0)
    sp = obj.pairs
    link_of = cm.sphere_link
    index = {p: i for i, p in enumerate(pairs)}
    pair_of = np.array([index[(int(link_of[a]), int(link_of[b]))] for a, b in sp], np.int64) \
        if sp.size else np.zeros(0, np.int64)
    hits = np.zeros(len(pairs), dtype=np.int64)
    rng = np.random.default_rng(rng_seed)
    done = 0
    while done < samples:
        n = min(batch, samples - done)
        q = model.random_q(rng, n)
        c = sphere_centers(model, cm, fk(model, q, check=False))
        (d_self, _), _ = obj._distances(c, np)
        per = np.zeros((n, len(pairs)), dtype=bool)
        for j, p in enumerate(pair_of):
            per[:, p] |= d_self[:, j] < 0.0
        hits += per.sum(axis=0)
        done += n
    out = [(a, b, why) for a, b, why in cm.disabled if why == "Adjacent"]
    for (a, b), h in zip(pairs, hits):
        if h == 0:
            out.append((cm.link_names[a], cm.link_names[b], "Never"))
        elif h >= always * samples:
            out.append((cm.link_names[a], cm.link_names[b], "Always"))
    return out


def srdf_entries(pairs) -> str:
    """``<disable_collisions>`` lines for an SRDF from ``[(link, link, reason)]``."""
    return "\n".join(f'  <disable_collisions link1="{a}" link2="{b}" reason="{why}"/>'
                     for a, b, why in pairs) + "\n"


#: random configurations sampled for a model's "Always" pairs when no SRDF says which pairs
#: to skip (:func:`default_collision_model`)
ALWAYS_SAMPLES = 1000


def default_collision_model(model: Model, srdf=None) -> CollisionModel:
    """The collision model a solve uses when none is given: :func:`collision_model` of the
    model with ``srdf`` (or a bundled robot's own). Without an SRDF's ``disable_collisions``,
    pairs whose spheres overlap in 95 % of :data:`ALWAYS_SAMPLES` random configurations (parts
    in contact by construction, which would make every answer collide) are left out as "Always"
    ones; ``ros2_ik_collision_pairs`` writes the full list (adjacent, always, never) for an
    SRDF. Kept with the model."""
    from ..model.collision import collision_model  # noqa: PLC0415

    def build():
        cm = collision_model(model) if srdf is None else collision_model(model, srdf=srdf)
        if any(why not in ("Adjacent",) for _, _, why in cm.disabled):
            return cm  # an SRDF said which pairs to skip
        always = [(a, b) for a, b, why in sample_disabled_pairs(model, cm, ALWAYS_SAMPLES)
                  if why == "Always"]
        return cm.with_disabled(always, "Always") if always else cm

    key = "default" if srdf is None else ("srdf", id(srdf))
    return model.memo("ik.collision.default", key, build)
