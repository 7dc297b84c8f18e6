"""Compile generated source to an sm_90 cubin without a GPU: NVRTC (the compiler CuPy uses at
run time, through its C library) when it can be found, else ``nvcc -cubin``. Used by the test
suite (does every generated kernel build for the H100/H200?) and by ``bench/bench_gpu.py
--report`` (registers, stack and spills from the ptxas report)."""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["compile_cubin", "tools", "KernelReport", "parse_ptxas", "kernel_report"]


def _find_nvrtc() -> str | None:
    cands = []
    for base in sys.path:
        cands += glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
        cands += glob.glob(os.path.join(base, "nvidia", "cu*", "lib", "libnvrtc.so*"))
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            cands += glob.glob(os.path.join(root, "lib64", "libnvrtc.so*"))
            cands += glob.glob(os.path.join(root, "targets", "*", "lib", "libnvrtc.so*"))
    cands = [c for c in cands if "builtins" not in c and "alt" not in os.path.basename(c)]
    return sorted(cands)[0] if cands else None


def tools() -> dict:
    """What can compile here: {"nvrtc": path or None, "nvcc": path or None}."""
    return {"nvrtc": _find_nvrtc(), "nvcc": shutil.which("nvcc")}


@dataclass
class KernelReport:
    name: str
    registers: int
    stack: int
    spill_stores: int
    spill_loads: int


def parse_ptxas(log: str) -> list[KernelReport]:
    """Per kernel: registers, stack frame and spill bytes from a ``ptxas -v`` report."""
    out = []
    name = None
    stack = st = ld = 0
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                      r"loads", line)
        if m:
            stack, st, ld = (int(x) for x in m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out.append(KernelReport(name, int(m.group(1)), stack, st, ld))
            name = None
    return out


def _nvrtc_compile(lib_path: str, src: str, arch: str, options):
    for b in sorted(glob.glob(os.path.join(os.path.dirname(lib_path), "libnvrtc-builtins.so*"))):
        if ".alt." not in b:  # NVRTC opens its builtins by name: load them from beside it
            ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
            break
    lib = ctypes.CDLL(lib_path)
    prog = ctypes.c_void_p()
    check = _checker(lib)
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"r2ik.cu", 0, None, None),
          "create")
    opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v", *options]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, buf)
    log = buf.value.decode(errors="replace")
    if rc != 0:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        raise RuntimeError(f"NVRTC failed ({rc}):\n{log[-4000:]}")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    check(lib.nvrtcGetCUBIN(prog, cubin), "get cubin")
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw, log


def _checker(lib):
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"NVRTC {what}: {lib.nvrtcGetErrorString(rc).decode()}")
    return check


def compile_cubin(src: str, arch: str = "sm_90", *, tool: str = "auto",
                  options=("--std=c++17",)):
    """(cubin bytes, compiler log, tool used). ``tool``: "nvrtc", "nvcc" or "auto" (NVRTC
    when found, else nvcc). Raises RuntimeError with the log when the source does not build."""
    t = tools()
    if tool == "auto":
        tool = "nvrtc" if t["nvrtc"] else "nvcc"
    if tool == "nvrtc":
        if not t["nvrtc"]:
            raise FileNotFoundError("NVRTC (libnvrtc) not found")
        cubin, log = _nvrtc_compile(t["nvrtc"], src, arch, options)
        return cubin, log, "nvrtc"
    if not t["nvcc"]:
        raise FileNotFoundError("nvcc not found")
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / "r2ik.cu"
        cu.write_text(src)
        out = Path(d) / "r2ik.cubin"
        r = subprocess.run([t["nvcc"], "-cubin", f"-arch={arch}", "-Xptxas", "-v", *options,
                            "-o", str(out), str(cu)], capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed:\n{r.stderr[-4000:]}")
        return out.read_bytes(), r.stderr + r.stdout, "nvcc"


def kernel_report(src: str, arch: str = "sm_90") -> tuple[list[KernelReport], str]:
    """Registers, stack and spills per kernel of ``src`` from ptxas's ``-v`` report, and the tool
    that built it: nvcc where installed, else NVRTC. On the lent H100 machine (CUDA 13) NVRTC's
    program log came back without the ptxas report in 2 of 3 runs, nvcc's never did."""
    tool = "nvcc" if tools()["nvcc"] else "nvrtc"
    _, log, tool = compile_cubin(src, arch, tool=tool)
    return parse_ptxas(log), tool
