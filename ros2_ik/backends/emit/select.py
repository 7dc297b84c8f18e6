"""Before and after the rows, in generated code: the goal and seed checks (``r2ik_prep``), the
selection of each problem's answer with its FK verification (``r2ik_select``), and the
collision terms' test kernel (``r2ik_coll_terms``)."""

from __future__ import annotations


import numpy as np

from ...ik.checks import SEED_LIMIT_SLACK
from ...model import MAX_VALUE
from .. import interface
from .text import Emit, dlit
from .chain import Chain, limits, qvars
from .lm import emit_clip


#: the goal check's rotation bound (validate.ROTATION_TOL) as the generated code writes it
ROTATION_TOL_C = "1e-6"


def emit_prep_kernel(e: Emit, ch: Chain):
    """Per problem: the goal check in float64 (finite, position within MAX_VALUE, rotation
    orthonormal within :data:`ROTATION_TOL_C` and right-handed, as
    ``PoseObjective.invalid_problems``) and the seed check (finite, within the limits, or
    :data:`ros2_ik.model.MAX_VALUE` where a coordinate has none, up to
    :data:`ros2_ik.ik.checks.SEED_LIMIT_SLACK` outside, as ``ik.checks.check_seeds``); where
    asked, targets and weights cast to S (an invalid goal becomes the identity, so that the
    float math stays finite); active = both checks passed."""
    model = ch.model
    T, nq = ch.T, model.nq
    lo = np.maximum(model.lower, -MAX_VALUE) - SEED_LIMIT_SLACK
    hi = np.minimum(model.upper, MAX_VALUE) + SEED_LIMIT_SLACK
    e(f"""
// Problems p_begin + i, i in [0, P): tgt64 (P, {T}, 16), w64 (P or 1, {T}, 6), seeds (P or 1, nq)
// -> tgtS, wS (or null), active (P,), flags (P,) (R2IK_FLAG_GOAL_OK | R2IK_FLAG_SEED_OK),
// done (P,) reset; the per-problem outputs from index 0.""")
    args = ("long long P, long long p_begin, const double* R2IK_RESTRICT tgt64, "
            "const double* R2IK_RESTRICT w64, long long w_stride, "
            "const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "S* R2IK_RESTRICT tgtS, S* R2IK_RESTRICT wS, unsigned char* R2IK_RESTRICT active, "
            "unsigned char* R2IK_RESTRICT flags, int* R2IK_RESTRICT done")
    with e.kernel("r2ik_prep", args):
        e("const long long i = R2IK_ROW;")
        e("if (i >= P) return;")
        e("const long long p = p_begin + i;")
        e(f"const double* t = tgt64 + p * {16 * T};")
        e("bool ok = true;")
        e(f"for (int j = 0; j < {16 * T}; ++j) if (!(t[j] - t[j] == 0.0)) ok = false;")
        with e.block(f"for (int k = 0; ok && k < {T}; ++k)"):
            e("const double* m = t + 16 * k;")
            e(f"if (fabs(m[3]) > {MAX_VALUE!r} || fabs(m[7]) > {MAX_VALUE!r} || "
              f"fabs(m[11]) > {MAX_VALUE!r}) ok = false;")
            e("for (int a = 0; a < 3; ++a) for (int b = 0; b < 3; ++b) {")
            e("  const double d = m[a] * m[b] + m[4 + a] * m[4 + b] + m[8 + a] * m[8 + b];")
            e(f"  if (fabs(d - (a == b ? 1.0 : 0.0)) > {ROTATION_TOL_C}) ok = false; }}")
            e("const double det = m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - "
              "m[6] * m[8]) + m[2] * (m[4] * m[9] - m[5] * m[8]);")
            e("if (!(det > 0)) ok = false;")
        e("const double* sd = seeds + p * seed_stride;")
        e("bool sok = true;")
        for i in range(nq):
            e(f"if (!(sd[{i}] >= {dlit(lo[i])} && sd[{i}] <= {dlit(hi[i])})) sok = false;")
        with e.block("if (tgtS)"):
            e(f"for (int j = 0; j < {16 * T}; ++j) tgtS[i * {16 * T} + j] = "
              "ok ? S(t[j]) : S((j % 16) % 5 == 0 ? 1 : 0);")
            e(f"for (int j = 0; j < {6 * T}; ++j) wS[i * {6 * T} + j] = S(w64[p * w_stride + j]);")
        e("flags[i] = (ok ? R2IK_FLAG_GOAL_OK : 0) | (sok ? R2IK_FLAG_SEED_OK : 0);")
        e("active[i] = (ok && sok) ? 1 : 0;")
        e("done[i] = 0;")


