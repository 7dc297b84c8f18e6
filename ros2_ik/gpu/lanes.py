"""The host's LM rows, several problems per instruction (g++ vector extensions).

The generated LM kernel (:func:`.codegen._emit_lm_kernel`) runs one row at a time: on a CPU its
small Cholesky, triangular solves and FK are chains of dependent divisions, square roots and
products, so the core mostly waits on latencies. ``r2ik_lm_lanes`` below runs :data:`LANES`
rows side by side, one per lane of a ``double`` vector type: every lane does the scalar
kernel's operations in the same order (the branches become lane-wise selects of values both
sides compute the same way; sine and cosine are :mod:`ros2_ik.solvers.sincos`'s recipe in
vector instructions, atan2 the same libm call lane by lane), so each
row's q, iterations and errors are the scalar kernel's bit for bit, and so the Numba kernel's
(``test_cxx.py``). A lane that ends its row (converged, out of iterations, stuck, cancelled or
out of time) writes it out and takes the next: the problem's next seed, in order (speed mode's
``done`` flag stays a matter of one lane), else the next problem.

Only host float64 sources carry it (:func:`.codegen.solve_source` with ``host=True``); the
host wrapper of ``r2ik_lm`` then calls it once for all its rows. The CUDA text is unchanged.
"""

from __future__ import annotations

import math

from .codegen import (
    _TWO_PI, Chain, _double, _Emit, _emit_clip, _emit_evaluate, _emit_jacobian, _emit_lm_step,
    _emit_turn_inside, _frame_args, _jac_structure, _limits, _lit, _pinned, _q_args, _qvars,
    _sincos_steps,
)
from ..solvers import sincos as sc
from ..solvers.common import movable_coordinates, restart_seeds

__all__ = ["LANES", "lanes_source", "types_source"]

#: rows per vector: 4 doubles (one AVX register; two SSE2 ones where the build has no AVX)
LANES = 4

