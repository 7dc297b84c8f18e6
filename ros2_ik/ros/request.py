"""What every request handler shares: the request's :class:`Context`, the checks of the
options a request may set, frames, and the summaries of an answer.

A handler (one module each under :mod:`ros2_ik.ros.handlers`) takes a :class:`Context` (the
model and parameter snapshot the request started with, the joint states known then, a stop
flag) and a request message, fills the response (or result) message and returns a small
outcome record for markers and statistics. A request that cannot be served raises
:class:`RequestError` with an IKErrorCode value and a message saying what was wrong and what
to do; the wiring (:mod:`.wiring`) turns that (and any other exception) into the response's
``error_code`` and ``message``. Handlers fill the response only once everything succeeded, so
a rejected request carries empty arrays.
"""

from __future__ import annotations

import math
import time
import types
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ik import SOLVERS
from ..ik.config import MAX_SEEDS, IKConfig, SolveMode
from ..kinematics import pose_to_pq, pq_to_pose
from ..model import MAX_VALUE
from . import codes
from .codes import RequestError
from .conversions import as_f64, duration_to_sec, f64_array, joint_states
from .params import SPECS, Settings, ik_config
from .robot import LoadedRobot

__all__ = ["Context", "IKOutcome", "overall_code", "stamp_model", "summary", "NO_MODEL_MESSAGE",
           "tolerance",
           "duration", "solver_name", "config", "weights", "to_base", "fill_solutions",
           "collisions_flag", "compact_states"]

NO_MODEL_MESSAGE = ("no robot model loaded yet: publish the URDF on the robot_description topic "
                    "(std_msgs/String, transient local, as robot_state_publisher does) or start "
                    "the node with one of the parameters robot_description, urdf_file or robot")


@dataclass
class Context:
    """What one request works with, fixed when it starts."""

    robot: LoadedRobot | None
    settings: Settings
    xp: types.ModuleType = np
    seed_base: Callable[[LoadedRobot], np.ndarray] | None = None  # latest joint_states, or None
    should_stop: Callable[[], bool] | None = None
    #: answered on the executor thread (a small request: bounded, so no ``should_stop`` needed)
    inline: bool = False
    #: the planning scene when the request was taken (:class:`ros2_ik.ros.scene.Scene`)
    scene: object = None
    #: the wait for the model asked for before this request was taken (None: no change was
    #: pending): :meth:`require_robot` waits for it, in the request's worker
    model_wait: Callable[[], LoadedRobot | None] | None = None
    #: when the request arrived (``time.perf_counter``'s clock): the middleware's reception
    #: time where it gives one, else when the executor took it; a request's timeout counts
    #: from here, the time it waited in the node's queues included (None: from the solve)
    arrived: float | None = None

    def waited(self) -> float:
        """[s] how long ago the request arrived (0 without an arrival time)."""
        return 0.0 if self.arrived is None else max(0.0, time.perf_counter() - self.arrived)

    @property
    def world(self):
        """The scene's obstacles (:class:`ros2_ik.world.World`), or None."""
        return self.scene.world if self.scene is not None else None

    def collisions(self, robot: LoadedRobot, cfg):
        """(collision model, world) of a request solved with ``cfg``: both None when collision
        avoidance is off. The robot's collision model with the scene's attached objects,
        padding and allowed collisions, and the scene's obstacles; COLLISION_CHECKING_UNAVAILABLE
        when the answer could not keep its promise (links whose collision geometry has no
        spheres, a scene part that cannot be checked)."""
        if not cfg.avoid_collisions:
            return None, None
        from ..model.collision import missing_message  # noqa: PLC0415
        from .scene import Scene  # noqa: PLC0415

        s = self.settings
        cm = robot.collision_model(s.collision_spheres_file, s.collision_mesh_path,
                                   s.collision_margin)
        if cm.missing and not cm.accept_missing:
            raise RequestError(codes.COLLISION_CHECKING_UNAVAILABLE,
                               missing_message(cm.missing).replace(
                                   "(search_path= in the library, ", "(").replace(
                                   "the node's collision.mesh_path parameter", "the parameter "
                                   "collision.mesh_path, ':'-separated"))
        scene = self.scene if self.scene is not None else Scene()
        if scene.unsupported:
            raise RequestError(codes.COLLISION_CHECKING_UNAVAILABLE,
                               "; ".join(why for _, why in scene.unsupported) + ": its "
                               "obstacles are unknown until a good one comes (or ask without "
                               "collision avoidance)")
        return robot.scene_collisions(cm, scene)

    def settled_robot(self) -> LoadedRobot | None:
        """The request's model: the one in use when it was taken, or, when a change was
        pending then, the new one once it serves (waited for here, at most the model_wait
        parameter: RequestError TIMED_OUT past it)."""
        if self.model_wait is not None:
            wait, self.model_wait = self.model_wait, None
            self.robot = None  # (not the previous model, whatever happens)
            self.robot = wait()
        return self.robot

    def require_robot(self) -> LoadedRobot:
        robot = self.settled_robot()
        if robot is None:
            raise RequestError(codes.NO_ROBOT_MODEL, NO_MODEL_MESSAGE)
        return robot

    def current_q(self, robot: LoadedRobot) -> np.ndarray:
        """The robot's current state as the node knows it (nq,): mid-range, overwritten by the
        latest joint_states."""
        return self.seed_base(robot) if self.seed_base else robot.model.neutral_q()

    def seed_q(self, robot: LoadedRobot, js, what: str = "seed", *,
               ignore_unknown: bool = False) -> np.ndarray:
        """Seed (nq,): mid-range, then the latest joint_states, then the request's JointState
        (``ignore_unknown``: names the model lacks are skipped, not rejected)."""
        base = self.current_q(robot)
        names = list(js.name) if js is not None else []
        pos = as_f64(js.position) if js is not None else np.zeros(0)
        if not names and pos.size == 0:
            return base
        return robot.apply_joint_values(base, names, pos, what=what, strict=True, clip=True,
                                        ignore_unknown=ignore_unknown)


