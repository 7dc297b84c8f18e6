"""The LM rows in generated code (``r2ik_lm_rows``, ``r2ik_lm``): the lane scheduler, the step
(normal equations with the damping of ``ik/lm.py``, Cholesky, the active set), the clip to
the limits, the non-monotone phase and the limit excursion, written once for both dialects."""

from __future__ import annotations

import math


import numpy as np

from ...ik.seeds import movable_coordinates, restart_seeds
from .. import terms as term_registry
from ..terms.base import RowsContext
from .chain import Chain, frame_args, limits, q_args, qvars
from .prelude import dialect_prelude
from .text import TWO_PI, Dialect, Emit, lit


def has_secondary(ch: Chain) -> bool:
    """Whether the chain carries a cost term (and so the refinement, and a selection by cost
    among every seed's row)."""
    return any(em.kind == "cost" for em in term_registry.emitters(ch))


def emit_clip(e: Emit, var: str, i: int, lo, hi, around, *, wrap=True):
    """clip_to_limits (:func:`ros2_ik.ik.seeds.clip_to_limits`) of coordinate i of a scalar
    (a limited revolute joint goes around by 2 pi first where that lands inside)."""
    if wrap and around[i]:
        e(f"if ({var} > {lit(hi[i])} && {var} - {TWO_PI} >= {lit(lo[i])}) "
          f"{var} = {var} - {TWO_PI}; "
          f"else if ({var} < {lit(lo[i])} && {var} + {TWO_PI} <= {lit(hi[i])}) "
          f"{var} = {var} + {TWO_PI};")
    if math.isfinite(lo[i]):
        e(f"if ({var} < {lit(lo[i])}) {var} = {lit(lo[i])};")
    if math.isfinite(hi[i]):
        e(f"if ({var} > {lit(hi[i])}) {var} = {lit(hi[i])};")


def emit_clip_sel(e: Emit, d: Dialect, var: str, i: int, lo, hi, around):
    """:func:`emit_clip` as selects (the LM step's trial values, in either dialect)."""
    if around[i]:
        a, b = lit(lo[i]), lit(hi[i])
        e(f"{{ const M up_ = {d.and_(f'{var} > {b}', f'{var} - {TWO_PI} >= {a}')};")
        e(f"  const M dn_ = {d.and_(d.not_('up_'), f'{var} < {a}', f'{var} + {TWO_PI} <= {b}')};")
        e(f"  {var} = r2ik_sel(up_, {var} - {TWO_PI}, "
          f"r2ik_sel(dn_, {var} + {TWO_PI}, {var})); }}")
    if math.isfinite(lo[i]):
        e(f"{var} = r2ik_sel({var} < {lit(lo[i])}, V({lit(lo[i])}), {var});")
    if math.isfinite(hi[i]):
        e(f"{var} = r2ik_sel({var} > {lit(hi[i])}, V({lit(hi[i])}), {var});")


def pinned(moved, lo, hi, around, var: str = "q{}") -> str:
    """C: whether a moved revolute joint ``var.format(i)`` of range under 2 pi sits at a limit
    (``ik/lm.py``'s excursion rule; "false" when the chain has none)."""
    c = [f"{var.format(i)} <= {lit(lo[i])} || {var.format(i)} >= {lit(hi[i])}" for i in moved
         if around[i] and hi[i] - lo[i] < 2 * math.pi]
    return " || ".join(c) or "false"


def emit_turn_inside(e: Emit, moved, lo, hi, around, var: str, inside: str):
    """The moved revolute joints ``var.format(i)`` by whole turns to their limits' side; clears
    ``inside`` where one is then outside (``ik/lm.py``'s ``_turn_inside``)."""
    for i in moved:
        if not around[i]:
            continue
        v, a, b = var.format(i), lit(lo[i]), lit(hi[i])
        e(f"if ({v} < {a}) {v} = {v} + {TWO_PI} * ceil(({a} - {v}) / ({TWO_PI})); "
          f"else if ({v} > {b}) {v} = {v} - {TWO_PI} * ceil(({v} - {b}) / ({TWO_PI}));")
        e(f"{inside} = {inside} && {v} >= {a} && {v} <= {b};")