_TYPES = r"""
// ---- lanes: R2IK_L rows side by side (host only; x86-64 g++, built for AVX2 and used where
// the CPU has it, else r2ik_lm_lanes runs r2ik_lm row by row)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define R2IK_LANES 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define R2IK_L LANES_N
typedef double r2ik_dv __attribute__((vector_size(8 * R2IK_L)));
typedef long long r2ik_mv __attribute__((vector_size(8 * R2IK_L)));
struct V {
  r2ik_dv x;
  V() = default;  // scratch is not zeroed; the kernel's state is, where it is declared
  V(double s) { for (int l = 0; l < R2IK_L; ++l) x[l] = s; }
  explicit V(r2ik_dv y) : x(y) {}
};
struct M {
  r2ik_mv x;
  explicit M(r2ik_mv y) : x(y) {}
  bool operator[](int l) const { return x[l] != 0; }
};
static inline V operator+(V a, V b) { return V(a.x + b.x); }
static inline V operator-(V a, V b) { return V(a.x - b.x); }
static inline V operator*(V a, V b) { return V(a.x * b.x); }
static inline V operator/(V a, V b) { return V(a.x / b.x); }
static inline V operator-(V a) { return V(-a.x); }
static inline M operator<(V a, V b) { return M(a.x < b.x); }
static inline M operator>(V a, V b) { return M(a.x > b.x); }
static inline M operator<=(V a, V b) { return M(a.x <= b.x); }
static inline M operator>=(V a, V b) { return M(a.x >= b.x); }
static inline M operator==(V a, V b) { return M(a.x == b.x); }
static inline M operator&(M a, M b) { return M(a.x & b.x); }
static inline M operator|(M a, M b) { return M(a.x | b.x); }
static inline M operator~(M a) { return M(~a.x); }
#define R2IK_LANEWISE for (int l = 0; l < R2IK_L; ++l)
static inline bool r2ik_any(M a) { R2IK_LANEWISE if (a.x[l]) return true; return false; }
static inline M r2ik_mask(const bool* b) {
  r2ik_mv m; R2IK_LANEWISE m[l] = b[l] ? -1 : 0; return M(m);
}
static inline V r2ik_sel(M c, V a, V b) { return V(c.x ? a.x : b.x); }
// sqrt and floor: one AVX instruction for 4 lanes (IEEE's, so the scalar code's values)
#if R2IK_L == 4
static inline V sqrt(V a) { return V(__builtin_ia32_sqrtpd256(a.x)); }
static inline V r2ik_floor(V a) { return V(__builtin_ia32_roundpd256(a.x, 0x9)); }
#else
static inline V sqrt(V a) { V r; R2IK_LANEWISE r.x[l] = std::sqrt(a.x[l]); return r; }
static inline V r2ik_floor(V a) { V r; R2IK_LANEWISE r.x[l] = std::floor(a.x[l]); return r; }
#endif
static inline V atan2(V a, V b) {
  V r; R2IK_LANEWISE r.x[l] = std::atan2(a.x[l], b.x[l]); return r;
}

// r2ik_so3_log with its branches as selects (each candidate computed as the scalar code does)
static inline void r2ik_so3_log_v(V m00, V m01, V m02, V m10, V m11, V m12, V m20, V m21,
                                  V m22, V* out) {
  const V tr = m00 + m11 + m22;
  const V one = V(1.0);
  const V d0 = one + tr, d1 = one + m00 - m11 - m22, d2 = one - m00 + m11 - m22;
  const V d3 = one - m00 - m11 + m22;
  const M c0 = (d0 >= d1) & (d0 >= d2) & (d0 >= d3), c1 = (d1 >= d2) & (d1 >= d3);
  const M c2 = d2 >= d3;
  V x = r2ik_sel(c0, m21 - m12, r2ik_sel(c1, d1, r2ik_sel(c2, m01 + m10, m02 + m20)));
  V y = r2ik_sel(c0, m02 - m20, r2ik_sel(c1, m01 + m10, r2ik_sel(c2, d2, m12 + m21)));
  V zq = r2ik_sel(c0, m10 - m01, r2ik_sel(c1, m02 + m20, r2ik_sel(c2, m12 + m21, d3)));
  V wq = r2ik_sel(c0, d0, r2ik_sel(c1, m21 - m12, r2ik_sel(c2, m02 - m20, m10 - m01)));
  const V n = sqrt(x * x + y * y + zq * zq + wq * wq);
  x = x / n; y = y / n; zq = zq / n; wq = wq / n;
  const M neg = wq < V(0.0);
  x = r2ik_sel(neg, -x, x); y = r2ik_sel(neg, -y, y);
  zq = r2ik_sel(neg, -zq, zq); wq = r2ik_sel(neg, -wq, wq);
  const V sh = sqrt(x * x + y * y + zq * zq);
  const M small = sh < V(1e-12);
  const V sc = V(2.0) * atan2(sh, wq) / sh;
  out[0] = r2ik_sel(small, V(2.0) * x, x * sc);
  out[1] = r2ik_sel(small, V(2.0) * y, y * sc);
  out[2] = r2ik_sel(small, V(2.0) * zq, zq * sc);
}
"""


def _sincos_v() -> str:
    """``r2ik_sincos`` of a vector: the host's scalar recipe (:func:`.codegen._sincos_steps`,
    :mod:`ros2_ik.solvers.sincos`) with its branches as selects; a lane beyond the reduction's
    range takes libm's pair, as the scalar code does."""
    m = _double(sc.REDUCE_MAX)
    return f"""
static inline void r2ik_sincos(V x, V& s, V& c) {{
{_sincos_steps("V", lambda v: f"V({_double(v)})", "r2ik_floor")}\
  const M swap = (quad == V(1.0)) | (quad == V(3.0));
  const V s1 = r2ik_sel(swap, cp, sp), c1 = r2ik_sel(swap, sp, cp);
  s = r2ik_sel(quad >= V(2.0), -s1, s1);
  c = r2ik_sel((quad == V(1.0)) | (quad == V(2.0)), -c1, c1);
  const M out = ~((x <= V({m})) & (x >= V(-{m})));
  if (r2ik_any(out)) {{
    R2IK_LANEWISE if (out[l]) {{ s.x[l] = std::sin(x.x[l]); c.x[l] = std::cos(x.x[l]); }}
  }}
}}
"""


