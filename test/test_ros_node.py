"""The ros2_ik node as a separate process, over DDS on loopback (own ROS_DOMAIN_ID).

One node process for the module (robot panda via config/ros2_ik.yaml + overrides). Every IK
success is checked by FK here, independently of the node's own verification.
"""

from __future__ import annotations

import os
import threading
import time
import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from geometry_msgs.msg import PoseStamped  # noqa: E402
from ros2_ik_interfaces.action import TrajectorySeed  # noqa: E402
from ros2_ik_interfaces.srv import ComputeFK, ComputeJacobian  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.kinematics import (fk_frames, jacobian, pose_error, pose_inverse,  # noqa: E402
                                pose_to_pq, pq_to_pose)
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import (as_f64, f64_array, pq_to_pose_stamped,  # noqa: E402
                                     sec_to_duration)
from ros_testing import (Client, Feedback, NodeProcess, ik_request, joint_state,  # noqa: E402
                         random_domain_id, serving_node)
from ros2_ik.api import interpolate_keyframes, solve_pose  # noqa: E402

TIP = "panda_hand_tcp"
MAX_BATCH = 50_000
POS_TOL, ROT_TOL = 1e-4, 1e-3


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda", "max_batch": MAX_BATCH, "diagnostics.period": 0.2},
                      server_timeout=30) as (node, client):
        yield types.SimpleNamespace(node=node, client=client, model=load_robot("panda"),
                                    domain=node.domain_id)


def reachable(model, n, seed=0):
    q = model.random_q(np.random.default_rng(seed), n)
    T = np.asarray(fk_frames(model, q, [TIP]))[:, 0]
    return q, T


def assert_fk_matches(model, q_full, joint_names, T_goal, tips=(TIP,), pos_tol=POS_TOL,
                      rot_tol=ROT_TOL):
    """FK of solutions (N, >= nq) in the node's joint order against goals (N, K, 4, 4)."""
    idx = [list(joint_names).index(n) for n in model.q_names]
    q = np.asarray(q_full)[:, idx]
    T = np.asarray(fk_frames(model, q, list(tips)))
    pe, re = pose_error(np.asarray(T_goal).reshape(T.shape), T)
    assert np.all(pe <= pos_tol * 1.0001), pe.max()
    assert np.all(re <= rot_tol * 1.0001), re.max()


def ik(ros, req, timeout=60.0):
    return ros.client.call(ros.client.ik, req, timeout)


# ---------------------------------------------------------------------- ComputeIK
def test_ik_batch_compact_solves_and_fk_verifies(ros):
    model = ros.model
    _, T = reachable(model, 200, seed=1)
    resp = ik(ros, ik_request(pose_to_pq(T), compact_response=True, num_seeds=8, timeout=30.0))
    assert list(resp.joint_names) == list(model.q_names)
    status = np.asarray(resp.status)
    assert status.shape == (200,)
    Q = as_f64(resp.compact_solutions).reshape(200, model.nq)
    ok = status == codes.SUCCESS
    assert ok.mean() >= 0.8, resp.message
    assert_fk_matches(model, Q[ok], resp.joint_names, T[ok])
    # honest failures: reported errors exceed a tolerance, and FK agrees with the reported error
    pe = as_f64(resp.position_errors)
    re = as_f64(resp.orientation_errors)
    for p in np.nonzero(~ok)[0]:
        assert status[p] == codes.NO_IK_SOLUTION
        assert pe[p] > POS_TOL or re[p] > ROT_TOL
    T_reached = np.asarray(fk_frames(model, Q, [TIP]))[:, 0]
    pe_fk, re_fk = pose_error(T, T_reached)
    np.testing.assert_allclose(pe, pe_fk, atol=1e-9)
    np.testing.assert_allclose(re, re_fk, atol=1e-7)
    if ok.all():
        assert resp.error_code.val == codes.SUCCESS and resp.message == ""
    else:
        assert resp.error_code.val == codes.NO_IK_SOLUTION
        assert "solved" in resp.message


def test_ik_matches_bare_solver(ros):
    """The node adds conversion only: same seeds, config and rng give the same answers."""
    model = ros.model
    _, T = reachable(model, 50, seed=2)
    resp = ik(ros, ik_request(pose_to_pq(T), compact_response=True, num_seeds=4, rng_seed=7,
                              timeout=60.0))
    from ros2_ik.ros.params import Settings, ik_config

    cfg = ik_config(Settings.from_values(), num_seeds=4, rng_seed=7, timeout=60.0)
    assert (cfg.num_seeds, cfg.rng_seed, cfg.timeout) == (4, 7, 60.0)
    bare = solve_pose(model, pose_to_pq(T), tips=[TIP], seeds=model.neutral_q(), config=cfg)
    np.testing.assert_array_equal(np.asarray(resp.status), bare.status)
    Q = as_f64(resp.compact_solutions).reshape(50, model.nq)
    np.testing.assert_allclose(Q, bare.q, atol=1e-12)


