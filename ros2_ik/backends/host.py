"""The host backend: the generated source built with g++, loaded and called with ctypes.

- Build: :mod:`.build` compiles a generated host source once per machine, caches and loads it
  (its names are re-exported here: :func:`compile_host`, :func:`available`, ...).
- :class:`HostSolver`: the solve of one model and tip set. A call checks, solves, selects and
  verifies a slice of problems in one C call (``r2ik_solve_host``); a batch is cut into slices
  solved on a pool of worker threads (ctypes lets go of the GIL for the call), each problem's
  seeds in order within one slice, as the speed mode needs. Small calls (a robot's control
  loop: one goal) reuse per-thread buffers whose addresses are known, so a call costs a few
  copies and one foreign call.
- :class:`HostKinematics`: FK and world Jacobians of chosen frames (``r2ik_frames_host``).
- The deadline is the kernel's own (CLOCK_MONOTONIC, the clock of ``time.monotonic_ns``);
  cancellation is a stop flag that :class:`StopFlag`'s poller thread raises when
  ``should_stop()`` says so, read by every row every 4th iteration and before a problem starts.

The generic :class:`HostModule` also runs any kernel of a source row by row (``host_<kernel>``),
which is how the tests run the very CUDA text on the CPU (the CuPy stand-in).
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import os
import threading
import time

import numpy as np

from ..model import Model
from . import interface
from .build import (BuildScope, HostModule, available, building, builds_under_way, cache_dir,
                    cancel_background_builds, compile_host, in_background,
                    set_background_builds, waiting_for_builds)
from .codegen import Chain, frames_source, solve_source

__all__ = ["available", "compile_host", "HostModule", "cache_dir", "HostSolver", "OneGoal",
           "TermData", "ARG", "SMALL", "WorkerPool",
           "HostKinematics", "StopFlag", "threads", "BuildScope", "set_background_builds",
           "waiting_for_builds", "in_background", "building", "builds_under_way",
           "cancel_background_builds"]



# ------------------------------------------------------------------ threads and cancel

def threads() -> int:
    """Worker threads of a batch: ``$ROS2_IK_THREADS``, else the CPUs this process may use."""
    v = os.environ.get("ROS2_IK_THREADS", "").strip()
    if v.isdigit() and int(v) > 0:
        return int(v)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class WorkerPool:
    """A process-wide pool of worker threads named ``prefix``, made anew (the old one shut
    down once its work is done) when a call asks for another size."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._pool: cf.ThreadPoolExecutor | None = None
        self._size = 0
        self._lock = threading.Lock()

    def get(self, n: int) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._size != n:
                old = self._pool
                self._pool = cf.ThreadPoolExecutor(n, thread_name_prefix=self.prefix)
                self._size = n
                if old is not None:
                    old.shutdown(wait=False)
            return self._pool


_pool = WorkerPool("ros2_ik-host")


POLL_S = 0.001  # how often should_stop() is polled while a kernel runs [s]


class _Poller:
    """One long-lived thread that polls the ``should_stop`` of every call running (they release
    the GIL) every :data:`POLL_S` and raises the call's stop flag: a cancel is seen within a few
    milliseconds at any batch size, and a solve pays no thread start."""

    def __init__(self):
        self._jobs: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None

    def add(self, flag, should_stop) -> None:
        with self._lock:
            self._jobs[id(flag)] = (flag, should_stop)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ros2_ik-cancel",
                                                daemon=True)
                self._thread.start()
            self._wake.set()

    def remove(self, flag) -> None:
        with self._lock:
            self._jobs.pop(id(flag), None)
            if not self._jobs:
                self._wake.clear()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(POLL_S)
            with self._lock:
                jobs = list(self._jobs.values())
            for flag, should_stop in jobs:
                try:
                    hit = bool(should_stop())
                except Exception:  # noqa: BLE001 - a failing callback counts as a stop request
                    hit = True
                if hit:
                    flag[0] = 1


_POLLER = _Poller()


class StopFlag:
    """The kernels' stop flag (an int32 whose address the kernels read): set at once when
    ``should_stop()`` already says so, else polled every :data:`POLL_S` while the block runs."""

    __slots__ = ("should_stop", "flag", "address")

    def __init__(self):
        self.flag = np.zeros(1, dtype=np.int32)
        self.address = self.flag.ctypes.data
        self.should_stop = None

    def arm(self, should_stop):
        self.flag[0] = 0
        self.should_stop = should_stop
        return self

    def __enter__(self):
        if self.should_stop is not None:
            if self.should_stop():
                self.flag[0] = 1
            else:
                _POLLER.add(self.flag, self.should_stop)
        return self

    def __exit__(self, *exc):
        if self.should_stop is not None:
            _POLLER.remove(self.flag)
        return False

    @property
    def seen(self) -> bool:
        return bool(self.flag[0])


