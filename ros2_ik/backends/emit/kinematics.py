"""FK and Jacobians in generated code: the chain FK to each tip (with its joints' world axes
and origins), the residual Jacobian's columns, and the frames kernels (``r2ik_fk``,
``r2ik_jac``)."""

from __future__ import annotations


import numpy as np

from .text import Emit, lin, lit
from .chain import Chain, jac_structure, joint_frame_decl, qvars


def emit_fk_tip(e: Emit, ch: Chain, t: int, qv, *, keep_joint_frames: bool,
                 sincos: bool = False, export_trig: bool = False):
    """FK along tip t's chain into R[9] (row-major) and pv[3]. ``qv(i)`` names q coordinate i.
    With ``keep_joint_frames`` the joints' world axes z{j}_a and origins pj{j}_a are set, else
    only what the chain needs. With ``sincos`` (the solve
    kernels) a joint's sine and cosine come from one ``r2ik_sincos(x, s, c)`` call: CUDA's
    ``sincos`` on a GPU, on the host :mod:`.sincos`'s recipe); without (the frames kernels)
    from ``sin`` and ``cos``; with ``export_trig`` each revolute joint's pair also goes to
    ``esn{j}`` / ``ecs{j}`` (for the collision terms: :func:`trig_exports`)."""
    jj = [0]

    def sin_cos(val):
        if sincos:
            e(f"S c, sn_; r2ik_sincos({val}, sn_, c);")
            if export_trig:
                e(f"esn{jj[0]} = sn_; ecs{jj[0]} = c;")
            return "sn_"
        e(f"const S c = cos({val});")
        return f"sin({val})"
    e("R[0] = S(1); R[1] = S(0); R[2] = S(0); R[3] = S(0); R[4] = S(1); R[5] = S(0); "
      "R[6] = S(0); R[7] = S(0); R[8] = S(1); pv[0] = S(0); pv[1] = S(0); pv[2] = S(0);")
    for j in range(ch.starts[t], ch.starts[t + 1]):
        jj[0] = j
        A = ch.pre[j]
        e(f"// joint {j}: link {ch.model.link_names[ch.link[j]]}")
        for a in range(3):
            s = lin([(A[0, 3], f"R[{3 * a}]"), (A[1, 3], f"R[{3 * a + 1}]"),
                      (A[2, 3], f"R[{3 * a + 2}]")])
            if s is not None:
                e(f"pv[{a}] = pv[{a}] + ({s});")
        with e.block(""):
            for a in range(3):
                for b in range(3):
                    s = lin([(A[0, b], f"R[{3 * a}]"), (A[1, b], f"R[{3 * a + 1}]"),
                              (A[2, b], f"R[{3 * a + 2}]")])
                    e(f"const S n{a}{b} = {s if s is not None else 'S(0)'};")
            e("R[0] = n00; R[1] = n01; R[2] = n02; R[3] = n10; R[4] = n11; R[5] = n12; "
              "R[6] = n20; R[7] = n21; R[8] = n22;")
        ax, ay, az = (float(v) for v in ch.axis[j])
        zname = f"z{j}_" if keep_joint_frames else "zz"
        need_z = keep_joint_frames or ch.prismatic[j]
        if need_z:
            if not keep_joint_frames:
                e("{")
                e("S zz0, zz1, zz2;")
            for a in range(3):
                s = lin([(ax, f"R[{3 * a}]"), (ay, f"R[{3 * a + 1}]"), (az, f"R[{3 * a + 2}]")])
                e(f"{zname}{a} = {s if s is not None else 'S(0)'};")
        if keep_joint_frames:
            e(f"pj{j}_0 = pv[0]; pj{j}_1 = pv[1]; pj{j}_2 = pv[2];")
        val = qv(ch.qi[j])
        if ch.mult[j] != 1.0 or ch.off[j] != 0.0:
            val = f"({val} * {lit(ch.mult[j])} + {lit(ch.off[j])})"
        if ch.prismatic[j]:
            e(f"{{ const S d = {val};")
            for a in range(3):
                e(f"  pv[{a}] = pv[{a}] + {zname}{a} * d;")
            e("}")
        elif ax == 0.0 and ay == 0.0:
            with e.block(""):
                sv = sin_cos(val)
                if az == 1.0:
                    e(f"const S s = {sv};")
                elif az == -1.0:
                    e(f"const S s = -{sv};")
                else:
                    e(f"const S s = {sv} * {lit(az)};")
                for a in range(3):
                    e(f"{{ const S x0 = R[{3 * a}], x1 = R[{3 * a + 1}]; "
                      f"R[{3 * a}] = c * x0 + s * x1; R[{3 * a + 1}] = c * x1 - s * x0; }}")
        else:
            with e.block(""):
                if sincos:
                    sv = sin_cos(val)
                    e(f"const S s = {sv}; const S C = S(1) - c;")
                else:
                    e(f"const S c = cos({val}); const S s = sin({val}); const S C = S(1) - c;")
                # m = c I + C a a^T + s [a]x
                m = {
                    "00": f"c + {lit(ax * ax)} * C", "01": f"{lit(ax * ay)} * C - {lit(az)} * s",
                    "02": f"{lit(ax * az)} * C + {lit(ay)} * s",
                    "10": f"{lit(ay * ax)} * C + {lit(az)} * s", "11": f"c + {lit(ay * ay)} * C",
                    "12": f"{lit(ay * az)} * C - {lit(ax)} * s",
                    "20": f"{lit(az * ax)} * C - {lit(ay)} * s",
                    "21": f"{lit(az * ay)} * C + {lit(ax)} * s", "22": f"c + {lit(az * az)} * C",
                }
                for k, v in m.items():
                    e(f"const S m{k} = {v};")
                for a in range(3):
                    e(f"{{ const S x0 = R[{3 * a}], x1 = R[{3 * a + 1}], x2 = R[{3 * a + 2}];")
                    for b in range(3):
                        e(f"  R[{3 * a + b}] = x0 * m0{b} + x1 * m1{b} + x2 * m2{b};")
                    e("}")
        if need_z and not keep_joint_frames:
            e("}")
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
                mj = ch.mult[j]
                if mj == 1.0:
                    e(f"  {{ const S zx = z{j}_0, zy = z{j}_1, zz = z{j}_2;")
                else:
                    e(f"  {{ const S zx = z{j}_0 * {lit(mj)}, zy = z{j}_1 * {lit(mj)}, "
                      f"zz = z{j}_2 * {lit(mj)};")
                if ch.prismatic[j]:
                    e("    const S vx = zx, vy = zy, vz = zz;")
                else:
                    e(f"    const S dx = pt{t}_0 - pj{j}_0, dy = pt{t}_1 - pj{j}_1, "
                      f"dz = pt{t}_2 - pj{j}_2;")
                    e("    const S vx = zy * dz - zz * dy, vy = zz * dx - zx * dz, "
                      "vz = zx * dy - zy * dx;")
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
            mj = lit(ch.mult[j])
            e(f"{{ const S zx = z{j}_0 * {mj}, zy = z{j}_1 * {mj}, zz = z{j}_2 * {mj};")
            if ch.prismatic[j]:
                e(f"  o[{c}] += zx; o[{nva + c}] += zy; o[{2 * nva + c}] += zz; }}")
            else:
                e(f"  const S dx = pv[0] - pj{j}_0, dy = pv[1] - pj{j}_1, dz = pv[2] - pj{j}_2;")
                e(f"  o[{c}] += zy * dz - zz * dy; o[{nva + c}] += zz * dx - zx * dz; "
                  f"o[{2 * nva + c}] += zx * dy - zy * dx;")
                e(f"  o[{3 * nva + c}] += zx; o[{4 * nva + c}] += zy; o[{5 * nva + c}] += zz; }}")

    kernel("r2ik_fk", pose)
    kernel("r2ik_jac", jac)