def test_one_goal_answer_equals_the_prepared_solver(ros):
    """A one-goal request (solve_pose answers it with a prepared ChainSolver): the same answer
    as a bare ChainSolver with the node's options and the request's seed, FK-verified."""
    from ros2_ik.ros.params import Settings, ik_config
    from ros2_ik.api import ChainSolver

    model = ros.model
    q_seed = model.neutral_q() + 0.1
    prepared = ChainSolver(model, TIP, ik_config(Settings.from_values()))
    for k in range(5):
        _, T = reachable(model, 1, seed=40 + k)
        resp = ik(ros, ik_request(pose_to_pq(T), compact_response=True,
                                  seed=joint_state(model.q_names, q_seed)))
        bare = prepared.solve(pose_to_pq(T)[0], q_seed)
        assert resp.status[0] == bare.status[0]
        Q = as_f64(resp.compact_solutions).reshape(1, model.nq)
        np.testing.assert_allclose(Q, bare.q, atol=1e-12)
        if resp.status[0] == codes.SUCCESS:
            assert_fk_matches(model, Q, resp.joint_names, T[:, None])


@pytest.mark.parametrize("solver", __import__("ros2_ik.ik", fromlist=["x"]).SOLVERS)
def test_ik_every_solver(ros, solver):
    model = ros.model
    _, T = reachable(model, 20, seed=15)
    resp = ik(ros, ik_request(pose_to_pq(T), solver=solver, compact_response=True, num_seeds=8))
    status = np.asarray(resp.status)
    assert set(status.tolist()) <= {codes.SUCCESS, codes.NO_IK_SOLUTION, codes.TIMED_OUT}
    ok = status == codes.SUCCESS
    assert ok.any(), resp.message
    Q = as_f64(resp.compact_solutions).reshape(20, model.nq)
    assert_fk_matches(model, Q[ok], resp.joint_names, T[ok])
    if solver != "dls":  # CCD takes one tip: a two-tip request is refused with the reason
        T2 = np.asarray(fk_frames(model, model.neutral_q(), ["panda_link8", TIP]))
        bad = ik(ros, ik_request(pose_to_pq(T2), tip_links=["panda_link8", TIP], solver=solver))
        assert bad.error_code.val == codes.INVALID_REQUEST and "dls" in bad.message


def test_ik_friendly_form_two_tips(ros):
    model = ros.model
    tips = ["panda_link8", TIP]
    q = model.random_q(np.random.default_rng(3), 6)
    T = np.asarray(fk_frames(model, q, tips))  # (6, 2, 4, 4)
    goals = pq_to_pose_stamped(pose_to_pq(T).reshape(-1, 7), "panda_link0")
    resp = ik(ros, ik_request(goals=goals, tip_links=tips, num_seeds=8))
    assert len(resp.solutions) == 6
    status = np.asarray(resp.status)
    ok = status == codes.SUCCESS
    assert ok.sum() >= 4, resp.message
    Q = np.array([list(js.position) for js in resp.solutions])
    assert all(list(js.name) == list(model.q_names) for js in resp.solutions)
    assert_fk_matches(model, Q[ok], resp.joint_names, T[ok], tips=tips)


def test_ik_goal_in_link_frame_uses_fk_at_seed(ros):
    model = ros.model
    seed = model.neutral_q() + 0.1
    q_goal = seed + np.array([0.2, -0.1, 0.1, 0.15, -0.1, 0.2, 0.1])
    T_goal = np.asarray(fk_frames(model, q_goal, [TIP]))[0, 0]
    T_link = np.asarray(fk_frames(model, seed, ["panda_link3"]))[0, 0]
    local = np.linalg.inv(T_link) @ T_goal
    req = ik_request(goals=pq_to_pose_stamped(pose_to_pq(local)[None], "panda_link3"),
                     seed=joint_state(model.q_names, seed), num_seeds=8)
    resp = ik(ros, req)
    assert resp.error_code.val == codes.SUCCESS, resp.message
    assert_fk_matches(model, [list(resp.solutions[0].position)], resp.joint_names,
                      T_goal[None, None])


def test_ik_goal_at_seed_returns_seed_without_iterations(ros):
    model = ros.model
    seed = model.neutral_q() + np.linspace(-0.3, 0.3, model.nq)
    T = np.asarray(fk_frames(model, seed, [TIP]))[:, 0]
    # partial seed: the first 4 joints given, the rest come from mid-range, so give all here
    resp = ik(ros, ik_request(pose_to_pq(T), seed=joint_state(model.q_names, seed), num_seeds=1,
                              compact_response=True))
    assert resp.error_code.val == codes.SUCCESS, resp.message
    assert list(resp.iterations) == [0]
    np.testing.assert_allclose(as_f64(resp.compact_solutions), seed, atol=1e-12)
    assert_fk_matches(model, [as_f64(resp.compact_solutions)], resp.joint_names, T[:, None])


