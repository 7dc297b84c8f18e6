"""A goal set's compiled side: ``N`` candidate goals a problem (each a pose for every tip), the
rows those of the candidate nearest at the row's point (the least weighted cost), the errors
those of the candidate nearest within the tolerances (the least of ``max(pe / tol_p, re /
tol_r)``): a row converges when any candidate is reached. The reference is
:mod:`ros2_ik.ik.terms.goalset`; the pose goal's pieces (:mod:`.pose`) are shared."""

from __future__ import annotations

from ..emit.chain import jac_structure, trig_exports
from ..emit.kinematics import emit_fk_tip, emit_jacobian
from ..emit.text import Emit
from .base import Emitter, Field, RowsContext
from .pose import emit_goal_check, emit_so3_log, emit_tip_residual, residual_function

__all__ = ["GoalSetEmitter", "emit_evaluate_set"]


def emit_evaluate_set(e: Emit, ch, N: int, name: str, *, frames: bool,
                      export_trig: bool = False) -> None:
    """``S name(q..., tgt (N x T x 16), w (T x 6), r, pe_o, re_o, tsel (T x 16), tol_p, tol_r,
    frames...)`` -> cost: every tip's FK once, then each candidate's residual; ``r`` and
    ``tsel`` (the goal the Jacobian is taken against) those of the least cost, ``pe_o`` /
    ``re_o`` those of the least scaled error (the first on ties, as the reference)."""
    T = ch.T
    with residual_function(e, ch, name, ["S* tsel", "const S tol_p", "const S tol_r"],
                           frames=frames, export_trig=export_trig) as qv:
        e(f"S R[9], pv[3], er[3], Rk[{9 * T}], pk[{3 * T}], rn[{6 * T}];")
        for t in range(T):
            e(f"// ---- tip {t}: {ch.model.link_names[ch.tips[t]]}")
            emit_fk_tip(e, ch, t, qv, keep_joint_frames=frames, sincos=True,
                        export_trig=export_trig)
            e(f"for (int i = 0; i < 9; ++i) Rk[{9 * t} + i] = R[i];")
            e(f"for (int i = 0; i < 3; ++i) pk[{3 * t} + i] = pv[i];")
            if frames:
                e(f"pt{t}_0 = pv[0]; pt{t}_1 = pv[1]; pt{t}_2 = pv[2];")
        e("S best = S(0), best_sc = S(0), bpe = S(0), bre = S(0);")
        with e.block(f"for (int n = 0; n < {N}; ++n)"):
            e("S pe_max = S(0), re_max = S(0);")
            for t in range(T):
                e(f"{{ const S* Tt = tgt + (n * {T} + {t}) * 16; const S* wt = w + {6 * t};")
                e(f"  for (int i = 0; i < 9; ++i) R[i] = Rk[{9 * t} + i];")
                e(f"  for (int i = 0; i < 3; ++i) pv[i] = pk[{3 * t} + i];")
                emit_tip_residual(e, "rn", 6 * t, "r2ik_so3_log<S>")
                e("}")
            e("S cost = S(0);")
            e(f"for (int i = 0; i < {6 * T}; ++i) cost = cost + rn[i] * rn[i];")
            e("const S a = pe_max / tol_p, b = re_max / tol_r;")
            e("const S sc = r2ik_sel(a > b, a, b);")
            with e.block("if (n == 0)"):
                e("best = cost; best_sc = sc; bpe = pe_max; bre = re_max;")
                e(f"for (int i = 0; i < {6 * T}; ++i) r[i] = rn[i];")
                e(f"for (int i = 0; i < {16 * T}; ++i) tsel[i] = tgt[i];")
            with e.block("else"):
                e("const auto take = cost < best, near = sc < best_sc;")
                e("best = r2ik_sel(take, cost, best);")
                e(f"for (int i = 0; i < {6 * T}; ++i) r[i] = r2ik_sel(take, rn[i], r[i]);")
                e(f"for (int i = 0; i < {16 * T}; ++i) "
                  f"tsel[i] = r2ik_sel(take, tgt[n * {16 * T} + i], tsel[i]);")
                e("best_sc = r2ik_sel(near, sc, best_sc); bpe = r2ik_sel(near, pe_max, bpe); "
                  "bre = r2ik_sel(near, re_max, bre);")
        e("pe_o = bpe; re_o = bre;")
        e("return S(0.5) * best;")


