"""The generated sources (:func:`solve_source`, :func:`frames_source`), their host rendering
(:func:`host_variant`) and the host drivers (``r2ik_solve_host``, ``r2ik_frames_host``)."""

from __future__ import annotations

import hashlib


from ...ik.batch import CCD_POLISH_SWEEPS
from .. import interface
from .. import terms as term_registry
from .ccd import emit_ccd_kernel
from .chain import Chain
from .kinematics import emit_frames_kernels
from .lm import emit_functions, emit_lm_kernel, rows_namespace
from .prelude import DEVICE_PRELUDE, PRELUDE, VECTOR_TYPES, host_variant, vector_sincos
from .select import emit_prep_kernel, emit_select_kernel
from .text import LANES, SCALAR, Dialect, Emit, header, scalar_type


def solve_source(ch: Chain, dtype="float32", *, host: bool = False, lanes: int | None = None
                 ) -> str:
    """The solve kernels (stamp, prep, lm, ccd for one tip, select) for ``ch``: CUDA C++, or
    with ``host`` the same text for g++ (:func:`host_variant`) plus the host driver
    ``r2ik_solve_host``. A host float64 source also carries the LM rows in the vector dialect
    (``lanes`` rows side by side: None or 4; 0: none), used where the CPU has AVX2; the rows
    are the same either way, bit for bit."""
    scalar = scalar_type(dtype)
    e = Emit()
    e(header(ch, scalar, "solve"))
    e(DEVICE_PRELUDE)
    e(interface.declarations())
    ems = term_registry.emitters(ch)
    e("// ---- the terms' data and outputs (generated from their declarations: "
      + ", ".join(em.name for em in ems) + ")")
    e(interface.data_declaration(ems))
    e(f"typedef {scalar} S;  // the kernels' scalar (templates below take theirs as a parameter)")
    e(PRELUDE)
    emit_functions(e, ch)
    e(rows_namespace(ch, SCALAR))
    # params = {budget_ns (< 0: no deadline), initial stop flag}: device memory, so that a
    # captured CUDA graph replays with each call's values
    with e.kernel("r2ik_stamp", "unsigned long long* clock0, int* stop, const long long* params"):
        e("if (R2IK_ROW == 0) { clock0[0] = r2ik_now(); stop[0] = (int)params[1]; }")
    emit_prep_kernel(e, ch)
    emit_lm_kernel(e, ch)
    if ch.T == 1 and ch.terms[0] == "pose":  # (CCD turns towards one pose)
        emit_ccd_kernel(e, ch)
    emit_select_kernel(e, ch)
    for em in ems:
        em.kernels(e)
    if not host:
        return e.text()
    n = LANES if lanes is None else int(lanes)
    vector = ""
    if scalar == "double" and n > 1:
        vector = (VECTOR_TYPES.replace("LANES_N", str(n)) + vector_sincos()
                  + rows_namespace(ch, Dialect(n)) + "#pragma GCC pop_options\n#endif\n")
    # the host driver runs float64 rows (a float32 host source is for tests of the CUDA text)
    return host_variant(e.text()) + vector + (solve_driver(ch) if scalar == "double" else "")


#: rows of a block of problems the host's ``ccd+dls`` runs CCD on before their LM polish (a
#: problem's K rows at least; the order changes no answer, only what a deadline leaves done)
CCD_BLOCK_ROWS = 1024


