"""The generator's text tools: C literals and linear combinations, the code builder
(:class:`Emit`), the dialects the LM rows are spelt in (:class:`Dialect`), the headers."""

from __future__ import annotations


import math
from dataclasses import dataclass

import numpy as np

from ...errors import InvalidInputError


DTYPES = {"float32": "float", "float64": "double"}


#: rows per vector of the host lanes: 4 doubles (one AVX register)
LANES = 4


def dlit(x: float) -> str:
    """A C double literal of x (shortest round trip: the very float64 value)."""
    return repr(float(x))


@dataclass(frozen=True)
class Dialect:
    """How the LM rows' text spells values and masks: one row (``lanes`` 1: a value is the
    scalar ``S``, a mask a ``bool``) or ``lanes`` rows side by side (a value is a vector ``V``,
    a mask ``M``, every branch on data a lane-wise select)."""

    lanes: int

    @property
    def vector(self) -> bool:
        return self.lanes > 1

    def and_(self, *terms) -> str:
        return (" & " if self.vector else " && ").join(f"({t})" for t in terms)

    def or_(self, *terms) -> str:
        return (" | " if self.vector else " || ").join(f"({t})" for t in terms)

    def not_(self, m: str) -> str:
        return f"~({m})" if self.vector else f"!({m})"

    def any(self, m: str) -> str:
        return f"r2ik_any({m})" if self.vector else f"({m})"

    @property
    def none(self) -> str:
        """The all-false mask."""
        return "M(r2ik_mv{})" if self.vector else "false"

    def lane(self, v: str, l: str = "l") -> str:
        """Lane ``l`` of value ``v`` (an lvalue)."""
        return f"{v}.x[{l}]" if self.vector else v

    def mlane(self, m: str, l: str = "l") -> str:
        """Lane ``l`` of mask ``m`` (a bool)."""
        return f"{m}[{l}]" if self.vector else m

    def mask(self, arr: str) -> str:
        """The mask of a ``bool arr[lanes]``."""
        return f"r2ik_mask({arr})" if self.vector else f"{arr}[0]"


SCALAR = Dialect(1)


VECTOR = Dialect(LANES)


class Emit:
    def __init__(self):
        self.lines = []
        self.ind = 0

    def kernel(self, name, args):
        return self.block(f"R2IK_KERNEL {name}({args})")

    def __call__(self, s=""):
        for line in s.split("\n"):
            self.lines.append(("  " * self.ind + line) if line else "")

    def block(self, head):
        self(head + " {")
        self.ind += 1
        return self

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.ind -= 1
        self("}")

    def text(self):
        return "\n".join(self.lines) + "\n"


def ternary(c: str, a: str, b: str) -> str:
    return f"r2ik_sel({c}, {a}, {b})"


#: 2 pi in the kernel's scalar, as the reference's ``2 * math.pi`` in float64
TWO_PI = "S(2) * S(R2IK_PI)"


def header(ch, scalar: str, what: str) -> str:
    tips = ", ".join(ch.model.link_names[t] for t in ch.tips)
    return (f"// ros2_ik generated {what} kernels: model {ch.model.name!r}, tips [{tips}], "
            f"{ch.nc} columns, scalar {scalar}.\n"
            "#ifndef INFINITY\n#define INFINITY (__int_as_float(0x7f800000))\n#endif\n"
            "#define R2IK_PI 3.141592653589793\n"
            f"#define R2IK_TINY {'1e-300' if scalar == 'double' else '1e-30f'}\n")


def scalar_type(dtype: str) -> str:
    try:
        return DTYPES[str(np.dtype(dtype))]
    except (KeyError, TypeError):
        raise InvalidInputError(f"dtype must be float32 or float64, got {dtype!r}") from None


def lit(x: float) -> str:
    """A C literal of the float64 value x (shortest round-trip repr), cast to the scalar S."""
    x = float(x)
    if not math.isfinite(x):
        raise InvalidInputError(f"non-finite constant {x} cannot be baked into a kernel")
    s = repr(x)
    if "e" not in s and "." not in s:
        s += ".0"
    return f"S({s})"


def lin(terms) -> str | None:
    """Left-to-right sum of ``coef * expr`` terms (coef a float64 literal, or None for a runtime
    factor already in expr); literal zeros dropped, ones folded. None when nothing is left."""
    out = None
    for coef, expr in terms:
        if coef is not None and coef == 0.0:
            continue
        if coef is None or coef == 1.0:
            t, neg = expr, False
        elif coef == -1.0:
            t, neg = expr, True
        else:
            t, neg = f"{expr} * {lit(coef)}", False
        if out is None:
            out = f"(-{t})" if neg else t
        else:
            out = f"{out} {'-' if neg else '+'} {t}"
    return out