def emit_finalize(e: Emit, ch: Chain, src, dst: str, cont, lo, hi, around):
    """``dst[i]`` = coordinate i of a row (``src(i)``, float64) finalized as
    ``ik.seeds.finalize_q``: continuous joints within pi of the seed ``sd``, then the limits;
    a coordinate no column moves is the seed's, exactly (a float32 row holds it rounded)."""
    moved = set(int(c) for c in ch.colq)
    for i in range(ch.model.nq):
        with e.block(""):
            e("typedef double S;")  # the clip below runs in float64
            e(f"double v = {src(i) if i in moved else f'sd[{i}]'};")
            if cont[i]:
                e(f"{{ const double x = R2IK_PI - (v - sd[{i}]); "
                  f"v = sd[{i}] + R2IK_PI - "
                  f"(x - 2.0 * R2IK_PI * floor(x / (2.0 * R2IK_PI))); }}")
            emit_clip(e, "v", i, lo, hi, around)
            e(f"{dst}[{i}] = v;")


def emit_select_kernel(e: Emit, ch: Chain):
    """Per problem (float64): the winning row, its q finalized, its goal errors recomputed by
    FK, the status: ``ik.batch.select`` for the speed and distance modes."""
    model = ch.model
    nq, T = model.nq, ch.T
    used, _ = qvars(ch)
    lo, hi, around = limits(model)
    cont = np.asarray(model.q_continuous, dtype=bool)
    neutral = np.clip(model.neutral_q(), lo, hi)
    F = len(interface.OUT_FIELDS)
    e(f"""
// Per problem i in [0, P) (problem p_begin + i of the inputs): the winning row among its K
// rows (rows and flags indexed from 0): speed mode: the converged row with the fewest
// iterations, then the lowest seed index; distance mode: the converged row nearest the seed
// (wrap-aware, largest coordinate); none converged: the smallest pe/tol_p + re/tol_r (first on
// ties). q finalized in float64 (continuous joints within pi of the seed, the limits), its goal
// errors recomputed by float64 FK against tgt64, success = errors within the tolerances (q is
// within the limits). out (P, nq + {F}) float64 from p_begin: q, then R2IK_OUT_* fields.""")
    args = ("long long P, long long p_begin, int K, const S* R2IK_RESTRICT q_rows, "
            "const unsigned char* R2IK_RESTRICT conv, const int* R2IK_RESTRICT iters, "
            "const S* R2IK_RESTRICT pe, const S* R2IK_RESTRICT re, "
            "const unsigned char* R2IK_RESTRICT tout, const unsigned char* R2IK_RESTRICT started, "
            "const unsigned char* R2IK_RESTRICT flags, const double* R2IK_RESTRICT seeds, "
            "long long seed_stride, const double* R2IK_RESTRICT tgt64, "
            "const double* R2IK_RESTRICT w64, long long w_stride, "
            "const r2ik_options* R2IK_RESTRICT opt, const volatile int* stop, "
            "double* R2IK_RESTRICT out")
    if ch.coll is not None:
        args += ", const double* R2IK_RESTRICT obs, long long n_obs"
    with e.kernel("r2ik_select", args):
        e("const long long i = R2IK_ROW;")
        e("if (i >= P) return;")
        e("const long long p = p_begin + i;")
        e(f"double* o = out + p * {nq + F};")
        e("const double tol_p = opt->position_tolerance, tol_r = opt->orientation_tolerance;")
        e("const int fl = flags[i] | ((started == 0 || started[i]) ? R2IK_FLAG_STARTED : 0);")
        e("const bool valid = (fl & R2IK_FLAG_GOAL_OK) && (fl & R2IK_FLAG_SEED_OK);")
        with e.block("if (!valid || !(fl & R2IK_FLAG_STARTED))"):
            e("// not solved: the seed inside the limits (mid-range for a bad seed)")
            e("const double* sd = (fl & R2IK_FLAG_SEED_OK) ? seeds + p * seed_stride : "
              "(const double*)0;")
            for i in range(nq):
                with e.block(""):
                    e("typedef double S;")
                    e(f"double v = sd ? sd[{i}] : {dlit(neutral[i])};")
                    emit_clip(e, "v", i, lo, hi, around)
                    e(f"o[{i}] = v;")
            e(f"double* f = o + {nq};")
            e("f[R2IK_OUT_STATUS] = !valid ? R2IK_STATUS_INVALID_INPUT : *stop != 0 ? "
              "R2IK_STATUS_PREEMPTED : R2IK_STATUS_TIMED_OUT;")
            e("f[R2IK_OUT_POSITION_ERROR] = f[R2IK_OUT_ORIENTATION_ERROR] = r2ik_nan();")
            e("f[R2IK_OUT_ITERATIONS] = 0; f[R2IK_OUT_SEED_INDEX] = 0; f[R2IK_OUT_FLAGS] = fl;")
            e("f[R2IK_OUT_CLEARANCE] = r2ik_nan(); f[R2IK_OUT_PAIR] = -1;")
            e("return;")
        e("const double* sd = seeds + p * seed_stride;")
        e("const bool distance = opt->solve_mode == R2IK_MODE_DISTANCE;")
        e("int best = -1, best_c = -1; long long best_key = 0; double best_err = 0, best_d = 0; "
          "bool any_t = false;")
        with e.block("for (int k = 0; k < K; ++k)"):
            e("const long long row = i * K + k;")
            e("if (tout[row]) any_t = true;")
            with e.block("if (conv[row])"):
                with e.block("if (distance)"):
                    e(f"const S* qr = q_rows + row * {nq};")
                    e(f"double qf[{nq}];")
                    emit_finalize(e, ch, lambda i: f"(double)qr[{i}]", "qf", cont, lo, hi, around)
                    e("double dist = 0;")
                    for i in range(nq):
                        if cont[i]:
                            e(f"{{ const double x = R2IK_PI - (qf[{i}] - sd[{i}]); "
                              f"const double dd = fabs(R2IK_PI - (x - 2.0 * R2IK_PI * "
                              f"floor(x / (2.0 * R2IK_PI)))); if (dd > dist) dist = dd; }}")
                        else:
                            e(f"{{ const double dd = fabs(qf[{i}] - sd[{i}]); "
                              "if (dd > dist) dist = dd; }")
                    e("if (best_c < 0 || dist < best_d) { best_c = k; best_d = dist; }")
                with e.block("else"):
                    e("const long long key = (long long)iters[row] * K + k;")
                    e("if (best_c < 0 || key < best_key) { best_c = k; best_key = key; }")
            e("const double er = (double)pe[row] / tol_p + (double)re[row] / tol_r;")
            e("if (best < 0 || er < best_err) { best = k; best_err = er; }")
        e("if (best_c >= 0) best = best_c;")
        e("const long long row = i * K + best;")
        e(f"const S* qr = q_rows + row * {nq};")
        emit_finalize(e, ch, lambda i: f"(double)qr[{i}]", "o", cont, lo, hi, around)
        e(f"double r[{6 * T}]; double pe64, re64;")
        e(f"r2ik_errors<double>({', '.join(f'o[{i}]' for i in used)}, tgt64 + p * {16 * T}, "
          "w64 + p * w_stride, r, pe64, re64);")
        e("const bool ok = pe64 <= tol_p && re64 <= tol_r;  // verified by FK; q is clipped")
        e("double clr64 = INFINITY; long long which = -1;")
        if ch.coll is not None:  # the exact distances of the answer (ik/batch.py's select)
            e(f"r2ik_coll_min({', '.join(f'o[{i}]' for i in used)}, obs, n_obs, "
              "opt->self_collisions != 0, opt->collision_margin, opt->collision_activation, "
              "clr64, which);")
        e("const bool hit = ok && clr64 < opt->collision_margin;")
        e(f"double* f = o + {nq};")
        e("f[R2IK_OUT_STATUS] = hit ? R2IK_STATUS_IN_COLLISION : ok ? R2IK_STATUS_CONVERGED : "
          "*stop != 0 ? R2IK_STATUS_PREEMPTED : any_t ? R2IK_STATUS_TIMED_OUT : "
          "R2IK_STATUS_NOT_CONVERGED;")
        e("f[R2IK_OUT_CLEARANCE] = clr64; f[R2IK_OUT_PAIR] = (double)which;")
        e("f[R2IK_OUT_POSITION_ERROR] = pe64; f[R2IK_OUT_ORIENTATION_ERROR] = re64;")
        e("f[R2IK_OUT_ITERATIONS] = (double)iters[row]; f[R2IK_OUT_SEED_INDEX] = (double)best; "
          "f[R2IK_OUT_FLAGS] = fl;")