class GoalSetEmitter(Emitter):
    """``N`` candidate goals a problem: ``target`` (N x T x 16: candidate-major, a 4x4
    row-major pose per tip) and ``weight`` (T x 6, the candidates share it); 6 rows a tip."""

    name = "goalset"
    kind = "goal"

    def __init__(self, ch, arg: str = "1"):
        super().__init__(ch)
        self.N = int(arg)

    def rows(self) -> int:
        return 6 * self.ch.T

    def structure(self):
        return jac_structure(self.ch)

    def fields(self) -> tuple:
        T = self.ch.T
        return (Field("target", 16 * T * self.N), Field("weight", 6 * T))

    def functions(self, e: Emit, check: bool) -> None:
        ch = self.ch
        emit_so3_log(e)
        emit_evaluate_set(e, ch, self.N, "r2ik_eval_set", frames=True,
                          export_trig=ch.coll is not None)
        emit_evaluate_set(e, ch, self.N, "r2ik_errors_set", frames=False)
        emit_jacobian(e, ch, "r2ik_jac_residual")

    # ------------------------------------------------------------------ the LM rows
    def lm_declare(self, e: Emit, c: RowsContext) -> None:
        T = self.ch.T
        e(f"{c.V} gs_tg[{16 * T * self.N}] = {{}}, gs_w[{6 * T}] = {{}}, gs_sel[{16 * T}] = {{}};"
          "  // the lane's goals, weights and the nearest goal")

    def lm_load(self, e: Emit, c: RowsContext) -> None:
        T = self.ch.T
        for arr, f, n in (("gs_tg", "goalset_target", 16 * T * self.N),
                          ("gs_w", "goalset_weight", 6 * T)):
            e(f"for (int i = 0; i < {n}; ++i) {c.lane(f'{arr}[i]')} = "
              f"S(dat->{f}[p * dat->{f}_stride + i]);")

    def lm_evaluate(self, e: Emit, c: RowsContext) -> str:
        trig = ""
        if self.ch.coll is not None:
            ex = trig_exports(self.ch)
            e(f"{c.V} " + ", ".join(f"esn{j}, ecs{j}" for j, _ in ex) + ";" if ex else "")
            trig = "".join(f", esn{j}, ecs{j}" for j, _ in ex)
        return (f"r2ik_eval_set<{c.V}>({c.qargs}, gs_tg, gs_w, r2, pe2, re2, gs_sel, "
                f"{c.V}(S(opt->position_tolerance)), {c.V}(S(opt->orientation_tolerance)), "
                f"{c.frames}{trig})")

    def lm_jacobian(self, e: Emit, c: RowsContext) -> None:
        e(f"r2ik_jac_residual<{c.V}>({c.frames}, gs_sel, gs_w, J2);")

    # ------------------------------------------------------------------ checks, selection
    def emit_check(self, e: Emit) -> None:
        emit_goal_check(e, "goalset_target", self.ch.T * self.N)

    def emit_verify(self, e: Emit, qargs: str) -> None:
        """``pe64`` / ``re64``: the errors of the candidate nearest within the tolerances."""
        T = self.ch.T
        e(f"double r[{6 * T}], ts[{16 * T}];")
        e(f"r2ik_errors_set<double>({qargs}, dat->goalset_target + p * "
          "dat->goalset_target_stride, dat->goalset_weight + p * dat->goalset_weight_stride, "
          "r, pe64, re64, ts, tol_p, tol_r);")
