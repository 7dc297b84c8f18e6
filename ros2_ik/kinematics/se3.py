"""SE(3) / SO(3) / quaternion helpers, batched, one code path for NumPy and CuPy.

Conventions (the one place they are written down):
- A pose is a 4x4 homogeneous matrix ``T_a_b`` (frame b expressed in frame a), or position +
  quaternion ``(x, y, z, qx, qy, qz, qw)``: ROS order, scalar last, unit norm.
- Angular quantities are rotation vectors (axis * angle) [rad]; ``so3_log`` returns the one with
  angle in [0, pi].
- All functions take arbitrary leading batch axes: ``(..., 4, 4)``, ``(..., 3)``, ``(..., 4)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import get_xp
from ..errors import ShapeError

__all__ = [
    "skew", "quat_to_matrix", "matrix_to_quat", "quat_multiply", "quat_conjugate",
    "quat_normalize", "so3_exp", "so3_log", "axis_angle_matrix", "pose_to_pq", "pq_to_pose",
    "pose_inverse", "pose_error", "rotation_angle", "slerp",
]


def skew(v):
    """(..., 3) -> (..., 3, 3) cross-product matrix, ``skew(a) @ b == cross(a, b)``."""
    xp = get_xp(v)
    z = xp.zeros_like(v[..., 0])
    return xp.stack([
        xp.stack([z, -v[..., 2], v[..., 1]], axis=-1),
        xp.stack([v[..., 2], z, -v[..., 0]], axis=-1),
        xp.stack([-v[..., 1], v[..., 0], z], axis=-1),
    ], axis=-2)


def quat_normalize(q):
    xp = get_xp(q)
    return q / xp.linalg.norm(q, axis=-1, keepdims=True)


def quat_to_matrix(q):
    """(..., 4) quaternion (x, y, z, w), normalized here -> (..., 3, 3) rotation matrix."""
    xp = get_xp(q)
    q = quat_normalize(q)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return xp.stack([
        xp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=-1),
        xp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=-1),
        xp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def matrix_to_quat(R):
    """(..., 3, 3) rotation matrix -> (..., 4) unit quaternion (x, y, z, w) with w >= 0.

    Branch-free Shepperd method: the largest of the four candidate denominators is chosen per
    element with ``xp.where``, so the result is accurate for every rotation.
    """
    xp = get_xp(R)
    m00, m01, m02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    m10, m11, m12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    m20, m21, m22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    tr = m00 + m11 + m22
    cands = xp.stack([
        xp.stack([m21 - m12, m02 - m20, m10 - m01, 1 + tr], axis=-1),
        xp.stack([1 + m00 - m11 - m22, m01 + m10, m02 + m20, m21 - m12], axis=-1),
        xp.stack([m01 + m10, 1 - m00 + m11 - m22, m12 + m21, m02 - m20], axis=-1),
        xp.stack([m02 + m20, m12 + m21, 1 - m00 - m11 + m22, m10 - m01], axis=-1),
    ], axis=-2)  # (..., 4, 4); row k is 4*q*q_k for the k-th choice
    diag = xp.stack([1 + tr, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22],
                    axis=-1)
    k = xp.argmax(diag, axis=-1)
    idx = xp.broadcast_to(k[..., None, None], k.shape + (1, 4))
    q = xp.take_along_axis(cands, idx, axis=-2)[..., 0, :]
    q = quat_normalize(q)
    return xp.where(q[..., 3:4] < 0, -q, q)


def quat_conjugate(q):
    xp = get_xp(q)
    return xp.concatenate([-q[..., :3], q[..., 3:]], axis=-1)


def quat_multiply(a, b):
    """Hamilton product ``a * b`` of (..., 4) quaternions (x, y, z, w)."""
    xp = get_xp(a, b)
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return xp.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], axis=-1)


def axis_angle_matrix(axis, angle):
    """Rotation about unit ``axis`` (..., 3) by ``angle`` (...) [rad] -> (..., 3, 3) (Rodrigues)."""
    xp = get_xp(axis, angle)
    c = xp.cos(angle)[..., None, None]
    s = xp.sin(angle)[..., None, None]
    K = skew(axis)
    outer = axis[..., :, None] * axis[..., None, :]
    eye = xp.eye(3, dtype=K.dtype)
    return c * eye + s * K + (1 - c) * outer


def so3_exp(w):
    """Rotation vector (..., 3) [rad] -> rotation matrix (..., 3, 3)."""
    xp = get_xp(w)
    theta = xp.linalg.norm(w, axis=-1)
    small = theta < 1e-8
    safe = xp.where(small, 1.0, theta)
    a = xp.where(small, 1.0 - theta ** 2 / 6.0, xp.sin(safe) / safe)[..., None, None]
    b = xp.where(small, 0.5 - theta ** 2 / 24.0, (1 - xp.cos(safe)) / safe ** 2)[..., None, None]
    K = skew(w)
    return xp.eye(3, dtype=K.dtype) + a * K + b * (K @ K)


def so3_log(R):
    """Rotation matrix (..., 3, 3) -> rotation vector (..., 3) [rad], angle in [0, pi].

    Computed through the quaternion (accurate near 0 and near pi).
    """
    xp = get_xp(R)
    q = matrix_to_quat(R)  # w >= 0
    v = q[..., :3]
    sin_half = xp.linalg.norm(v, axis=-1)
    angle = 2.0 * xp.arctan2(sin_half, q[..., 3])
    small = sin_half < 1e-12
    scale = xp.where(small, 2.0, angle / xp.where(small, 1.0, sin_half))
    return v * scale[..., None]


def rotation_angle(R):
    """Angle [rad] of rotation matrices (..., 3, 3), in [0, pi]."""
    xp = get_xp(R)
    return xp.linalg.norm(so3_log(R), axis=-1)


def pose_inverse(T):
    xp = get_xp(T)
    R = T[..., :3, :3]
    Rt = xp.swapaxes(R, -1, -2)
    out = xp.zeros_like(T)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -(Rt @ T[..., :3, 3:4])[..., 0]
    out[..., 3, 3] = 1.0
    return out


def pose_to_pq(T):
    """(..., 4, 4) -> (..., 7) position + quaternion (x, y, z, qx, qy, qz, qw)."""
    xp = get_xp(T)
    return xp.concatenate([T[..., :3, 3], matrix_to_quat(T[..., :3, :3])], axis=-1)


def pq_to_pose(pq):
    """(..., 7) position + quaternion (x, y, z, qx, qy, qz, qw; normalized here) -> (..., 4, 4)."""
    if type(pq) is np.ndarray and pq.size == 7 and pq.shape[-1] == 7:  # one pose, any batch axes
        return _pq_to_pose_one(pq.reshape(7)).reshape(pq.shape[:-1] + (4, 4))
    xp = get_xp(pq)
    if pq.shape[-1] != 7:
        raise ShapeError(f"pose vector must have 7 entries (x y z qx qy qz qw), got {pq.shape}")
    T = xp.zeros(pq.shape[:-1] + (4, 4), dtype=pq.dtype)
    T[..., :3, :3] = quat_to_matrix(pq[..., 3:])
    T[..., :3, 3] = pq[..., :3]
    T[..., 3, 3] = 1.0
    return T


def _pq_to_pose_one(pq: np.ndarray) -> np.ndarray:
    """:func:`pq_to_pose` of one NumPy pose (7,), on Python floats: the array code costs about
    0.1 ms for one pose, most of a one-goal solve (SciPy's Rotation about 40 us)."""
    px, py, pz, x, y, z, w = pq.tolist()
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if n > 0.0:
        x, y, z, w = x / n, y / n, z / n, w / n
    else:  # as the array code: 0 / 0
        x = y = z = w = math.nan
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w), px],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w), py],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y), pz],
        [0.0, 0.0, 0.0, 1.0]], dtype=pq.dtype)


