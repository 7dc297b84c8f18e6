"""The collision terms of the one compiled source (part of :mod:`.codegen`'s generator).

What :mod:`ros2_ik.ik.collision` specifies, emitted as C++ templates on the scalar ``S`` so
that the LM rows instantiate them in either dialect (one row, or a vector of lanes) and CUDA
compiles the same text:

- ``r2ik_sdf<S>``: the signed distance of a point to one obstacle of the packed world
  (:meth:`ros2_ik.world.World.packed`) and its gradient, the shape chosen by the obstacle's code
  (uniform across lanes), every data-dependent choice a select;
- ``r2ik_coll<S>``: at a configuration, the collision model's spheres placed by FK along the
  collision links' paths (the robot baked in, as the chains: fixed transforms as literals, axis
  cases chosen, mimic factors), then the penalty of every checked pair (self pairs link pair by
  link pair, then the world obstacle by obstacle), its rows' contribution to ``J^T J`` and
  ``J^T r`` (accumulated in place, not stored as rows), the cost ``0.5 |r|^2`` and the smallest
  distance;
- ``r2ik_coll_min``: the exact check of an answer in float64 (smallest distance and which pair,
  numbered as :meth:`ros2_ik.ik.collision.CollisionObjective.nearest` numbers them).

A link pair (or a link and an obstacle) whose bounding spheres are farther apart than margin +
activation distance adds nothing to the penalty (each of its pairs is at least that far apart),
so it is skipped after one distance: the smallest distance reported is then that bound, exact
below margin + activation. Every function is 1-Lipschitz in the point, so the bound is a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..model import Model
from ..model.chain import ONE_DOF
from ..model.collision import CollisionModel
from ..model.joint_types import JointType
from ..world import SHAPE_CODES
from .ctext import lin as _lin
from .ctext import lit as _lit

__all__ = ["CollisionChain", "collision_chain", "emit_collision"]


@dataclass(frozen=True)
class _Node:
    """A moving joint on a collision link's path (its child link ``link``)."""

    link: int
    parent: int          # node index, -1: the base
    pre: np.ndarray      # (4, 4) parent node frame -> this joint's frame
    axis: tuple
    prismatic: bool
    qi: int
    mult: float
    off: float
    col: int             # column of the solve (index into colq), -1: not moved by it


@dataclass(frozen=True)
class CollisionChain:
    """The collision model as the generator reads it (everything in a node's frame)."""

    nodes: tuple               # _Node, parents first
    link_node: tuple           # per collision link: its node (-1: rigid with the base)
    link_names: tuple
    center: np.ndarray         # (S, 3) spheres' centres in their link's node frame
    radius: np.ndarray         # (S,)
    link_spheres: tuple        # per collision link: (first, stop)
    bound_c: np.ndarray        # (C, 3) a link's bounding sphere, node frame
    bound_r: np.ndarray        # (C,)
    pairs: tuple               # (a, b) collision link pairs checked, the model's order
    qi: tuple                  # coordinates the nodes read

    @property
    def S(self) -> int:
        return int(self.radius.shape[0])

    def ancestry(self, k: int) -> list:
        """Nodes from ``k`` up to the base (``k`` first); [] for -1."""
        out = []
        while k >= 0:
            out.append(k)
            k = self.nodes[k].parent
        return out