def emit_lm_step(e: Emit, ch: Chain, d: Dialect, nz, lo, hi, around, blocks=()):
    """The LM step ``dq`` of a row (or of every lane) from ``r``, ``J``, ``lam``, ``cost`` and
    the joint values ``q<i>``: the normal equations with the damping of ``ik/lm.py``
    (``lambda (diag(J^T J) + E + 1e-9)``), Cholesky and substitutions, solved again (one more
    pass) without the joints at a limit the step pushes further out. The caller declares
    ``H0``, ``g``, ``dq``, ``blocked`` (all false) and ``release`` (rows in a limit excursion,
    whose revolute joints are never blocked). ``nz`` (rows, nc): the residual rows'
    Jacobian structure; ``blocks``: ``(g, H)`` names of ``J^T r`` and ``J^T J`` blocks the
    terms add to the rows' (a penalty over many pairs)."""
    nc, m = ch.nc, nz.shape[0]
    zero, one = "V(S(0))", "V(S(1))"
    for a in range(nc):
        s = "".join(f" acc = acc + J[{i * nc + a}] * r[{i}];" for i in range(m) if nz[i, a])
        for g, _ in blocks:
            s += f" acc = acc + {g}[{a}];"
        e(f"{{ V acc = {zero};{s} g[{a}] = acc; }}")
        for b in range(a + 1):
            terms = [i for i in range(m) if nz[i, a] and nz[i, b]]
            s = "; ".join(f"acc = acc + J[{i * nc + a}] * J[{i * nc + b}]" for i in terms)
            for _, H in blocks:
                s = (s + "; " if s else "") + f"acc = acc + {H}[{a * nc + b}]"
            e(f"{{ V acc = {zero}; {s + ';' if s else ''} H0[{a * nc + b}] = acc; "
              f"H0[{b * nc + a}] = acc; }}")
    for a in range(nc):
        e(f"H0[{a * nc + a}] = H0[{a * nc + a}] + lam * (H0[{a * nc + a}] + cost + V(S(1e-9)));")
    e("#pragma unroll 1")
    with e.block("for (int pass = 0; pass < 2; ++pass)"):
        e(f"V H[{nc * nc}], gb[{nc}];")
        for a in range(nc):
            for b in range(nc):
                e(f"H[{a * nc + b}] = r2ik_sel({d.or_(f'blocked[{a}]', f'blocked[{b}]')}, "
                  f"{zero}, H0[{a * nc + b}]);")
            e(f"H[{a * nc + a}] = r2ik_sel(blocked[{a}], {one}, H[{a * nc + a}]);")
            e(f"gb[{a}] = r2ik_sel(blocked[{a}], {zero}, g[{a}]);")
        # Cholesky H = L L^T (L in H's lower triangle), one division per column (its
        # diagonal's reciprocal), then L y = -g and L^T dq = y
        e(f"V hinv[{nc}];")
        for a in range(nc):
            e(f"{{ V s = H[{a * nc + a}];" + "".join(
                f" s = s - H[{a * nc + b}] * H[{a * nc + b}];" for b in range(a)))
            e(f"  s = r2ik_sel(s > {zero}, sqrt(s), V(S(R2IK_TINY))); H[{a * nc + a}] = s;")
            e(f"  const V inv = {one} / s; hinv[{a}] = inv;")
            for i in range(a + 1, nc):
                e(f"  {{ V t = H[{i * nc + a}];" + "".join(
                    f" t = t - H[{i * nc + b}] * H[{a * nc + b}];" for b in range(a))
                  + f" H[{i * nc + a}] = t * inv; }}")
            e("}")
        for a in range(nc):
            e(f"{{ V t = -gb[{a}];" + "".join(
                f" t = t - H[{a * nc + b}] * dq[{b}];" for b in range(a))
              + f" dq[{a}] = t * hinv[{a}]; }}")
        for a in range(nc - 1, -1, -1):
            e(f"{{ V t = dq[{a}];" + "".join(
                f" t = t - H[{b * nc + a}] * dq[{b}];" for b in range(a + 1, nc))
              + f" dq[{a}] = t * hinv[{a}]; }}")
        e(f"M more = {d.none};")
        for a in range(nc):
            i = ch.colq[a]
            conds = []
            # at a limit and pushed out: blocked, unless a revolute joint's step goes round to
            # the far side of the arc outside its limits
            if math.isfinite(lo[i]):
                t = [f"dq[{a}] < {zero}", f"q{i} <= {lit(lo[i])}"]
                if around[i]:
                    t.append(d.not_(f"q{i} + dq[{a}] + {TWO_PI} <= {lit(hi[i])}"))
                conds.append(d.and_(*t))
            if math.isfinite(hi[i]):
                t = [f"dq[{a}] > {zero}", f"q{i} >= {lit(hi[i])}"]
                if around[i]:
                    t.append(d.not_(f"q{i} + dq[{a}] - {TWO_PI} >= {lit(lo[i])}"))
                conds.append(d.and_(*t))
            if not conds:
                continue
            parts = [d.not_(f"blocked[{a}]")]
            if around[i]:
                parts.append(d.not_("release"))
            parts.append(d.or_(*conds))
            e(f"{{ const M nb = {d.and_(*parts)}; blocked[{a}] = {d.or_(f'blocked[{a}]', 'nb')}; "
              f"more = {d.or_('more', 'nb')}; }}")
        e(f"if (!{d.any('more')}) break;")


