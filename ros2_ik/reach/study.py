"""A reach study: IK at every target pose, per-target scores, per-voxel reachability.

A study is a model, a tip link, the targets (:mod:`.targets`) and the solver options
(:class:`StudyConfig`, by default the node's: 32 seeds, 5 stall iterations, 100 iterations,
1e-4 m / 1e-3 rad, rng seed 0, seed configuration mid-range). The targets are cut into shards
of ``shard_size`` consecutive targets; each shard is one batched :func:`solve_pose` call
(:func:`solve_shard`), so the result of a target does not depend on which shard, process or
machine solved it (the solver's restarts are drawn from ``rng_seed`` the same for every problem,
and problems never interact). That is what makes a resumed or a Ray-sharded study identical to
a single run.

Per target (columns of the results, :data:`COLUMNS`):

- ``reached``: the solver's own FK verification against the tolerances, q within the limits
  (``IKResult.success``). Targets farther from the first moving joint than the chain can
  stretch, or whose wrist point is (:func:`reach_bound`, proven upper bounds, plus the
  tolerances), are not solved: ``status`` :data:`OUT_OF_REACH`, not reached, errors NaN,
  ``q`` the seed.
- ``q``: the solution (the best attempt when not reached), ``position_error`` [m],
  ``orientation_error`` [rad], ``iterations``, ``seed_index``, ``status`` (``Status`` values).
- ``manipulability``: Yoshikawa's ``sqrt(det(J J^T))`` of the tip's geometric Jacobian at the
  solution (NaN when not reached); ``limit_margin``: ``min_j 2 min(q_j - lo_j, hi_j - q_j) /
  (hi_j - lo_j)`` over the bounded coordinates on the tip's chain, 1 at mid-range, 0 at a
  limit (NaN when not reached).

Per voxel (:func:`voxel_table`): targets, reached, ``reachability`` = reached / targets (the
reachability index), mean manipulability and mean limit margin of the reached targets.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np

from ..errors import InputTypeError, InvalidInputError, ShapeError
from ..api import fk_frames, jacobian, solve_pose
from ..ik import SOLVERS, IKConfig, Status
from ..model import JointType, Model, check_model
from ..validate import (as_float_array, check_choice, check_finite, check_flag, check_int,
                        describe, link_index)
from ..world import World
from .targets import Targets

__all__ = ["StudyConfig", "Study", "COLUMNS", "VOXEL_COLUMNS", "OUT_OF_REACH", "solve_shard",
           "reach_bound", "ReachBound", "manipulability", "limit_margin", "voxel_table",
           "ShardSpec"]

#: ``status`` of a target beyond :func:`reach_bound` (not solved; never reached).
OUT_OF_REACH = -100

#: Per-target columns of a study's results, in file order: name -> (dtype, per-row shape).
#: ``q`` has one column per model coordinate (``model.q_names``), ``pose`` is x y z qx qy qz qw.
COLUMNS = {
    "pose": (np.float64, (7,)),
    "voxel": (np.int64, ()),
    "reached": (np.bool_, ()),
    "status": (np.int16, ()),
    "q": (np.float64, None),
    "position_error": (np.float64, ()),
    "orientation_error": (np.float64, ()),
    "iterations": (np.int32, ()),
    "seed_index": (np.int32, ()),
    "manipulability": (np.float64, ()),
    "limit_margin": (np.float64, ()),
}
#: Per-voxel columns (:func:`voxel_table`).
VOXEL_COLUMNS = ("centre", "cell", "targets", "reached", "reachability", "mean_manipulability",
                 "mean_limit_margin")


@dataclass(frozen=True)
class StudyConfig:
    """Options of a study (validated on construction).

    ``ik`` defaults to the node's parameters (config/ros2_ik.yaml: ``num_seeds`` 32,
    ``stall_iterations`` 5, ``max_iterations`` 100, tolerances 1e-4 m / 1e-3 rad, ``rng_seed`` 0)
    with no time limit: a timeout would make the answer depend on the machine's load, and a
    study must be deterministic. ``shard_size`` targets are solved per call and per shard file.
    ``prune``: skip targets beyond :func:`reach_bound` (they cannot be reached).
    ``backend``: "numpy" (the CPU path), "cupy" (the GPU path) or "auto" (CuPy when a GPU is
    usable). With ``ik.avoid_collisions`` a target counts as reached only by an answer clear of
    the robot itself (its collision model) and of ``world`` (a :class:`ros2_ik.world.World`,
    e.g. the table it stands on).
    """

    ik: IKConfig = field(default_factory=lambda: IKConfig(
        num_seeds=32, stall_iterations=5, max_iterations=100, position_tolerance=1e-4,
        orientation_tolerance=1e-3, rng_seed=0))
    solver: str = "dls"
    shard_size: int = 10_000
    prune: bool = True
    backend: str = "numpy"
    world: World | None = None

    def __post_init__(self):
        if not isinstance(self.ik, IKConfig):
            raise InputTypeError(f"ik must be an IKConfig, got {describe(self.ik)}")
        if self.world is not None:
            if not isinstance(self.world, World):
                raise InputTypeError(f"world must be a ros2_ik.world.World, got "
                                     f"{describe(self.world)}")
            if len(self.world) and not self.ik.avoid_collisions:
                raise InvalidInputError("a world was given but the study's IKConfig has "
                                        "avoid_collisions=False")
        if self.ik.timeout is not None:
            raise InvalidInputError("a study's IKConfig must have timeout=None: a time limit "
                                    "would make results depend on the machine's load")
        check_choice(self.solver, "solver", SOLVERS)
        object.__setattr__(self, "shard_size", check_int(self.shard_size, "shard_size", low=1,
                                                         high=10_000_000))
        check_choice(self.backend, "backend", ("numpy", "cupy", "auto"))
        object.__setattr__(self, "prune", check_flag(self.prune, "prune"))

    def identity(self) -> dict:
        """What a resumed study must share with the run it resumes: everything that decides
        the results (the GPU path computes in float32, so the backend counts) and the shard
        size, which names the shard files."""
        ik = {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(self.ik).items()}
        world = None
        if self.world is not None and len(self.world):
            import hashlib  # noqa: PLC0415

            world = hashlib.sha256(self.world.packed().tobytes()).hexdigest()[:16]
        return {"ik": ik, "solver": self.solver, "shard_size": self.shard_size,
                "prune": self.prune, "backend": self.backend, "world": world}


@dataclass(frozen=True)
class ShardSpec:
    """What a worker needs to solve shards: picklable, no open files."""

    model: Model
    tip: str
    config: StudyConfig
    seed_q: np.ndarray
    bound: ReachBound | None        # targets it proves unreachable are not solved
    margin_q: np.ndarray            # (m,) coordinates whose limit margin counts
    collision: object = None        # the collision model (with ik.avoid_collisions)


@dataclass(frozen=True)
class Study:
    """Model + tip + targets + options; :meth:`spec` is what every shard is solved with."""

    model: Model
    targets: Targets
    tip: str | None = None
    config: StudyConfig = field(default_factory=StudyConfig)
    #: the robot's collision model (default: :func:`ros2_ik.ik.collision.default_collision_model`
    #: of the model, its meshes found in the ament index and ``$ROS2_IK_MESH_PATH``)
    collision: object = None

    def __post_init__(self):
        check_model(self.model)
        if not isinstance(self.targets, Targets):
            raise InputTypeError(f"targets must be ros2_ik.reach Targets (grid_targets(...), "
                                 f"from_poses(...), load_targets(...)), got "
                                 f"{describe(self.targets)}")
        if not isinstance(self.config, StudyConfig):
            raise InputTypeError(f"config must be a StudyConfig, got {describe(self.config)}")
        tip = self.tip if self.tip is not None else self.model.default_tip()
        link_index(self.model, tip, "tip")  # UnknownLinkError listing the valid links
        object.__setattr__(self, "tip", tip)
        if len(self.targets) == 0:
            raise InvalidInputError("a study needs at least one target")

    @property
    def num_shards(self) -> int:
        return -(-len(self.targets) // self.config.shard_size)

    def shard_range(self, i: int) -> tuple[int, int]:
        s = self.config.shard_size
        return i * s, min(len(self.targets), (i + 1) * s)

    def spec(self) -> ShardSpec:
        bound = reach_bound(self.model, self.tip) if self.config.prune else None
        collision = None
        if self.config.ik.avoid_collisions:  # built here, sent to every worker as it is
            from ..ik.collision import default_collision_model  # noqa: PLC0415

            collision = self.collision or default_collision_model(
                self.model, within=self.config.ik.collision_margin)
            collision.check_complete()  # links without spheres: refused, naming them
        return ShardSpec(self.model, self.tip, self.config, self.model.neutral_q(), bound,
                         chain_coordinates(self.model, self.tip), collision)

    def with_config(self, **changes) -> "Study":
        return replace(self, config=replace(self.config, **changes))


# ---------------------------------------------------------------------- model helpers
def chain_coordinates(model: Model, tip: str) -> np.ndarray:
    """Indices of the bounded coordinates of the joints between the base and ``tip``."""
    path = set(int(l) for l in model.ancestors(model.link_index(tip)))
    on = np.array([int(model.q_joint[i]) in path for i in range(model.nq)], dtype=bool)
    bounded = np.isfinite(model.lower) & np.isfinite(model.upper) & (model.upper > model.lower)
    return np.nonzero(on & bounded)[0]


@dataclass(frozen=True)
class ReachBound:
    """Proven limits of where a chain can put its tip (see :func:`reach_bound`).

    The tip is never farther than ``radius`` [m] from ``anchor``; when ``wrist`` is set (the
    chain ends in a revolute joint followed by fixed links), a point on that last joint's axis,
    ``p_tip - R_tip @ wrist`` for a tip pose ``(p_tip, R_tip)``, is never farther than
    ``wrist_radius`` from ``wrist_anchor`` (``anchor`` when None) either.
    """

    anchor: np.ndarray
    radius: float
    wrist: np.ndarray | None = None
    wrist_radius: float = math.inf
    wrist_anchor: np.ndarray | None = None

    def unreachable(self, poses: np.ndarray, position_tolerance: float,
                    orientation_tolerance: float) -> np.ndarray:
        """(N,) True where no configuration reaches the pose (N, 7) within the tolerances."""
        slack = position_tolerance + 1e-9
        out = np.linalg.norm(poses[:, :3] - self.anchor, axis=1) > self.radius + slack
        if self.wrist is not None:
            from ..kinematics import quat_to_matrix  # noqa: PLC0415

            R = np.asarray(quat_to_matrix(poses[:, 3:]))
            w = poses[:, :3] - R @ self.wrist
            anchor = self.anchor if self.wrist_anchor is None else self.wrist_anchor
            # an orientation error of theta moves the wrist point by at most theta * |wrist|
            slack_w = slack + orientation_tolerance * float(np.linalg.norm(self.wrist))
            out |= np.linalg.norm(w - anchor, axis=1) > self.wrist_radius + slack_w
        return out

    def identity(self) -> list:
        """The numbers that decide which targets are skipped (a resumed study must match)."""
        return [round(float(self.radius), 9), round(float(self.wrist_radius), 9)]  # to 1 nm


def reach_bound(model: Model, tip: str) -> ReachBound | None:
    """How far the chain to ``tip`` can stretch (None where the argument below does not hold).

    A point on a revolute joint's axis stays where it is when that joint turns, so it is fixed
    in the frame of the link before the joint and in the frame of the link after it. Take one
    point ``c_k`` on the axis of every moving joint ``k`` on the way to ``tip``: ``c_k`` and
    ``c_(k+1)`` are both fixed in the link between the two joints, so their distance is the
    same in every configuration, and by the triangle inequality ``|c_n - c_1|`` is at most the
    sum of those distances (and the tip, fixed in the last link, at most that sum plus
    ``|tip - c_n|`` away from ``c_1``). Any choice of points gives a proven bound; the points
    are chosen to make the sums small (convex: SciPy's L-BFGS-B from the joints' frame
    origins, never worse than the origins themselves). ``c_1`` (fixed in the base frame) is the
    anchor; for a tip pose, ``c_n`` is ``p_tip - R_tip @ wrist``, with ``wrist`` fixed in the
    tip frame. Chains with a prismatic joint use the frame origins instead, adding each
    prismatic joint's largest travel to the sum (no wrist bound after it). None for a first
    joint that is prismatic, planar or floating, an unbounded prismatic joint or a prismatic
    mimic joint.
    """
    check_model(model)
    path = [int(l) for l in model.ancestors(link_index(model, tip, "tip"))][::-1]  # base first
    moving = [l for l in path if model.joint_type[l] != JointType.FIXED]
    if not moving or model.joint_type[moving[0]] not in _REVOLUTE:
        return None
    first, last = moving[0], moving[-1]
    q0 = model.neutral_q()[None]
    T = np.asarray(fk_frames(model, q0, [model.link_names[l] for l in moving] + [tip]))[0]
    if all(model.joint_type[l] in _REVOLUTE for l in moving):
        return _axis_point_bound(model, moving, T)
    radius, wrist_radius = 0.0, math.inf
    for l in path[path.index(first) + 1:]:
        jt = model.joint_type[l]
        radius += float(np.linalg.norm(model.origin[l][:3, 3]))
        if jt == JointType.PRISMATIC and model.mimic_q[l] < 0:
            i = int(model.q_start[l])
            travel = max(abs(float(model.lower[i])), abs(float(model.upper[i])))
            if not math.isfinite(travel):
                return None
            radius += travel
        elif jt not in (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.FIXED):
            return None
        if l == last:
            wrist_radius = radius
    wrist = None
    if last != first and model.joint_type[last] in _REVOLUTE:
        T_rest = np.linalg.inv(T[-2]) @ T[-1]  # fixed: only fixed joints lie after `last`
        wrist = T_rest[:3, :3].T @ T_rest[:3, 3]
    return ReachBound(T[0, :3, 3].copy(), radius, wrist, wrist_radius)


_REVOLUTE = (JointType.REVOLUTE, JointType.CONTINUOUS)


def _axis_point_bound(model: Model, moving: list[int], T: np.ndarray) -> ReachBound:
    """:func:`reach_bound` for a chain of revolute joints: points on the joint axes.

    ``T``: the frames of the moving joints' child links (whose origins lie on the joint axes)
    and of the tip, at one configuration (distances between axis points do not depend on it).
    """
    from scipy.optimize import minimize  # noqa: PLC0415 (SciPy only where needed)

    o = T[:-1, :3, 3]                                                    # (n, 3) on the axes
    a = np.einsum("kij,kj->ki", T[:-1, :3, :3], model.axis[moving])      # (n, 3) unit axes
    p_tip = T[-1, :3, 3]
    n = len(moving)
    scale = 1.0 + float(np.sum(np.linalg.norm(np.diff(T[:, :3, 3], axis=0), axis=1)))

    def points(t):
        return o + t[:, None] * a

    def total(t, with_tip: bool) -> float:
        c = points(t)
        s = float(np.sum(np.linalg.norm(np.diff(c, axis=0), axis=1)))
        return s + float(np.linalg.norm(p_tip - c[-1])) if with_tip else s

    def best(with_tip: bool) -> np.ndarray:
        eps = 1e-9 * scale  # a smooth norm for the search; the bound uses the exact one

        def f(t):
            c = points(t)
            d = np.diff(c, axis=0)
            nd = np.sqrt(np.sum(d * d, axis=1) + eps * eps)
            g = np.zeros((n, 3))
            g[1:] += d / nd[:, None]
            g[:-1] -= d / nd[:, None]
            val = float(np.sum(nd))
            if with_tip:
                e = c[-1] - p_tip
                ne = math.sqrt(float(e @ e) + eps * eps)
                val += ne
                g[-1] += e / ne
            return val, np.einsum("ki,ki->k", g, a)

        t0 = np.zeros(n)
        r = minimize(f, t0, jac=True, method="L-BFGS-B", bounds=[(-scale, scale)] * n)
        t = np.asarray(r.x, dtype=float)
        return t if total(t, with_tip) < total(t0, with_tip) else t0

    t_tip = best(True)
    bound = ReachBound(points(t_tip)[0].copy(), total(t_tip, True))
    if n < 2:
        return bound
    t_w = best(False)
    c = points(t_w)
    R_tip = T[-1, :3, :3]
    wrist = R_tip.T @ (p_tip - c[-1])  # c_n = p_tip - R_tip @ wrist, fixed in the tip frame
    return replace(bound, wrist=wrist, wrist_radius=total(t_w, False),
                   wrist_anchor=c[0].copy())


def manipulability(J: np.ndarray) -> np.ndarray:
    """Yoshikawa's measure ``sqrt(det(J J^T))`` of Jacobians (B, 6, n) -> (B,)."""
    J = as_float_array(J, "J", "shape (B, 6, n)", np)
    if J.ndim != 3 or J.shape[1] != 6 or J.shape[0] == 0 or J.shape[2] == 0:
        raise ShapeError(f"J must be Jacobians of shape (B, 6, n) (B, n >= 1), got "
                         f"{tuple(J.shape)}")
    check_finite(J, "J")
    return np.sqrt(np.clip(np.linalg.det(J @ np.swapaxes(J, 1, 2)), 0.0, None))


