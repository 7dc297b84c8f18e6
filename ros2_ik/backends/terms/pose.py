"""The pose goal's compiled side: the rotation log, the residual and goal errors of every tip
(``r2ik_eval``, ``r2ik_errors``), its Jacobian (``r2ik_jac_residual``), the goal check of the
problems, the float64 verification of an answer, and the hooks that join them to the LM rows
(:class:`PoseEmitter`). The reference is :class:`ros2_ik.ik.objectives.PoseObjective`."""

from __future__ import annotations

from contextlib import contextmanager

from ...model import MAX_VALUE
from ..emit.chain import Chain, jac_structure, qvars, trig_exports
from ..emit.kinematics import emit_fk_tip, emit_jacobian
from ..emit.text import Emit, ternary
from .base import Emitter, Field, RowsContext

__all__ = ["PoseEmitter", "emit_so3_log", "emit_evaluate", "emit_tip_residual", "emit_goal_check",
           "ROTATION_TOL_C", "residual_function"]

#: the goal check's rotation bound (validate.ROTATION_TOL) as the generated code writes it
ROTATION_TOL_C = "1e-6"


def emit_so3_log(e: Emit):
    """``r2ik_so3_log<S>``: the rotation vector of a rotation matrix (as
    :func:`ros2_ik.kinematics.se3.so3_log`), its branches as selects of values each computed
    as the branch would, so that one text serves a row and a vector of lanes."""
    e("""
template <typename S>
R2IK_FN void r2ik_so3_log(S m00, S m01, S m02, S m10, S m11, S m12, S m20, S m21, S m22,
                          S* out) {
  const S tr = m00 + m11 + m22;
  const S one = S(1);
  const S d0 = one + tr, d1 = one + m00 - m11 - m22, d2 = one - m00 + m11 - m22;
  const S d3 = one - m00 - m11 + m22;
  const auto c0 = (d0 >= d1) & (d0 >= d2) & (d0 >= d3);
  const auto c1 = (d1 >= d2) & (d1 >= d3);
  const auto c2 = d2 >= d3;
  S x = r2ik_sel(c0, m21 - m12, r2ik_sel(c1, d1, r2ik_sel(c2, m01 + m10, m02 + m20)));
  S y = r2ik_sel(c0, m02 - m20, r2ik_sel(c1, m01 + m10, r2ik_sel(c2, d2, m12 + m21)));
  S zq = r2ik_sel(c0, m10 - m01, r2ik_sel(c1, m02 + m20, r2ik_sel(c2, m12 + m21, d3)));
  S wq = r2ik_sel(c0, d0, r2ik_sel(c1, m21 - m12, r2ik_sel(c2, m02 - m20, m10 - m01)));
  const S n = sqrt(x * x + y * y + zq * zq + wq * wq);
  x = x / n; y = y / n; zq = zq / n; wq = wq / n;
  const auto neg = wq < S(0);
  x = r2ik_sel(neg, -x, x); y = r2ik_sel(neg, -y, y);
  zq = r2ik_sel(neg, -zq, zq); wq = r2ik_sel(neg, -wq, wq);
  const S sh = sqrt(x * x + y * y + zq * zq);
  const auto small = sh < S(1e-12);
  const S sc = S(2) * atan2(sh, wq) / sh;
  out[0] = r2ik_sel(small, S(2) * x, x * sc);
  out[1] = r2ik_sel(small, S(2) * y, y * sc);
  out[2] = r2ik_sel(small, S(2) * zq, zq * sc);
}
""")


def emit_tip_residual(e: Emit, r: str, o: int, log: str, sel=ternary) -> None:
    """One tip's 6 residual rows ``r[o..o+5]`` at its pose ``R`` (9, row-major) and ``pv``
    (3) against the goal ``Tt`` (4x4 row-major) weighted by ``wt`` (6), and the running
    largest errors ``pe_max`` / ``re_max`` (as :class:`ros2_ik.ik.objectives.PoseObjective`)."""
    e("  const S d0 = pv[0] - Tt[3], d1 = pv[1] - Tt[7], d2 = pv[2] - Tt[11];")
    e("  const S ep0 = Tt[0] * d0 + Tt[4] * d1 + Tt[8] * d2;")
    e("  const S ep1 = Tt[1] * d0 + Tt[5] * d1 + Tt[9] * d2;")
    e("  const S ep2 = Tt[2] * d0 + Tt[6] * d1 + Tt[10] * d2;")
    mats = []
    for a in range(3):
        for b in range(3):
            mats.append(f"Tt[{a}] * R[{b}] + Tt[{4 + a}] * R[{3 + b}] + "
                        f"Tt[{8 + a}] * R[{6 + b}]")
    e(f"  {log}(" + ",\n      ".join(mats) + ", er);")
    e(f"  {r}[{o}] = wt[0] * ep0; {r}[{o + 1}] = wt[1] * ep1; {r}[{o + 2}] = wt[2] * ep2;")
    e(f"  {r}[{o + 3}] = wt[3] * er[0]; {r}[{o + 4}] = wt[4] * er[1]; "
      f"{r}[{o + 5}] = wt[5] * er[2];")
    sq = [f"ep{a} * ep{a}" for a in range(3)] + [f"er[{a}] * er[{a}]" for a in range(3)]
    part = [f"({sel(f'wt[{i}] > 0', sq[i], 'S(0)')})" for i in range(6)]
    e(f"  const S pm = {part[0]} + {part[1]} + {part[2]};")
    e(f"  const S rm = {part[3]} + {part[4]} + {part[5]};")
    e("  const S spm = sqrt(pm), srm = sqrt(rm);")
    e(f"  pe_max = {sel('spm > pe_max', 'spm', 'pe_max')}; "
      f"re_max = {sel('srm > re_max', 'srm', 're_max')};")