def solve_driver(ch: Chain) -> str:
    """``r2ik_solve_host(const r2ik_solve_args*)``: problems [p_begin, p_end) checked, solved
    (LM rows in lanes where the CPU has AVX2, else row by row; CCD first for ``ccd`` and
    ``ccd+dls``), selected and verified, in one call (:mod:`.host` calls it from its threads,
    one slice of problems each).

    A problem is started only before the deadline and a stop, by CCD as by LM, and the work
    after the deadline is bounded whatever the batch: CCD takes the problems in order, each
    one's rows after the check (the rows of a problem not started are never run: a row's
    start and first errors cost an FK each, a million rows 0.3 s); ``ccd+dls`` polishes
    blocks of problems (:data:`CCD_BLOCK_ROWS` rows) as CCD finishes them, as the reference
    solves its chunks, and a problem CCD ran but LM did not start (the deadline came between)
    keeps its CCD rows (select verifies them by FK)."""
    nq, T = ch.model.nq, ch.T
    ccd = ""
    if T == 1 and ch.terms[0] == "pose":
        ccd = f"""
  if (a->solver == R2IK_SOLVER_CCD || a->solver == R2IK_SOLVER_CCD_DLS) {{
    // CCD rows, problem by problem (each started only before the deadline and a stop); for
    // ccd+dls LM from where they stopped, block by block
    const bool polish = a->solver == R2IK_SOLVER_CCD_DLS;
    const long long cap = polish ? {CCD_POLISH_SWEEPS} : opt->max_iterations;
    double* qc = polish ? r2ik_buf(start, (size_t)N * {nq}) : qr;
    sw = r2ik_buf(sweeps, (size_t)N);
    const long long block = polish ? (K >= {CCD_BLOCK_ROWS} ? 1 : {CCD_BLOCK_ROWS} / K) : P;
    long long ccd_end = 0;  // problems [0, ccd_end) were started by CCD
    for (long long b0 = 0; b0 < P; b0 += block) {{
      const long long b1 = b0 + block < P ? b0 + block : P;
      for (; ccd_end < b1; ++ccd_end) {{
        if (*stop != 0 || (deadline != 0ull && r2ik_now() >= deadline)) break;
        stt[ccd_end] = 1;
        for (r2ik_row_ = ccd_end * K; r2ik_row_ < (ccd_end + 1) * K; ++r2ik_row_)
          r2ik_ccd(P, (int)K, seeds + a->p_begin * a->seed_stride, a->seed_stride, rnd,
                   &slice, act, opt, cap, &clock0, params, stop, qc, cv, sw, per, rer, to);
      }}
      for (long long i = ccd_end; i < b1; ++i) stt[i] = 0;
      if (polish) lm_block(b0, b1, qc);
      if (ccd_end < b1) {{  // the deadline or a stop: no later problem is started
        for (long long i = b1; i < P; ++i) stt[i] = 0;
        break;
      }}
    }}
    if (polish) {{
      for (long long i = 0; i < ccd_end; ++i) {{
        const long long r0 = i * K;
        if (stt[i]) {{  // polished: its iterations count CCD's sweeps too
          for (long long r = r0; r < r0 + K; ++r) it[r] += sw[r];
          continue;
        }}
        // CCD ran it, LM did not start it: CCD's rows stand (timed out where not converged)
        stt[i] = 1;
        for (long long r = r0; r < r0 + K; ++r) {{
          for (int c = 0; c < {nq}; ++c) qr[r * {nq} + c] = qc[r * {nq} + c];
          it[r] = sw[r];
          to[r] = 1;
        }}
      }}
    }} else {{
      for (long long r = 0; r < ccd_end * K; ++r) it[r] = sw[r];
    }}
  }}"""
    lm = f"""r2ik_lm_rows(a->p_begin + b0, a->p_begin + b1, -1, (int)K, seeds, a->seed_stride,
                   rnd, st ? st + b0 * K * {nq} : st, dat, act + b0, opt,
                   deadline, stop, dn + b0, stt + b0, qr + b0 * K * {nq}, cv + b0 * K,
                   it + b0 * K, per + b0 * K, rer + b0 * K, to + b0 * K);"""
    # the data of the slice's problems from 0 (CCD indexes its problems from the slice's first)
    shift = "".join(f"\n  slice.{n} = dat->{n} ? dat->{n} + a->p_begin * dat->{n}_stride : 0;"
                    for n, c, _ in interface.data_members(term_registry.emitters(ch))
                    if c == "u8")
    return f"""
// ---- the host driver
extern "C" int r2ik_lanes_used(void) {{
#ifdef R2IK_LANES
  if (__builtin_cpu_supports("avx2")) return R2IK_L;
#endif
  return 0;
}}
template <typename T> static T* r2ik_buf(std::vector<T>& v, size_t n) {{
  if (v.size() < n) v.resize(n);
  return v.data();
}}
extern "C" int r2ik_solve_host(const r2ik_solve_args* a) {{
  const long long P = a->p_end - a->p_begin, K = a->K, N = P * K;
  if (P <= 0) return 0;
  const r2ik_options* opt = (const r2ik_options*)a->opt;
  const double* seeds = (const double*)a->seeds;
  const double* rnd = (const double*)a->rnd;
  const r2ik_data* dat = (const r2ik_data*)a->data;
  r2ik_data slice = *dat;{shift}
  const volatile int* stop = (const volatile int*)a->stop;
  static thread_local std::vector<double> q_rows, pe, re, start;
  static thread_local std::vector<unsigned char> conv, tout, active, flags, started;
  static thread_local std::vector<int> iters, done, sweeps;
  double* qr = r2ik_buf(q_rows, (size_t)N * {nq});
  double* per = r2ik_buf(pe, (size_t)N);
  double* rer = r2ik_buf(re, (size_t)N);
  unsigned char* cv = r2ik_buf(conv, (size_t)N);
  unsigned char* to = r2ik_buf(tout, (size_t)N);
  int* it = r2ik_buf(iters, (size_t)N);
  unsigned char* act = r2ik_buf(active, (size_t)P);
  unsigned char* fl = r2ik_buf(flags, (size_t)P);
  unsigned char* stt = r2ik_buf(started, (size_t)P);
  int* dn = r2ik_buf(done, (size_t)P);
  for (r2ik_row_ = 0; r2ik_row_ < P; ++r2ik_row_)
    r2ik_prep(P, a->p_begin, dat, seeds, a->seed_stride, act, fl, dn);
  const unsigned long long clock0 = a->clock0;
  const long long params[2] = {{a->budget_ns, 0}};
  const unsigned long long deadline = a->budget_ns < 0 ? 0ull :
      clock0 + (unsigned long long)a->budget_ns;
  // LM on problems [b0, b1) of the slice from the start rows st (null: the seeds)
  auto lm_block = [&](long long b0, long long b1, const double* st) {{
    if (b1 <= b0) return;
#ifdef R2IK_LANES
    // lanes take a problem each: fewer problems than lanes run faster one row at a time
    if (b1 - b0 >= R2IK_L && __builtin_cpu_supports("avx2"))
      r2ik_v::{lm}
    else
#endif
      r2ik_s::{lm}
  }};
  int* sw = (int*)0;{ccd}
  if (!sw) lm_block(0, P, (const double*)0);  // dls
  for (r2ik_row_ = 0; r2ik_row_ < P; ++r2ik_row_)
    r2ik_select(P, a->p_begin, (int)K, qr, cv, it, per, rer, to, stt, fl, seeds, a->seed_stride,
                dat, opt, stop, (double*)a->out);
  if (N > (1 << 16)) {{  // a large slice's work memory goes back (a small one's is reused)
    std::vector<double>().swap(q_rows); std::vector<double>().swap(pe);
    std::vector<double>().swap(re); std::vector<double>().swap(start);
    std::vector<unsigned char>().swap(conv); std::vector<unsigned char>().swap(tout);
    std::vector<int>().swap(iters); std::vector<int>().swap(sweeps);
  }}
  return 0;
}}
"""