# ------------------------------------------------------------------ solve

ARG = {name: i for i, (name, _, _) in enumerate(interface.SOLVE_ARGS)}
#: problems per call of the driver for a batch: slices balance the threads (an unreachable
#: goal costs about 20x a reachable one) and bound each call's work memory
SLICES_PER_THREAD = 4
MAX_SLICE_ROWS = 1 << 16
#: problems of a call that reuses the per-thread buffers (no allocation, known addresses)
SMALL = 16


def _address(a: np.ndarray) -> int:
    return a.ctypes.data


class TermData:
    """The terms' data of one solve, packed as the kernels' data struct (``r2ik_data``,
    :func:`ros2_ik.backends.interface.data_declaration`): ``values`` maps each member name
    (``<term>_<field>``) to a float64 array: for a field of ``width`` values a problem, (P,
    width)-shaped (stride ``width``) or one set of ``width`` (stride 0); for a shared field
    ``(array, n)``. The arrays are kept alive with the record."""

    def __init__(self, emitters, values: dict, P: int):
        self.record = np.zeros(1, dtype=interface.data_dtype(emitters))
        self.keep = []
        for em in emitters:
            for f in em.fields():
                name = f"{em.name}_{f.name}"
                v = values[name]
                if f.width is None:
                    arr, n = v
                    arr = np.ascontiguousarray(arr, dtype=np.float64)
                    stride = 0
                else:
                    arr, n = np.ascontiguousarray(v, dtype=np.float64), 0
                    if arr.size not in (f.width, P * f.width):
                        raise ValueError(f"{name}: {arr.size} values for {P} problems of "
                                         f"{f.width}")
                    stride = 0 if arr.size == f.width else f.width
                self.keep.append(arr)
                self.record[name] = _address(arr) if arr.size else _address(_EMPTY)
                self.record[name + "_stride"] = stride
                self.record[name + "_n"] = n
        self.address = _address(self.record)


_EMPTY = np.zeros(16)  # (a valid address for an empty array)


class OneGoal:
    """One thread's buffers for small calls of one solver (up to :data:`SMALL` problems) and
    the argument record pointing into them: the terms' per-problem fields in ``fields``
    (``<term>_<field>`` -> (SMALL, width)), the seeds, the output; :meth:`call` runs the driver
    on them. A caller that writes the buffers itself (``ChainSolver``'s one goal) sets
    ``words[ARG["clock0"]]`` and calls :meth:`call`."""

    def __init__(self, solver: "HostSolver"):
        self.solver = solver
        nq = solver.nq
        self.seeds = np.zeros((SMALL, nq))
        self.out = np.zeros((SMALL, nq + len(solver.out_fields)))
        self.stop = StopFlag()
        self.fields = {}
        self.shared = {}
        self.data = np.zeros(1, dtype=interface.data_dtype(solver.emitters))
        for em in solver.emitters:
            for f in em.fields():
                name = f"{em.name}_{f.name}"
                if f.width is None:
                    self.shared[name] = None
                    self.data[name] = _address(_EMPTY)
                    continue
                buf = self.fields[name] = np.zeros((SMALL, f.width))
                self.data[name] = _address(buf)
                self.data[name + "_stride"] = f.width
        self.rec = np.zeros(1, dtype=interface.SOLVE_DTYPE)
        self.words = self.rec.view(np.int64)
        self.address = self.rec.ctypes.data
        w = self.words
        w[ARG["K"]] = solver.K
        w[ARG["rnd"]] = _address(solver.rnd)
        w[ARG["opt"]] = _address(solver.options)
        w[ARG["out"]] = _address(self.out)
        w[ARG["stop"]] = self.stop.address
        w[ARG["data"]] = _address(self.data)
        w[ARG["solver"]] = solver.solver_index
        w[ARG["seeds"]] = _address(self.seeds)
        w[ARG["p_begin"]] = 0
        w[ARG["p_end"]] = 1
        w[ARG["budget_ns"]] = solver.budget_ns
        self.seed0 = self.seeds[0]

    def set_field(self, name: str, value, P: int) -> None:
        """Member ``name``'s values for ``P`` problems, or one set for all (stride 0)."""
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        buf = self.fields[name]
        if v.size == buf.shape[1]:
            buf[0] = v
            self.data[name + "_stride"] = 0
        else:
            buf[:P] = v.reshape(P, buf.shape[1])
            self.data[name + "_stride"] = buf.shape[1]

    def set_shared(self, name: str, arr: np.ndarray, n: int) -> None:
        self.shared[name] = arr  # (kept alive here)
        self.data[name] = _address(arr) if arr.size else _address(_EMPTY)
        self.data[name + "_n"] = n

    def call(self) -> None:
        """The driver on these buffers (``p_end``, the clock and the budget as set)."""
        self.solver.driver(self.address)


