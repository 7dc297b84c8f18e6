"""Building the generated host sources: g++ once per source and machine, the library cached
on disk by the source's hash (:func:`cache_dir`: ``$ROS2_IK_KERNEL_CACHE``, default
``~/.cache/ros2_ik/kernels``; ``scripts/setup.sh`` fills it for the bundled robots) and loaded
(:class:`HostModule`). A robot seen for the first time costs one build (2-7 s of g++ on this
project's 2-core machine); afterwards loading takes milliseconds.

A build runs once however many threads ask for it, without a lock held while g++ runs; one that
failed is not tried again. The library's calls wait for their builds (the same answer from the
first call on); a thread that must not wait (a node's executor and request handlers:
:func:`waiting_for_builds`) gets :class:`~ros2_ik.errors.KernelsBuildingError` while the build
runs in the background, one at a time, and the prepared solvers answer with the reference
meanwhile. :class:`BuildScope` ends the builds of a job (a node shutting down).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, KernelsBuildingError, ShapeError
from .codegen import source_hash

__all__ = ["available", "compile_host", "HostModule", "cache_dir", "CXX_FLAGS", "BuildScope",
           "set_background_builds", "waiting_for_builds", "in_background", "building",
           "builds_under_way", "cancel_background_builds", "run_compiler"]

# -ffp-contract=off: no fused multiply-add, so that the scalar and vector renderings (and the
# reference's float64 arithmetic, step for step) round alike
CXX_FLAGS = ("-O2", "-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC")

_PTR = {"double": np.float64, "float": np.float32, "unsigned char": np.uint8, "int": np.int32,
        "unsigned long long": np.uint64, "long long": np.int64, "r2ik_options": np.uint8,
        "r2ik_data": np.uint8}
_SCALAR = {"double": ctypes.c_double, "float": ctypes.c_float, "int": ctypes.c_int,
           "long long": ctypes.c_longlong, "unsigned long long": ctypes.c_ulonglong}


def cache_dir() -> Path:
    """Where built kernels are kept: ``$ROS2_IK_KERNEL_CACHE``, else
    ``~/.cache/ros2_ik/kernels``."""
    d = os.environ.get("ROS2_IK_KERNEL_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "ros2_ik" / "kernels"


def available() -> str | None:
    """The C++ compiler to use (``$CXX``, else ``g++`` or ``c++`` on PATH), or None."""
    cxx = os.environ.get("CXX")
    if cxx is not None:
        return shutil.which(cxx) or (cxx if os.path.isfile(cxx) else None)
    return shutil.which("g++") or shutil.which("c++")


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
    """The compiled host library of one generated source: ``module.lib`` (its C functions),
    ``module.get_function(name)`` (a kernel run row by row, arguments checked against its C
    parameter list)."""

    def __init__(self, src: str, lib_path: Path):
        self.src = src
        self.path = lib_path
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
                    if isinstance(a, int):  # a raw address (mapped memory, or null)
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
    """Compile (once per source and machine, cached on disk) and load a generated host source.
    Raises :class:`BackendUnavailableError` without a C++ compiler, RuntimeError with the
    compiler's message when the source does not build, and, in a thread that does not wait
    for builds (:func:`set_background_builds`), :class:`~ros2_ik.errors.KernelsBuildingError`
    while the source is built in the background. A build under way in another thread is
    waited for, never started twice; no lock is held while g++ runs."""
    key = source_hash(src)
    lib = cache_dir() / f"r2ik_{key}.so"
    with _lock:
        hit = _loaded.get(key)
        if hit is not None:
            return hit
        failed = _failed.get(key)
        if failed is not None:
            raise RuntimeError(failed)
        fut = _building.get(key)
        owner = fut is None and not lib.exists()
        if owner:
            if available() is None:
                raise BackendUnavailableError(
                    "no C++ compiler (g++) found to build the compiled kernels; install g++ "
                    "or set CXX (the reference backend answers meanwhile)")
            fut = _building[key] = cf.Future()
    if fut is not None:
        if in_background():
            if owner:
                _BUILDER.submit(key, lambda: _build(src, key, lib, fut))
            raise KernelsBuildingError(
                f"the compiled kernels of this model are being built in the background (g++, "
                f"seconds; source {key}); the reference backend answers meanwhile", key)
        if owner:
            _build(src, key, lib, fut)
        fut.result()  # (another thread's build: its RuntimeError, if it failed)
    with _lock:
        hit = _loaded.get(key)
        if hit is None:
            hit = _loaded[key] = HostModule(src, lib)
        return hit


_building: dict[str, cf.Future] = {}  # builds under way, by source hash
_failed: dict[str, str] = {}  # sources g++ refused (not retried in this process)
_wait = threading.local()  # .on: this thread's builds run in the background (None: default)
_BACKGROUND = [False]  # the process default (set_background_builds)


def _build(src: str, key: str, lib: Path, fut: cf.Future) -> None:
    """g++ on ``src`` into the cache (in the current :class:`BuildScope`); ``fut`` gets the
    outcome. A build that was cancelled may be tried again; one that failed is not."""
    try:
        d = lib.parent
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            cu = Path(tmp) / "k.cpp"
            cu.write_text(src)
            out = Path(tmp) / "k.so"
            run_compiler([available() or "g++", *CXX_FLAGS, "-x", "c++", str(cu), "-o",
                           str(out)])
            os.replace(out, lib)  # atomic: another process may be building it too
    except BaseException as exc:
        with _lock:
            _building.pop(key, None)
            if isinstance(exc, RuntimeError) and "cancelled" not in str(exc):
                _failed[key] = str(exc)
        fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        if not isinstance(exc, Exception):
            raise
        return
    with _lock:
        _building.pop(key, None)
    fut.set_result(lib)


def set_background_builds(on: bool) -> None:
    """The process's default: whether a compiled build waits for g++ (False, the library's
    contract: the same answer from the first call on) or runs in the background while the
    reference answers (True: :class:`~ros2_ik.errors.KernelsBuildingError`, which the prepared
    solvers turn into the reference backend until the build is done; the node's choice, whose
    answers name their backend). :func:`waiting_for_builds` overrides it for a thread."""
    _BACKGROUND[0] = bool(on)


@contextlib.contextmanager
def waiting_for_builds(wait: bool = True):
    """In this block, this thread's builds wait for g++ (``wait``) or run in the background
    (see :func:`set_background_builds`)."""
    before = getattr(_wait, "on", None)
    _wait.on = not wait
    try:
        yield
    finally:
        _wait.on = before


def in_background() -> bool:
    """Whether this thread's builds run in the background (see :func:`set_background_builds`)."""
    on = getattr(_wait, "on", None)
    return _BACKGROUND[0] if on is None else bool(on)


