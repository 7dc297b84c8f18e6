"""The C call path of :func:`.fk_frames` and :func:`.jacobian` for small calls.

A control loop's call (one configuration, or a few) spends more time in Python than in the
kernel: Numba's dispatcher types its five arguments (about 1 us), ``np.empty`` and the checks
of q add as much again, while a 7-DOF arm's FK costs about 0.5 us. :mod:`._native_call.c` (a
C extension of about 150 lines, with no kinematics in it) does those checks and the
allocation in C and calls the Numba kernels' C entry points
(:func:`._compiled_kernels.entry_points`): the same compiled code, so the same numbers as the
Numba call path (tested bit for bit), at about a quarter of the call's cost.

- Built the first time the compiled kinematics are used in a process where it is not on disk
  yet: about half a second of the system's C compiler (``CC``, else ``cc`` / ``gcc``) against
  this Python's and NumPy's headers, in a background thread; cached by the hash of the source,
  the Python and NumPy versions in :func:`ros2_ik.gpu.hostrun.cache_dir` (so built once per
  machine). Until it is loaded, and wherever there is no compiler or no ``Python.h``, the Numba
  call path answers (:func:`.compiled.small_call`).
- ``ROS2_IK_NATIVE=0`` turns it off; ``ROS2_IK_NATIVE=wait`` builds in the caller.
- Used only for NumPy float64 C-contiguous q of shape (nq,) or (B, nq) with B below
  :data:`.compiled.PARALLEL_MIN`: everything else takes the general path, with its checks and
  errors (a value the kernels refuse also returns there, which raises the reference's error).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import numpy as np

__all__ = ["mode", "module", "build", "status"]

SOURCE = Path(__file__).with_name("_native_call.c")
NAME = "_ros2_ik_native"
CFLAGS = ("-O2", "-shared", "-fPIC", "-std=c99", "-Wall")

_log = logging.getLogger("ros2_ik.native")
_lock = threading.Lock()
_module = None     # the loaded extension
_failed: str | None = None  # why there is none (set once: not retried in this process)
_thread: threading.Thread | None = None


def mode() -> str:
    """"0" (off), "wait" (build in the caller) or "background" (the default)."""
    v = os.environ.get("ROS2_IK_NATIVE", "").strip().lower()
    if v in ("0", "off", "false", "no"):
        return "0"
    return "wait" if v == "wait" else "background"


def compiler() -> str | None:
    """The C compiler to use, or None."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _library_path() -> Path:
    from ..gpu.hostrun import cache_dir  # noqa: PLC0415 - no CuPy there; the shared cache

    h = hashlib.sha256()
    for part in (SOURCE.read_bytes(), sys.version.encode(), np.__version__.encode(),
                 sysconfig.get_paths()["include"].encode(), " ".join(CFLAGS).encode()):
        h.update(part)
        h.update(b"\0")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return cache_dir() / f"r2ik_native_{h.hexdigest()[:20]}{suffix}"


def build() -> Path:
    """Compile the extension (once per machine: cached on disk) and return its path; raises
    RuntimeError saying what is missing when it cannot be built here."""
    lib = _library_path()
    if lib.exists():
        return lib
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or CC) found")
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").exists():
        raise RuntimeError(f"no Python.h in {include} (install this Python's development "
                           "headers, e.g. python3-dev)")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        out = Path(tmp) / lib.name
        r = subprocess.run([cc, *CFLAGS, f"-I{include}", f"-I{np.get_include()}", str(SOURCE),
                            "-o", str(out)], capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"{cc} failed on {SOURCE.name}:\n{r.stderr[-2000:]}")
        os.replace(out, lib)  # atomic: another process may be building it too
    return lib


def _load() -> None:
    """Build (if needed) and import the extension, and make the kernels' C entry points; on
    failure remember why (the Numba call path keeps answering)."""
    global _module, _failed
    try:
        from . import _compiled_kernels as kernels  # noqa: PLC0415 - Numba: not at import

        lib = build()
        spec = importlib.util.spec_from_file_location(NAME, lib)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        frames_c, jacobians_c = kernels.entry_points()
        mod.addresses = (frames_c.address, jacobians_c.address)
        _module = mod
    except Exception as exc:  # noqa: BLE001 - any failure means "no C call path"
        _failed = f"{type(exc).__name__}: {exc}"
        _log.info("the C call path of fk_frames/jacobian is off (%s); the Numba call path "
                  "answers", _failed)


def _load_once() -> None:
    with _lock:
        if _module is None and _failed is None:
            _load()


def module(wait: bool | None = None):
    """The loaded extension (``make``, ``call``, ``addresses``), or None while it is not (yet)
    there. The first call starts its build and load: in a background thread, or here when
    ``wait`` (default: ``ROS2_IK_NATIVE=wait``)."""
    global _thread
    if _module is not None or _failed is not None:
        return _module
    m = mode()
    if m == "0":
        return None
    if wait or (wait is None and m == "wait"):
        _load_once()
        return _module
    with _lock:
        if _thread is None and _module is None and _failed is None:
            _thread = threading.Thread(target=_load_once, daemon=True,
                                       name="ros2_ik-native-build")
            _thread.start()
    return None


def status() -> str:
    """One line for a benchmark's banner or a diagnostic: loaded, off, or why not."""
    if _module is not None:
        return "C call path loaded"
    if mode() == "0":
        return "C call path off (ROS2_IK_NATIVE=0)"
    return f"C call path not loaded ({_failed})" if _failed else "C call path not loaded yet"