def emit_goal_check(e: Emit, field: str, count: int) -> None:
    """In ``r2ik_prep``: ``ok`` false unless problem ``p``'s ``count`` goals (4x4, row-major,
    in the data member ``field``) are finite, their positions within MAX_VALUE, their
    rotations orthonormal within :data:`ROTATION_TOL_C` and right-handed and their last rows
    0 0 0 1 within the same bound (as
    ``PoseObjective.invalid_problems``)."""
    e(f"const double* t = dat->{field} + p * dat->{field}_stride;")
    e(f"for (int j = 0; j < {16 * count}; ++j) if (!(t[j] - t[j] == 0.0)) ok = false;")
    with e.block(f"for (int k = 0; ok && k < {count}; ++k)"):
        e("const double* m = t + 16 * k;")
        e(f"if (fabs(m[3]) > {MAX_VALUE!r} || fabs(m[7]) > {MAX_VALUE!r} || "
          f"fabs(m[11]) > {MAX_VALUE!r}) ok = false;")
        e("for (int a = 0; a < 3; ++a) for (int b = 0; b < 3; ++b) {")
        e("  const double d = m[a] * m[b] + m[4 + a] * m[4 + b] + m[8 + a] * m[8 + b];")
        e(f"  if (fabs(d - (a == b ? 1.0 : 0.0)) > {ROTATION_TOL_C}) ok = false; }}")
        e("const double det = m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - "
          "m[6] * m[8]) + m[2] * (m[4] * m[9] - m[5] * m[8]);")
        e("if (!(det > 0)) ok = false;")
        e(f"if (fabs(m[12]) > {ROTATION_TOL_C} || fabs(m[13]) > {ROTATION_TOL_C} || "
          f"fabs(m[14]) > {ROTATION_TOL_C} || fabs(m[15] - 1.0) > {ROTATION_TOL_C}) ok = false;")


@contextmanager
def residual_function(e: Emit, ch: Chain, name: str, extra: list, *, frames: bool,
                      export_trig: bool):
    """A goal term's residual function: ``S name(q..., tgt, w, r, pe_o, re_o, extra...,
    frames..., the exported sines and cosines...)`` opened, with locals for the sines and
    cosines it does not export; the caller writes the body inside (``with ... as qv``: the
    coordinates' names, :func:`qvars`)."""
    used, qv = qvars(ch)
    args = [f"const S q{i}" for i in used] + [
        "const S* R2IK_RESTRICT tgt", "const S* R2IK_RESTRICT w", "S* r", "S& pe_o",
        "S& re_o"] + list(extra)
    if frames:
        for j in range(len(ch.qi)):
            args += [f"S& z{j}_{a}" for a in range(3)] + [f"S& pj{j}_{a}" for a in range(3)]
        args += [f"S& pt{t}_{a}" for t in range(ch.T) for a in range(3)]
    exported = {j for j, _ in trig_exports(ch)} if export_trig else set()
    if export_trig:
        args += [f"S& esn{j}, S& ecs{j}" for j in sorted(exported)]
    e("template <typename S>")
    with e.block(f"R2IK_FN S {name}({', '.join(args)})"):
        if export_trig:  # (a joint shared by tips writes its pair once more: the same values)
            e(" ".join(f"S esn{j}, ecs{j};" for j in range(len(ch.qi))
                       if not ch.prismatic[j] and j not in exported))
        yield qv