def types_source(lanes: int = LANES) -> str:
    """The lanes' types and functions (vector arithmetic, selects, sine and cosine, the SO(3)
    log), opening the x86-64 g++ block built for AVX2 (the caller closes it with ``#pragma GCC
    pop_options`` and ``#endif``)."""
    head, log = _TYPES.replace("LANES_N", str(int(lanes))).split("// r2ik_so3_log with")
    return head + _sincos_v() + "\n// r2ik_so3_log with" + log


def _sel(c: str, a: str, b: str) -> str:
    return f"r2ik_sel({c}, {a}, {b})"


def _emit_clip_v(e: _Emit, var: str, i: int, lo, hi, around):
    """The scalar clip (:func:`.codegen._emit_clip`) as lane-wise selects."""
    if around[i]:
        e(f"{{ const M up_ = ({var} > {_lit(hi[i])}) & ({var} - {_TWO_PI} >= {_lit(lo[i])});")
        e(f"  const M dn_ = ~up_ & ({var} < {_lit(lo[i])}) & "
          f"({var} + {_TWO_PI} <= {_lit(hi[i])});")
        e(f"  {var} = r2ik_sel(up_, {var} - {_TWO_PI}, "
          f"r2ik_sel(dn_, {var} + {_TWO_PI}, {var})); }}")
    if math.isfinite(lo[i]):
        e(f"{var} = r2ik_sel({var} < {_lit(lo[i])}, {_lit(lo[i])}, {var});")
    if math.isfinite(hi[i]):
        e(f"{var} = r2ik_sel({var} > {_lit(hi[i])}, {_lit(hi[i])}, {var});")


