"""Property tests of the SE(3) / SO(3) helpers (``ros2_ik.kinematics.se3``) against SciPy's
``scipy.spatial.transform`` as the independent reference, and the Lie-group axioms they must
keep: exp/log inverse to each other (also near 0 and near pi), quaternion <-> matrix round
trips (up to the quaternion's sign), pose <-> (position, quaternion) round trips, inverses,
geodesic errors, slerp.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="hypothesis is not installed")
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation, Slerp

from ros2_ik.kinematics.se3 import (matrix_to_quat, pose_error, pose_inverse,
                                    pose_to_pq, pq_to_pose, quat_multiply, quat_to_matrix,
                                    rotation_angle, slerp, so3_exp, so3_log)

PROPS = settings(max_examples=200, deadline=None, derandomize=True, database=None)

unit = st.tuples(*[st.floats(-1, 1) for _ in range(3)]).filter(
    lambda v: np.linalg.norm(v) > 1e-3).map(lambda v: np.array(v) / np.linalg.norm(v))
angles = st.one_of(st.floats(0, math.pi - 1e-6), st.floats(0, 1e-7),
                   st.floats(math.pi - 1e-5, math.pi - 1e-9))
rotvecs = st.builds(lambda a, t: a * t, unit, angles)
quats = st.tuples(*[st.floats(-1, 1) for _ in range(4)]).filter(
    lambda v: np.linalg.norm(v) > 1e-2).map(lambda v: np.array(v) / np.linalg.norm(v))
points = st.tuples(*[st.floats(-10, 10) for _ in range(3)]).map(np.array)


def _same_quat(a, b, atol):
    return min(np.abs(a - b).max(), np.abs(a + b).max()) <= atol


@PROPS
@given(rotvecs)
def test_exp_matches_scipy_and_is_a_rotation(w):
    R = so3_exp(w)
    np.testing.assert_allclose(R, Rotation.from_rotvec(w).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert abs(np.linalg.det(R) - 1.0) < 1e-12


@PROPS
@given(rotvecs)
def test_log_inverts_exp(w):
    R = so3_exp(w)
    v = so3_log(R)
    np.testing.assert_allclose(so3_exp(v), R, atol=1e-9)
    theta = np.linalg.norm(w)
    assert abs(rotation_angle(R) - theta) <= 1e-7
    if theta < math.pi - 1e-4:  # away from pi the vector is unique
        np.testing.assert_allclose(v, w, atol=1e-8)
        np.testing.assert_allclose(v, Rotation.from_matrix(R).as_rotvec(), atol=1e-8)
        np.testing.assert_allclose(so3_log(R.T), -v, atol=1e-8)


@PROPS
@given(quats)
def test_quaternion_round_trips_match_scipy(q):
    R = quat_to_matrix(q)
    np.testing.assert_allclose(R, Rotation.from_quat(q).as_matrix(), atol=1e-12)
    assert _same_quat(matrix_to_quat(R), q, 1e-9)
    # a scaled quaternion is normalized
    np.testing.assert_allclose(quat_to_matrix(3.0 * q), R, atol=1e-12)


@PROPS
@given(quats, quats)
def test_quaternion_product_is_the_matrix_product(a, b):
    ab = quat_multiply(a, b)
    np.testing.assert_allclose(quat_to_matrix(ab), quat_to_matrix(a) @ quat_to_matrix(b),
                               atol=1e-12)
    assert _same_quat(ab, (Rotation.from_quat(a) * Rotation.from_quat(b)).as_quat(), 1e-12)


@PROPS
@given(points, quats, points, quats)
def test_poses_round_trip_invert_and_measure(p, q, p2, q2):
    pq = np.r_[p, q]
    T = pq_to_pose(pq)
    back = pose_to_pq(T)
    np.testing.assert_allclose(back[:3], p, atol=1e-12)
    assert _same_quat(back[3:], q, 1e-9)
    np.testing.assert_allclose(pose_inverse(T) @ T, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(T @ pose_inverse(T), np.eye(4), atol=1e-12)
    T2 = pq_to_pose(np.r_[p2, q2])
    dp, da = pose_error(T, T2)
    assert abs(dp - np.linalg.norm(p - p2)) <= 1e-12
    ref = (Rotation.from_quat(q2).inv() * Rotation.from_quat(q)).magnitude()
    assert abs(da - ref) <= 1e-7
    dp_b, da_b = pose_error(T2, T)  # symmetric
    assert abs(dp_b - dp) <= 1e-12 and abs(da_b - da) <= 1e-9


@PROPS
@given(quats, quats, st.floats(0, 1))
def test_slerp_matches_scipy(a, b, t):
    got = slerp(a, b, np.float64(t))
    ref = Slerp([0.0, 1.0], Rotation.from_quat([a, b]))([t]).as_quat()[0]
    assert _same_quat(got, ref, 1e-7)
    assert abs(np.linalg.norm(got) - 1.0) < 1e-12
    assert _same_quat(slerp(a, b, np.float64(0.0)), a, 1e-9)
    assert _same_quat(slerp(a, b, np.float64(1.0)), b, 1e-9)


def test_batched_shapes_match_single_calls():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(5, 4, 3))
    R = so3_exp(W)
    assert R.shape == (5, 4, 3, 3)
    for i in range(5):
        for j in range(4):
            np.testing.assert_allclose(R[i, j], so3_exp(W[i, j]), atol=1e-15)
    np.testing.assert_allclose(so3_exp(so3_log(R)), R, atol=1e-9)