def collision_chain(model: Model, cm: CollisionModel, colq) -> CollisionChain | None:
    """The generator's form of ``cm`` for a solve moving coordinates ``colq``, or None when a
    joint on a collision link's path is not revolute, continuous, prismatic or fixed."""
    col_of = {int(c): a for a, c in enumerate(colq)}
    nodes: list[_Node] = []
    node_of: dict[int, int] = {}
    link_node, post_of = [], []
    for l in cm.links:
        path = []
        k = int(l)
        while k > 0:
            path.append(k)
            k = int(model.link_parent[k])
        acc = np.eye(4)
        parent = -1
        for k in reversed(path):
            t = int(model.joint_type[k])
            if t == JointType.FIXED:
                acc = acc @ model.origin[k]
                continue
            if t not in ONE_DOF:
                return None
            if k not in node_of:
                if model.mimic_q[k] >= 0:
                    qi, mult, off = (int(model.mimic_q[k]), float(model.mimic_multiplier[k]),
                                     float(model.mimic_offset[k]))
                else:
                    qi, mult, off = int(model.q_start[k]), 1.0, 0.0
                node_of[k] = len(nodes)
                nodes.append(_Node(link=k, parent=parent, pre=acc @ model.origin[k],
                                   axis=tuple(float(v) for v in model.axis[k]),
                                   prismatic=t == JointType.PRISMATIC, qi=qi, mult=mult, off=off,
                                   col=col_of.get(qi, -1)))
            parent = node_of[k]
            acc = np.eye(4)
        link_node.append(parent)
        post_of.append(acc)
    centers, spans = [], []
    for c in range(len(cm.links)):
        sl = cm.spheres_of(c)
        post = post_of[c]
        centers.append(cm.center[sl] @ post[:3, :3].T + post[:3, 3])
        spans.append((sl.start, sl.stop))
    center = np.concatenate(centers) if centers else np.zeros((0, 3))
    radius = np.asarray(cm.radius, dtype=np.float64)
    bc, br = np.zeros((len(cm.links), 3)), np.zeros(len(cm.links))
    for c, (a, b) in enumerate(spans):
        cen = center[a:b]
        mid = 0.5 * (cen.min(axis=0) + cen.max(axis=0))
        bc[c] = mid
        br[c] = float(np.max(np.linalg.norm(cen - mid, axis=1) + radius[a:b]))
    return CollisionChain(nodes=tuple(nodes), link_node=tuple(link_node),
                          link_names=cm.link_names, center=center, radius=radius,
                          link_spheres=tuple(spans), bound_c=bc, bound_r=br,
                          pairs=tuple((int(a), int(b)) for a, b in cm.pairs),
                          qi=tuple(sorted({n.qi for n in nodes})))


# ---------------------------------------------------------------------- the templates