def _ik_once_seeded_by_topic(ros, pub, msgs, T, tries: int):
    """Publish ``msgs`` on joint_states and ask for the goal ``T`` (the FK of the seed they
    make) with one seed and no seed of its own, until the answer is the seed itself (status 1
    in 0 iterations: the node seeded it from the topic); that response. Fails after ``tries``."""
    req = ik_request(pose_to_pq(T), num_seeds=1, compact_response=True)
    for _ in range(tries):
        for msg in msgs:
            pub.publish(msg)
        resp = ik(ros, req)
        if list(resp.iterations) == [0] and list(resp.status) == [1]:
            return resp
        threading.Event().wait(0.05)
    pytest.fail(f"the node never used joint_states as the seed (last: status "
                f"{list(resp.status)}, iterations {list(resp.iterations)}, code "
                f"{resp.error_code.val})")


def test_ik_seed_from_joint_states_topic(ros):
    """joint_states (partial, with a foreign joint) seeds requests that give no seed."""
    model = ros.model
    q = model.neutral_q() + np.linspace(0.2, -0.2, model.nq)
    T = np.asarray(fk_frames(model, q, [TIP]))[:, 0]
    pub = ros.client.publisher(JointState, "/joint_states")
    names = list(model.q_names) + ["some_gripper_joint"]
    msg = joint_state(names, list(q) + [0.04])
    resp = _ik_once_seeded_by_topic(ros, pub, [msg], T, 100)
    np.testing.assert_allclose(as_f64(resp.compact_solutions), q, atol=1e-12)
    assert_fk_matches(model, [as_f64(resp.compact_solutions)], resp.joint_names, T[:, None])
    # reset the topic seed to mid-range so later tests see the default again
    pub.publish(joint_state(model.q_names, model.neutral_q()))


def test_joint_states_slow_source_outlasts_a_fast_one(ros):
    """joint_states are taken from DDS by the node (no wait set per message): a source that
    published once (the last joint) keeps its value in the seed while another floods the topic
    with more messages than DDS keeps (JOINT_STATES_DEPTH) and no request comes."""
    from ros2_ik.ros.joint_states import DEPTH as JOINT_STATES_DEPTH

    model = ros.model
    q = model.neutral_q() + np.linspace(-0.25, 0.2, model.nq)
    names = list(model.q_names)
    pub = ros.client.publisher(JointState, "/joint_states")
    fast = joint_state(names[:-1], q[:-1])
    T = np.asarray(fk_frames(model, q, [TIP]))[:, 0]
    # both sources have reached the node
    _ik_once_seeded_by_topic(ros, pub, [joint_state(names[-1:], q[-1:]), fast], T, 50)
    # the slow source moves once (no request takes it), then the flood: 3x what DDS keeps,
    # over about 1.5 s, no request meanwhile
    q2 = q.copy()
    q2[-1] += 0.3
    pub.publish(joint_state(names[-1:], q2[-1:]))
    threading.Event().wait(0.3)
    for i in range(3 * JOINT_STATES_DEPTH):
        pub.publish(fast)
        if i % 100 == 99:
            threading.Event().wait(0.1)
    T2 = np.asarray(fk_frames(model, q2, [TIP]))[:, 0]
    resp = ik(ros, ik_request(pose_to_pq(T2), num_seeds=1, compact_response=True))
    assert list(resp.status) == [1] and list(resp.iterations) == [0], (
        "the slow source's last joint_states message was lost behind the fast one's: "
        f"iterations {list(resp.iterations)}, status {list(resp.status)}")
    np.testing.assert_allclose(as_f64(resp.compact_solutions), q2, atol=1e-12)
    # reset the topic seed to mid-range so later tests see the default again
    pub.publish(joint_state(names, model.neutral_q()))


def test_ik_position_only_and_axis_weights(ros):
    model = ros.model
    _, T = reachable(model, 10, seed=4)
    pq = pose_to_pq(T)
    pq[:, 3:] = (0.0, 0.0, 0.0, 2.0)  # ignored with position_only (not even validated)
    resp = ik(ros, ik_request(pq, position_only=True, compact_response=True, num_seeds=4))
    assert resp.error_code.val == codes.SUCCESS, resp.message
    Q = as_f64(resp.compact_solutions).reshape(10, -1)
    reached = np.asarray(fk_frames(model, Q, [TIP]))[:, 0, :3, 3]
    assert np.all(np.linalg.norm(reached - T[:, :3, 3], axis=1) <= POS_TOL * 1.0001)
    bad = ik(ros, ik_request(pose_to_pq(T), axis_weights=[1, 1, 1]))
    assert bad.error_code.val == codes.INVALID_REQUEST
    assert "axis_weights" in bad.message and "6" in bad.message


def test_ik_timeout_is_honoured(ros):
    model = ros.model
    _, T = reachable(model, 20, seed=5)
    resp = ik(ros, ik_request(pose_to_pq(T), timeout=1e-9, num_seeds=1, compact_response=True))
    status = np.asarray(resp.status)
    assert np.all(status == codes.TIMED_OUT), status
    assert resp.error_code.val == codes.TIMED_OUT
    assert "timed out" in resp.message and "timeout" in resp.message