def frames_source(ch: Chain, dtype="float32", *, host: bool = False) -> str:
    """``r2ik_fk`` and ``r2ik_jac`` for the frames ``ch.tips`` (CUDA C++; ``host``: for g++,
    with the driver ``r2ik_frames_host``, which checks q as ``Model.check_q`` does)."""
    scalar = scalar_type(dtype)
    e = Emit()
    e(header(ch, scalar, "frames"))
    e(DEVICE_PRELUDE)
    e(interface.declarations())
    e(PRELUDE)
    e(f"typedef {scalar} S;")
    emit_frames_kernels(e, ch, scalar)
    if not host:
        return e.text()
    return host_variant(e.text()) + f"""
// ---- the host driver: 0 when done, 1 when q has a NaN, an infinity or a value beyond
// max_value (nothing written then)
extern "C" int r2ik_frames_host(const r2ik_frames_args* a) {{
  const S* q = (const S*)a->q;
  const long long n = a->B * {ch.model.nq};
  if (a->max_value >= 0)
    for (long long i = 0; i < n; ++i) if (!(fabs(q[i]) <= a->max_value)) return 1;
  for (r2ik_row_ = 0; r2ik_row_ < a->B; ++r2ik_row_) {{
    if (a->jacobian) r2ik_jac(q, a->B, (S*)a->out); else r2ik_fk(q, a->B, (S*)a->out);
  }}
  return 0;
}}
"""


def source_hash(src: str) -> str:
    return hashlib.sha256(src.encode()).hexdigest()[:16]