@dataclass
class IKOutcome:
    """What a ComputeIK request produced (for markers and statistics)."""

    robot: LoadedRobot
    tips: list[str]
    targets: np.ndarray           # (N, K, 7) in the base frame (identity where invalid)
    q: np.ndarray                 # (N, nq)
    status: np.ndarray            # (N,) IKErrorCode values
    code: int
    solve_time: float = 0.0
    clearance: np.ndarray | None = None   # (N,) with collision avoidance
    world: object = None                   # the world checked against
    collision: object = None               # the collision model used

    @property
    def problems(self) -> int:
        return int(self.status.shape[0])

    @property
    def solved(self) -> int:
        return int(np.sum(self.status == codes.SUCCESS))


# ---------------------------------------------------------------------- shared option parsing
def tolerance(value: float, name: str) -> float:
    """A request's tolerance: 0 (the node's parameter) or positive, at most the parameter's
    upper bound (1 m, pi rad: beyond, every pose would count as reached)."""
    v = float(value)
    top = SPECS[name].range[1]
    if not math.isfinite(v) or v < 0 or v > top:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{name} = {v!r} is invalid; give a positive tolerance of at most "
                           f"{top:g}, or 0 for the node default")
    return v


def duration(d) -> float:
    """A request's timeout [s]: a valid Duration, not negative (0: the node default)."""
    if not 0 <= int(d.nanosec) < 1_000_000_000:
        raise RequestError(codes.INVALID_REQUEST,
                           f"timeout.nanosec = {d.nanosec} is not a valid Duration (0 to "
                           "999999999; whole seconds go in timeout.sec)")
    t = duration_to_sec(d)
    if not math.isfinite(t) or t < 0:
        raise RequestError(codes.INVALID_REQUEST,
                           f"timeout = {t:g} s is negative; give a positive duration, or 0 for "
                           "the node default")
    return t