# ---------------------------------------------------------------------- ComputeIK: bad input
def test_ik_unknown_tip(ros):
    _, T = reachable(ros.model, 1)
    resp = ik(ros, ik_request(pose_to_pq(T), tip_links=["no_such_link"]))
    assert resp.error_code.val == codes.INVALID_LINK_NAME
    assert "no_such_link" in resp.message and "panda_link8" in resp.message
    assert len(resp.status) == 0 and len(resp.compact_solutions) == 0


def test_ik_bad_goals_are_flagged_per_problem(ros):
    model = ros.model
    _, T = reachable(model, 4, seed=6)
    pq = pose_to_pq(T)
    pq[1, 0] = np.nan                     # NaN position
    pq[2, 3:] = (0.0, 0.0, 0.0, 2.0)      # quaternion of norm 2
    resp = ik(ros, ik_request(pq, compact_response=True, num_seeds=8))
    status = np.asarray(resp.status)
    assert status[1] == codes.INVALID_GOAL and status[2] == codes.INVALID_GOAL
    assert resp.error_code.val == codes.INVALID_GOAL
    assert "NaN" in resp.message and "problem 1" in resp.message
    assert np.isnan(as_f64(resp.position_errors)[1])
    ok = status == codes.SUCCESS
    assert ok[[0, 3]].any()
    Q = as_f64(resp.compact_solutions).reshape(4, -1)
    assert_fk_matches(model, Q[ok], resp.joint_names, T[ok])
    # the quaternion message says what to do
    one = ik(ros, ik_request(pq[2:3]))
    assert one.error_code.val == codes.INVALID_GOAL
    assert "norm 2" in one.message and "normalize" in one.message


def test_ik_unknown_frame(ros):
    _, T = reachable(ros.model, 2)
    resp = ik(ros, ik_request(goals=pq_to_pose_stamped(pose_to_pq(T), "map")))
    assert resp.error_code.val == codes.FRAME_TRANSFORM_FAILURE
    assert "'map'" in resp.message and "panda_link0" in resp.message
    resp = ik(ros, ik_request(pose_to_pq(T), frame_id="world"))
    assert resp.error_code.val == codes.FRAME_TRANSFORM_FAILURE
    assert "compact_frame_id" in resp.message


@pytest.mark.parametrize("fields, needle", [
    ({}, "empty batch"),
    ({"compact_goals": f64_array(np.zeros(10))}, "multiple of 7"),
    ({"solver": "magic"}, "unknown solver"),
    ({"solve_mode": "fastest"}, "unknown solve_mode"),
    ({"position_tolerance": -1.0}, "position_tolerance"),
    ({"rng_seed": -5}, "rng_seed"),
])
def test_ik_invalid_requests(ros, fields, needle):
    req = ik_request(**fields) if "compact_goals" in fields else ik_request(
        None if not fields else pose_to_pq(reachable(ros.model, 1)[1]), **fields)
    resp = ik(ros, req)
    assert resp.error_code.val == codes.INVALID_REQUEST, resp.message
    assert needle in resp.message


def test_ik_negative_timeout_and_both_forms(ros):
    _, T = reachable(ros.model, 1)
    req = ik_request(pose_to_pq(T))
    req.timeout.sec = -1
    resp = ik(ros, req)
    assert resp.error_code.val == codes.INVALID_REQUEST and "negative" in resp.message
    req = ik_request(pose_to_pq(T), goals=pq_to_pose_stamped(pose_to_pq(T), ""))
    resp = ik(ros, req)
    assert resp.error_code.val == codes.INVALID_REQUEST and "exactly one form" in resp.message


def test_ik_seed_with_unknown_joint(ros):
    _, T = reachable(ros.model, 1)
    resp = ik(ros, ik_request(pose_to_pq(T), seed=joint_state(["panda_joint1", "elbow"],
                                                                [0.0, 0.1])))
    assert resp.error_code.val == codes.INVALID_ROBOT_STATE
    assert "'elbow'" in resp.message and "panda_joint1" in resp.message
    resp = ik(ros, ik_request(pose_to_pq(T), seed=joint_state(["panda_joint4"], [1.0])))
    assert resp.error_code.val == codes.INVALID_ROBOT_STATE
    assert "outside its limits" in resp.message


def test_giant_compact_batch_is_rejected_and_node_keeps_serving(ros):
    n = 100_000  # > max_batch of this node (50,000)
    pq = np.tile([0.4, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0], (n, 1))
    resp = ik(ros, ik_request(pq, compact_response=True))
    assert resp.error_code.val == codes.INVALID_REQUEST
    assert "100000 problems" in resp.message and "max_batch" in resp.message
    _, T = reachable(ros.model, 3, seed=8)
    resp = ik(ros, ik_request(pose_to_pq(T), compact_response=True, num_seeds=8))
    ok = np.asarray(resp.status) == codes.SUCCESS
    assert ok.shape == (3,) and ok.any(), resp.message
    assert_fk_matches(ros.model, as_f64(resp.compact_solutions).reshape(3, -1)[ok],
                      resp.joint_names, T[ok])
    assert ros.node.alive()


