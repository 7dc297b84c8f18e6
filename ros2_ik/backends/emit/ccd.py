"""The CCD sweep in generated code (``r2ik_ccd``): the closed-form updates of ``ik/ccd.py``,
one tip, one row per thread."""

from __future__ import annotations


import numpy as np

from ...ik.ccd import DEFAULT_RTOL, ORIENTATION_SCALE
from ...ik.seeds import movable_coordinates, restart_seeds
from .text import Emit
from .chain import Chain, joint_frame_decl, limits, q_args, qvars
from .kinematics import emit_fk_tip
from .lm import emit_clip, emit_start_value


def emit_ccd_kernel(e: Emit, ch: Chain):
    """CCD sweeps with the closed-form updates of ``ik/ccd.py`` (one tip), one row per thread;
    the rows start as the LM rows do (:func:`emit_start_value`)."""
    model = ch.model
    nq = model.nq
    used, qv = qvars(ch)
    lo, hi, around = limits(model)
    _, keep = restart_seeds(model, 1, 0, movable_coordinates(model, ch.tips))
    frozen = {model.joint_index(n) for n in model.frozen}
    # CCD moves the non-mimic, non-frozen joints, tip first
    joints = [j for j in range(ch.starts[1] - 1, -1, -1)
              if not ch.mimic[j] and ch.link[j] not in frozen]
    e(f"""
// CCD on rows p * K + k of P problems (indexed from 0): start as r2ik_lm's rows, sweeps of
// ik/ccd.py until the tolerances, a sweep improving the cost by less than {DEFAULT_RTOL!r},
// max_sweeps, the deadline or a stop. Outputs per row: q_out (rows, nq), conv/tout (u8),
// sweeps (i32), pe/re (S).""")
    args = ("long long P, int K, const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const r2ik_data* R2IK_RESTRICT dat, "
            "const unsigned char* R2IK_RESTRICT active, const r2ik_options* R2IK_RESTRICT opt, "
            "long long max_sweeps, const unsigned long long* clock0, const long long* params, "
            "const volatile int* stop, S* R2IK_RESTRICT q_out, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT sweeps_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    with e.kernel("r2ik_ccd", args):
        e("const long long row = R2IK_ROW;")
        e("if (row >= P * (long long)K) return;")
        e("const long long p = row / K; const int k = (int)(row - p * K);")
        e(f"S* qr = q_out + row * {nq};")
        e("S tgt[16], w[6];  // the pose goal's data (CCD solves a pose goal, one tip)")
        e("for (int i = 0; i < 16; ++i) tgt[i] = S(dat->pose_target[p * "
          "dat->pose_target_stride + i]);")
        e("for (int i = 0; i < 6; ++i) w[i] = S(dat->pose_weight[p * dat->pose_weight_stride + "
          "i]);")
        e("const double* sd = seeds + p * seed_stride;")
        e(f"const double* rk = rnd + (long long)(k > 0 ? k - 1 : 0) * {nq};")
        e("const double* st = (const double*)0;")
        e("S " + ", ".join(f"q{i}" for i in used) + ";")
        for i in range(nq):
            with e.block(""):
                emit_start_value(e, ch, i, keep, used, lo, hi, around)
                e(f"q{i} = v;" if i in used else f"qr[{i}] = v;")
        e("const S tol_p = S(opt->position_tolerance), tol_r = S(opt->orientation_tolerance);")
        e("const S wp = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]) / S(3);")
        e(f"const S wo = S({ORIENTATION_SCALE!r}) * ((w[3] * w[3] + w[4] * w[4] + w[5] * w[5]) "
          f"/ S(3));")
        e("const long long cap = opt->max_iterations < max_sweeps ? opt->max_iterations : "
          "max_sweeps;")
        e("const unsigned long long deadline = params[0] < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)params[0];")
        e("S r[6]; S pe_r, re_r;")
        e(f"S cost = r2ik_errors<S>({q_args(ch)}, tgt, w, r, pe_r, re_r);")
        e("bool conv = pe_r <= tol_p && re_r <= tol_r; bool act = active[p] != 0;")
        e("bool timed = false; int sw = 0;")
        e("S R[9], pv[3];")
        e(joint_frame_decl(ch))
        with e.block("for (long long it = 0; it < cap; ++it)"):
            e("act = act && !conv;")
            e("if (!act) break;")
            e("if (deadline != 0ull && r2ik_now() >= deadline) { timed = true; break; }")
            e("if (*stop != 0) break;")
            for j in joints:
                with e.block(f"/* joint {j} */"):
                    # full FK with the current q: tip pose and this joint's world frame
                    emit_fk_tip(e, ch, 0, qv, keep_joint_frames=True, sincos=True)
                    e(f"const S zx = z{j}_0, zy = z{j}_1, zz = z{j}_2;")
                    e("const S* Tt = tgt;")
                    if ch.prismatic[j]:
                        e("S step = (zx * (Tt[3] - pv[0]) + zy * (Tt[7] - pv[1]) + "
                          "zz * (Tt[11] - pv[2])) * (wp > 0 ? S(1) : S(0));")
                    else:
                        e(f"S ux = pv[0] - pj{j}_0, uy = pv[1] - pj{j}_1, uz = pv[2] - pj{j}_2;")
                        e(f"S vx = Tt[3] - pj{j}_0, vy = Tt[7] - pj{j}_1, vz = Tt[11] - pj{j}_2;")
                        e("{ const S du = ux * zx + uy * zy + uz * zz; "
                          "ux = ux - du * zx; uy = uy - du * zy; uz = uz - du * zz; }")
                        e("{ const S dv = vx * zx + vy * zy + vz * zz; "
                          "vx = vx - dv * zx; vy = vy - dv * zy; vz = vz - dv * zz; }")
                        e("S a = wp * (ux * vx + uy * vy + uz * vz);")
                        e("S b = wp * (zx * (uy * vz - uz * vy) + zy * (uz * vx - ux * vz) + "
                          "zz * (ux * vy - uy * vx));")
                        # tip axes e_i = columns of R; target axes t_i = columns of Tt
                        e("S sa = S(0), sb = S(0), szz = S(0);")
                        for i in range(3):
                            e(f"{{ const S ex = R[{i}], ey = R[{3 + i}], ez = R[{6 + i}];")
                            e(f"  const S tx = Tt[{i}], ty = Tt[{4 + i}], tz = Tt[{8 + i}];")
                            e("  sa = sa + (ex * tx + ey * ty + ez * tz);")
                            e("  szz = szz + (zx * ex + zy * ey + zz * ez) * "
                              "(zx * tx + zy * ty + zz * tz);")
                            e("  sb = sb + (zx * (ey * tz - ez * ty) + zy * (ez * tx - ex * tz) + "
                              "zz * (ex * ty - ey * tx)); }")
                        e("a = a + wo * (sa - szz); b = b + wo * sb;")
                        e("S step = atan2(b, a);")
                    i = ch.qi[j]
                    e(f"S nv = q{i} + step;")
                    emit_clip(e, "nv", i, lo, hi, np.zeros(nq, bool), wrap=False)
                    e(f"q{i} = nv;")
            e("sw += 1;")
            e("S pe2, re2;")
            e(f"const S cost2 = r2ik_errors<S>({q_args(ch)}, tgt, w, r, pe2, re2);")
            e(f"const bool stalled = cost2 >= cost * (S(1) - S({DEFAULT_RTOL!r}));")
            e("pe_r = pe2; re_r = re2; cost = cost2;")
            e("conv = conv || (pe_r <= tol_p && re_r <= tol_r);")
            e("act = act && !stalled;")
        for i in used:
            e(f"qr[{i}] = q{i};")
        e("conv_o[row] = conv ? 1 : 0; sweeps_o[row] = sw; pe_o[row] = pe_r; re_o[row] = re_r; "
          "tout_o[row] = timed ? 1 : 0;")