def limit_margin(model: Model, q: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """``min_j 2 min(q_j - lo_j, hi_j - q_j) / (hi_j - lo_j)`` over ``coords`` (B,); 1 when
    none is bounded."""
    q = check_model(model).check_q(q)
    coords = _coordinate_indices(coords, model.nq)
    if len(coords) == 0:
        return np.ones(q.shape[0])
    lo, hi = model.lower[coords], model.upper[coords]
    qc = q[:, coords]
    return np.min(2.0 * np.minimum(qc - lo, hi - qc) / (hi - lo), axis=1)


def _coordinate_indices(coords, nq: int) -> np.ndarray:
    """``coords`` as (m,) int64 indices of coordinates (each in [0, nq))."""
    if isinstance(coords, np.ndarray) and coords.dtype.kind in "iu" and coords.ndim == 1:
        c = coords
    else:
        c = as_float_array(coords, "coords", f"shape (m,) of indices in [0, {nq})", np)
        if c.ndim != 1:
            raise ShapeError(f"coords must have shape (m,) (coordinate indices), got "
                             f"{tuple(c.shape)}")
        if c.size and not bool(np.all(c == np.round(c))):
            raise InvalidInputError(f"coords must be integer indices, got {c.tolist()[:10]}")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= nq):
        raise InvalidInputError(f"coords must be coordinate indices in [0, {nq}), got "
                                f"{c.tolist()[:10]}")
    return c.astype(np.int64)


