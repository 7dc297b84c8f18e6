"""Run generated kernel source on the CPU: g++ through the host shim, called with ctypes.

The generated kernels never make threads cooperate, so a loop over the rows in row order (what
``host_<kernel>`` does) computes exactly what a launch computes; in speed mode a problem's
seeds then run one after another, as in the Numba path. This is how CI, with no GPU, runs the
very text the GPU compiles, and how the CuPy stand-in in the tests executes kernels.

Arguments are checked against the kernel's C parameter list: an array must be C-contiguous with
the dtype of its pointer type (``S`` is the source's scalar), a scalar is converted to the C type.
Compiled libraries are cached by source hash under :func:`cache_dir`.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, ShapeError
from .codegen import source_hash

__all__ = ["available", "compile_host", "HostModule", "cache_dir", "CXX_FLAGS"]

# -ffp-contract=off: no fused multiply-add, as Numba's (and NumPy's) float64 arithmetic
CXX_FLAGS = ("-O2", "-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC")

_PTR = {"double": np.float64, "float": np.float32, "unsigned char": np.uint8, "int": np.int32,
        "unsigned long long": np.uint64, "long long": np.int64}
_SCALAR = {"double": ctypes.c_double, "float": ctypes.c_float, "int": ctypes.c_int,
           "long long": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong}


def cache_dir() -> Path:
    d = os.environ.get("ROS2_IK_KERNEL_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "ros2_ik" / "host-kernels"


def available() -> str | None:
    """The C++ compiler to use, or None."""
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


_lock = threading.Lock()
_loaded: dict[str, "HostModule"] = {}


def _parse_params(src: str, name: str):
    m = re.search(r"R2IK_KERNEL " + name + r"\(([^)]*)\)", src)
    if m is None:
        raise KeyError(f"no kernel {name!r} in the source")
    out = []
    for p in m.group(1).split(","):
        p = p.replace("R2IK_RESTRICT", "").replace("const", "").replace("volatile", "").strip()
        ptr = "*" in p
        ctype = re.sub(r"\s+", " ", p.replace("*", " ").rsplit(" ", 1)[0].strip())
        out.append((ctype, ptr, p.rsplit(" ", 1)[-1].strip("* ")))
    return out


class HostModule:
    """The compiled host library of one generated source; ``module.get_function(name)``."""

    def __init__(self, src: str, lib_path: Path):
        self.src = src
        self.lib = ctypes.CDLL(str(lib_path))
        m = re.search(r"^typedef (float|double) S;", src, re.M)
        self.scalar = m.group(1) if m else "double"

    def get_function(self, name: str):
        params = _parse_params(self.src, name)
        fn = getattr(self.lib, f"host_{name}")
        fn.restype = None
        scalar = self.scalar

        def call(rows: int, *args):
            if len(args) != len(params):
                raise TypeError(f"{name} takes {len(params)} arguments, got {len(args)}")
            cargs = [ctypes.c_longlong(int(rows))]
            for (ctype, ptr, pname), a in zip(params, args):
                ctype = scalar if ctype == "S" else ctype
                if ptr:
                    want = _PTR[ctype]
                    if isinstance(a, int):  # a raw address (mapped memory)
                        cargs.append(ctypes.c_void_p(a))
                        continue
                    if not isinstance(a, np.ndarray) or a.dtype != want or \
                            not a.flags.c_contiguous:
                        raise ShapeError(f"{name}: argument {pname} must be a C-contiguous "
                                         f"{np.dtype(want).name} array, got "
                                         f"{type(a).__name__} {getattr(a, 'dtype', '')}")
                    cargs.append(ctypes.c_void_p(a.ctypes.data))
                else:
                    cargs.append(_SCALAR[ctype](a.item() if hasattr(a, "item") else a))
            fn(*cargs)

        call.params = params
        return call


def compile_host(src: str) -> HostModule:
    """Compile (once per source, cached on disk) and load a host-mode generated source."""
    key = source_hash(src)
    with _lock:
        hit = _loaded.get(key)
        if hit is not None:
            return hit
        cxx = available()
        if cxx is None:
            raise BackendUnavailableError("no C++ compiler (g++) found to run generated kernels "
                                          "on the host; install g++ or set CXX")
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        lib = d / f"r2ik_{key}.so"
        if not lib.exists():
            with tempfile.TemporaryDirectory(dir=d) as tmp:
                cu = Path(tmp) / "k.cpp"
                cu.write_text(src)
                out = Path(tmp) / "k.so"
                r = subprocess.run([cxx, *CXX_FLAGS, "-x", "c++", str(cu), "-o", str(out)],
                                   capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    raise RuntimeError(f"g++ failed on generated source:\n{r.stderr[-4000:]}")
                os.replace(out, lib)
        mod = HostModule(src, lib)
        _loaded[key] = mod
        return mod