def emit_start_value(e: Emit, ch: Chain, i: int, keep, used, lo, hi, around):
    """Coordinate i of a row's start into ``v``: the start row's value when one is given, else
    the problem's seed (row 0, and every row for coordinates a restart keeps) or restart seed
    ``k-1``; then clipped (:func:`ros2_ik.ik.seeds.expand_seeds`, then ``clip_to_limits``).
    Reads ``st`` (start row or null), ``sd`` (seed), ``rk`` (restart seed), ``k``."""
    src = f"sd[{i}]" if keep[i] or i not in used else f"(k == 0 ? sd[{i}] : rk[{i}])"
    e(f"S v = S(st ? st[{i}] : {src});")
    emit_clip(e, "v", i, lo, hi, around)


def emit_lm_rows(e: Emit, ch: Chain, d: Dialect):
    """``r2ik_lm_rows``: LM on the rows of problems ``[p_begin, p_end)`` (``only_row`` < 0: a
    host call; each of the dialect's lanes takes a problem and runs its seeds in order, then
    the next problem; a problem is started only before the deadline and a stop), or on the one
    row ``only_row`` (a GPU thread). Mirrors ``ik/lm.py`` step for step; written for either
    dialect (see :class:`Dialect`)."""
    model = ch.model
    nq, nc = model.nq, ch.nc
    used, _ = qvars(ch)
    lo, hi, around = limits(model)
    # the restart rule of ik.seeds.expand_seeds: coordinates off the base->tip paths
    # (movable_coordinates) keep the problem's seed
    _, keep = restart_seeds(model, 1, 0, movable_coordinates(model, ch.tips))
    # the terms the rows minimize: goals and constraints (a cost term is lowered after the
    # answer is found: refine.py)
    ems = [em for em in term_registry.emitters(ch) if em.kind != "cost"]
    # the residual rows: every term's, in order, and their Jacobian's structure
    nz = np.concatenate([em.structure() for em in ems], axis=0)
    m = nz.shape[0]
    blocks = [b for em in ems for b in em.lm_blocks()]
    moved = list(ch.colq)
    L = d.lanes
    lane = d.lane
    ctx = []
    row0 = 0
    for em in ems:
        ctx.append(RowsContext(d=d, V="V", qargs=q_args(ch), frames=frame_args(ch), row0=row0,
                               nc=nc, lane=lane))
        row0 += em.rows()
    e("""
// Rows p * K + k of problems p in [p_begin, p_end) (outputs indexed from p_begin * K, done and
// started from p_begin): seeds (P, nq) (seed_stride nq, or 0: one seed), rnd (K-1, nq) restart
// seeds, start (rows, nq) start rows or null, dat the terms' data, active (from p_begin), opt
// the options, deadline [ns of r2ik_now] or 0, stop / done flags.""")
    args = ("long long p_begin, long long p_end, long long only_row, int K, "
            "const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const double* R2IK_RESTRICT start, "
            "const r2ik_data* R2IK_RESTRICT dat, "
            "const unsigned char* R2IK_RESTRICT active, const r2ik_options* R2IK_RESTRICT opt, "
            "unsigned long long deadline, const volatile int* stop, volatile int* done, "
            "unsigned char* R2IK_RESTRICT started, S* R2IK_RESTRICT q_out, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT iters_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    with e.block(f"R2IK_FN void r2ik_lm_rows({args})"):
        e("const S tol_p = S(opt->position_tolerance), tol_r = S(opt->orientation_tolerance);")
        e("const S lam0 = S(opt->lambda_initial), lmin = S(opt->lambda_min), "
          "lmax = S(opt->lambda_max), up = S(opt->lambda_up), down = S(opt->lambda_down), "
          "stall_f = S(opt->stall_ratio);")
        e("const long long stall_n = opt->stall_iterations, max_iter = opt->max_iterations;")
        e("const double nonmono = (double)opt->nonmonotone_iterations;")
        e("const long long exc_n = opt->excursion_iterations, exc_stall = opt->excursion_stall;")
        if has_secondary(ch):  # (every seed runs)
            e("const bool speed = false;  // the cost terms choose among the converged rows")
        else:
            e("const bool speed = opt->solve_mode == R2IK_MODE_SPEED;")
        e("const long long r0 = p_begin * K;  // the first output row")
        for em, c in zip(ems, ctx):  # the terms' constants and state (their data per lane)
            em.lm_declare(e, c)
        qv = ", ".join(f"q{i}" for i in used)
        e(f"V {qv};")
        e(f"V r[{max(m, 1)}] = {{}}, r2[{max(m, 1)}] = {{}}, J[{max(m * nc, 1)}] = {{}}, "
          f"J2[{max(m * nc, 1)}] = {{}};")
        e("V cost = V(S(0)), cost0 = V(S(0)), lam = V(S(0)), pe_r = V(S(0)), re_r = V(S(0));")
        e("// the limit excursion (ik/lm.py): a lane's start values, where an excursion left,")
        e("// and the errors there; phase 0 may start one, 1 in it, 2 not")
        e("V " + ", ".join(f"qS{i} = V(S(0)), qA{i} = V(S(0))" for i in moved)
          + ", pe_a = V(S(0)), re_a = V(S(0));")
        frames = frame_args(ch).split(", ")
        e("V " + ", ".join(f"{f} = V(S(0))" for f in frames) + ";")
        e(f"int phase[{L}], it0[{L}], it[{L}], stall[{L}], kk[{L}];")
        e(f"bool mono[{L}], live[{L}], init[{L}], dead[{L}], okl[{L}];")
        e(f"long long pp[{L}];")
        e(f"for (int l = 0; l < {L}; ++l) {{ live[l] = init[l] = dead[l] = okl[l] = mono[l] = "
          "false; it[l] = stall[l] = kk[l] = phase[l] = it0[l] = 0; pp[l] = -1; }")
        e("long long next_p = p_begin;")
        with e.block("for (;;)"):
            e("// lanes without a row take the next one (a skipped row is written at once)")
            with e.block(f"for (int l = 0; l < {L}; ++l)"):
                with e.block("while (!live[l] && !dead[l])"):
                    e("long long p; int k;")
                    with e.block("if (only_row >= 0)"):  # a GPU thread: its one row, once
                        e("if (pp[l] >= 0 || only_row >= p_end * K) { dead[l] = true; break; }")
                        e("p = only_row / K; k = (int)(only_row - p * K);")
                    e("else if (pp[l] >= 0 && kk[l] + 1 < K) { p = pp[l]; k = kk[l] + 1; }")
                    with e.block("else if (next_p < p_end)"):
                        e("p = next_p++; k = 0;")
                        e("if (*stop != 0 || (deadline != 0ull && r2ik_now() >= deadline)) {")
                        e("  started[p - p_begin] = 0; pp[l] = -1; continue; }")
                        e("started[p - p_begin] = 1;")
                    e("else { dead[l] = true; break; }")
                    e("pp[l] = p; kk[l] = k;")
                    e("const long long row = p * K + k;")
                    e(f"S* qo = q_out + (row - r0) * {nq};")
                    e("const double* sd = seeds + p * seed_stride;")
                    e(f"const double* rk = rnd + (long long)(k > 0 ? k - 1 : 0) * {nq};")
                    e(f"const double* st = start ? start + (row - r0) * {nq} : (const double*)0;")
                    for i in range(nq):
                        with e.block(""):
                            emit_start_value(e, ch, i, keep, used, lo, hi, around)
                            e(f"{lane(f'q{i}')} = v;" if i in used else f"qo[{i}] = v;")
                    # (speed mode: a row after the problem's first converged one is not run)
                    with e.block("if (active[p - p_begin] && !(speed && done[p - p_begin] < k))"):
                        for em, c in zip(ems, ctx):  # the problem's data into the lane
                            em.lm_load(e, c)
                        e("live[l] = true; init[l] = true; it[l] = 0; stall[l] = 0; "
                          "okl[l] = false;")
                        e("phase[l] = ((k < K - 1 ? stall_n : 0) <= 0 && exc_n > 0) ? 0 : 2; "
                          "it0[l] = 0; mono[l] = false;")
                        e(" ".join(f"{lane(f'qS{i}')} = {lane(f'q{i}')};" for i in moved))
                    with e.block("else"):
                        for i in used:
                            e(f"qo[{i}] = {lane(f'q{i}')};")
                        e("conv_o[row - r0] = 0; iters_o[row - r0] = 0; "
                          "pe_o[row - r0] = S(INFINITY); re_o[row - r0] = S(INFINITY); "
                          "tout_o[row - r0] = 0;")
            e("bool any_live = false;")
            e(f"for (int l = 0; l < {L}; ++l) any_live = any_live || live[l];")
            e("if (!any_live) break;")
            e("const M initm = " + d.mask("init") + ";")
            e(f"V qs[{nc}];")
            for a in range(nc):
                e(f"qs[{a}] = q{ch.colq[a]};")
            e("// the step of every lane that is not evaluating its start (or a restart)")
            with e.block(f"if ({d.any(d.not_('initm'))})"):
                e(f"V H0[{nc * nc}], g[{nc}], dq[{nc}];")
                e(f"M blocked[{nc}] = {{" + ", ".join([d.none] * nc) + "};")
                e(f"bool rel[{L}];")
                e(f"for (int l = 0; l < {L}; ++l) rel[l] = phase[l] == 1;")
                e("const M release = " + d.mask("rel") + ";")
                emit_lm_step(e, ch, d, nz, lo, hi, around, blocks)
                for a in range(nc):
                    i = ch.colq[a]
                    with e.block(""):
                        e(f"V v = q{i} + dq[{a}];")
                        if around[i]:  # an excursion's revolute joints go unclipped
                            e("const V v0 = v;")
                            emit_clip_sel(e, d, "v", i, lo, hi, around)
                            e("v = r2ik_sel(release, v0, v);")
                        else:
                            emit_clip_sel(e, d, "v", i, lo, hi, around)
                        e(f"q{i} = r2ik_sel(initm, q{i}, v);")
            e("V pe2, re2;")
            costs = []  # the trial's cost: every term's, in order
            for em, c in zip(ems, ctx):
                x = em.lm_evaluate(e, c)
                if x is None:
                    continue
                if costs:
                    e(f"cost2 = cost2 + {x};")
                else:
                    e(f"{'V' if len(ems) > 1 else 'const V'} cost2 = {x};")
                costs.append(x)
            e("// accepted (or initial) lanes take the trial; the others go back. The reference")
            e("// is the seed's cost in a lane's first nonmono iterations (ik/lm.py)")
            e(f"bool nmb[{L}];")
            e(f"for (int l = 0; l < {L}; ++l) nmb[l] = !mono[l] && (double)(it[l] - it0[l]) "
              "< nonmono;")
            e(f"const M better = cost2 < r2ik_sel({d.mask('nmb')}, cost0, cost);")
            e(f"const M acc = {d.or_('initm', 'better')};")
            e("cost0 = r2ik_sel(initm, cost2, cost0);")
            e("const M slow = cost2 > cost * V(stall_f);")
            e("const V ld = lam * V(down), lu = lam * V(up);")
            e("const V lam_acc = r2ik_sel(ld > V(lmin), ld, V(lmin));")
            e("const V lam_rej = r2ik_sel(lu < V(lmax), lu, V(lmax));")
            e(f"const M stuck = {d.and_(d.not_('acc'), 'lam_rej == lam')};")
            e("lam = r2ik_sel(initm, V(lam0), r2ik_sel(acc, lam_acc, lam_rej));")
            e("cost = r2ik_sel(acc, cost2, cost); pe_r = r2ik_sel(acc, pe2, pe_r); "
              "re_r = r2ik_sel(acc, re2, re_r);")
            e(f"for (int i = 0; i < {m}; ++i) r[i] = r2ik_sel(acc, r2[i], r[i]);")
            with e.block(f"if ({d.any('acc')})"):
                for em, c in zip(ems, ctx):  # the terms' Jacobian rows at the trial
                    em.lm_jacobian(e, c)
                for k in range(m * nc):
                    if nz[k // nc, k % nc]:
                        e(f"J[{k}] = r2ik_sel(acc, J2[{k}], J[{k}]);")
                for em, c in zip(ems, ctx):  # and the rest of their trial state
                    em.lm_take(e, c)
            for a in range(nc):
                e(f"q{ch.colq[a]} = r2ik_sel(acc, q{ch.colq[a]}, qs[{a}]);")
            ok_terms = ["pe_r <= V(tol_p)", "re_r <= V(tol_r)"]
            for em, c in zip(ems, ctx):  # and every constraint kept
                ok_terms += em.lm_ok(c)
            e(f"const M okm = {d.and_(*ok_terms)};")
            e("// per lane: the loop test of ik/lm.py, then the flags and the clock")
            e("int stopped = -1;  // *stop, read when first needed")
            e("const unsigned long long now = deadline != 0ull ? r2ik_now() : 0ull;")
            with e.block(f"for (int l = 0; l < {L}; ++l)"):
                e("if (!live[l]) continue;")
                e("bool end = false, tm = false;")
                e("if (init[l]) init[l] = false;")
                e(f"else {{ it[l] += 1; if ({d.mlane('better')}) stall[l] = "
                  f"{d.mlane('slow')} ? stall[l] + 1 : 0; "
                  f"else {{ end = {d.mlane('stuck')}; stall[l] += 1; }} }}")
                e(f"okl[l] = {d.mlane('okm')};")
                with e.block("if (phase[l] == 1 && (okl[l] || it[l] - it0[l] >= exc_n))"):
                    e("bool inside = true;")
                    with e.block("if (okl[l])"):
                        emit_turn_inside(e, moved, lo, hi, around, lane("q{}"), "inside")
                    with e.block("if (!(okl[l] && inside))"):
                        e("// back where the excursion left (evaluated there next pass)")
                        e(" ".join(f"{lane(f'q{i}')} = {lane(f'qA{i}')};" for i in moved))
                        e(f"{lane('pe_r')} = {lane('pe_a')}; {lane('re_r')} = {lane('re_a')}; "
                          "okl[l] = false; init[l] = true; stall[l] = 0;")
                    e("mono[l] = true; phase[l] = 2;")
                e("const long long p = pp[l];")
                with e.block("if (!end)"):
                    e("const long long give_up = kk[l] < K - 1 ? stall_n : 0;")
                    e("if (okl[l] || it[l] >= max_iter || (give_up > 0 && stall[l] >= give_up)) "
                      "end = true;")
                    with e.block("else if ((it[l] & 3) == 0)"):
                        e("if (stopped < 0) stopped = *stop != 0;")
                        e("if (stopped || (speed && done[p - p_begin] < kk[l])) end = true;")
                    e("if (!end && deadline != 0ull && now >= deadline) { end = true; tm = true; }")
                with e.block("if (!end && phase[l] == 0 && it[l] >= exc_n && stall[l] >= exc_stall "
                             f"&& ({pinned(moved, lo, hi, around, lane('q{}'))}))"):
                    e(" ".join(f"{lane(f'qA{i}')} = {lane(f'q{i}')}; "
                               f"{lane(f'q{i}')} = {lane(f'qS{i}')};" for i in moved))
                    e(f"{lane('pe_a')} = {lane('pe_r')}; {lane('re_a')} = {lane('re_r')}; "
                      "init[l] = true; stall[l] = 0; phase[l] = 1; it0[l] = it[l];")
                e("if (!end) continue;")
                with e.block("if (phase[l] == 1)"):  # the iterations ran out in the excursion
                    e(" ".join(f"{lane(f'q{i}')} = {lane(f'qA{i}')};" for i in moved)
                      + f" {lane('pe_r')} = {lane('pe_a')}; {lane('re_r')} = {lane('re_a')}; "
                      "okl[l] = false;")
                e("const long long row = p * K + kk[l] - r0;")
                e(f"S* qo = q_out + row * {nq};")
                for i in used:
                    e(f"qo[{i}] = {lane(f'q{i}')};")
                e(f"conv_o[row] = okl[l] ? 1 : 0; iters_o[row] = it[l]; "
                  f"pe_o[row] = {lane('pe_r')}; re_o[row] = {lane('re_r')}; "
                  "tout_o[row] = tm ? 1 : 0;")
                e("if (okl[l] && speed) r2ik_min_int(done + (p - p_begin), kk[l]);")
                e("live[l] = false;")


def emit_lm_kernel(e: Emit, ch: Chain):
    """``r2ik_lm``: one row per thread (the GPU's launch; on the host, the same kernel row by
    row), by the one-row rendering of :func:`emit_lm_rows`."""
    e("""
// One thread per row p * K + k of P problems (all indexed from 0); dat the terms' data;
// clock0: the device clock at the call (r2ik_stamp); params[0] = budget [ns] (< 0: none).""")
    args = ("long long P, int K, const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const double* R2IK_RESTRICT start, "
            "const r2ik_data* R2IK_RESTRICT dat, "
            "const unsigned char* R2IK_RESTRICT active, const r2ik_options* R2IK_RESTRICT opt, "
            "const unsigned long long* clock0, const long long* params, "
            "const volatile int* stop, volatile int* done, S* R2IK_RESTRICT q_out, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT iters_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    with e.kernel("r2ik_lm", args):
        e("const long long row = R2IK_ROW;")
        e("if (row >= P * (long long)K) return;")
        e("const unsigned long long deadline = params[0] < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)params[0];")
        e("r2ik_s::r2ik_lm_rows(0, P, row, K, seeds, seed_stride, rnd, start, dat, active, opt, "
          "deadline, stop, done, (unsigned char*)0, q_out, conv_o, iters_o, pe_o, re_o, tout_o);")


def emit_functions(e: Emit, ch: Chain, check: bool = True) -> None:
    """The templates every rendering instantiates: each term's (with ``check``, also what the
    float64 check of the selection needs)."""
    for em in term_registry.emitters(ch):
        em.functions(e, check)


def rows_namespace(ch: Chain, d: Dialect) -> str:
    """The LM rows of one dialect, in its own namespace (``r2ik_s``: one row; ``r2ik_v``: the
    lanes, opened by their types, with the templates rendered again inside the AVX2 region so
    that they are built for it)."""
    e = Emit()
    if not d.vector:
        e("namespace r2ik_s {")
    e(dialect_prelude(d))
    if d.vector:
        emit_functions(e, ch, check=False)
    emit_lm_rows(e, ch, d)
    e("}  // namespace")
    return e.text()
