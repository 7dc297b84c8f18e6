"""The interface between Python and the compiled kernels, generated from the spec's types.

Nothing here is written twice by hand: the kernels' options struct is :class:`IKConfig`'s
numeric fields by name (``opt->lambda_initial``), its NumPy twin is built from the same list,
the status codes are :class:`Status`'s, the solve modes :class:`SolveMode`'s, and the host
drivers' argument structs are declared once below (:data:`SOLVE_ARGS`, :data:`FRAMES_ARGS`) and
rendered as C and as NumPy record types. A field renamed in the spec is a compile error in the
generated source, not a silent shift of a positional array.
"""

from __future__ import annotations

import enum
from dataclasses import fields

import numpy as np

from ..ik.config import IKConfig, SolveMode, Status

__all__ = ["OPTION_FIELDS", "OPTIONS_DTYPE", "options_record", "declarations", "SOLVE_ARGS",
           "FRAMES_ARGS", "SOLVE_DTYPE", "FRAMES_DTYPE", "OUT_FIELDS", "SOLVERS_C", "FLAG_BITS",
           "out_fields", "data_members", "data_dtype", "data_declaration"]

_C = {"f8": "double", "i8": "long long", "u8": "unsigned long long"}


def _option_fields():
    """(name, NumPy code) of every IKConfig field a kernel can read: floats as float64, ints
    and bools as int64, enums as their index; ``timeout`` (optional) is the call's budget."""
    out = []
    for f in fields(IKConfig):
        d = f.default
        if isinstance(d, enum.Enum):
            out.append((f.name, "i8"))
        elif isinstance(d, bool) or isinstance(d, int):
            out.append((f.name, "i8"))
        elif isinstance(d, float):
            out.append((f.name, "f8"))
    return tuple(out)


#: The options every kernel reads, by name: IKConfig's numeric fields, in declaration order.
OPTION_FIELDS = _option_fields()
OPTIONS_DTYPE = np.dtype([(n, "<" + c) for n, c in OPTION_FIELDS])
_MODES = tuple(SolveMode)


def options_record(cfg: IKConfig) -> np.ndarray:
    """``cfg`` as the kernels' ``r2ik_options`` struct: a one-record array of
    :data:`OPTIONS_DTYPE` (its bytes are the struct: every field 8 bytes, no padding)."""
    rec = np.zeros(1, dtype=OPTIONS_DTYPE)
    for name, _ in OPTION_FIELDS:
        v = getattr(cfg, name)
        rec[name] = _MODES.index(v) if isinstance(v, SolveMode) else v
    return rec


#: The solvers a compiled solve runs (``args->solver``), as in :data:`ros2_ik.ik.SOLVERS`.
SOLVERS_C = ("dls", "ccd", "ccd+dls")

#: Bits of a problem's ``flags`` output: its goal passed the checks, its seed did, it started.
FLAG_BITS = {"goal_ok": 1, "seed_ok": 2, "started": 4}

#: The host solve driver's arguments (``r2ik_solve_args``): name, NumPy code, what it is.
#: Pointers are "u8" addresses; (P, ...) arrays are indexed by problem from p_begin.
SOLVE_ARGS = (
    ("p_begin", "i8", "first problem of this call"),
    ("p_end", "i8", "one past the last problem"),
    ("K", "i8", "rows (seeds) per problem"),
    ("solver", "i8", "index into SOLVERS_C"),
    ("seeds", "u8", "const double* (P, nq), or one (nq,) seed with seed_stride 0"),
    ("seed_stride", "i8", "nq, or 0"),
    ("rnd", "u8", "const double* (K-1, nq) restart seeds"),
    ("opt", "u8", "const r2ik_options*"),
    ("clock0", "u8", "CLOCK_MONOTONIC at the call [ns]"),
    ("budget_ns", "i8", "time budget from clock0 [ns], < 0: none"),
    ("stop", "u8", "const volatile int*: set by the host to cancel"),
    ("out", "u8", "double* (P, nq + out fields): per problem q, then out_fields(terms)"),
    ("data", "u8", "const r2ik_data*: the terms' data (data_declaration, per source)"),
)
#: What the host frames driver (``r2ik_frames_args``) takes.
FRAMES_ARGS = (
    ("q", "u8", "const double* (B, nq)"),
    ("B", "i8", "configurations"),
    ("out", "u8", "double* (B, F, 4, 4) poses or (B, F, 6, nv_active) Jacobians"),
    ("jacobian", "i8", "0: poses, 1: world Jacobians"),
    ("max_value", "f8", "refuse |q| beyond this (and NaN); < 0: no check"),
)
#: The per-problem numbers after a problem's q in every solve's output, in this order
#: (float64); the terms' own follow (:func:`out_fields`).
OUT_FIELDS = ("status", "position_error", "orientation_error", "iterations", "seed_index",
              "flags")


