"""The secondary terms in generated code: lowering a cost term's cost within the goals'
tolerances and the constraints, once a problem's answer is found — the steps of
:mod:`ros2_ik.ik.refine`, written once over the terms' hooks (the primary terms' evaluation
and Jacobian as the LM rows use them, the cost terms' rows and Jacobian), in float64, in the
selection (``r2ik_select``) before the answer is verified."""

from __future__ import annotations

import numpy as np

from ...ik.refine import MIN_ALPHA
from .. import terms as term_registry
from ..terms.base import RowsContext
from .chain import Chain, frame_args, limits, q_args, qvars
from .lm import emit_clip, has_secondary
from .text import SCALAR, Emit

__all__ = ["emit_refine", "emit_spd_solve", "has_secondary", "emit_secondary_cost"]


def _contexts(ch: Chain, group, rows) -> list:
    """The scalar float64 rows' context of each term of ``group``, their rows (``rows(em)``
    each) one after the other."""
    out, row0 = [], 0
    for em in group:
        out.append(RowsContext(d=SCALAR, V="V", qargs=q_args(ch), frames=frame_args(ch),
                               row0=row0, nc=ch.nc, lane=SCALAR.lane))
        row0 += rows(em)
    return out


def emit_secondary_cost(e: Emit, ch: Chain, qf: str) -> str:
    """In ``r2ik_select``, inside a block: the cost terms' cost (0.5 |rows|^2, as
    ``ik.residuals.evaluate``'s) at the coordinates ``qf[i]`` (float64); returns its
    expression (the selection's key with cost terms, ``ik/batch.py``'s select)."""
    secs = [em for em in term_registry.emitters(ch) if em.kind == "cost"]
    cs_ = _contexts(ch, secs, lambda em: em.secondary_rows())
    e("typedef double V;")
    e(" ".join(f"const double q{i} = {qf}[{i}];" for i in qvars(ch)[0]))
    for em, c in zip(secs, cs_):
        em.lm_declare(e, c)
        em.lm_load(e, c)
    e(f"double rs[{max(sum(em.secondary_rows() for em in secs), 1)}];")
    return f"0.5 * ({' + '.join(em.sec_evaluate(e, c) for em, c in zip(secs, cs_))})"


def emit_spd_solve(e: Emit, n: int, A: str, b: str, x: str) -> None:
    """``x = A^-1 b`` for a symmetric positive definite ``A`` (n x n, row-major; its lower
    triangle is overwritten by the Cholesky factor): unrolled, as the LM step's."""
    e("{")
    e(f"double hinv_[{n}];")
    for a in range(n):
        e(f"{{ double s = {A}[{a * n + a}];" + "".join(
            f" s = s - {A}[{a * n + c}] * {A}[{a * n + c}];" for c in range(a)))
        e(f"  s = s > 0.0 ? sqrt(s) : 1e-300; {A}[{a * n + a}] = s; const double inv = 1.0 / s; "
          f"hinv_[{a}] = inv;")
        for i in range(a + 1, n):
            e(f"  {{ double t = {A}[{i * n + a}];" + "".join(
                f" t = t - {A}[{i * n + c}] * {A}[{a * n + c}];" for c in range(a))
              + f" {A}[{i * n + a}] = t * inv; }}")
        e("}")
    for a in range(n):
        e(f"{{ double t = {b}[{a}];" + "".join(
            f" t = t - {A}[{a * n + c}] * {x}[{c}];" for c in range(a))
          + f" {x}[{a}] = t * hinv_[{a}]; }}")
    for a in range(n - 1, -1, -1):
        e(f"{{ double t = {x}[{a}];" + "".join(
            f" t = t - {A}[{c * n + a}] * {x}[{c}];" for c in range(a + 1, n))
          + f" {x}[{a}] = t * hinv_[{a}]; }}")
    e("}")


