"""Collision terms of the IK specification (the readable reference the generated kernels
follow, :mod:`ros2_ik.backends.terms.collision_kernels`).

- :func:`sdf`: signed distance (and its gradient) of points to the world's primitives
  (:mod:`ros2_ik.world`; negative inside).
- :func:`penalty`: the smooth penalty of a clearance ``x = distance - margin`` with activation
  distance ``eta`` (cuRobo's and PyRoki's shape): 0 for ``x >= eta``, ``(eta - x)^2 / (2 eta)``
  on ``[0, eta)``, ``eta / 2 - x`` below 0 (linear: a deep penetration is pushed out at the rate
  of a shallow one); ``eta = 0`` is the hinge ``max(0, -x)``.
- :class:`CollisionObjective`: one penalty row ``w * penalty`` per pair of sphere groups (the
  collision model's self pairs) and per group and obstacle within ``margin + activation``, at
  its first penetrating sphere pair in the kernels' loop order, else its nearest (so the push
  does not grow with how finely a surface is covered, and a deep penetration is not searched
  for its deepest point),
  with its analytic Jacobian ``w * penalty' * n^T J_p`` (``n`` the distance's gradient, ``J_p`` the
  sphere centre's position Jacobian). The rows are summed into ``J^T J``, ``J^T r`` and the cost,
  as the compiled kernels do, and handed to the solver as ``nv + 1`` equivalent rows
  (:func:`compact_rows`). Its :meth:`~CollisionObjective.constraint` is the smallest distance
  less the margin: a solve converges only where it is >= 0, and the answer is verified by it.
- :func:`clearance`: the check of configurations (distance, and which pair is nearest).
- :func:`sample_disabled_pairs`: the never- and always-colliding link pairs, by sampling (as
  MoveIt's setup assistant does), for an SRDF; :func:`always_touching`: links that touch an
  obstacle in (nearly) every configuration.

**Which pairs are looked at** (the kernels do the same, in the same order of tests): a link
pair (a link and an obstacle) whose bounding spheres are ``margin + activation`` apart or more
adds nothing, so it is skipped after one distance; within a near link pair, a pair of sphere
groups likewise; within near groups every sphere pair. The smallest distance is therefore exact
below ``margin + activation`` and, above it, the bound that skipped the rest (never more than
the true distance). Distances are between the collision model's spheres
(:mod:`ros2_ik.model.collision`, which cover the URDF's geometry) and the world's primitives,
exactly. An obstacle whose :attr:`~ros2_ik.world.Obstacle.touch` names a collision link is not
checked against that link (MoveIt's allowed collisions).

Pair numbers (:meth:`CollisionObjective.nearest`, the kernels' ``pair`` output): ``a * S + b``
for spheres ``a`` and ``b`` of a self pair (``S`` spheres), ``S * S + s * O + o`` for sphere
``s`` and obstacle ``o`` (``O`` obstacles), -1 when the nearest is a skipped pair's bound.
"""

from __future__ import annotations

import numpy as np

from ..backend import add_at, const, get_xp, to_numpy
from ..errors import InvalidInputError
from ..kinematics.fk import fk
from ..model import Model, check_model
from ..model.collision import CollisionModel
from ..validate import check_number
from ..world import LEAF, World
from .collision_geometry import (TINY, bounding_radius, check_tables, penalty, place_points, sdf,
                                 sdf_rows, sphere_centers)
from .objectives import EvalContext, Objective

__all__ = ["sdf", "penalty", "CollisionObjective", "clearance", "sample_disabled_pairs",
           "srdf_entries", "sphere_centers", "default_collision_model", "ALWAYS_SAMPLES",
           "compact_rows", "always_touching", "link_pair_distances", "sphere_clearances",
           "meshes_within", "MESH_SAMPLES"]

#: configurations x obstacles one step of the world's checks looks at, at most (past it the
#: obstacles are taken a few at a time; each pair may hold a link's groups and spheres)
WORLD_PAIRS = 65_536


class _Acc:
    """What the checks of one batch of configurations gather: the smallest distance and its
    pair, and (with ``rows``) the penalty rows' J^T J, J^T r and cost."""

    def __init__(self, xp, T, nva, rows: bool):
        self.xp, self.T = xp, T
        N = T.shape[0]
        self.clear = xp.full(N, xp.inf)
        self.which = xp.full(N, -1, dtype=xp.int64)
        self.rows = rows
        if rows:
            self.H = xp.zeros((N, nva, nva))
            self.g = xp.zeros((N, nva))
            self.cost = xp.zeros(N)

    def bound(self, idx, d):
        """Skipped pairs of configurations ``idx``: their bounds ``d`` (pair -1)."""
        xp = self.xp
        if not idx.shape[0]:
            return
        cur = self.clear[idx]
        take = d < cur
        # several bounds may land on one configuration: the smallest wins (pair -1 for all)
        tmp = xp.full(self.clear.shape, xp.inf)
        from ..backend import min_at  # noqa: PLC0415

        min_at(xp, tmp, idx[take], d[take])
        better = tmp < self.clear
        self.clear = xp.where(better, tmp, self.clear)
        self.which = xp.where(better, -1, self.which)

    def exact(self, idx, d, pair):
        """Evaluated pairs: distances ``d`` of configurations ``idx`` with pair numbers."""
        xp = self.xp
        if not idx.shape[0]:
            return
        order = xp.lexsort(xp.stack([d, idx]))  # by configuration, then distance
        idx, d, pair = idx[order], d[order], pair[order]
        first = xp.ones(idx.shape[0], dtype=bool)
        first[1:] = idx[1:] != idx[:-1]
        i, dv, pv = idx[first], d[first], pair[first]
        better = dv < self.clear[i]
        self.clear[i[better]] = dv[better]
        self.which[i[better]] = pv[better]


