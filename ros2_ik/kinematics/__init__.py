"""Batched kinematics on NumPy or CuPy: FK, Jacobians, J-dot, coordinates, SE(3) helpers."""

from .fk import (difference, fk, fk_frames, integrate, joint_motion, maximal_to_generalized,
                 wrap_angle, wrap_q)
from .jacobian import (jacobian, jacobian_dot, jacobians_all, numerical_jacobian,
                       pose_gradient, q_active)
from .se3 import (matrix_to_quat, pose_error, pose_inverse, pose_to_pq, pq_to_pose,
                  quat_multiply, quat_to_matrix, slerp, so3_exp, so3_log)

__all__ = [
    "fk", "fk_frames", "joint_motion", "integrate", "difference", "wrap_q", "wrap_angle",
    "maximal_to_generalized", "jacobian", "jacobians_all", "numerical_jacobian",
    "jacobian_dot", "pose_gradient", "q_active", "pose_to_pq", "pq_to_pose", "matrix_to_quat",
    "quat_to_matrix", "quat_multiply", "pose_error", "pose_inverse", "slerp", "so3_exp",
    "so3_log",
]
