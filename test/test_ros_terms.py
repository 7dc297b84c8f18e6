"""ComputeIK's objectives beyond the pose goal, through the node (its own process, real
messages built by rosidl): a rest posture, a step bound, goal sets and several ranked answers.

Every answer is checked here by FK against the goal it claims, independently of the node; the
node's answers equal the library's for the same request (the same prepared solver, terms and
arguments); bad values are INVALID_REQUEST naming the field, and the node keeps serving.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from ros_testing import ik_request, joint_state, serving_node  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.api import solve_pose, solve_pose_k_best  # noqa: E402
from ros2_ik.ik.seeds import branch_distance, seed_distance  # noqa: E402
from ros2_ik.ik.terms import GoalSet, Posture, StepBound  # noqa: E402
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq  # noqa: E402
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64  # noqa: E402

TIP = "panda_hand_tcp"
TOL = (1e-4, 1e-3)


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda"}, server_timeout=30) as (node, client):
        yield types.SimpleNamespace(node=node, client=client, model=load_robot("panda"))


def _ik(ros, req):
    return ros.client.call(ros.client.ik, req, 60.0)


def _q(ros, resp, flat):
    """Rows of the response's joint order -> (N, nq) in the model's."""
    m = ros.model
    idx = [list(resp.joint_names).index(n) for n in m.q_names]
    return np.asarray(flat).reshape(-1, len(resp.joint_names))[:, idx]


def _reaches(m, q, T):
    pe, re = pose_error(T, np.asarray(fk_frames(m, q, [TIP]))[:, 0])
    return (pe <= TOL[0] * 1.0001) & (re <= TOL[1] * 1.0001)


def _cfg(**kw):
    """The node's options (its parameters' defaults) with the request's."""
    from ros2_ik.ros.params import Settings, ik_config

    return ik_config(Settings.from_values(), **kw)


def _goals(m, n, seed):
    rng = np.random.default_rng(seed)
    q = m.random_q(rng, n)
    return q, np.asarray(fk_frames(m, q, [TIP]))[:, 0]


def test_a_rest_posture_moves_the_answers_towards_it_and_costs_no_goal(ros):
    m = ros.model
    seed = m.neutral_q()
    _, T = _goals(m, 40, 1)
    rest = np.clip(seed + 0.3, m.lower, m.upper)
    base = dict(compact_response=True, num_seeds=4, rng_seed=3, timeout=30.0,
                seed=joint_state(m.q_names, seed))
    plain = _ik(ros, ik_request(pose_to_pq(T), **base))
    post = _ik(ros, ik_request(pose_to_pq(T), rest_posture=joint_state(m.q_names, rest),
                               posture_weight=0.5, **base))
    st0, st1 = np.asarray(plain.status), np.asarray(post.status)
    ok = st1 == codes.SUCCESS
    assert ok.mean() > 0.8 and (st0 == codes.SUCCESS).mean() > 0.8
    q1 = _q(ros, post, post.compact_solutions)
    assert _reaches(m, q1[ok], T[ok]).all()
    # the library's answers to the same requests, on the backend the node answered with (it
    # may answer with the reference while a new term's kernels build, so the node's plain
    # and posture answers can come from different backends: compare within one)
    cfg = _cfg(num_seeds=4, rng_seed=3, timeout=30.0)
    lib = solve_pose(m, pose_to_pq(T), tips=[TIP], seeds=seed, config=cfg, terms=[Posture()],
                     rest=rest, posture_weight=0.5, backend=post.backend)
    np.testing.assert_array_equal(st1, lib.status)  # (the goals' quaternions normalized by
    np.testing.assert_allclose(q1, lib.q, atol=1e-9)  # the node: a rounding apart)
    lib0 = solve_pose(m, pose_to_pq(T), tips=[TIP], seeds=seed, config=cfg,
                      backend=post.backend)
    np.testing.assert_array_equal(lib0.status, st1)  # the cost costs no goal
    d0, d1 = (np.linalg.norm(q - rest, axis=1)[ok] for q in (lib0.q, q1))
    assert np.all(d1 <= d0 + 1e-9) and d1.mean() < d0.mean()