def pose_error(T_target, T_current):
    """Position error [m] and orientation error [rad] between poses (..., 4, 4).

    Position error is the Euclidean distance; orientation error is the angle of
    ``R_current^T R_target`` (geodesic distance on SO(3)).
    """
    xp = get_xp(T_target, T_current)
    dp = xp.linalg.norm(T_target[..., :3, 3] - T_current[..., :3, 3], axis=-1)
    R = xp.swapaxes(T_current[..., :3, :3], -1, -2) @ T_target[..., :3, :3]
    return dp, rotation_angle(R)


def slerp(q0, q1, t):
    """Spherical linear interpolation between unit quaternions (..., 4) at fractions t (...)."""
    xp = get_xp(q0, q1, t)
    dot = xp.sum(q0 * q1, axis=-1)
    q1 = xp.where((dot < 0)[..., None], -q1, q1)
    dot = xp.abs(dot)
    theta = xp.arccos(xp.clip(dot, -1.0, 1.0))
    small = theta < 1e-6
    st = xp.where(small, 1.0, xp.sin(theta))
    w0 = xp.where(small, 1.0 - t, xp.sin((1.0 - t) * theta) / st)
    w1 = xp.where(small, t, xp.sin(t * theta) / st)
    return quat_normalize(w0[..., None] * q0 + w1[..., None] * q1)
