"""Batched LM rows through the generated kernel text compiled for this CPU (g++).

The fused LM kernel the GPU runs (:func:`ros2_ik.gpu.codegen.solve_source`) is also plain host
C++ (:mod:`ros2_ik.gpu.hostrun`). With the robot baked in as constants it runs the same rows
as the Numba kernel of :class:`.fast.ChainPlan` about 2.5x faster on one core (panda, 32
seeds, `bench/bench_cpu.py`), and in float64 it computes the same rows bit for bit: the same
start rows, the same iterations, the same q (``test_cxx.py``, and ``test_gpu.py``'s agreement
tests on every bundled robot). So :class:`.fast.ChainPlan` hands a large batch to it once its
library exists, and the answers do not depend on which of the two ran.

- The library is built per model and tip set (about 2 s of g++, cached on disk by the hash of
  the source, so a robot is built once per machine) in a background thread the first time a
  batch of at least :data:`MIN_ROWS` rows asks for it; until it is ready, and wherever no C++
  compiler is found, the build failed or :data:`MAX_BUILDS` were made in this process, the
  Numba kernel answers. ``ROS2_IK_CXX=0`` turns it
  off; ``ROS2_IK_CXX=wait`` builds in the caller instead (benchmarks, batch jobs, the tests),
  except in a call with a timeout.
- Rows side by side: on an x86-64 CPU with AVX2 the library solves 4 rows at once, one per
  lane of a vector (:mod:`ros2_ik.gpu.lanes`; the same rows bit for bit, about 1.5-2.5x
  faster per core); elsewhere one at a time. :attr:`HostRows.lanes` says which.
- Threads: the problems are cut into slices solved on a pool of worker threads (ctypes lets go
  of the GIL for the call), each problem's seeds in order within one slice, as the speed mode
  needs; as many threads as Numba uses (``numba.get_num_threads()``).
- The deadline is the kernel's own (CLOCK_MONOTONIC, the clock of ``time.monotonic_ns``), and
  cancellation is the kernels' shared stop flag (:class:`.fast._stop_flag`), read every 4th
  iteration of every row.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import threading
import time
import weakref

import numpy as np

from ..model import Model

__all__ = ["MIN_ROWS", "HostRows", "rows_solver", "build", "enabled"]

MIN_ROWS = 2048         # smaller batches stay on the Numba kernel (already compiled)
MAX_BUILDS = 16         # distinct robot variants built per process: a node fed ever new robot
#                         descriptions (a fuzzer, a misbehaving publisher) stops building (and
#                         loading) libraries there; the same robot loaded again reuses its own
SLICES_PER_THREAD = 4   # unreachable goals cost ~20x reachable ones: small slices balance

_log = logging.getLogger("ros2_ik.cxx")
_lock = threading.Lock()
_by_model: "weakref.WeakKeyDictionary[Model, dict]" = weakref.WeakKeyDictionary()
_pool: cf.ThreadPoolExecutor | None = None
_pool_size = 0
_sources: set[str] = set()     # the hashes of the sources built (and loaded) here
_build_lock = threading.Lock()  # one build at a time


def enabled() -> str:
    """"0" (off), "wait" (build in the caller) or "background" (the default)."""
    v = os.environ.get("ROS2_IK_CXX", "").strip().lower()
    if v in ("0", "off", "false", "no"):
        return "0"
    return "wait" if v == "wait" else "background"


class HostRows:
    """The compiled ``r2ik_lm`` of one model and tip set (float64)."""

    def __init__(self, model: Model, tips: tuple[int, ...], lanes: int | None = None):
        from ..gpu import codegen, hostrun  # noqa: PLC0415 - only when the path is used

        ch = codegen.chain_of(model, tips)
        if ch is None:
            raise ValueError("the generator does not cover these tips")
        src = codegen.solve_source(ch, "float64", host=True, lanes=lanes)
        key = codegen.source_hash(src)
        if key not in _sources and len(_sources) >= MAX_BUILDS:
            raise RuntimeError(f"{MAX_BUILDS} robot variants were built in this process; no "
                               "more are")
        mod = hostrun.compile_host(src)
        self._fn = mod.get_function("r2ik_lm")
        used = getattr(mod.lib, "r2ik_lanes_used", None)
        #: rows solved side by side on this CPU (:mod:`ros2_ik.gpu.lanes`; 0: one at a time)
        self.lanes = int(used()) if used is not None else 0
        _sources.add(key)

    def solve(self, seeds_p, rnd, targets, weights, active_p, K, fp, max_iter, speed,
              deadline_ns, stop):
        """Rows (P*K, problem-major) from the problems' seeds (P, nq) and the restart seeds
        (K-1, nq); returns q (P*K, nq), conv, iters, pe, re, tout like the Numba kernel."""
        P, nq = seeds_p.shape
        N = P * K
        q = np.empty((N, nq))
        conv, tout = np.zeros(N, np.uint8), np.zeros(N, np.uint8)
        iters = np.zeros(N, np.int32)
        pe, re = np.empty(N), np.empty(N)
        done = np.zeros(P, np.int32)
        stop32 = stop.view(np.int32)[:1]   # the low word of the int64 flag (little-endian)
        clock0 = np.array([time.monotonic_ns()], np.uint64)
        budget = -1 if deadline_ns < 0 else max(0, int(deadline_ns) - int(clock0[0]))
        params = np.array([budget, 0], np.int64)
        tg = targets.reshape(P, -1)
        w = weights.reshape(P, -1)
        rnd = rnd if K > 1 else np.zeros((1, nq))

        def run(a, b):
            ra, rb = a * K, b * K
            self._fn(rb - ra, seeds_p[a:b], nq, rnd, tg[a:b], w[a:b], b - a, K, active_p[a:b],
                     max_iter, fp, speed, clock0, params, stop32, done[a:b], q[ra:rb],
                     conv[ra:rb], iters[ra:rb], pe[ra:rb], re[ra:rb], tout[ra:rb])

        threads = _threads()
        if threads <= 1 or P < 2 * threads:
            run(0, P)
        else:
            cuts = np.linspace(0, P, threads * SLICES_PER_THREAD + 1).astype(int)
            jobs = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
            for f in [_get_pool(threads).submit(run, a, b) for a, b in jobs]:
                f.result()
        return q, conv.astype(bool), iters.astype(np.int64), pe, re, tout.astype(bool)


def _threads() -> int:
    try:
        import numba  # noqa: PLC0415

        return max(1, int(numba.get_num_threads()))
    except ImportError:
        return max(1, os.cpu_count() or 1)


def _get_pool(threads: int) -> cf.ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != threads:
            old = _pool
            _pool = cf.ThreadPoolExecutor(threads, thread_name_prefix="ros2_ik-cxx")
            _pool_size = threads
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def rows_solver(model: Model, tips: tuple[int, ...], *, can_wait: bool = True) -> HostRows | None:
    """The compiled rows of ``model`` and ``tips`` when they are ready, else None (and, the
    first time, the build starts in the background, or here with ``ROS2_IK_CXX=wait`` unless
    the caller has a deadline, ``can_wait=False``: a build never eats a timeout)."""
    mode = enabled()
    if mode == "0":
        return None
    state, mine = _claim(model, tips)
    if mine:
        if mode == "wait" and can_wait:
            _build(model, tips)
            state = _state(model, tips)
        else:
            threading.Thread(target=_build, args=(model, tips), daemon=True,
                             name="ros2_ik-cxx-build").start()
            return None
    return state if isinstance(state, HostRows) else None


def build(model: Model, tips) -> bool:
    """Build the compiled rows of ``model`` and ``tips`` (link names or indices) now, in the
    caller, or wait for a build under way (a node's warm-up thread does this after a model is
    loaded, so that the first large batch finds them ready); True when they are ready. Nothing
    is built with ``ROS2_IK_CXX=0``."""
    if enabled() == "0":
        return False
    ids = tuple(int(model.link_index(t)) if isinstance(t, str) else int(t) for t in tips)
    if _claim(model, ids)[1]:
        _build(model, ids)
    while (state := _state(model, ids)) == "building":
        time.sleep(0.05)
    return isinstance(state, HostRows)


def _claim(model: Model, tips: tuple[int, ...]):
    """(state, mine): the state of this model and tip set; ``mine`` when the caller now owns
    its build ("new" becomes "building"; None at once where there is no C++ compiler)."""
    with _lock:
        per_model = _by_model.setdefault(model, {})
        state = per_model.get(tips, "new")
        if state != "new":
            return state, False
        from ..gpu import hostrun  # noqa: PLC0415

        if hostrun.available() is None:
            per_model[tips] = None
            return None, False
        per_model[tips] = "building"
        return "building", True


def _state(model: Model, tips: tuple[int, ...]):
    with _lock:
        return _by_model.get(model, {}).get(tips)


def _build(model: Model, tips: tuple[int, ...]) -> None:
    t0 = time.perf_counter()
    try:
        with _build_lock:
            rows = HostRows(model, tips)
    except Exception as e:  # noqa: BLE001 - any build failure leaves the Numba kernel in charge
        _log.warning("the compiled CPU rows could not be built (%s); the Numba kernel keeps "
                     "solving", str(e).splitlines()[0] if str(e) else type(e).__name__)
        rows = None
    else:
        _log.debug("compiled CPU rows ready in %.1f s", time.perf_counter() - t0)
    with _lock:
        per_model = _by_model.get(model)
        if per_model is not None:
            per_model[tips] = rows
