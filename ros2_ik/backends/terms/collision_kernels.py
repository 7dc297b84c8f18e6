"""The collision term's device code (part of the one compiled source; :mod:`.collision` joins
it to the LM rows and the selection).

What :mod:`ros2_ik.ik.collision` specifies, emitted as C++ templates on the scalar ``S`` so
that the LM rows instantiate them in either dialect (one row, or a vector of lanes) and CUDA
compiles the same text. **Only the robot's kinematic structure is compiled**: the frames of
the joints that move collision links (fixed transforms as literals, axis cases chosen, mimic
factors) and the Jacobian rows of a point on each of them. The spheres, their groups and
links, the pairs checked and the obstacles each link may touch are *data*, packed with the
world's obstacles into one array per solve (:func:`pack_scene`, the layout below): a new
sphere fit, MoveIt's attached objects, padding or allowed collisions need no new kernel.

- ``r2ik_sdf<S>``: the signed distance of a point to one obstacle of the packed world
  (:meth:`ros2_ik.world.World.packed`) and its gradient, the shape chosen by the obstacle's code
  (uniform across lanes), every data-dependent choice a select;
- ``r2ik_coll<S>``: at a configuration, the penalty of every checked pair near enough (self
  pairs link pair by link pair, then the world obstacle by obstacle), its rows' contribution to
  ``J^T J`` and ``J^T r`` (accumulated in place, not stored as rows), the cost ``0.5 |r|^2`` and
  the smallest distance evaluated;
- ``r2ik_coll_min``: the check of an answer in float64 (smallest distance and which pair,
  numbered as :meth:`ros2_ik.ik.collision.CollisionObjective.nearest` numbers them).

Both test a link pair (a link and an obstacle) by its bounding spheres, then pairs of sphere
groups, then spheres, and skip what is ``margin + activation`` away or more, exactly as the
reference does (its module docstring): the smallest distance is exact below that and the
skipping bound above. Every function is 1-Lipschitz in the point, so the bound is a bound.

The packed scene (float64): ``n_obs`` obstacle rows of 16, then the robot block: a header of
:data:`HEAD` (links ``C``, groups ``G``, spheres ``S``, pairs ``NP``); per link :data:`LINK_W`
numbers (node, first group, end group, not checked against the world, bounding centre x y z and
radius, in the node's frame); per group :data:`GROUP_W` (first sphere, end sphere, centre x y z,
radius); per sphere x y z r; per pair the two link indices and its allowance (subtracted from
every sum of radii of the pair: its distances are taken plus the allowance); then
``n_obs x C`` flags (1: the obstacle is not checked against the link), each obstacle's
bounding sphere radius (-1: a half-space), the obstacles in the order they are taken (the
header's fifth number ``A`` of them on their own, then the tree's,
:meth:`ros2_ik.world.World.tree`), the tree's nodes (the header's sixth number ``K``), each
:data:`NODE_W` numbers (first and end position in that order, left and right child or -1 for a
leaf, its axis-aligned box: low x y z, high x y z), and ``K x C`` flags (1: no obstacle of
the node is checked against the link). The obstacles on their own are taken one by one; the
tree is walked per link from its root (a stack of :data:`~ros2_ik.world.TREE_DEPTH` entries),
a node's children only where its box is within reach of the link's bound.
"""


from __future__ import annotations

from ...world import SHAPE_CODES
from ..emit.kinematics import emit_column, emit_node_frames, node_value
from ...world import TREE_DEPTH
from .collision_scene import GROUP_W, HEAD, LBMAX, LINK_W, NODE_W, CollisionChain

__all__ = ["emit_collision", "emit_trig", "emit_exact"]

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

