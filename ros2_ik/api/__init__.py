"""The public API: prepared solvers and kinematics, the one place where a backend is chosen.

- :class:`IKSolver` (and :func:`solve_pose`, :func:`solve_pose_k_best`, :func:`solve_ik`,
  :class:`ChainSolver`, :func:`trajectory_seed`, which go through it): IK on the backend fixed
  when it was built, with any terms (:mod:`ros2_ik.ik.terms`);
- :class:`Kinematics` (and :func:`fk`, :func:`fk_frames`, :func:`jacobian`): FK and Jacobians;
- :func:`check_states` / :func:`check_path`: limits and exact clearances of many states (the
  compiled check, or the reference);
- :func:`prebuild`: build the compiled kernels of some robots into the on-disk cache.

Backends: :mod:`ros2_ik.backends` (the one compiled source: host, CUDA) and the reference
(:mod:`ros2_ik.ik`, :mod:`ros2_ik.kinematics`).
"""

from .chain import ChainSolver
from .kbest import KBestResult
from .kinematics import Kinematics, fk, fk_frames, jacobian
from .pose import pose_solver, solve_ik, solve_pose, solve_pose_k_best
from .prebuild import build_scope, cancel_background_builds, prebuild, waiting_for_builds
from .solver import BACKENDS, IKSolver, compiled_status, prepared_solver
from .states import StateCheck, check_path, check_states, interpolate_path
from .trajectory import MODES, TrajectoryResult, interpolate_keyframes, trajectory_seed

__all__ = ["IKSolver", "BACKENDS", "solve_pose", "solve_ik", "ChainSolver", "Kinematics", "fk",
           "fk_frames", "jacobian", "trajectory_seed", "interpolate_keyframes",
           "TrajectoryResult", "MODES", "prebuild", "compiled_status", "build_scope",
           "prepared_solver", "waiting_for_builds", "cancel_background_builds", "check_states",
           "check_path", "interpolate_path", "StateCheck", "solve_pose_k_best", "pose_solver",
           "KBestResult"]
