"""The prepared solver: the one place where a backend is chosen.

An :class:`IKSolver` is built once for a model, its tips, an :class:`IKConfig`, a solver name
and an array module, and fixes its backend then (Newton's ``IKSolver`` idea); every call of
``solve`` runs on that backend, so the same request gives the same answer on every run,
however warm the process is. Every public entry point (:func:`.solve_pose`, :func:`.solve_ik`,
:class:`.ChainSolver`, :func:`.trajectory_seed`, the node, reach studies) goes through one.

Backends (:data:`BACKENDS`):

- ``"host"``: the one compiled source built for this CPU (:mod:`ros2_ik.backends.host`);
- ``"cuda"``: the same source on a GPU through CuPy (:mod:`ros2_ik.backends.cuda`);
- ``"reference"``: the readable spec on ``xp`` (:mod:`ros2_ik.ik.batch`), for everything
  the compiled source does not cover: joints other than revolute, continuous, prismatic and
  fixed on a tip's path, the ``manipulability`` solve mode, CCD on several tips or on a GPU,
  and machines without a C++ compiler.
- ``"auto"`` (the default): ``"cuda"`` for CuPy input, ``"host"`` for NumPy input, where they
  cover the request, else ``"reference"``; :attr:`IKSolver.reason` says why.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from typing import Sequence

import numpy as np

from ..backend import get_xp, to_numpy
from ..errors import BackendUnavailableError, InputTypeError, InvalidInputError, ShapeError
from ..ik.batch import RESULT_COST, reference_solve
from ..backends.result import result_of
from ..ik.checks import (SOLVERS, check_call_options, check_collision, check_seed_shape,
                         check_start_time)
from ..ik.config import IKConfig, IKResult, SolveMode, Status
from ..ik.objectives import PoseObjective, check_weights
from ..ik.seeds import movable_coordinates, restart_seeds
from ..kinematics.se3 import pq_to_pose
from ..model import MAX_BATCH, Model, check_model
from ..validate import (MAX_TIMEOUT, as_float_array, check_names, check_number, describe,
                        link_index)

__all__ = ["IKSolver", "BACKENDS", "prepared_solver", "check_targets", "compiled_status",
           "world_warnings"]

BACKENDS = ("auto", "host", "cuda", "reference")
#: most moving joints (Jacobian columns) a compiled solver is generated for: its normal
#: equations are unrolled, so the source grows with the square of this
MAX_COLUMNS = 48
#: most coordinates of a model a compiled solver is generated for (each has its own lines)
MAX_COORDINATES = 512
#: most joints on the tips' paths a compiled solver is generated for: each is unrolled into
#: its own lines (about 7 kB of source a joint), and g++'s time grows faster than the source
#: (a 100-joint chain: 10 s; 400 joints: a minute)
MAX_PATH_JOINTS = 64
#: whether the CUDA backend carries the collision terms
COMPILED_COLLISIONS_GPU = True

_log = logging.getLogger("ros2_ik.api")

#: why the host backend is not available on this machine (None: not looked at, or available)
_host_unavailable: list = []


def compiled_status() -> str:
    """One line for a log or a diagnostic: whether compiled backends can be built here."""
    from ..backends import host  # noqa: PLC0415 - no compiler lookup at import

    cxx = host.available()
    if cxx is None:
        return ("no C++ compiler found (g++ or $CXX): the reference backend answers every "
                "request, with the same contract, more slowly")
    return f"compiled kernels built with {cxx}, cached in {host.cache_dir()}"


def check_targets(targets, tips: Sequence[str], xp):
    """Targets as float64 (P, T, 4, 4) or (P, T, 7) on ``xp``, for T = len(tips): (P, 4, 4) /
    (P, 7), and one goal (4, 4) / (7,), are taken for one tip; shapes refused with a message
    naming the expected ones."""
    t = as_float_array(targets, "targets", "shape (P, 4, 4) or (P, 7) per tip",
                       xp).astype(xp.float64, copy=False)
    T = len(tips)
    if T == 1 and (t.shape == (4, 4) or t.shape == (7,)):
        t = t[None]  # one goal for one tip
    if T == 1 and ((t.ndim == 2 and t.shape[1] == 7) or (t.ndim == 3 and t.shape[1:] == (4, 4))):
        t = t[:, None]  # (P, 7) / (P, 4, 4) for one tip -> (P, 1, ...)
    if t.ndim == 2 and T > 1:
        raise ShapeError(f"targets for {T} tips must have shape (P, {T}, 4, 4) or (P, {T}, 7), "
                         f"got {tuple(t.shape)}")
    if t.ndim < 3 or t.shape[1] != T or t.shape[2:] not in ((4, 4), (7,)):
        raise ShapeError(f"targets must have shape (P, 4, 4) / (P, 7) for one tip or "
                         f"(P, {T}, 4, 4) / (P, {T}, 7) for tips {list(tips)}, got "
                         f"{tuple(t.shape)}")
    if t.shape[0] == 0:
        raise InvalidInputError("empty batch: no targets given")
    return t


class IKSolver:
    """Prepared pose IK for one model, tip set, config and solver; its backend is fixed here.

    Args:
        model: the robot.
        tips: link names (default ``model.tips``); several tips solve one goal per tip at once.
        config: :class:`IKConfig`; its ``timeout`` is the default of :meth:`solve`'s.
        solver: "dls", "ccd" or "ccd+dls" (:data:`ros2_ik.ik.SOLVERS`).
        backend: one of :data:`BACKENDS`.
        xp: the array module of the inputs (NumPy, or CuPy for the GPU).
        collision: the robot's :class:`~ros2_ik.model.collision.CollisionModel` when
            ``config.avoid_collisions`` (default: the model's own,
            :func:`ros2_ik.ik.collision.default_collision_model`); the world is given per
            :meth:`solve`. A model with links whose declared geometry has no spheres (a mesh
            not found) is refused (:class:`~ros2_ik.model.collision.CollisionGeometryError`,
            naming them) unless it was built with ``accept_missing=True``.
        terms: more terms of the solve (:mod:`ros2_ik.ik.terms`: a :class:`Posture` ...),
            besides the pose goal of the tips and the collision constraint; what they take per
            call are keyword arguments of :meth:`solve` (their ``arguments``). A goal term
            (:class:`~ros2_ik.ik.terms.GoalSet`) takes the place of the pose goal.
    """

    def __init__(self, model: Model, tips: Sequence[str] | str | None = None,
                 config: IKConfig | None = None, *, solver: str = "dls",
                 backend: str = "auto", xp=np, collision=None, terms=()):
        self.model = model = check_model(model)
        self.terms = check_terms(terms)
        goals = [t for t in self.terms if t.kind == "goal"]
        if len(goals) > 1:
            raise InvalidInputError(f"terms holds {len(goals)} goal terms; give one (it takes "
                                    "the place of the pose goal)")
        #: the goal term that takes the place of the pose goal, or None
        self.goal = goals[0] if goals else None
        if self.goal is not None and solver != "dls":
            raise InvalidInputError(f"a {type(self.goal).__name__} needs solver 'dls' (CCD "
                                    "turns towards one pose)")
        tips = model.tips if tips is None else tips
        self.tips = tuple(check_names(tips, "tips"))
        if not self.tips:
            raise InvalidInputError("no tip link given and the model has no default tip")
        for tip in self.tips:
            link_index(model, tip, "tips")  # UnknownLinkError listing the valid names
        check_collision(collision)
        self.config = check_call_options(config, solver, None)
        self.solver = solver
        self.xp = xp
        self.collision = None
        self._objective = ()
        self._touch_seen = None
        #: what the last world given makes unsolvable (links touching an obstacle everywhere)
        self.world_warnings: list = []
        #: what makes the collision model unsolvable at this margin (pairs never clear)
        self.collision_warnings: list = []
        if self.config.avoid_collisions:
            from ..ik.collision import default_collision_model  # noqa: PLC0415
            from ..model.collision import CollisionModel  # noqa: PLC0415

            if collision is None:
                collision = default_collision_model(model, within=self.config.collision_margin)
            elif not isinstance(collision, CollisionModel):
                raise InputTypeError(f"collision must be a CollisionModel (collision_model("
                                     f"model, ...)), got {describe(collision)}")
            if solver == "ccd":
                raise InvalidInputError("collision avoidance needs solver 'dls' or 'ccd+dls' "
                                        "(CCD alone does not see collisions)")
            collision.check_complete()  # links whose geometry has no spheres: refused
            self.collision = collision
            self._warn_never_clear(collision)
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise InvalidInputError(f"backend must be one of {BACKENDS}, got {describe(backend)}")
        #: the build whose end this solver waits for, answering with the reference meanwhile
        #: (a thread that does not wait for builds: ros2_ik.backends.host.set_background_builds)
        self._building = ""
        #: the backend asked for ("auto", "host", "cuda" or "reference")
        self.requested_backend = backend
        self.backend, self.reason, self._impl = self._choose(backend)
        # the first pass's cover and the pairs it keeps fine are the collision model's: made
        # here, as the kernels are, not in the first solve's time (a world's part is measured
        # per obstacle in the solve, and kept)
        self._first_pass(None, None)

    def _warn_never_clear(self, collision) -> None:
        """A warning (and :attr:`collision_warnings`) naming the checked pairs that are within
        the margin in nearly every configuration, whichever constructor made the model
        (:func:`~ros2_ik.ik.collision.default_collision_model` checks them for contact
        itself)."""
        import warnings  # noqa: PLC0415

        from ..ik.collision import always_text, always_within  # noqa: PLC0415
        from ..model.collision import CollisionWarning  # noqa: PLC0415

        margin = self.config.collision_margin
        always = always_within(self.model, collision, margin)
        if always:
            text = ("the collision model has self-collision pairs that are never clear: "
                    + always_text(always, margin) + ", so nearly every answer will be "
                    "IN_COLLISION or NOT_CONVERGED; disable them in the SRDF "
                    "(ros2_ik_collision_pairs lists them), fit tighter spheres, lower "
                    "collision_margin, or build the model with default_collision_model(model, "
                    "srdf, within=margin), which checks them for contact only (their spheres "
                    "may come within the margin, never overlap), with a warning")
            warnings.warn(text, CollisionWarning, stacklevel=3)
            self.collision_warnings.append(text)

    @property
    def host(self):
        """The compiled host solver (:class:`ros2_ik.backends.host.HostSolver`) this solver
        answers with, or None on another backend."""
        return self._impl if self.backend == "host" else None

    @property
    def building(self) -> bool:
        """The compiled kernels of this solver are still being built in the background (it
        answers with the reference meanwhile; :func:`prepared_solver` gives the compiled one
        once they are)."""
        if not self._building:
            return False
        from ..backends.host import building  # noqa: PLC0415

        return building(self._building)

    # ------------------------------------------------------------------ backend choice
    def _covered(self, gpu: bool) -> str | None:
        """Why the compiled source does not cover this solver (None: it does)."""
        from ..backends.codegen import chain_of  # noqa: PLC0415

        cfg = self.config
        chain = chain_of(self.model, self.tips)
        if chain is None:
            return ("a joint on a tip's path is not revolute, continuous, prismatic or fixed, "
                    "or no joint moves a tip")
        if self.collision is not None:
            if gpu and not COMPILED_COLLISIONS_GPU:
                return "collision avoidance on a GPU runs on the reference"
            if chain_of(self.model, self.tips, self.collision) is None:
                return ("a joint on a collision link's path is not revolute, continuous, "
                        "prismatic or fixed")
        if len(chain.qi) > MAX_PATH_JOINTS:
            return (f"{len(chain.qi)} joints lie on the tips' paths: the compiled source unrolls "
                    f"each, up to {MAX_PATH_JOINTS} (g++ would take minutes)")
        if self.terms:
            from ..backends.terms import REGISTRY  # noqa: PLC0415

            for t in self.terms:
                if t.name not in REGISTRY:
                    return f"term {type(t).__name__} has no compiled emitter"
            if gpu:
                return "the GPU kernels carry the pose goal and the collisions only"
        if chain.nc > MAX_COLUMNS:
            return (f"{chain.nc} joints move the tips: the compiled source unrolls its matrices "
                    f"up to {MAX_COLUMNS}")
        if self.model.nq > MAX_COORDINATES:
            return (f"the model has {self.model.nq} coordinates: the compiled source is "
                    f"generated for up to {MAX_COORDINATES}")
        if cfg.solve_mode is SolveMode.MANIPULABILITY:
            return "the compiled source selects by speed and distance, not manipulability"
        if gpu and cfg.solve_mode is not SolveMode.SPEED:
            return "the GPU kernels select by speed only"
        if self.solver != "dls" and (gpu or len(self.tips) > 1):
            return "compiled CCD runs on the host, for one tip"
        return None

    def _choose(self, backend: str):
        gpu = self.xp is not np
        if backend == "reference":
            return "reference", "asked for", None
        want = backend if backend != "auto" else ("cuda" if gpu else "host")
        if (want == "cuda") != gpu:
            kind = "CuPy" if want == "cuda" else "NumPy"
            raise InvalidInputError(f"backend {want!r} takes {kind} arrays, got "
                                    f"{'CuPy' if gpu else 'NumPy'} ones")
        why = self._covered(gpu)
        if why is None:
            try:
                return want, "", self._build(want)
            except BackendUnavailableError as exc:
                why = str(exc)
                self._building = getattr(exc, "key", "")
            except RuntimeError as exc:  # a build that failed: the reference answers
                why = f"the compiled kernels could not be built: {str(exc).splitlines()[0]}"
                _log.warning("%s (model %r, tips %s)", why, self.model.name, list(self.tips))
        if backend != "auto":
            raise BackendUnavailableError(f"backend {backend!r} cannot solve this request: {why}")
        return "reference", why, None

    def _build(self, which: str):
        from ..backends.codegen import chain_of  # noqa: PLC0415

        m, cfg = self.model, self.config
        chain = chain_of(m, self.tips, self.collision,
                         [t.compiled_name for t in self.terms if t is not self.goal],
                         goal="pose" if self.goal is None else self.goal.compiled_name)
        K = int(cfg.num_seeds)
        rnd = restart_seeds(m, K, cfg.rng_seed, movable_coordinates(m, self.tips))[0]
        if which == "host":
            from ..backends.host import HostSolver  # noqa: PLC0415

            if chain.coll is None:
                return HostSolver(m, chain, cfg, rnd, self.solver)
            # the collision model is data to the kernels: one compiled solver serves every
            # collision model of the same structure (a scene's attached objects, padding and
            # allowed pairs change data, not code)
            cc = chain.coll
            key = (tuple(chain.tips), _with_timeout(cfg, None), self.solver, chain.terms,
                   tuple((n.link, n.parent, n.qi, n.col) for n in cc.nodes),
                   tuple(sorted((int(k), int(v[0])) for k, v in cc.anchors.items())))
            kept = m.memo("api.solver.host_collision", key,
                          lambda: HostSolver(m, chain, cfg, rnd, self.solver), max_keys=64)
            return kept
        from ..backends.cuda import GpuSolver  # noqa: PLC0415

        return GpuSolver(m, self.tips, cfg, xp=self.xp, collision=self.collision)

    # ------------------------------------------------------------------ solve
    def solve(self, targets, *, seeds=None, weights=(1, 1, 1, 1, 1, 1), should_stop=None,
              timeout: float | None = ..., start_time: float | None = None,
              world=None, **term_args) -> IKResult:
        """Solve P pose problems.

        Args:
            targets: (P, 4, 4) or (P, 7) [x y z qx qy qz qw] for one tip; for T tips
                (P, T, 4, 4) or (P, T, 7); in the model's base frame.
            seeds: (P, nq) or (nq,); default mid-range.
            weights: (6,) or (P, 6) per-axis weights in the target frame (x y z rx ry rz); 0
                frees an axis.
            should_stop: polled while the solve runs; True ends it (cancel).
            timeout: [s] overrides ``config.timeout`` (None: no limit).
            start_time: ``time.perf_counter()`` when the caller's call began (the timeout
                counts from there); default now.
            world: the :class:`~ros2_ik.world.World` the answers must keep clear of (with
                ``config.avoid_collisions``; None: self-collision only).
            term_args: what the solver's terms take per call (``rest=`` of a
                :class:`~ros2_ik.ik.terms.Posture` ...).
        Returns:
            :class:`IKResult`; every success verified by FK against the tolerances and limits
            (and, with collision avoidance, by the exact distances: ``clearance``).
        """
        t0 = time.perf_counter() if start_time is None else float(check_start_time(start_time))
        check_call_options(self.config, self.solver, should_stop)
        xp = get_xp(targets)
        t = self.targets_of(targets, xp)
        cfg = self.config
        if timeout is not ... and timeout is not cfg.timeout:
            timeout = check_number(timeout, "timeout", low=0.0, high=MAX_TIMEOUT,
                                   allow_none=True)
            if timeout != cfg.timeout:
                cfg = _with_timeout(cfg, timeout)
        world = self.check_world(world)
        calls = self.term_calls(t.shape[0], seeds, term_args, xp, t, weights)
        cover = self._first_pass(world, seeds)
        r = self._solve_once(t, seeds, weights, should_stop, cfg, t0, world, calls,
                             self.collision if cover is None else cover)
        if cover is not None:
            r = self._second_pass(r, t, seeds, weights, should_stop, cfg, t0, world, calls)
        r.backend = self.backend
        for term, call in calls:
            term.finish(self.model, call, r)
        if self.collision is not None:
            self._say_held(r, world)
        return r

    def _solve_once(self, t, seeds, weights, should_stop, cfg, t0, world, calls, collision):
        """One pass over the problems with collision model ``collision`` (this solver's, or its
        first pass's cover)."""
        if self._impl is None:
            per_tip = getattr(weights, "ndim", 0) == 3  # (P, T, 6): solve_ik's objectives
            objs = ([goal.objective(self.model, call) for goal, call in calls
                     if goal is self.goal] or
                    [PoseObjective(self.model, tip, t[:, k], weights[:, k] if per_tip else weights)
                     for k, tip in enumerate(self.tips)])
            return reference_solve(self.model, objs, seeds=seeds, config=cfg, solver=self.solver,
                                   should_stop=should_stop, start_time=t0,
                                   collision=self.collision_objective(world, collision),
                                   secondary=[term.objective(self.model, call)
                                              for term, call in calls if term.kind == "cost"],
                                   constraints=[term.objective(self.model, call)
                                                for term, call in calls
                                                if term.kind == "constraint"])
        if self.backend == "cuda":
            return self._impl.solve(t, seeds=seeds, weights=weights, should_stop=should_stop,
                                    timeout=cfg.timeout, start_time=t0, world=world)
        return self._solve_host(t, seeds, weights, should_stop, cfg.timeout, t0, world, calls,
                                collision)

    def _first_pass(self, world, seeds):
        """The cover a solve with ``world`` from ``seeds`` takes first
        (:mod:`ros2_ik.ik.cover`), or None."""
        if self.collision is None or self.backend == "cuda":
            return None
        from ..ik.cover import first_pass  # noqa: PLC0415

        c = self.config
        return first_pass(self.model, self.collision, world, c.collision_cover,
                          c.collision_margin, seeds)

    def _second_pass(self, r, t, seeds, weights, should_stop, cfg, t0, world, calls):
        """The problems the first pass left (no answer within the tolerances, or none clear on
        the cover) solved again on the fine spheres, with what is left of the timeout; their
        answers replace the first pass's. Those without an answer within the tolerances that
        no seed reaches even without collision avoidance (a pose out of reach) are not."""
        left = np.nonzero((r.status == Status.NOT_CONVERGED) |
                          (r.status == Status.IN_COLLISION))[0]
        if not left.size:
            return r
        args = {}
        for term, call in calls:
            args.update(term.arguments_of(call))
        nc = np.nonzero(r.status[left] == Status.NOT_CONVERGED)[0]
        if nc.size:  # the screen: a collision-free solve of those
            free = self.variant(dataclasses.replace(cfg, avoid_collisions=False))
            ft, fs, fw, fa = _rows_of(left[nc], t, seeds, weights, args)
            rf = free.solve(ft, seeds=fs, weights=fw, should_stop=should_stop,
                            timeout=cfg.timeout, start_time=t0, **fa)
            out = rf.status == Status.NOT_CONVERGED  # (one that timed out is not ruled out)
            left = np.setdiff1d(left, left[nc][out])
            if not left.size:
                return r
        sub_t, sub_s, sub_w, sub_a = _rows_of(left, t, seeds, weights, args)
        sub_calls = self.term_calls(left.size, sub_s, sub_a, get_xp(t), sub_t, sub_w)
        r2 = self._solve_once(sub_t, sub_s, sub_w, should_stop, cfg, t0, world, sub_calls,
                              self.collision)
        return r.put(left, r2, time.perf_counter() - t0)

    @property
    def held_joints(self) -> tuple[str, ...]:
        """The coordinates this solver holds at the seed in every answer (joints off the
        paths to its tips: a gripper, another arm; :mod:`ros2_ik.ik.held`)."""
        from ..ik.held import held_joints  # noqa: PLC0415

        return held_joints(self.model, self.tips)

    def _say_held(self, r, world) -> None:
        """The messages of failed collision-aware problems say when a part this solve holds at
        the seed is within the margin of an obstacle or of another part that does not move
        (then no answer can be clear)."""
        from ..ik.held import MAX_EXPLAINED, held_collisions  # noqa: PLC0415

        st = to_numpy(r.status)
        bad = np.nonzero((st == Status.IN_COLLISION) | (st == Status.NOT_CONVERGED))[0]
        if not bad.size or not r.messages:
            return
        bad = bad[:MAX_EXPLAINED]  # (nothing held: answered at once, from kept masks)
        texts = held_collisions(self.model, self.collision, to_numpy(r.q)[bad], world,
                                self.config.collision_margin, self.tips)
        for i, text in zip(bad.tolist(), texts):
            if text:
                r.messages[i] = f"{r.messages[i]}; {text}" if r.messages[i] else text

    def targets_of(self, targets, xp=np):
        """``targets`` checked for this solver: (P, T, 4, 4) / (P, T, 7) for its tips, or
        its goal term's (a goal set: (P, N, T, 4, 4))."""
        if self.goal is not None:
            return self.goal.targets(targets, self.tips, xp)
        return check_targets(targets, self.tips, xp)

    def seeds_of(self, seeds, P: int, xp=np):
        """The seeds of P problems as a solve takes them: (P, nq) (None: mid-range; one
        seed: a view of it for every problem)."""
        m = self.model
        if seeds is None:
            return xp.broadcast_to(xp.asarray(m.neutral_q()), (P, m.nq))
        s = check_seed_shape(m, seeds, P, xp)
        return s if s.ndim == 2 else xp.broadcast_to(s, (P, m.nq))

    def variant(self, config: IKConfig) -> "IKSolver":
        """The prepared solver of this one's model, tips, solver, backend, collision model and
        terms with another ``config``."""
        return prepared_solver(self.model, list(self.tips), config, self.solver,
                               self.requested_backend, self.xp, self.collision, self.terms)

    def solve_k_best(self, targets, k: int, *, min_distance: float = 0.1, seeds=None,
                     weights=(1, 1, 1, 1, 1, 1), should_stop=None, timeout=..., world=None,
                     start_time: float | None = None, distinct_branches: bool = False,
                     **term_args):
        """Up to ``k`` distinct answers a problem, best first (:mod:`ros2_ik.api.kbest`):
        every answer verified as :meth:`solve`'s (FK, limits, the terms' constraints and,
        with collision avoidance, the exact distances), ranked by the solve mode's cost, each
        at least ``min_distance`` [rad or m, wrap-aware L-infinity] from those before it;
        ``distinct_branches``: every angle modulo 2 pi (answers that differ by whole turns of
        joints are one configuration branch). Returns a
        :class:`~ros2_ik.api.kbest.KBestResult`."""
        from .kbest import solve_k_best  # noqa: PLC0415

        return solve_k_best(self, targets, k, min_distance=min_distance, seeds=seeds,
                            weights=weights, should_stop=should_stop, timeout=timeout,
                            world=world, start_time=start_time,
                            distinct_branches=distinct_branches, **term_args)

    def term_calls(self, P: int, seeds, args: dict, xp, targets=None, weights=None) -> list:
        """[(term, its checked arguments for this call)] of the solver's terms; an argument no
        term takes is an IKError naming it. Every call holds the coordinates the solve moves
        (``coords``), the tips and the config; the goal term's also the targets (``goal
        .targets``'s) and the weights (P, T, 6)."""
        known = {a for term in self.terms for a in term.arguments}
        unknown = sorted(set(args) - known)
        if unknown:
            raise InvalidInputError(
                f"solve() got unknown argument(s) {unknown}: the solver's terms take "
                f"{sorted(known) or 'none'} (terms: {[type(x).__name__ for x in self.terms]})")
        if not self.terms:
            return []
        m = self.model
        full = self.seeds_of(seeds, P, xp)
        coords = np.nonzero(movable_coordinates(m, self.tips))[0]
        out = []
        for term in self.terms:
            call = term.check(m, P, full, args)
            call.update(coords=coords, tips=self.tips, config=self.config)
            if term is self.goal:
                w = _host_weights(weights, P, len(self.tips))
                call.update(targets=targets, weights=xp.broadcast_to(
                    xp.asarray(w), (P, len(self.tips), 6)))
            out.append((term, call))
        return out

    def check_world(self, world):
        """``world`` checked for this solver (a :class:`~ros2_ik.world.World` or None; one
        given without collision avoidance is an error); its warnings about obstacles that
        touch the robot where it cannot move away are :attr:`world_warnings`."""
        if world is None:
            return None
        from ..world import World  # noqa: PLC0415

        if not isinstance(world, World):
            raise InputTypeError(f"world must be a ros2_ik.world.World, got {describe(world)}")
        if self.collision is None and len(world):
            raise InvalidInputError("a world was given but collision avoidance is off; build "
                                    "the solver with IKConfig(avoid_collisions=True)")
        if len(world) and self._touch_seen is not world:
            self._touch_seen = world
            self.world_warnings = world_warnings(self.model, self.collision, world,
                                                 self.config.collision_margin)
            for text in self.world_warnings:
                import warnings  # noqa: PLC0415

                from ..model.collision import CollisionWarning  # noqa: PLC0415

                warnings.warn(text, CollisionWarning, stacklevel=4)
        return world

    def collision_objective(self, world=None, collision=None):
        """The :class:`~ros2_ik.ik.collision.CollisionObjective` of this solver's options and
        ``world`` (on ``collision``, default this solver's collision model), or None with
        collision avoidance off."""
        if self.collision is None:
            return None
        cm = self.collision if collision is None else collision
        kept = self._objective  # the last two (world, model, objective): both immutable
        for w, c, obj in kept:
            if w is world and c is cm:
                return obj
        from ..ik.collision import CollisionObjective  # noqa: PLC0415

        c = self.config
        obj = CollisionObjective(self.model, cm, world, margin=c.collision_margin,
                                 activation=c.collision_activation, weight=c.collision_weight,
                                 self_collisions=c.self_collisions)
        self._objective = ((world, cm, obj),) + kept[:1]
        return obj

    def _solve_host(self, t, seeds, weights, should_stop, timeout, t0, world,
                    calls=(), collision=None) -> IKResult:
        m = self.model
        P, T = t.shape[0], len(self.tips)
        K = int(self.config.num_seeds)
        if P * K > MAX_BATCH:
            raise InvalidInputError(f"{P} problems x {K} seeds = {P * K} rows exceeds the limit "
                                    f"{MAX_BATCH}; split the batch or use fewer seeds")
        if seeds is None:
            s = m.tables.neutral_q
        else:
            s = check_seed_shape(m, seeds, P, np)
            if s.dtype != np.float64:
                s = s.astype(np.float64)
        budget = -1
        if timeout is not None:
            # the answers of a large batch take time to write after the kernels stop: that
            # time (learnt on this machine, as the reference's) is kept out of their budget,
            # and a batch whose answers alone would end it past the timeout is refused
            if P >= RESULT_COST.MIN_ROWS:
                RESULT_COST.check(P, m.nq, t0 + timeout, start=t0)
            reserve = RESULT_COST.estimate(P, m.nq) if P >= RESULT_COST.MIN_ROWS else 0.0
            budget = max(0, int((timeout - reserve - (time.perf_counter() - t0)) * 1e9))
        data = {"_P": P}
        if self.goal is None:
            data.update(pose_target=pq_to_pose(t) if t.shape[-1] == 7 else t,
                        pose_weight=_host_weights(weights, P, T))
        for term, call in calls:
            for field, value in term.data(m, call).items():
                data[f"{term.name}_{field}"] = value
        collision = self.collision if collision is None else collision
        if collision is not None:
            sc = self._impl.scene(collision, world)
            data["collision_scene"] = (sc.data, sc.n_obs)
        out, stopped = self._impl.solve(data, s, should_stop=should_stop, budget_ns=budget,
                                        clock0=time.monotonic_ns())
        t_out = time.perf_counter()
        r = result_of(m, self.config, out, s, t0, self._impl.out_fields,
                      collision=None if collision is None else
                      self.collision_objective(world, collision))
        RESULT_COST.record(P, m.nq, time.perf_counter() - t_out)
        return r


def _rows_of(rows, t, seeds, weights, args: dict):
    """(targets, seeds, weights, the terms' arguments) of problems ``rows`` (indices) of a
    call: per-problem values taken, shared ones kept."""
    xp = get_xp(t)
    P, idx = t.shape[0], xp.asarray(rows)
    s = xp.asarray(seeds)[idx] if seeds is not None and np.ndim(seeds) == 2 else seeds
    w = xp.asarray(weights)[idx] if np.ndim(weights) >= 2 and np.shape(weights)[0] == P \
        else weights
    return t[idx], s, w, {a: v[idx] for a, v in args.items()}


def check_terms(terms) -> tuple:
    """``terms`` as a tuple of :class:`~ros2_ik.ik.terms.Term` (each class at most once); an
    IKError naming the argument otherwise."""
    from ..ik.terms import Term  # noqa: PLC0415

    if isinstance(terms, Term):
        terms = (terms,)
    if not isinstance(terms, (list, tuple)) or not all(isinstance(t, Term) for t in terms):
        raise InputTypeError(f"terms must be a list of ros2_ik.ik.terms.Term (e.g. "
                             f"[Posture()]), got {describe(terms)}")
    names = [type(t).__name__ for t in terms]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"terms names a term twice: {names}; give each once")
    return tuple(terms)


