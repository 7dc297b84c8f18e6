"""Before and after the rows, in generated code: the problems' checks (``r2ik_prep``: each
term's data, the seed) and the selection of each problem's answer, verified in float64 by
the terms (``r2ik_select``: the goals' errors by FK, the constraints kept)."""

from __future__ import annotations


import numpy as np

from ...ik.checks import SEED_LIMIT_SLACK
from ...model import MAX_VALUE
from .. import interface
from .. import terms as term_registry
from .chain import Chain, limits, qvars
from .lm import emit_clip
from .refine import emit_refine, emit_secondary_cost, has_secondary
from .text import Emit, dlit


def emit_prep_kernel(e: Emit, ch: Chain):
    """Per problem: each term's check of its data in float64 (a pose goal: finite, position
    within MAX_VALUE, rotation orthonormal and right-handed, as
    ``PoseObjective.invalid_problems``) and the seed check (finite, within the limits, or
    :data:`ros2_ik.model.MAX_VALUE` where a coordinate has none, up to
    :data:`ros2_ik.ik.checks.SEED_LIMIT_SLACK` outside, as ``ik.checks.check_seeds``);
    active = both checks passed."""
    model = ch.model
    nq = model.nq
    lo = np.maximum(model.lower, -MAX_VALUE) - SEED_LIMIT_SLACK
    hi = np.minimum(model.upper, MAX_VALUE) + SEED_LIMIT_SLACK
    e("""
// Problems p_begin + i, i in [0, P): dat the terms' data, seeds (P or 1, nq) -> active (P,),
// flags (P,) (R2IK_FLAG_GOAL_OK | R2IK_FLAG_SEED_OK), done (P,) reset; the per-problem outputs
// from index 0.""")
    args = ("long long P, long long p_begin, const r2ik_data* R2IK_RESTRICT dat, "
            "const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "unsigned char* R2IK_RESTRICT active, unsigned char* R2IK_RESTRICT flags, "
            "int* R2IK_RESTRICT done")
    with e.kernel("r2ik_prep", args):
        e("const long long i = R2IK_ROW;")
        e("if (i >= P) return;")
        e("const long long p = p_begin + i;")
        e("bool ok = true;")
        for em in term_registry.emitters(ch):
            with e.block(""):
                em.emit_check(e)
        e("const double* sd = seeds + p * seed_stride;")
        e("bool sok = true;")
        for i in range(nq):
            e(f"if (!(sd[{i}] >= {dlit(lo[i])} && sd[{i}] <= {dlit(hi[i])})) sok = false;")
        e("flags[i] = (ok ? R2IK_FLAG_GOAL_OK : 0) | (sok ? R2IK_FLAG_SEED_OK : 0);")
        e("active[i] = (ok && sok) ? 1 : 0;")
        e("done[i] = R2IK_NO_ROW;  // (speed mode: the lowest converged seed index)")


def _emit_row_finalized(e: Emit, ch: Chain, nq: int, cont, lo, hi, around) -> None:
    """``qf``: the converged row ``row`` finalized (as the answer would be)."""
    e(f"const S* qr = q_rows + row * {nq};")
    e(f"double qf[{nq}];")
    emit_finalize(e, ch, lambda i: f"(double)qr[{i}]", "qf", cont, lo, hi, around)


def _emit_mode_choice(e: Emit, ch: Chain, nq: int, cont, lo, hi, around) -> None:
    """Among the converged rows, the one the solve mode prefers (distance: nearest the seed,
    wrap-aware; else the first in seed order)."""
    with e.block("if (distance)"):
        _emit_row_finalized(e, ch, nq, cont, lo, hi, around)
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
        e("if (best_c < 0) best_c = k;  // the first converged row in seed order")


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
    FK, the status: ``ik.batch.select`` for the speed and distance modes, and with cost terms
    (the converged row of least cost, in every mode)."""
    secondary = has_secondary(ch)
    model = ch.model
    nq = model.nq
    used, _ = qvars(ch)
    lo, hi, around = limits(model)
    cont = np.asarray(model.q_continuous, dtype=bool)
    neutral = np.clip(model.neutral_q(), lo, hi)
    ems = term_registry.emitters(ch)
    F = len(interface.out_fields(ems))
    e(f"""