# ---------------------------------------------------------------------- one shard
def solve_shard(spec: ShardSpec, poses: np.ndarray,
                should_stop: Callable[[], bool] | None = None) -> dict:
    """Solve one shard of targets (n, 7); returns the result columns (see :data:`COLUMNS`)
    without ``pose`` and ``voxel``, plus ``solve_seconds``. When ``should_stop`` fired during
    the solve, ``complete`` is False and the shard must not be kept."""
    t0 = time.perf_counter()
    poses = np.asarray(poses, dtype=np.float64)
    n, nq = poses.shape[0], spec.model.nq
    out = {
        "reached": np.zeros(n, np.bool_),
        "status": np.full(n, OUT_OF_REACH, np.int16),
        "q": np.tile(spec.seed_q, (n, 1)),
        "position_error": np.full(n, np.nan),
        "orientation_error": np.full(n, np.nan),
        "iterations": np.zeros(n, np.int32),
        "seed_index": np.zeros(n, np.int32),
        "manipulability": np.full(n, np.nan),
        "limit_margin": np.full(n, np.nan),
    }
    todo = np.arange(n)
    if spec.bound is not None:
        ik = spec.config.ik
        todo = np.nonzero(~spec.bound.unreachable(poses, ik.position_tolerance,
                                                   ik.orientation_tolerance))[0]
    complete = True
    if len(todo):
        targets = poses[todo]
        xp = _backend(spec.config.backend)
        if xp is not np:
            targets = xp.asarray(targets)
        res = solve_pose(spec.model, targets, tips=spec.tip, seeds=spec.seed_q,
                         config=spec.config.ik, solver=spec.config.solver,
                         should_stop=should_stop, world=spec.config.world,
                         collision=spec.collision)
        complete = not bool(np.any(np.asarray(res.status) == Status.PREEMPTED))
        ok = np.asarray(res.success, dtype=bool)
        out["reached"][todo] = ok
        out["status"][todo] = np.asarray(res.status)
        out["q"][todo] = np.asarray(res.q)
        out["position_error"][todo] = np.asarray(res.position_error)
        out["orientation_error"][todo] = np.asarray(res.orientation_error)
        out["iterations"][todo] = np.asarray(res.iterations)
        out["seed_index"][todo] = np.asarray(res.seed_index)
        if ok.any():
            rows = todo[ok]
            q = out["q"][rows]
            # the prepared kinematics (their backend is fixed when built, on every worker):
            # the same bytes from any worker
            out["manipulability"][rows] = manipulability(
                np.asarray(jacobian(spec.model, q, spec.tip)))
            out["limit_margin"][rows] = limit_margin(spec.model, q, spec.margin_q)
    assert out["q"].shape == (n, nq)
    out["solve_seconds"] = time.perf_counter() - t0
    out["complete"] = complete
    return out