# ---------------------------------------------------------------------- ComputeFK
def test_fk_friendly_and_compact_match_core(ros):
    model = ros.model
    q = model.random_q(np.random.default_rng(9), 5)
    links = ["panda_link4", TIP]
    req = ComputeFK.Request()
    req.states = [joint_state(model.q_names, row) for row in q]
    req.link_names = links
    resp = ros.client.call(ros.client.fk, req)
    assert resp.error_code.val == codes.SUCCESS, resp.message
    T = np.asarray(fk_frames(model, q, links))
    got = np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z,
                     p.pose.orientation.x, p.pose.orientation.y, p.pose.orientation.z,
                     p.pose.orientation.w] for p in resp.poses])
    assert all(p.header.frame_id == "panda_link0" for p in resp.poses)
    pe, re = pose_error(T.reshape(-1, 4, 4), pq_to_pose(got))
    assert pe.max() < 1e-12 and re.max() < 1e-9
    # compact, columns in another order, a partial state, in the frame of panda_link2
    req = ComputeFK.Request()
    order = list(model.q_names)[::-1][:5]
    req.joint_names = order
    req.compact_positions = f64_array(q[:, [model.q_names.index(n) for n in order]])
    req.link_names = links
    req.frame_id = "panda_link2"
    resp = ros.client.call(ros.client.fk, req)
    assert resp.error_code.val == codes.SUCCESS, resp.message
    q_used = np.tile(np.clip(0.0, model.lower, model.upper), (5, 1))  # missing joints: 0 clamped
    q_used[:, [model.q_names.index(n) for n in order]] = q[:, [model.q_names.index(n)
                                                               for n in order]]
    Tf = np.asarray(fk_frames(model, q_used, links + ["panda_link2"]))
    want = pose_inverse(Tf[:, 2:3]) @ Tf[:, :2]
    pe, re = pose_error(want.reshape(-1, 4, 4),
                        pq_to_pose(as_f64(resp.compact_poses).reshape(-1, 7)))
    assert pe.max() < 1e-12 and re.max() < 1e-9


def test_fk_errors(ros):
    model = ros.model
    req = ComputeFK.Request()
    req.states = [joint_state(model.q_names, model.neutral_q())]
    req.link_names = ["hand"]
    resp = ros.client.call(ros.client.fk, req)
    assert resp.error_code.val == codes.INVALID_LINK_NAME and "'hand'" in resp.message
    req.link_names = []
    req.frame_id = "map"
    resp = ros.client.call(ros.client.fk, req)
    assert resp.error_code.val == codes.FRAME_TRANSFORM_FAILURE and "'map'" in resp.message
    req.frame_id = ""
    req.states = [joint_state(["knee"], [0.0])]
    resp = ros.client.call(ros.client.fk, req)
    assert resp.error_code.val == codes.INVALID_ROBOT_STATE and "'knee'" in resp.message
    resp = ros.client.call(ros.client.fk, ComputeFK.Request())
    assert resp.error_code.val == codes.INVALID_REQUEST and "no joint states" in resp.message


# ---------------------------------------------------------------------- ComputeJacobian
@pytest.mark.parametrize("reference, expressed, core_ex, numerical", [
    ("", "world", "world", False),
    ("", "local", "local", False),
    ("panda_link3", "", "reference", False),
    ("panda_link3", "local", "local", False),
    ("", "world", "world", True),
])
def test_jacobian_matches_core(ros, reference, expressed, core_ex, numerical):
    model = ros.model
    q = model.random_q(np.random.default_rng(10), 1)[0]
    req = ComputeJacobian.Request()
    req.state = joint_state(model.q_names, q)
    req.link_name = TIP
    req.reference_link = reference
    req.expressed_in = expressed
    req.numerical = numerical
    resp = ros.client.call(ros.client.jac, req)
    assert resp.error_code.val == codes.SUCCESS, resp.message
    assert (resp.rows, resp.cols) == (6, model.nv_active)
    assert list(resp.joint_names) == list(model.q_names)
    J = as_f64(resp.jacobian).reshape(6, -1)
    want = np.asarray(jacobian(model, q, TIP, reference=reference or None, expressed_in=core_ex,
                               method="numerical" if numerical else "analytic"))[0]
    np.testing.assert_allclose(J, want, atol=1e-12)


def test_jacobian_bad_expressed_in(ros):
    req = ComputeJacobian.Request()
    req.expressed_in = "tool"
    resp = ros.client.call(ros.client.jac, req)
    assert resp.error_code.val == codes.INVALID_REQUEST and "'local'" in resp.message