def solver_name(name: str, s: Settings) -> str:
    solver = name or s.solver
    if solver not in SOLVERS:
        raise RequestError(codes.INVALID_REQUEST,
                           f"unknown solver {solver!r}; use one of {list(SOLVERS)} or '' "
                           "for the node default")
    return solver


def collisions_flag(value) -> bool | None:
    """A request's ``collisions`` field: None (the node's collision.enabled), True or False."""
    v = int(value)
    if v not in (0, 1, 2):
        raise RequestError(codes.INVALID_REQUEST,
                           f"collisions = {v} is invalid; give 0 (node default), 1 (on) or 2 "
                           "(off)")
    return None if v == 0 else v == 1


def config(s: Settings, *, position_tolerance, orientation_tolerance, timeout, num_seeds,
            solve_mode="", rng_seed=-1, avoid_collisions=None) -> IKConfig:
    modes = [m.value for m in SolveMode]
    if solve_mode and solve_mode not in modes:
        raise RequestError(codes.INVALID_REQUEST,
                           f"unknown solve_mode {solve_mode!r}; use one of {modes} or '' for the "
                           "node default")
    if int(rng_seed) < -1:
        raise RequestError(codes.INVALID_REQUEST,
                           f"rng_seed = {rng_seed} is invalid; give -1 (node default) or a value "
                           ">= 0")
    if int(num_seeds) > MAX_SEEDS:
        raise RequestError(codes.INVALID_REQUEST,
                           f"num_seeds = {num_seeds} is too large; give at most {MAX_SEEDS} (0 = "
                           "node default)")
    return ik_config(s, position_tolerance=tolerance(position_tolerance, "position_tolerance"),
                     orientation_tolerance=tolerance(orientation_tolerance,
                                                      "orientation_tolerance"),
                     timeout=duration(timeout), num_seeds=int(num_seeds), solve_mode=solve_mode,
                     rng_seed=int(rng_seed), avoid_collisions=avoid_collisions)


def weights(axis_weights, position_only: bool) -> tuple[float, ...]:
    """The request's axis weights, checked, as a tuple (the solvers keep the check of a tuple
    they have seen: a request's default weights cost nothing after the first)."""
    if len(axis_weights) == 0:
        return (1.0, 1.0, 1.0, 0.0, 0.0, 0.0) if position_only else (1.0,) * 6
    w = as_f64(axis_weights).copy()
    if w.size != 6 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RequestError(codes.INVALID_REQUEST,
                           f"axis_weights must be empty or 6 finite values >= 0 (x y z rx ry rz), "
                           f"got {np.round(w, 6).tolist()}")
    if position_only:
        w[3:] = 0.0
    if not np.any(w > 0):
        raise RequestError(codes.INVALID_REQUEST,
                           "every axis weight is 0 (after position_only), so nothing would be "
                           "solved; give at least one positive weight")
    return tuple(w.tolist())


def to_base(robot: LoadedRobot, pq: np.ndarray, frames: list[str] | str, seed: np.ndarray,
             what: str) -> np.ndarray:
    """Goals pq (..., 7) in their frames -> pq (..., 7) in the base frame.

    ``frames`` is one frame for all, or a list with one frame per goal (flattened order).
    """
    uniq = [frames] if isinstance(frames, str) else list(dict.fromkeys(frames))
    moving = [f for f in uniq if f not in ("", robot.base)]
    if not moving:  # ('' and the base need no transform, nor a check)
        return pq
    T_frames = robot.frame_transforms(moving, seed, what=what)
    flat = pq.reshape(-1, 7)
    T = pq_to_pose(flat)
    if isinstance(frames, str):
        T = T_frames[frames] @ T
    else:
        farr = np.asarray(frames, dtype=object)
        for f in moving:
            m = farr == f
            T[m] = T_frames[f] @ T[m]
    return pose_to_pq(T).reshape(pq.shape)