// Per problem i in [0, P) (problem p_begin + i of the inputs): the winning row among its K
// rows (rows and flags indexed from 0): speed mode: the first converged row in seed order
// (the lowest seed index: a sequential run's answer, whatever ran in parallel); distance mode:
// the converged row nearest the seed (wrap-aware, largest coordinate); with cost terms, in
// every mode: the converged row of least cost (first on ties); none converged: the
// smallest pe/tol_p + re/tol_r (first on ties). q finalized in float64 (continuous joints
// within pi of the seed, the limits), its goal errors recomputed by float64 FK, success =
// errors within the tolerances (q is within the limits) and every constraint kept. out
// (P, nq + {F}) float64 from p_begin: q, then R2IK_OUT_* fields.""")
    args = ("long long P, long long p_begin, int K, const S* R2IK_RESTRICT q_rows, "
            "const unsigned char* R2IK_RESTRICT conv, const int* R2IK_RESTRICT iters, "
            "const S* R2IK_RESTRICT pe, const S* R2IK_RESTRICT re, "
            "const unsigned char* R2IK_RESTRICT tout, const unsigned char* R2IK_RESTRICT started, "
            "const unsigned char* R2IK_RESTRICT flags, const double* R2IK_RESTRICT seeds, "
            "long long seed_stride, const r2ik_data* R2IK_RESTRICT dat, "
            "const r2ik_options* R2IK_RESTRICT opt, const volatile int* stop, "
            "double* R2IK_RESTRICT out")
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
            for em in ems:
                em.emit_unsolved(e)
            e("return;")
        e("const double* sd = seeds + p * seed_stride;")
        if not secondary:  # (with cost terms, the cost chooses in every mode)
            e("const bool distance = opt->solve_mode == R2IK_MODE_DISTANCE;")
        e("int best = -1, best_c = -1; double best_err = 0, best_d = 0; bool any_t = false;")
        with e.block("for (int k = 0; k < K; ++k)"):
            e("const long long row = i * K + k;")
            e("if (tout[row]) any_t = true;")
            with e.block("if (conv[row])"):
                if secondary:  # the cost terms choose, whatever the mode (ik/batch.py's select)
                    _emit_row_finalized(e, ch, nq, cont, lo, hi, around)
                    e("double c = 0;")
                    with e.block(""):
                        e("typedef double S;  // (the cost in float64, as the reference's)")
                        e(f"c = {emit_secondary_cost(e, ch, 'qf')};")
                    e("if (best_c < 0 || c < best_d) { best_c = k; best_d = c; }")
                else:
                    _emit_mode_choice(e, ch, nq, cont, lo, hi, around)
            e("const double er = (double)pe[row] / tol_p + (double)re[row] / tol_r;")
            e("if (best < 0 || er < best_err) { best = k; best_err = er; }")
        e("if (best_c >= 0) best = best_c;")
        e("const long long row = i * K + best;")
        e(f"const S* qr = q_rows + row * {nq};")
        emit_finalize(e, ch, lambda i: f"(double)qr[{i}]", "o", cont, lo, hi, around)
        if has_secondary(ch):  # the cost terms lowered from the winning answer
            emit_refine(e, ch)
        e(f"double* f = o + {nq};")
        e("double pe64 = 0, re64 = 0;  // the goals' errors, by FK")
        e("int failed = 0;  // the status of the first constraint an answer fails")
        qa = ", ".join(f"o[{i}]" for i in used)
        for em in ems:  # the goals' errors, then the constraints (ik/batch.py's select)
            with e.block(""):
                cond = em.emit_verify(e, qa)
                if cond is not None:
                    e(f"if (failed == 0 && ({cond})) failed = {em.failed_status};")
        e("const bool ok = pe64 <= tol_p && re64 <= tol_r;  // verified by FK; q is clipped")
        e("f[R2IK_OUT_STATUS] = ok && failed ? failed : ok ? R2IK_STATUS_CONVERGED : "
          "*stop != 0 ? R2IK_STATUS_PREEMPTED : any_t ? R2IK_STATUS_TIMED_OUT : "
          "R2IK_STATUS_NOT_CONVERGED;")
        e("f[R2IK_OUT_POSITION_ERROR] = pe64; f[R2IK_OUT_ORIENTATION_ERROR] = re64;")
        e("f[R2IK_OUT_ITERATIONS] = (double)iters[row]; f[R2IK_OUT_SEED_INDEX] = (double)best; "
          "f[R2IK_OUT_FLAGS] = fl;")
