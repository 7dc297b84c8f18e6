"""Batched IK solvers (core: no rclpy, no CuPy required)."""

from .api import SOLVERS, solve_ik, solve_pose
from .common import IKConfig, IKResult, SolveMode, Status
from .fast import warm_up
from .prepared import ChainSolver
from .trajectory import MODES, TrajectoryResult, interpolate_keyframes, trajectory_seed
from .objectives import (EvalContext, JointLimitObjective, Objective, OrientationObjective,
                         PoseObjective, PositionObjective, PostureObjective)

__all__ = ["solve_ik", "solve_pose", "SOLVERS", "IKConfig", "IKResult", "SolveMode", "Status",
           "Objective", "EvalContext", "PoseObjective", "PositionObjective",
           "OrientationObjective", "JointLimitObjective", "PostureObjective",
           "ChainSolver", "warm_up", "trajectory_seed", "interpolate_keyframes", "TrajectoryResult",
           "MODES"]
