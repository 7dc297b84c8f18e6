"""FK and Jacobians in generated code, once: FK over a tree of joints (:func:`emit_node_frames`)
and a joint's Jacobian column at a point (:func:`emit_column`), which the tips' FK, the
residual Jacobian, the frames kernels (``r2ik_fk``, ``r2ik_jac``) and the collision terms'
spheres and rows all use."""

from __future__ import annotations

import numpy as np

from .text import Emit, lin, lit
from .chain import Chain, jac_structure, joint_frame_decl, qvars, tip_nodes


def node_value(nd, qv) -> str:
    """The joint value of a node (its coordinate, scaled and offset for a mimic joint)."""
    val = qv(nd.qi)
    if nd.mult != 1.0 or nd.off != 0.0:
        val = f"({val} * {lit(nd.mult)} + {lit(nd.off)})"
    return val


def emit_node_frames(e: Emit, nodes, qv, trig) -> None:
    """FK over a tree of joints (:class:`.chain.Node`, parents first): each node's frame
    after its joint (``nR{k}_{0..8}`` row-major, ``np{k}_{0..2}``), its world axis
    ``nz{k}_*`` and joint origin ``nj{k}_*`` (before a prismatic joint's travel), as
    constants of the current block. ``trig(k, nd, val)`` sets a revolute node's ``ns{k}`` /
    ``nc{k}`` (declared here) to the sine and cosine of ``val``. The one FK of the generated
    code: the tips' (:func:`emit_fk_tip`), the frames kernels' and the collision spheres'."""
    for k, nd in enumerate(nodes):
        pre = nd.pre
        e(f"// node {k}: joint into link {k}")
        p = nd.parent
        A = {}
        for a in range(3):
            for b in range(3):
                if p < 0:
                    A[a, b] = lit(pre[a, b])
                else:
                    s = lin([(pre[c, b], f"nR{p}_{3 * a + c}") for c in range(3)])
                    A[a, b] = s if s is not None else "S(0)"
        for a in range(3):
            if p < 0:
                e(f"const S nj{k}_{a} = {lit(pre[a, 3])};")
            else:
                s = lin([(pre[c, 3], f"nR{p}_{3 * a + c}") for c in range(3)])
                e(f"const S nj{k}_{a} = np{p}_{a}" + (f" + ({s});" if s else ";"))
        e("const S " + ", ".join(f"A{k}_{a}{b} = {A[a, b]}" for a in range(3) for b in range(3))
          + ";")
        ax = nd.axis
        for a in range(3):
            s = lin([(ax[b], f"A{k}_{a}{b}") for b in range(3)])
            e(f"const S nz{k}_{a} = {s if s is not None else 'S(0)'};")
        val = node_value(nd, qv)
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
        trig(k, nd, val)
        x, y, z = ax
        if x == 0.0 and y == 0.0 and abs(z) == 1.0:
            sgn = "" if z > 0 else "-"
            for a in range(3):
                e(f"const S nR{k}_{3 * a} = nc{k} * A{k}_{a}0 + {sgn}ns{k} * A{k}_{a}1;")
                e(f"const S nR{k}_{3 * a + 1} = nc{k} * A{k}_{a}1 - {sgn}ns{k} * A{k}_{a}0;")
                e(f"const S nR{k}_{3 * a + 2} = A{k}_{a}2;")
        else:
            C = f"(S(1) - nc{k})"
            m = {(0, 0): f"nc{k} + {lit(x * x)} * {C}",
                 (0, 1): f"{lit(x * y)} * {C} - {lit(z)} * ns{k}",
                 (0, 2): f"{lit(x * z)} * {C} + {lit(y)} * ns{k}",
                 (1, 0): f"{lit(y * x)} * {C} + {lit(z)} * ns{k}",
                 (1, 1): f"nc{k} + {lit(y * y)} * {C}",
                 (1, 2): f"{lit(y * z)} * {C} - {lit(x)} * ns{k}",
                 (2, 0): f"{lit(z * x)} * {C} - {lit(y)} * ns{k}",
                 (2, 1): f"{lit(z * y)} * {C} + {lit(x)} * ns{k}",
                 (2, 2): f"nc{k} + {lit(z * z)} * {C}"}
            e("const S " + ", ".join(f"m{k}_{i}{j} = {v}" for (i, j), v in m.items()) + ";")
            for a in range(3):
                for b in range(3):
                    e(f"const S nR{k}_{3 * a + b} = A{k}_{a}0 * m{k}_0{b} + A{k}_{a}1 * m{k}_1{b}"
                      f" + A{k}_{a}2 * m{k}_2{b};")


