"""The node's ~/reach_study action and ~/reach_map, over DDS with a real rclpy client."""

from __future__ import annotations

import threading
import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from action_msgs.msg import GoalStatus  # noqa: E402
from sensor_msgs.msg import PointCloud2  # noqa: E402

from ros2_ik_interfaces.action import ReachStudy  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.reach import Sphere, Study, StudyConfig, grid_targets, run_study  # noqa: E402
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64, f64_array  # noqa: E402
from ros2_ik.ros.handlers.reach_study import MAP_QOS  # noqa: E402
from ros_testing import Feedback, serving_node  # noqa: E402
from ros2_ik.ik import IKConfig  # noqa: E402


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda"}, server_timeout=60,
                      actions={"reach": (ReachStudy, "reach_study")}) as (node, client):
        action = client.actions["reach"]
        assert action.wait_for_server(timeout_sec=30), node.log_text()
        maps, cond = client.subscribe(PointCloud2, f"{client.ns}/reach_map", MAP_QOS)
        yield types.SimpleNamespace(node=node, client=client, action=action, maps=maps,
                                    cond=cond, model=load_robot("panda"))


def goal_sphere(radius=0.9, resolution=0.3, directions=3, rolls=2, shard=128, **kw):
    g = ReachStudy.Goal()
    g.sphere_center = [0.0, 0.0, 0.333]
    g.sphere_radius = radius
    g.resolution = resolution
    g.directions, g.rolls, g.shard_size = directions, rolls, shard
    for k, v in kw.items():
        setattr(g, k, v)
    return g


def send(ros, goal, feedback=None, timeout=30.0):
    handle = ros.client.wait_future(ros.action.send_goal_async(goal, feedback_callback=feedback),
                                    timeout)
    assert handle.accepted
    return handle


def test_reach_study_feedback_result_and_map(ros):
    fb = Feedback()
    handle = send(ros, goal_sphere(), feedback=fb)
    res = ros.client.wait_future(handle.get_result_async(), 300)
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    r = res.result
    assert r.error_code.val == codes.SUCCESS
    # the same study in this process, with the node's parameters (config/ros2_ik.yaml)
    t = grid_targets(Sphere((0, 0, 0.333), 0.9), 0.3, 3, 2)
    bare = run_study(Study(ros.model, t, "panda_hand_tcp", StudyConfig(
        ik=IKConfig(num_seeds=32, stall_iterations=5, max_iterations=100), shard_size=128)))
    assert r.targets == len(t) and r.reached == bare.summary["reached"]
    assert 0 < r.reached < r.targets
    np.testing.assert_allclose(as_f64(r.voxel_centers).reshape(-1, 3), bare.voxels["centre"])
    np.testing.assert_allclose(np.asarray(r.reachability),
                               bare.voxels["reachability"].astype(np.float32))
    assert r.frame_id == "panda_link0"
    # feedback: progress up to every target, counts consistent
    assert fb.wait(lambda f: f and f[-1].targets_done == len(t)), "no final feedback"
    fbs = fb.items
    assert fbs, "no feedback"
    done = [f.targets_done for f in fbs]
    assert done == sorted(done) and done[-1] == len(t)
    assert all(f.targets_total == len(t) for f in fbs)
    assert fbs[-1].reached == r.reached and fbs[-1].eta == pytest.approx(0.0)
    # the map: one point per voxel, the index as a field
    assert ros.client.wait_for(ros.cond, lambda: len(ros.maps) > 0, 30)
    cloud = ros.maps[-1]
    assert cloud.header.frame_id == "panda_link0" and cloud.width == t.num_voxels
    names = [f.name for f in cloud.fields]
    assert names == ["x", "y", "z", "reachability", "manipulability"]
    pts = np.frombuffer(bytes(cloud.data), dtype="<f4").reshape(cloud.width, 5)
    np.testing.assert_allclose(pts[:, :3], bare.voxels["centre"], atol=1e-6)
    np.testing.assert_array_equal(pts[:, 3], bare.voxels["reachability"].astype(np.float32))


def test_reach_study_cancel(ros):
    first = threading.Event()
    handle = send(ros, goal_sphere(radius=1.0, resolution=0.1, directions=8, shard=256),
                  feedback=lambda m: first.set() if m.feedback.targets_done > 0 else None)
    assert first.wait(120), "no progress feedback"
    ros.client.wait_future(handle.cancel_goal_async(), 10)
    res = ros.client.wait_future(handle.get_result_async(), 60)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.error_code.val == codes.PREEMPTED
    assert "cancelled after" in res.result.message
    assert res.result.targets > 0
    # the node keeps serving
    res2 = ros.client.wait_future(send(ros, goal_sphere(radius=0.3, resolution=0.3,
                                                        directions=1, rolls=1))
                                  .get_result_async(), 120)
    assert res2.status == GoalStatus.STATUS_SUCCEEDED


@pytest.mark.parametrize("change, code, words", [
    ({"tip_link": "nope"}, codes.INVALID_LINK_NAME, ["nope", "panda_link8"]),
    ({"sphere_radius": 0.0}, codes.INVALID_REQUEST, ["no targets", "sphere_radius"]),
    ({"resolution": -1.0}, codes.INVALID_REQUEST, ["resolution"]),
])
def test_reach_study_bad_goals(ros, change, code, words):
    res = ros.client.wait_future(send(ros, goal_sphere(**change)).get_result_async(), 60)
    assert res.status == GoalStatus.STATUS_ABORTED
    assert res.result.error_code.val == code
    for w in words:
        assert w in res.result.message, res.result.message


def test_reach_study_compact_targets(ros):
    bad = goal_sphere(sphere_radius=0.0)
    bad.compact_targets = f64_array([0.3, 0, 0.5, 0, 0, 0, 2.0])  # not a unit quaternion
    res = ros.client.wait_future(send(ros, bad).get_result_async(), 60)
    assert res.result.error_code.val == codes.INVALID_REQUEST
    assert "unit quaternions" in res.result.message
    ok = goal_sphere(sphere_radius=0.0)
    ok.compact_targets = f64_array([[0.3, 0, 0.5, 1, 0, 0, 0], [5.0, 0, 0, 0, 0, 0, 1]])
    res = ros.client.wait_future(send(ros, ok).get_result_async(), 60)
    assert res.status == GoalStatus.STATUS_SUCCEEDED
    assert res.result.targets == 2 and res.result.out_of_reach == 1


def test_the_test_client_keeps_a_goals_feedback_callback_after_its_result():
    """(The test client, which the feedback checks above rely on.) rclpy's ActionClient drops a
    goal's feedback callback when its result comes in; feedback and result travel on
    different topics, so a goal's last feedback, published before the result, can arrive
    after it and was lost (a loaded CI run: "no final feedback"). LockedActionClient keeps
    the callback."""
    from rclpy.task import Future
    from unique_identifier_msgs.msg import UUID

    from ros_testing import LockedActionClient, random_domain_id

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=random_domain_id())
    node = rclpy.create_node("feedback_kept", context=ctx)
    try:
        client = LockedActionClient(node, ReachStudy, "nowhere")
        uuid = bytes(range(16))
        client._feedback_callbacks[uuid] = lambda msg: None
        fut = Future()
        client._pending_result_requests[7] = fut
        client.add_future(fut)  # (as _get_result_async registers it)
        client._result_sequence_number_to_goal_id[7] = UUID(uuid=list(uuid))
        client._remove_pending_result_request(fut)  # (what a result's arrival runs)
        assert 7 not in client._pending_result_requests
        assert uuid in client._feedback_callbacks
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