# ---------------------------------------------------------------------- goal topic
def test_goal_topic_publishes_solution(ros):
    model = ros.model
    sols, cond = ros.client.subscribe(JointState, "/ros2_ik/solution")
    _, T = reachable(model, 1, seed=11)
    goal = pq_to_pose_stamped(pose_to_pq(T), "panda_link0")[0]
    pub = ros.client.publisher(PoseStamped, "/ros2_ik/goal")
    for _ in range(50):
        pub.publish(goal)
        if Client.wait_for(cond, lambda: len(sols) > 0, timeout=0.5):
            break
    assert sols, "no JointState on ~/solution"
    js = sols[0]
    assert js.header.frame_id == "panda_link0"
    assert_fk_matches(model, [list(js.position)], js.name, T[:, None])
    # an unreachable goal: logged, nothing published (every message on ~/solution, including
    # late answers to the repeated reachable goal, solves the reachable goal)
    far = PoseStamped()
    far.header.frame_id = "panda_link0"
    far.pose.position.x = 5.0
    far.pose.orientation.w = 1.0
    pub.publish(far)
    assert ros.node.wait_for_log("nothing published", 20), ros.node.log_text()[-2000:]
    with cond:
        got = list(sols)
    for js in got:
        assert_fk_matches(model, [list(js.position)], js.name, T[:, None])


# ---------------------------------------------------------------------- action
def _keyframes(model, seed=12):
    q0 = model.neutral_q() + 0.1
    q1 = q0 + np.array([0.3, 0.2, -0.2, 0.2, 0.1, -0.2, 0.3])
    q2 = q1 + np.array([-0.2, 0.1, 0.2, 0.1, -0.2, 0.1, -0.2])
    T = np.asarray(fk_frames(model, np.stack([q0, q1, q2]), [TIP]))[:, 0]
    return q0, T


def test_trajectory_action_feedback_and_fk(ros):
    model = ros.model
    q0, T = _keyframes(model)
    goal = TrajectorySeed.Goal()
    goal.keyframes = pq_to_pose_stamped(pose_to_pq(T), "")
    goal.node_indices = [0, 15, 30]
    goal.mode = "sequential"
    goal.seed = joint_state(model.q_names, q0)
    goal.time_step = 0.05
    fb = Feedback()
    handle = ros.client.send_goal(goal, feedback=fb)
    status, result = ros.client.result(handle, timeout=120)
    from action_msgs.msg import GoalStatus

    node_status = np.asarray(result.node_status)
    assert node_status.shape == (31,)
    assert status == (GoalStatus.STATUS_SUCCEEDED if np.all(node_status == codes.SUCCESS)
                      else GoalStatus.STATUS_ABORTED)
    assert np.mean(node_status == codes.SUCCESS) >= 0.9, result.message
    assert fb.wait(lambda f: f and f[-1].nodes_done == 31), [f.nodes_done for f in fb.items]
    feedback = fb.items
    assert feedback and feedback[-1].nodes_done == 31 and feedback[-1].nodes_total == 31
    done = [f.nodes_done for f in feedback]
    assert done == sorted(done)
    traj = result.trajectory
    assert list(traj.joint_names) == list(model.q_names)
    assert len(traj.points) == 31
    t = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in traj.points]
    np.testing.assert_allclose(t, 0.05 * np.arange(31), atol=1e-9)
    Q = np.array([list(p.positions) for p in traj.points])
    ok = node_status == codes.SUCCESS
    targets = interpolate_keyframes(T, [0, 15, 30])
    assert_fk_matches(model, Q[ok], traj.joint_names, targets[ok][:, None])
    jumps = np.max(np.abs(np.diff(Q, axis=0)), axis=1)
    assert result.max_joint_jump == pytest.approx(jumps.max(), abs=1e-9)


def test_trajectory_cancel_while_services_keep_answering(ros):
    from action_msgs.msg import GoalStatus

    model = ros.model
    q0, T = _keyframes(model)
    goal = TrajectorySeed.Goal()
    goal.keyframes = pq_to_pose_stamped(pose_to_pq(T), "panda_link0")
    goal.node_indices = [0, 20000, 40000]   # long: cancelled long before the end
    goal.mode = "sequential"
    goal.seed = joint_state(model.q_names, q0)
    sec_to_duration(600.0, goal.timeout)
    got = threading.Event()
    handle = ros.client.send_goal(goal, feedback=lambda fb: got.set())
    assert got.wait(60), "no feedback"
    result_future = handle.get_result_async()
    # a service answers while the action is running
    req = ComputeFK.Request()
    req.states = [joint_state(model.q_names, q0)]
    resp = ros.client.call(ros.client.fk, req, timeout=30)
    assert resp.error_code.val == codes.SUCCESS
    assert not result_future.done(), "the action ended before the service answered"
    ros.client.cancel(handle)
    res = Client.wait_future(result_future, 60)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.error_code.val == codes.PREEMPTED
    st = np.asarray(res.result.node_status)
    assert st.shape == (40001,) and np.sum(st == codes.PREEMPTED) > 0
    assert "cancelled" in res.result.message


