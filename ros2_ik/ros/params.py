"""Every ROS parameter of the node, declared in one place (name, type, default, range, units,
description), its validation, and the one function that maps parameters to :class:`IKConfig`.

``config/ros2_ik.yaml`` holds the same defaults for ``--params-file``; a test checks that the
two agree. No rclpy at import time: ``descriptor()`` imports ``rcl_interfaces`` lazily, so the
table and the validation are testable without ROS.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .. import robots
from ..ik import SOLVERS
from ..ik.config import MAX_SEEDS, IKConfig, SolveMode

__all__ = ["ParamSpec", "PARAMS", "SPECS", "Settings", "validate", "descriptor", "ik_config",
           "BACKENDS", "TRAJECTORY_MODES", "MODEL_PARAMS", "markdown_table"]

BACKENDS = ("auto", "numpy", "cupy")
TRAJECTORY_MODES = ("parallel", "sequential")
SOLVE_MODES = tuple(m.value for m in SolveMode)
#: parameters whose change rebuilds the robot model
MODEL_PARAMS = ("robot", "urdf_file", "robot_description", "base_link", "tip_link")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    description: str
    range: tuple[float, float] | None = None   # inclusive, numeric parameters
    choices: tuple[str, ...] | None = None     # string parameters with a fixed set of values
    units: str = ""

    @property
    def type_name(self) -> str:
        return {bool: "bool", int: "int", float: "double", str: "string"}[type(self.default)]


PARAMS: tuple[ParamSpec, ...] = (
    # --- robot model (the robot_description topic, when it publishes, replaces these) ---
    ParamSpec("robot", "", "Bundled robot to load at start-up when no URDF is given: one of "
              f"{', '.join(robots.names())}; '' = none (wait for robot_description)."),
    ParamSpec("urdf_file", "", "Path of a URDF file to load at start-up; '' = none."),
    ParamSpec("robot_description", "", "URDF text to load at start-up (takes precedence over "
              "urdf_file and robot); '' = none. The robot_description topic overrides it."),
    ParamSpec("robot_description_semantic", "", "SRDF text (planning groups) to use at "
              "start-up; '' = none, or the bundled robot's SRDF with 'robot'. The "
              "robot_description_semantic topic overrides it."),
    ParamSpec("base_link", "", "Root link of the kinematic model: goals, FK poses and Jacobians "
              "are in this frame; '' = the URDF's root link."),
    ParamSpec("tip_link", "", "Default tip link for requests that name none; '' = the end of the "
              "longest chain (the leaf link with the most moving joints above it)."),
    ParamSpec("model_wait", 10.0, "How long a request taken after a new robot_description (or "
              "SRDF, or model parameter) arrived waits for that model to serve; it is answered "
              "by the new model, never the old one, or with TIMED_OUT past this. A model "
              "serves once parsed (its compiled kernels follow in the background; the "
              "reference answers meanwhile).", range=(0.0, 3600.0), units="s"),
    # --- solver defaults (a request's non-zero / non-empty fields override them) ---
    ParamSpec("backend", "auto", "Array backend: auto (CuPy when a GPU is usable, else NumPy), "
              "numpy, or cupy.", choices=BACKENDS),
    ParamSpec("solver", "dls", "Default IK solver; one of ros2_ik.ik.SOLVERS "
              "(dls, ccd, ccd+dls)."),
    ParamSpec("solve_mode", "speed", "Which converged seed wins: speed (first), distance (closest "
              "to the seed), manipulability (largest).", choices=SOLVE_MODES),
    ParamSpec("position_tolerance", 1e-4, "Default success tolerance on tip position error.",
              range=(1e-9, 1.0), units="m"),
    ParamSpec("orientation_tolerance", 1e-3, "Default success tolerance on tip orientation error "
              "(rotation angle).", range=(1e-9, math.pi), units="rad"),
    ParamSpec("max_iterations", 100, "Solver iterations per seed.", range=(1, 100_000)),
    ParamSpec("num_seeds", 32, "Default seeds per problem (the request's seed first, then random "
              "ones within the joint limits).", range=(1, MAX_SEEDS)),
    ParamSpec("stall_iterations", 5, "A seed is given up after this many slow iterations in a "
              "row (rejected, or cost down by less than 10 %), freeing time for the next seed; "
              "0 = never.", range=(0, 100_000)),
    ParamSpec("timeout", 5.0, "Default time budget of one request (whole batch or trajectory); "
              "0 = no limit.", range=(0.0, 3600.0), units="s"),
    ParamSpec("timeout_from_arrival", True, "A request's timeout counts from its arrival (the "
              "middleware's timestamp: its wait in the node's queues counts, and a TIMED_OUT "
              "answer says how long it waited), not from when its handling begins. Clients on "
              "other machines need synchronized clocks (as tf does); set false where they are "
              "not."),
    ParamSpec("rng_seed", 0, "Default seed of the random generator for the extra seeds "
              "(reproducible results).", range=(0, 2**31 - 1)),
    ParamSpec("max_batch", 100_000, "Largest number of problems in one ComputeIK request "
              "(states x links for ComputeFK, nodes for a trajectory); bigger requests are "
              "rejected with INVALID_REQUEST.", range=(1, 50_000_000)),
    # --- trajectory seed action ---
    ParamSpec("trajectory.mode", "sequential", "Default trajectory mode: sequential (each node "
              "seeded from the previous one; smooth) or parallel (all nodes from the seed).",
              choices=TRAJECTORY_MODES),
    ParamSpec("trajectory.time_step", 0.1, "Default time between trajectory nodes "
              "(time_from_start of node i = i * time_step).", range=(1e-6, 3600.0), units="s"),
    # --- rviz and diagnostics ---
    ParamSpec("markers.enabled", True, "Publish goal / reached-pose markers on ~/markers "
              "(only built while someone subscribes)."),
    ParamSpec("markers.max_goals", 200, "Most problems of one request shown as markers.",
              range=(0, 100_000)),
    ParamSpec("interactive.enabled", True, "Offer goal handles for rviz (interactive markers "
              "under ~/goal_marker): a drag is solved and its answer published on "
              "interactive.solution_topic. Read at start-up."),
    ParamSpec("interactive.solution_topic", "~/goal_marker/solution", "Topic of the handles' "
              "answers (sensor_msgs/JointState: a robot_state_publisher with a frame prefix "
              "shows them as a ghost robot). Read at start-up."),
    ParamSpec("interactive.tips", "", "Links that get a handle, comma-separated; '' = the tip "
              "of interactive.group when set, else the default tip."),
    ParamSpec("interactive.group", "", "SRDF planning group the handles' solves move (its "
              "joints only); '' = the whole model."),
    ParamSpec("interactive.timeout", 0.1, "Time budget of one drag's solve (a drag sends many "
              "poses; only the latest waits).", range=(0.001, 10.0), units="s"),
    ParamSpec("diagnostics.period", 1.0, "Period of the diagnostic_msgs/DiagnosticArray on "
              "/diagnostics.", range=(0.1, 60.0), units="s"),
    # --- collision avoidance ---
    ParamSpec("collision.enabled", False, "Avoid collisions in requests that leave it to the "
              "node (ComputeIK collisions = 0, trajectory goals); MoveIt's requests say with "
              "avoid_collisions."),
    ParamSpec("collision.self", True, "Check the robot against itself (the collision model's "
              "self pairs), not only against the world."),
    ParamSpec("collision.margin", 0.01, "Clearance an answer must keep to the world and between "
              "the robot's links.", range=(0.0, 1.0), units="m"),
    ParamSpec("collision.activation", 0.005, "The collision penalty starts this far beyond the "
              "margin (a goal that needs the robot closer than margin + activation to an "
              "obstacle is pulled off by the penalty: keep it small).", range=(0.0, 1.0),
              units="m"),
    ParamSpec("collision.weight", 1.0, "Weight of the collision penalty against the pose error.",
              range=(1e-6, 1e6)),
    ParamSpec("collision.cover", 0.02, "A collision model of many spheres (fitted to real "
              "meshes) is solved first on its cover, spheres reaching at most this far past "
              "it, then the goals left on its own spheres (ros2_ik.ik.cover); 0 = one pass on "
              "its own spheres.", range=(0.0, 0.5), units="m"),
    ParamSpec("collision.spheres_file", "", "YAML file of the robot's collision spheres (per "
              "link, as ros2_ik.model.collision writes them); '' = fitted to the URDF's "
              "<collision> geometry."),
    ParamSpec("collision.mesh_path", "", "Directories where package:// and relative collision "
              "meshes are looked for, ':'-separated (besides the ament index)."),
    ParamSpec("collision.world_file", "", "YAML file of obstacles loaded at start-up (as "
              "ros2_ik.world.World.to_yaml writes them); '' = an empty world."),
    ParamSpec("collision.mesh_resolution", 0.005, "Edge [m] of the cells a world object's mesh "
              "(CollisionObject meshes) is held in: the boxes of the cells it passes through, "
              "which reach at most a cell's diagonal past it (coarser where one mesh would make "
              "more than 2000 boxes, noted in the log).", range=(0.001, 1.0), units="m"),
    ParamSpec("collision.ignore_octomap", False, "Leave the planning scene's octomap out of "
              "the world (its voxels are not avoided; noted in the log). False: its occupied "
              "cells are obstacles, exactly."),
    ParamSpec("collision.base_frame_aliases", "world", "Comma-separated frame ids taken as the "
              "robot's base frame in obstacle poses (no tf here)."),
    # --- sensed worlds ---
    ParamSpec("octomap.topic", "", "octomap_msgs/Octomap topic (as octomap_server publishes "
              "octomap_binary / octomap_full) whose occupied cells become obstacles "
              "<octomap>/k, each map replacing the last (as the planning scene's octomap); '' = "
              "none. Read at start-up."),
    ParamSpec("point_cloud.topic", "", "sensor_msgs/PointCloud2 topic whose points become "
              "obstacles (each cloud replacing the last; its frame the base frame, a link of "
              "the robot, an alias or point_cloud.frame_transform's frame); '' = none. Read at "
              "start-up."),
    ParamSpec("point_cloud.frame_transform", "", "A static transform for a cloud's frame (no "
              "tf here): 'frame parent x y z qx qy qz qw', the pose of the cloud's frame in "
              "parent (the base frame, a link of the robot or an alias); note the order: the "
              "cloud's frame first, unlike static_transform_publisher's; '' = none."),
    ParamSpec("point_cloud.resolution", 0.02, "Edge of the cells a cloud's points are held "
              "in: each cell holding a point is an obstacle.", range=(0.001, 1.0), units="m"),
    ParamSpec("point_cloud.max_range", 3.0, "Points farther than this from the sensor are "
              "left out.", range=(0.0, 100.0), units="m"),
    ParamSpec("point_cloud.padding", 0.03, "The robot's own points are removed: those within "
              "its spheres (at the current joint states) grown by this.", range=(0.0, 1.0),
              units="m"),
    ParamSpec("point_cloud.max_rate", 2.0, "Clouds taken per second at most (the others are "
              "dropped).", range=(0.001, 1000.0), units="Hz"),
    # --- state checks and base placement ---
    ParamSpec("check_states.max_states", 5_000_000, "Most states one ~/check_states request "
              "checks (an interpolated path's states included); bigger requests are rejected "
              "with INVALID_REQUEST.", range=(1, 50_000_000)),
    ParamSpec("placement.max_problems", 20_000_000, "Most pairs of a coarse candidate and a "
              "task pose one ~/base_placement goal scores (candidates of the coarse grid x task "
              "poses); bigger goals are rejected with INVALID_REQUEST (the "
              "ros2_ik_base_placement command has no limit).", range=(1, 1_000_000_000)),
)

SPECS: dict[str, ParamSpec] = {p.name: p for p in PARAMS}


def _field(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class Settings:
    """A consistent snapshot of every parameter (a handler reads one snapshot per request)."""

    robot: str
    urdf_file: str
    robot_description: str
    robot_description_semantic: str
    base_link: str
    tip_link: str
    model_wait: float
    backend: str
    solver: str
    solve_mode: str
    position_tolerance: float
    orientation_tolerance: float
    max_iterations: int
    num_seeds: int
    stall_iterations: int
    timeout: float
    timeout_from_arrival: bool
    rng_seed: int
    max_batch: int
    trajectory_mode: str
    trajectory_time_step: float
    markers_enabled: bool
    markers_max_goals: int
    interactive_enabled: bool
    interactive_solution_topic: str
    interactive_tips: str
    interactive_group: str
    interactive_timeout: float
    diagnostics_period: float
    collision_enabled: bool
    collision_self: bool
    collision_margin: float
    collision_activation: float
    collision_weight: float
    collision_cover: float
    collision_spheres_file: str
    collision_mesh_path: str
    collision_world_file: str
    collision_mesh_resolution: float
    collision_ignore_octomap: bool
    collision_base_frame_aliases: str
    octomap_topic: str
    point_cloud_topic: str
    point_cloud_frame_transform: str
    point_cloud_resolution: float
    point_cloud_max_range: float
    point_cloud_padding: float
    point_cloud_max_rate: float
    check_states_max_states: int
    placement_max_problems: int

    @classmethod
    def from_values(cls, values: Mapping[str, Any] | None = None) -> "Settings":
        """Defaults of :data:`PARAMS`, overridden by ``values`` (ROS names, dotted)."""
        values = dict(values or {})
        kw = {}
        for spec in PARAMS:
            v = values.get(spec.name, spec.default)
            kw[_field(spec.name)] = type(spec.default)(v)
        return cls(**kw)

    def replace(self, **ros_values) -> "Settings":
        d = {spec.name: getattr(self, _field(spec.name)) for spec in PARAMS}
        d.update(ros_values)
        return Settings.from_values(d)


assert {f.name for f in fields(Settings)} == {_field(p.name) for p in PARAMS}


def validate(name: str, value: Any) -> str | None:
    """None if ``value`` is acceptable for parameter ``name``, else the reason (for the
    on-set-parameters callback). Type and range are also enforced by the descriptor; the
    checks here cover choices and what the descriptor cannot say."""
    spec = SPECS.get(name)
    if spec is None:
        return None  # not ours (e.g. use_sim_time)
    want = type(spec.default)
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        return (f"parameter {name!r} must be of type {spec.type_name}, got "
                f"{type(value).__name__} {value!r}")
    if spec.range is not None:
        lo, hi = spec.range
        if not (isinstance(value, (int, float)) and math.isfinite(value) and lo <= value <= hi):
            return (f"parameter {name!r} = {value!r} is outside [{lo:g}, {hi:g}] "
                    f"{spec.units}").strip()
    if spec.choices is not None and value not in spec.choices:
        return f"parameter {name!r} = {value!r} is not one of {list(spec.choices)}"
    if name == "point_cloud.frame_transform":
        from .cloud import frame_transform  # noqa: PLC0415

        try:
            frame_transform(value)
        except ValueError as exc:
            return str(exc)
    if name == "solver":
        if value not in SOLVERS:
            return f"parameter 'solver' = {value!r} is not one of {list(SOLVERS)}"
    if name == "robot" and value:
        from .. import robots  # noqa: PLC0415

        if value not in robots.ROBOTS:
            return (f"parameter 'robot' = {value!r} is not a bundled robot; use one of "
                    f"{robots.names()} (or set urdf_file / robot_description)")
    return None


def descriptor(spec: ParamSpec):
    """``rcl_interfaces/ParameterDescriptor`` with type, description (units, choices) and range."""
    from rcl_interfaces.msg import (FloatingPointRange, IntegerRange,  # noqa: PLC0415
                                    ParameterDescriptor, ParameterType)

    ptype = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
             float: ParameterType.PARAMETER_DOUBLE,
             str: ParameterType.PARAMETER_STRING}[type(spec.default)]
    text = spec.description + (f" [{spec.units}]" if spec.units else "")
    d = ParameterDescriptor(name=spec.name, type=ptype, description=text)
    if spec.choices:
        d.additional_constraints = "one of: " + ", ".join(spec.choices)
    if spec.range is not None:
        lo, hi = spec.range
        if isinstance(spec.default, float):
            d.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi),
                                                         step=0.0)]
        else:
            d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=1)]
    return d


def ik_config(s: Settings, *, position_tolerance: float = 0.0, orientation_tolerance: float = 0.0,
              timeout: float = 0.0, num_seeds: int = 0, solve_mode: str = "",
              rng_seed: int = -1, avoid_collisions: bool | None = None) -> IKConfig:
    """The one mapping from parameters (+ a request's overrides; 0 / '' / -1 / None = the
    parameter) to :class:`IKConfig`. ``timeout`` 0 takes the parameter, whose 0 means no limit.

    Kept per snapshot and overrides (both immutable): requests mostly repeat them, and
    building and validating an IKConfig costs tens of microseconds of a one-goal request."""
    avoid = s.collision_enabled if avoid_collisions is None else bool(avoid_collisions)
    return _ik_config(s, float(position_tolerance), float(orientation_tolerance),
                      float(timeout), int(num_seeds), str(solve_mode), int(rng_seed), avoid)


@functools.lru_cache(maxsize=256)
def _ik_config(s: Settings, position_tolerance: float, orientation_tolerance: float,
               timeout: float, num_seeds: int, solve_mode: str, rng_seed: int,
               avoid: bool) -> IKConfig:
    t = timeout if timeout > 0 else s.timeout
    return IKConfig(
        avoid_collisions=avoid, self_collisions=s.collision_self,
        collision_margin=s.collision_margin, collision_activation=s.collision_activation,
        collision_weight=s.collision_weight, collision_cover=s.collision_cover,
        position_tolerance=position_tolerance if position_tolerance > 0 else s.position_tolerance,
        orientation_tolerance=(orientation_tolerance if orientation_tolerance > 0
                               else s.orientation_tolerance),
        max_iterations=s.max_iterations,
        timeout=t if t > 0 else None,
        num_seeds=num_seeds if num_seeds > 0 else s.num_seeds,
        stall_iterations=s.stall_iterations,
        solve_mode=solve_mode or s.solve_mode,
        rng_seed=rng_seed if rng_seed >= 0 else s.rng_seed,
    )


def markdown_table() -> str:
    """The README's parameter table, generated from :data:`PARAMS` (a test keeps the README
    equal to it: ``python -m ros2_ik.ros.params`` prints it)."""
    def default(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        return f"{v:g}" if isinstance(v, float) else repr(v)

    rows = ["| parameter | type | default | range / choices | description |",
            "|---|---|---|---|---|"]
    for p in PARAMS:
        if p.range is not None:
            fmt = "d" if isinstance(p.default, int) else "g"
            lo, hi = (int(x) if fmt == "d" else x for x in p.range)
            limits = f"[{lo:{fmt}}, {hi:{fmt}}] {p.units}".strip()
        else:
            limits = ", ".join(p.choices or ())
        rows.append(f"| `{p.name}` | {p.type_name} | `{default(p.default)}` | {limits} | "
                    f"{p.description} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
