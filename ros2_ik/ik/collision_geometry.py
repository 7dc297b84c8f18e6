"""The geometry of the collision terms (:mod:`ros2_ik.ik.collision`): signed distances of
points to the world's primitives (:func:`sdf`, :func:`sdf_rows`), the obstacles' bounding
radii, the smooth penalty of a clearance, the spheres' centres from link poses, and the
collision model's arrays as the checks read them (:func:`check_tables`)."""

from __future__ import annotations

import numpy as np

from ..backend import const, get_xp
from ..model import Model
from ..model.collision import GROUP, CollisionModel
from ..world import SHAPE_CODES, bounding_radius

__all__ = ["TINY", "sdf", "sdf_rows", "bounding_radius", "penalty", "sphere_centers",
           "place_points", "CheckTables", "check_tables"]

_SPHERE, _BOX, _CYL, _CAPS, _HALF = (SHAPE_CODES[s] for s in ("sphere", "box", "cylinder",
                                                               "capsule", "halfspace"))
TINY = 1e-12


def sdf_rows(ob, p):
    """Signed distance of points ``p`` (..., 3) to obstacles ``ob`` (..., 16) (one obstacle
    per point, broadcast; :meth:`ros2_ik.world.World.packed` rows): ``(d (...), grad (..., 3))``,
    the gradient a unit vector in the base frame (the direction in which the distance grows)."""
    xp = get_xp(p)
    ob = xp.asarray(ob)
    kind = ob[..., 0]
    R = ob[..., 1:10].reshape(ob.shape[:-1] + (3, 3))
    o = ob[..., 10:13]
    a, b = ob[..., 13], ob[..., 14]
    c = ob[..., 15]
    l = xp.einsum("...ji,...j->...i", R, p - o)  # R^T (p - o)
    lx, ly, lz = l[..., 0], l[..., 1], l[..., 2]
    one = xp.ones_like(lx)
    zero = xp.zeros_like(lx)
    sx, sy, sz = (xp.where(v < 0, -one, one) for v in (lx, ly, lz))
    # sphere: |l| - r
    n_s = xp.sqrt(lx * lx + ly * ly + lz * lz)
    safe = xp.where(n_s > TINY, n_s, 1.0)
    d_s = n_s - a
    g_s = xp.stack([xp.where(n_s > TINY, lx / safe, zero), xp.where(n_s > TINY, ly / safe, zero),
                    xp.where(n_s > TINY, lz / safe, one)], axis=-1)
    # box: half sizes (a, b, c)
    qx, qy, qz = xp.abs(lx) - a, xp.abs(ly) - b, xp.abs(lz) - c
    mx, my, mz = xp.maximum(qx, 0.0), xp.maximum(qy, 0.0), xp.maximum(qz, 0.0)
    out = xp.sqrt(mx * mx + my * my + mz * mz)
    inside = xp.minimum(xp.maximum(qx, xp.maximum(qy, qz)), 0.0)
    d_b = out + inside
    so = xp.where(out > TINY, out, 1.0)
    kx = (qx >= qy) & (qx >= qz)
    ky = ~kx & (qy >= qz)
    kz = ~kx & ~ky
    g_b = xp.where((out > TINY)[..., None],
                   xp.stack([sx * mx / so, sy * my / so, sz * mz / so], axis=-1),
                   xp.stack([xp.where(kx, sx, zero), xp.where(ky, sy, zero),
                             xp.where(kz, sz, zero)], axis=-1))
    # cylinder: radius a, half length b, axis z
    rho = xp.sqrt(lx * lx + ly * ly)
    sr = xp.where(rho > TINY, rho, 1.0)
    ux, uy = xp.where(rho > TINY, lx / sr, one), xp.where(rho > TINY, ly / sr, zero)
    q1, q2 = rho - a, xp.abs(lz) - b
    m1, m2 = xp.maximum(q1, 0.0), xp.maximum(q2, 0.0)
    out_c = xp.sqrt(m1 * m1 + m2 * m2)
    d_c = out_c + xp.minimum(xp.maximum(q1, q2), 0.0)
    soc = xp.where(out_c > TINY, out_c, 1.0)
    radial = q1 >= q2
    g_c = xp.where((out_c > TINY)[..., None],
                   xp.stack([ux * m1 / soc, uy * m1 / soc, sz * m2 / soc], axis=-1),
                   xp.stack([xp.where(radial, ux, zero), xp.where(radial, uy, zero),
                             xp.where(radial, zero, sz)], axis=-1))
    # capsule: radius a, segment z in [-b, b]
    zc = xp.minimum(xp.maximum(lz, -b), b)
    vz = lz - zc
    n_k = xp.sqrt(lx * lx + ly * ly + vz * vz)
    sk = xp.where(n_k > TINY, n_k, 1.0)
    d_k = n_k - a
    g_k = xp.stack([xp.where(n_k > TINY, lx / sk, one), xp.where(n_k > TINY, ly / sk, zero),
                    xp.where(n_k > TINY, vz / sk, zero)], axis=-1)
    # half-space: below the x-y plane
    d_h = lz
    g_h = xp.stack([zero, zero, one], axis=-1)
    d = xp.where(kind == _SPHERE, d_s, xp.where(kind == _BOX, d_b, xp.where(
        kind == _CYL, d_c, xp.where(kind == _CAPS, d_k, d_h))))
    k = kind[..., None]
    g = xp.where(k == _SPHERE, g_s, xp.where(k == _BOX, g_b, xp.where(
        k == _CYL, g_c, xp.where(k == _CAPS, g_k, g_h))))
    return d, xp.einsum("...ij,...j->...i", R, g)


def sdf(packed, points):
    """Signed distances of ``points`` (..., 3) to every obstacle of ``packed`` (O, 16)
    (:meth:`ros2_ik.world.World.packed`): (d (..., O), grad (..., O, 3))."""
    xp = get_xp(points)
    ob = xp.asarray(packed)
    return sdf_rows(ob, points[..., None, :] + 0.0 * ob[..., 10:13])


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


def place_points(xp, Tl, local):
    """Points ``local`` (..., 3) given in the frames ``Tl`` (..., 4, 4) (broadcast): (..., 3)
    in the base frame."""
    return xp.einsum("...ij,...j->...i", Tl[..., :3, :3], local) + Tl[..., :3, 3]


class CheckTables:
    """The collision model's arrays as the checks read them (NumPy, kept per model)."""

    def __init__(self, cm: CollisionModel):
        self.S = cm.num_spheres
        self.anchor = np.asarray(cm.links, dtype=np.int64)
        self.lb_c, self.lb_r = cm.link_bounds()
        g_link, self.gb_c, self.gb_r = cm.groups()
        self.g_link = g_link
        self.s_anchor = self.anchor[cm.sphere_link]
        gs = cm.group_start
        G = len(gs) - 1
        self.g_anchor = self.anchor[g_link] if G else np.zeros(0, np.int64)
        pad = np.full((max(G, 1), GROUP), -1, dtype=np.int64)
        for g in range(G):
            pad[g, :gs[g + 1] - gs[g]] = np.arange(gs[g], gs[g + 1])
        self.g_spheres = pad
        self.link_groups = [np.nonzero(g_link == c)[0] for c in range(len(cm.link_names))]


def check_tables(cm: CollisionModel) -> CheckTables:
    """The collision model's :class:`CheckTables` (built once, kept on the model)."""
    t = cm.__dict__.get("_check_tables")
    if t is None:
        t = cm.__dict__["_check_tables"] = CheckTables(cm)
    return t