def test_trajectory_bad_goals(ros):
    from action_msgs.msg import GoalStatus

    model = ros.model
    _, T = _keyframes(model)
    goal = TrajectorySeed.Goal()
    goal.keyframes = pq_to_pose_stamped(pose_to_pq(T), "")
    goal.node_indices = [0, 5, 5]
    status, result = ros.client.result(ros.client.send_goal(goal))
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code.val == codes.INVALID_REQUEST and "strictly" in result.message
    goal.node_indices = [0, 5, 10]
    goal.tip_link = "nope"
    status, result = ros.client.result(ros.client.send_goal(goal))
    assert result.error_code.val == codes.INVALID_LINK_NAME and "'nope'" in result.message
    goal.tip_link = ""
    goal.keyframes[1].pose.orientation.w = 3.0
    status, result = ros.client.result(ros.client.send_goal(goal))
    assert result.error_code.val == codes.INVALID_GOAL and "keyframe 1" in result.message


# ---------------------------------------------------------------------- parameters
def test_parameter_changes_are_validated(ros):
    res = ros.client.set_parameters({"position_tolerance": -1.0})
    assert not res[0].successful
    res = ros.client.set_parameters({"solver": "magic"})
    assert not res[0].successful and "dls" in res[0].reason
    res = ros.client.set_parameters({"solve_mode": "fastest"})
    assert not res[0].successful and "speed" in res[0].reason
    res = ros.client.set_parameters({"robot": "r2d2"})
    assert not res[0].successful and "panda" in res[0].reason
    from ros2_ik.backend import cupy_available

    if not cupy_available():
        res = ros.client.set_parameters({"backend": "cupy"})
        assert not res[0].successful and "CuPy" in res[0].reason
    # a valid change applies to the next request
    res = ros.client.set_parameters({"num_seeds": 1})
    assert res[0].successful
    _, T = reachable(ros.model, 1, seed=13)
    resp = ik(ros, ik_request(pose_to_pq(T), compact_response=True))
    assert np.asarray(resp.status).shape == (1,)
    if resp.status[0] == codes.SUCCESS:
        assert_fk_matches(ros.model, [as_f64(resp.compact_solutions)], resp.joint_names,
                          T[:, None])
    assert ros.client.set_parameters({"num_seeds": 8})[0].successful


def test_link_parameters_must_name_a_link(ros):
    """A tip_link / base_link the robot does not have is rejected at set time, with the valid
    names; the parameter keeps its value and the node keeps its model."""
    for name in ("tip_link", "base_link"):
        res = ros.client.set_parameters({name: "no_such_link"})
        assert not res[0].successful, name
        assert "'no_such_link'" in res[0].reason and name in res[0].reason
        assert "panda_hand_tcp" in res[0].reason and "panda_link0" in res[0].reason  # choices
        assert ros.client.get_parameters([name])[0].string_value == ""
    # a link the robot has is accepted and used as the default tip
    assert ros.client.set_parameters({"tip_link": "panda_link8"})[0].successful
    try:
        assert ros.node.wait_for_log("default tip 'panda_link8'", 20)
        q, _ = reachable(ros.model, 3, seed=21)
        T8 = np.asarray(fk_frames(ros.model, q, ["panda_link8"]))[:, 0]
        resp = ik(ros, ik_request(pose_to_pq(T8), compact_response=True))
        ok = np.asarray(resp.status) == codes.SUCCESS
        assert ok.any(), resp.message
        assert_fk_matches(ros.model, as_f64(resp.compact_solutions).reshape(3, -1)[ok],
                          resp.joint_names, T8[ok][:, None], tips=("panda_link8",))
    finally:
        swaps = ros.node.log_text().count("replaced robot model")
        assert ros.client.set_parameters({"tip_link": ""})[0].successful
        # the model goes back to its default tip once prepared (the next cases expect it)
        assert ros.node.wait_for_count("replaced robot model", swaps + 1, 60) > swaps


# ---------------------------------------------------------------------- markers, diagnostics
def test_markers_for_ik_requests(ros):
    from visualization_msgs.msg import Marker, MarkerArray

    got, cond = ros.client.subscribe(MarkerArray, "/ros2_ik/markers")
    _, T = reachable(ros.model, 3, seed=14)
    pq = pose_to_pq(T)
    pq[2, 0] = np.nan
    for _ in range(50):
        resp = ik(ros, ik_request(pq, compact_response=True, num_seeds=8))
        if Client.wait_for(cond, lambda: len(got) > 0, timeout=0.3):
            break
    assert got, "no MarkerArray on ~/markers"
    markers = got[-1].markers
    assert markers[0].action == Marker.DELETEALL
    arrows = [m for m in markers if m.type == Marker.ARROW and m.action == Marker.ADD]
    assert len(arrows) == 3
    status = np.asarray(resp.status)
    ok = status == codes.SUCCESS
    assert_fk_matches(ros.model, as_f64(resp.compact_solutions).reshape(3, -1)[ok],
                      resp.joint_names, T[ok])
    for a, st in zip(arrows, status):
        assert a.header.frame_id == "panda_link0"
        if st == codes.SUCCESS:
            assert a.color.g > a.color.r
        elif st == codes.NO_IK_SOLUTION:
            assert a.color.r > a.color.g


