"""The node's ~/base_placement action over DDS with a real rclpy client: the library's answer on
the node's live world and parameters, feedback, cancel, timeout, bad goals."""

from __future__ import annotations

import dataclasses
import math
import threading
import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from action_msgs.msg import GoalStatus  # noqa: E402
from ros2_ik_interfaces.action import BasePlacement  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.ik.collision import default_collision_model  # noqa: E402
from ros2_ik.kinematics import pose_to_pq  # noqa: E402
from ros2_ik.reach.placement import (Placement, PlacementConfig, Region,  # noqa: E402
                                     run_placement)
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64, f64_array, sec_to_duration  # noqa: E402
from ros2_ik.ros.params import Settings, ik_config  # noqa: E402
from ros2_ik.world import Obstacle, World  # noqa: E402
from ros_testing import Feedback, add_box, serving_node  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda"}, server_timeout=60,
                      actions={"place": (BasePlacement, "base_placement")}) as (node, client):
        action = client.actions["place"]
        assert action.wait_for_server(timeout_sec=30), node.log_text()
        res = add_box(client, "table", (0.6, 0.8, 0.4), (0.7, 0.0, 0.2))
        assert res.error_code.val == codes.SUCCESS, res.message
        world = World().add(Obstacle.make("table", "box", (0.6, 0.8, 0.4),
                                          [0.7, 0, 0.2, 0, 0, 0, 1]))
        yield types.SimpleNamespace(node=node, client=client, action=action, world=world,
                                    version=int(res.version), model=load_robot("panda"))


def _task():
    T = np.tile(np.eye(4), (6, 1, 1))
    for i, (x, y) in enumerate([(0.5, -0.2), (0.5, 0.0), (0.6, -0.1), (0.7, 0.1),
                                (0.55, 0.15), (0.65, -0.25)]):
        a, b = 0.3 * i, math.pi
        Rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
        Ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
        T[i, :3, :3] = Rz @ Ry
        T[i, :3, 3] = (x, y, 0.5)
    return np.asarray(pose_to_pq(T))


def _goal(**kw):
    g = BasePlacement.Goal()
    g.compact_poses = f64_array(_task())
    g.x_min, g.x_max, g.y_min, g.y_max = -0.4, 0.2, -0.3, 0.3
    g.resolution, g.yaw_step, g.top = 0.2, math.pi / 2, 3
    g.shard_size = 8
    for k, v in kw.items():
        if k == "timeout":
            sec_to_duration(v, g.timeout)
        else:
            setattr(g, k, v)
    return g


def _send(ros, goal, feedback=None):
    h = ros.client.wait_future(ros.action.send_goal_async(goal, feedback_callback=feedback), 120)
    assert h.accepted
    return h