def world_warnings(model, collision, world, margin: float) -> list:
    """Words for the links that touch an obstacle of ``world`` in nearly every configuration
    (:func:`ros2_ik.ik.collision.always_touching`): no clear answer exists while they do."""
    from ..ik.collision import always_touching  # noqa: PLC0415

    return [f"link {link!r} comes within the margin ({margin:g} m) of obstacle {oid!r} in "
            f"{100 * frac:.0f} % of random configurations: answers with this world will collide "
            "(is the obstacle where the robot stands? move it, allow that link to touch it, or "
            "give the link tighter spheres)"
            for link, oid, frac in always_touching(model, collision, world, margin=margin)]


def _host_weights(weights, P, T):
    """Weights as the host kernels take them: (T, 6) shared, or (P, T, 6)."""
    if type(weights) is tuple:
        try:
            hit = _CHECKED.get((weights, T))
        except TypeError:  # unhashable items: checked below (and refused there)
            hit = None
        if hit is not None:
            return hit
    raw = as_float_array(weights, "weights", f"shape (6,), ({P}, 6) or ({P}, {T}, 6)",
                         np).astype(np.float64, copy=False)
    if raw.ndim == 3:  # (P, T, 6): one set per tip (solve_ik's objectives)
        if raw.shape != (P, T, 6):
            raise ShapeError(f"weights must have shape (6,), ({P}, 6) or ({P}, {T}, 6), got "
                             f"{raw.shape}")
        if not bool(np.all(np.isfinite(raw) & (raw >= 0))):
            raise InvalidInputError("weights must be finite and >= 0 (0 frees an axis)")
        return np.ascontiguousarray(raw)
    w = np.asarray(check_weights(raw, P, np), dtype=np.float64)  # checks, (P, 6)
    if raw.shape == (6,):
        shared = np.ascontiguousarray(np.broadcast_to(raw, (T, 6)))
        if type(weights) is tuple and len(_CHECKED) < 64:
            shared.setflags(write=False)
            _CHECKED[(weights, T)] = shared
        return shared
    return np.ascontiguousarray(np.broadcast_to(w[:, None, :], (P, T, 6)))


