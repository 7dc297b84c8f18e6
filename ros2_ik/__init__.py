"""ros2_ik: batched kinematics and inverse kinematics for ROS 2, on NumPy, compiled C++ or CuPy.

The public API is here: :func:`load_robot` / :class:`Model`, :func:`fk`, :func:`fk_frames`,
:func:`jacobian`, :func:`solve_pose`, :func:`solve_pose_k_best`, :func:`solve_ik`,
:class:`IKSolver` (with terms: :class:`Posture`, :class:`StepBound`, :class:`GoalSet`),
:class:`ChainSolver`, :func:`trajectory_seed`, :func:`check_states`, :func:`check_path`,
:class:`IKConfig` and the errors. The layers
below it (imports point down only): ``api`` (prepared solvers: the one dispatch point) ->
``backends`` (the one compiled source: host, CUDA) -> ``ik`` (the IK reference) ->
``kinematics`` (FK and Jacobian reference) -> ``model``. The core imports without rclpy and
CuPy; everything that touches ROS lives in ``ros2_ik.ros``.
"""

from .api import (ChainSolver, IKSolver, Kinematics, check_path, check_states, fk, fk_frames,
                  jacobian, solve_ik, solve_pose, solve_pose_k_best, trajectory_seed)
from .backend import Backend, get_backend, get_xp
from .errors import (BackendUnavailableError, IKError, InputTypeError, InvalidInputError,
                     ShapeError,
                     UnknownJointError, UnknownLinkError, UrdfError)
from .ik import IKConfig, IKResult, SolveMode, Status
from .ik.terms import GoalSet, Posture, StepBound, Term
from .model import JointType, Model, load_robot

__version__ = "0.2.0"

__all__ = [
    "Model", "JointType", "load_robot", "Backend", "get_backend", "get_xp", "IKError",
    "UrdfError", "UnknownLinkError", "UnknownJointError", "ShapeError", "InvalidInputError",
    "InputTypeError", "BackendUnavailableError", "__version__", "fk", "fk_frames", "jacobian",
    "solve_pose", "solve_ik", "IKSolver", "ChainSolver", "Kinematics", "trajectory_seed",
    "IKConfig", "IKResult", "SolveMode", "Status", "check_states", "check_path",
    "solve_pose_k_best", "Term", "Posture", "StepBound", "GoalSet",
]
