"""The reference batch solve: any objectives, on ``xp`` (NumPy or CuPy), chunked.

Flow: validate -> expand problems into seeds (rows, ``problem_idx``) -> solver (``dls``, ``ccd``
or ``ccd+dls``) -> choose one converged row per problem by the solve mode -> wrap continuous
joints near the seed -> verify by FK against the tolerances and the limits.

This is the specification every compiled backend is tested against; it never calls a compiled
path. The public entry points (:mod:`ros2_ik.api`) choose, once per prepared solver, whether
this or a compiled backend answers.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from ..backend import const, get_xp, to_numpy
from ..errors import InputTypeError, InvalidInputError, ShapeError
from ..kinematics.jacobian import jacobians_all
from ..model import MAX_BATCH, Model
from ..validate import check_memory, describe
from .ccd import ccd_solve_rows
from .checks import check_call_options, check_seed_shape, check_seeds
from .config import INVALID_GOAL_MESSAGE, IKConfig, IKResult, SolveMode, Status, unsolved_message
from .lm import fixed_columns, lm_solve_rows
from .objectives import Objective, PoseObjective
from .refine import refine
from .residuals import constraints as residual_constraints, evaluate, goal_errors
from .seeds import expand_seeds, finalize_q, movable_coordinates, seed_distance

__all__ = ["reference_solve", "select", "goal_movable", "RESULT_COST", "ResultCost",
           "CCD_POLISH_SWEEPS"]

CCD_POLISH_SWEEPS = 10  # "ccd+dls": CCD sweeps before the LM polish


def reference_solve(model: Model, objectives: Sequence[Objective], *, seeds=None,
                    config: IKConfig | None = None, solver: str = "dls",
                    regularizers: Sequence[Objective] = (),
                    should_stop: Callable[[], bool] | None = None,
                    start_time: float | None = None, collision=None,
                    secondary: Sequence[Objective] = (),
                    constraints: Sequence[Objective] = ()) -> IKResult:
    """Solve P IK problems at once on the objectives' array module (the reference).

    Args:
        objectives: goal objectives (each holding per-problem data for the same P problems).
        seeds: (P, nq) or (nq,) starting configurations; default mid-range.
        config: :class:`IKConfig` (tolerances, iterations, timeout, seeds, solve mode).
        solver: "dls" (Levenberg-Marquardt), "ccd" (cyclic coordinate descent, one tip) or
            "ccd+dls" (a few CCD sweeps, then LM from there).
        regularizers: extra objectives minimized alongside (posture, joint-limit avoidance);
            they do not enter the success test.
        should_stop: polled between iterations; returning True ends the solve (cancel).
        start_time: ``time.perf_counter()`` when the caller's call began (the timeout counts
            from there: a wrapper's own checks are part of the budget); default now.
        collision: a :class:`.collision.CollisionObjective`: minimized with the goals, and a
            success must also keep its margin (checked exactly on the answer; else
            ``IN_COLLISION``). Solver "ccd" does not take one.
        secondary: objectives of the secondary terms (:mod:`.terms`, kind "cost"): lowered
            after the answer is found, within the tolerances and the constraints
            (:mod:`.refine`).
        constraints: objectives of the constraint terms (:mod:`.terms`, kind "constraint":
            the step bound): their rows minimized with the goals, and every success keeps
            their :meth:`~.objectives.Objective.constraint` >= 0 (checked on the answer; else
            NOT_CONVERGED).
    Returns:
        :class:`IKResult`; success is verified by FK against the tolerances and limits (and the
        collision margin).
    """
    t0 = time.perf_counter() if start_time is None else float(start_time)
    cfg = check_call_options(config, solver, should_stop)
    if isinstance(objectives, Objective):
        objectives = [objectives]
    if not isinstance(objectives, (list, tuple)) or not all(
            isinstance(o, Objective) for o in objectives):
        raise InputTypeError(f"objectives must be a list of Objective (e.g. PoseObjective), got "
                             f"{describe(objectives)}")
    if not isinstance(regularizers, (list, tuple)) or not all(
            isinstance(o, Objective) for o in regularizers):
        raise InputTypeError(f"regularizers must be a list of Objective, got "
                             f"{describe(regularizers)}")
    objectives = list(objectives)
    if not objectives:
        raise InvalidInputError("no goal objectives given; pass at least one (e.g. PoseObjective)")
    sizes = {getattr(o, "num_problems", None) for o in objectives} - {None}
    if len(sizes) != 1:
        raise ShapeError(f"goal objectives disagree on the number of problems: {sorted(sizes)}")
    P = sizes.pop()
    if P == 0:
        raise InvalidInputError("empty batch: no IK problems given")
    K = int(cfg.num_seeds)
    if P * K > MAX_BATCH:
        raise InvalidInputError(f"{P} problems x {K} seeds = {P * K} rows exceeds the limit "
                                f"{MAX_BATCH}; split the batch or use fewer seeds")
    xp = get_xp(objectives[0].targets) if hasattr(objectives[0], "targets") else np
    if seeds is not None:  # shape checked here, values per chunk
        seeds = check_seed_shape(model, seeds, P, xp)
    regularizers = list(regularizers)
    if solver != "dls" and regularizers:
        raise InvalidInputError("CCD does not take regularizers; use solver='dls'")
    if collision is not None and solver == "ccd":
        raise InvalidInputError("collision avoidance needs solver 'dls' or 'ccd+dls' (CCD "
                                "alone does not see collisions)")
    # which coordinates this solve may move, decided once (goal objectives' links; a goal
    # without a link, e.g. a custom objective: all); every other one stays at the seed
    movable = goal_movable(model, objectives)
    deadline = None if cfg.timeout is None else t0 + cfg.timeout
    stop = _LatchedStop(should_stop)
    secondary = list(secondary)
    constraints = list(constraints)
    splittable = all(o.take(0, 1) is not None
                     for o in objectives + regularizers + secondary + constraints)

    # Chunks of whole problems, solved one after the other: every chunk's checks, seeds,
    # iterations and verification are bounded in time and memory, and the deadline and
    # should_stop are seen between chunks as well as between iterations. Rows are independent,
    # so the results equal one call on the whole batch.
    rows = REFERENCE_CHUNK_ROWS if xp is np else DEVICE_CHUNK_ROWS
    if collision is not None and xp is np and (deadline is not None or should_stop is not None):
        rows = LM_BLOCK_ROWS_COLLISIONS  # (a chunk's exact check of its answers: ~15 ms + P)
    if collision is not None:
        regularizers = regularizers + [collision]
    m = sum(int(getattr(o, "dim", 6)) for o in objectives + regularizers + constraints)
    row = 6 * model.num_links * 128 + 32 * m * model.nv_active + 24 * model.nv ** 2 + 4096
    check_memory(K * row, "the reference-path solve of one problem", f"{K} seeds",
                 "use fewer seeds (num_seeds), or a model and goal a compiled backend takes")
    per_chunk = max(1, rows // K) if splittable else P
    kind = (collision is not None, cfg.solve_mode is SolveMode.SPEED)
    if per_chunk >= P and not _too_late(stop, deadline, P, K, kind):
        return _solve_chunk(model, objectives, regularizers, seeds, cfg, solver, K, deadline,
                            stop, t0, xp, movable, collision, secondary, constraints)
    # (one chunk that cannot start: answered as a chunked batch whose first chunk did not)
    # Every problem starts as "not started" (seed, TIMED_OUT), or INVALID_INPUT where its goal
    # or seed is bad (checked for the whole batch now: a bad request is INVALID_INPUT whether
    # or not its chunk is reached). Writing the results of a big batch takes time in
    # proportion to its size, so it is done now, inside the budget, and a deadline reached
    # between chunks costs nothing more. Where that writing alone would end the call past the
    # deadline by more than RESULT_OVERRUN, the call is refused at once (every problem would
    # be TIMED_OUT, later than promised).
    if deadline is not None and P >= RESULT_COST.MIN_ROWS:  # (as the compiled path)
        RESULT_COST.check(P, model.nq, deadline, start=t0)
    t_out = time.perf_counter()
    out = _Results(P, model, seeds, collision)
    RESULT_COST.record(P, model.nq, time.perf_counter() - t_out)
    out.mark_invalid(*_invalid_problems(model, objectives, seeds, P, xp))
    for p0 in range(0, P, per_chunk):
        p1 = min(P, p0 + per_chunk)
        objs = [o.take(p0, p1) for o in objectives]
        regs = [o.take(p0, p1) for o in regularizers]
        secs = [o.take(p0, p1) for o in secondary]
        cons = [o.take(p0, p1) for o in constraints]
        seeds_c = seeds if seeds is None or seeds.ndim == 1 else seeds[p0:p1]
        # a chunk whose checks and result selection alone (measured on earlier chunks of its
        # size) would end past the deadline is not started
        if _too_late(stop, deadline, p1 - p0, K, kind):
            if stop.seen:
                out.cancelled_from(p0)
            break
        out.put(p0, _solve_chunk(model, objs, regs, seeds_c, cfg, solver, K, deadline, stop,
                                 t0, xp, movable, collision, secs, cons))
    return out.result(t0)


def _too_late(stop, deadline, P: int, K: int, kind: tuple) -> bool:
    """Whether a chunk of P problems x K seeds must not start: a stop was asked for, or its
    checks and result selection alone (measured on earlier chunks of its size) would end it
    past the deadline."""
    return stop() or (deadline is not None and time.perf_counter()
                      + _CHUNK_COST.fixed(P, K, *kind) >= deadline)


def _invalid_problems(model, objectives, seeds, P, xp):
    """(P,) bool: problems whose goal or seed is bad, and their messages {problem: text}."""
    _, invalid, msgs = check_seeds(model, seeds, P, xp)
    invalid = invalid.copy()
    for o in objectives:
        m = o.invalid_problems()
        if m is not None:
            m = to_numpy(m)
            for p in np.nonzero(m & ~invalid)[0][:1000]:
                msgs[int(p)] = INVALID_GOAL_MESSAGE
            invalid |= m
    return invalid, msgs


#: Rows (problems x seeds) solved together on NumPy: one LM iteration of a chunk, and its
#: set-up and verification, take a few milliseconds, so the deadline and should_stop are seen
#: that often, and the work arrays stay near 5 MB (about 20 KB per row). Smaller chunks
#: measured no slower on 4,096 problems.
REFERENCE_CHUNK_ROWS = 256
#: On a device (CuPy) every chunk costs its own launches and host round trips whatever its
#: size: 256-row chunks made 1,000 problems x 32 seeds 14x slower on an H100 than one chunk.
#: The deadline and should_stop are still checked every iteration inside a chunk.
DEVICE_CHUNK_ROWS = 1 << 16
#: Rows of one LM step evaluated together on NumPy under a deadline or a cancel (the deadline
#: and should_stop are seen between blocks, see :func:`.lm.lm_solve_rows`): a problem's seeds
#: are one chunk however many they are, and its thousand rows with the collision terms take
#: 0.1-0.2 s a step. With the collision terms, whose every evaluation costs about 15 ms
#: whatever its rows, blocks of 64 rows take about 20 ms a step. Without a deadline or a
#: cancel a step is one block (the fastest).
LM_BLOCK_ROWS = REFERENCE_CHUNK_ROWS
LM_BLOCK_ROWS_COLLISIONS = 64


class _LatchedStop:
    """should_stop, polled from any thread; once it said True it stays True (``seen``)."""

    def __init__(self, should_stop):
        self._fn = should_stop
        self.seen = False

    def __call__(self) -> bool:
        if not self.seen and self._fn is not None and self._fn():
            self.seen = True
        return self.seen


def goal_movable(model: Model, objectives) -> np.ndarray:
    """(nq,) bool: the coordinates a solve for these goal objectives may move
    (:func:`.seeds.movable_coordinates` of their links: ``link``, or ``links`` for a goal of
    several). Regularizers add none; a goal objective without one (a custom one) makes every
    coordinate movable."""
    links = [l for o in objectives for l in getattr(o, "links", (getattr(o, "link", None),))]
    if any(not isinstance(l, (int, np.integer)) for l in links):
        return movable_coordinates(model, None)
    return movable_coordinates(model, links)


def _solve_chunk(model, objectives, regularizers, seeds, cfg, solver, K, deadline, stop, t0,
                 xp, movable=None, collision=None, secondary=(), constraints=()) -> IKResult:
    """One chunk of P problems: check seeds and goals, expand seeds, solve, select, verify."""
    t_start = time.perf_counter()
    P = objectives[0].num_problems
    seeds_p, _, _ = check_seeds(model, seeds, P, xp)
    invalid, msgs = _invalid_problems(model, objectives, seeds, P, xp)
    # Invalid problems get a harmless placeholder target so the batch math stays finite.
    all_obj = list(objectives) + list(regularizers) + list(constraints)
    if invalid.any():
        all_obj = [_sanitized(o, invalid, xp) for o in all_obj]
        objectives = all_obj[:len(objectives)]
        constraints = all_obj[len(all_obj) - len(constraints):]
    # what every success keeps: the collision margin, the constraint terms
    kept = ([collision] if collision is not None else []) + list(constraints)
    if movable is None:
        movable = goal_movable(model, objectives)
    rows_seed = expand_seeds(model, seeds_p, K, cfg.rng_seed, xp, movable)
    problem_idx = xp.repeat(xp.arange(P), K)
    active = xp.asarray(np.repeat(~invalid, K))
    speed = cfg.solve_mode is SolveMode.SPEED
    poll = stop if stop._fn is not None else None
    # the solve stops early enough that selecting and verifying this chunk's results still
    # fits before the deadline (their measured cost, see _ChunkCost)
    deadline_all = deadline
    t_lm = time.perf_counter()
    if deadline is not None:  # (at most half the time left: a wrong estimate cannot starve it)
        deadline = deadline - min(_CHUNK_COST.reserve(P, K, collision is not None, speed),
                                  0.5 * max(deadline - t_lm, 0.0))

    block = None
    if xp is np and (deadline is not None or poll is not None):
        block = LM_BLOCK_ROWS if collision is None else LM_BLOCK_ROWS_COLLISIONS

    def run_lm(start, act):
        return lm_solve_rows(model, all_obj, start, rows_seed, problem_idx, cfg,
                             deadline=deadline, active=act,
                             first_per_problem=speed and not secondary,
                             num_problems=P, should_stop=poll, movable=movable,
                             block_rows=block)

    if solver == "dls":
        q, conv, iters, pe, re, timed_out = run_lm(rows_seed, active)
    else:
        q, conv, iters, pe, re, timed_out = ccd_solve_rows(
            model, objectives, rows_seed, rows_seed, problem_idx, cfg, deadline=deadline,
            active=active, should_stop=poll,
            max_sweeps=None if solver == "ccd" else CCD_POLISH_SWEEPS)
        # past the deadline (or a cancel) LM would not start: CCD's rows are the answers
        # (select checks their clearance exactly)
        polish = solver == "ccd+dls" and not (
            (deadline is not None and time.perf_counter() >= deadline) or stop())
        timed_out = timed_out or (solver == "ccd+dls" and not polish and not stop.seen)
        if kept and polish:  # CCD does not see collisions nor constraints: a row that fails
            # one goes on (the rows CCD converged only: the others go on whatever they keep)
            ccd_rows = xp.nonzero(conv)[0]
            if ccd_rows.shape[0]:
                _, _, _, ctx = evaluate(model, kept, q[ccd_rows], rows_seed[ccd_rows],
                                        problem_idx[ccd_rows], need_jacobian=False)
                conv = conv.copy()
                conv[ccd_rows] = residual_constraints(kept, ctx, problem_idx[ccd_rows]) >= 0
        if polish:  # LM from where CCD stopped, for the rows CCD did not finish
            q, conv2, iters2, pe, re, timed_out = run_lm(q, active & ~conv)
            conv, iters = conv | conv2, iters + iters2
    t_sel = time.perf_counter()
    refine_with = None
    if secondary:  # the secondary terms, lowered from the winning answers
        secs = [_sanitized(o, invalid, xp) for o in secondary] if invalid.any() else secondary
        refine_with = (list(objectives) + kept, secs, fixed_columns(model, movable))
    out = select(model, objectives, cfg, q, rows_seed, conv, iters, pe, re,
                 timed_out and not stop.seen, invalid, msgs, P, K, t0, cancelled=stop.seen,
                 collision=collision, refine_with=refine_with, constraints=constraints)
    if deadline_all is not None:
        _CHUNK_COST.record(P, K, t_lm - t_start, time.perf_counter() - t_sel,
                           collision is not None, speed)
    return out


class _ChunkCost:
    """What a chunk costs besides its solve, learnt from the chunks solved with a deadline:
    checking goals and seeds and expanding seeds (before), selecting and verifying the results
    (after). Kept per kind of chunk: with or without the collision terms (whose exact check of
    every answer costs ten times more), the speed mode or another (which finalizes every row),
    and its size in powers of two of its problems (the answers verified) and of its rows
    (problems x seeds). A slower chunk raises its kind's estimates at once (a busy machine), a
    faster one lowers them gradually. The solve of a chunk stops early by the "after" cost
    (:meth:`reserve`); a chunk is not started when both costs would end it past the deadline
    (:meth:`fixed`). A kind never measured: :attr:`FIRST_GUESS` /
    :attr:`FIRST_GUESS_COLLISIONS` (and for the reserve, at least the measured kinds of its
    collision kind and mode scaled up to its problems and rows)."""

    #: [s] fixed, per problem, per row: the "after" cost of a kind never seen
    FIRST_GUESS = (2e-3, 3e-6, 3e-6)
    FIRST_GUESS_COLLISIONS = (15e-3, 150e-6, 10e-6)

    def __init__(self):
        self._by_kind: dict[tuple, tuple[float, float]] = {}  # kind -> (before, after)

    @staticmethod
    def _kind(P: int, K: int, coll: bool, speed: bool) -> tuple:
        return (coll, speed, max(P, 1).bit_length(), max(P * max(K, 1), 1).bit_length())

    def _guess(self, P: int, K: int, coll: bool) -> float:
        fixed, per_problem, per_row = self.FIRST_GUESS_COLLISIONS if coll else self.FIRST_GUESS
        return fixed + per_problem * P + per_row * P * max(K, 1)

    def reserve(self, P: int, K: int, coll: bool = False, speed: bool = True) -> float:
        kind = self._kind(P, K, coll, speed)
        hit = self._by_kind.get(kind)
        if hit is not None:
            return hit[1]
        guess = self._guess(P, K, coll)
        for k, (_, after) in self._by_kind.items():  # measured ones, scaled up to this kind
            if k[:2] == kind[:2]:
                guess = max(guess, after * max(1.0, 2.0 ** (kind[2] - k[2]),
                                               2.0 ** (kind[3] - k[3])))
        return guess

    def fixed(self, P: int, K: int, coll: bool = False, speed: bool = True) -> float:
        """Before + after of a chunk of this kind; a kind never measured: the first guess
        (not the scaled estimates of :meth:`reserve`, which a first call's one-time costs can
        inflate: a kind must be able to start to be measured)."""
        hit = self._by_kind.get(self._kind(P, K, coll, speed))
        return sum(hit) if hit is not None else self._guess(P, K, coll)

    def record(self, P: int, K: int, before: float, after: float, coll: bool = False,
               speed: bool = True) -> None:
        kind = self._kind(P, K, coll, speed)
        old = self._by_kind.get(kind, (before, after))
        self._by_kind[kind] = tuple(max(new, 0.8 * o + 0.2 * new)
                                    for new, o in zip((before, after), old))


_CHUNK_COST = _ChunkCost()


#: How far past its timeout a call may return [s]: a call whose result rows alone would take
#: longer is refused up front (:class:`ResultCost`).
RESULT_OVERRUN = 0.02


class ResultCost:
    """What writing a chunked batch's "not started" results costs on this machine [s per byte],
    learnt per size (powers of two of the bytes; small results reuse memory the process already
    has, large ones touch fresh pages and cost two to three times more per byte) from the
    batches of at least :attr:`MIN_ROWS` problems, each moving its size's estimate half way to
    what it measured. A size never measured: :attr:`FIRST_GUESS` (1 GB/s, fresh memory on the
    2-vCPU machine this project is developed on). A call is refused when :attr:`MARGIN` times
    the estimate would end it more than :data:`RESULT_OVERRUN` past its deadline: the time of a
    first touch of fresh memory varies (45 to 170 ms for a million rows there)."""

    FIRST_GUESS = 1e-9
    MIN_ROWS = 10_000
    MARGIN = 1.5

    def __init__(self):
        self._per_byte: dict[int, float] = {}

    @staticmethod
    def nbytes(P: int, nq: int) -> int:
        # q (P, nq) float64; errors 2 x float64; iterations, seed index, status int64;
        # success bool; one message reference
        return P * (8 * nq + 8 * 2 + 8 * 3 + 1 + 8)

    def estimate(self, P: int, nq: int) -> float:
        n = self.nbytes(P, nq)
        return self._per_byte.get(n.bit_length(), self.FIRST_GUESS) * n

    def check(self, P: int, nq: int, deadline: float, what: str = "problems",
              start: float | None = None) -> None:
        """Refuse a call whose results alone would end it past ``deadline`` (InvalidInputError
        saying how to split it): a timeout from ``start`` (``time.perf_counter``'s clock; None:
        now) too short for them. Time already gone since ``start`` (a request that waited in a
        queue) is no bad request: its problems are answered TIMED_OUT, not refused."""
        cost = self.estimate(P, nq)
        now = time.perf_counter()
        left = deadline - now
        budget = left if start is None else deadline - min(float(start), now)
        if self.MARGIN * cost > budget + RESULT_OVERRUN:
            raise InvalidInputError(
                f"the timeout is too short for {P} {what}: writing their results alone takes "
                f"about {1e3 * cost:.0f} ms on this machine, and {1e3 * max(budget, 0.0):.0f} ms "
                f"of the timeout are left; give a timeout of at least {2 * cost:.2f} s, or "
                f"split the batch into calls of at most "
                f"{max(1, int(P * max(budget, 0.0) / (2 * cost)))} {what}")

    def record(self, P: int, nq: int, seconds: float) -> None:
        if P >= self.MIN_ROWS:
            n = self.nbytes(P, nq)
            k = n.bit_length()
            self._per_byte[k] = 0.5 * self._per_byte.get(k, self.FIRST_GUESS) + 0.5 * seconds / n


RESULT_COST = ResultCost()


class _Results:
    """The results of a chunked batch, written in place chunk by chunk (one allocation). Every
    problem starts as not started: the seed inside the limits as q, errors NaN, TIMED_OUT."""

    NOT_STARTED = "timed out before this problem was started"

    def __init__(self, P, model, seeds, collision=None):
        if seeds is None:
            self.q = np.empty((P, model.nq))
            self.q[:] = np.clip(model.neutral_q(), model.lower, model.upper)
        else:  # (nq,) or (P, nq)
            s = to_numpy(seeds)
            self.q = np.clip(np.where(np.isfinite(s), s, model.neutral_q()), model.lower,
                             model.upper)
            if self.q.ndim == 1:
                self.q = np.tile(self.q, (P, 1))
        self.success = np.zeros(P, dtype=bool)
        self.pe, self.re = np.full(P, np.nan), np.full(P, np.nan)
        self.iterations = np.zeros(P, np.int64)
        self.seed_index = np.zeros(P, np.int64)
        self.status = np.full(P, int(Status.TIMED_OUT), np.int64)
        self.messages = [self.NOT_STARTED] * P
        # with collision avoidance: NaN (not checked) until a chunk's answers are
        self.clearance = None if collision is None else np.full(P, np.nan)
        self.world_version = None if collision is None else collision.world.version

    def put(self, p0, r: IKResult) -> None:
        p1 = p0 + len(r)
        self.q[p0:p1], self.success[p0:p1] = r.q, r.success
        self.pe[p0:p1], self.re[p0:p1] = r.position_error, r.orientation_error
        self.iterations[p0:p1], self.seed_index[p0:p1] = r.iterations, r.seed_index
        self.status[p0:p1] = r.status
        self.messages[p0:p1] = r.messages
        if r.clearance is not None:
            if self.clearance is None:
                self.clearance = np.full(len(self.success), np.nan)
            self.clearance[p0:p1] = r.clearance
            self.world_version = r.world_version

    invalid = None

    def mark_invalid(self, invalid, msgs) -> None:
        """Problems whose goal or seed is bad are INVALID_INPUT, started or not."""
        if not invalid.any():
            return
        self.invalid = invalid
        self.status[invalid] = Status.INVALID_INPUT
        for p in np.nonzero(invalid)[0]:
            self.messages[p] = msgs.get(int(p), "invalid goal or seed")

    def cancelled_from(self, p0) -> None:
        """Problems ``p0:`` (not started) were reached by a cancel; the invalid ones stay so."""
        msg = "cancelled before this problem was started"
        if self.invalid is None or not self.invalid[p0:].any():
            self.status[p0:] = Status.PREEMPTED
            self.messages[p0:] = [msg] * (len(self.messages) - p0)
            return
        for p in np.nonzero(~self.invalid[p0:])[0] + p0:
            self.status[p] = Status.PREEMPTED
            self.messages[p] = msg

    def result(self, t0) -> IKResult:
        return IKResult(q=self.q, success=self.success, position_error=self.pe,
                        orientation_error=self.re, iterations=self.iterations,
                        seed_index=self.seed_index, status=self.status,
                        messages=self.messages, solve_time=time.perf_counter() - t0,
                        clearance=self.clearance, world_version=self.world_version)


def _sanitized(obj, invalid, xp):
    """``obj`` with the goals of the problems ``invalid`` made harmless (an objective's own
    ``sanitized``, the pose goal's here), so that the batch's arithmetic stays finite."""
    if isinstance(obj, PoseObjective):
        T = obj.targets.copy()
        T[xp.asarray(invalid)] = xp.eye(4)
        return PoseObjective(obj.model, obj.link_name, T, obj.weights)
    if hasattr(obj, "sanitized"):
        return obj.sanitized(invalid)
    return obj


def select(model, objectives, cfg, q, rows_seed, conv, iters, pe, re, timed_out, invalid, msgs,
           P, K, t0, *, cancelled: bool = False, collision=None, refine_with=None,
           constraints=()) -> IKResult:
    """One answer per problem from its K rows (problem-major): with cost terms
    (``refine_with``), the converged row of least cost (0.5 |rows|^2 of the cost terms, at the
    row finalized; the first in seed order on a tie), whatever the solve mode, so that the
    refinement then lowers the cost inside the best branch; else the converged row the solve
    mode prefers (speed: the first in seed order; distance: nearest the problem's seed,
    wrap-aware; manipulability: the largest); else the row with the smallest scaled error;
    continuous joints wrapped near the seed, limits; then verified by FK against the
    tolerances and the limits (the success flag never trusts the solver's own numbers)."""
    xp = get_xp(q)
    # continuous joints within pi of the problem's seed (not of a restart row's random seed),
    # as ChainSolver and the GPU kernels return them; finalize_q works row by row, so in speed
    # mode (a key of convergence and iterations alone) only the winning rows are finalized
    speed = cfg.solve_mode is SolveMode.SPEED and refine_with is None
    if not speed:
        q = finalize_q(model, q, xp.repeat(rows_seed[::K], K, axis=0))
    conv_n = to_numpy(conv).reshape(P, K)
    iters_n = to_numpy(iters).reshape(P, K)
    if refine_with is not None:  # the cost terms choose: the converged row of least cost
        rows_p = xp.repeat(xp.arange(P), K)
        _, _, c, _ = evaluate(model, refine_with[1], q, rows_seed, rows_p, need_jacobian=False)
        key = np.where(conv_n, to_numpy(c).reshape(P, K), np.inf)
    elif speed:  # the first converged seed in seed order (as seeds run one after the other)
        key = np.where(conv_n, np.arange(K), np.iinfo(np.int64).max)
    elif cfg.solve_mode is SolveMode.DISTANCE:
        d = to_numpy(seed_distance(model, q, xp.repeat(rows_seed[::K], K, axis=0))).reshape(P, K)
        key = np.where(conv_n, d, np.inf)
    else:
        J, _ = jacobians_all(model, q, [o.link_name for o in objectives
                                        if hasattr(o, "link_name")][:1] or None)
        Jm = J.reshape(J.shape[0], -1, J.shape[-1])
        w = to_numpy(xp.sqrt(xp.clip(xp.linalg.det(Jm @ xp.swapaxes(Jm, 1, 2)), 0, None)))
        key = np.where(conv_n, -w.reshape(P, K), np.inf)
    # Problems with no converged seed: report the row with the smallest goal error.
    err = (to_numpy(pe) / cfg.position_tolerance + to_numpy(re) / cfg.orientation_tolerance)
    err = err.reshape(P, K)
    any_conv = conv_n.any(axis=1)
    win = np.where(any_conv, np.argmin(key, axis=1), np.argmin(err, axis=1))
    rows = np.arange(P) * K + win
    q_best = q[xp.asarray(rows)]
    if speed:
        q_best = finalize_q(model, q_best, rows_seed[::K])
    seeds0 = rows_seed[::K]
    if refine_with is not None:  # the secondary terms' cost lowered (the converged answers)
        primary, secondary, fixed = refine_with
        q_best = refine(model, primary, secondary, q_best, seeds0, xp.arange(P), cfg,
                        xp.asarray(any_conv & ~invalid),
                        None if fixed is None else const(xp, fixed))
    # Honest verification: FK at the returned q against the caller's tolerances and limits.
    _, _, _, ctx = evaluate(model, objectives, q_best, seeds0, xp.arange(P), need_jacobian=False)
    pe_f, re_f = (to_numpy(a) for a in goal_errors(objectives, ctx, xp.arange(P)))
    qn = to_numpy(q_best)
    in_limits = np.all((qn >= model.lower - 1e-12) & (qn <= model.upper + 1e-12), axis=1)
    ok = (pe_f <= cfg.position_tolerance) & (re_f <= cfg.orientation_tolerance) & in_limits
    ok &= ~invalid
    if constraints:  # the constraint terms kept (else NOT_CONVERGED, as the compiled source)
        cv = residual_constraints(constraints, ctx, xp.arange(P))
        ok &= to_numpy(cv) >= 0
    unsolved = (Status.PREEMPTED if cancelled else
                Status.TIMED_OUT if timed_out else Status.NOT_CONVERGED)
    clear = which = None
    if collision is not None:  # the exact distances of the answer, not the penalty's value
        d, which = collision.nearest(ctx)
        clear, which = to_numpy(d), to_numpy(which)
        colliding = ok & (clear < collision.margin)
        ok &= ~colliding
    status = np.where(ok, Status.CONVERGED, np.where(invalid, Status.INVALID_INPUT, unsolved))
    if clear is not None:
        status = np.where(colliding, Status.IN_COLLISION, status)
    messages = [""] * P
    for p, m in msgs.items():
        messages[p] = m
    nc = np.nonzero(~ok & ~invalid)[0]
    for p in nc[:1000]:
        if clear is not None and colliding[p]:
            messages[p] = collision_message(collision, clear[p], int(which[p]))
        else:
            messages[p] = unsolved_message(timed_out, pe_f[p], re_f[p], cfg,
                                           cancelled=cancelled)
    pe_f[invalid] = np.nan
    re_f[invalid] = np.nan
    return IKResult(q=qn, success=ok, position_error=pe_f, orientation_error=re_f,
                    iterations=iters_n[np.arange(P), win], seed_index=win,
                    status=status.astype(np.int64), messages=messages,
                    solve_time=time.perf_counter() - t0, clearance=clear,
                    world_version=None if collision is None else collision.world.version)


def collision_message(collision, distance: float, which: int) -> str:
    """The message of an answer within the tolerances that keeps too little clearance."""
    return (f"in collision: {collision.describe(which)} {distance:.3g} m apart (margin "
            f"{collision.margin:g} m); every answer found within the tolerances collides")