def out_fields(emitters) -> tuple:
    """The per-problem numbers after q in the output of a solve with these terms' emitters
    (:mod:`ros2_ik.backends.terms`): :data:`OUT_FIELDS`, then each term's outputs."""
    return OUT_FIELDS + tuple(f for em in emitters for f in em.outputs())


def data_members(emitters) -> tuple:
    """The data struct's members of these terms: ``(name, NumPy code, what)``, three per field
    of a term: ``<term>_<field>`` (the address of its float64 values), ``_stride`` (values
    between two problems; 0: one set for all) and ``_n`` (a count the term gives with it)."""
    out = []
    for em in emitters:
        for f in em.fields():
            n = f"{em.name}_{f.name}"
            what = (f"{f.width} values a problem" if f.width is not None
                    else "one shared array")
            out += [(n, "u8", f"const double*: {em.name}'s {f.name}, {what}"),
                    (n + "_stride", "i8", "values from one problem to the next, or 0"),
                    (n + "_n", "i8", "a count given with it")]
    return tuple(out)


def data_dtype(emitters) -> np.dtype:
    """The NumPy record of the data struct of these terms (every member 8 bytes)."""
    return np.dtype([(n, "<" + c) for n, c, _ in data_members(emitters)] or [("none", "<i8")])


def data_declaration(emitters) -> str:
    """The C declarations of a solve source's terms: the data struct ``r2ik_data`` (pointers
    as ``const double*``) and the indices of the terms' outputs."""
    rows = [(n, c, w) for n, c, w in data_members(emitters)]
    body = "\n".join(f"  {'const double*' if c == 'u8' else _C[c]} {n};  // {w}"
                     for n, c, w in rows) or "  long long none;"
    fields = out_fields(emitters)
    lines = [f"typedef struct {{\n{body}\n}} r2ik_data;"]
    lines += [f"#define R2IK_OUT_{n.upper()} {i}" for i, n in enumerate(fields)
              if i >= len(OUT_FIELDS)]
    lines.append(f"#define R2IK_OUT_ALL {len(fields)}")
    return "\n".join(lines) + "\n"

SOLVE_DTYPE = np.dtype([(n, "<" + c) for n, c, _ in SOLVE_ARGS])
FRAMES_DTYPE = np.dtype([(n, "<" + c) for n, c, _ in FRAMES_ARGS])


def _struct(name: str, rows) -> str:
    body = "\n".join(f"  {_C[c]} {n};  // {what}" for n, c, what in rows)
    return f"typedef struct {{\n{body}\n}} {name};\n"


def declarations() -> str:
    """The C declarations every generated source starts with: the options struct, the status
    codes, solve modes and solvers, the output layout and the host drivers' argument structs."""
    lines = ["// ---- generated from ros2_ik.ik.config (IKConfig, Status, SolveMode)",
             _struct("r2ik_options", [(n, c, "IKConfig." + n) for n, c in OPTION_FIELDS])]
    lines += [f"#define R2IK_STATUS_{s.name} {int(s.value)}" for s in Status]
    lines += [f"#define R2IK_MODE_{m.name} {i}" for i, m in enumerate(_MODES)]
    lines += [f"#define R2IK_SOLVER_{n.upper().replace('+', '_')} {i}"
              for i, n in enumerate(SOLVERS_C)]
    lines += [f"#define R2IK_OUT_{n.upper()} {i}" for i, n in enumerate(OUT_FIELDS)]
    lines.append(f"#define R2IK_OUT_FIELDS {len(OUT_FIELDS)}")
    lines += [f"#define R2IK_FLAG_{n.upper()} {b}" for n, b in FLAG_BITS.items()]
    lines.append(_struct("r2ik_solve_args", SOLVE_ARGS))
    lines.append(_struct("r2ik_frames_args", FRAMES_ARGS))
    return "\n".join(lines) + "\n"