def emit_evaluate(e: Emit, ch: Chain, name: str, *, frames: bool, sel=ternary,
                   log: str = "r2ik_so3_log<S>", sincos: bool = False,
                   export_trig: bool = False):
    """``S name(q..., tgt, w, r, frames...)`` -> cost; errors into pe/re (as
    ``ik.residuals.evaluate`` with pose objectives). The joint frames and tip positions are
    macros' by-reference arguments.
    ``sel(c, a, b)`` writes a choice (the host lanes' version writes a lane-wise select) and
    ``log`` names the SO(3) log; ``sincos``: as :func:`emit_fk_tip`'s."""
    T = ch.T
    with residual_function(e, ch, name, [], frames=frames, export_trig=export_trig) as qv:
        e("S R[9], pv[3], er[3];")
        e("S pe_max = S(0), re_max = S(0);")
        for t in range(T):
            e(f"// ---- tip {t}: {ch.model.link_names[ch.tips[t]]}")
            emit_fk_tip(e, ch, t, qv, keep_joint_frames=frames, sincos=sincos,
                         export_trig=export_trig)
            e(f"{{ const S* Tt = tgt + {16 * t}; const S* wt = w + {6 * t};")
            emit_tip_residual(e, "r", 6 * t, log, sel)
            if frames:
                e(f"  pt{t}_0 = pv[0]; pt{t}_1 = pv[1]; pt{t}_2 = pv[2];")
            e("}")
        e("S cost = S(0);")
        for i in range(6 * T):
            e(f"cost = cost + r[{i}] * r[{i}];")
        e("pe_o = pe_max; re_o = re_max;")
        e("return S(0.5) * cost;")




class PoseEmitter(Emitter):
    """The pose of every tip at its goal, per-axis weighted in the goal's frame: 6 rows a tip;
    the goal errors (position [m], orientation [rad]) judged against the tolerances. Data per
    problem: ``target`` (T x 16, row-major 4x4) and ``weight`` (T x 6; a call may share one)."""

    name = "pose"
    kind = "goal"

    def rows(self) -> int:
        return 6 * self.ch.T

    def structure(self):
        return jac_structure(self.ch)

    def fields(self) -> tuple:
        T = self.ch.T
        return (Field("target", 16 * T), Field("weight", 6 * T))

    def functions(self, e: Emit, check: bool) -> None:
        ch = self.ch
        emit_so3_log(e)
        emit_evaluate(e, ch, "r2ik_eval", frames=True, sincos=True,
                      export_trig=ch.coll is not None)
        emit_evaluate(e, ch, "r2ik_errors", frames=False, sincos=True)
        emit_jacobian(e, ch, "r2ik_jac_residual")

    # ------------------------------------------------------------------ the LM rows
    def lm_declare(self, e: Emit, c: RowsContext) -> None:
        T = self.ch.T
        e(f"{c.V} tg[{16 * T}] = {{}}, wv[{6 * T}] = {{}};  // the lane's goal and weights")

    def lm_load(self, e: Emit, c: RowsContext) -> None:
        T = self.ch.T
        for arr, f, n in (("tg", "pose_target", 16 * T), ("wv", "pose_weight", 6 * T)):
            e(f"for (int i = 0; i < {n}; ++i) {c.lane(f'{arr}[i]')} = "
              f"S(dat->{f}[p * dat->{f}_stride + i]);")

    def lm_evaluate(self, e: Emit, c: RowsContext) -> str:
        trig = ""
        if self.ch.coll is not None:  # the joints' sines and cosines: computed once, for both
            ex = trig_exports(self.ch)
            e(f"{c.V} " + ", ".join(f"esn{j}, ecs{j}" for j, _ in ex) + ";" if ex else "")
            trig = "".join(f", esn{j}, ecs{j}" for j, _ in ex)
        return f"r2ik_eval<{c.V}>({c.qargs}, tg, wv, r2, pe2, re2, {c.frames}{trig})"

    def lm_jacobian(self, e: Emit, c: RowsContext) -> None:
        e(f"r2ik_jac_residual<{c.V}>({c.frames}, tg, wv, J2);")

    # ------------------------------------------------------------------ checks
    def emit_check(self, e: Emit) -> None:
        """In ``r2ik_prep``: ``ok`` false unless problem ``p``'s goals are finite, their
        positions within MAX_VALUE and their rotations orthonormal within
        :data:`ROTATION_TOL_C` and right-handed (as ``PoseObjective.invalid_problems``)."""
        emit_goal_check(e, "pose_target", self.ch.T)

    def emit_verify(self, e: Emit, qargs: str) -> None:
        """In ``r2ik_select``: ``pe64`` / ``re64``, the answer's goal errors by float64 FK."""
        e(f"double r[{6 * self.ch.T}];")
        e(f"r2ik_errors<double>({qargs}, dat->pose_target + p * dat->pose_target_stride, "
          "dat->pose_weight + p * dat->pose_weight_stride, r, pe64, re64);")
