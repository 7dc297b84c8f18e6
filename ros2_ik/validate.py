"""Input validation shared by every public entry point of the core.

One place decides what a bad argument gets, so every entry point answers the same way:

- not an array of numbers at all (``None``, a string, a dict, an object or complex array, a
  ragged nested list): :class:`~ros2_ik.errors.InputTypeError` (or
  :class:`~ros2_ik.errors.ShapeError` for a ragged list), naming the argument, what was
  expected and what came;
- numbers of the wrong shape: :class:`~ros2_ik.errors.ShapeError`;
- NaN, infinity, out of range, too large: :class:`~ros2_ik.errors.InvalidInputError`.

Dtypes: integer, boolean and float16 arrays are promoted to float64 (float16 has a 1 mm
resolution at 1 m: kinematics in it is silently wrong); float32 and float64 arrays keep their
dtype. Every message starts with the argument's name.
"""

from __future__ import annotations

import math
import numbers
from typing import Iterable


import numpy as np

from .errors import InputTypeError, InvalidInputError, ShapeError, UnknownLinkError

__all__ = ["as_float_array", "check_memory", "MEMORY_BUDGET", "check_number", "check_int",
           "check_names", "check_name", "describe", "MAX_TIMEOUT", "QUAT_NORM_TOL",
           "ROTATION_TOL", "check_poses", "describe_bad_pose", "bad_rotations", "bad_last_rows",
           "transform_problems", "check_transforms", "check_flag",
           "check_callable", "check_choice", "check_path", "link_index",
           "link_indices", "naming"]

#: Largest ``timeout`` accepted [s] (about 11.6 days): larger values overflow the monotonic
#: clock's nanosecond deadline. Use ``None`` for "no limit".
MAX_TIMEOUT = 1e6


#: Peak memory one core call may plan for [bytes] (1 GiB). Batched FK, Jacobians and solves are
#: done in chunks of rows that stay well below it, with results equal to one big call; a call
#: whose *result* alone would exceed it (or a trajectory whose nodes would) is refused up front
#: with an :class:`~ros2_ik.errors.InvalidInputError` that says how to split it.
MEMORY_BUDGET = 1 << 30


def check_memory(nbytes: int, what: str, size: str, how: str) -> None:
    """InvalidInputError when ``nbytes`` exceeds :data:`MEMORY_BUDGET`."""
    if nbytes > MEMORY_BUDGET:
        raise InvalidInputError(
            f"{what} ({size}) needs about {nbytes / 2**30:.1f} GiB, more than the memory budget "
            f"of {MEMORY_BUDGET / 2**30:.0f} GiB (ros2_ik.validate.MEMORY_BUDGET); {how}")


def describe(value) -> str:
    """A short description of what came: its type, and its shape and dtype for an array."""
    if value is None:
        return "None"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {dtype}"
    r = repr(value)
    if len(r) > 60:
        r = r[:57] + "..."
    return f"{type(value).__name__} {r}"


def as_float_array(value, name: str, expected: str, xp=None):
    """``value`` as a float array of backend ``xp`` (default: the value's own).

    Raises :class:`InputTypeError` when it is not numbers (None, str, bytes, dict, set, object,
    complex, string or datetime dtypes) and :class:`ShapeError` for a ragged nested list. Integer,
    boolean and float16 input becomes float64; float32/float64 keep their dtype.
    ``expected`` says what was expected (e.g. ``"shape (B, 7)"``) for the message.
    """
    if xp is None:
        from .backend import get_xp  # noqa: PLC0415

        xp = get_xp(value)
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)) or callable(value):
        raise InputTypeError(f"{name} must be an array of numbers with {expected}, got "
                             f"{describe(value)}")
    try:
        a = xp.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ShapeError(f"{name} must be an array of numbers with {expected}, got a ragged or "
                         f"malformed {type(value).__name__} ({exc})") from None
    kind = a.dtype.kind
    if kind not in "biuf":
        raise InputTypeError(f"{name} must be an array of real numbers with {expected}, got "
                             f"{describe(a)}")
    if kind != "f" or a.dtype.itemsize < 4:
        a = a.astype(xp.float64)
    return a


def check_finite(a, name: str, xp=None) -> None:
    """InvalidInputError when the array holds NaN or infinity."""
    if xp is None:
        from .backend import get_xp  # noqa: PLC0415

        xp = get_xp(a)
    if not bool(xp.all(xp.isfinite(a))):
        raise InvalidInputError(f"{name} contains NaN or infinity; give finite numbers")


