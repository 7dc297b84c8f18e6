"""Compiled CPU fast path of the LM/DLS solver (Numba), for chains of 1-DOF joints.

Why Numba: a single 7-DOF solve takes a few dozen LM iterations on 6x7 matrices. NumPy spends
microseconds of Python and dispatch overhead per call on such small arrays, so a NumPy loop per
iteration costs tens of milliseconds per solve. Numba compiles the whole solve (FK, Jacobian,
damped normal equations by a small Cholesky, limits, convergence test) into one machine-code loop
per problem, with ``prange`` spreading problems over the cores. It is a pip wheel, needs no
compiler at install time, and its compiled functions are cached on disk.

Scope (anything else falls back to the reference path in :mod:`.dls` automatically):
- goal objectives: one or more :class:`PoseObjective` (incl. position-only / orientation-only /
  per-axis weights), no regularizers, solver ``"dls"``, NumPy arrays;
- every joint between the base and each tip is revolute, continuous, prismatic or fixed
  (mimic and frozen joints included); other joints of the tree do not matter.

Behaviour equals :func:`.dls.lm_solve_rows` (same damping, step acceptance, limits, tolerances,
iteration cap), with one difference in ``speed`` mode: the reference runs a problem's seeds side
by side and keeps the one that converged in the fewest iterations, this path tries them in order
and stops at the first that converges. Both return a converged solution verified by FK; it is not
necessarily the same one. The wall-clock deadline is checked inside the loop (every iteration)
through the monotonic clock; ``should_stop`` is polled every millisecond by one long-lived
poller thread while a kernel runs, and a stop request ends every row at its next iteration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError, ShapeError
from ..validate import as_float_array
from ..kinematics import compiled as compiled_kinematics
from ..kinematics.se3 import pq_to_pose
from ..model import MAX_VALUE, JointType, Model
from . import cxx
from .checks import SEED_LIMIT_SLACK, check_call_options, check_seed_shape, check_seeds
from .common import (INVALID_GOAL_MESSAGE, IKConfig, IKResult, SolveMode, Status,
                     clip_to_limits, limited_revolute, movable_coordinates, restart_seeds,
                     unsolved_message)
from .objectives import OrientationObjective, PoseObjective, PositionObjective, _weights

__all__ = ["plan", "available", "ensure_compiled", "warm_up", "join_warm_up", "is_warm",
           "ChainPlan", "PreparedChain", "solve_single"]

_POSE_TYPES = (PoseObjective, PositionObjective, OrientationObjective)
# problems: below these counts one thread solves / verifies them (no thread hand-off)
PARALLEL_MIN = 4
VERIFY_PARALLEL_MIN = 256
POLL_S = 0.001  # how often should_stop() is polled while a kernel runs [s]


class _Poller:
    """One long-lived thread that polls the ``should_stop`` of every kernel running (they release
    the GIL) every :data:`POLL_S` and raises the kernel's stop flag: cancellation is seen within
    a few milliseconds at any problem size, and a solve pays no thread start."""

    def __init__(self):
        self._jobs: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None

    def add(self, stop, should_stop) -> None:
        with self._lock:
            self._jobs[id(stop)] = (stop, should_stop)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ros2_ik-cancel",
                                                daemon=True)
                self._thread.start()
            self._wake.set()

    def remove(self, stop) -> None:
        with self._lock:
            self._jobs.pop(id(stop), None)
            if not self._jobs:
                self._wake.clear()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(POLL_S)
            with self._lock:
                jobs = list(self._jobs.values())
            for stop, should_stop in jobs:
                try:
                    hit = bool(should_stop())
                except Exception:  # noqa: BLE001 - a failing callback counts as a stop request
                    hit = True
                if hit:
                    stop[0] = 1


_POLLER = _Poller()
_NO_STOP = np.zeros(1, dtype=np.int64)  # the flag of calls without should_stop: never set


class _stop_flag:  # noqa: N801 - used as a context manager: ``with _stop_flag(fn) as stop``
    """The kernels' stop flag (int64 (1,)): set at once when ``should_stop()`` already says so,
    else polled every :data:`POLL_S` while the block runs (a class: cheaper than a generator)."""

    __slots__ = ("stop", "should_stop")

    def __init__(self, should_stop):
        self.should_stop = should_stop
        self.stop = np.zeros(1, dtype=np.int64)

    def __enter__(self):
        if self.should_stop is not None and self.should_stop():
            self.stop[0] = 1
        elif self.should_stop is not None:
            _POLLER.add(self.stop, self.should_stop)
        return self.stop

    def __exit__(self, *exc):
        if self.should_stop is not None:
            _POLLER.remove(self.stop)
        return False


_kernels = None


def available() -> bool:
    """True when Numba imports (the fast path can be used)."""
    return _get_kernels() is not None


_import_time = 0.0


def _get_kernels():
    global _kernels, _import_time
    if _kernels is None:
        t0 = time.perf_counter()
        try:
            from . import _fast_kernels  # noqa: PLC0415

            _kernels = _fast_kernels
        except Exception:  # noqa: BLE001 - any import failure means "no fast path"
            _kernels = False
        _import_time = time.perf_counter() - t0
    return _kernels or None


_compiled = False
_compile_lock = threading.Lock()
_warm_thread: threading.Thread | None = None


def _fparams(cfg: IKConfig) -> np.ndarray:
    """The float options of the kernels, in the order ``solve_problem`` reads them."""
    return np.array([cfg.position_tolerance, cfg.orientation_tolerance, cfg.lambda_initial,
                     cfg.lambda_min, cfg.lambda_max, cfg.lambda_up, cfg.lambda_down,
                     cfg.stall_ratio, cfg.stall_iterations, cfg.nonmonotone_iterations,
                     cfg.excursion_iterations, cfg.excursion_stall],
                    dtype=np.float64)


def ensure_compiled() -> float:
    """Compile (or load from Numba's disk cache) every kernel once per process, on a one-joint
    problem; thread safe (a second caller waits for the first). Returns the seconds it took
    (0 once done, or without Numba)."""
    global _compiled
    if _compiled:
        return 0.0
    with _compile_lock:
        if _compiled:
            return 0.0
        t0 = time.perf_counter()
        k = _get_kernels()
        if k is None:
            return 0.0
        _compile_all(k)
        # the compiled CPU rows' modules too (about 30 ms to import): a first timed batch
        # that asks for them must not spend its budget on that
        from ..gpu import codegen, hostrun  # noqa: F401, PLC0415

        _compiled = True
        return time.perf_counter() - t0 + _import_time  # the import of Numba, once, too


def _compile_all(k) -> None:
    one = np.ones(1)
    i0 = np.zeros(1, np.int64)
    chain = (np.array([0, 1]), np.eye(4)[None], np.array([[0.0, 0.0, 1.0]]), i0, i0, one,
             np.zeros(1), i0, np.eye(4)[None], i0)
    limits = (-one, one, np.zeros(1, dtype=bool))
    fparams = _fparams(IKConfig())
    targets, weights = np.eye(4)[None, None], np.ones((1, 1, 6))
    for fn in (k.solve_serial, k.solve_parallel):
        fn(0, 1, np.zeros((1, 1)), np.ones(1, dtype=bool), np.zeros(1, dtype=np.bool_),
           np.zeros(1, np.int64), np.zeros(1), np.zeros(1), np.zeros(1, dtype=np.bool_),
           *chain, targets, weights, *limits, fparams, 2, 1, True, -1, np.zeros(1, np.int64))
    for fn in (k.verify, k.verify_serial):
        fn(np.zeros((1, 1)), *chain[:6], chain[6], chain[8], targets, weights, np.zeros(1),
           np.zeros(1))
    keys = ("starts", "pre", "axis", "typ", "qi", "mult", "off", "col", "post", "colq")
    packed = pack_one(np.ones(6), fparams, np.zeros((0, 1)), np.zeros(1, dtype=bool),
                      np.zeros(1, dtype=bool), dict(zip(keys, chain)), *limits, -one, one)
    k.solve_one(np.eye(4), np.zeros(1), *packed, 2, -1, np.zeros(1, np.int64), np.zeros(1),
                np.zeros(7))
    compiled_kinematics.ensure_compiled()  # fk, fk_frames and jacobian's kernels too


def warm_up(wait: bool = True) -> float:
    """Make the compiled fast path ready: import Numba and load the kernels from its disk cache,
    or compile them (tens of seconds to minutes the first time on a machine; ``scripts/setup.sh``
    does it once at set-up). ``wait=False`` starts that in a background thread and returns at
    once. Returns the seconds spent here (0 when already ready or started).

    Until the kernels are ready, a solve with a timeout takes the reference (NumPy) path, and
    starts this warm-up in the background: no call exceeds its timeout because of compilation.
    A solve without a timeout waits for the compilation and then takes the fast path."""
    global _warm_thread
    if _compiled:
        return 0.0
    if wait:
        return ensure_compiled()
    with _compile_lock:
        if _warm_thread is None and not _compiled:
            _warm_thread = threading.Thread(target=_warm_in_background, daemon=True,
                                            name="ros2_ik-numba-warm-up")
            _warm_thread.start()
    return 0.0


def join_warm_up(timeout: float | None = None) -> None:
    """Wait (at most ``timeout`` s) for a background warm-up started by ``warm_up(wait=False)``
    (a process about to exit waits for it: its kernels run on Numba's OpenMP threads)."""
    thread = _warm_thread
    if thread is not None:
        thread.join(timeout)


def _warm_in_background() -> None:
    global _warm_thread
    try:
        if not _cache_looks_current():
            # Compile in a child process into Numba's disk cache: compiling holds this
            # process's GIL for seconds at a time (LLVM), which would stall the caller's solves
            # far past their timeouts. Loading the cache here afterwards takes about a second.
            env = dict(os.environ)
            root = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
            subprocess.run([sys.executable, "-c", _WARM_CHILD], env=env, check=False,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        ensure_compiled()
    except Exception:  # noqa: BLE001  (the reference path keeps serving; a later call retries)
        _warm_thread = None


# the child ends itself when its parent is gone
_WARM_CHILD = """
import os, threading, time
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
threading.Thread(target=watch, daemon=True).start()
from ros2_ik.solvers import fast
fast.ensure_compiled()
"""


def _cache_looks_current() -> bool:
    """True when Numba's disk cache holds the solver's and the kinematics' kernels, newer than
    their sources (then loading them takes about a second, and no compilation is expected)."""
    return (compiled_kinematics.cache_current(Path(__file__).with_name("_fast_kernels.py"), 4)
            and compiled_kinematics.ready())


def is_warm() -> bool:
    """True when the compiled kernels are loaded (a solve will not compile)."""
    return _compiled


def plan(model, objectives, regularizers, cfg, solver, xp):
    """Return a :class:`ChainPlan` when the compiled path covers this request, else None."""
    if (not cfg.use_fast_path or solver != "dls" or regularizers or xp is not np
            or not objectives):
        return None
    if not _compiled and cfg.timeout is not None:
        warm_up(wait=False)  # compiled in the background; this call takes the reference path
        return None
    if not available():
        return None
    if not all(type(o) in _POSE_TYPES for o in objectives):
        return None
    chain = _chain_arrays(model, tuple(o.link for o in objectives))
    if chain is None:
        return None
    p = ChainPlan(model, objectives, chain)
    p.compile_time = ensure_compiled()
    return p


def _chain_arrays(model: Model, tips: tuple[int, ...]):
    """Flat per-joint arrays for the base->tip paths (kept per model and tip set, writable: the
    kernels take them as they are), or None when a joint on a path is not 1-DOF; the GPU
    generator (:func:`ros2_ik.gpu.codegen.chain_of`) reads the same table."""
    return model.memo("solvers.fast.chain", tuple(tips), lambda: _build_chain(model, tips))


def _build_chain(model: Model, tips):
    active_v = set(int(v) for v in model.v_active)
    pre, axis, typ, qi, mult, off, colq_of, links = [], [], [], [], [], [], [], []
    starts, posts = [0], []
    ok = True
    for tip in tips:
        path = []
        l = tip
        while l > 0:
            path.append(l)
            l = int(model.link_parent[l])
        acc = np.eye(4)
        for l in reversed(path):
            t = int(model.joint_type[l])
            if t == JointType.FIXED:
                acc = acc @ model.origin[l]
                continue
            if t not in (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC):
                ok = False
                break
            pre.append(acc @ model.origin[l])
            acc = np.eye(4)
            axis.append(model.axis[l])
            typ.append(1 if t == JointType.PRISMATIC else 0)
            links.append(l)
            if model.mimic_q[l] >= 0:
                qi.append(int(model.mimic_q[l]))
                mult.append(float(model.mimic_multiplier[l]))
                off.append(float(model.mimic_offset[l]))
            else:
                qi.append(int(model.q_start[l]))
                mult.append(1.0)
                off.append(0.0)
            v = int(model.q_to_v[qi[-1]])
            colq_of.append(qi[-1] if v in active_v else -1)
        if not ok:
            break
        posts.append(acc)
        starts.append(len(pre))
    if not ok:
        return None
    colq = np.array(sorted({c for c in colq_of if c >= 0}), dtype=np.int64)
    col_index = {int(c): i for i, c in enumerate(colq)}
    out = dict(
        starts=np.array(starts, dtype=np.int64),
        pre=np.array(pre, dtype=np.float64).reshape(-1, 4, 4),
        axis=np.array(axis, dtype=np.float64).reshape(-1, 3),
        typ=np.array(typ, dtype=np.int64),
        qi=np.array(qi, dtype=np.int64),
        mult=np.array(mult, dtype=np.float64),
        off=np.array(off, dtype=np.float64),
        col=np.array([col_index.get(c, -1) for c in colq_of], dtype=np.int64),
        post=np.array(posts, dtype=np.float64).reshape(-1, 4, 4),
        colq=colq,
        link=np.array(links, dtype=np.int64),   # each joint's child link
    )
    return out


class ChainPlan:
    """A compiled LM solve for one model, tip set and objective data."""

    def __init__(self, model: Model, objectives, chain):
        self.model = model
        self.chain = chain
        self.tips = tuple(int(o.link) for o in objectives)
        self.targets = np.ascontiguousarray(
            np.stack([o.targets for o in objectives], axis=1))        # (P, T, 4, 4)
        self.weights = np.ascontiguousarray(
            np.stack([o.weights for o in objectives], axis=1))        # (P, T, 6)

    def verify(self, q):
        """Position and orientation errors (P,) of q (P, nq) against the problems' targets."""
        k = _get_kernels()
        c = self.chain
        P = q.shape[0]
        pe = np.empty(P)
        re = np.empty(P)
        fn = k.verify if P >= VERIFY_PARALLEL_MIN else k.verify_serial
        fn(np.array(q, dtype=np.float64), c["starts"], c["pre"], c["axis"], c["typ"], c["qi"],
           c["mult"], c["off"], c["post"], self.targets, self.weights, pe, re)
        return pe, re

    def solve(self, rows_seed, problem_idx, cfg, *, deadline=None, active=None,
              first_per_problem=False, num_problems=None, should_stop=None, expanded=False):
        """Same contract as :func:`.dls.lm_solve_rows` for rows laid out problem-major (P*K).
        ``expanded``: the rows are :func:`.common.expand_seeds`' of their problems' seeds
        (rows_seed[::K]) with this plan's tips' movable coordinates and ``cfg.rng_seed``, so
        the compiled CPU rows, which build them so themselves, may solve them."""
        k = _get_kernels()
        P = int(num_problems)
        N = rows_seed.shape[0]
        K = N // P
        m = self.model
        active = np.ones(N, dtype=bool) if active is None else np.array(active, dtype=bool)
        conv = np.zeros(N, dtype=np.bool_)
        iters = np.zeros(N, dtype=np.int64)
        pe = np.full(N, np.inf)
        re = np.full(N, np.inf)
        tout = np.zeros(N, dtype=np.bool_)
        if deadline is None:
            deadline_ns = -1
        else:
            deadline_ns = time.monotonic_ns() + int((deadline - time.perf_counter()) * 1e9)
        host = (self._host_rows(rows_seed, active, P, K, cfg, can_wait=deadline is None)
                if expanded else None)
        with _stop_flag(should_stop) as stop:
            if host is not None:  # the compiled CPU rows: the same rows, computed faster
                rows, seeds_p, rnd, active_p = host
                q, conv, iters, pe, re, tout = rows.solve(
                    seeds_p, rnd, self.targets, self.weights, active_p, K, _fparams(cfg),
                    int(cfg.max_iterations), int(bool(first_per_problem)), deadline_ns, stop)
            else:  # (the compiled rows clip their start rows themselves)
                q = np.ascontiguousarray(clip_to_limits(m, rows_seed), dtype=np.float64)
                c = self.chain
                fn = k.solve_parallel if P >= PARALLEL_MIN else k.solve_serial
                fn(0, P, q, active, conv, iters, pe, re, tout, c["starts"], c["pre"],
                   c["axis"], c["typ"], c["qi"], c["mult"], c["off"], c["col"], c["post"],
                   c["colq"], self.targets, self.weights,
                   np.array(m.lower, dtype=np.float64), np.array(m.upper, dtype=np.float64),
                   np.array(limited_revolute(m)), _fparams(cfg), int(cfg.max_iterations), int(K),
                   bool(first_per_problem), int(deadline_ns), stop)
        cancelled = bool(stop[0])
        timed_out = bool(tout.any()) and not cancelled
        if deadline is not None and not timed_out:
            timed_out = time.perf_counter() >= deadline and bool(np.any(active & ~conv))
        return q, conv, iters, pe, re, timed_out

    def _host_rows(self, rows_seed, active, P, K, cfg, *, can_wait=True):
        """The compiled CPU rows (:mod:`.cxx`) when they are built and compute exactly what
        the Numba kernel would here: the rows are :func:`.common.expand_seeds`' (the caller
        says so; the kernel builds them itself from the problems' seeds and the restart seeds)
        and every problem's rows are all active or all inactive. Else None."""
        if P * K < cxx.MIN_ROWS:
            return None
        rows = cxx.rows_solver(self.model, self.tips, can_wait=can_wait)
        if rows is None:
            return None
        a = active.reshape(P, K)
        active_p = a[:, 0]
        if not np.array_equal(a.all(axis=1), a.any(axis=1)):
            return None
        m = self.model
        seeds_p = np.ascontiguousarray(rows_seed[::K], dtype=np.float64)
        if K > 1:
            movable = movable_coordinates(m, self.tips)
            rnd = np.ascontiguousarray(restart_seeds(m, K, cfg.rng_seed, movable)[0])
        else:
            rnd = np.zeros((1, m.nq))
        return rows, seeds_p, rnd, active_p.astype(np.uint8)


class PreparedChain:
    """The compiled part of a prepared one-goal solve (:class:`.prepared.ChainSolver`, and
    :func:`solve_pose`'s one-goal calls through :func:`solve_single`).

    Everything that does not depend on the target is done once here (chain arrays, limits, the
    random restart seeds, the solver options); :meth:`solve` then makes one compiled call that
    validates the target, runs LM from the seed and then from each restart seed in order until
    one converges (speed mode), wraps continuous joints near the seed and re-checks the answer by
    FK. ``compiled`` is False where the compiled path does not cover the model, the tip or the
    options (Numba missing, planar/floating joints on the chain, a solve mode other than
    ``speed``); :meth:`solve` then answers by :meth:`_fallback` (here: an error; the public
    :class:`.prepared.ChainSolver` calls :func:`solve_pose`).
    """

    def __init__(self, model: Model, tip: str | None = None, config=None,
                 weights=(1, 1, 1, 1, 1, 1)):
        self.model = model
        self.tip = tip or (model.tips[0] if model.tips else None)
        if self.tip is None:
            raise InvalidInputError("no tip link given and the model has no default tip")
        self._link = model.link_index(self.tip)
        self.config = config or IKConfig()
        self.weights = np.array(_weights(weights, 1, np)[0], dtype=np.float64)  # writable
        cfg = self.config
        chain = _chain_arrays(model, (self._link,)) if cfg.use_fast_path else None
        self._kernels = _get_kernels() if chain is not None else None
        self.compiled = (self._kernels is not None and cfg.solve_mode is SolveMode.SPEED)
        if not self.compiled:
            return
        # coordinates off the base->tip path keep the seed's value in every restart row
        rnd, keep = restart_seeds(model, cfg.num_seeds, cfg.rng_seed,
                                  movable_coordinates(model, [self._link]))
        lower = np.asarray(model.lower, dtype=np.float64)
        upper = np.asarray(model.upper, dtype=np.float64)
        # a seed within seed_lo..seed_hi passes check_seeds (finite, at most SEED_LIMIT_SLACK
        # outside; coordinates without limits: the model's value bound, as check_seeds)
        self._packed = pack_one(
            self.weights, _fparams(cfg), np.reshape(rnd, (-1, model.nq)), keep,
            model.q_continuous, chain, lower, upper, limited_revolute(model),
            np.maximum(lower, -MAX_VALUE) - SEED_LIMIT_SLACK,
            np.minimum(upper, MAX_VALUE) + SEED_LIMIT_SLACK)
        self._neutral = np.ascontiguousarray(model.neutral_q())
        self._nq1 = (model.nq,)
        ensure_compiled()

    def solve(self, target, seed=None, should_stop=None):
        """Solve one pose goal: ``target`` (4, 4) or (7,) [x y z qx qy qz qw] in the base frame.

        ``should_stop``: polled while the solve runs (as in :func:`solve_pose`); returning True
        ends it (status PREEMPTED unless it had converged). Returns an :class:`IKResult` with
        one problem.
        """
        cfg = self.config
        check_call_options(cfg, "dls", should_stop)
        if not (type(target) is np.ndarray and target.dtype == np.float64):
            target = as_float_array(target, "target", "shape (4, 4) or (7,)", np).astype(
                np.float64, copy=False)
        if not self.compiled:
            return self._fallback(target, seed, should_stop)
        t0 = time.perf_counter()
        if target.shape == (4, 4):
            T = _kernel_array(target)
        elif target.shape == (7,):
            T = _kernel_array(pq_to_pose(target))
        else:
            raise ShapeError(f"target must have shape (4, 4) or (7,) [x y z qx qy qz qw], "
                             f"got {target.shape}")
        if seed is None:
            s = self._neutral
        elif type(seed) is np.ndarray and seed.dtype == np.float64 and seed.shape == self._nq1:
            s = _kernel_array(seed)
        else:
            s = _kernel_array(check_seed_shape(self.model, seed, 1, np).reshape(-1))
        deadline_ns = -1 if cfg.timeout is None else time.monotonic_ns() + int(cfg.timeout * 1e9)
        q = np.empty(self.model.nq)
        info = np.empty(7)  # per call: one ChainSolver may serve several threads
        # the target's and the seed's checks are the kernel's (info[6] says which failed)
        if should_stop is None:
            self._kernels.solve_one(T, s, *self._packed, int(cfg.max_iterations), deadline_ns,
                                    _NO_STOP, q, info)
        else:
            with _stop_flag(should_stop) as stop:
                self._kernels.solve_one(T, s, *self._packed, int(cfg.max_iterations), deadline_ns,
                                        stop, q, info)
        if info[6] == 2.0:
            return self._invalid_seed(s, t0)
        status = int(info[0])
        if (status == Status.NOT_CONVERGED and deadline_ns >= 0
                and time.monotonic_ns() >= deadline_ns):
            status = Status.TIMED_OUT  # as solve_pose: the deadline passed during the solve
        if status == Status.CONVERGED:
            msg = ""
        elif status == Status.INVALID_INPUT:
            msg = INVALID_GOAL_MESSAGE
        else:
            msg = unsolved_message(status == Status.TIMED_OUT, info[1], info[2], cfg,
                                   cancelled=status == Status.PREEMPTED)
        ints = np.array((int(info[3]), int(info[4]), status), dtype=np.int64)
        return IKResult(q=q[None], success=np.array([status == Status.CONVERGED]),
                        position_error=info[1:2], orientation_error=info[2:3],
                        iterations=ints[0:1], seed_index=ints[1:2], status=ints[2:3],
                        messages=[msg], solve_time=time.perf_counter() - t0)

    def _fallback(self, target, seed, should_stop) -> IKResult:
        """The answer where the compiled path does not cover this solver (``compiled`` False);
        ``target`` is a float64 array, ``seed`` as given."""
        raise NotImplementedError(f"the compiled path does not cover tip {self.tip!r} of model "
                                  f"{self.model.name!r} with these options; use ChainSolver")

    def _invalid_seed(self, s, t0) -> IKResult:
        """As solve_pose: a problem whose seed is not finite or outside the limits is not
        solved; the message is :func:`.checks.check_seeds`'."""
        s, _, msgs = check_seeds(self.model, s, 1, np)
        nan = np.array([np.nan])
        return IKResult(q=np.array(clip_to_limits(self.model, s[0][None])),
                        success=np.array([False]), position_error=nan,
                        orientation_error=nan.copy(), iterations=np.zeros(1, np.int64),
                        seed_index=np.zeros(1, np.int64),
                        status=np.array([int(Status.INVALID_INPUT)], dtype=np.int64),
                        messages=[msgs[0]], solve_time=time.perf_counter() - t0)


def pack_one(weights, fparams, rnd, keep, cont, chain, lower, upper, around, seed_lo, seed_hi):
    """The fixed data of a one-goal solve as the three arrays ``solve_one`` unpacks (fbuf
    float64, ibuf int64, bbuf uint8; the layout is in its docstring): new, writable arrays
    (Numba compiles read-only ones, such as the model's, as other types)."""
    nq = lower.shape[0]
    c = chain
    nJ, nT, nc = c["pre"].shape[0], c["post"].shape[0], c["colq"].shape[0]
    ibuf = np.concatenate([np.array([nq, rnd.shape[0], nJ, nT, nc]), c["starts"], c["typ"],
                           c["qi"], c["col"], c["colq"]]).astype(np.int64)
    fbuf = np.concatenate([np.ravel(x) for x in (
        weights, fparams, [MAX_VALUE], rnd, c["pre"], c["axis"], c["mult"], c["off"], c["post"],
        lower, upper, seed_lo, seed_hi)]).astype(np.float64)
    bbuf = np.concatenate([keep, cont, around]).astype(np.uint8)
    return fbuf, ibuf, bbuf


def _kernel_array(a) -> np.ndarray:
    """``a`` as the compiled kernels take it: float64, C-contiguous and writable. Numba types a
    read-only array (a message buffer, ``np.frombuffer``) as another type and would compile the
    kernel again for it, seconds inside a request; so such an array is copied."""
    if (type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous
            and a.flags.writeable):
        return a
    return np.array(a, dtype=np.float64, order="C")


#: prepared solvers kept per model for :func:`solve_pose`'s one-goal calls (least recently used
#: out)
PREPARED_MAX = 32


def solve_single(model: Model, tip: str, target, weights, seeds, cfg: IKConfig, should_stop):
    """:func:`solve_pose` for one goal and one tip, by a :class:`PreparedChain` kept per
    model, tip, options and weights; None when the compiled path does not take it (not loaded
    yet, a chain it does not cover), and the general path answers. The arguments are checked
    as :func:`solve_pose` checks them (weights, then the seeds' shape, then their values)."""
    if not _compiled:
        return None
    w = _checked_weights(weights)
    key = (tip, cfg, w if type(w) is tuple else w.tobytes())
    cache = model.memo("solvers.fast.prepared", "least recently used first", OrderedDict)
    with _prepared_lock:
        cs = cache.get(key)
        if cs is not None:
            cache.move_to_end(key)
    if cs is None:
        cs = PreparedChain(model, tip, cfg, weights=w if type(w) is tuple else w[0])
        with _prepared_lock:
            cache[key] = cs
            while len(cache) > PREPARED_MAX:
                cache.popitem(last=False)
    if not cs.compiled:
        return None
    return cs.solve(target, seed=seeds, should_stop=should_stop)


_prepared_lock = threading.Lock()
_CHECKED_WEIGHTS: set = set()


def _checked_weights(weights):
    """``weights`` checked as :class:`PoseObjective` checks them: a tuple (the default) that
    passed once is returned as it is (it passes again), anything else as a (1, 6) array."""
    try:
        if type(weights) is tuple and weights in _CHECKED_WEIGHTS:
            return weights
    except TypeError:  # unhashable items: checked below (and refused there)
        pass
    w = np.array(_weights(weights, 1, np), dtype=np.float64)
    if type(weights) is tuple and len(_CHECKED_WEIGHTS) < 256:
        try:
            _CHECKED_WEIGHTS.add(weights)
        except TypeError:
            pass
    return w