def test_diagnostics(ros):
    from diagnostic_msgs.msg import DiagnosticArray

    ik(ros, ik_request(pose_to_pq(reachable(ros.model, 1)[1]), compact_response=True))
    got, cond = ros.client.subscribe(DiagnosticArray, "/diagnostics")

    def ours():
        return [{kv.key: kv.value for kv in s.values} for m in got for s in m.status
                if s.name == "ros2_ik: kinematics"]

    assert Client.wait_for(cond, lambda: any(int(v["requests"]) > 0 for v in ours()),
                           timeout=20)
    values = ours()[-1]
    assert values["model"] == "panda" and values["dof"] == "7"
    assert values["backend"] in ("numpy", "cupy")
    assert int(values["requests"]) > 0
    problems, solved = int(values["problems"]), int(values["problems_solved"])
    assert 0 < solved <= problems  # the request above was solved
    assert float(values["success_rate"]) == pytest.approx(solved / problems, abs=1e-4)
    assert "last_error" in values
    # a new period restarts the timer; reports keep coming
    assert ros.client.set_parameters({"diagnostics.period": 0.3})[0].successful
    assert not ros.client.set_parameters({"diagnostics.period": 0.0})[0].successful
    with cond:
        n = len(got)
    assert Client.wait_for(cond, lambda: len(got) > n + 2, timeout=20)


# ---------------------------------------------------------------------- last: clean exit
def test_moveit_absent_is_logged_once(tmp_path):
    """A node where moveit_msgs cannot be imported (hidden here: it is built by the set-up)
    says so once, serves its own services and no MoveIt ones, and follows no planning scene."""
    hide = tmp_path / "moveit_msgs"
    hide.mkdir()
    (hide / "__init__.py").write_text("raise ImportError('moveit_msgs hidden by the test')\n")
    import os

    env = {"PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}
    with NodeProcess(random_domain_id(), params={"robot": "ur"}, env=env) as node:
        with Client(node.domain_id) as client:
            client.wait_for_server(60)
            assert node.wait_for_log("]: ready: ", 60), node.log_text()[-2000:]
            names = dict(client.node.get_service_names_and_types())
            assert "/ros2_ik/compute_ik" in names and "/ros2_ik/solve_ik" not in names
        assert node.log_text().count("moveit_msgs is not importable") == 1
        assert "planning scene follows" not in node.log_text()


def test_ready_is_logged_once_the_model_serves_then_its_compiled_solver(ros):
    assert ros.node.wait_for_log("]: ready: ", 10), ros.node.log_text()[-2000:]
    assert ros.node.wait_for_log("solver for 'panda': backend host", 60)
    log = ros.node.log_text()
    assert log.index("]: serving: ") < log.index("]: ready: ")
    assert log.index("model 1 ('panda', URDF digest ") < log.index("]: ready: ")


def test_cold_node_serves_at_once_then_from_its_compiled_kernels(tmp_path):
    """An empty kernel cache: the model serves as soon as it is parsed, answered by the
    reference while the node builds the robot's kernels in the background (each answer names
    its backend), then by the compiled solver; every answer verified by FK."""
    model = load_robot("panda")
    domain = random_domain_id()
    t0 = time.monotonic()
    node = NodeProcess(domain, params={"robot": "panda"},
                       env={"ROS2_IK_KERNEL_CACHE": str(tmp_path / "kernels")})
    client = None
    try:
        client = Client(domain)
        client.wait_for_server(30)
        q, T = reachable(model, 3, seed=50)
        req = ik_request(pose_to_pq(T), compact_response=True, num_seeds=8, timeout=10.0)

        def checked(resp):
            assert resp.error_code.val in (codes.SUCCESS, codes.NO_IK_SOLUTION), resp.message
            status = np.asarray(resp.status)
            ok = status == codes.SUCCESS
            assert ok.any(), resp.message
            assert_fk_matches(model, as_f64(resp.compact_solutions).reshape(3, -1)[ok],
                              resp.joint_names, T[ok][:, None])
            assert resp.model_version == 1 and resp.backend in ("reference", "host")
            return resp.backend

        first = checked(client.call(client.ik, req, timeout=60))
        t_first = time.monotonic() - t0
        assert node.wait_for_log("solver for 'panda': backend host", 300), \
            node.log_text()[-2000:]
        assert checked(client.call(client.ik, req, timeout=60)) == "host"
        assert os.listdir(tmp_path / "kernels")  # built here, into the node's cache
        print(f"cold node: first IK answer ({first}) {t_first:.1f} s after start")
    finally:
        if client is not None:
            client.close()
        node.stop()


def test_node_survived_and_exits_cleanly(ros):
    assert ros.node.alive()
    log = ros.node.log_text()
    assert "Traceback" not in log, log[-3000:]
    rc = ros.node.stop()
    assert rc == 0, ros.node.log_text()[-3000:]
