"""The array module: NumPy always, CuPy when a GPU is usable.

Core code is written once against an array namespace ``xp``. :func:`get_xp` returns the module an
array belongs to; :func:`get_backend` returns a module by name. CuPy is imported lazily, only when
asked for, so the package imports on a machine with neither a GPU nor CuPy.
"""

from __future__ import annotations

import enum
import threading
import types
from typing import Any

import numpy as np

from .errors import BackendUnavailableError

__all__ = ["Backend", "get_xp", "get_backend", "cupy_available", "to_numpy", "const", "add_at",
           "min_at"]


class Backend(str, enum.Enum):
    """Array backend choice; also accepts the plain strings ``"auto"``, ``"numpy"``, ``"cupy"``."""

    AUTO = "auto"
    NUMPY = "numpy"
    CUPY = "cupy"


_cupy_state: dict[str, Any] = {}


def _import_cupy():
    if "module" not in _cupy_state:
        try:
            import cupy  # noqa: PLC0415  (lazy on purpose)

            cupy.cuda.runtime.getDeviceCount()
            _cupy_state["module"] = cupy
            _cupy_state["error"] = None
        except Exception as exc:  # noqa: BLE001 - ImportError, CUDARuntimeError, ...
            _cupy_state["module"] = None
            _cupy_state["error"] = f"{type(exc).__name__}: {exc}"
    return _cupy_state["module"]


def cupy_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return _import_cupy() is not None


def get_backend(name: str | Backend = Backend.AUTO) -> types.ModuleType:
    """Return the array module for ``name`` (``auto`` picks CuPy when a GPU is usable)."""
    try:
        choice = Backend(name)
    except ValueError:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; use one of {[b.value for b in Backend]}"
        ) from None
    if choice is Backend.NUMPY:
        return np
    cp = _import_cupy()
    if cp is None:
        if choice is Backend.AUTO:
            return np
        raise BackendUnavailableError(
            f"backend 'cupy' requested but CuPy is not usable here ({_cupy_state['error']}); "
            "install cupy for your CUDA version on a machine with a GPU, or use backend='numpy'"
        )
    return cp


def get_xp(*arrays: Any) -> types.ModuleType:
    """The array module of the given arrays: CuPy if any of them is a CuPy array, else NumPy."""
    for a in arrays:
        mod = type(a).__module__
        if mod.startswith("cupy"):
            return _import_cupy() or np
    return np


_consts: "dict" = {}
_consts_lock = threading.Lock()  # the node solves from several worker threads
MAX_CONSTS = 4096


def const(xp: types.ModuleType, a: np.ndarray, dtype=None):
    """``xp.asarray(a, dtype)`` for a constant host array (a model's tables), uploaded once per
    array and dtype when ``xp`` is not NumPy: per-call uploads of model data are host round
    trips on a GPU. ``a`` must not change afterwards (the model's derived tables never do); the
    cache keeps the 4096 most recent and holds ``a`` so its id is not reused."""
    if xp is np:
        return a if dtype is None else np.asarray(a, dtype=dtype)
    key = (id(a), id(xp), str(dtype))
    hit = _consts.get(key)
    if hit is not None and hit[0] is a:
        return hit[1]
    d = xp.asarray(a, dtype=dtype)
    with _consts_lock:
        if len(_consts) >= MAX_CONSTS:
            _consts.pop(next(iter(_consts)))
        _consts[key] = (a, d)
    return d


def to_numpy(a: Any) -> np.ndarray:
    """Copy an array of any backend to host memory as a NumPy array."""
    if type(a).__module__.startswith("cupy"):
        return a.get()
    return np.asarray(a)


def add_at(xp, out, idx, values) -> None:
    """``out[idx] += values`` with repeated indices summed (``np.add.at``; CuPy's
    ``cupyx.scatter_add``)."""
    if xp is np:
        np.add.at(out, idx, values)
    else:
        import cupyx  # noqa: PLC0415

        cupyx.scatter_add(out, idx, values)


def min_at(xp, out, idx, values) -> None:
    """``out[idx] = minimum(out[idx], values)`` with repeated indices (``np.minimum.at``;
    CuPy's ``cupyx.scatter_min``)."""
    if xp is np:
        np.minimum.at(out, idx, values)
    else:
        import cupyx  # noqa: PLC0415

        cupyx.scatter_min(out, idx, values)