class HostSolver:
    """The compiled host solve of one model, tip set and term list, for one :class:`IKConfig`.

    ``solve(data, seeds, ...)`` takes the terms' data (``<term>_<field>`` -> float64 arrays,
    :class:`TermData`) and the seeds (nq,) or (P, nq), already checked for shape; it returns
    the driver's output (P, nq + len(out_fields)) and whether a stop was seen."""

    def __init__(self, model: Model, chain: Chain, cfg, rnd: np.ndarray, solver: str = "dls"):
        self.model = model
        self.chain = chain
        self.module = compile_host(solve_source(chain, "float64", host=True))
        self._fn = self.module.lib.r2ik_solve_host
        self._fn.argtypes = [ctypes.c_void_p]
        self._fn.restype = ctypes.c_int
        used = getattr(self.module.lib, "r2ik_lanes_used", None)
        #: rows solved side by side on this CPU (0: one at a time)
        self.lanes = int(used()) if used is not None else 0
        self.K = int(cfg.num_seeds)
        self.nq = model.nq
        self.T = chain.T
        from .terms import emitters  # noqa: PLC0415

        #: the terms' emitters (their data members and outputs)
        self.emitters = emitters(chain)
        self.out_fields = interface.out_fields(self.emitters)
        self.options = interface.options_record(cfg)
        self.rnd = np.ascontiguousarray(rnd if self.K > 1 else np.zeros((1, model.nq)),
                                        dtype=np.float64)
        self.budget_ns = -1 if cfg.timeout is None else int(cfg.timeout * 1e9)
        self._scene_kept = ()
        self.solver_index = interface.SOLVERS_C.index(solver)
        self._local = threading.local()

    def driver(self, address: int) -> None:
        """``r2ik_solve_host`` on the argument record at ``address``."""
        self._fn(address)

    def scene(self, collision, world):
        """The :class:`~ros2_ik.backends.terms.collision_scene.PackedScene` of a collision model
        and a world (None: no obstacles) for this solver's kernels (the last two kept: a
        solve's cover and its fine model; worlds and collision models are immutable)."""
        kept = self._scene_kept
        for c, w, sc in kept:
            if c is collision and w is world:
                return sc
        from .terms.collision_scene import pack_scene  # noqa: PLC0415

        sc = pack_scene(self.chain.coll, collision, world)
        self._scene_kept = ((collision, world, sc),) + kept[:1]
        return sc

    def one_goal(self) -> OneGoal:
        """This thread's small-call buffers (made on first use)."""
        s = getattr(self._local, "small", None)
        if s is None:
            s = self._local.small = OneGoal(self)
        return s

    def solve(self, data: dict, seeds, *, should_stop=None, budget_ns: int = -1,
              clock0: int | None = None):
        """(out (P, nq + F), stop seen). ``budget_ns`` from ``clock0`` (``time.monotonic_ns()``
        at the call; default now); < 0: no deadline. ``data``: every term's data (a shared
        field as ``(array, n)``: the collision term's packed scene, :meth:`scene`)."""
        P = int(data["_P"])
        clock0 = time.monotonic_ns() if clock0 is None else clock0
        if P <= SMALL:
            return self._solve_small(data, seeds, should_stop, budget_ns, clock0, P)
        return self._solve_batch(data, seeds, should_stop, budget_ns, clock0, P)

    def _solve_small(self, data, seeds, should_stop, budget_ns, clock0, P):
        s = self.one_goal()
        for name in s.fields:
            s.set_field(name, data[name], P)
        for name in s.shared:
            arr, n = data[name]
            s.set_shared(name, arr, n)
        w = s.words
        if seeds.ndim == 1:
            s.seeds[0] = seeds
            w[ARG["seed_stride"]] = 0
        else:
            s.seeds[:P] = seeds
            w[ARG["seed_stride"]] = self.nq
        w[ARG["p_end"]] = P
        w[ARG["clock0"]] = clock0
        w[ARG["budget_ns"]] = budget_ns
        with s.stop.arm(should_stop):
            s.call()
        return s.out[:P].copy(), s.stop.seen

    def _solve_batch(self, data, seeds, should_stop, budget_ns, clock0, P):
        out = np.empty((P, self.nq + len(self.out_fields)))
        packed = TermData(self.emitters, data, P)
        sd = np.ascontiguousarray(seeds, dtype=np.float64)
        stop = StopFlag().arm(should_stop)
        rec = np.zeros(1, dtype=interface.SOLVE_DTYPE)
        w = rec.view(np.int64)
        w[ARG["K"]] = self.K
        w[ARG["solver"]] = self.solver_index
        w[ARG["seeds"]] = _address(sd)
        w[ARG["seed_stride"]] = 0 if sd.ndim == 1 else self.nq
        w[ARG["rnd"]] = _address(self.rnd)
        w[ARG["opt"]] = _address(self.options)
        w[ARG["clock0"]] = clock0
        w[ARG["budget_ns"]] = budget_ns
        w[ARG["stop"]] = stop.address
        w[ARG["out"]] = _address(out)
        w[ARG["data"]] = packed.address
        n = threads()
        per = max(1, min(-(-P // (n * SLICES_PER_THREAD)), MAX_SLICE_ROWS // self.K))
        cuts = list(range(0, P, per)) + [P]
        recs = []
        for a, b in zip(cuts[:-1], cuts[1:]):
            r = rec.copy()
            rw = r.view(np.int64)
            rw[ARG["p_begin"]], rw[ARG["p_end"]] = a, b
            recs.append(r)
        with stop:
            if n <= 1 or len(recs) == 1:
                for r in recs:
                    self._fn(_address(r))
            else:
                try:
                    pool = _pool.get(n)
                    futures = [pool.submit(self._fn, _address(r)) for r in recs]
                except RuntimeError:  # the interpreter is shutting down: no more threads
                    futures = None
                if futures is None:
                    for r in recs:
                        self._fn(_address(r))
                else:
                    for f in futures:
                        f.result()
        return out, stop.seen


# ------------------------------------------------------------------ frames

class HostKinematics:
    """FK (B, F, 4, 4) and world Jacobians (B, F, 6, nv_active) of the frames of ``chain``
    (its tips) by the generated frames kernels; q a C-contiguous float64 (B, nq) array."""

    _FA = {name: i for i, (name, _, _) in enumerate(interface.FRAMES_ARGS)}

    def __init__(self, model: Model, chain: Chain):
        self.model = model
        self.F = chain.T
        self.module = compile_host(frames_source(chain, "float64", host=True))
        self._fn = self.module.lib.r2ik_frames_host
        self._fn.argtypes = [ctypes.c_void_p]
        self._fn.restype = ctypes.c_int
        #: the driver's address (for :mod:`.pycall`'s extension)
        self.address = ctypes.cast(self._fn, ctypes.c_void_p).value
        self._local = threading.local()
        self.shape = {0: (self.F, 4, 4), 1: (self.F, 6, model.nv_active)}

    def _buffers(self):
        b = getattr(self._local, "b", None)
        if b is None:
            rec = np.zeros(1, dtype=interface.FRAMES_DTYPE)
            q = np.zeros((SMALL, self.model.nq))
            outs = {k: np.zeros((SMALL,) + v) for k, v in self.shape.items()}
            b = self._local.b = (rec, rec.view(np.int64), rec.view(np.float64), q,
                                 _address(q), outs, {k: _address(v) for k, v in outs.items()},
                                 rec.ctypes.data)
        return b

    def __call__(self, q: np.ndarray, jacobian: bool, max_value: float):
        """The poses or Jacobians, or None when q has a value the check refuses (NaN, inf,
        beyond ``max_value``; the caller raises the reference's error)."""
        B = q.shape[0]
        k = int(bool(jacobian))
        rec, words, floats, qb, qa, outs, oa, addr = self._buffers()
        FA = self._FA
        floats[FA["max_value"]] = max_value
        words[FA["jacobian"]] = k
        words[FA["B"]] = B
        if B <= SMALL:
            qb[:B] = q
            words[FA["q"]] = qa
            words[FA["out"]] = oa[k]
            if self._fn(addr):
                return None
            return outs[k][:B].copy()
        out = np.empty((B,) + self.shape[k])
        q = np.ascontiguousarray(q, dtype=np.float64)
        words[FA["q"]] = _address(q)
        words[FA["out"]] = _address(out)
        if self._fn(addr):
            return None
        return out
