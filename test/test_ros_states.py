"""The node's ~/check_states service over DDS: the library's answers on the node's world, paths,
time-outs and bad requests (the node keeps serving)."""

from __future__ import annotations

import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from ros2_ik_interfaces.srv import CheckStates  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.api.states import check_path, check_states  # noqa: E402
from ros2_ik.ik.collision import default_collision_model  # noqa: E402
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64, f64_array, sec_to_duration  # noqa: E402
from ros2_ik.world import Obstacle, World  # noqa: E402
from ros_testing import add_box, joint_state, serving_node  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda"}, server_timeout=60) as (node, client):
        chk = client.node.create_client(CheckStates, f"{client.ns}/check_states")
        assert chk.wait_for_service(timeout_sec=30)
        res = add_box(client, "box", (0.3, 0.6, 0.3), (0.45, 0.0, 0.35))
        assert res.error_code.val == codes.SUCCESS, res.message
        m = load_robot("panda")
        world = World().add(Obstacle.make("box", "box", (0.3, 0.6, 0.3),
                                          [0.45, 0, 0.35, 0, 0, 0, 1]))
        yield types.SimpleNamespace(node=node, client=client, chk=chk, model=m, world=world,
                                    version=int(res.version),
                                    cm=default_collision_model(m, within=0.01))


def _request(q=None, names=None, **fields):
    req = CheckStates.Request()
    if q is not None:
        req.joint_names = list(names)
        req.compact_positions = f64_array(q)
    for k, v in fields.items():
        if k == "timeout":
            sec_to_duration(v, req.timeout)
        else:
            setattr(req, k, v)
    return req


def _pairs(res, idx):
    return [(res.pair_link[k], res.pair_other[k]) if k >= 0 else ("", "") for k in idx]


def test_check_states_equals_the_library_on_the_nodes_world(ros):
    m = ros.model
    q = m.random_q(np.random.default_rng(11), 300)
    res = ros.client.call(ros.chk, _request(q, m.q_names, margin=0.01), timeout=60)
    assert res.error_code.val == codes.SUCCESS, res.message
    assert res.world_version == ros.version and res.backend in ("host", "reference")
    lib = check_states(m, q, ros.world, collision=ros.cm, margin=0.01)
    assert list(res.valid) == lib.valid.tolist() and all(res.checked)
    np.testing.assert_allclose(as_f64(res.self_clearance), lib.self_clearance, atol=1e-12)
    np.testing.assert_allclose(as_f64(res.world_clearance), lib.world_clearance, atol=1e-12)
    assert _pairs(res, res.self_pair) == [lib.pair_names(p) for p in lib.self_pair]
    assert _pairs(res, res.world_pair) == [lib.pair_names(p) for p in lib.world_pair]
    assert any(o == "box" for o in res.pair_other)
    assert res.first_invalid == lib.first_invalid
    assert 0 < sum(res.valid) < len(q)
    # the friendly form: a joint a state leaves out keeps the current (mid-range) state
    js = [joint_state(m.q_names[:3], q[i, :3]) for i in range(3)]
    req = CheckStates.Request()
    req.states = js
    res = ros.client.call(ros.chk, req, timeout=30)
    assert res.error_code.val == codes.SUCCESS, res.message
    full = np.tile(m.neutral_q(), (3, 1))
    full[:, :3] = q[:3, :3]
    lib = check_states(m, full, ros.world, collision=ros.cm)
    np.testing.assert_allclose(as_f64(res.world_clearance), lib.world_clearance, atol=1e-12)


def test_check_a_path_densely(ros):
    m = ros.model
    a = m.neutral_q()
    b = a.copy()
    b[1] += 1.0
    c = b.copy()
    c[0] -= 1.0
    wp = np.stack([a, b, c])
    res = ros.client.call(ros.chk, _request(wp, m.q_names, path_resolution=0.02,
                                            return_states=True), timeout=60)
    assert res.error_code.val == codes.SUCCESS, res.message
    lib = check_path(m, wp, 0.02, ros.world, collision=ros.cm)
    assert list(res.waypoint_index) == lib.waypoints.tolist()
    assert res.first_invalid == lib.first_invalid and len(res.valid) == len(lib.q)
    assert list(res.checked_joint_names) == list(m.q_names)
    np.testing.assert_allclose(as_f64(res.checked_positions).reshape(-1, m.nq), lib.q)
    np.testing.assert_allclose(as_f64(res.world_clearance), lib.world_clearance, atol=1e-12)


def test_timeout_at_any_size(ros):
    m = ros.model
    q = m.random_q(np.random.default_rng(12), 200_000)
    res = ros.client.call(ros.chk, _request(q, m.q_names, timeout=1e-9), timeout=120)
    assert res.error_code.val == codes.TIMED_OUT, res.message
    assert "checked" in res.message and len(res.checked) == len(q)
    assert sum(res.checked) < len(q)


@pytest.mark.parametrize("fields, code, words", [
    (dict(q=[[0.0] * 6 + [np.nan]]), codes.INVALID_ROBOT_STATE, ["NaN", "state 0"]),
    (dict(q=[[0.0] * 7], names=["panda_joint1"] * 6 + ["nope"]), codes.INVALID_ROBOT_STATE,
     ["nope"]),
    (dict(q=[0.0] * 5), codes.INVALID_REQUEST, ["5 values for 7 joint_names"]),
    (dict(), codes.INVALID_REQUEST, ["no states given"]),
    (dict(q=[[0.0] * 7], margin=-1.0), codes.INVALID_REQUEST, ["margin"]),
    (dict(q=[[0.0] * 7], path_resolution=float("nan")), codes.INVALID_REQUEST,
     ["path_resolution"]),
    (dict(q=[[0.0] * 7], self_collisions=7), codes.INVALID_REQUEST, ["collisions = 7"]),
    (dict(q=[[0.0] * 7, [2.0] * 7], path_resolution=1e-8), codes.INVALID_REQUEST,
     ["check_states.max_states"]),
])
def test_bad_requests_are_refused_and_the_node_keeps_serving(ros, fields, code, words):
    m = ros.model
    q = fields.pop("q", None)
    names = fields.pop("names", m.q_names)
    res = ros.client.call(ros.chk, _request(q, names, **fields), timeout=30)
    assert res.error_code.val == code, res.message
    for w in words:
        assert w in res.message, res.message
    ok = ros.client.call(ros.chk, _request(m.neutral_q()[None], m.q_names), timeout=30)
    assert ok.error_code.val == codes.SUCCESS
