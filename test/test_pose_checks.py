"""Pose validity has one definition (``ros2_ik.validate``: :func:`check_poses`,
:func:`bad_rotations`, :data:`QUAT_NORM_TOL`, :data:`ROTATION_TOL`), and every place that
checks goals or keyframes uses it: the node's conversions, PoseObjective (the reference path),
trajectory keyframes, and the compiled goal checks (same bound, tested here)."""

import re

import numpy as np
import pytest

from ros2_ik.errors import InvalidInputError
from ros2_ik.kinematics.se3 import axis_angle_matrix
from ros2_ik.model import load_robot
from ros2_ik.ik import PoseObjective
from ros2_ik.api import interpolate_keyframes
from ros2_ik.validate import QUAT_NORM_TOL, ROTATION_TOL, bad_rotations, check_poses


def _rotations(off):
    """Identity and a rotation with one entry moved by ``off`` (R^T R off I by about that)."""
    R = np.stack([np.eye(3), axis_angle_matrix(np.array([0.0, 0.0, 1.0]), 0.3)])
    R[:, 0, 0] += off
    return R


def test_one_rotation_bound():
    assert not bad_rotations(_rotations(0.4 * ROTATION_TOL), np).any()
    assert bad_rotations(_rotations(2.0 * ROTATION_TOL), np).all()
    mirror = np.diag([1.0, 1.0, -1.0])[None]
    assert bad_rotations(mirror, np).all()


def test_pose_objective_and_keyframes_use_it():
    m = load_robot("panda")
    T = np.tile(np.eye(4), (2, 1, 1))
    T[:, :3, 3] = 0.3
    T[0, :3, :3] = _rotations(0.4 * ROTATION_TOL)[1]
    T[1, :3, :3] = _rotations(2.0 * ROTATION_TOL)[1]
    obj = PoseObjective(m, "panda_link8", T)
    assert obj.invalid_problems().tolist() == [False, True]
    interpolate_keyframes(T[:1], [0])
    with pytest.raises(InvalidInputError, match="keyframe 1 is not a rigid transform: its "
                                                "rotation block is not orthonormal"):
        interpolate_keyframes(T, [0, 5])


def test_one_quaternion_bound_for_keyframes_and_messages():
    pq = np.array([[0.1, 0.2, 0.3, 0, 0, 0, 1 + 0.5 * QUAT_NORM_TOL],
                   [0.1, 0.2, 0.3, 0, 0, 0, 1 + 2.0 * QUAT_NORM_TOL],
                   [np.nan, 0, 0, 0, 0, 0, 1]])
    _, ok, reason = check_poses(pq)
    assert ok.tolist() == [True, False, False] and reason.tolist() == [0, 2, 1]
    interpolate_keyframes(pq[:1], [0])
    with pytest.raises(InvalidInputError, match=r"keyframe 1 has a quaternion of norm 1\.002; "
                                                r"give a unit quaternion \(x y z w\)"):
        interpolate_keyframes(pq[:2], [0, 5])
    with pytest.raises(InvalidInputError, match="keyframe 1 contains NaN or infinity"):
        interpolate_keyframes(pq[[0, 2, 1]], [0, 5, 9])   # a NaN is named before a bad norm


def test_compiled_goal_checks_use_the_same_bound():
    from ros2_ik.backends import codegen
    from ros2_ik.backends.terms import pose as select

    assert float(select.ROTATION_TOL_C) == ROTATION_TOL
    from ros2_ik import load_robot

    m = load_robot("panda")
    src = codegen.solve_source(codegen.chain_of(m, [m.tips[0]]), "float64", host=True)
    bounds = re.findall(r"if \(fabs\(d - \(a == b \? 1\.0 : 0\.0\)\) > ([0-9.e-]+)\)", src)
    assert bounds and all(float(b) == ROTATION_TOL for b in bounds)


def test_the_node_conversions_reexport_the_same_objects():
    pytest.importorskip("rclpy")
    from ros2_ik import validate
    from ros2_ik.ros import conversions

    assert conversions.check_poses is validate.check_poses
    assert conversions.describe_bad_pose is validate.describe_bad_pose
    assert conversions.QUAT_NORM_TOL == validate.QUAT_NORM_TOL


def _one_pose_cases():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(300, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    cases = [rng.normal(size=7) for _ in range(300)]
    cases += [np.r_[rng.normal(size=3), qq] for qq in q]
    cases += [np.r_[rng.normal(size=3), qq * (1 + s * QUAT_NORM_TOL)]
              for qq, s in zip(q[:60], np.linspace(0.5, 1.5, 60))]
    nan, inf = np.nan, np.inf
    cases += [np.array(c, dtype=float) for c in (
        [nan, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, inf, 0, 0, 1],
        [1, 2, 3, 0, 0, 0, nan], [inf, 0, 0, 0, 0, 0, 1], [0, 0, 0, 1e308, 1e308, 0, 0])]
    return cases


def test_one_pose_paths_equal_the_array_paths():
    """check_poses and pq_to_pose take a Python-float path for a single pose (a one-goal
    request's hot path): the same verdicts and reasons as the array code on two copies, and the
    same values to the last bit or two (the norm's sum runs in another order)."""
    import warnings

    from ros2_ik.kinematics.se3 import pq_to_pose

    for c in _one_pose_cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            two = pq_to_pose(np.stack([c, c]))
        np.testing.assert_allclose(pq_to_pose(c), two[0], rtol=1e-15, atol=1e-15)
        for position_only in (False, True):
            for shape in ((7,), (1, 7), (1, 1, 7)):
                one = check_poses(c.reshape(shape), position_only=position_only)
                both = check_poses(np.stack([c, c]).reshape((2,) + shape),
                                   position_only=position_only)
                for a, b in zip(one, both):
                    assert a.shape == b.shape[1:] and a.dtype == b.dtype
                    np.testing.assert_allclose(a, b[0], rtol=1e-15, atol=1e-15)