def emit_column(e: Emit, z, o, p, prismatic: bool, mult: float) -> None:
    """The Jacobian column of one joint at a point, as constants of the current block:
    ``zx, zy, zz`` its world axis ``z`` (times a mimic joint's ``mult``), and ``vx, vy, vz``
    the point's velocity per unit of the joint: ``z x (p - o)`` (``o`` the joint's origin) for
    a revolute joint, ``z`` for a prismatic one. The one Jacobian column of the generated code:
    the tips' residual rows, the frames kernels' and the collision rows'."""
    if mult == 1.0:
        e(f"const S zx = {z[0]}, zy = {z[1]}, zz = {z[2]};")
    else:
        e(f"const S zx = {z[0]} * {lit(mult)}, zy = {z[1]} * {lit(mult)}, "
          f"zz = {z[2]} * {lit(mult)};")
    if prismatic:
        e("const S vx = zx, vy = zy, vz = zz;")
    else:
        e(f"const S dx = {p[0]} - {o[0]}, dy = {p[1]} - {o[1]}, dz = {p[2]} - {o[2]};")
        e("const S vx = zy * dz - zz * dy, vy = zz * dx - zx * dz, vz = zx * dy - zy * dx;")


def emit_fk_tip(e: Emit, ch: Chain, t: int, qv, *, keep_joint_frames: bool,
                sincos: bool = False, export_trig: bool = False):
    """FK along tip t's chain into R[9] (row-major) and pv[3] (:func:`emit_node_frames` over
    the joints of its path, then the tip's fixed transform). ``qv(i)`` names q coordinate i.
    With ``keep_joint_frames`` the joints' world axes z{j}_a and origins pj{j}_a are set. With
    ``sincos`` (the solve kernels) a joint's sine and cosine come from one ``r2ik_sincos(x, s,
    c)`` call (CUDA's ``sincos`` on a GPU, on the host :mod:`.sincos`'s recipe); without (the
    frames kernels) from ``sin`` and ``cos``; with ``export_trig`` each revolute joint's pair
    also goes to ``esn{j}`` / ``ecs{j}`` (for the collision terms: :func:`trig_exports`)."""
    nodes = tip_nodes(ch, t)
    j0 = ch.starts[t]

    def trig(k, nd, val):
        if sincos:
            e(f"r2ik_sincos({val}, ns{k}, nc{k});")
            if export_trig:
                e(f"esn{j0 + k} = ns{k}; ecs{j0 + k} = nc{k};")
        else:
            e(f"nc{k} = cos({val}); ns{k} = sin({val});")

    with e.block(""):
        emit_node_frames(e, nodes, qv, trig)
        last = len(nodes) - 1
        if last < 0:
            e("R[0] = S(1); R[1] = S(0); R[2] = S(0); R[3] = S(0); R[4] = S(1); R[5] = S(0); "
              "R[6] = S(0); R[7] = S(0); R[8] = S(1); pv[0] = S(0); pv[1] = S(0); pv[2] = S(0);")
        else:
            e(" ".join(f"R[{i}] = nR{last}_{i};" for i in range(9)) + " "
              + " ".join(f"pv[{a}] = np{last}_{a};" for a in range(3)))
        if keep_joint_frames:
            for k in range(len(nodes)):
                j = j0 + k
                e(" ".join(f"z{j}_{a} = nz{k}_{a};" for a in range(3)) + " "
                  + " ".join(f"pj{j}_{a} = nj{k}_{a};" for a in range(3)))
    B = ch.post[t]
    for a in range(3):
        s = lin([(B[0, 3], f"R[{3 * a}]"), (B[1, 3], f"R[{3 * a + 1}]"),
                 (B[2, 3], f"R[{3 * a + 2}]")])
        if s is not None:
            e(f"pv[{a}] = pv[{a}] + ({s});")
    if not np.array_equal(B[:3, :3], np.eye(3)):
        for a in range(3):
            e(f"{{ const S x0 = R[{3 * a}], x1 = R[{3 * a + 1}], x2 = R[{3 * a + 2}];")
            for b in range(3):
                s = lin([(B[0, b], "x0"), (B[1, b], "x1"), (B[2, b], "x2")])
                e(f"  R[{3 * a + b}] = {s if s is not None else 'S(0)'};")
            e("}")