def test_a_step_bound_keeps_every_joint_near_the_seed(ros):
    m = ros.model
    rng = np.random.default_rng(2)
    seed = m.random_q(rng, 1)[0]
    q1 = np.clip(seed + rng.normal(0, 0.15, (30, m.nq)), m.lower, m.upper)
    T = np.asarray(fk_frames(m, q1, [TIP]))[:, 0]
    resp = _ik(ros, ik_request(pose_to_pq(T), compact_response=True, num_seeds=4,
                               timeout=30.0, max_joint_step=0.2,
                               seed=joint_state(m.q_names, seed)))
    st = np.asarray(resp.status)
    ok = st == codes.SUCCESS
    assert 0 < ok.sum() < 30
    q = _q(ros, resp, resp.compact_solutions)
    assert _reaches(m, q[ok], T[ok]).all()
    assert np.all(np.abs(q[ok] - seed) <= 0.2 + 1e-12)
    assert np.all(st[~ok] == codes.NO_IK_SOLUTION)
    assert "max_joint_step" in resp.message
    cfg = _cfg(num_seeds=4, timeout=30.0)
    lib = solve_pose(m, pose_to_pq(T), tips=[TIP], seeds=seed, config=cfg,
                     terms=[StepBound(np.inf)],
                     max_joint_step=np.full(m.nq, 0.2), backend=resp.backend)
    np.testing.assert_allclose(q, lib.q, atol=1e-9)
    # velocity limits x step_time: the URDF's limits (the Panda's 2.175-2.61 rad/s)
    vel = np.asarray(m.velocity_limit)[np.asarray(m.q_to_v)]
    resp = _ik(ros, ik_request(pose_to_pq(T), compact_response=True, num_seeds=4,
                               timeout=30.0, step_time=0.05, seed=joint_state(m.q_names, seed)))
    ok = np.asarray(resp.status) == codes.SUCCESS
    q = _q(ros, resp, resp.compact_solutions)
    assert ok.any() and np.all(np.abs(q[ok] - seed) <= vel * 0.05 + 1e-12)


def test_goal_sets_take_any_candidate_and_say_which(ros):
    m = ros.model
    N, G = 20, 3
    _, cand = _goals(m, N * G, 4)
    cand = cand.reshape(N, G, 4, 4)
    reach = np.random.default_rng(5).integers(0, G, N)
    far = np.ones((N, G), bool)
    far[np.arange(N), reach] = False
    cand[far, 2, 3] += 3.0  # out of reach
    pq = pose_to_pq(cand.reshape(-1, 4, 4))
    resp = _ik(ros, ik_request(pq, compact_response=True, num_seeds=4, timeout=30.0,
                               goals_per_problem=G))
    st = np.asarray(resp.status)
    ok = st == codes.SUCCESS
    assert ok.mean() > 0.8, resp.message
    gi = np.asarray(resp.goal_indices)
    assert gi.shape == (N,)
    np.testing.assert_array_equal(gi[ok], reach[ok])
    q = _q(ros, resp, resp.compact_solutions)
    assert _reaches(m, q[ok], cand[np.arange(N), gi][ok]).all()
    lib = solve_pose(m, pq.reshape(N, G, 7), tips=[TIP], config=_cfg(num_seeds=4, timeout=30.0),
                     seeds=m.neutral_q(), terms=[GoalSet(4)], backend=resp.backend)
    np.testing.assert_array_equal(lib.goal_index[ok], gi[ok])
    # friendly goals, and a count that is not a multiple of the candidates x tips
    from ros2_ik.ros.conversions import pq_to_pose_stamped

    goals = pq_to_pose_stamped(pq[:G * 2], "")
    resp = _ik(ros, ik_request(goals=goals, goals_per_problem=G, num_seeds=4))
    assert len(resp.solutions) == 2 and len(resp.goal_indices) == 2
    resp = _ik(ros, ik_request(goals=goals[:-1], goals_per_problem=G))
    assert resp.error_code.val == codes.INVALID_REQUEST and "goals_per_problem" in resp.message