_SDF = r"""
// signed distance of the point (px, py, pz) to obstacle ob (ros2_ik.world.World.packed: code,
// R row-major, p, half sizes), and its unit gradient in the base frame (ros2_ik.ik.collision.sdf)
template <typename S>
R2IK_FN S r2ik_sdf(const double* ob, const S px, const S py, const S pz, S& gx, S& gy, S& gz) {
  const int kind = (int)ob[0];
  const S dx = px - S(ob[10]), dy = py - S(ob[11]), dz = pz - S(ob[12]);
  const S lx = S(ob[1]) * dx + S(ob[4]) * dy + S(ob[7]) * dz;
  const S ly = S(ob[2]) * dx + S(ob[5]) * dy + S(ob[8]) * dz;
  const S lz = S(ob[3]) * dx + S(ob[6]) * dy + S(ob[9]) * dz;
  const S a = S(ob[13]), b = S(ob[14]), c = S(ob[15]);
  const S zero = S(0), one = S(1), tiny = S(1e-12);
  const S sx = r2ik_sel(lx < zero, -one, one), sy = r2ik_sel(ly < zero, -one, one);
  const S sz = r2ik_sel(lz < zero, -one, one);
  S d, ux, uy, uz;
  if (kind == SHAPE_SPHERE) {
    const S n = sqrt(lx * lx + ly * ly + lz * lz);
    const S sn = r2ik_sel(n > tiny, n, one);
    d = n - a;
    ux = r2ik_sel(n > tiny, lx / sn, zero); uy = r2ik_sel(n > tiny, ly / sn, zero);
    uz = r2ik_sel(n > tiny, lz / sn, one);
  } else if (kind == SHAPE_BOX) {
    const S qx = lx * sx - a, qy = ly * sy - b, qz = lz * sz - c;
    const S mx = r2ik_sel(qx > zero, qx, zero), my = r2ik_sel(qy > zero, qy, zero);
    const S mz = r2ik_sel(qz > zero, qz, zero);
    const S out = sqrt(mx * mx + my * my + mz * mz);
    const S qyz = r2ik_sel(qy > qz, qy, qz);
    const S qm = r2ik_sel(qx > qyz, qx, qyz);
    d = out + r2ik_sel(qm < zero, qm, zero);
    const S so = r2ik_sel(out > tiny, out, one);
    const auto kx = (qx >= qy) & (qx >= qz);  // inside: the nearest face's axis
    const auto ky = qy >= qz;
    const auto o = out > tiny;
    ux = r2ik_sel(o, sx * mx / so, r2ik_sel(kx, sx, zero));
    uy = r2ik_sel(o, sy * my / so, r2ik_sel(kx, zero, r2ik_sel(ky, sy, zero)));
    uz = r2ik_sel(o, sz * mz / so, r2ik_sel(kx, zero, r2ik_sel(ky, zero, sz)));
  } else if (kind == SHAPE_CYLINDER) {
    const S rho = sqrt(lx * lx + ly * ly);
    const S sr = r2ik_sel(rho > tiny, rho, one);
    const S rx = r2ik_sel(rho > tiny, lx / sr, one), ry = r2ik_sel(rho > tiny, ly / sr, zero);
    const S q1 = rho - a, q2 = lz * sz - b;
    const S m1 = r2ik_sel(q1 > zero, q1, zero), m2 = r2ik_sel(q2 > zero, q2, zero);
    const S out = sqrt(m1 * m1 + m2 * m2);
    const S qm = r2ik_sel(q1 > q2, q1, q2);
    d = out + r2ik_sel(qm < zero, qm, zero);
    const S so = r2ik_sel(out > tiny, out, one);
    const auto o = out > tiny;
    const auto radial = q1 >= q2;
    ux = r2ik_sel(o, rx * m1 / so, r2ik_sel(radial, rx, zero));
    uy = r2ik_sel(o, ry * m1 / so, r2ik_sel(radial, ry, zero));
    uz = r2ik_sel(o, sz * m2 / so, r2ik_sel(radial, zero, sz));
  } else if (kind == SHAPE_CAPSULE) {
    const S zc = r2ik_sel(lz > b, b, r2ik_sel(lz < -b, -b, lz));
    const S vz = lz - zc;
    const S n = sqrt(lx * lx + ly * ly + vz * vz);
    const S sn = r2ik_sel(n > tiny, n, one);
    d = n - a;
    ux = r2ik_sel(n > tiny, lx / sn, one); uy = r2ik_sel(n > tiny, ly / sn, zero);
    uz = r2ik_sel(n > tiny, vz / sn, zero);
  } else {  // half-space below the x-y plane
    d = lz;
    ux = zero; uy = zero; uz = one;
  }
  gx = S(ob[1]) * ux + S(ob[2]) * uy + S(ob[3]) * uz;
  gy = S(ob[4]) * ux + S(ob[5]) * uy + S(ob[6]) * uz;
  gz = S(ob[7]) * ux + S(ob[8]) * uy + S(ob[9]) * uz;
  return d;
}

// the penalty of a clearance x (distance - margin) with activation eta, and its derivative
// (ros2_ik.ik.collision.penalty)
template <typename S>
R2IK_FN void r2ik_pen(const S x, const S eta, S& v, S& dv) {
  const S zero = S(0);
  const auto band = (x >= zero) & (x < eta);
  const S e = r2ik_sel(eta > zero, eta, S(1));
  v = r2ik_sel(x >= eta, zero, r2ik_sel(band, (eta - x) * (eta - x) / (S(2) * e),
                                        S(0.5) * eta - x));
  dv = r2ik_sel(x >= eta, zero, r2ik_sel(band, -(eta - x) / e, S(-1)));
}
"""


