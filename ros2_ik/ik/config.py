"""The IK specification's options and outcomes: :class:`IKConfig`, :class:`Status`,
:class:`SolveMode`, :class:`IKResult` and the messages of unsolved problems.

The compiled kernels' interface is generated from these types
(:mod:`ros2_ik.backends.interface`): a field added here reaches every backend by its name."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError
from ..validate import MAX_TIMEOUT, check_int, check_number, describe

#: Largest ``max_iterations`` / ``stall_iterations`` / ``nonmonotone_iterations`` accepted.
MAX_ITERATIONS = 1_000_000_000
MAX_SEEDS = 100_000  # seeds per problem: IKConfig, the node's parameter and requests

__all__ = ["Status", "SolveMode", "IKConfig", "IKResult", "MAX_ITERATIONS", "MAX_SEEDS",
           "INVALID_GOAL_MESSAGE", "unsolved_message"]


class Status(enum.IntEnum):
    """Per-problem outcome; values equal the ROS error codes the node reports."""

    CONVERGED = 1
    NOT_CONVERGED = -31      # NO_IK_SOLUTION
    TIMED_OUT = -6
    INVALID_INPUT = -16      # INVALID_GOAL
    PREEMPTED = -7           # cancelled before this problem was solved
    IN_COLLISION = -12       # GOAL_IN_COLLISION: within the tolerances, but every answer found
    #                          collides (collision avoidance on)


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

    Collision avoidance (``avoid_collisions``; the robot's collision model and the world are
    given to the solver, :class:`ros2_ik.IKSolver`): a solution must also keep every checked
    sphere of the robot ``collision_margin`` [m] clear of the world's obstacles and (with
    ``self_collisions``) of the robot's other links; the solver minimizes a penalty that starts
    ``collision_activation`` [m] beyond the margin, weighted by ``collision_weight``
    (:mod:`ros2_ik.ik.collision`), and every success is confirmed by the exact distances. A
    collision model of many spheres (a real robot's, fitted to its meshes) is solved first on
    its cover, spheres reaching at most ``collision_cover`` [m] past it, and the problems left
    on its own spheres (:mod:`ros2_ik.ik.cover`; 0: one pass on its own spheres).

    Secondary terms (a cost such as a rest posture, :mod:`ros2_ik.ik.terms`): a problem's answer
    is found without them (so success is never theirs to lose), then up to
    ``secondary_iterations`` steps lower their cost while the goals stay within the tolerances
    and the constraints hold: each step follows their gradient projected into the goals' null
    space (``secondary_damping`` keeps the rest of it out: :mod:`ros2_ik.ik.refine`), then
    steps back onto the goals, and is kept only if all of that holds and their cost fell.
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
    stall_iterations: int = 0
    stall_ratio: float = 0.9
    nonmonotone_iterations: int = 50
    excursion_iterations: int = 30
    excursion_stall: int = 15
    avoid_collisions: bool = False
    self_collisions: bool = True
    collision_margin: float = 0.01
    collision_activation: float = 0.005
    collision_weight: float = 1.0
    collision_cover: float = 0.02
    secondary_iterations: int = 30
    secondary_damping: float = 1e-6

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
                             ("secondary_iterations", 0, MAX_ITERATIONS),
                             ("rng_seed", 0, 2**63 - 1)):
            object.__setattr__(self, name, check_int(getattr(self, name), name, low=lo, high=hi))
        for name in ("avoid_collisions", "self_collisions"):
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_)):
                raise InvalidInputError(f"{name} must be True or False, got {describe(v)}")
            object.__setattr__(self, name, bool(v))
        for name, hi in (("collision_margin", 1.0), ("collision_activation", 1.0),
                         ("collision_cover", 0.5)):
            object.__setattr__(self, name, check_number(getattr(self, name), name, low=0.0,
                                                        high=hi))
        object.__setattr__(self, "collision_weight", check_number(
            self.collision_weight, "collision_weight", low=0.0, low_open=True, high=1e6))
        object.__setattr__(self, "secondary_damping", check_number(
            self.secondary_damping, "secondary_damping", low=0.0, low_open=True, high=1.0))
        object.__setattr__(self, "stall_ratio", check_number(self.stall_ratio, "stall_ratio",
                                                             low=0.0, low_open=True, high=1.0))
        if self.stall_ratio >= 1.0:
            raise InvalidInputError(f"stall_ratio must be in (0, 1), got {self.stall_ratio}")
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
    #: (P,) [m] the answer's smallest distance to the world and between checked links (exact
    #: on the collision model), None when collisions were not checked
    clearance: np.ndarray | None = None
    #: the version of the world the answers were checked against (None: not checked)
    world_version: int | None = None
    #: the backend that answered ("host", "cuda" or "reference"; "" where not said)
    backend: str = ""
    #: (P,) with a goal set (:class:`ros2_ik.ik.terms.GoalSet`): the candidate each answer
    #: reaches (the nearest within the tolerances); None without
    goal_index: np.ndarray | None = None

    def __len__(self):
        return int(self.success.shape[0])

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.success)) if len(self) else 0.0

    def take(self, rows) -> "IKResult":
        """The result of problems ``rows`` (indices) only."""
        rows = np.asarray(rows, dtype=np.int64)

        def pick(a):
            return None if a is None else np.asarray(a)[rows]

        return dataclasses.replace(
            self, q=pick(self.q), success=pick(self.success),
            position_error=pick(self.position_error),
            orientation_error=pick(self.orientation_error), iterations=pick(self.iterations),
            seed_index=pick(self.seed_index), status=pick(self.status),
            messages=[self.messages[int(k)] if self.messages else "" for k in rows],
            clearance=pick(self.clearance), goal_index=pick(self.goal_index))

    def put(self, rows, other: "IKResult", solve_time: float) -> "IKResult":
        """This result with problems ``rows`` (indices) answered by ``other`` (a solve of
        those problems, in that order) instead, and the whole call's ``solve_time``."""
        rows = np.asarray(rows, dtype=np.int64)

        def put(a, b):
            if a is None or b is None:
                return a
            a = np.array(a, copy=True)
            a[rows] = np.asarray(b)
            return a

        messages = list(self.messages) if self.messages else [""] * len(self)
        for k, text in zip(rows.tolist(), other.messages or [""] * len(rows)):
            messages[k] = text
        return dataclasses.replace(
            self, q=put(self.q, other.q), success=put(self.success, other.success),
            position_error=put(self.position_error, other.position_error),
            orientation_error=put(self.orientation_error, other.orientation_error),
            iterations=put(self.iterations, other.iterations),
            seed_index=put(self.seed_index, other.seed_index),
            status=put(self.status, other.status), messages=messages, solve_time=solve_time,
            clearance=put(self.clearance, other.clearance),
            goal_index=put(self.goal_index, other.goal_index))


INVALID_GOAL_MESSAGE = ("goal contains NaN/inf, a position beyond 1e6 m, a rotation that is "
                        "not orthonormal with determinant 1 (a scale, shear or reflection; "
                        "normalize the quaternion) or a last row that is not 0 0 0 1: give a "
                        "rigid transform")


def unsolved_message(timed_out: bool, pos_err: float, rot_err: float, cfg: IKConfig, *,
                     cancelled: bool = False) -> str:
    """The message of a problem without a solution within the tolerances."""
    why = "cancelled" if cancelled else "timed out" if timed_out else "no solution"
    return (f"{why}: best error {pos_err:.3g} m / "
            f"{rot_err:.3g} rad (tolerances {cfg.position_tolerance:g} m / "
            f"{cfg.orientation_tolerance:g} rad)")
