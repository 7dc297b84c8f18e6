"""Planning groups through the node process, over DDS (issue 10, point 2): the bundled
robot's SRDF, ComputeIK's group_name (one goal: the prepared solver; a batch: solve_pose), an
SRDF published on robot_description_semantic (transient local, as move_group publishes it), a
malformed one (rejected, the previous groups kept), unknown groups. Every success is checked
by FK here, and every joint outside the group must equal the seed.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq  # noqa: E402
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64  # noqa: E402
from ros_testing import ik_request, joint_state, serving_node  # noqa: E402

LEFT = [f"left_joint{i}" for i in range(1, 8)]
WRIST_SRDF = """<?xml version="1.0"?>
<robot name="dual_arm">
  <group name="left_wrist">
    <joint name="left_joint5"/><joint name="left_joint6"/><joint name="left_joint7"/>
  </group>
</robot>
"""


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "dual_arm", "stall_iterations": 5},
                      server_timeout=30) as (node, client):
        yield types.SimpleNamespace(node=node, client=client, model=load_robot("dual_arm"))


def _seed(model, rng):
    q = model.neutral_q()
    q[model.q_names.index("waist_joint")] = rng.uniform(-1.0, 1.0)
    for n in model.q_names:
        if n.startswith("right_"):
            q[model.q_names.index(n)] = rng.uniform(-0.5, 0.5)
    return q


def _solve_group(ros, group, moving, n, rng, tip_links=()):
    """n reachable goals for ``group`` (only ``moving`` joints differ from the seed in the
    goal configuration); checks every answer; returns the number solved."""
    m = ros.model
    seed = _seed(m, rng)
    q_goal = np.tile(seed, (n, 1))
    rand = m.random_q(rng, n)
    cols = [m.q_names.index(j) for j in moving]
    q_goal[:, cols] = rand[:, cols]
    T = np.asarray(fk_frames(m, q_goal, ["left_tool"]))[:, 0]
    req = ik_request(pose_to_pq(T), tip_links=list(tip_links), group_name=group,
                     seed=joint_state(m.q_names, seed), compact_response=True, num_seeds=32)
    resp = ros.client.call(ros.client.ik, req, 60.0)
    assert resp.error_code.val in (codes.SUCCESS, codes.NO_IK_SOLUTION), resp.message
    Q = as_f64(resp.compact_solutions).reshape(n, -1)
    names = list(resp.joint_names)
    Q = Q[:, [names.index(j) for j in m.q_names]]
    fixed = [i for i, j in enumerate(m.q_names) if j not in moving]
    np.testing.assert_array_equal(Q[:, fixed], np.tile(seed[fixed], (n, 1)))
    ok = np.asarray(resp.status) == codes.SUCCESS
    pe, re = pose_error(T[ok], np.asarray(fk_frames(m, Q[ok], ["left_tool"]))[:, 0])
    assert np.all(pe <= 1e-4 * 1.0001) and np.all(re <= 1e-3 * 1.0001)
    return int(ok.sum())


def test_bundled_groups_one_goal_and_batch(ros):
    """left_arm (torso_link -> left_tool, its tip the default): the waist and the right arm
    stay at the seed, for one goal (prepared solver) and a batch."""
    rng = np.random.default_rng(0)
    assert ros.node.wait_for_log("groups ['left_arm'", 5), ros.node.log_text()[-2000:]
    solved = sum(_solve_group(ros, "left_arm", LEFT, 1, rng) for _ in range(6))
    assert solved >= 5
    assert _solve_group(ros, "left_arm", LEFT, 16, rng) >= 14
    # the same with the tip named
    assert _solve_group(ros, "left_arm", LEFT, 4, rng, tip_links=["left_tool"]) >= 3


def test_no_group_moves_only_the_tips_chain(ros):
    """No group, tip left_tool: the waist and the left arm may move, the right arm never (with
    32 seeds and early stalls, random restarts win often)."""
    rng = np.random.default_rng(2)
    chain = LEFT + ["waist_joint"]
    solved = sum(_solve_group(ros, "", chain, 1, rng, tip_links=["left_tool"]) for _ in range(4))
    assert solved >= 3
    assert _solve_group(ros, "", chain, 16, rng, tip_links=["left_tool"]) >= 14


def test_unknown_group(ros):
    pq = np.array([[0.3, 0.3, 0.8, 0, 0, 0, 1.0]])
    resp = ros.client.call(ros.client.ik, ik_request(pq, group_name="no_such_group"), 30.0)
    assert resp.error_code.val == codes.INVALID_GROUP_NAME
    assert "left_arm" in resp.message and "no_such_group" in resp.message
    assert len(resp.compact_solutions) == 0 and len(resp.solutions) == 0


def test_srdf_from_the_topic_replaces_the_groups(ros):
    ros.client.publish_robot_description(WRIST_SRDF, "/robot_description_semantic")
    assert ros.node.wait_for_log("planning groups ['left_wrist'] from topic", 20), \
        ros.node.log_text()[-2000:]
    rng = np.random.default_rng(1)
    wrist = ["left_joint5", "left_joint6", "left_joint7"]
    assert _solve_group(ros, "left_wrist", wrist, 6, rng, tip_links=["left_tool"]) >= 5
    # the bundled groups are gone with the old SRDF
    pq = np.array([[0.3, 0.3, 0.8, 0, 0, 0, 1.0]])
    resp = ros.client.call(ros.client.ik, ik_request(pq, group_name="left_arm"), 30.0)
    assert resp.error_code.val == codes.INVALID_GROUP_NAME and "left_wrist" in resp.message
    # a malformed SRDF is rejected; the groups stay
    ros.client.publish_robot_description("<robot><group name='x'>", "/robot_description_semantic")
    assert ros.node.wait_for_log("robot_description_semantic rejected", 20), \
        ros.node.log_text()[-2000:]
    assert _solve_group(ros, "left_wrist", wrist, 3, rng, tip_links=["left_tool"]) >= 2


def test_srdf_parameter_at_runtime(ros):
    srdf = WRIST_SRDF.replace("left_wrist", "left_hand_only")
    res = ros.client.set_parameters({"robot_description_semantic": srdf})
    assert res[0].successful, res[0].reason
    assert ros.node.wait_for_log(
        "planning groups ['left_hand_only'] from parameter robot_description_semantic", 20), \
        ros.node.log_text()[-2000:]
    rng = np.random.default_rng(3)
    wrist = ["left_joint5", "left_joint6", "left_joint7"]
    assert _solve_group(ros, "left_hand_only", wrist, 3, rng, tip_links=["left_tool"]) >= 2
    # a malformed SRDF parameter is refused with the reason; the groups stay
    res = ros.client.set_parameters({"robot_description_semantic": "<robot><group"})
    assert not res[0].successful and "SRDF" in res[0].reason
    assert _solve_group(ros, "left_hand_only", wrist, 2, rng, tip_links=["left_tool"]) >= 1


def test_a_new_robot_brings_its_own_groups_or_none_never_the_old_ones(ros):
    """Defect: after ``robot misc`` on a node that had dual_arm (misc has no SRDF) the node
    kept dual_arm's planning groups. The groups come with the model's source now: a bundled
    robot without an SRDF has none (a group request is INVALID_GROUP_NAME saying so), and
    going back brings dual_arm's again."""
    # (an earlier case set the SRDF parameter, which applies to any model: cleared first; ''
    # means the model's own groups again)
    res = ros.client.set_parameters({"robot_description_semantic": ""})
    assert res[0].successful, res[0].reason
    res = ros.client.set_parameters({"robot": "misc"})
    assert res[0].successful, res[0].reason
    assert ros.node.wait_for_log("replaced robot model: 'misc'", 60), ros.node.log_text()[-2000:]
    log = ros.node.log_text()
    assert "no SRDF" in log[log.index("replaced robot model: 'misc'"):]
    misc = load_robot("misc")
    T = fk_frames(misc, misc.neutral_q(), ["tool"])[:, 0]
    resp = ros.client.call(ros.client.ik, ik_request(pose_to_pq(T), tip_links=["tool"],
                                                     group_name="left_arm"))
    assert resp.error_code.val == codes.INVALID_GROUP_NAME, resp.message
    assert "left_arm" in resp.message
    res = ros.client.set_parameters({"robot": "dual_arm"})
    assert res[0].successful, res[0].reason
    assert ros.node.wait_for_count("replaced robot model: 'dual_arm'", 1, 60) >= 1
    rng = np.random.default_rng(5)
    _solve_group(ros, "left_arm", LEFT, 4, rng)