def test_several_answers_ranked_distinct_and_verified(ros):
    m = ros.model
    _, T = _goals(m, 10, 6)
    for compact in (True, False):
        resp = _ik(ros, ik_request(pose_to_pq(T), compact_response=compact, num_seeds=8,
                                   timeout=30.0, max_solutions=4, min_solution_distance=0.3,
                                   solve_mode="distance"))
        counts = np.asarray(resp.solution_counts)
        st = np.asarray(resp.status)
        assert counts.shape == (10,) and np.all((counts > 0) == (st == codes.SUCCESS))
        assert counts.sum() >= 20
        if compact:
            best = _q(ros, resp, resp.compact_solutions)
            more = _q(ros, resp, resp.compact_more_solutions)
        else:
            best = _q(ros, resp, [as_f64(js.position) for js in resp.solutions])
            more = _q(ros, resp, [as_f64(js.position) for js in resp.more_solutions])
        assert more.shape[0] == int(np.sum(np.maximum(counts, 1) - 1))
        at = 0
        for p in range(10):
            n = int(counts[p])
            if not n:
                continue
            q = np.concatenate([best[p:p + 1], more[at:at + n - 1]])
            at += n - 1
            assert _reaches(m, q, np.broadcast_to(T[p], (n, 4, 4))).all()
            d = np.asarray(seed_distance(m, q, np.broadcast_to(m.neutral_q(), q.shape)))
            assert np.all(np.diff(d) >= -1e-12)  # nearest the seed first
            for i in range(n):
                for j in range(i):
                    assert float(seed_distance(m, q[i:i + 1], q[j:j + 1])[0]) >= 0.3
    cfg = _cfg(num_seeds=8, timeout=30.0, solve_mode="distance")
    lib = solve_pose_k_best(m, pose_to_pq(T), 4, min_distance=0.3, tips=[TIP], config=cfg,
                            seeds=m.neutral_q(), backend=resp.backend)
    np.testing.assert_array_equal(lib.count, counts)
    # by configuration branch (whole turns of joints merged): the library's answers
    resp = _ik(ros, ik_request(pose_to_pq(T), compact_response=True, num_seeds=8,
                               timeout=30.0, max_solutions=4, min_solution_distance=0.3,
                               solve_mode="distance", distinct_branches=True))
    counts = np.asarray(resp.solution_counts)
    lib = solve_pose_k_best(m, pose_to_pq(T), 4, min_distance=0.3, tips=[TIP], config=cfg,
                            seeds=m.neutral_q(), backend=resp.backend, distinct_branches=True)
    np.testing.assert_array_equal(lib.count, counts)
    more = _q(ros, resp, resp.compact_more_solutions)
    np.testing.assert_allclose(more, np.concatenate(
        [lib.q[p, 1:int(lib.count[p])] for p in range(10)]), atol=1e-12)
    for p in range(10):
        qs = lib.q[p, :int(lib.count[p])]
        for i in range(len(qs)):
            for j in range(i):
                assert float(branch_distance(m, qs[i:i + 1], qs[j:j + 1])[0]) >= 0.3


@pytest.mark.parametrize("field, value", [
    ("posture_weight", -1.0), ("max_joint_step", float("nan")), ("step_time", -0.1),
    ("goals_per_problem", 65), ("max_solutions", 65), ("min_solution_distance", -1.0)])
def test_bad_values_are_refused_and_the_node_keeps_serving(ros, field, value):
    m = ros.model
    _, T = _goals(m, 1, 7)
    kw = {field: value}
    if field == "posture_weight":
        kw["rest_posture"] = joint_state(m.q_names, m.neutral_q())
    resp = _ik(ros, ik_request(pose_to_pq(T), **kw))
    assert resp.error_code.val == codes.INVALID_REQUEST and field in resp.message
    ok = _ik(ros, ik_request(pose_to_pq(T), num_seeds=4))
    assert ok.error_code.val == codes.SUCCESS


def test_a_trajectory_seed_keeps_its_step_bound(ros):
    from action_msgs.msg import GoalStatus
    from ros2_ik_interfaces.action import TrajectorySeed

    from ros2_ik.ros.conversions import pq_to_pose_stamped

    m = ros.model
    q0 = m.neutral_q() + 0.1
    q1 = np.clip(q0 + np.array([1.2, 0.6, -0.8, 0.7, 0.5, -0.6, 1.0]), m.lower, m.upper)
    T = np.asarray(fk_frames(m, np.stack([q0, q1]), [TIP]))[:, 0]
    goal = TrajectorySeed.Goal()
    goal.keyframes = pq_to_pose_stamped(pose_to_pq(T), "")
    goal.node_indices = [0, 20]
    goal.mode = "sequential"
    goal.seed = joint_state(m.q_names, q0)
    goal.max_joint_step = 0.15
    status, result = ros.client.result(ros.client.send_goal(goal), timeout=120)
    st = np.asarray(result.node_status)
    Q = _q(ros, types.SimpleNamespace(joint_names=result.trajectory.joint_names),
           [list(p.positions) for p in result.trajectory.points])
    ok = st == codes.SUCCESS
    assert ok.mean() > 0.8, result.message
    prev, last = q0, -1
    for i in np.nonzero(ok)[0]:
        assert np.max(np.abs(Q[i] - prev)) <= 0.15 * (i - last) + 1e-9
        prev, last = Q[i], i
    # velocity limits x time_step, and a bound in parallel mode is refused
    goal.max_joint_step, goal.step_from_velocity, goal.time_step = 0.0, True, 0.05
    status, result = ros.client.result(ros.client.send_goal(goal), timeout=120)
    st = np.asarray(result.node_status)
    assert (st == codes.SUCCESS).any()
    goal.mode = "parallel"
    status, result = ros.client.result(ros.client.send_goal(goal), timeout=60)
    assert status == GoalStatus.STATUS_ABORTED and "sequential" in result.message