def _emit_nodes(e, cc: CollisionChain, qv, sincos: bool):
    """Each node's frame after its joint (nR{k}_{0..8} row-major, np{k}_{0..2}), its world
    axis nz{k}_* and joint origin nj{k}_* (before a prismatic joint's travel)."""
    for k, nd in enumerate(cc.nodes):
        pre = nd.pre
        e(f"// node {k}: joint into link {k}")
        p = nd.parent
        A = {}
        for a in range(3):
            for b in range(3):
                if p < 0:
                    A[a, b] = _lit(pre[a, b])
                else:
                    s = _lin([(pre[c, b], f"nR{p}_{3 * a + c}") for c in range(3)])
                    A[a, b] = s if s is not None else "S(0)"
        for a in range(3):
            if p < 0:
                e(f"const S nj{k}_{a} = {_lit(pre[a, 3])};")
            else:
                s = _lin([(pre[c, 3], f"nR{p}_{3 * a + c}") for c in range(3)])
                e(f"const S nj{k}_{a} = np{p}_{a}" + (f" + ({s});" if s else ";"))
        e("const S " + ", ".join(f"A{k}_{a}{b} = {A[a, b]}" for a in range(3) for b in range(3))
          + ";")
        ax = nd.axis
        for a in range(3):
            s = _lin([(ax[b], f"A{k}_{a}{b}") for b in range(3)])
            e(f"const S nz{k}_{a} = {s if s is not None else 'S(0)'};")
        val = qv(nd.qi)
        if nd.mult != 1.0 or nd.off != 0.0:
            val = f"({val} * {_lit(nd.mult)} + {_lit(nd.off)})"
        if nd.prismatic:
            e(f"const S nv{k} = {val};")
            for a in range(3):
                e(f"const S np{k}_{a} = nj{k}_{a} + nz{k}_{a} * nv{k};")
            for a in range(3):
                for b in range(3):
                    e(f"const S nR{k}_{3 * a + b} = A{k}_{a}{b};")
            continue
        for a in range(3):
            e(f"const S np{k}_{a} = nj{k}_{a};")
        e(f"S nc{k}, ns{k};")
        if sincos:
            e(f"r2ik_sincos({val}, ns{k}, nc{k});")
        else:
            e(f"nc{k} = cos({val}); ns{k} = sin({val});")
        x, y, z = ax
        if x == 0.0 and y == 0.0 and abs(z) == 1.0:
            sgn = "" if z > 0 else "-"
            for a in range(3):
                e(f"const S nR{k}_{3 * a} = nc{k} * A{k}_{a}0 + {sgn}ns{k} * A{k}_{a}1;")
                e(f"const S nR{k}_{3 * a + 1} = nc{k} * A{k}_{a}1 - {sgn}ns{k} * A{k}_{a}0;")
                e(f"const S nR{k}_{3 * a + 2} = A{k}_{a}2;")
        else:
            C = f"(S(1) - nc{k})"
            m = {(0, 0): f"nc{k} + {_lit(x * x)} * {C}",
                 (0, 1): f"{_lit(x * y)} * {C} - {_lit(z)} * ns{k}",
                 (0, 2): f"{_lit(x * z)} * {C} + {_lit(y)} * ns{k}",
                 (1, 0): f"{_lit(y * x)} * {C} + {_lit(z)} * ns{k}",
                 (1, 1): f"nc{k} + {_lit(y * y)} * {C}",
                 (1, 2): f"{_lit(y * z)} * {C} - {_lit(x)} * ns{k}",
                 (2, 0): f"{_lit(z * x)} * {C} - {_lit(y)} * ns{k}",
                 (2, 1): f"{_lit(z * y)} * {C} + {_lit(x)} * ns{k}",
                 (2, 2): f"nc{k} + {_lit(z * z)} * {C}"}
            e("const S " + ", ".join(f"m{k}_{i}{j} = {v}" for (i, j), v in m.items()) + ";")
            for a in range(3):
                for b in range(3):
                    e(f"const S nR{k}_{3 * a + b} = A{k}_{a}0 * m{k}_0{b} + A{k}_{a}1 * m{k}_1{b}"
                      f" + A{k}_{a}2 * m{k}_2{b};")


def _place(e, cc: CollisionChain, node: int, local, out: str):
    """``out``x/y/z = a point given in ``node``'s frame, in the base frame."""
    for a, ax in enumerate("xyz"):
        if node < 0:
            e(f"const S {out}{ax} = {_lit(local[a])};")
        else:
            s = _lin([(local[c], f"nR{node}_{3 * a + c}") for c in range(3)])
            e(f"const S {out}{ax} = np{node}_{a}" + (f" + ({s});" if s else ";"))


