"""FK, coordinates and every Jacobian kind, checked against closed forms and central differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import PLANAR_2LINK, ROBOT_NAMES, cupy_or_skip
from ros2_ik import Model, robots
from ros2_ik.errors import InvalidInputError, ShapeError, UnknownLinkError
from ros2_ik.kinematics import (difference, fk, fk_frames, integrate, jacobian, jacobian_dot,
                                jacobians_all, matrix_to_quat, maximal_to_generalized,
                                numerical_jacobian, pose_error, pose_gradient, pose_to_pq,
                                pq_to_pose, quat_to_matrix, slerp, so3_exp, so3_log, wrap_q)

A1, A2 = 0.7, 0.45


@pytest.fixture(scope="module")
def planar():
    return Model.from_urdf(PLANAR_2LINK.format(a1=A1, a2=A2))


# ---------------------------------------------------------------- closed forms (2-link arm)
def test_two_link_fk_closed_form(planar, rng):
    q = rng.uniform(-3, 3, size=(50, 2))
    p = fk_frames(planar, q, ["tip"])[:, 0, :3, 3]
    x = A1 * np.cos(q[:, 0]) + A2 * np.cos(q[:, 0] + q[:, 1])
    y = A1 * np.sin(q[:, 0]) + A2 * np.sin(q[:, 0] + q[:, 1])
    np.testing.assert_allclose(p, np.stack([x, y, np.zeros_like(x)], -1), atol=1e-12)


def test_two_link_jacobian_closed_form(planar, rng):
    q = rng.uniform(-3, 3, size=(50, 2))
    J = jacobian(planar, q, "tip")
    s1, c1 = np.sin(q[:, 0]), np.cos(q[:, 0])
    s12, c12 = np.sin(q.sum(1)), np.cos(q.sum(1))
    expected = np.zeros((50, 6, 2))
    expected[:, 0, 0] = -A1 * s1 - A2 * s12
    expected[:, 0, 1] = -A2 * s12
    expected[:, 1, 0] = A1 * c1 + A2 * c12
    expected[:, 1, 1] = A2 * c12
    expected[:, 5, :] = 1.0
    np.testing.assert_allclose(J, expected, atol=1e-12)
    # local frame: rotate into the tip frame (rotation about z by q1+q2)
    Jl = jacobian(planar, q, "tip", expressed_in="local")
    # joint 2 moves the tip straight along the tip's own y axis, at a lever arm of A2
    np.testing.assert_allclose(Jl[:, :3, 1], np.broadcast_to([0.0, A2, 0.0], (50, 3)), atol=1e-12)
    # joint 1: lever arm is the vector base -> tip, seen from the tip frame
    np.testing.assert_allclose(Jl[:, 1, 0], A2 + A1 * np.cos(q[:, 1]), atol=1e-12)
    np.testing.assert_allclose(Jl[:, 0, 0], A1 * np.sin(q[:, 1]), atol=1e-12)


def test_two_link_jdot_closed_form(planar, rng):
    q = rng.uniform(-3, 3, size=(20, 2))
    qd = rng.normal(size=(20, 2))
    Jd = jacobian_dot(planar, q, qd, "tip")
    w1, w12 = qd[:, 0], qd.sum(1)
    c1, s1, c12, s12 = np.cos(q[:, 0]), np.sin(q[:, 0]), np.cos(q.sum(1)), np.sin(q.sum(1))
    np.testing.assert_allclose(Jd[:, 0, 0], -A1 * c1 * w1 - A2 * c12 * w12, atol=1e-12)
    np.testing.assert_allclose(Jd[:, 1, 0], -A1 * s1 * w1 - A2 * s12 * w12, atol=1e-12)
    np.testing.assert_allclose(Jd[:, 0, 1], -A2 * c12 * w12, atol=1e-12)
    np.testing.assert_allclose(Jd[:, 1, 1], -A2 * s12 * w12, atol=1e-12)
    np.testing.assert_allclose(Jd[:, 3:], 0.0, atol=1e-12)


# ---------------------------------------------------------------- bundled robots: hand-checked
def test_panda_fk_hand_checked(models):
    m = models["panda"]
    T = fk_frames(m, np.zeros(7), ["panda_link8", "panda_hand_tcp"])[0]
    np.testing.assert_allclose(T[0, :3, 3], [0.088, 0.0, 0.926], atol=1e-12)
    np.testing.assert_allclose(T[0, :3, :3], np.diag([1.0, -1.0, -1.0]), atol=1e-12)
    np.testing.assert_allclose(T[1, :3, 3], [0.088, 0.0, 0.926 - 0.1034], atol=1e-12)
    q = np.array([0, 0, 0, -math.pi / 2, 0, math.pi / 2, 0])
    T = fk_frames(m, q, ["panda_link8"])[0, 0]
    np.testing.assert_allclose(T[:3, 3], [0.5545, 0.0, 0.6245], atol=1e-12)


def test_ur_fk_hand_checked(models):
    m = models["ur"]
    T = fk_frames(m, np.zeros(6), ["tool0"])[0, 0]
    np.testing.assert_allclose(T[:3, 3], [-0.81725, -0.19145, -0.005491], atol=1e-9)
    q = np.array([0, -math.pi / 2, 0, -math.pi / 2, 0, 0])
    T = fk_frames(m, q, ["tool0"])[0, 0]
    np.testing.assert_allclose(T[:3, 3], [0.0, -0.19145, 1.001059], atol=1e-9)


def test_dual_arm_fk_hand_checked(models):
    m = models["dual_arm"]
    T = fk_frames(m, np.zeros(m.nq), ["left_tool", "right_tool"])[0]
    np.testing.assert_allclose(T[0, :3, 3], [0.31, 0.47, 0.85], atol=1e-9)
    np.testing.assert_allclose(T[1, :3, 3], [0.31, -0.47, 0.85], atol=1e-9)


def test_misc_floating_base_moves_everything(models, rng):
    m = models["misc"]
    q = m.neutral_q()
    T0 = fk(m, q)[0]
    s = m.q_start[m.joint_index("base_joint")]
    q2 = q.copy()
    q2[s:s + 3] = [1.0, -2.0, 0.5]
    q2[s + 3:s + 7] = [0.0, 0.0, math.sin(0.3), math.cos(0.3)]  # 0.6 rad about z
    T1 = fk(m, q2)[0]
    G = np.eye(4)
    G[:3, :3] = so3_exp(np.array([0, 0, 0.6]))
    G[:3, 3] = [1.0, -2.0, 0.5]
    np.testing.assert_allclose(T1[1:], G @ T0[1:], atol=1e-12)


# ---------------------------------------------------------------- Jacobians vs differences
def _qs(m, rng, n=6):
    return m.random_q(rng, n)


@pytest.mark.parametrize("name", ROBOT_NAMES)
@pytest.mark.parametrize("expressed_in", ["world", "local"])
def test_jacobian_matches_central_differences(models, rng, name, expressed_in):
    m = models[name]
    q = _qs(m, rng)
    for tip in robots.ROBOTS[name]["tips"]:
        J = jacobian(m, q, tip, expressed_in=expressed_in)
        Jn = numerical_jacobian(m, q, tip, expressed_in=expressed_in)
        assert J.shape == (q.shape[0], 6, m.nv_active)
        np.testing.assert_allclose(J, Jn, atol=1e-7)
        # the user-facing method switch gives the same numbers
        np.testing.assert_allclose(jacobian(m, q, tip, expressed_in=expressed_in,
                                            method="numerical"), Jn)


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_pose_gradient_matches_differences_in_q(models, rng, name):
    m = models[name]
    q = _qs(m, rng)
    for tip in robots.ROBOTS[name]["tips"]:
        G = pose_gradient(m, q, tip)
        Gn = numerical_jacobian(m, q, tip, wrt="q")
        assert G.shape == (q.shape[0], 6, m.nq)
        np.testing.assert_allclose(G, Gn, atol=1e-7)


def test_pose_gradient_differs_from_jacobian_for_floating(models, rng):
    m = models["misc"]
    q = _qs(m, rng, 2)
    assert pose_gradient(m, q, "tool").shape[-1] == m.nv + 1 == jacobian(m, q, "tool").shape[-1] + 1


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_jacobian_dot_matches_differences_of_J(models, rng, name):
    m = models[name]
    q = _qs(m, rng)
    qd = rng.normal(size=(q.shape[0], m.nv_active))
    v = np.zeros((q.shape[0], m.nv))
    v[:, m.v_active] = qd
    h = 1e-6
    for tip in robots.ROBOTS[name]["tips"]:
        Jd = jacobian_dot(m, q, qd, tip)
        Jdn = (jacobian(m, integrate(m, q, h * v), tip)
               - jacobian(m, integrate(m, q, -h * v), tip)) / (2 * h)
        np.testing.assert_allclose(Jd, Jdn, atol=2e-7)


@pytest.mark.parametrize("expressed_in", ["reference", "world", "local"])
def test_frame_to_frame_jacobian_across_branches(models, rng, expressed_in):
    m = models["dual_arm"]
    q = _qs(m, rng)
    J = jacobian(m, q, "right_tool", reference="left_tool", expressed_in=expressed_in)
    Jn = numerical_jacobian(m, q, "right_tool", reference="left_tool", expressed_in=expressed_in)
    np.testing.assert_allclose(J, Jn, atol=1e-7)
    # the waist is above the common ancestor: it moves both hands alike and cancels out
    w = m.v_names.index("waist_joint")
    np.testing.assert_allclose(J[:, :, w], 0.0, atol=1e-12)
    # polarity: left-arm joints enter with the opposite sign of the hand's own Jacobian
    l1 = m.v_names.index("left_joint1")
    JA = jacobian(m, q, "left_tool")
    Jrel_world = jacobian(m, q, "right_tool", reference="left_tool", expressed_in="world")
    np.testing.assert_allclose(Jrel_world[:, 3:, l1], -JA[:, 3:, l1], atol=1e-12)


def test_frame_to_frame_on_floating_robot_with_frozen_joint(models, rng):
    m = models["misc"].lock(["elbow_joint"])
    q = _qs(m, rng)
    J = jacobian(m, q, "finger_right", reference="platform_marker")
    Jn = numerical_jacobian(m, q, "finger_right", reference="platform_marker")
    assert J.shape[-1] == m.nv - 1
    np.testing.assert_allclose(J, Jn, atol=1e-7)


def test_frame_to_frame_with_base_equals_plain_jacobian(models, rng):
    m = models["panda"]
    q = _qs(m, rng)
    np.testing.assert_allclose(jacobian(m, q, "panda_hand_tcp", reference="panda_link0",
                                        expressed_in="world"),
                               jacobian(m, q, "panda_hand_tcp"), atol=1e-12)


def test_jacobian_input_errors(models):
    m = models["panda"]
    with pytest.raises(UnknownLinkError, match="panda_hand_tcp"):
        jacobian(m, m.neutral_q(), "hand")
    with pytest.raises(InvalidInputError, match="expressed_in"):
        jacobian(m, m.neutral_q(), "panda_hand", expressed_in="body")
    with pytest.raises(ShapeError, match="qd must have shape"):
        jacobian_dot(m, m.neutral_q(), np.zeros(3), "panda_hand")


# ---------------------------------------------------------------- batching and coordinates
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_batched_equals_loop_of_singles(models, rng, name):
    m = models[name]
    q = _qs(m, rng, 7)
    tip = robots.ROBOTS[name]["tips"][0]
    T = fk(m, q)
    J = jacobian(m, q, tip)
    for i in range(q.shape[0]):
        np.testing.assert_array_equal(T[i], fk(m, q[i])[0])
        np.testing.assert_allclose(J[i], jacobian(m, q[i], tip)[0], rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_maximal_to_generalized_round_trip(models, rng, name):
    m = models[name]
    q = _qs(m, rng, 50)
    T = fk(m, q)
    np.testing.assert_allclose(maximal_to_generalized(m, T, q_ref=q), q, atol=1e-12)
    # without a reference: equal up to wrap of angles and quaternion sign -> same poses
    q2 = maximal_to_generalized(m, T)
    np.testing.assert_allclose(fk(m, q2), T, atol=1e-12)


def test_maximal_to_generalized_restores_continuous_turns(models):
    m = models["misc"]
    q = m.neutral_q()
    i = m.q_names.index("turret_joint")
    q[i] = 3 * math.pi - 0.2  # several turns
    T = fk(m, q)
    back = maximal_to_generalized(m, T, q_ref=q[None])
    assert back[0, i] == pytest.approx(q[i])
    assert maximal_to_generalized(m, T)[0, i] == pytest.approx(math.pi - 0.2)


def test_integrate_difference_inverse(models, rng):
    for m in models.values():
        q0 = m.random_q(rng, 10)
        v = rng.normal(size=(10, m.nv)) * 0.3
        q1 = integrate(m, q0, v)
        np.testing.assert_allclose(difference(m, q0, q1), v, atol=1e-10)


def test_wrap_q_only_touches_angles_of_continuous_joints(models):
    m = models["misc"]
    q = m.neutral_q()
    i = m.q_names.index("turret_joint")
    j = m.q_names.index("lift_joint")
    q[i], q[j] = 4.0, 0.3
    w = wrap_q(m, q[None])[0]
    assert w[i] == pytest.approx(4.0 - 2 * math.pi) and w[j] == 0.3


# ---------------------------------------------------------------- SE(3) helpers
def test_quaternion_matrix_round_trip_including_near_pi(rng):
    qs = rng.normal(size=(500, 4))
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    qs = np.concatenate([qs, [[1.0, 0, 0, 1e-9], [0, 1.0, 0, 0], [0, 0, 0, 1.0]]])
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    back = matrix_to_quat(quat_to_matrix(qs))
    sign = np.sign(np.sum(back * qs, axis=1, keepdims=True))
    np.testing.assert_allclose(back, sign * qs, atol=1e-9)
    # documented order (x, y, z, w): a 90 deg turn about z
    np.testing.assert_allclose(quat_to_matrix(np.array([0, 0, math.sqrt(0.5), math.sqrt(0.5)])),
                               [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)


def test_pose_pq_round_trip_and_errors(rng):
    pq = np.concatenate([rng.normal(size=(20, 3)), rng.normal(size=(20, 4))], axis=1)
    pq[:, 3:] /= np.linalg.norm(pq[:, 3:], axis=1, keepdims=True)
    T = pq_to_pose(pq)
    back = pose_to_pq(T)
    np.testing.assert_allclose(pq_to_pose(back), T, atol=1e-12)
    w = rng.normal(size=(20, 3))
    w *= (rng.uniform(0, math.pi - 1e-3, 20) / np.linalg.norm(w, axis=1))[:, None]
    np.testing.assert_allclose(so3_log(so3_exp(w)), w, atol=1e-9)
    T2 = T.copy()
    T2[:, :3, 3] += [0.3, 0.4, 0.0]
    T2[:, :3, :3] = T[:, :3, :3] @ so3_exp(np.array([0.0, 0.2, 0.0]))
    dp, dr = pose_error(T2, T)
    np.testing.assert_allclose(dp, 0.5, atol=1e-12)
    np.testing.assert_allclose(dr, 0.2, atol=1e-9)
    with pytest.raises(ShapeError, match="7 entries"):
        pq_to_pose(np.zeros((2, 6)))


def test_slerp_endpoints_and_midpoint():
    q0 = np.array([0, 0, 0, 1.0])
    q1 = np.array([0, 0, math.sin(0.5), math.cos(0.5)])  # 1 rad about z
    t = np.array([0.0, 0.5, 1.0])
    out = slerp(np.broadcast_to(q0, (3, 4)), np.broadcast_to(q1, (3, 4)), t)
    ang = np.linalg.norm(so3_log(quat_to_matrix(out)), axis=1)
    np.testing.assert_allclose(ang, [0.0, 0.5, 1.0], atol=1e-12)


# ---------------------------------------------------------------- numpy == cupy
@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_numpy_and_cupy_agree(models, rng, name):
    cp = cupy_or_skip()
    m = models[name]
    q = _qs(m, rng, 16)
    tip = robots.ROBOTS[name]["tips"][0]
    np.testing.assert_allclose(cp.asnumpy(fk(m, cp.asarray(q))), fk(m, q), atol=1e-12)
    np.testing.assert_allclose(cp.asnumpy(jacobian(m, cp.asarray(q), tip)),
                               jacobian(m, q, tip), atol=1e-12)
    J, _ = jacobians_all(m, cp.asarray(q))
    np.testing.assert_allclose(cp.asnumpy(J), jacobians_all(m, q)[0], atol=1e-12)