// the signed distance alone (r2ik_sdf's value, the same operations): the bounds and the check
template <typename S>
R2IK_FN S r2ik_dist(const double* ob, const S px, const S py, const S pz) {
  const int kind = (int)ob[0];
  const S dx = px - S(ob[10]), dy = py - S(ob[11]), dz = pz - S(ob[12]);
  const S lz = S(ob[3]) * dx + S(ob[6]) * dy + S(ob[9]) * dz;
  if (kind == SHAPE_HALFSPACE) return lz;
  const S lx = S(ob[1]) * dx + S(ob[4]) * dy + S(ob[7]) * dz;
  const S ly = S(ob[2]) * dx + S(ob[5]) * dy + S(ob[8]) * dz;
  const S a = S(ob[13]), b = S(ob[14]), c = S(ob[15]);
  const S zero = S(0), one = S(1);
  const S sz = r2ik_sel(lz < zero, -one, one);
  if (kind == SHAPE_SPHERE) return sqrt(lx * lx + ly * ly + lz * lz) - a;
  if (kind == SHAPE_BOX) {
    const S sx = r2ik_sel(lx < zero, -one, one), sy = r2ik_sel(ly < zero, -one, one);
    const S qx = lx * sx - a, qy = ly * sy - b, qz = lz * sz - c;
    const S mx = r2ik_sel(qx > zero, qx, zero), my = r2ik_sel(qy > zero, qy, zero);
    const S mz = r2ik_sel(qz > zero, qz, zero);
    const S out = sqrt(mx * mx + my * my + mz * mz);
    const S qyz = r2ik_sel(qy > qz, qy, qz);
    const S qm = r2ik_sel(qx > qyz, qx, qyz);
    return out + r2ik_sel(qm < zero, qm, zero);
  }
  if (kind == SHAPE_CYLINDER) {
    const S q1 = sqrt(lx * lx + ly * ly) - a, q2 = lz * sz - b;
    const S m1 = r2ik_sel(q1 > zero, q1, zero), m2 = r2ik_sel(q2 > zero, q2, zero);
    const S qm = r2ik_sel(q1 > q2, q1, q2);
    return sqrt(m1 * m1 + m2 * m2) + r2ik_sel(qm < zero, qm, zero);
  }
  const S zc = r2ik_sel(lz > b, b, r2ik_sel(lz < -b, -b, lz));  // capsule
  const S vz = lz - zc;
  return sqrt(lx * lx + ly * ly + vz * vz) - a;
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


def emit_trig(e, cc: CollisionChain, S: str, qv, name: str, known: dict) -> None:
    """``S name[2 * nodes]``: each revolute node's sine and cosine for ``r2ik_coll`` (its
    ``trig`` argument): the pair of ``known`` ({(q index, mult, offset): (sine, cosine)}, what
    the evaluation computed for the same value), else ``r2ik_sincos``'s (the same function)."""
    e(f"{S} {name}[{max(1, 2 * len(cc.nodes))}];")
    for k, nd in enumerate(cc.nodes):
        if nd.prismatic:
            continue
        got = known.get((int(nd.qi), float(nd.mult), float(nd.off)))
        if got is not None:
            e(f"{name}[{2 * k}] = {got[0]}; {name}[{2 * k + 1}] = {got[1]};")
        else:
            e(f"r2ik_sincos({node_value(nd, qv)}, {name}[{2 * k}], {name}[{2 * k + 1}]);")


def _emit_nodes(e, cc: CollisionChain, qv, sincos: bool):
    """Each node's frame (:func:`ros2_ik.backends.emit.kinematics.emit_node_frames`); a
    revolute joint's sine and cosine from ``trig`` (:func:`emit_trig`, ``sincos``), else from
    ``sin`` / ``cos``."""
    def trig(k, nd, val):
        if sincos:
            e(f"ns{k} = trig[{2 * k}]; nc{k} = trig[{2 * k + 1}];")
        else:
            e(f"nc{k} = cos({val}); ns{k} = sin({val});")

    emit_node_frames(e, cc.nodes, qv, trig)


def _emit_frames(e, cc: CollisionChain):
    """The node frames as arrays indexed by the data's node numbers (``NN``: the base)."""
    NN = len(cc.nodes)
    e(f"S fR[{NN + 1}][9], fp[{NN + 1}][3];")
    for k in range(NN):
        e("".join(f"fR[{k}][{i}] = nR{k}_{i}; " for i in range(9))
          + "".join(f"fp[{k}][{a}] = np{k}_{a}; " for a in range(3)))
    e("".join(f"fR[{NN}][{i}] = S({1.0 if i in (0, 4, 8) else 0.0}); " for i in range(9))
      + "".join(f"fp[{NN}][{a}] = S(0.0); " for a in range(3)))


def _place(e, node: str, ptr: str, out: str):
    """``out``x/y/z = the point ``ptr[0..2]`` (node frame) of node ``node`` in the base frame."""
    e(f"const S {out}x = fp[{node}][0] + fR[{node}][0] * S({ptr}[0]) + fR[{node}][1] * "
      f"S({ptr}[1]) + fR[{node}][2] * S({ptr}[2]);")
    e(f"const S {out}y = fp[{node}][1] + fR[{node}][3] * S({ptr}[0]) + fR[{node}][4] * "
      f"S({ptr}[1]) + fR[{node}][5] * S({ptr}[2]);")
    e(f"const S {out}z = fp[{node}][2] + fR[{node}][6] * S({ptr}[0]) + fR[{node}][7] * "
      f"S({ptr}[1]) + fR[{node}][8] * S({ptr}[2]);")


def _emit_row(e, cc: CollisionChain, node: str, c: str, n: str, sign: str):
    """``jr[col] {sign}= coef * (n . J_p(c))[col]`` over the moving ancestors of the node
    numbered ``node`` at run time (the point ``c``x/y/z, the direction ``n``x/y/z): a switch
    over the nodes, each case the unrolled rows of its ancestors (each column by
    :func:`ros2_ik.backends.emit.kinematics.emit_column`)."""
    with e.block(f"switch ({node})"):
        for k0 in range(len(cc.nodes)):
            cols = [k for k in cc.ancestry(k0) if cc.nodes[k].col >= 0]
            if not cols:
                continue
            e(f"case {k0}:")
            for k in cols:
                nd = cc.nodes[k]
                with e.block(""):
                    emit_column(e, [f"nz{k}_{a}" for a in range(3)],
                                [f"nj{k}_{a}" for a in range(3)], [f"{c}{a}" for a in "xyz"],
                                nd.prismatic, nd.mult)
                    e(f"jr[{nd.col}] = jr[{nd.col}] {sign} coef * ({n}x * vx + {n}y * vy + "
                      f"{n}z * vz);")
            e("  break;")
        e("default: break;")


def _emit_penalty(e, nc: int, any_, setup: tuple, rows) -> None:
    """Within margin + activation, the penalty row of a distance ``d`` into the cost,
    ``J^T J`` and ``J^T r``: ``setup`` lines, then ``rows()`` fills ``jr``."""
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


def _emit_bound(e, check: bool, d: str, lim: str = "thr"):
    """A skipped pair's bound ``d`` (the check only: into the smallest distance, pair -1).
    With a limit ``lim`` other than ``thr`` (the exact check's, :func:`emit_exact`: skipped
    at the smallest distance yet), a bound is kept only at or beyond ``thr``: one skipped for
    being no nearer than the smallest yet is not a bound to keep (its square root may round
    a hair below it)."""
    if check:
        cond = f"{d} < clear" if lim == "thr" else f"{d} < clear && {d} >= thr"
        e(f"if ({cond}) {{ clear = {d}; which = -1; }}")


def _emit_self(e, cc: CollisionChain, nc: int, check: bool, any_, lim: str = "thr"):
    """The self pairs: link pair, group pair, sphere pair (see the module docstring). Below
    the link pair's bound the distances are taken in link b's node frame: link a's groups and
    spheres are placed there (one relative transform per link pair), link b's are the data as
    they are (no placement); the nearest pair's row goes back to the base frame. With a limit
    other than ``thr`` (the exact check), the pair whose links' bounds are nearest is looked at
    first: what it finds skips most other pairs at their bounds."""
    if lim == "thr":
        e.block("for (int pi = 0; pi < NPR && self_on; ++pi)")
    else:
        e("int first_ = 0;  // the link pair whose bounds are nearest: looked at first")
        with e.block(""):
            e("S bmin_ = S(1e30);")
            with e.block("for (int pi = 0; pi < NPR && self_on; ++pi)"):
                e("const double* A = LK + R2IK_LW * (int)PR[3 * pi];")
                e("const double* B = LK + R2IK_LW * (int)PR[3 * pi + 1];")
                e("const int na = (int)A[0], nb = (int)B[0];")
                e("const int ia = (int)PR[3 * pi], ib = (int)PR[3 * pi + 1];")
                _link_bound(e, "ia", "na", "A", "la")
                _link_bound(e, "ib", "nb", "B", "lb")
                e("const S fx = lax - lbx, fy = lay - lby, fz = laz - lbz;")
                e("const S fd = sqrt(fx * fx + fy * fy + fz * fz) - S(A[7] + B[7] - "
                  "PR[3 * pi + 2]);")
                e("if (fd < bmin_) { bmin_ = fd; first_ = pi; }")
        e.block("for (int k = -1; k < NPR && self_on; ++k)")
        e("if (k == first_ || NPR == 0) continue;")
        e("const int pi = k < 0 ? first_ : k;")
    with e:
        e("const double* A = LK + R2IK_LW * (int)PR[3 * pi];")
        e("const double* B = LK + R2IK_LW * (int)PR[3 * pi + 1];")
        e("const int na = (int)A[0], nb = (int)B[0];")
        e("const int ia = (int)PR[3 * pi], ib = (int)PR[3 * pi + 1];")
        e("const double pal = PR[3 * pi + 2];  // the pair's allowance: off every sum of radii")
        _link_bound(e, "ia", "na", "A", "la")
        _link_bound(e, "ib", "nb", "B", "lb")
        _emit_cull(e, check, any_, "la", "lb", "A[7] + B[7] - pal", "hl", lim)
        e("// node a in node b's frame: Rr = Rb^T Ra, pr = Rb^T (pa - pb)")
        e("const S* Ra = fR[na]; const S* Rb = fR[nb];")
        e("const S ex_ = fp[na][0] - fp[nb][0], ey_ = fp[na][1] - fp[nb][1], "
          "ez_ = fp[na][2] - fp[nb][2];")
        e("S rR[9], rp[3];")
        for i in range(3):
            for j in range(3):
                e(f"rR[{3 * i + j}] = Rb[{i}] * Ra[{j}] + Rb[{3 + i}] * Ra[{3 + j}] + "
                  f"Rb[{6 + i}] * Ra[{6 + j}];")
            e(f"rp[{i}] = Rb[{i}] * ex_ + Rb[{3 + i}] * ey_ + Rb[{6 + i}] * ez_;")
        e("// link b's bound in its node frame")
        e("const S lbnx = S(B[4]), lbny = S(B[5]), lbnz = S(B[6]);")
        with e.block("for (int ga = (int)A[1]; ga < (int)A[2]; ++ga)"):
            e("const double* GA = GR + R2IK_GW * ga;")
            _place_rel(e, "(GA + 2)", "ga")
            _emit_cull(e, check, any_, "ga", "lbn", "GA[5] + B[7] - pal", "ha", lim)
            with e.block("for (int gb = (int)B[1]; gb < (int)B[2]; ++gb)"):
                e("const double* GB = GR + R2IK_GW * gb;")
                e("const S gbx = S(GB[2]), gby = S(GB[3]), gbz = S(GB[4]);")
                _emit_cull(e, check, any_, "ga", "gb", "GA[5] + GB[5] - pal", "hg", lim)
                e("const int b0 = (int)GB[0], b1 = (int)GB[1];")
                if not check:  # the group pair's nearest sphere pair gives its row
                    e("S bd_ = thr, bdist_ = S(1), bdx_ = S(0), bdy_ = S(0), bdz_ = S(1), "
                      "bpx_ = S(0), bpy_ = S(0), bpz_ = S(0), bqx_ = S(0), bqy_ = S(0), "
                      "bqz_ = S(0);")
                    e("// fd_: nothing more to look for in this lane (a pair that penetrates, or "
                      "the groups are apart)")
                    e("S fd_ = r2ik_sel(hg2 < hglim * hglim, S(0), S(1));")
                with e.block("for (int i = (int)GA[0]; i < (int)GA[1]; ++i)"):
                    if not check:
                        e(f"if (!{any_('fd_ < S(0.5)')}) break;  // every lane has its pair")
                    _place_rel(e, "(SP + 4 * i)", "pa")
                    e("const double ra = SP[4 * i + 3];")
                    if check:
                        _emit_cull(e, check, any_, "pa", "gb", "ra + GB[5] - pal", "hs", lim)
                    else:  # nothing in group b can be nearer than what a lane has (<= thr)
                        e("const S hsx = pax - gbx, hsy = pay - gby, hsz = paz - gbz;")
                        e("const S hslim = bd_ + S(ra + GB[5] - pal);")
                        e("const S hs2 = hsx * hsx + hsy * hsy + hsz * hsz;")
                        e(f"if (!{any_('(fd_ < S(0.5)) & (hs2 < hslim * hslim)')}) continue;")
                    with e.block("for (int j = b0; j < b1; ++j)"):
                        e("const double* SB = SP + 4 * j;")
                        e("const S qbx = S(SB[0]), qby = S(SB[1]), qbz = S(SB[2]);")
                        e("const S dx = pax - qbx, dy = pay - qby, dz = paz - qbz;")
                        e("const S d2 = dx * dx + dy * dy + dz * dz;")
                        e("const double rr = ra + SB[3] - pal;")
                        if check:  # only a pair that may be nearer than the smallest yet
                            e("const double reach = clear + rr;")
                            e("if (reach <= 0.0 || d2 > reach * reach * (1.0 + 1e-9)) continue;")
                            e("const S d = sqrt(d2) - S(rr);")
                            e("if (d < clear) { clear = d; which = (long long)i * NS + j; }")
                        else:
                            e("const S reach = bd_ + S(rr);  // nearer than the lane's best")
                            e(f"if (!{any_('(fd_ < S(0.5)) & (d2 < reach * reach)')}) continue;")
                            e("const S dist = sqrt(d2);")
                            e("const S d = dist - S(rr);")
                            e("clear = r2ik_sel(d < clear, d, clear);")
                            e("const auto nearer = (fd_ < S(0.5)) & (d < bd_);")
                            e("fd_ = r2ik_sel(nearer & (d < S(0)), S(1), fd_);")
                            e("bd_ = r2ik_sel(nearer, d, bd_); bdist_ = r2ik_sel(nearer, dist, "
                              "bdist_);")
                            e("bdx_ = r2ik_sel(nearer, dx, bdx_); bdy_ = r2ik_sel(nearer, dy, "
                              "bdy_); bdz_ = r2ik_sel(nearer, dz, bdz_);")
                            e("bpx_ = r2ik_sel(nearer, pax, bpx_); bpy_ = r2ik_sel(nearer, pay, "
                              "bpy_); bpz_ = r2ik_sel(nearer, paz, bpz_);")
                            e("bqx_ = r2ik_sel(nearer, qbx, bqx_); bqy_ = r2ik_sel(nearer, qby, "
                              "bqy_); bqz_ = r2ik_sel(nearer, qbz, bqz_);")
                if not check:
                    with e.block(f"if ({any_('bd_ < thr')})"):
                        _emit_self_penalty(e, cc, nc, any_)


def _place_rel(e, ptr: str, out: str):
    """``out``x/y/z = the point ``ptr[0..2]`` of node a in node b's frame (``rR``, ``rp``)."""
    for a, x in enumerate("xyz"):
        e(f"const S {out}{x} = rp[{a}] + rR[{3 * a}] * S({ptr}[0]) + rR[{3 * a + 1}] * "
          f"S({ptr}[1]) + rR[{3 * a + 2}] * S({ptr}[2]);")


def _emit_self_penalty(e, cc: CollisionChain, nc: int, any_):
    """The penalty row of a group pair's nearest sphere pair (distance ``bd_``, centres
    ``bp_`` (of link a) and ``bq_`` (of link b), difference ``bd?_``, all in node b's frame,
    turned into the base frame here): :func:`_emit_penalty`."""
    e("// a lane with no pair adds nothing; a pair with an allowance has no activation band "
      "(near by construction: pushed only where its spheres overlap)")
    e("const S d = r2ik_sel(bd_ < thr, bd_ + (pal > 0.0 ? act : S(0)), S(1e30));")

    def rows():
        _emit_row(e, cc, "na", "pa", "n", "+")
        _emit_row(e, cc, "nb", "pb", "n", "-")
    setup = [
        "const S ux = r2ik_sel(bdist_ > S(1e-12), bdx_ / bdist_, S(0)), "
        "uy = r2ik_sel(bdist_ > S(1e-12), bdy_ / bdist_, S(0)), "
        "uz = r2ik_sel(bdist_ > S(1e-12), bdz_ / bdist_, S(1));"]
    for a, x in enumerate("xyz"):
        setup.append(f"const S n{x} = Rb[{3 * a}] * ux + Rb[{3 * a + 1}] * uy + "
                     f"Rb[{3 * a + 2}] * uz;")
    for p, q in (("pa", "bp"), ("pb", "bq")):
        for a, x in enumerate("xyz"):
            setup.append(f"const S {p}{x} = fp[nb][{a}] + Rb[{3 * a}] * {q}x_ + "
                         f"Rb[{3 * a + 1}] * {q}y_ + Rb[{3 * a + 2}] * {q}z_;")
    _emit_penalty(e, nc, any_, tuple(setup), rows)


def _link_bound(e, c: str, node: str, ptr: str, out: str):
    """``out``x/y/z = link ``c``'s bounding centre: kept (the first LBMAX links), or placed."""
    e(f"S {out}x, {out}y, {out}z;")
    with e.block(f"if ({c} < R2IK_LBMAX)"):
        e(f"{out}x = kbx[{c}]; {out}y = kby[{c}]; {out}z = kbz[{c}];")
    with e.block("else"):
        _place(e, node, f"({ptr} + 4)", f"{out}_")
        e(f"{out}x = {out}_x; {out}y = {out}_y; {out}z = {out}_z;")


def _emit_cull(e, check: bool, any_, a: str, b: str, radii: str, v: str, lim: str = "thr",
               guard: str = ""):
    """Skip the rest of the loop body when the spheres at ``a``x/y/z and ``b``x/y/z (radii
    summing to ``radii``) are margin + activation (``lim``) apart or more (the check: their
    distance as the bound); with ``guard``, only where it holds too."""
    e(f"const S {v}x = {a}x - {b}x, {v}y = {a}y - {b}y, {v}z = {a}z - {b}z;")
    e(f"const S {v}2 = {v}x * {v}x + {v}y * {v}y + {v}z * {v}z;")
    e(f"const S {v}lim = {lim} + S({radii});")
    with e.block(f"if ({guard + ' && ' if guard else ''}!{any_(f'{v}2 < {v}lim * {v}lim')})"):
        if check:
            e(f"const S {v}d = sqrt({v}2) - S({radii});")
            _emit_bound(e, check, f"{v}d", lim)
        e("continue;")


def _emit_world(e, cc: CollisionChain, nc: int, check: bool, any_, lim: str = "thr"):
    """The world: the obstacles on their own one by one (the solve: first against the whole
    robot's bound), link, group, sphere; then per link the tree, node by node from the root,
    a leaf's obstacles as the others (see the module docstring); squared distances first, a
    square root only where needed."""

    def bound(prefix: str, rad: str, var: str):
        """Skip the rest of the body when the sphere (``prefix``x/y/z, radius ``rad``) is
        margin + activation or more from the obstacle: by the obstacle's bounding sphere
        first (no signed distance), then by the signed distance (left in ``var``)."""
        _emit_cull(e, check, any_, prefix, "o", f"orad + {rad}", f"{var}q", lim,
                   guard="orad >= 0.0")
        e(f"const S {var} = r2ik_dist<S>(ob, {prefix}x, {prefix}y, {prefix}z) - S({rad});")
        with e.block(f"if (!{any_(f'{var} < {lim}')})"):
            _emit_bound(e, check, var, lim)
            e("continue;")

    with e.block("for (long long a = 0; a < n_alone; ++a)"):
        e("const long long o = (long long)PERM[a];")
        e("const double* ob = obs + 16 * o;")
        e("const double orad = ORAD[o];  // its bounding sphere (-1: a half-space)")
        e("const S ox = S(ob[10]), oy = S(ob[11]), oz = S(ob[12]);")
        if not check or lim != "thr":  # the whole robot's box first (the check against
            # margin + activation takes it link by link)
            e("const S rqx = r2ik_sel(ox < lox, lox - ox, r2ik_sel(ox > hix, ox - hix, S(0)));")
            e("const S rqy = r2ik_sel(oy < loy, loy - oy, r2ik_sel(oy > hiy, oy - hiy, S(0)));")
            e("const S rqz = r2ik_sel(oz < loz, loz - oz, r2ik_sel(oz > hiz, oz - hiz, S(0)));")
            e(f"const S rlim = {lim} + S(orad);")
            if check:
                with e.block("if (orad >= 0.0 && !(rqx * rqx + rqy * rqy + rqz * rqz < "
                             "rlim * rlim))"):
                    e("const S rfar = sqrt(rqx * rqx + rqy * rqy + rqz * rqz) - S(orad);")
                    _emit_bound(e, check, "rfar", lim)
                    e("continue;")
            else:
                e(f"if (orad >= 0.0 && !{any_('rqx * rqx + rqy * rqy + rqz * rqz < rlim * rlim')})"
                  " continue;")
        with e.block("for (int c = 0; c < NL; ++c)"):
            e("const double* L = LK + R2IK_LW * c;")
            e("if (L[3] != 0.0 || SKP[o * NL + c] != 0.0) continue;  // rigid with the base, "
              "or allowed to touch it")
            e("const int nd = (int)L[0];")
            _link_bound(e, "c", "nd", "L", "lk")
            _emit_obstacle(e, cc, nc, check, any_, lim, bound)
    with e.block("if (n_node > 0) for (int c = 0; c < NL; ++c)"):
        e("const double* L = LK + R2IK_LW * c;")
        e("if (L[3] != 0.0) continue;  // rigid with the base")
        e("const int nd = (int)L[0];")
        _link_bound(e, "c", "nd", "L", "lk")
        e("int stk[R2IK_STACK]; int top = 0; stk[top++] = 0;  // the tree, from its root")
        with e.block("while (top > 0)"):
            e("const int k = stk[--top];")
            e("if (NSKP[(long long)k * NL + c] != 0.0) continue;  // every obstacle allowed")
            e("const double* ND = TREE + R2IK_NW * k;")
            e("// the link's bound against the node's box")
            for ax, i in (("x", 4), ("y", 5), ("z", 6)):
                e(f"const S nq{ax} = r2ik_sel(lk{ax} < S(ND[{i}]), S(ND[{i}]) - lk{ax}, "
                  f"r2ik_sel(lk{ax} > S(ND[{i + 3}]), lk{ax} - S(ND[{i + 3}]), S(0)));")
            e("const S nq2 = nqx * nqx + nqy * nqy + nqz * nqz;")
            e(f"const S nqlim = {lim} + S(L[7]);")
            with e.block(f"if (!{any_('nq2 < nqlim * nqlim')})"):
                if check:
                    e("const S nqd = sqrt(nq2) - S(L[7]);")
                    _emit_bound(e, check, "nqd", lim)
                e("continue;")
            with e.block("if (ND[2] >= 0.0)"):
                e("stk[top++] = (int)ND[3]; stk[top++] = (int)ND[2];  // the left one first")
                e("continue;")
            with e.block("for (long long ki = (long long)ND[0]; ki < (long long)ND[1]; ++ki)"):
                e("const long long o = (long long)PERM[ki];")
                e("if (SKP[o * NL + c] != 0.0) continue;  // allowed to touch the link")
                e("const double* ob = obs + 16 * o;")
                e("const double orad = ORAD[o];")
                e("const S ox = S(ob[10]), oy = S(ob[11]), oz = S(ob[12]);")
                _emit_obstacle(e, cc, nc, check, any_, lim, bound)


def _emit_obstacle(e, cc: CollisionChain, nc: int, check: bool, any_, lim: str, bound):
    """Link ``c`` (node ``nd``, bound ``lk``) against obstacle ``o`` (``ob``, ``orad``,
    ``ox``/``oy``/``oz``): the link's bound, its groups, their spheres (the solve: one row per
    group, at its first penetrating or nearest sphere)."""
    bound("lk", "L[7]", "bd")
    with e.block("for (int gi = (int)L[1]; gi < (int)L[2]; ++gi)"):
        e("const double* GI = GR + R2IK_GW * gi;")
        _place(e, "nd", "(GI + 2)", "gg")
        bound("gg", "GI[5]", "gd")
        if not check:  # the group's nearest sphere gives its row
            e("S wd_ = thr, wpx_ = S(0), wpy_ = S(0), wpz_ = S(0);")
            e("// fw_: nothing more to look for in this lane (a sphere that penetrates, or "
              "the group is apart)")
            e("S fw_ = r2ik_sel(gd < thr, S(0), S(1));")
        with e.block("for (int s = (int)GI[0]; s < (int)GI[1]; ++s)"):
            if not check:
                e(f"if (!{any_('fw_ < S(0.5)')}) break;  // every lane has its sphere")
            _place(e, "nd", "(SP + 4 * s)", "pc")
            e("const double rs = SP[4 * s + 3];")
            e("const S sqx = pcx - ox, sqy = pcy - oy, sqz = pcz - oz;")
            e("const S sq2 = sqx * sqx + sqy * sqy + sqz * sqz;")
            # the obstacle's bounding sphere: beyond the band (the check: the bound),
            # or (the solve) not nearer than the lane's best
            if check:
                e(f"const S slim = {lim} + S(orad + rs);")
                with e.block("if (orad >= 0.0 && !(sq2 < slim * slim))"):
                    e("const S sfar = sqrt(sq2) - S(orad + rs);")
                    _emit_bound(e, check, "sfar", lim)
                    e("continue;")
            else:
                e("const S sreach = S(orad + rs) + wd_;")
                e(f"if (orad >= 0.0 && !{any_('(fw_ < S(0.5)) & (sq2 < sreach * sreach)')})"
                  " continue;")
            e("const S d = r2ik_dist<S>(ob, pcx, pcy, pcz) - S(rs);")
            if check:
                e("if (d < clear) { clear = d; which = (long long)NS * NS + "
                  "(long long)s * n_obs + o; }")
            else:
                e("clear = r2ik_sel(d < clear, d, clear);")
                e("const auto nearer = (fw_ < S(0.5)) & (d < wd_);")
                e("fw_ = r2ik_sel(nearer & (d < S(0)), S(1), fw_);")
                e("wd_ = r2ik_sel(nearer, d, wd_);")
                e("wpx_ = r2ik_sel(nearer, pcx, wpx_); wpy_ = r2ik_sel(nearer, pcy, "
                  "wpy_); wpz_ = r2ik_sel(nearer, pcz, wpz_);")
        if not check:
            with e.block(f"if ({any_('wd_ < thr')})"):
                e("const S d = r2ik_sel(wd_ < thr, wd_, S(1e30));  // (no sphere: "
                  "nothing)")
                _emit_penalty(e, nc, any_, (
                    "const S pwx = wpx_, pwy = wpy_, pwz = wpz_;",
                    "// the nearest sphere's gradient (where it was found: the same "
                    "values)",
                    "S gwx, gwy, gwz; r2ik_sdf<S>(ob, pwx, pwy, pwz, gwx, gwy, gwz);"),
                    lambda: _emit_row(e, cc, "nd", "pw", "gw", "+"))


def _emit_body(e, cc: CollisionChain, nc: int, check: bool, any_, lim: str = "thr"):
    """The frames, the robot block's tables, then the self pairs and the world (``lim``: the
    distance beyond which a pair is skipped, ``thr`` = margin + activation but for the exact
    check)."""
    _emit_frames(e, cc)
    e("const double* rb = obs + 16 * n_obs;  // the robot block (pack_scene)")
    e("const int NL = (int)rb[0], NG = (int)rb[1], NS = (int)rb[2], NPR = (int)rb[3];")
    e("const double* LK = rb + R2IK_HEAD;")
    e("const double* GR = LK + R2IK_LW * NL;")
    e("const double* SP = GR + R2IK_GW * NG;")
    e("const double* PR = SP + 4 * NS;")
    e("const double* SKP = PR + 3 * NPR;")
    e("const double* ORAD = SKP + n_obs * NL;")
    e("const long long n_alone = (long long)rb[4], n_node = (long long)rb[5];")
    e("const double* PERM = ORAD + n_obs;  // the obstacles: those on their own, the tree's")
    e("const double* TREE = PERM + n_obs;  // its nodes: first, end, left, right, box lo, hi")
    e("const double* NSKP = TREE + R2IK_NW * n_node;  // per node and link: all allowed")
    e("const S thr = margin + act;")
    e("// the links' bounding centres, placed once (the first LBMAX links; others when used)")
    e(f"S kbx[{LBMAX}], kby[{LBMAX}], kbz[{LBMAX}];")
    with e.block(f"for (int c = 0; c < NL && c < {LBMAX}; ++c)"):
        e("const double* L = LK + R2IK_LW * c;")
        e("const int nd = (int)L[0];")
        _place(e, "nd", "(L + 4)", "t")
        e("kbx[c] = tx; kby[c] = ty; kbz[c] = tz;")
    _emit_self(e, cc, nc, check, any_, lim)
    with e.block("if (n_obs > 0)"):
        if not check or lim != "thr":
            e("// the box around every moving link's bound (none beyond LBMAX links: "
              "unbounded)")
            e("S lox = S(-1e30), loy = S(-1e30), loz = S(-1e30), hix = S(1e30), "
              "hiy = S(1e30), hiz = S(1e30);")
            with e.block(f"if (NL <= {LBMAX})"):
                e("lox = S(1e30); loy = S(1e30); loz = S(1e30); hix = S(-1e30); "
                  "hiy = S(-1e30); hiz = S(-1e30);")
                with e.block("for (int c = 0; c < NL; ++c)"):
                    e("if (LK[R2IK_LW * c + 3] != 0.0) continue;")
                    e("const S r = S(LK[R2IK_LW * c + 7]);")
                    e("lox = r2ik_sel(kbx[c] - r < lox, kbx[c] - r, lox); "
                      "hix = r2ik_sel(kbx[c] + r > hix, kbx[c] + r, hix);")
                    e("loy = r2ik_sel(kby[c] - r < loy, kby[c] - r, loy); "
                      "hiy = r2ik_sel(kby[c] + r > hiy, kby[c] + r, hiy);")
                    e("loz = r2ik_sel(kbz[c] - r < loz, kbz[c] - r, loz); "
                      "hiz = r2ik_sel(kbz[c] + r > hiz, kbz[c] + r, hiz);")
        _emit_world(e, cc, nc, check, any_, lim)


def emit_collision(e, cc: CollisionChain, nc: int, qvars, qv, check: bool = True):
    """The collision templates (see the module docstring) for a solve with ``nc`` columns
    whose q arguments are ``qvars``; ``check``: also ``r2ik_coll_min``."""
    e("\n".join(f"#ifndef SHAPE_{s.upper()}\n#define SHAPE_{s.upper()} {c}\n#endif"
                 for s, c in SHAPE_CODES.items()))
    e(f"#define R2IK_HEAD {HEAD}\n#define R2IK_LW {LINK_W}\n#define R2IK_GW {GROUP_W}\n"
      f"#define R2IK_NW {NODE_W}\n#define R2IK_STACK {TREE_DEPTH + 2}\n"
      f"#define R2IK_LBMAX {LBMAX}")
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
                 "const S wgt, S& clear, S* R2IK_RESTRICT H, S* R2IK_RESTRICT g, "
                 "const S* R2IK_RESTRICT trig)"):
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
        _emit_body(e, cc, nc, True, lambda m: f"({m})")




