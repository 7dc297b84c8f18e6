"""C literals and linear combinations of the generated sources (shared by the generator's
modules :mod:`.codegen` and :mod:`.codegen_collision`)."""

from __future__ import annotations

import math

from ..errors import InvalidInputError

__all__ = ["lit", "lin"]


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