def building(key: str) -> bool:
    """Whether the build of source ``key`` (:class:`~ros2_ik.errors.KernelsBuildingError`'s) is
    still under way."""
    with _lock:
        return key in _building


def builds_under_way() -> int:
    """How many kernel builds run or wait in this process."""
    with _lock:
        return len(_building)


class _Builder:
    """One daemon thread that runs the background builds one at a time (g++ is a core's work;
    several at once would slow the answers that run meanwhile), in its own
    :class:`BuildScope` (:func:`cancel_background_builds`)."""

    def __init__(self):
        self._jobs: list = []
        self._cv = threading.Condition()
        self._thread = None
        self.scope = BuildScope()

    def submit(self, key: str, job) -> None:
        with self._cv:
            self._jobs.append((key, job))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                 name="ros2_ik-build")
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._jobs:
                    self._cv.wait()
                _, job = self._jobs.pop(0)
                scope = self.scope
            try:
                with scope:
                    job()
            except Exception:  # noqa: BLE001 - the outcome is the build's future's
                pass

    def cancel(self) -> None:
        with self._cv:
            scope, self.scope = self.scope, BuildScope()
        scope.cancel()


def cancel_background_builds() -> None:
    """End the background builds running and waiting (a node shutting down); a later call
    that needs one starts it again."""
    _BUILDER.cancel()


class BuildScope:
    """The kernel builds of one job (a node preparing a model): those started in a thread
    while the scope is entered (``with scope:``) can be ended from any thread by
    :meth:`cancel`, which also refuses the scope's later builds (each raises RuntimeError, and
    the prepared solver being built answers with the reference)."""

    def __init__(self):
        self.cancelled = False
        self._procs: set = set()
        self._lock = threading.Lock()

    def __enter__(self):
        _scope.current = self
        return self

    def __exit__(self, *exc):
        _scope.current = None
        return False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            running = list(self._procs)
        for p in running:
            try:
                p.kill()
            except OSError:
                pass

    def _start(self, cmd):
        with self._lock:
            if self.cancelled:
                raise RuntimeError("the kernel build was cancelled")
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            self._procs.add(p)
        return p

    def _end(self, p) -> None:
        with self._lock:
            self._procs.discard(p)


_scope = threading.local()
_BUILDER = _Builder()


def run_compiler(cmd) -> None:
    """Run one compiler command (in the current :class:`BuildScope`, if any); RuntimeError
    with its message when it fails or was cancelled."""
    scope = getattr(_scope, "current", None) or BuildScope()
    p = scope._start(cmd)
    try:
        _, err = p.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    finally:
        scope._end(p)
    if p.returncode != 0:
        why = "was cancelled" if scope.cancelled else f"failed:\n{(err or '')[-4000:]}"
        raise RuntimeError(f"g++ on a generated source {why}")