def _nearest_per(xp, group, d):
    """Per value of ``group`` (entries in the kernels' loop order), the index of the first
    negative ``d`` (a penetrating pair: the kernels stop looking there), else of the first
    smallest."""
    if not group.shape[0]:
        return group
    pos = xp.arange(group.shape[0])
    neg = d < 0
    order = xp.lexsort(xp.stack([pos, xp.where(neg, 0.0, d), xp.where(neg, pos, pos.shape[0]),
                                 group]))
    g = group[order]
    first = xp.ones(g.shape[0], dtype=bool)
    first[1:] = g[1:] != g[:-1]
    return order[first]


def compact_rows(cost, H, g):
    """``nv + 1`` rows ``(r (N, nv + 1), J (N, nv + 1, nv))`` with ``J^T J = H``, ``J^T r = g``
    and ``0.5 |r|^2 = cost``: the collision rows' contribution as a solver built on rows takes
    it (``H = V diag(l) V^T``; ``J = diag(sqrt l) V^T``, ``r = diag(1 / sqrt l) V^T g`` and one
    row with no Jacobian for the rest of the cost)."""
    xp = get_xp(H)
    N, n = g.shape
    lam, V = xp.linalg.eigh(H)
    scale = xp.maximum(lam.max(axis=1, keepdims=True), 0.0) * 1e-9 + 1e-300
    pos = lam > scale
    s = xp.sqrt(xp.where(pos, lam, 0.0))
    J = xp.swapaxes(V, 1, 2) * s[:, :, None]
    proj = xp.einsum("nji,nj->ni", V, g)
    r = xp.where(pos, proj / xp.where(pos, s, 1.0), 0.0)
    rest = xp.sqrt(xp.maximum(2.0 * cost - xp.sum(r * r, axis=1), 0.0))
    r = xp.concatenate([r, rest[:, None]], axis=1)
    J = xp.concatenate([J, xp.zeros((N, 1, n))], axis=1)
    return r, J


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
        self.self_collisions = bool(self_collisions)
        self.link_pairs = collision.pairs if self_collisions else np.zeros((0, 2), np.int64)
        self.packed = self.world.packed()
        self.orad = bounding_radius(self.packed)
        self.skip = allowed_mask(collision, self.world)  # (O, C) pairs not checked
        self.tree = self.world.tree()
        self._per_link: dict = {}
        self.dim = model.nv_active + 1

    def take(self, start, stop):
        return self  # no per-problem data

    # ------------------------------------------------------------------ the checks
    def gather(self, T, thr: float, jac=None, rows: bool = False) -> _Acc:
        """The checks of configurations with link poses ``T`` (N, L, 4, 4), looking closely
        at pairs nearer than ``thr`` (see the module docstring); with ``rows``, the penalty
        rows (``jac(link)`` the world Jacobian (N, 6, nv) of a model link)."""
        xp = get_xp(T)
        N = T.shape[0]
        nva = self.model.nv_active
        acc = _Acc(xp, T, nva, rows)
        if N == 0:
            return acc
        tb = check_tables(self.cm)
        lb = place_points(xp, T[:, const(xp, tb.anchor)], const(xp, tb.lb_c)) \
            if len(tb.anchor) else xp.zeros((N, 0, 3))
        for a, b in self.link_pairs.tolist():
            self._self_pair(xp, T, tb, lb, a, b, thr, acc, jac)
        if self.packed.shape[0]:
            for c in range(len(self.cm.link_names)):
                if not self.cm.static[c] and len(tb.link_groups[c]):
                    self._world_link(xp, T, tb, lb, c, thr, acc, jac)
        return acc

    def _rows(self, acc, xp, idx, d, n, pts, anchors, sign_pairs, jac):
        """Penalty rows of the distances ``d`` (K,) of configurations ``idx`` along unit
        directions ``n`` (K, 3) at points ``pts`` ((K, 3), ...) on model links ``anchors``
        ((K,), ...) with signs ``sign_pairs``: summed into acc."""
        v, dv = penalty(d - self.margin, self.activation)
        on = v > 0
        if not bool(to_numpy(xp.any(on))):
            return
        idx, v, dv, n = idx[on], v[on], dv[on], n[on]
        w = self.weight
        row = xp.zeros((idx.shape[0], self.model.nv_active))
        for p, l, sgn in zip(pts, anchors, sign_pairs):
            p, l = p[on], l[on]
            J = self._point_jac(xp, acc.T, idx, l, p, jac)  # (K, 3, nv)
            row = row + sgn * xp.einsum("kx,kxv->kv", n, J)
        row = row * (w * dv)[:, None]
        rv = w * v
        add_at(xp, acc.cost, idx, rv * rv)
        add_at(xp, acc.g, idx, row * rv[:, None])
        add_at(xp, acc.H, idx, row[:, :, None] * row[:, None, :])

    def _point_jac(self, xp, T, idx, links, p, jac):
        """(K, 3, nv) position Jacobians of points ``p`` (K, 3) on model links ``links`` (K,)
        in configurations ``idx`` (K,)."""
        out = xp.zeros((idx.shape[0], 3, self.model.nv_active))
        for l in np.unique(to_numpy(links)).tolist():
            sel = xp.nonzero(links == l)[0]
            J = jac(int(l))[idx[sel]]  # (k, 6, nv)
            o = T[idx[sel], int(l), :3, 3]
            r = p[sel] - o
            Jw = J[:, 3:]
            cross = xp.stack([Jw[:, 1] * r[:, 2:3] - Jw[:, 2] * r[:, 1:2],
                              Jw[:, 2] * r[:, 0:1] - Jw[:, 0] * r[:, 2:3],
                              Jw[:, 0] * r[:, 1:2] - Jw[:, 1] * r[:, 0:1]], axis=1)
            out[sel] = J[:, :3] + cross
        return out

    def _self_pair(self, xp, T, tb, lb, a, b, thr, acc, jac):
        """Link pair (a, b): its bounds, a's groups against b's bound, group pairs, a's
        spheres against b's group, sphere pairs (each level skipped beyond ``thr``); every
        distance of the pair plus its allowance (:attr:`CollisionModel.allowances`)."""
        cm = self.cm
        off = cm.allowance_of(a, b)
        d = xp.linalg.norm(lb[:, a] - lb[:, b], axis=1) - (float(tb.lb_r[a] + tb.lb_r[b]) - off)
        far = d >= thr
        acc.bound(xp.nonzero(far)[0], d[far])
        near = xp.nonzero(~far)[0]
        if not near.shape[0]:
            return
        ga, gb = tb.link_groups[a], tb.link_groups[b]
        A, B = int(tb.anchor[a]), int(tb.anchor[b])
        # a's groups against b's bound
        ca = place_points(xp, T[near, A][:, None], const(xp, tb.gb_c[ga]))  # (n, na, 3)
        d = xp.linalg.norm(ca - lb[near, b][:, None], axis=-1) - const(
            xp, tb.gb_r[ga] + tb.lb_r[b] - off)
        ii, ja = xp.nonzero(d >= thr)
        acc.bound(near[ii], d[ii, ja])
        ii, ja = xp.nonzero(d < thr)
        if not ii.shape[0]:
            return
        # those groups against b's groups
        cfg = near[ii]
        cga = ca[ii, ja]  # (k, 3)
        cb = place_points(xp, T[cfg, B][:, None], const(xp, tb.gb_c[gb]))  # (k, nb, 3)
        rga = const(xp, tb.gb_r[ga])[ja]
        d = xp.linalg.norm(cga[:, None] - cb, axis=-1) - (rga[:, None] + const(
            xp, tb.gb_r[gb] - off))
        kk, jb = xp.nonzero(d >= thr)
        acc.bound(cfg[kk], d[kk, jb])
        kk, jb = xp.nonzero(d < thr)
        if not kk.shape[0]:
            return
        cfg = cfg[kk]
        g_a, g_b = const(xp, ga)[ja[kk]], const(xp, gb)[jb]
        cgb, rgb = cb[kk, jb], const(xp, tb.gb_r)[g_b]
        center, radius = const(xp, cm.center), const(xp, cm.radius)
        # a's spheres against b's group
        sa = const(xp, tb.g_spheres)[g_a]  # (m, GROUP)
        pa = place_points(xp, T[cfg, A][:, None], center[xp.maximum(sa, 0)])  # (m, G, 3)
        ra = radius[xp.maximum(sa, 0)]
        d = xp.linalg.norm(pa - cgb[:, None], axis=-1) - (ra + (rgb[:, None] - off))
        ok = sa >= 0
        m_, ia = xp.nonzero(ok & (d >= thr))
        acc.bound(cfg[m_], d[m_, ia])
        m_, ia = xp.nonzero(ok & (d < thr))
        if not m_.shape[0]:
            return
        # those spheres against b's group's spheres
        cfg = cfg[m_]
        s_a = sa[m_, ia]  # (k,)
        p_a = pa[m_, ia]  # (k, 3)
        sb = const(xp, tb.g_spheres)[g_b[m_]]  # (k, GROUP)
        pb = place_points(xp, T[cfg, B][:, None], center[xp.maximum(sb, 0)])  # (k, G, 3)
        diff = p_a[:, None] - pb
        dist = xp.linalg.norm(diff, axis=-1)
        ds = dist - (radius[s_a][:, None] + (radius[xp.maximum(sb, 0)] - off))
        k2, jb2 = xp.nonzero(sb >= 0)
        dd = ds[k2, jb2]
        S = tb.S
        acc.exact(cfg[k2], dd, s_a[k2] * S + sb[k2, jb2])
        if acc.rows:  # one row per group pair: its first penetrating or nearest sphere pair
            sel = _nearest_per(xp, m_[k2], dd)
            k2, jb2, dd = k2[sel], jb2[sel], dd[sel]
            dm = dist[k2, jb2]
            safe = xp.where(dm > TINY, dm, 1.0)[:, None]
            n = xp.where((dm > TINY)[:, None], diff[k2, jb2] / safe,
                         xp.asarray([0.0, 0.0, 1.0]))
            K = k2.shape[0]
            # a pair with an allowance has no activation band: near by construction, it is
            # pushed only where its spheres overlap
            band = self.activation if off > 0.0 else 0.0
            self._rows(acc, xp, cfg[k2], dd + band, n, (p_a[k2], pb[k2, jb2]),
                       (xp.full(K, A, dtype=xp.int64), xp.full(K, B, dtype=xp.int64)),
                       (1.0, -1.0), jac)

    def _world_link(self, xp, T, tb, lb, c, thr, acc, jac):
        """Link ``c`` against the world: the obstacles on their own each, then the tree
        (:meth:`~ros2_ik.world.World.tree`) walked from its root, a node's children looked at
        only where its box is within ``thr`` of the link's bound (else its bound), a leaf's
        obstacles as the others. Configurations x obstacles are taken at most ``WORLD_PAIRS``
        at a time: memory stays bounded in a world of thousands of boxes."""
        alone, free = self._link_world(c)
        N = T.shape[0]
        step = max(1, WORLD_PAIRS // max(1, N))
        for lo in range(0, alone.size, step):
            o = xp.asarray(alone[lo:lo + step])
            self._world_pairs(xp, T, tb, lb, c, thr, acc, jac,
                              xp.repeat(xp.arange(N), o.shape[0]), xp.tile(o, N))
        tree = self.tree
        if not len(tree) or not free[0]:
            return
        free = xp.asarray(free)
        nlo, nhi = const(xp, tree.lo), const(xp, tree.hi)
        left, right = const(xp, tree.left), const(xp, tree.right)
        first, end, order = const(xp, tree.first), const(xp, tree.end), const(xp, tree.order)
        skip = const(xp, self.skip[:, c])
        r_link = float(tb.lb_r[c])
        step = max(1, WORLD_PAIRS // max(1, len(tree.order) - tree.alone))
        for lo in range(0, N, step):
            ii = xp.arange(lo, min(N, lo + step))
            kk = xp.zeros(ii.shape[0], dtype=xp.int64)
            while ii.shape[0]:
                on = free[kk]  # a node with an obstacle the link may not touch
                ii, kk = ii[on], kk[on]
                p = lb[ii, c]  # the link's bound against the node's box
                gap = xp.maximum(xp.maximum(nlo[kk] - p, 0.0), p - nhi[kk])
                d = xp.linalg.norm(gap, axis=-1) - r_link
                far = d >= thr
                acc.bound(ii[far], d[far])
                ii, kk = ii[~far], kk[~far]
                leaf = left[kk] < 0
                if bool(to_numpy(xp.any(leaf))):  # a leaf's obstacles
                    li, lk = ii[leaf], kk[leaf]
                    pos = first[lk][:, None] + xp.arange(LEAF)[None]
                    ok = pos < end[lk][:, None]
                    o = order[xp.where(ok, pos, 0)]
                    ok &= ~skip[o]
                    r, j = xp.nonzero(ok)
                    self._world_pairs(xp, T, tb, lb, c, thr, acc, jac, li[r], o[r, j])
                ii, kk = ii[~leaf], kk[~leaf]
                ii, kk = xp.concatenate([ii, ii]), xp.concatenate([left[kk], right[kk]])

    def _link_world(self, c: int):
        """(the obstacles on their own that link ``c`` is checked against, in the world's
        order; per node of the tree: does it hold one the link may not touch)."""
        kept = self._per_link.get(c)
        if kept is None:
            tree, free = self.tree, ~self.skip[:, c]
            alone = tree.order[:tree.alone]
            kept = self._per_link[c] = (alone[free[alone]], tree.holds(free))
        return kept

    def _world_pairs(self, xp, T, tb, lb, c, thr, acc, jac, ii, oo):
        """Link ``c`` of configurations ``ii`` against obstacles ``oo`` (pairs, flat): the
        link's bound, its groups, their spheres."""
        cm = self.cm
        ob = const(xp, self.packed)[oo]  # (n, 16)
        orad = const(xp, self.orad)[oo]
        r_link = float(tb.lb_r[c])
        lk = lb[ii, c]
        far = xp.linalg.norm(lk - ob[:, 10:13], axis=-1) - (orad + r_link)
        d, _ = sdf_rows(ob, lk)
        bd = xp.where((orad >= 0) & (far >= thr), far, d - r_link)
        near = bd < thr
        acc.bound(ii[~near], bd[~near])
        sel = xp.nonzero(near)[0]
        if not sel.shape[0]:
            return
        ii, oo = ii[sel], oo[sel]
        groups = tb.link_groups[c]
        anchor = int(tb.anchor[c])
        gc = place_points(xp, T[ii, anchor][:, None], const(xp, tb.gb_c[groups]))  # (n, ng, 3)
        obn = ob[sel][:, None]  # (n, 1, 16)
        orn = orad[sel]
        far_g = xp.linalg.norm(gc - obn[..., 10:13], axis=-1) - (orn[:, None] + const(
            xp, tb.gb_r[groups])[None])
        dg, _ = sdf_rows(obn, gc)
        gd = xp.where((orn >= 0)[:, None] & (far_g >= thr), far_g,
                      dg - const(xp, tb.gb_r[groups])[None])
        gfar = gd >= thr
        k, j = xp.nonzero(gfar)
        acc.bound(ii[k], gd[k, j])
        k, j = xp.nonzero(~gfar)
        if not k.shape[0]:
            return
        sp = const(xp, tb.g_spheres)[const(xp, groups)[j]]  # (m, GROUP)
        cfg, o_loc = ii[k], k
        center, radius = const(xp, cm.center), const(xp, cm.radius)
        p = place_points(xp, T[cfg, anchor][:, None], center[xp.maximum(sp, 0)])  # (m, G, 3)
        obm = obn[o_loc]
        rs = radius[xp.maximum(sp, 0)]
        far_s = xp.linalg.norm(p - obm[..., 10:13], axis=-1) - (orn[o_loc][:, None] + rs)
        d, grad = sdf_rows(obm, p)
        d = d - rs
        use_far = (orn[o_loc] >= 0)[:, None] & (far_s >= thr)
        valid = sp >= 0
        m, s_i = xp.nonzero(valid & use_far)
        acc.bound(cfg[m], far_s[m, s_i])
        m, s_i = xp.nonzero(valid & ~use_far)
        if not m.shape[0]:
            return
        S, O = tb.S, self.packed.shape[0]
        o_glob = oo[o_loc[m]]
        dd = d[m, s_i]
        acc.exact(cfg[m], dd, S * S + sp[m, s_i] * O + o_glob)
        if acc.rows:  # one row per group and obstacle: its first penetrating or nearest sphere
            sel = _nearest_per(xp, m, dd)
            m, s_i, dd = m[sel], s_i[sel], dd[sel]
            la = xp.full(m.shape[0], anchor, dtype=xp.int64)
            self._rows(acc, xp, cfg[m], dd, grad[m, s_i], (p[m, s_i],), (la,), (1.0,), jac)

    # ------------------------------------------------------------------ objective
    def terms(self, ctx: EvalContext):
        """(cost (N,), smallest distance (N,), H (N, nv, nv), g (N, nv)): the penalty rows'
        ``0.5 |r|^2``, ``J^T J`` and ``J^T r``, as the compiled kernels accumulate them."""
        acc = self.gather(ctx.T, self.margin + self.activation, ctx.world_jacobian, rows=True)
        return 0.5 * acc.cost, acc.clear, acc.H, acc.g

    def residual(self, ctx, problem_idx):
        cost, _, H, g = self.terms(ctx)
        return compact_rows(cost, H, g)

    def constraint(self, ctx, problem_idx):
        """(N,) the smallest distance less the margin (>= 0: clear enough)."""
        return self.nearest(ctx)[0] - self.margin

    def nearest(self, ctx):
        """(N,) smallest distance, and (N,) which pair (see the module docstring)."""
        T = ctx.T if isinstance(ctx, EvalContext) else ctx
        acc = self.gather(T, self.margin + self.activation)
        return acc.clear, acc.which

    def describe(self, which: int) -> str:
        """The pair ``which`` (:meth:`nearest`) in words."""
        cm = self.cm
        S = cm.num_spheres
        if which < 0:
            return "nothing within reach"
        if which < S * S:
            sa, sb = divmod(int(which), S)
            return (f"links {cm.link_names[cm.sphere_link[sa]]!r} and "
                    f"{cm.link_names[cm.sphere_link[sb]]!r}")
        s, o = divmod(int(which) - S * S, max(len(self.world), 1))
        return (f"link {cm.link_names[cm.sphere_link[s]]!r} and obstacle "
                f"{self.world.ids[o]!r}")


def allowed_mask(cm: CollisionModel, world: World) -> np.ndarray:
    """(O, C) bool: obstacle o is not checked against collision link c (its ``touch`` names
    the link, or ``"*"`` for every link)."""
    out = np.zeros((len(world), len(cm.link_names)), dtype=bool)
    index = {n: c for c, n in enumerate(cm.link_names)}
    for o, ob in enumerate(world):
        for name in getattr(ob, "touch", ()):
            if name == "*":
                out[o] = True
            elif name in index:
                out[o, index[name]] = True
    return out


def clearance(model: Model, cm: CollisionModel, q, world: World | None = None, *,
              self_collisions: bool = True, reach: float = np.inf):
    """The check of configurations ``q`` (B, nq): (distance (B,), pair index (B,), describe)
    with ``describe(index) -> str`` naming the nearest pair (see
    :meth:`CollisionObjective.nearest`). Exact everywhere by default; with ``reach`` [m],
    exact below it (a lower bound above), as the solvers check."""
    obj = CollisionObjective(model, cm, world, margin=0.0, activation=0.0,
                             self_collisions=self_collisions)
    xp = get_xp(q)
    q = xp.atleast_2d(xp.asarray(q, dtype=xp.float64))
    T = fk(model, q, check=False)
    outs_d, outs_k = [np.zeros(0)], [np.zeros(0, dtype=np.int64)]  # (an empty batch: empty)
    # exact everywhere: every obstacle is looked at down to the spheres, so fewer
    # configurations at once in a large world (memory stays bounded)
    n_obs = len(world) if world is not None else 0
    step = 512 if np.isfinite(reach) or n_obs <= 8 else max(1, 4096 // n_obs)
    for lo in range(0, q.shape[0], step):
        acc = obj.gather(T[lo:lo + step], float(reach))
        outs_d.append(to_numpy(acc.clear))
        outs_k.append(to_numpy(acc.which))
    return np.concatenate(outs_d), np.concatenate(outs_k), obj.describe


def sphere_clearances(model: Model, cm: CollisionModel, q, world: World | None = None, *,
                      self_collisions: bool = True) -> np.ndarray:
    """(S,) each sphere's smallest distance to the world and to the spheres of the links it is
    checked against, at one configuration ``q`` (nq,) (for drawing the model: exact, dense)."""
    q = np.asarray(q, dtype=np.float64).reshape(1, -1)
    c = sphere_centers(model, cm, fk(model, q, check=False))[0]
    per = np.full(cm.num_spheres, np.inf)
    if self_collisions and len(cm.pairs):
        sp = cm.sphere_pairs()
        for lo in range(0, len(sp), 200_000):
            a, b = sp[lo:lo + 200_000, 0], sp[lo:lo + 200_000, 1]
            d = np.linalg.norm(c[a] - c[b], axis=1) - cm.radius[a] - cm.radius[b] + \
                cm.sphere_pair_allowances()[lo:lo + 200_000]
            np.minimum.at(per, a, d)
            np.minimum.at(per, b, d)
    if world is not None and len(world):
        d, _ = sdf(world.packed(), c)
        d = d - cm.radius[:, None]
        skip = allowed_mask(cm, world).T[cm.sphere_link]  # (S, O)
        d = np.where(skip | cm.static[cm.sphere_link][:, None], np.inf, d)
        per = np.minimum(per, d.min(axis=1))
    return per


def link_pair_distances(model: Model, cm: CollisionModel, q, reach: float = 0.0) -> np.ndarray:
    """(B, Pp) the smallest sphere distance of each checked link pair (``cm.pairs``) at
    configurations ``q`` (B, nq): exact below ``reach``, a lower bound above (NumPy)."""
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    T = fk(model, q, check=False)
    out = np.full((q.shape[0], len(cm.pairs)), np.inf)
    for k, (a, b) in enumerate(cm.pairs.tolist()):
        one = CollisionObjective(model, cm, None, margin=0.0, activation=0.0)
        one.link_pairs = np.asarray([[a, b]], dtype=np.int64)
        for lo in range(0, q.shape[0], 512):
            out[lo:lo + 512, k] = one.gather(T[lo:lo + 512], reach).clear
    return out


def sample_disabled_pairs(model: Model, cm: CollisionModel, samples: int = 10_000,
                          rng_seed: int = 0, batch: int = 1000,
                          always: float = 0.95, within: float = 0.0, search_path=()) -> list:
    """The link pairs to disable, as MoveIt's setup assistant finds them: ``[(link, link,
    reason)]`` with reason "Adjacent" (the collision model's structural pairs), "Always" (their
    spheres come nearer than ``within`` (0: overlap) in at least ``always`` of ``samples``
    random configurations within the limits, and so do their meshes (:func:`meshes_within`,
    meshes looked for in ``search_path``; a link whose meshes cannot be read counts by its
    spheres): parts in contact by construction, or never apart by the margin) or "Never" (no
    overlap in any sample), in the collision model's order. A "Never" pair was never seen to
    collide; a pair whose spheres are always near but whose meshes are not is checked
    (:func:`default_collision_model` checks it for contact)."""
    if not 1 <= int(samples) <= 10_000_000:
        raise InvalidInputError(f"samples must be in [1, 1e7], got {samples}")
    hits = _pair_hits(model, cm, samples, rng_seed, batch)
    near = hits if within <= 0 else _pair_hits(model, cm, samples, rng_seed, batch, within)
    out = [(a, b, why) for a, b, why in cm.disabled if why == "Adjacent"]
    names = [(cm.link_names[a], cm.link_names[b]) for a, b in cm.pairs.tolist()]
    near_always = [k for k, n in enumerate(near) if n >= always * samples]
    agree = dict(zip(near_always, meshes_within(model, cm, [names[k] for k in near_always],
                                                within, search_path)))
    for k, (h, n) in enumerate(zip(hits, near)):
        if h == 0 and n < always * samples:
            out.append(names[k] + ("Never",))
        elif n >= always * samples and (agree[k] is None or agree[k] >= always):
            out.append(names[k] + ("Always",))
    return out


def _pair_hits(model, cm, samples, rng_seed, batch=1000, within: float = 0.0) -> np.ndarray:
    """(Pp,) in how many of ``samples`` random configurations each checked pair's spheres are
    nearer than ``within`` (0: overlap)."""
    hits = np.zeros(len(cm.pairs), dtype=np.int64)
    rng = np.random.default_rng(rng_seed)
    done = 0
    while done < samples:
        n = min(batch, samples - done)
        d = link_pair_distances(model, cm, model.random_q(rng, n), within)
        hits += (d < within).sum(axis=0)
        done += n
    return hits


def always_touching(model: Model, cm: CollisionModel, world: World, *, margin: float = 0.0,
                    samples: int = 200, rng_seed: int = 0, always: float = 0.95) -> list:
    """``[(link, obstacle id, fraction)]``: moving links whose spheres come within ``margin``
    of an obstacle in at least ``always`` of ``samples`` random configurations (a robot on a
    table whose shoulder's spheres reach through it): a solve with that world would find no
    clear answer. Links whose bounding sphere is often clear of an obstacle are not looked at
    more closely (cheap for a world of many obstacles)."""
    if not len(world) or not cm.num_spheres:
        return []
    q = model.random_q(np.random.default_rng(rng_seed), samples)
    T = fk(model, q, check=False)
    tb = check_tables(cm)
    packed = world.packed()
    skip = allowed_mask(cm, world)
    lb = place_points(np, T[:, tb.anchor], tb.lb_c)  # (N, C, 3)
    out = []
    orad = bounding_radius(packed)
    for c in range(len(cm.link_names)):
        if cm.static[c]:
            continue
        # the obstacles' bounding spheres first (a lower bound of the distance), the signed
        # distances of the bound's centre only for those often near by it
        far = np.linalg.norm(lb[:, c, None] - packed[None, :, 10:13], axis=-1) - orad
        cand = np.nonzero(((orad < 0) | (np.mean(far - tb.lb_r[c] < margin, axis=0) >= always))
                          & ~skip[:, c])[0]
        if not cand.size:
            continue
        d, _ = sdf(packed[cand], lb[:, c])  # (N, O'): the bound's centre
        often = np.mean(d - tb.lb_r[c] < margin, axis=0) >= always
        for o in cand[often]:
            sl = cm.spheres_of(c)
            cen = place_points(np, T[:, int(tb.anchor[c])][:, None], cm.center[sl])  # (N, s, 3)
            ds, _ = sdf_rows(packed[o], cen)
            frac = float(np.mean((ds - cm.radius[sl]).min(axis=1) < margin))
            if frac >= always:
                out.append((cm.link_names[c], world.ids[o], frac))
    return out


def srdf_entries(pairs) -> str:
    """``<disable_collisions>`` lines for an SRDF from ``[(link, link, reason)]``."""
    return "\n".join(f'  <disable_collisions link1="{a}" link2="{b}" reason="{why}"/>'
                     for a, b, why in pairs) + "\n"


#: random configurations sampled for a model's "Always" pairs (:func:`default_collision_model`)
ALWAYS_SAMPLES = 1000
#: configurations of the first look (:func:`always_within`)
PRE_SAMPLES = 64


def always_within(model: Model, cm: CollisionModel, within: float) -> list:
    """``[(link, link, fraction)]``: the checked pairs of ``cm`` whose spheres come nearer than
    ``within`` [m] (0: overlap) in at least 95 % of :data:`ALWAYS_SAMPLES` random
    configurations of ``model``: a solve with that margin could never answer clear. Kept with
    the model per collision model and margin (measured once)."""
    def build():
        if not len(cm.pairs):
            return cm, []
        # a first look at PRE_SAMPLES configurations: a pair clear in a quarter of them is
        # not within the margin 95 % of the time (for one that is, the chance of so many clear
        # samples is below 1e-6), and is not sampled further
        rng = np.random.default_rng(1)
        near = (link_pair_distances(model, cm, model.random_q(rng, PRE_SAMPLES), within)
                < within).sum(axis=0)
        keep = np.nonzero(near > 0.75 * PRE_SAMPLES)[0]
        if not len(keep):
            return cm, []
        sub = cm._replace(pairs=cm.pairs[keep])
        hits = _pair_hits(model, sub, ALWAYS_SAMPLES, 0, within=within)
        return cm, [(cm.link_names[a], cm.link_names[b], h / ALWAYS_SAMPLES)
                    for (a, b), h in zip(sub.pairs.tolist(), hits)
                    if h >= 0.95 * ALWAYS_SAMPLES]

    # (the value holds the collision model: its id is not reused while the entry is kept)
    return model.memo("ik.collision.always", (id(cm), float(within)), build)[1]


#: configurations at which the meshes of a pair whose spheres nearly always overlap are
#: measured (:func:`meshes_within`)
MESH_SAMPLES = 64
#: [m] the spacing of the surface points :func:`meshes_within` measures between, and the
#: distance at which two meshes count as touching
MESH_SPACING = 0.002
#: surface points of one link's meshes at most, for :func:`meshes_within`, besides its
#: triangles' corners (their spacing grows from 2 mm to keep within it)
MESH_POINTS = 50_000
#: surface points of each link :func:`meshes_within` tests for lying inside the other
CONTAINED_POINTS = 1024


def meshes_within(model: Model, cm: CollisionModel, pairs, within: float,
                  search_path=()) -> list:
    """For each collision link pair ``(a, b)`` (names): the fraction of :data:`MESH_SAMPLES`
    random configurations at which their URDF meshes come within ``within`` [m] (at least
    :data:`MESH_SPACING`) of each other or one lies partly inside the other, or None where a
    link has no geometry that can be read (its spheres were given: they are its geometry).
    Measured between points on their surfaces (at most 2 mm apart, or more for a very large
    link, whose points then come within less often; a distance between such points is never
    less than the meshes' own) and, where those are apart, by whether points of either lie
    inside the other's solid (:func:`ros2_ik.model.concavity.solid`: positive only well
    inside; a link wholly inside another, whose surfaces never meet), so a pair is found near
    only where it is."""
    from ..model.collision import full_tree, link_shapes  # noqa: PLC0415
    from ..model.concavity import lattice_points, lattice_step, solid  # noqa: PLC0415

    full = full_tree(model)
    points, solids = {}, {}
    for name in {n for p in pairs for n in p}:
        shapes = link_shapes(model, name, search_path, full)
        if shapes:
            step = lattice_step(shapes, MESH_SPACING, MESH_POINTS, corners=False)
            points[name] = np.unique(lattice_points(shapes, step), axis=0)
            solids[name] = solid(shapes, points[name], step)
    q = model.random_q(np.random.default_rng(2), MESH_SAMPLES)
    T = fk(model, q, check=False)
    # (a coarser lattice is not given more room: its points come within less often than the
    # meshes do, so a pair is never found near for the lattice's sake)
    lim = max(float(within), MESH_SPACING)
    out = []
    for a, b in pairs:
        if a not in points or b not in points:
            out.append(None)
            continue
        la, lb = int(cm.links[cm.index(a)]), int(cm.links[cm.index(b)])
        tree = solids[b].tree  # (b's points in b's frame; a's placed there)
        # (some of each link's points for the inside tests: one is enough for a link wholly
        # inside the other)
        pa = points[a][::max(1, len(points[a]) // CONTAINED_POINTS)]
        pb = points[b][::max(1, len(points[b]) // CONTAINED_POINTS)]
        near = 0
        for k in range(len(q)):
            R = np.linalg.inv(T[k, lb]) @ T[k, la]
            d, _ = tree.query(points[a] @ R[:3, :3].T + R[:3, 3], k=1,
                              distance_upper_bound=lim)
            near += bool(
                np.any(d <= lim)
                or np.any(solids[b](pa @ R[:3, :3].T + R[:3, 3]) > 0.0)
                or np.any(solids[a]((pb - R[:3, 3]) @ R[:3, :3]) > 0.0))
        out.append(near / len(q))
    return out


def _known_always(model: Model, cm: CollisionModel, within: float, always: list) -> None:
    model.memo("ik.collision.always", (id(cm), float(within)), lambda: (cm, always))


def always_text(always: list, within: float) -> str:
    """What :func:`always_within` found, in words (for a warning)."""
    near = "overlap" if within <= 0 else f"come within {1e3 * within:g} mm (the margin)"
    return (f"their spheres {near} in nearly every configuration ("
            + ", ".join(f"{a!r}-{b!r} {100 * f:.0f} %" for a, b, f in always)
            + f" of {ALWAYS_SAMPLES} samples)")


def default_collision_model(model: Model, srdf=None, *, within: float = 0.0,
                            **kwargs) -> CollisionModel:
    """The collision model a solve uses when none is given: :func:`collision_model` of the
    model with ``srdf`` (or a bundled robot's own) and ``kwargs``, with the pairs whose spheres
    come nearer than ``within`` [m] (a solve's margin: what every answer must keep) in 95 % of
    :data:`ALWAYS_SAMPLES` random configurations, which would make every answer fail, checked
    for contact instead: parts that never part by more than the margin (a UR5's wrist and the
    box on its flange stay 2 cm apart, their spheres closer) get an allowance of ``within``
    (:attr:`CollisionModel.allowances`: their spheres may come within the margin, never
    overlap; the spheres cover the meshes, so the meshes never interpenetrate). Pairs whose
    spheres overlap in 95 % of the samples too are left out where their meshes agree (parts in
    contact by construction: the meshes within ``within`` in 95 % of :data:`MESH_SAMPLES`
    configurations, :func:`meshes_within`), and are checked for contact otherwise (spheres
    that fill a concave link's gap: every answer then fails, and the warning says to fit
    tighter spheres). The SRDF did not disable them; a warning names each kind.
    ``ros2_ik_collision_pairs`` writes the full list (adjacent, always, never) for an SRDF.
    Kept with the model."""
    import warnings  # noqa: PLC0415

    from ..model.collision import CollisionWarning, collision_model  # noqa: PLC0415

    check_model(model)
    within = check_number(within, "within", low=0.0, high=1.0)

    def build():
        cm = collision_model(model, **kwargs) if srdf is None else collision_model(
            model, srdf=srdf, **kwargs)
        always = always_within(model, cm, within)
        if not always:
            return cm
        # those whose spheres do not overlap in most configurations are checked for contact
        # (an allowance of the margin); those that overlap nearly always are left out
        touching = always_within(model, cm, 0.0) if within > 0 else always
        # those left out only where their meshes agree (within the margin nearly always too)
        agree = meshes_within(model, cm, [x[:2] for x in touching], within,
                              kwargs.get("search_path", ()))
        apart = [x for x, f in zip(touching, agree) if f is not None and f < 0.95]
        touching = [x for x, f in zip(touching, agree) if f is None or f >= 0.95]
        left_out = {(a, b) for a, b, _ in touching}
        contact = [x for x in always if (x[0], x[1]) not in left_out]
        out, texts = cm, []
        if contact:
            out = out.with_allowances([(a, b, within) for a, b, _ in contact])
        only = [x for x in contact if x not in apart]
        if only:
            texts.append("self-collision pairs checked for contact only: "
                         + always_text(only, within)
                         + ", so checking them with the margin would make every answer fail; "
                         "their spheres may come within the margin but never overlap (give "
                         "tighter spheres to check them with the margin)")
        if apart:
            texts.append("self-collision pairs whose spheres overlap in nearly every "
                         "configuration though their meshes do not come within the margin ("
                         + ", ".join(f"{a!r}-{b!r}" for a, b, _ in apart) + "): checked for "
                         "contact, so nearly every answer will fail; fit tighter spheres "
                         "(collision_model(..., fit_to_mesh=True): a concave link's spheres "
                         "fill its gaps), or disable the pair in the SRDF if it may touch")
        if touching:
            texts.append("self-collision pairs left out: " + always_text(touching, 0.0)
                         + ", so checking them would make every answer fail; answers are not "
                         "checked for them (disable them in the SRDF to silence this, or give "
                         "tighter spheres)")
            out = out.with_disabled([(a, b) for a, b, _ in touching], "Always")
        for text in texts:
            warnings.warn(text, CollisionWarning, stacklevel=3)
        out = out._replace(warnings=out.warnings + tuple(texts))
        _known_always(model, out, within, [])  # (what is left was measured: no such pair)
        return out

    try:
        args = tuple(sorted((k, v if not isinstance(v, list) else tuple(v))
                            for k, v in kwargs.items()))
        key = ("default" if srdf is None else ("srdf", id(srdf)), within, args)
        hash(key)
    except TypeError:
        return build()
    if srdf is not None:  # (the memo holds the SRDF too, so its id is not reused)
        model.memo("ik.collision.default.srdf", id(srdf), lambda: srdf)
    return model.memo("ik.collision.default", key, build)