def test_the_action_answers_as_the_library_on_the_nodes_world(ros):
    fb = Feedback()
    h = _send(ros, _goal(), feedback=fb)
    res = ros.client.wait_future(h.get_result_async(), 300)
    r = res.result
    assert res.status == GoalStatus.STATUS_SUCCEEDED, r.message
    assert r.error_code.val == codes.SUCCESS and r.world_version == ros.version
    assert r.frame_id == "panda_link0"
    # the same search in this process, with the node's parameters
    s = Settings.from_values({"robot": "panda"})
    fine = dataclasses.replace(ik_config(s, avoid_collisions=True), timeout=None)
    coarse = dataclasses.replace(fine, num_seeds=4, stall_iterations=3, max_iterations=60)
    m = ros.model
    pl = Placement(m, _task(), Region((-0.4, 0.2), (-0.3, 0.3)), world=ros.world,
                   config=PlacementConfig(resolution=0.2, yaw_step=math.pi / 2, top=3,
                                          coarse=coarse, fine=fine, shard_size=8),
                   collision=default_collision_model(m, within=0.01))
    lib = run_placement(pl)
    np.testing.assert_allclose(as_f64(r.compact_bases).reshape(-1, 4), lib.candidates["base"])
    np.testing.assert_allclose(as_f64(r.fraction), lib.candidates["fraction"])
    assert list(r.reached) == lib.candidates["reached"].tolist()
    assert list(r.answer_reached) == lib.candidates["success"].ravel().tolist()
    q = as_f64(r.compact_solutions).reshape(3, 6, len(r.joint_names))
    cols = [list(r.joint_names).index(n) for n in m.q_names]
    np.testing.assert_allclose(q[:, :, cols], lib.candidates["q"])
    np.testing.assert_allclose(as_f64(r.map_bases).reshape(-1, 4), lib.coarse["base"])
    np.testing.assert_allclose(np.asarray(r.map_fraction), lib.coarse["fraction"], atol=1e-7)
    assert r.base_poses[0].orientation.w == pytest.approx(
        math.cos(lib.candidates["base"][0, 3] / 2))
    assert r.fraction[0] > 0.5 and r.solves > 0 and r.pruned > 0
    # feedback: both stages, the last of each complete
    assert fb.wait(lambda f: f and f[-1].stage == "refine"
                   and f[-1].candidates_done == f[-1].candidates_total), "no final feedback"
    fbs = fb.items
    stages = [f.stage for f in fbs]
    assert "coarse" in stages and "refine" in stages
    last = {f.stage: f for f in fbs}
    assert last["coarse"].candidates_done == last["coarse"].candidates_total == 64
    assert last["refine"].candidates_done == last["refine"].candidates_total


def test_cancel_and_timeout(ros):
    first = threading.Event()
    big = _goal(x_min=-0.8, x_max=0.4, y_min=-0.8, y_max=0.8, resolution=0.02, shard_size=50)
    h = _send(ros, big, feedback=lambda m: first.set() if m.feedback.candidates_done else None)
    assert first.wait(120), "no progress feedback"
    ros.client.wait_future(h.cancel_goal_async(), 10)
    res = ros.client.wait_future(h.get_result_async(), 120)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.error_code.val == codes.PREEMPTED, res.result.message
    res = ros.client.wait_future(_send(ros, _goal(timeout=1e-9)).get_result_async(), 120)
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.error_code.val == codes.TIMED_OUT, res.result.message
    assert "timed out" in res.result.message
    # the node keeps serving
    ok = ros.client.wait_future(_send(ros, _goal()).get_result_async(), 300)
    assert ok.status == GoalStatus.STATUS_SUCCEEDED


@pytest.mark.parametrize("change, code, words", [
    ({"frame_id": "camera"}, codes.FRAME_TRANSFORM_FAILURE, ["camera", "panda_link0"]),
    ({"tip_link": "nope"}, codes.INVALID_LINK_NAME, ["nope"]),
    ({"compact_poses": f64_array([])}, codes.INVALID_REQUEST, ["compact_poses has 0"]),
    ({"compact_poses": f64_array([0.5, 0, 0.5, 0, 0, 0, 2.0])}, codes.INVALID_REQUEST,
     ["norm"]),
    ({"compact_poses": f64_array([0.5, 0, np.nan, 0, 0, 0, 1.0])}, codes.INVALID_REQUEST,
     ["NaN"]),
    ({"x_min": 0.5, "x_max": -0.5}, codes.INVALID_REQUEST, ["upside down"]),
    ({"y_max": float("inf")}, codes.INVALID_REQUEST, ["y_max"]),
    ({"x_min": 4.0, "x_max": 5.0}, codes.INVALID_REQUEST, ["beyond the arm's reach"]),
    ({"resolution": 1e-4, "x_min": -5.0, "x_max": 5.0}, codes.INVALID_REQUEST,
     ["placement.max_problems"]),
])
def test_bad_goals(ros, change, code, words):
    res = ros.client.wait_future(_send(ros, _goal(**change)).get_result_async(), 300)
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.error_code.val == code, res.result.message
    for w in words:
        assert w in res.result.message, res.result.message