def _backend(name: str):
    if name == "numpy":
        return np
    from ..backend import cupy_available, get_backend  # noqa: PLC0415

    if name == "auto":
        return get_backend("cupy") if cupy_available() else np
    return get_backend("cupy")


# ---------------------------------------------------------------------- per voxel
def voxel_table(targets: Targets, reached: np.ndarray, manip: np.ndarray,
                margin: np.ndarray) -> dict:
    """Per-voxel counts, reachability index and means over the reached targets."""
    V = targets.num_voxels
    count = np.bincount(targets.voxel, minlength=V).astype(np.int64)
    hit = np.bincount(targets.voxel, weights=reached.astype(np.float64), minlength=V)
    hit = np.rint(hit).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m_sum = np.bincount(targets.voxel, weights=np.where(reached, manip, 0.0), minlength=V)
        g_sum = np.bincount(targets.voxel, weights=np.where(reached, margin, 0.0), minlength=V)
        mean_m = np.where(hit > 0, m_sum / np.maximum(hit, 1), np.nan)
        mean_g = np.where(hit > 0, g_sum / np.maximum(hit, 1), np.nan)
    return {
        "centre": targets.centres,
        "cell": targets.cells,
        "targets": count,
        "reached": hit,
        "reachability": hit / np.maximum(count, 1),
        "mean_manipulability": mean_m,
        "mean_limit_margin": mean_g,
    }