def emit_jacobian(e: Emit, ch: Chain, name: str):
    """``name(frames..., tgt, w, J)``: the residual Jacobian (as the pose objectives' rows)."""
    T, nc = ch.T, ch.nc
    args = []
    for j in range(len(ch.qi)):
        args += [f"const S z{j}_{a}" for a in range(3)] + [f"const S pj{j}_{a}" for a in range(3)]
    args += [f"const S pt{t}_{a}" for t in range(T) for a in range(3)]
    args += ["const S* R2IK_RESTRICT tgt", "const S* R2IK_RESTRICT w", "S* J"]
    e("template <typename S>")
    with e.block(f"R2IK_FN void {name}({', '.join(args)})"):
        written = np.zeros((6 * T, nc), dtype=bool)
        for t in range(T):
            e(f"{{ const S* Tt = tgt + {16 * t}; const S* wt = w + {6 * t};")
            for j in range(ch.starts[t], ch.starts[t + 1]):
                c = ch.col[j]
                if c < 0:
                    continue
                e("  {")
                emit_column(e, [f"z{j}_{a}" for a in range(3)], [f"pj{j}_{a}" for a in range(3)],
                            [f"pt{t}_{a}" for a in range(3)], ch.prismatic[j], ch.mult[j])
                rows = [(a, "v") for a in range(3)]
                if not ch.prismatic[j]:
                    rows += [(a, "w") for a in range(3)]
                for a, kind in rows:
                    i = 6 * t + a + (3 if kind == "w" else 0)
                    comp = ("vx", "vy", "vz") if kind == "v" else ("zx", "zy", "zz")
                    wi = a + (3 if kind == "w" else 0)
                    val = (f"wt[{wi}] * (Tt[{a}] * {comp[0]} + Tt[{4 + a}] * {comp[1]} + "
                           f"Tt[{8 + a}] * {comp[2]})")
                    k = i * nc + c
                    if written[i, c]:
                        e(f"    J[{k}] = J[{k}] + {val};")
                    else:
                        e(f"    J[{k}] = {val};")
                        written[i, c] = True
                e("  }")
            e("}")
        nz = jac_structure(ch)
        assert np.array_equal(nz, written)


def emit_frames_kernels(e: Emit, ch: Chain, scalar: str):
    model = ch.model
    nq, F = model.nq, ch.T
    used, qv = qvars(ch)
    va = {int(v): c for c, v in enumerate(model.v_active)}
    nva = len(va)
    e(f"""
// q (B, nq) in S; r2ik_fk: T (B, {F}, 4, 4) row-major; r2ik_jac: J (B, {F}, 6, {nva}) world
// Jacobians (linear; angular), columns model.v_active, zero-filled.""")

    def kernel(name, per_tip):
        """One thread per configuration: q from q_all, FK to each frame, ``per_tip(t)``."""
        with e.kernel(name, "const S* R2IK_RESTRICT q_all, long long B, S* R2IK_RESTRICT out"):
            e("const long long b = R2IK_ROW;")
            e("if (b >= B) return;")
            e(f"const S* q = q_all + b * {nq};")
            e("S R[9], pv[3];")
            e(joint_frame_decl(ch))
            for i in used:
                e(f"const S q{i} = q[{i}];")
            for t in range(F):
                with e.block(""):
                    emit_fk_tip(e, ch, t, qv, keep_joint_frames=True)
                    per_tip(t)

    def pose(t):
        e(f"S* o = out + (b * {F} + {t}) * 16;")
        e("o[0] = R[0]; o[1] = R[1]; o[2] = R[2]; o[3] = pv[0]; o[4] = R[3]; o[5] = R[4]; "
          "o[6] = R[5]; o[7] = pv[1]; o[8] = R[6]; o[9] = R[7]; o[10] = R[8]; "
          "o[11] = pv[2]; o[12] = S(0); o[13] = S(0); o[14] = S(0); o[15] = S(1);")

    def jac(t):
        e(f"S* o = out + (b * {F} + {t}) * {6 * nva};")
        e(f"for (int i = 0; i < {6 * nva}; ++i) o[i] = S(0);")
        for j in range(ch.starts[t], ch.starts[t + 1]):
            if ch.col[j] < 0:
                continue
            c = va[int(model.q_to_v[ch.qi[j]])]
            with e.block(""):
                emit_column(e, [f"z{j}_{a}" for a in range(3)], [f"pj{j}_{a}" for a in range(3)],
                            [f"pv[{a}]" for a in range(3)], ch.prismatic[j], ch.mult[j])
                e(f"o[{c}] += vx; o[{nva + c}] += vy; o[{2 * nva + c}] += vz;")
                if not ch.prismatic[j]:
                    e(f"o[{3 * nva + c}] += zx; o[{4 * nva + c}] += zy; o[{5 * nva + c}] += zz;")

    kernel("r2ik_fk", pose)
    kernel("r2ik_jac", jac)