def _emit_row(e, cc: CollisionChain, node: int, c: str, n: str, sign: str, nc: int):
    """``jr[col] {sign}= coef * (n . J_p(c))[col]`` over the moving ancestors of ``node`` (the
    point ``c``x/y/z, the direction ``n``x/y/z)."""
    for k in cc.ancestry(node):
        nd = cc.nodes[k]
        if nd.col < 0:
            continue
        mult = "" if nd.mult == 1.0 else f" * {_lit(nd.mult)}"
        if nd.prismatic:
            t = f"({n}x * nz{k}_0 + {n}y * nz{k}_1 + {n}z * nz{k}_2)"
        else:
            dx, dy, dz = (f"({c}{a} - nj{k}_{i})" for i, a in enumerate("xyz"))
            t = (f"({n}x * (nz{k}_1 * {dz} - nz{k}_2 * {dy}) + {n}y * (nz{k}_2 * {dx} - nz{k}_0 "
                 f"* {dz}) + {n}z * (nz{k}_0 * {dy} - nz{k}_1 * {dx}))")
        e(f"jr[{nd.col}] = jr[{nd.col}] {sign} coef * {t}{mult};")


def _emit_penalty(e, nc: int, any_, setup: tuple, rows) -> None:
    """A distance ``d`` into the smallest one, and, within margin + activation, its penalty
    row into the cost, ``J^T J`` and ``J^T r``: ``setup`` lines, then ``rows()`` fills
    ``jr``."""
    e("clear = r2ik_sel(d < clear, d, clear);")
    e("const S x = d - margin;")
    with e.block(f"if ({any_('x < act')})"):
        e("S v, dv; r2ik_pen<S>(x, act, v, dv);")
        e("const S rv = wgt * v, coef = wgt * dv;")
        e("cost = cost + rv * rv;")
        for line in setup:
            e(line)
        e(f"S jr[{nc}] = {{}};")
        rows()
        e("r2ik_rank1<S>(H, g, jr, rv);")


def _emit_self_penalty(e, cc: CollisionChain, na: int, nb: int, nc: int, any_):
    """A sphere pair's distance (spheres ``i`` on node ``na``, ``j`` on ``nb``, along
    ``dx``/``dy``/``dz``): :func:`_emit_penalty`."""
    def rows():
        _emit_row(e, cc, na, "pa", "n", "+", nc)
        _emit_row(e, cc, nb, "pb", "n", "-", nc)
    _emit_penalty(e, nc, any_, (
        "const S sd = r2ik_sel(dist > S(1e-12), dist, S(1));",
        "const S nx = r2ik_sel(dist > S(1e-12), dx / sd, S(0)), "
        "ny = r2ik_sel(dist > S(1e-12), dy / sd, S(0)), "
        "nz = r2ik_sel(dist > S(1e-12), dz / sd, S(1));",
        "const S pax = cx[i], pay = cy[i], paz = cz[i];",
        "const S pbx = cx[j], pby = cy[j], pbz = cz[j];"), rows)


def _emit_world_penalty(e, cc: CollisionChain, node: int, nc: int, any_):
    """Sphere ``s``'s signed distance to an obstacle (gradient ``g``): :func:`_emit_penalty`."""
    _emit_penalty(e, nc, any_, ("const S pcx = cx[s], pcy = cy[s], pcz = cz[s];",),
                  lambda: _emit_row(e, cc, node, "pc", "g", "+", nc))


