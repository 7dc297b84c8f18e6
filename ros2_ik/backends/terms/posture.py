"""The posture term's compiled side: rows ``w * (q_i - rest_i)`` over the solve's columns, a
cost lowered after the answer is found (the refinement of :mod:`ros2_ik.backends.emit.refine`).
The reference is :mod:`ros2_ik.ik.terms.posture`."""

from __future__ import annotations

from ..emit.text import Emit
from .base import Emitter, Field, RowsContext

__all__ = ["PostureEmitter"]


class PostureEmitter(Emitter):
    """A rest configuration (``rest``, nq values a problem) and its ``weight`` (one a
    problem); one row per column the solve moves."""

    name = "posture"
    kind = "cost"

    def fields(self) -> tuple:
        return (Field("rest", self.ch.model.nq), Field("weight", 1))

    def secondary_rows(self) -> int:
        return self.ch.nc

    def lm_declare(self, e: Emit, c: RowsContext) -> None:
        e(f"{c.V} rest_p[{self.ch.model.nq}], wpost = {c.V}(S(0));  // the rest posture, weight")

    def lm_load(self, e: Emit, c: RowsContext) -> None:
        e(f"for (int i = 0; i < {self.ch.model.nq}; ++i) {c.lane('rest_p[i]')} = "
          "S(dat->posture_rest[p * dat->posture_rest_stride + i]);")
        e(f"{c.lane('wpost')} = S(dat->posture_weight[p * dat->posture_weight_stride]);")

    def sec_evaluate(self, e: Emit, c: RowsContext) -> str:
        for a, i in enumerate(self.ch.colq):
            e(f"rs[{c.row0 + a}] = wpost * (q{i} - rest_p[{i}]);")
        return "(" + " + ".join(f"rs[{c.row0 + a}] * rs[{c.row0 + a}]"
                                for a in range(self.ch.nc)) + ")"

    def sec_jacobian(self, e: Emit, c: RowsContext) -> None:
        for a in range(self.ch.nc):
            e(f"Js[{(c.row0 + a) * c.nc + a}] = wpost;")