def emit_refine(e: Emit, ch: Chain) -> None:
    """In ``r2ik_select``, after the winning row is finalized into ``o`` and when it converged
    (``best_c >= 0``): the refinement (see the module docstring); ``o`` is written back."""


    ems = term_registry.emitters(ch)
    prim = [em for em in ems if em.kind != "cost"]
    secs = [em for em in ems if em.kind == "cost"]
    nc = ch.nc
    used, _ = qvars(ch)
    lo, hi, around = limits(ch.model)
    nz = np.concatenate([em.structure() for em in prim], axis=0)
    m = nz.shape[0]
    ms = sum(em.secondary_rows() for em in secs)
    blocks = [b for em in prim for b in em.lm_blocks()]

    cp = _contexts(ch, prim, lambda em: em.rows())
    cs_ = _contexts(ch, secs, lambda em: em.secondary_rows())
    with e.block("if (best_c >= 0 && opt->secondary_iterations > 0)"):
        e("// the secondary terms' cost lowered within the tolerances and the constraints "
          "(ik/refine.py)")
        e("typedef double S; typedef double V;  // (in float64, whatever the kernels' scalar)")
        for em, c in zip(prim + secs, cp + cs_):
            em.lm_declare(e, c)
            em.lm_load(e, c)
        e(" ".join(f"double q{i} = o[{i}];" for i in used))
        e("V " + ", ".join(f"{f} = V(S(0))" for f in frame_args(ch).split(", ")) + ";")
        e(f"V r2[{max(m, 1)}] = {{}}, J2[{max(m * nc, 1)}] = {{}}, rs[{max(ms, 1)}] = {{}}, "
          f"Js[{max(ms * nc, 1)}] = {{}}; V pe2 = V(0), re2 = V(0);")
        # the primary terms at the coordinates: their rows, Jacobian and blocks; the cost
        with e.block("auto primary = [&]() -> double"):
            e("const bool acc = true;")
            costs = []
            for em, c in zip(prim, cp):
                x = em.lm_evaluate(e, c)
                if x is not None:
                    costs.append(x)
            e(f"const double cost2 = {' + '.join(f'({x})' for x in costs) or '0.0'};")
            for em, c in zip(prim, cp):
                em.lm_jacobian(e, c)
            for em, c in zip(prim, cp):
                em.lm_take(e, c)
            e("return cost2;")
        e(";")
        with e.block("auto secondary = [&]() -> double"):
            costs = [em.sec_evaluate(e, c) for em, c in zip(secs, cs_)]
            for em, c in zip(secs, cs_):
                em.sec_jacobian(e, c)
            e(f"return 0.5 * ({' + '.join(costs)});")
        e(";")
        ok = ["pe2 <= tol_p", "re2 <= tol_r"] + [x for em, c in zip(prim, cp)
                                                 for x in em.lm_ok(c)]
        e("primary();")
        e("double cs = secondary();")
        # the state at the coordinates, kept while the trials evaluate elsewhere
        keep = [("J2", m * nc), ("rs", ms), ("Js", ms * nc)] + [
            (H, nc * nc) for _, H in blocks] + [(g, nc) for g, _ in blocks]
        e(" ".join(f"double {n}_k[{max(k, 1)}];" for n, k in keep))
        with e.block("auto keep_state = [&]()"):
            for n, k in keep:
                e(f"for (int i = 0; i < {k}; ++i) {n}_k[i] = {n}[i];")
        e(";")
        e("keep_state();")
        e("const double mu = opt->secondary_damping;")
        e("double alpha = 1.0;")
        with e.block("for (long long it = 0; it < opt->secondary_iterations; ++it)"):
            e(f"if (alpha < {MIN_ALPHA!r}) break;")
            e(f"double H[{nc * nc}], g[{nc}], x[{nc}];")
            _normal(e, nz, nc, "J2_k", [(g, H) for g, H in ((g_ + "_k", H_ + "_k")
                                                           for g_, H_ in blocks)], "H")
            for a in range(nc):
                e(f"H[{a * nc + a}] = H[{a * nc + a}] + mu;")
            for a in range(nc):
                e(f"g[{a}] = " + (" + ".join(f"Js_k[{i * nc + a}] * rs_k[{i}]"
                                             for i in range(ms)) or "0.0") + ";")
            emit_spd_solve(e, nc, "H", "g", "x")
            e(" ".join(f"const double qs{i} = q{i};" for i in used))
            for a, i in enumerate(ch.colq):  # 1. the projected secondary step
                with e.block(""):
                    e(f"double v = q{i} - alpha * mu * x[{a}];")
                    emit_clip(e, "v", i, lo, hi, around)
                    e(f"q{i} = v;")
            e("const double cost1 = primary();")
            e(f"double Hc[{nc * nc}], gc[{nc}], dq[{nc}];")  # 2. back onto the primary rows
            _normal(e, nz, nc, "J2", blocks, "Hc", r="r2", g="gc")
            for a in range(nc):
                e(f"Hc[{a * nc + a}] = Hc[{a * nc + a}] + opt->lambda_min * "
                  f"(Hc[{a * nc + a}] + cost1 + 1e-9);")
            emit_spd_solve(e, nc, "Hc", "gc", "dq")
            for a, i in enumerate(ch.colq):
                with e.block(""):
                    e(f"double v = q{i} - dq[{a}];")
                    emit_clip(e, "v", i, lo, hi, around)
                    e(f"q{i} = v;")
            e("primary();")  # 3. kept where the goals, the constraints and a lower cost say so
            e("const double cs2 = secondary();")
            e(f"if ({' && '.join(ok)} && cs2 < cs) {{ cs = cs2; keep_state(); "
              "alpha = alpha * 2.0 < 1.0 ? alpha * 2.0 : 1.0; }")
            e("else { " + " ".join(f"q{i} = qs{i};" for i in used) + " alpha = 0.5 * alpha; }")
        e(" ".join(f"o[{i}] = q{i};" for i in used))


def _normal(e: Emit, nz, nc: int, J: str, blocks, H: str, r: str | None = None,
            g: str | None = None) -> None:
    """``H = J^T J + blocks'`` (the rows' structure ``nz``) and, with ``r`` / ``g``,
    ``g = J^T r + blocks' g``."""
    m = nz.shape[0]
    for a in range(nc):
        if g is not None:
            s = " + ".join([f"{J}[{i * nc + a}] * {r}[{i}]" for i in range(m) if nz[i, a]]
                           + [f"{gb}[{a}]" for gb, _ in blocks]) or "0.0"
            e(f"{g}[{a}] = {s};")
        for b in range(a + 1):
            s = " + ".join([f"{J}[{i * nc + a}] * {J}[{i * nc + b}]" for i in range(m)
                            if nz[i, a] and nz[i, b]]
                           + [f"{Hb}[{a * nc + b}]" for _, Hb in blocks]) or "0.0"
            e(f"{H}[{a * nc + b}] = {H}[{b * nc + a}] = {s};")