def check_number(value, name: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, allow_none: bool = False) -> float | None:
    """A real number (not bool, not str), finite, within [low, high] (``low_open``: > low)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"{name} must be a number{' or None' if allow_none else ''}, got "
                             f"{describe(value)}")
    v = float(value)
    rng = _range_text(low, high, low_open)
    if not math.isfinite(v):
        raise InvalidInputError(f"{name} must be a finite number{rng}, got {value!r}")
    if low is not None and (v <= low if low_open else v < low):
        raise InvalidInputError(f"{name} must be a number{rng}, got {value!r}")
    if high is not None and v > high:
        raise InvalidInputError(f"{name} must be a number{rng}, got {value!r}")
    return v


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (Python or NumPy, not bool, not float) within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(f"{name} must be an integer, got {describe(value)}")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise InvalidInputError(f"{name} must be{_range_text(low, high)} (an integer), got {v}")
    return v


def _range_text(low, high, low_open=False) -> str:
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low:g}, {high:g}]"
    if low is not None:
        return f" {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f" <= {high:g}"
    return ""


def check_name(value, name: str) -> str:
    """A single link/joint name (str)."""
    if not isinstance(value, str):
        raise InputTypeError(f"{name} must be a link name (str), got {describe(value)}")
    return value


def check_names(value, name: str, *, allow_empty: bool = False, kind: str = "link") -> list[str]:
    """One name (str) or an iterable of names (a list, a tuple, a set, a dict's keys) -> list."""
    if isinstance(value, str):
        return [value]
    if value is None or isinstance(value, (bytes, numbers.Number)) or not isinstance(
            value, Iterable):
        raise InputTypeError(f"{name} must be a {kind} name or a list of {kind} names, got "
                             f"{describe(value)}")
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise InputTypeError(f"{name} must hold {kind} names (str), got an element "
                                 f"{describe(v)}")
    if not out and not allow_empty:
        raise InvalidInputError(f"{name} is empty; give at least one {kind} name")
    return out


def check_flag(value, name: str) -> bool:
    """True or False (a Python or NumPy bool; not 0, 1, None or a string)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InputTypeError(f"{name} must be True or False, got {describe(value)}")


def check_callable(value, name: str, what: str = "a callable") -> None:
    """None or a callable (``what`` says what it is called as, for the message)."""
    if value is not None and not callable(value):
        raise InputTypeError(f"{name} must be {what}, or None, got {describe(value)}")


def check_choice(value, name: str, choices) -> str:
    """One of the strings ``choices``."""
    if not isinstance(value, str):
        raise InputTypeError(f"{name} must be one of {tuple(choices)} (a str), got "
                             f"{describe(value)}")
    if value not in choices:
        raise InvalidInputError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_path(value, name: str, *, allow_none: bool = True):
    """None (where allowed), a str or an ``os.PathLike``."""
    import os  # noqa: PLC0415

    if (value is None and allow_none) or isinstance(value, (str, os.PathLike)):
        return value
    raise InputTypeError(f"{name} must be a path (str or pathlib.Path)"
                         f"{' or None' if allow_none else ''}, got {describe(value)}")


def naming(err: UnknownLinkError, name: str) -> UnknownLinkError:
    """``err`` (a link, joint or robot name not found) with the argument ``name`` that held it
    at the front of its message."""
    text = err.args[0] if err.args else str(err)
    if not text.startswith(f"{name}: "):
        err.args = (f"{name}: {text}",) + tuple(err.args[1:])
    return err


def link_index(model, value, name: str) -> int:
    """The index of link ``value`` of ``model``; errors name the argument ``name``
    (:class:`InputTypeError` for what is not a str, :class:`UnknownLinkError` listing the valid
    names)."""
    check_name(value, name)
    try:
        return model.link_index(value)
    except UnknownLinkError as exc:
        raise naming(exc, name) from None


def link_indices(model, value, name: str, *, allow_empty: bool = False) -> list[int]:
    """The indices of one link name or a list of them (:func:`check_names`, :func:`link_index`
    rules)."""
    return [link_index(model, n, name) for n in check_names(value, name,
                                                            allow_empty=allow_empty)]


# ---------------------------------------------------------------------- poses
#: A quaternion (x y z w) whose norm differs from 1 by more than this is not a rotation: the
#: goal or keyframe is invalid (INVALID_GOAL in the node); within it, it is normalized.
QUAT_NORM_TOL = 1e-3
#: A rotation matrix ``R`` with an entry of ``R^T R`` off the identity by more than this, or
#: with ``det R < 0``, is not a rotation (an invalid goal or keyframe). The compiled goal checks
#: test the same bound (``solvers/_fast_kernels.py``, ``gpu/codegen.py``; a test keeps them
#: equal).
ROTATION_TOL = 1e-6


def check_poses(pq: np.ndarray, *, position_only: bool = False
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate and normalize poses (..., 7), vectorized.

    Returns ``(pq_clean, ok, reason)``: ``pq_clean`` has unit quaternions (identity where the
    pose is invalid or ``position_only``), ``ok`` (...) bool, ``reason`` (...) int8 with
    0 = ok, 1 = non-finite value, 2 = quaternion norm not 1 (beyond :data:`QUAT_NORM_TOL`).
    """
    pq = np.array(pq, dtype=np.float64)  # own copy
    if pq.size == 7 and pq.shape[-1] == 7:
        return _check_one_pose(pq, position_only)
    pos_ok = np.all(np.isfinite(pq[..., :3]), axis=-1)
    if position_only:
        ok = pos_ok
        reason = np.where(pos_ok, 0, 1).astype(np.int8)
        pq[..., 3:] = (0.0, 0.0, 0.0, 1.0)
    else:
        quat = pq[..., 3:]
        fin = pos_ok & np.all(np.isfinite(quat), axis=-1)
        with np.errstate(invalid="ignore"):
            norm = np.sqrt(np.einsum("...i,...i->...", quat, quat))
            unit = fin & (np.abs(norm - 1.0) <= QUAT_NORM_TOL)
        ok = unit
        reason = np.where(~fin, 1, np.where(~unit, 2, 0)).astype(np.int8)
        safe = np.where(ok, norm, 1.0)
        pq[..., 3:] = np.where(ok[..., None], quat / safe[..., None], (0.0, 0.0, 0.0, 1.0))
    pq[..., :3] = np.where(ok[..., None], pq[..., :3], 0.0)
    return pq, ok, reason


def _check_one_pose(pq: np.ndarray, position_only: bool):
    """:func:`check_poses` of one pose, on Python floats (the array code costs about 0.1 ms
    for one pose: a one-goal request's budget); the same rules and results."""
    v = pq.reshape(7).tolist()
    pos = v[:3]
    ok = all(map(math.isfinite, pos))
    reason = 0 if ok else 1
    quat = [0.0, 0.0, 0.0, 1.0]
    if not position_only:
        fin = ok and all(map(math.isfinite, v[3:]))
        norm = math.sqrt(sum(c * c for c in v[3:])) if fin else math.nan
        ok = fin and abs(norm - 1.0) <= QUAT_NORM_TOL
        reason = 1 if not fin else (0 if ok else 2)
        if ok:
            quat = [c / norm for c in v[3:]]
    shape = pq.shape[:-1]
    clean = np.array((pos if ok else [0.0, 0.0, 0.0]) + quat).reshape(pq.shape)
    return clean, np.full(shape, ok), np.full(shape, reason, dtype=np.int8)


def describe_bad_pose(pq_raw: np.ndarray, reason: int) -> str:
    """Why one pose (7,) was rejected, and what to do."""
    if reason == 1:
        return "pose contains NaN or infinity; give finite position and orientation values"
    v = np.asarray(pq_raw, dtype=float)
    n = float(np.linalg.norm(v[3:7]))
    text = (f"orientation quaternion (x y z w) {np.round(v[3:7], 6).tolist()} has norm {n:.6g}, "
            "not 1; send a unit quaternion (normalize it)")
    with np.errstate(invalid="ignore"):
        tiny = (v != 0) & (np.abs(v) < np.finfo(float).tiny)
    if tiny.any():  # subnormal values: the bits of small integers read as a double
        text += (f" (the pose holds subnormal values such as {v[tiny][0]:.3g}: what rclpy sends "
                 "for a Python int assigned to a float field, e.g. w = 1 instead of 1.0, unless "
                 "ROS_PYTHON_CHECK_FIELDS=1 is set; assign floats)")
    return text


def bad_rotations(R, xp):
    """(N,) bool: the matrices of ``R`` (N, 3, 3) on backend ``xp`` that are not rotations
    (:data:`ROTATION_TOL`; a NaN matrix is not flagged here: test finiteness first)."""
    # R^T R - I and det(R) from the columns, written out: a batched 3x3 matmul and LAPACK's
    # det cost about 1 us per matrix in NumPy, these elementwise products a tenth of that
    c = [R[:, :, j] for j in range(3)]
    err = None
    for i in range(3):
        for j in range(i, 3):
            d = xp.abs(c[i][:, 0] * c[j][:, 0] + c[i][:, 1] * c[j][:, 1]
                       + c[i][:, 2] * c[j][:, 2] - (1.0 if i == j else 0.0))
            err = d if err is None else xp.maximum(err, d)  # NaN stays NaN: not flagged here
    det = (c[0][:, 0] * (c[1][:, 1] * c[2][:, 2] - c[1][:, 2] * c[2][:, 1])
           - c[0][:, 1] * (c[1][:, 0] * c[2][:, 2] - c[1][:, 2] * c[2][:, 0])
           + c[0][:, 2] * (c[1][:, 0] * c[2][:, 1] - c[1][:, 1] * c[2][:, 0]))
    return (err > ROTATION_TOL) | (det < 0)



def bad_last_rows(T, xp):
    """(N,) bool: the transforms of ``T`` (N, 4, 4) on backend ``xp`` whose last row is not
    ``0 0 0 1`` within :data:`ROTATION_TOL` (a projective or scaled matrix, not a rigid
    transform; a NaN row is not flagged here: test finiteness first)."""
    r = T[:, 3, :]
    return ((xp.abs(r[:, 0]) > ROTATION_TOL) | (xp.abs(r[:, 1]) > ROTATION_TOL)
            | (xp.abs(r[:, 2]) > ROTATION_TOL) | (xp.abs(r[:, 3] - 1.0) > ROTATION_TOL))


def transform_problems(T) -> list[tuple[int, str]]:
    """``[(index, what is wrong), ...]`` of the matrices of ``T`` (N, 4, 4) NumPy that are not
    finite rigid transforms: every entry finite, the rotation block orthonormal within
    :data:`ROTATION_TOL` with determinant +1 (not a scale, a shear or a reflection), the last row
    ``0 0 0 1``. The same rules as the solver's per-goal check
    (``PoseObjective.invalid_problems`` and the generated ``r2ik_prep``)."""
    T = np.asarray(T, dtype=np.float64).reshape(-1, 4, 4)
    finite = np.all(np.isfinite(T.reshape(len(T), 16)), axis=1)
    R = np.where(finite[:, None, None], T[:, :3, :3], np.eye(3))
    rot = bad_rotations(R, np)
    row = bad_last_rows(np.where(finite[:, None, None], T, np.eye(4)), np)
    out = []
    for i in np.nonzero(~finite | rot | row)[0].tolist():
        if not finite[i]:
            out.append((i, "has NaN or infinity; give finite values"))
            continue
        why = []
        if rot[i]:
            Ri = T[i, :3, :3]
            det = float(np.linalg.det(Ri))
            if det < 0:
                why.append(f"its rotation block has determinant {det:.4g} (a reflection)")
            else:
                err = float(np.abs(Ri.T @ Ri - np.eye(3)).max())
                why.append(f"its rotation block is not orthonormal (R^T R differs from I by "
                           f"{err:.3g}, more than {ROTATION_TOL:g}: a scale or shear)")
        if row[i]:
            why.append(f"its last row is {T[i, 3].tolist()}, not [0, 0, 0, 1]")
        out.append((i, " and ".join(why) + "; give a rigid transform (an orthonormal "
                    "rotation with determinant 1, last row 0 0 0 1)"))
    return out


def check_transforms(T, name: str, item: str = "pose") -> None:
    """Raise :class:`~ros2_ik.errors.InvalidInputError` naming the first matrix of ``T``
    (N, 4, 4) that is not a finite rigid transform (:func:`transform_problems`), and how many
    are not: ``"{name}: {item} {i} is not a rigid transform: ..."``."""
    bad = transform_problems(T)
    if bad:
        i, why = bad[0]
        more = f" ({len(bad)} of {len(np.asarray(T).reshape(-1, 16))} are not)" \
            if len(bad) > 1 else ""
        what = why if why.startswith("has NaN") else f"is not a rigid transform: {why}"
        raise InvalidInputError(f"{name}: {item} {i} {what}{more}")
