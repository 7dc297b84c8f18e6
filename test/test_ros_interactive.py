"""The goal handle for rviz (``ros2_ik.ros.handlers.interactive``), tested through the node
process as rviz's InteractiveMarkers display uses it: the ROS 2 interactive markers protocol
(get_interactive_markers, then updates with consecutive sequence numbers, feedback as drags),
every published answer checked by FK and against the limits, unreachable and malformed drags,
a drag's stream of poses (the last pose is always the one answered) and a model swapped while
the handle is shown."""

from __future__ import annotations

import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from visualization_msgs.msg import (InteractiveMarkerFeedback,  # noqa: E402
                                    InteractiveMarkerUpdate)
from visualization_msgs.srv import GetInteractiveMarkers  # noqa: E402

from ros2_ik import load_robot, robots  # noqa: E402
from ros2_ik.kinematics import (fk_frames, matrix_to_quat, pose_error,  # noqa: E402
                                pose_to_pq, pq_to_pose, quat_to_matrix, slerp)
from ros2_ik.ros.conversions import pose_msg_to_pq, pq_to_pose_msg  # noqa: E402
from ros2_ik.ros.handlers.interactive import COLORS, FAILED_COLOR  # noqa: E402
from ros_testing import serving_node  # noqa: E402

NS = "/ros2_ik/goal_marker"
TIP = "panda_hand_tcp"
POS_TOL, ORI_TOL = 1e-4, 1e-3   # the node's defaults (config/ros2_ik.yaml)


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda", "interactive.timeout": 1.0},
                      server_timeout=60) as (node, client):
        get = client.node.create_client(GetInteractiveMarkers, f"{NS}/get_interactive_markers")
        assert get.wait_for_service(timeout_sec=30)
        updates, ucond = client.subscribe(
            InteractiveMarkerUpdate, f"{NS}/update",
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        solutions, scond = client.subscribe(JointState, f"{NS}/solution", 100)
        feedback = client.publisher(InteractiveMarkerFeedback, f"{NS}/feedback", 100)
        # the subscriptions are matched once a keep-alive (every second) arrives
        assert client.wait_for(ucond, lambda: len(updates) > 0, 30)
        yield types.SimpleNamespace(node=node, client=client, get=get, updates=updates,
                                    ucond=ucond, solutions=solutions, scond=scond,
                                    feedback=feedback, model=load_robot("panda"))


def _pose_of(im) -> np.ndarray:
    return pq_to_pose(np.array(pose_msg_to_pq(im.pose)))


def _color(im):
    c = im.controls[0].markers[0].color
    return (round(c.r, 3), round(c.g, 3), round(c.b, 3), round(c.a, 3))


def _feedback(name, T, event=InteractiveMarkerFeedback.POSE_UPDATE, client_id="/rviz/test",
              frame="panda_link0"):
    fb = InteractiveMarkerFeedback(client_id=client_id, marker_name=name, event_type=event)
    fb.header.frame_id = frame
    pq_to_pose_msg(pose_to_pq(np.asarray(T, dtype=np.float64)), fb.pose)
    return fb


def _marker_updates(r):
    return [u for u in list(r.updates) if u.type == InteractiveMarkerUpdate.UPDATE]


def _wait_marker(r, after: int, predicate, timeout=30.0):
    """The first UPDATE carrying a marker that satisfies ``predicate``, among updates after
    index ``after`` of the UPDATE list."""
    found = []

    def check():
        for u in _marker_updates(r)[after:]:
            for m in u.markers:
                if predicate(m):
                    found.append(m)
                    return True
        return False
    assert r.client.wait_for(r.ucond, check, timeout), [
        (u.seq_num, [m.description for m in u.markers]) for u in _marker_updates(r)[after:]]
    return found[0]


def _reachable(model, rng, tip=TIP):
    lo, hi = model.lower, model.upper
    q = lo + (hi - lo) * (0.25 + 0.5 * rng.random(model.nq))
    return np.asarray(fk_frames(model, q[None], [tip]))[0, 0]


def _check_solution(model, js, T):
    q = np.array(js.position[:model.nq])
    assert list(js.name[:model.nq]) == list(model.q_names)
    assert np.all(q >= model.lower - 1e-9) and np.all(q <= model.upper + 1e-9)
    reached = np.asarray(fk_frames(model, q[None], [TIP]))[0, 0]
    pe, oe = (float(v) for v in np.asarray(pose_error(reached[None], T[None])).reshape(-1)[:2])
    assert pe <= POS_TOL and oe <= ORI_TOL, (pe, oe)


def test_handle_state_then_a_drag_solved_and_verified(ros):
    r = ros
    resp = r.client.call(r.get, GetInteractiveMarkers.Request(), timeout=10)
    assert [m.name for m in resp.markers] == [TIP]
    im = resp.markers[0]
    assert im.header.frame_id == "panda_link0"
    # at the robot's current state (no joint_states: the middle of the limits)
    T0 = np.asarray(fk_frames(r.model, r.model.neutral_q()[None], [TIP]))[0, 0]
    np.testing.assert_allclose(_pose_of(im), T0, atol=1e-6)
    assert _color(im) == COLORS[None]
    assert resp.sequence_number >= 1

    rng = np.random.default_rng(3)
    for _ in range(3):
        T = _reachable(r.model, rng)
        n_sol, n_upd = len(r.solutions), len(_marker_updates(r))
        r.feedback.publish(_feedback(TIP, T))
        assert r.client.wait_for(r.scond, lambda: len(r.solutions) > n_sol, 30), \
            r.node.log_text()[-3000:]
        _check_solution(r.model, r.solutions[-1], T)
        m = _wait_marker(r, n_upd, lambda m: m.name == TIP and _color(m) != COLORS[None])
        assert _color(m) == COLORS[1]
        np.testing.assert_allclose(_pose_of(m), T, atol=1e-6)  # the handle stays put
    # sequence numbers: one more per UPDATE, and the state answered carries the latest
    seqs = [u.seq_num for u in _marker_updates(r)]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    resp = r.client.call(r.get, GetInteractiveMarkers.Request(), timeout=10)
    assert resp.sequence_number == seqs[-1]
    assert all(u.server_id == "/ros2_ik" for u in r.updates)


def test_unreachable_and_malformed_drags(ros):
    r = ros
    far = np.eye(4)
    far[:3, 3] = (3.0, 0.0, 0.5)
    n_sol, n_upd = len(r.solutions), len(_marker_updates(r))
    r.feedback.publish(_feedback(TIP, far))
    m = _wait_marker(r, n_upd, lambda m: m.name == TIP and np.allclose(_pose_of(m), far))
    assert _color(m) == FAILED_COLOR and "NO_IK_SOLUTION" in m.description
    bad = _feedback(TIP, np.eye(4))
    bad.pose.position.x = float("nan")
    r.feedback.publish(bad)
    r.feedback.publish(_feedback("no_such_marker", np.eye(4)))
    # the node keeps serving: the next drag is answered, and nothing was published for the
    # unreachable one (its answer is not one)
    T = _reachable(r.model, np.random.default_rng(5))
    r.feedback.publish(_feedback(TIP, T))
    assert r.client.wait_for(r.scond, lambda: len(r.solutions) > n_sol, 30)
    assert len(r.solutions) == n_sol + 1
    _check_solution(r.model, r.solutions[-1], T)
    assert r.node.alive()


def test_a_drag_stream_ends_on_the_last_pose(ros):
    """A drag sends many poses; whichever are skipped while one is solved, the pose where the
    user let go (MOUSE_UP) is the last one answered."""
    r = ros
    rng = np.random.default_rng(11)
    A, B = _reachable(r.model, rng), _reachable(r.model, rng)
    qa, qb = matrix_to_quat(A[:3, :3]), matrix_to_quat(B[:3, :3])
    n_upd = len(_marker_updates(r))
    poses = []
    for t in np.linspace(0.0, 1.0, 40):
        T = np.eye(4)
        T[:3, 3] = (1 - t) * A[:3, 3] + t * B[:3, 3]
        T[:3, :3] = quat_to_matrix(np.asarray(slerp(qa, qb, t)))
        poses.append(T)
        r.feedback.publish(_feedback(TIP, T))
    r.feedback.publish(_feedback(TIP, poses[-1], InteractiveMarkerFeedback.MOUSE_UP))
    m = _wait_marker(r, n_upd, lambda m: m.name == TIP and np.allclose(_pose_of(m), poses[-1])
                     and _color(m) != COLORS[None])
    assert _color(m) in (COLORS[1], FAILED_COLOR)
    if _color(m) == COLORS[1]:
        assert r.client.wait_for(
            r.scond, lambda: _solves(r.model, r.solutions[-1], poses[-1]), 30)
        _check_solution(r.model, r.solutions[-1], poses[-1])


def _solves(model, js, T) -> bool:
    try:
        _check_solution(model, js, T)
    except AssertionError:
        return False
    return True


def test_a_new_model_replaces_the_handle(ros):
    r = ros
    n_upd = len(_marker_updates(r))
    r.client.publish_robot_description(robots.urdf_string("ur"))
    tip = robots.ROBOTS["ur"]["tip"]
    _wait_marker(r, n_upd, lambda m: m.name == tip, timeout=120)
    ups = _marker_updates(r)[n_upd:]
    assert any(TIP in u.erases for u in ups)
    resp = r.client.call(r.get, GetInteractiveMarkers.Request(), timeout=10)
    assert [m.name for m in resp.markers] == [tip]
    ur = load_robot("ur")
    assert resp.markers[0].header.frame_id == robots.ROBOTS["ur"]["base"]
    # a drag of the old robot's handle is ignored; the new one is solved for the new model
    n_sol = len(r.solutions)
    T = _reachable(ur, np.random.default_rng(2), tip)
    r.feedback.publish(_feedback(TIP, T, frame=""))
    r.feedback.publish(_feedback(tip, T, frame=""))
    assert r.client.wait_for(r.scond, lambda: len(r.solutions) > n_sol, 30)
    js = r.solutions[-1]
    q = np.array(js.position[:ur.nq])
    reached = np.asarray(fk_frames(ur, q[None], [tip]))[0, 0]
    pe, oe = (float(v) for v in np.asarray(pose_error(reached[None], T[None])).reshape(-1)[:2])
    assert pe <= POS_TOL and oe <= ORI_TOL


def test_handles_at_several_tips_solved_together(ros):
    """interactive.tips gives a handle per link; a drag of one solves every handle's pose as
    one problem (the other arm holds its goal), and the answer reaches both."""
    r = ros
    n_upd = len(_marker_updates(r))
    r.client.publish_robot_description(robots.urdf_string("dual_arm"))
    dual = load_robot("dual_arm")
    _wait_marker(r, n_upd, lambda m: m.name == dual.default_tip(), timeout=120)
    n_upd = len(_marker_updates(r))
    result = r.client.set_parameters({"interactive.tips": "left_tool, right_tool, no_such_link"})
    assert all(x.successful for x in result)
    _wait_marker(r, n_upd, lambda m: m.name == "right_tool")
    resp = r.client.call(r.get, GetInteractiveMarkers.Request(), timeout=10)
    assert sorted(m.name for m in resp.markers) == ["left_tool", "right_tool"]
    assert r.node.wait_for_log("no_such_link", 10)  # said, and left out
    handles = {m.name: _pose_of(m) for m in resp.markers}
    rng = np.random.default_rng(7)
    # a left goal that keeps the right handle's pose reachable: only the left arm's joints
    # moved from the state the handles show
    q = dual.neutral_q()
    left = [i for i, n in enumerate(dual.q_names) if n.startswith("left")]
    assert left
    q[left] = np.clip(q[left] + rng.uniform(-0.3, 0.3, len(left)), dual.lower[left],
                      dual.upper[left])
    T_left = np.asarray(fk_frames(dual, q[None], ["left_tool"]))[0, 0]
    n_sol = len(r.solutions)
    r.feedback.publish(_feedback("left_tool", T_left, frame=robots.ROBOTS["dual_arm"]["base"]))
    assert r.client.wait_for(r.scond, lambda: len(r.solutions) > n_sol, 30), \
        r.node.log_text()[-3000:]
    js = r.solutions[-1]
    qs = np.array(js.position[:dual.nq])
    assert np.all(qs >= dual.lower - 1e-9) and np.all(qs <= dual.upper + 1e-9)
    for tip, T in (("left_tool", T_left), ("right_tool", handles["right_tool"])):
        reached = np.asarray(fk_frames(dual, qs[None], [tip]))[0, 0]
        pe, oe = (float(v) for v in np.asarray(pose_error(reached[None], T[None])).reshape(-1))
        assert pe <= POS_TOL and oe <= ORI_TOL, (tip, pe, oe)
