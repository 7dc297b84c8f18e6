"""The step bound's compiled side: a hinge row per moved coordinate, a constraint every
converged row keeps, checked once more in float64 on the answer. The reference (and the
rule) is :mod:`ros2_ik.ik.terms.step`."""

from __future__ import annotations

import numpy as np

from ...ik.terms.step import STEP_MARGIN, STEP_MARGIN_FRACTION
from ..emit.text import Emit
from .base import Emitter, Field, RowsContext

__all__ = ["StepEmitter"]


class StepEmitter(Emitter):
    """``origin`` and ``max_step`` (nq values a problem, or one set) and the hinge's
    ``weight``; rows ``w * sign(d) * max(0, |d| - inner)`` (Jacobian ``w`` where the hinge
    stands), the constraint value ``min (max_step - |d|)``."""

    name = "step"
    kind = "constraint"

    def fields(self) -> tuple:
        nq = self.ch.model.nq
        return (Field("origin", nq), Field("max_step", nq), Field("weight", 1))

    def rows(self) -> int:
        return self.ch.nc

    def structure(self) -> np.ndarray:
        return np.eye(self.ch.nc, dtype=bool)

    def _diff(self, e: Emit, i: int, x: str, o: str, floor: str, T: str) -> None:
        """``d`` = x - o, a continuous joint's the shorter way round."""
        e(f"{T} d = {x} - {o};")
        if self.ch.model.q_continuous[i]:
            e(f"d = d - {T}(S(6.283185307179586)) * {floor}((d + {T}(S(3.141592653589793))) / "
              f"{T}(S(6.283185307179586)));")

    # ------------------------------------------------------------------ the LM rows
    def lm_declare(self, e: Emit, c: RowsContext) -> None:
        nq = self.ch.model.nq
        e(f"{c.V} st_o[{nq}], st_s[{nq}], st_in[{nq}], st_w = {c.V}(S(0));  "
          "// the step bound: from, bound, hinge, weight")
        e(f"{c.V} stv = {c.V}(S(0)), stv2 = {c.V}(S(0));  // its constraint value")

    def lm_load(self, e: Emit, c: RowsContext) -> None:
        with e.block(f"for (int i = 0; i < {self.ch.model.nq}; ++i)"):
            e("const double s = dat->step_max_step[p * dat->step_max_step_stride + i];")
            e(f"{c.lane('st_o[i]')} = S(dat->step_origin[p * dat->step_origin_stride + i]);")
            e(f"{c.lane('st_s[i]')} = S(s);")
            e(f"{c.lane('st_in[i]')} = S(s - ({STEP_MARGIN_FRACTION!r} * s < {STEP_MARGIN!r} ? "
              f"{STEP_MARGIN_FRACTION!r} * s : {STEP_MARGIN!r}));")
        e(f"{c.lane('st_w')} = S(dat->step_weight[p * dat->step_weight_stride]);")

    def _rows(self, e: Emit, c: RowsContext, r: str) -> str:
        V = c.V
        floor = "r2ik_floor" if c.d.vector else "floor"
        e(f"stv2 = {V}(S(INFINITY));")
        for a, i in enumerate(self.ch.colq):
            with e.block(""):
                self._diff(e, i, f"q{i}", f"st_o[{i}]", floor, V)
                e(f"const {V} ad = r2ik_sel(d < {V}(S(0)), -d, d);")
                e(f"const {V} h = r2ik_sel(ad > st_in[{i}], ad - st_in[{i}], {V}(S(0)));")
                e(f"const {V} sg = r2ik_sel(d < {V}(S(0)), -st_w, st_w);")
                e(f"{r}[{c.row0 + a}] = sg * h;")
                e(f"const {V} sl = st_s[{i}] - ad;")
                e("stv2 = r2ik_sel(sl < stv2, sl, stv2);")
        return (f"{V}(S(0.5)) * (" + " + ".join(f"{r}[{c.row0 + a}] * {r}[{c.row0 + a}]"
                                             for a in range(self.ch.nc)) + ")")

    def lm_evaluate(self, e: Emit, c: RowsContext) -> str:
        return self._rows(e, c, "r2")

    def lm_jacobian(self, e: Emit, c: RowsContext) -> None:
        V = c.V  # d r / d q = w where the hinge stands (r = w (d - sign(d) inner))
        for a in range(self.ch.nc):
            e(f"J2[{(c.row0 + a) * c.nc + a}] = r2ik_sel(r2[{c.row0 + a}] == {V}(S(0)), "
              f"{V}(S(0)), st_w);")

    def lm_take(self, e: Emit, c: RowsContext) -> None:
        e("stv = r2ik_sel(acc, stv2, stv);")

    def lm_ok(self, c: RowsContext) -> list:
        return [f"stv >= {c.V}(S(0))"]

    # ------------------------------------------------------------------ the selection
    def emit_verify(self, e: Emit, qargs: str) -> str:
        """The answer's smallest slack in float64 (< 0: a joint past its bound)."""
        e("const double* so = dat->step_origin + p * dat->step_origin_stride;")
        e("const double* ss = dat->step_max_step + p * dat->step_max_step_stride;")
        e("double slack = INFINITY;")
        for i in self.ch.colq:
            with e.block(""):
                self._diff(e, i, f"o[{i}]", f"so[{i}]", "floor", "double")
                e(f"const double sl = ss[{i}] - fabs(d); if (sl < slack) slack = sl;")
        return "slack < 0.0"