def lanes_source(ch: Chain, lanes: int = LANES) -> str:
    """Host C++ (after the float64 solve source's common part): the lane types, the lanes'
    evaluate and ``r2ik_lm_lanes(rows, <r2ik_lm's arguments>)``, which solves the first
    ``rows / K`` problems (all their rows, problem-major as ``r2ik_lm``)."""
    model = ch.model
    nq, T, nc, m = model.nq, ch.T, ch.nc, 6 * ch.T
    used, _ = _qvars(ch)
    lo, hi, around = _limits(model)
    _, keep = restart_seeds(model, 1, 0, movable_coordinates(model, ch.tips))
    nz = _jac_structure(ch)
    e = _Emit()
    e(types_source(lanes))
    _emit_evaluate(e, ch, "r2ik_eval_v", frames=True, sel=_sel, log="r2ik_so3_log_v",
                   sincos=True)
    _emit_jacobian(e, ch, "r2ik_jac_residual_v")  # here, so that it is built for AVX2 too
    qv = ", ".join(f"q{i}" for i in used)
    args = ("long long rows, const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const double* R2IK_RESTRICT tgt_all, "
            "const double* R2IK_RESTRICT w_all, long long P, int K, "
            "const unsigned char* R2IK_RESTRICT active, int max_iter, "
            "const double* R2IK_RESTRICT fp, int speed, const unsigned long long* clock0, "
            "const long long* params, const volatile int* stop, volatile int* done, "
            "double* R2IK_RESTRICT q_out, unsigned char* R2IK_RESTRICT conv_o, "
            "int* R2IK_RESTRICT iters_o, double* R2IK_RESTRICT pe_o, "
            "double* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    with e.block(f"static void r2ik_lm_lanes_v({args})"):
        e("typedef double S;")
        e("const long long NP = K > 0 && rows / K < P ? rows / K : P;")
        e("const double tol_p = fp[0], tol_r = fp[1], lam0 = fp[2], lmin = fp[3], lmax = fp[4], "
          "up = fp[5], down = fp[6], stall_f = fp[7];")
        e("const int stall_n = (int)fp[8];")
        e("const double nonmono = fp[9];")
        e("const int exc_n = (int)fp[10], exc_stall = (int)fp[11];")
        e("const long long budget_ns = params[0];")
        e("const unsigned long long deadline = budget_ns < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)budget_ns;")
        e(f"V {qv};")
        e(f"V tg[{16 * T}] = {{}}, wv[{6 * T}] = {{}}, r[{m}] = {{}}, r2[{m}] = {{}}, "
          f"J[{m * nc}] = {{}}, J2[{m * nc}] = {{}};")
        e("V cost = V(0.0), cost0 = V(0.0), lam = V(0.0), pe_r = V(0.0), re_r = V(0.0);")
        moved = list(ch.colq)
        e("// the limit excursion (dls.py): a lane's start values, where an excursion left, and")
        e("// the errors there; phase 0 may start one, 1 in it, 2 not")
        e("V " + ", ".join(f"qS{i} = V(0.0), qA{i} = V(0.0)" for i in moved)
          + ", pe_a = V(0.0), re_a = V(0.0);")
        e("int phase[R2IK_L], it0[R2IK_L]; bool mono[R2IK_L];")
        frames = _frame_args(ch).split(", ")
        e("V " + ", ".join(f"{f} = V(0.0)" for f in frames) + ";")
        e("bool live[R2IK_L], init[R2IK_L], dead[R2IK_L], okl[R2IK_L];")
        e("int it[R2IK_L], stall[R2IK_L], kk[R2IK_L]; long long pp[R2IK_L];")
        e("for (int l = 0; l < R2IK_L; ++l) { live[l] = init[l] = dead[l] = okl[l] = false; "
          "it[l] = stall[l] = 0; kk[l] = 0; pp[l] = -1; }")
        e("long long next_p = 0;")
        with e.block("for (;;)"):
            e("// lanes without a row take the next one (a skipped row is written at once)")
            with e.block("for (int l = 0; l < R2IK_L; ++l)"):
                with e.block("while (!live[l] && !dead[l])"):
                    e("long long p; int k;")
                    e("if (pp[l] >= 0 && kk[l] + 1 < K) { p = pp[l]; k = kk[l] + 1; }")
                    e("else if (next_p < NP) { p = next_p++; k = 0; }")
                    e("else { dead[l] = true; break; }")
                    e("pp[l] = p; kk[l] = k;")
                    e("const long long row = p * K + k;")
                    e(f"double* qo = q_out + row * {nq};")
                    e("const double* sd = seeds + p * seed_stride;")
                    e(f"const double* rk = rnd + (long long)(k > 0 ? k - 1 : 0) * {nq};")
                    for i in range(nq):
                        src = (f"sd[{i}]" if keep[i] or i not in used
                               else f"(k == 0 ? sd[{i}] : rk[{i}])")
                        with e.block(""):
                            e(f"S v = S({src});")
                            _emit_clip(e, "v", i, lo, hi, around)
                            e(f"q{i}.x[l] = v;" if i in used else f"qo[{i}] = v;")
                    with e.block("if (active[p] && !(speed && done[p]))"):
                        e(f"for (int i = 0; i < {16 * T}; ++i) tg[i].x[l] = tgt_all[p * {16 * T} "
                          "+ i];")
                        e(f"for (int i = 0; i < {6 * T}; ++i) wv[i].x[l] = w_all[p * {6 * T} + i];")
                        e("live[l] = true; init[l] = true; it[l] = 0; stall[l] = 0; "
                          "okl[l] = false;")
                        e("phase[l] = ((k < K - 1 ? stall_n : 0) <= 0 && exc_n > 0) ? 0 : 2; "
                          "it0[l] = 0; mono[l] = false;")
                        e(" ".join(f"qS{i}.x[l] = q{i}.x[l];" for i in moved))
                    with e.block("else"):
                        for i in used:
                            e(f"qo[{i}] = q{i}.x[l];")
                        e("conv_o[row] = 0; iters_o[row] = 0; pe_o[row] = INFINITY; "
                          "re_o[row] = INFINITY; tout_o[row] = 0;")
            e("bool any_live = false;")
            e("for (int l = 0; l < R2IK_L; ++l) any_live = any_live || live[l];")
            e("if (!any_live) break;")
            e("const M initm = r2ik_mask(init);")
            e("// the step of every lane (an initial lane's is not used: its trial is its seed)")
            e(f"V H0[{nc * nc}], g[{nc}], dq[{nc}], qs[{nc}];")
            e(f"M blocked[{nc}] = {{" + ", ".join(["M(r2ik_mv{})"] * nc) + "};")
            e("bool rel[R2IK_L];")
            e("for (int l = 0; l < R2IK_L; ++l) rel[l] = phase[l] == 1;")
            e("const M release = r2ik_mask(rel);")
            _emit_lm_step(e, ch, nz, lo, hi, around, vector=True)
            for a in range(nc):
                i = ch.colq[a]
                with e.block(""):
                    e(f"qs[{a}] = q{i}; V v = q{i} + dq[{a}];")
                    if around[i]:  # an excursion's revolute joints go unclipped
                        e("const V v0 = v;")
                        _emit_clip_v(e, "v", i, lo, hi, around)
                        e("v = r2ik_sel(release, v0, v);")
                    else:
                        _emit_clip_v(e, "v", i, lo, hi, around)
                    e(f"q{i} = r2ik_sel(initm, q{i}, v);")
            e("V pe2, re2;")
            e(f"const V cost2 = r2ik_eval_v<V>({_q_args(ch)}, tg, wv, r2, pe2, re2, "
              f"{_frame_args(ch)});")
            e(f"r2ik_jac_residual_v<V>({_frame_args(ch)}, tg, wv, J2);")
            e("// accepted (or initial) lanes take the trial; the others go back")
            e("// the reference: the seed's cost in a lane's first nonmono iterations (dls.py)")
            e("bool nmb[R2IK_L];")
            e("for (int l = 0; l < R2IK_L; ++l) nmb[l] = !mono[l] && (double)(it[l] - it0[l]) "
              "< nonmono;")
            e("const M better = cost2 < r2ik_sel(r2ik_mask(nmb), cost0, cost), "
              "acc = initm | better;")
            e("cost0 = r2ik_sel(initm, cost2, cost0);")
            e("const M slow = cost2 > cost * V(stall_f);")
            e("const V ld = lam * V(down), lu = lam * V(up);")
            e("const V lam_acc = r2ik_sel(ld > V(lmin), ld, V(lmin));")
            e("const V lam_rej = r2ik_sel(lu < V(lmax), lu, V(lmax));")
            e("const M stuck = ~acc & (lam_rej == lam);")
            e("lam = r2ik_sel(initm, V(lam0), r2ik_sel(acc, lam_acc, lam_rej));")
            e("cost = r2ik_sel(acc, cost2, cost); pe_r = r2ik_sel(acc, pe2, pe_r); "
              "re_r = r2ik_sel(acc, re2, re_r);")
            e(f"for (int i = 0; i < {m}; ++i) r[i] = r2ik_sel(acc, r2[i], r[i]);")
            for k in range(m * nc):
                if nz[k // nc, k % nc]:
                    e(f"J[{k}] = r2ik_sel(acc, J2[{k}], J[{k}]);")
            for a in range(nc):
                e(f"q{ch.colq[a]} = r2ik_sel(acc, q{ch.colq[a]}, qs[{a}]);")
            e("const M okm = (pe_r <= V(tol_p)) & (re_r <= V(tol_r));")
            e("// per lane: the scalar kernel's loop test, then its flag and clock checks")
            e("const bool stopped = *stop != 0;")
            e("const unsigned long long now = budget_ns >= 0 ? r2ik_now() : 0ull;")
            with e.block("for (int l = 0; l < R2IK_L; ++l)"):
                e("if (!live[l]) continue;")
                e("bool end = false, tm = false;")
                e("if (init[l]) init[l] = false;")
                e("else { it[l] += 1; if (better[l]) stall[l] = slow[l] ? stall[l] + 1 : 0; "
                  "else { end = stuck[l]; stall[l] += 1; } }")
                e("okl[l] = okm[l];")
                with e.block("if (phase[l] == 1 && (okl[l] || it[l] - it0[l] >= exc_n))"):
                    e("bool inside = true;")
                    with e.block("if (okl[l])"):
                        _emit_turn_inside(e, moved, lo, hi, around, "q{}.x[l]", "inside")
                    with e.block("if (!(okl[l] && inside))"):
                        e("// back where the excursion left (evaluated there next pass)")
                        e(" ".join(f"q{i}.x[l] = qA{i}.x[l];" for i in moved))
                        e("pe_r.x[l] = pe_a.x[l]; re_r.x[l] = re_a.x[l]; okl[l] = false; "
                          "init[l] = true; stall[l] = 0;")
                    e("mono[l] = true; phase[l] = 2;")
                e("const long long p = pp[l];")
                with e.block("if (!end)"):
                    e("const int give_up = kk[l] < K - 1 ? stall_n : 0;")
                    e("if (okl[l] || it[l] >= max_iter || (give_up > 0 && stall[l] >= give_up)) "
                      "end = true;")
                    e("else if ((it[l] & 3) == 0 && (stopped || (speed && done[p]))) end = true;")
                    e("else if (budget_ns >= 0 && now >= deadline) { end = true; tm = true; }")
                with e.block("if (!end && phase[l] == 0 && it[l] >= exc_n && stall[l] >= exc_stall "
                             f"&& ({_pinned(moved, lo, hi, around, 'q{}.x[l]')}))"):
                    e(" ".join(f"qA{i}.x[l] = q{i}.x[l]; q{i}.x[l] = qS{i}.x[l];" for i in moved))
                    e("pe_a.x[l] = pe_r.x[l]; re_a.x[l] = re_r.x[l]; init[l] = true; "
                      "stall[l] = 0; phase[l] = 1; it0[l] = it[l];")
                e("if (!end) continue;")
                with e.block("if (phase[l] == 1)"):  # the iterations ran out in the excursion
                    e(" ".join(f"q{i}.x[l] = qA{i}.x[l];" for i in moved)
                      + " pe_r.x[l] = pe_a.x[l]; re_r.x[l] = re_a.x[l]; okl[l] = false;")
                e("const long long row = p * K + kk[l];")
                e(f"double* qo = q_out + row * {nq};")
                for i in used:
                    e(f"qo[{i}] = q{i}.x[l];")
                e("conv_o[row] = okl[l] ? 1 : 0; iters_o[row] = it[l]; pe_o[row] = pe_r.x[l]; "
                  "re_o[row] = re_r.x[l]; tout_o[row] = tm ? 1 : 0;")
                e("if (okl[l] && speed) done[p] = 1;")
                e("live[l] = false;")
    e("#pragma GCC pop_options")
    e("#endif")
    names = [a.rsplit(" ", 1)[-1].strip("*") for a in args.split(", ")]
    with e.block(f"static void r2ik_lm_lanes({args})"):
        e("#ifdef R2IK_LANES")
        e(f"if (__builtin_cpu_supports(\"avx2\")) {{ r2ik_lm_lanes_v({', '.join(names)}); "
          "return; }")
        e("#endif")
        e(f"for (r2ik_row_ = 0; r2ik_row_ < rows; ++r2ik_row_) r2ik_lm({', '.join(names[1:])});")
    e("// rows side by side on this CPU (0: one at a time)")
    with e.block('extern "C" int r2ik_lanes_used(void)'):
        e("#ifdef R2IK_LANES")
        e("if (__builtin_cpu_supports(\"avx2\")) return R2IK_L;")
        e("#endif")
        e("return 0;")
    return e.text()