def compact_states(robot: LoadedRobot, base: np.ndarray, names: list, vals: np.ndarray
                   ) -> np.ndarray:
    """States (M, nq) of a compact request: ``base`` with the columns of ``names`` set from
    ``vals`` (M, len(names)); the names checked once (mimic joints are ignored); a value that
    is NaN, infinite or beyond MAX_VALUE is INVALID_ROBOT_STATE naming the state."""
    robot.apply_joint_values(base, names, np.zeros(len(names)), what="joint_names",
                             strict=True, clip=False)
    Q = np.tile(base, (vals.shape[0], 1))
    cols = [(j, robot.q_index[n]) for j, n in enumerate(names) if n in robot.q_index]
    if cols:
        src, dst = zip(*cols)
        Q[:, list(dst)] = vals[:, list(src)]
    with np.errstate(invalid="ignore"):
        bad = ~np.all(np.isfinite(Q) & (np.abs(Q) <= MAX_VALUE), axis=1)
    if bad.any():
        m = int(np.nonzero(bad)[0][0])
        raise RequestError(codes.INVALID_ROBOT_STATE,
                           f"compact_positions of state {m} contain NaN, infinity or a value "
                           f"beyond +-{MAX_VALUE:g}; give finite joint values in metres or "
                           "radians")
    return Q


def fill_solutions(robot: LoadedRobot, req, resp, q: np.ndarray) -> None:
    """A ComputeIK response's joint names and solutions (N, nq) -> mimic joints added, in the
    compact or the friendly form the request asked for."""
    full = robot.full_q(q)
    resp.joint_names = list(robot.out_names)
    if req.compact_response:
        resp.compact_solutions = f64_array(full)
    else:
        resp.solutions = joint_states(robot.out_names, full)


def stamp_model(msg, robot: LoadedRobot | None, backend: str | None = None) -> None:
    """Name the model (URDF digest, version) and, where given, the backend that answered in a
    response or result that has those fields."""
    if robot is not None and hasattr(msg, "model_digest"):
        msg.model_digest = robot.digest
        msg.model_version = int(robot.version)
    if backend is not None and hasattr(msg, "backend"):
        msg.backend = backend


def overall_code(status: np.ndarray) -> int:
    """Whole-request code from per-problem codes: SUCCESS if all succeeded, else the most
    telling failure (an invalid goal, then a time-out, then no solution)."""
    st = np.asarray(status)
    if st.size and np.all(st == codes.SUCCESS):
        return codes.SUCCESS
    for c in (codes.INVALID_GOAL, codes.PREEMPTED, codes.TIMED_OUT, codes.GOAL_IN_COLLISION,
              codes.NO_IK_SOLUTION):
        if np.any(st == c):
            return c
    return codes.FAILURE


def summary(status: np.ndarray, messages: dict[int, str], what: str = "problem") -> str:
    N = int(status.shape[0])
    ok = int(np.sum(status == codes.SUCCESS))
    if ok == N:
        return ""
    parts = [f"{ok}/{N} {what}s solved"]
    for c, label, hint in (
            (codes.INVALID_GOAL, "invalid goal", "fix these goals"),
            (codes.TIMED_OUT, "timed out", "raise timeout or lower num_seeds / batch size"),
            (codes.NO_IK_SOLUTION, "without a solution within the tolerances",
             "the goal may be unreachable; try more num_seeds, another seed or looser "
             "tolerances"),
            (codes.GOAL_IN_COLLISION, "in collision",
             "every answer found within the tolerances collides; move the goal, the "
             "obstacle, or try more num_seeds"),
            (codes.PREEMPTED, "cancelled", "")):
        idx = np.nonzero(status == c)[0]
        if idx.size:
            first = int(idx[0])
            detail = messages.get(first, "")
            parts.append(f"{idx.size} {label} (first: {what} {first}"
                         f"{': ' + detail if detail else ''})" + (f"; {hint}" if hint else ""))
    return "; ".join(parts)
