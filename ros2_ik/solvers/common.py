"""What every solver shares: configuration, status codes, results, seeds, selection."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

from ..backend import const, get_xp
from ..errors import InputTypeError, InvalidInputError
from ..kinematics.fk import difference, wrap_angle
from ..model import Model
from ..validate import MAX_TIMEOUT, check_int, check_number, describe

#: Largest ``max_iterations`` / ``stall_iterations`` / ``nonmonotone_iterations`` accepted.
MAX_ITERATIONS = 1_000_000_000
MAX_SEEDS = 100_000  # seeds per problem: IKConfig, the node's parameter and requests

__all__ = ["Status", "SolveMode", "IKConfig", "IKResult", "expand_seeds", "finalize_q",
           "movable_coordinates"]


class Status(enum.IntEnum):
    """Per-problem outcome; values equal the ROS error codes the node reports."""

    CONVERGED = 1
    NOT_CONVERGED = -31      # NO_IK_SOLUTION
    TIMED_OUT = -6
    INVALID_INPUT = -16      # INVALID_GOAL
    PREEMPTED = -7           # cancelled before this problem was solved


class SolveMode(str, enum.Enum):
    """How the winning seed of a problem is chosen among its converged seeds."""

    SPEED = "speed"                    # the first to converge (lowest seed index on ties)
    DISTANCE = "distance"              # closest to the seed (wrap-aware L-infinity)
    MANIPULABILITY = "manipulability"  # largest sqrt(det(J J^T)) at the solution


@dataclass(frozen=True)
class IKConfig:
    """Options of one IK solve (validated on construction).

    Tolerances are on the errors the objectives report: position [m], orientation [rad].
    ``timeout`` [s] bounds wall-clock time (None: no limit); ``max_iterations`` bounds iterations.
    ``stall_iterations`` (0: off): a seed is given up after that many iterations in a row that
    were rejected or lowered the cost by less than the factor ``stall_ratio``, which frees the
    budget for the next seed (random restarts); a problem's last seed is never given up.
    ``nonmonotone_iterations`` (0: off): in a seed's first that many iterations, LM accepts any
    step that leaves the cost below the seed's own (non-monotone acceptance), so a seed is not
    held in the first shallow basin it meets; after them, only steps that lower the cost.
    ``excursion_iterations`` (0: off) and ``excursion_stall``: a problem's last seed that, after
    ``excursion_iterations`` iterations, has made no progress for ``excursion_stall`` iterations
    in a row with a revolute joint of range under 2 pi held at a limit, starts again from its
    seed once with its revolute joints' limits lifted (the arc outside a joint's limits may be
    crossed) for at most ``excursion_iterations`` iterations. It keeps that answer only if it
    converges and every joint, moved by whole turns, is inside its limits (the same pose);
    otherwise it goes back to where it stood and goes on inside the limits. Iterations of both
    count against ``max_iterations``.
    """

    position_tolerance: float = 1e-4
    orientation_tolerance: float = 1e-3
    max_iterations: int = 100
    timeout: float | None = None
    num_seeds: int = 1
    solve_mode: SolveMode | str = SolveMode.SPEED
    rng_seed: int = 0
    lambda_initial: float = 0.1
    lambda_min: float = 1e-9
    lambda_max: float = 1e6
    lambda_up: float = 3.0
    lambda_down: float = 0.3
    use_fast_path: bool = True
    stall_iterations: int = 0
    stall_ratio: float = 0.9
    nonmonotone_iterations: int = 50
    excursion_iterations: int = 30
    excursion_stall: int = 15

    def __post_init__(self):
        # every option checked for type and range here, so a bad one never reaches a solver
        try:
            mode = SolveMode(self.solve_mode)
        except ValueError:
            raise InvalidInputError(
                f"solve_mode must be one of {[m.value for m in SolveMode]}, got "
                f"{describe(self.solve_mode)}") from None
        object.__setattr__(self, "solve_mode", mode)
        for name in ("position_tolerance", "orientation_tolerance", "lambda_initial",
                     "lambda_min", "lambda_max", "lambda_up", "lambda_down"):
            object.__setattr__(self, name, check_number(getattr(self, name), name, low=0.0,
                                                        low_open=True))
        object.__setattr__(self, "timeout", check_number(self.timeout, "timeout", low=0.0,
                                                         high=MAX_TIMEOUT, allow_none=True))
        for name, lo, hi in (("max_iterations", 1, MAX_ITERATIONS), ("num_seeds", 1, MAX_SEEDS),
                             ("stall_iterations", 0, MAX_ITERATIONS),
                             ("nonmonotone_iterations", 0, MAX_ITERATIONS),
                             ("excursion_iterations", 0, MAX_ITERATIONS),
                             ("excursion_stall", 1, MAX_ITERATIONS),
                             ("rng_seed", 0, 2**63 - 1)):
            object.__setattr__(self, name, check_int(getattr(self, name), name, low=lo, high=hi))
        object.__setattr__(self, "stall_ratio", check_number(self.stall_ratio, "stall_ratio",
                                                             low=0.0, low_open=True, high=1.0))
        if self.stall_ratio >= 1.0:
            raise InvalidInputError(f"stall_ratio must be in (0, 1), got {self.stall_ratio}")
        if not isinstance(self.use_fast_path, (bool, np.bool_)):
            raise InputTypeError(
                f"use_fast_path must be a bool, got {describe(self.use_fast_path)}")
        object.__setattr__(self, "use_fast_path", bool(self.use_fast_path))
        if not (self.lambda_min <= self.lambda_initial <= self.lambda_max):
            raise InvalidInputError("need 0 < lambda_min <= lambda_initial <= lambda_max, got "
                                    f"{self.lambda_min}, {self.lambda_initial}, "
                                    f"{self.lambda_max}")


@dataclass
class IKResult:
    """Per-problem results (P problems). Success is computed by FK against the tolerances."""

    q: np.ndarray                 # (P, nq) best configuration found (inside limits)
    success: np.ndarray           # (P,) bool
    position_error: np.ndarray    # (P,) [m]
    orientation_error: np.ndarray  # (P,) [rad]
    iterations: np.ndarray        # (P,) iterations used by the winning seed
    seed_index: np.ndarray        # (P,) which seed won (0 = the given seed)
    status: np.ndarray            # (P,) Status values
    messages: list = field(default_factory=list)  # (P,) str, empty when nothing to say
    solve_time: float = 0.0       # [s] wall clock of the whole call

    def __len__(self):
        return int(self.success.shape[0])

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.success)) if len(self) else 0.0


INVALID_GOAL_MESSAGE = ("goal contains NaN/inf, a position beyond 1e6 m or a rotation that is "
                        "not orthonormal (normalize the quaternion)")


def unsolved_message(timed_out: bool, pos_err: float, rot_err: float, cfg: IKConfig, *,
                     cancelled: bool = False) -> str:
    """The message of a problem without a solution within the tolerances."""
    why = "cancelled" if cancelled else "timed out" if timed_out else "no solution"
    return (f"{why}: best error {pos_err:.3g} m / "
            f"{rot_err:.3g} rad (tolerances {cfg.position_tolerance:g} m / "
            f"{cfg.orientation_tolerance:g} rad)")


def movable_coordinates(model: Model, links=None) -> np.ndarray:
    """(nq,) bool: the coordinates a solve for the tips ``links`` (link names or indices) may
    move: those of the joints on the paths from the base to each tip, and the leaders of the
    mimic joints on those paths. Every other coordinate stays at the problem's seed. ``None``
    (a goal without a link, e.g. a custom objective): every coordinate. Frozen joints are in
    the mask when on a path, but no solver moves them."""
    if links is None:
        return np.ones(model.nq, dtype=bool)
    ids = tuple(sorted({int(model.link_index(l)) if isinstance(l, str) else int(l)
                        for l in links}))
    return model.memo("solvers.common.movable", ids, lambda: _movable(model, ids)).copy()


def _movable(model: Model, ids) -> np.ndarray:
    on_path = set()
    leaders = set()
    for l in ids:
        while l > 0:
            on_path.add(l)
            if model.mimic_q[l] >= 0:
                leaders.add(int(model.mimic_q[l]))
            l = int(model.link_parent[l])
    m = np.array([int(j) in on_path for j in model.q_joint], dtype=bool)
    for qi in leaders:
        m[qi] = True
    return m


def restart_seeds(model: Model, num_seeds: int, rng_seed: int, movable=None):
    """The K-1 random seeds (K-1, nq) drawn from ``rng_seed``, and the mask (nq,) of coordinates
    every seed keeps from the problem's own seed: frozen joints, floating bases, unbounded
    translations (continuous joints are drawn in (-pi, pi]), and every coordinate not in
    ``movable`` (:func:`movable_coordinates`; None: all movable). The random values of the kept
    coordinates are drawn all the same, so the other coordinates do not depend on ``movable``."""
    mov = None if movable is None else np.asarray(movable, dtype=bool)
    if mov is not None and mov.shape != (model.nq,):
        raise InvalidInputError(f"movable must have shape ({model.nq},), got {mov.shape}")
    rnd, keep = model.memo("solvers.common.restart_seeds", (int(num_seeds), int(rng_seed)),
                           lambda: _restart_seeds(model, int(num_seeds), int(rng_seed)))
    rnd, keep = rnd.copy(), keep.copy()
    if mov is not None:
        keep |= ~mov
    return rnd, keep


def _restart_seeds(model: Model, num_seeds: int, rng_seed: int):
    rnd = model.random_q(np.random.default_rng(rng_seed), max(num_seeds - 1, 0))
    keep = ~(np.isfinite(model.lower) & np.isfinite(model.upper)) & ~model.q_continuous
    frozen_links = {model.joint_index(n) for n in model.frozen}
    keep |= np.array([int(l) in frozen_links for l in model.q_joint], dtype=bool)
    for s in model.floating_q_starts:
        keep[s:s + 7] = True
    return rnd, keep


def expand_seeds(model: Model, seeds, num_seeds: int, rng_seed: int, xp, movable=None):
    """Rows (P*K, nq): for each problem its own seed, then K-1 random seeds within limits.

    The K-1 random seeds (:func:`restart_seeds`) are drawn once from ``rng_seed`` and shared by
    every problem, so a problem's result does not depend on its position in the batch (batched
    == loop of singles). Coordinates outside ``movable`` (:func:`movable_coordinates`; None:
    all) and those :func:`restart_seeds` keeps are the problem's seed in every row.
    """
    P = seeds.shape[0]
    K = int(num_seeds)
    if K == 1:
        return seeds.copy()
    rnd, keep = restart_seeds(model, K, rng_seed, movable)
    rnd = xp.asarray(rnd[None].repeat(P, axis=0), dtype=seeds.dtype)
    keepx = xp.asarray(keep)
    rnd = xp.where(keepx, seeds[:, None, :], rnd)
    rows = xp.concatenate([seeds[:, None, :], rnd], axis=1)
    return rows.reshape(P * K, model.nq)


def limited_revolute(model: Model) -> np.ndarray:
    """(nq,) bool: revolute coordinates with finite limits. A value past one of their limits
    is moved by 2 pi (the same pose) when that lands inside the limits (:func:`clip_to_limits`):
    a joint with limits like +-2 pi is never pinned at a limit it could go around, and a step
    of a joint with a narrower range that crosses the arc outside its limits lands on the
    arc's far side instead of at the near limit. (Read-only: a kernel that needs a writable
    array takes a copy.)"""
    return model.tables.limited_revolute


def clip_to_limits(model: Model, q):
    """Back inside the limits: limited revolute joints by 2 pi first where that lands inside
    (:func:`limited_revolute`), then clipped. The Numba kernels (``_fast_kernels.go_around``)
    and the generated C++/CUDA (``codegen._emit_clip``) spell the same comparisons."""
    xp = get_xp(q)
    lo = const(xp, model.lower, q.dtype)
    hi = const(xp, model.upper, q.dtype)
    w = limited_revolute(model)
    if w.any():
        wx = const(xp, w)
        two_pi = 2 * math.pi
        q = xp.where(wx & (q > hi) & (q - two_pi >= lo), q - two_pi, q)
        q = xp.where(wx & (q < lo) & (q + two_pi <= hi), q + two_pi, q)
    return xp.clip(q, lo, hi)


def finalize_q(model: Model, q, seed):
    """Continuous joints wrapped to within pi of the seed (no 2 pi flips), then limits."""
    xp = get_xp(q)
    if model.q_continuous.any():
        c = xp.asarray(np.nonzero(model.q_continuous)[0])
        q = q.copy()
        q[:, c] = seed[:, c] + wrap_angle(q[:, c] - seed[:, c], xp)
    return clip_to_limits(model, q)


def seed_distance(model: Model, q, seed):
    """Wrap-aware L-infinity distance between rows of q and seed (N,)."""
    xp = get_xp(q)
    d = difference(model, seed, q)
    return xp.max(xp.abs(d), axis=1) if d.shape[1] else xp.zeros(q.shape[0])