def emit_exact(e, cc: CollisionChain, qvars, qv) -> None:
    """``r2ik_coll_exact``: the check of one configuration in float64, the self pairs and the
    world apart (each: the smallest distance and its pair, numbered as
    :meth:`ros2_ik.ik.collision.CollisionObjective.nearest` numbers them), exact below
    ``reach`` (a bound beyond it, pair -1; ``reach`` = inf: exact everywhere, as
    :func:`ros2_ik.ik.collision.clearance` by default). It is ``r2ik_coll_min``'s loop with
    one more rule: a pair (a link pair, a group, a sphere) whose bound is no nearer than the
    smallest distance found yet is skipped unlooked at (a branch and bound: what it holds
    cannot be nearer, as every bound is a bound), so the distance stays exact at the cost of
    the few pairs near the nearest. 1e30 (pair -1) where nothing is checked."""
    args = ", ".join(f"const double q{i}" for i in qvars)
    with e.block(f"R2IK_FN void r2ik_coll_exact({args}, const double* R2IK_RESTRICT obs_all, "
                 "const long long n_all, const bool self_all, const double reach, "
                 "double& self_clear, long long& self_which, double& world_clear, "
                 "long long& world_which)"):
        e("typedef double S;")
        e("const double margin = reach, act = 0.0;  // (thr = reach)")
        _emit_nodes(e, cc, qv, sincos=False)
        lim = "(clear < thr ? clear : thr)"
        e("// the self pairs (the obstacles left out: the robot block follows them)")
        with e.block(""):
            e("const double* obs = obs_all + 16 * n_all;")
            e("const long long n_obs = 0;")
            e("const bool self_on = self_all;")
            e("double clear = 1e30; long long which = -1;")
            _emit_body(e, cc, 1, True, lambda m: f"({m})", lim)
            e("self_clear = clear; self_which = which;")
        e("// the world")
        with e.block(""):
            e("const double* obs = obs_all;")
            e("const long long n_obs = n_all;")
            e("const bool self_on = false;")
            e("double clear = 1e30; long long which = -1;")
            _emit_body(e, cc, 1, True, lambda m: f"({m})", lim)
            e("world_clear = clear; world_which = which;")