_CHECKED: dict = {}


# ------------------------------------------------------------------ prepared solvers, kept

_TIMEOUTS: dict = {}


def _with_timeout(config: IKConfig, timeout) -> IKConfig:
    """``config`` with another ``timeout`` (kept: building an IKConfig checks every field, which
    costs more than a small solve)."""
    if config.timeout == timeout:
        return config
    key = (config, timeout)
    c = _TIMEOUTS.get(key)
    if c is None:
        c = dataclasses.replace(config, timeout=timeout)
        if len(_TIMEOUTS) >= 256:
            _TIMEOUTS.clear()
        _TIMEOUTS[key] = c
    return c


#: prepared solvers kept per model (least recently used out)
PREPARED_MAX = 32
_prepared_lock = threading.Lock()


def _build_due(s) -> bool:
    """Whether a solver answering with the reference while its kernels are built in the
    background should be replaced: they are built, or this thread waits for builds."""
    from ..backends.host import in_background  # noqa: PLC0415

    return not s.building or not in_background()


def prepared_solver(model: Model, tips, config: IKConfig, solver: str = "dls",
                    backend: str = "auto", xp=np, collision=None, terms=()) -> IKSolver:
    """The :class:`IKSolver` of these arguments, built on first use and kept with the model
    (the :data:`PREPARED_MAX` most recent; its ``timeout`` is passed per call, so a config
    that differs only in it shares the solver)."""
    cfg = _with_timeout(config, None)
    if not cfg.avoid_collisions:
        collision = None
    terms = check_terms(terms)
    key = (tuple(tips), cfg, solver, backend, xp.__name__, collision, terms)
    cache = model.memo("api.solver.prepared", "least recently used first", OrderedDict)
    with _prepared_lock:
        s = cache.get(key)
        if s is not None and not (s._building and _build_due(s)):
            cache.move_to_end(key)
            return s
        if s is not None:  # its kernels are built (or this thread waits for them): compiled
            del cache[key]
    s = IKSolver(model, list(tips), cfg, solver=solver, backend=backend, xp=xp,
                 collision=collision, terms=terms)
    with _prepared_lock:
        s = cache.setdefault(key, s)
        while len(cache) > PREPARED_MAX:
            cache.popitem(last=False)
    return s


__all__ += ["SOLVERS"]