def _emit_body(e, cc: CollisionChain, nc: int, check: bool, any_):
    """The pairs: self link pair by link pair, then the world; ``check``: the smallest
    distance and its pair only (float64, one row)."""
    S = cc.S
    e(f"const double rad[{max(S, 1)}] = {{" + ", ".join(repr(float(r)) for r in cc.radius)
      + ("" if S else "0.0") + "};")
    e(f"S cx[{max(S, 1)}], cy[{max(S, 1)}], cz[{max(S, 1)}];")
    for c, (a, b) in enumerate(cc.link_spheres):
        node = cc.link_node[c]
        for s in range(a, b):
            with e.block(""):
                _place(e, cc, node, cc.center[s], "p")
                e(f"cx[{s}] = px; cy[{s}] = py; cz[{s}] = pz;")
    C = len(cc.link_spheres)
    e(f"S bcx[{max(C, 1)}], bcy[{max(C, 1)}], bcz[{max(C, 1)}];  // the links' bounding spheres")
    for c in range(C):
        with e.block(""):
            _place(e, cc, cc.link_node[c], cc.bound_c[c], "b")
            e(f"bcx[{c}] = bx; bcy[{c}] = by; bcz[{c}] = bz;")
    e("const S thr = margin + act;")
    npairs = 0
    with e.block("if (self_on)"):
        for (la, lb) in cc.pairs:
            a0, a1 = cc.link_spheres[la]
            b0, b1 = cc.link_spheres[lb]
            base = npairs
            npairs += (a1 - a0) * (b1 - b0)
            na, nb = cc.link_node[la], cc.link_node[lb]
            with e.block(""):
                e(f"// links {cc.link_names[la]} - {cc.link_names[lb]}")
                e(f"const S bdx = bcx[{la}] - bcx[{lb}], bdy = bcy[{la}] - bcy[{lb}], "
                  f"bdz = bcz[{la}] - bcz[{lb}];")
                R = float(cc.bound_r[la] + cc.bound_r[lb])
                if check:
                    e(f"const S bd = sqrt(bdx * bdx + bdy * bdy + bdz * bdz) - S({R!r});")
                    near = "bd < thr"
                else:  # (squared: no root for a pair that is skipped)
                    e(f"const S lim = thr + S({R!r});")
                    near = any_("bdx * bdx + bdy * bdy + bdz * bdz < lim * lim")
                with e.block(f"if ({near})"):
                    with e.block(f"for (int i = {a0}; i < {a1}; ++i) "
                                 f"for (int j = {b0}; j < {b1}; ++j)"):
                        e("const S dx = cx[i] - cx[j], dy = cy[i] - cy[j], dz = cz[i] - cz[j];")
                        e("const S d2 = dx * dx + dy * dy + dz * dz;")
                        if not check:  # a pair beyond margin + activation adds nothing
                            e("const S reach = S(rad[i] + rad[j]) + thr;")
                            e(f"if (!{any_('d2 < reach * reach')}) continue;")
                        e("const S dist = sqrt(d2);")
                        e("const S d = dist - S(rad[i] + rad[j]);")
                        if check:
                            e(f"if (d < clear) {{ clear = d; which = {base} + (long long)(i - "
                              f"{a0}) * {b1 - b0} + (j - {b0}); }}")
                        else:
                            _emit_self_penalty(e, cc, na, nb, nc, any_)
                if check:
                    e("else if (bd < clear) { clear = bd; which = -1; }")
    with e.block("for (long long o = 0; o < n_obs; ++o)"):
        e("const double* ob = obs + 16 * o;")
        e("// the obstacle's own bounding sphere (a half-space has none): a link beyond it by")
        e("// margin + activation is skipped without its signed distance")
        e("const int kind = (int)ob[0];")
        e("const double orad = kind == SHAPE_SPHERE ? ob[13] : kind == SHAPE_BOX ? "
          "::sqrt(ob[13] * ob[13] + ob[14] * ob[14] + ob[15] * ob[15]) : kind == "
          "SHAPE_CYLINDER ? ::sqrt(ob[13] * ob[13] + ob[14] * ob[14]) : kind == SHAPE_CAPSULE ? "
          "ob[13] + ob[14] : -1.0;")
        e("const S ox = S(ob[10]), oy = S(ob[11]), oz = S(ob[12]);")
        for c, (a, b) in enumerate(cc.link_spheres):
            node = cc.link_node[c]
            if b == a or node < 0:  # a link rigid with the base is not checked against the world
                continue
            with e.block(""):
                e(f"// link {cc.link_names[c]}")
                R = float(cc.bound_r[c])
                e(f"const S bx = bcx[{c}], by = bcy[{c}], bz = bcz[{c}];")
                e("const S qx = bx - ox, qy = by - oy, qz = bz - oz;")
                e("S gx, gy, gz;")
                if check:
                    e(f"const S far = sqrt(qx * qx + qy * qy + qz * qz) - S(orad + {R!r});")
                    e(f"const S bd = orad < 0.0 || far < thr ? r2ik_sdf<S>(ob, bx, by, bz, gx, "
                      f"gy, gz) - S({R!r}) : far;")
                else:  # the spheres' test first, squared; then the link's signed distance
                    e(f"const S lim = thr + S(orad + {R!r});")
                    e(f"const S bd = orad < 0.0 || "
                      f"{any_('qx * qx + qy * qy + qz * qz < lim * lim')} ? "
                      f"r2ik_sdf<S>(ob, bx, by, bz, gx, gy, gz) - S({R!r}) : thr;")
                with e.block(f"if ({any_('bd < thr')})"):
                    with e.block(f"for (int s = {a}; s < {b}; ++s)"):
                        if not check:  # the sphere against the obstacle's bounding sphere
                            e("const S sx_ = cx[s] - ox, sy_ = cy[s] - oy, sz_ = cz[s] - oz;")
                            e("const S reach = thr + S(orad + rad[s]);")
                            near = any_("sx_ * sx_ + sy_ * sy_ + sz_ * sz_ < reach * reach")
                            e(f"if (orad >= 0.0 && !{near}) continue;")
                        e("const S d = r2ik_sdf<S>(ob, cx[s], cy[s], cz[s], gx, gy, gz) - "
                          "S(rad[s]);")
                        if check:
                            e(f"if (d < clear) {{ clear = d; which = {npairs} + (long long)s * "
                              "n_obs + o; }")
                        else:
                            _emit_world_penalty(e, cc, node, nc, any_)
                if check:
                    e("else if (bd < clear) { clear = bd; which = -1; }")