def emit_coll_terms_kernel(e: Emit, ch: Chain):
    """``r2ik_coll_terms``: per configuration, the collision terms the LM rows add (cost, the
    smallest distance, ``J^T J`` and ``J^T r`` over the columns ``colq``), for the tests that
    hold them against the reference (``ik/collision.py``), and the exact check's distance and
    pair."""
    nq, nc = ch.model.nq, ch.nc
    used, _ = qvars(ch)
    W = 4 + nc * nc + nc
    e(f"""
// out (B, {W}): cost, smallest distance, exact check's distance, its pair, H ({nc}x{nc}), g""")
    args = ("long long B, const double* R2IK_RESTRICT q_all, const double* R2IK_RESTRICT obs, "
            "long long n_obs, const r2ik_options* R2IK_RESTRICT opt, double* R2IK_RESTRICT out")
    with e.kernel("r2ik_coll_terms", args):
        e("const long long b = R2IK_ROW;")
        e("if (b >= B) return;")
        e(f"const double* q = q_all + b * {nq};")
        e(f"S H[{nc * nc}], g[{nc}], clear;")
        from ..codegen_collision import emit_trig  # noqa: PLC0415

        emit_trig(e, ch.coll, "S", lambda i: f"S(q[{i}])", "trg", {})
        e(f"const S cost = r2ik_coll<S>({', '.join(f'S(q[{i}])' for i in used)}, obs, n_obs, "
          "opt->self_collisions != 0, S(opt->collision_margin), S(opt->collision_activation), "
          "S(opt->collision_weight), clear, H, g, trg);")
        e("double d64; long long which;")
        e(f"r2ik_coll_min({', '.join(f'q[{i}]' for i in used)}, obs, n_obs, "
          "opt->self_collisions != 0, opt->collision_margin, opt->collision_activation, d64, "
          "which);")
        e(f"double* o = out + b * {W};")
        e("o[0] = (double)cost; o[1] = (double)clear; o[2] = d64; o[3] = (double)which;")
        e(f"for (int i = 0; i < {nc * nc}; ++i) o[4 + i] = (double)H[i];")
        e(f"for (int i = 0; i < {nc}; ++i) o[{4 + nc * nc} + i] = (double)g[i];")