def emit_collision(e, cc: CollisionChain, nc: int, qvars, qv, check: bool = True):
    """The collision templates (see the module docstring) for a solve with ``nc`` columns
    whose q arguments are ``qvars``; ``check``: also ``r2ik_coll_min``."""
    e("\n".join(f"#ifndef SHAPE_{s.upper()}\n#define SHAPE_{s.upper()} {c}\n#endif"
                 for s, c in SHAPE_CODES.items()))
    e(_SDF)
    e(f"""
template <typename S>
R2IK_FN void r2ik_rank1(S* H, S* g, const S* jr, const S rv) {{
  for (int a = 0; a < {nc}; ++a) {{
    g[a] = g[a] + jr[a] * rv;
    for (int b = 0; b <= a; ++b) H[a * {nc} + b] = H[a * {nc} + b] + jr[a] * jr[b];
  }}
}}""")
    qargs = ", ".join(f"const S q{i}" for i in qvars)
    common = "const double* R2IK_RESTRICT obs, const long long n_obs, const bool self_on"
    e("template <typename S>")
    with e.block(f"R2IK_FN S r2ik_coll({qargs}, {common}, const S margin, const S act, "
                 "const S wgt, S& clear, S* R2IK_RESTRICT H, S* R2IK_RESTRICT g)"):
        e(f"for (int i = 0; i < {nc * nc}; ++i) H[i] = S(0);")
        e(f"for (int i = 0; i < {nc}; ++i) g[i] = S(0);")
        e("S cost = S(0);")
        e("clear = S(1e30);")
        _emit_nodes(e, cc, qv, sincos=True)
        _emit_body(e, cc, nc, False, lambda m: f"r2ik_any_m({m})")
        e(f"for (int a = 0; a < {nc}; ++a) for (int b = a + 1; b < {nc}; ++b) "
          f"H[a * {nc} + b] = H[b * {nc} + a];")
        e("return S(0.5) * cost;")
    if not check:
        return
    with e.block(f"R2IK_FN void r2ik_coll_min({', '.join(f'const double q{i}' for i in qvars)}, "
                 f"{common}, const double margin, const double act, double& clear, "
                 "long long& which)"):
        e("typedef double S;")
        e("clear = 1e30; which = -1;")
        _emit_nodes(e, cc, qv, sincos=False)
        _emit_body(e, cc, nc, True, lambda m: m)


def covered(model: Model, cm: CollisionModel, colq) -> str | None:
    """Why the compiled source cannot carry this collision model (None: it can)."""
    if collision_chain(model, cm, colq) is None:
        return ("a joint on a collision link's path is not revolute, continuous, prismatic or "
                "fixed")
    if cm.num_spheres == 0:
        raise InvalidInputError("the collision model has no spheres")
    return None
