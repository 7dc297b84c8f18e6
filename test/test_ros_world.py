"""Collision-aware IK through the node process, over DDS: the world through ~/update_world and
~/world, ComputeIK with collisions on (every success clear by an independent check, the world
version answered), GOAL_IN_COLLISION, bad world input (the node keeps serving), a world
replaced while requests run, and trajectory seeds with collisions. MoveIt's planning scene:
test_ros_scene.py (its messages as rosidl generates them) and test_ros_moveit_scene.py (over
DDS)."""

from __future__ import annotations

import threading
import time
import types

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from geometry_msgs.msg import Point, Pose, PoseStamped  # noqa: E402
from ros2_ik_interfaces.msg import WorldUpdate  # noqa: E402
from ros2_ik_interfaces.srv import UpdateWorld  # noqa: E402
from shape_msgs.msg import SolidPrimitive  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.ik.collision import clearance  # noqa: E402
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq  # noqa: E402
from ros2_ik.model.collision import collision_model  # noqa: E402
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64  # noqa: E402
from ros2_ik.world import World  # noqa: E402
from ros_testing import ik_request, serving_node  # noqa: E402

TIP = "panda_hand_tcp"
MARGIN = 0.01


@pytest.fixture(scope="module")
def ros():
    with serving_node({"robot": "panda"}, server_timeout=60) as (node, client):
        world = client.node.create_client(UpdateWorld, f"{client.ns}/update_world")
        assert world.wait_for_service(timeout_sec=30)
        pub = client.publisher(WorldUpdate, f"{client.ns}/world", qos=100)
        yield types.SimpleNamespace(node=node, client=client, world=world, pub=pub,
                                    model=load_robot("panda"))


def _prim(kind, dims):
    p = SolidPrimitive()
    p.type = kind
    p.dimensions = [float(d) for d in dims]
    return p


def _pose(xyz, frame=""):
    ps = PoseStamped()
    ps.header.frame_id = frame
    ps.pose.position = Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))
    ps.pose.orientation.w = 1.0
    return ps


def _update(ros, op, ids=(), prims=(), poses=(), shapes=()):
    req = UpdateWorld.Request()
    req.update.operation = op
    req.update.ids = list(ids)
    req.update.primitives = list(prims)
    req.update.poses = list(poses)
    req.update.shapes = list(shapes)
    return ros.client.call(ros.world, req, timeout=10)


BOX = ("box", SolidPrimitive.BOX, (0.3, 0.6, 0.3), (0.45, 0.0, 0.35))


def _clear_goals(model, world_obstacles, n, seed):
    """Goals made by FK of configurations clear of the robot and the obstacles."""
    cm = collision_model(model)
    q = model.random_q(np.random.default_rng(seed), 40 * n)
    d = clearance(model, cm, q, world_obstacles)[0]
    q = q[d > 0.03][:n]
    return q, np.asarray(fk_frames(model, q, [TIP]))[:, 0]


def _world_of(ros):
    from ros2_ik.world import Obstacle

    name, _, size, xyz = BOX
    return World().add(Obstacle.make(name, "box", size, list(xyz) + [0, 0, 0, 1]))


def test_world_update_and_collision_aware_answers(ros):
    r = _update(ros, WorldUpdate.CLEAR)
    assert r.error_code.val == codes.SUCCESS and list(r.ids) == []
    name, kind, size, xyz = BOX
    r = _update(ros, WorldUpdate.ADD, [name, "floor"],
                [_prim(kind, size), _prim(SolidPrimitive.BOX, (1, 1, 1))],
                [_pose(xyz), _pose((0, 0, -0.02), "world")], ["", "halfspace"])
    assert r.error_code.val == codes.SUCCESS, r.message
    assert sorted(r.ids) == ["box", "floor"]
    version = r.version
    model = ros.model
    q, T = _clear_goals(model, _world_of(ros), 12, 3)
    req = ik_request(pose_to_pq(T), compact_response=True, collisions=1)
    resp = ros.client.call(ros.client.ik, req, timeout=60)
    assert resp.world_version == version
    st = np.asarray(resp.status)
    assert (st == codes.SUCCESS).sum() >= 10, resp.message
    sol = as_f64(resp.compact_solutions).reshape(len(T), -1)[:, :model.nq]
    cm = collision_model(model)
    from ros2_ik.world import Obstacle

    w = _world_of(ros).add(Obstacle.make("floor", "halfspace", (),
                                         [0, 0, -0.02, 0, 0, 0, 1]))
    d = clearance(model, cm, sol, w)[0]
    ok = st == codes.SUCCESS
    assert np.all(d[ok] >= MARGIN - 1e-9), d[ok]
    np.testing.assert_allclose(as_f64(resp.clearances)[ok][d[ok] < 0.015], d[ok][d[ok] < 0.015],
                               atol=1e-6)
    pe, re = pose_error(T, np.asarray(fk_frames(model, sol, [TIP]))[:, 0])
    assert np.all(pe[ok] <= 1e-4 * 1.0001) and np.all(re[ok] <= 1e-3 * 1.0001)
    # the same goals without collision avoidance: no clearances, version 0
    resp = ros.client.call(ros.client.ik, ik_request(pose_to_pq(T), compact_response=True,
                                                     collisions=2), timeout=60)
    assert len(resp.clearances) == 0 and resp.world_version == 0


def test_goal_inside_an_obstacle_is_goal_in_collision(ros):
    model = ros.model
    q = model.neutral_q()
    T = np.asarray(fk_frames(model, q[None], [TIP]))[0, 0]
    r = _update(ros, WorldUpdate.ADD, ["ball"], [_prim(SolidPrimitive.SPHERE, (0.12,))],
                [_pose(T[:3, 3])])
    assert r.error_code.val == codes.SUCCESS
    req = ik_request(pose_to_pq(T[None]), compact_response=True, collisions=1, num_seeds=8)
    resp = ros.client.call(ros.client.ik, req, timeout=60)
    assert resp.error_code.val in (codes.GOAL_IN_COLLISION, codes.NO_IK_SOLUTION)
    assert resp.status[0] != codes.SUCCESS
    assert "collision" in resp.message or "no solution" in resp.message
    assert _update(ros, WorldUpdate.REMOVE, ["ball"]).error_code.val == codes.SUCCESS


def test_bad_world_input_is_refused_and_the_node_keeps_serving(ros):
    before = _update(ros, WorldUpdate.ADD, ["keep"], [_prim(SolidPrimitive.SPHERE, (0.05,))],
                     [_pose((1.5, 1.5, 1.5))])
    assert before.error_code.val == codes.SUCCESS
    bad = [
        (WorldUpdate.ADD, ["x"], [_prim(SolidPrimitive.SPHERE, (-0.1,))], [_pose((0, 0, 1))],
         [], "positive"),
        (WorldUpdate.ADD, ["x"], [_prim(SolidPrimitive.BOX, (0.1, 0.0, 0.1))],
         [_pose((0, 0, 1))], [], "degenerate"),
        (WorldUpdate.ADD, ["x"], [_prim(SolidPrimitive.SPHERE, (0.1,))],
         [_pose((0, 0, float("nan")))], [], "NaN"),
        (WorldUpdate.ADD, ["x"], [_prim(SolidPrimitive.SPHERE, (0.1,))],
         [_pose((0, 0, 1), "map")], [], "frame 'map'"),
        (WorldUpdate.ADD, ["x"], [_prim(9, (0.1,))], [_pose((0, 0, 1))], [], "primitive type"),
        (WorldUpdate.ADD, ["x", "y"], [_prim(SolidPrimitive.SPHERE, (0.1,))],
         [_pose((0, 0, 1))], [], "poses"),
        (WorldUpdate.MOVE, ["nothere"], [], [_pose((0, 0, 1))], [], "no obstacles"),
        (WorldUpdate.REMOVE, ["nothere"], [], [], [], "no obstacles"),
        (7, ["x"], [], [], [], "operation 7"),
    ]
    for op, ids, prims, poses, shapes, words in bad:
        r = _update(ros, op, ids, prims, poses, shapes)
        assert r.error_code.val != codes.SUCCESS, words
        assert words in r.message, (words, r.message)
        assert r.version == before.version  # unchanged
    # a topic update that cannot be applied is logged, the world unchanged
    msg = WorldUpdate()
    msg.operation = WorldUpdate.ADD
    msg.ids = ["z"]
    msg.primitives = [_prim(SolidPrimitive.SPHERE, (0.0,))]
    msg.poses = [_pose((0, 0, 1))]
    ros.pub.publish(msg)
    assert ros.node.wait_for_log("~/world not applied", 10)
    # a good one on the topic is applied (waited for through the service, with a bound)
    msg.ids, msg.primitives = ["on_topic"], [_prim(SolidPrimitive.SPHERE, (0.05,))]
    msg.poses = [_pose((1.5, -1.5, 1.5))]
    ros.pub.publish(msg)
    end = time.monotonic() + 10
    while True:
        ids = _update(ros, WorldUpdate.MOVE, ["keep"], [], [_pose((1.5, 1.5, 1.6))]).ids
        if "on_topic" in ids or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert "on_topic" in ids
    resp = ros.client.call(ros.client.ik, ik_request(np.array([[0.4, 0, 0.5, 1, 0, 0, 0]]),
                                                     compact_response=True), timeout=30)
    assert resp.error_code.val in (codes.SUCCESS, codes.NO_IK_SOLUTION)
    assert _update(ros, WorldUpdate.REMOVE, ["keep", "on_topic"]).error_code.val == codes.SUCCESS


def test_world_replaced_while_requests_run(ros):
    """Clients solve with collisions on while another replaces the world 20 times: every
    answer arrives, says a version that existed, and every success is clear of that version's
    world."""
    model = ros.model
    q, T = _clear_goals(model, World(), 6, 9)
    versions = {}
    stop = threading.Event()
    errors = []

    def churn():
        k = 0
        while not stop.is_set() and k < 20:
            x = 0.3 + 0.02 * k
            r = _update(ros, WorldUpdate.ADD, ["moving"], [_prim(SolidPrimitive.SPHERE, (0.08,))],
                        [_pose((x, 0.4, 0.3))])
            if r.error_code.val != codes.SUCCESS:
                errors.append(r.message)
            versions[r.version] = x
            k += 1

    t = threading.Thread(target=churn)
    t.start()
    answers = []
    try:
        for _ in range(6):
            resp = ros.client.call(ros.client.ik, ik_request(pose_to_pq(T), compact_response=True,
                                                             collisions=1, num_seeds=8),
                                   timeout=60)
            answers.append(resp)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not errors
    cm = collision_model(model)
    from ros2_ik.world import Obstacle

    for resp in answers:
        assert resp.world_version >= 1
        x = versions.get(resp.world_version)
        w = World() if x is None else World().add(Obstacle.make("moving", "sphere", (0.08,),
                                                                [x, 0.4, 0.3, 0, 0, 0, 1]))
        sol = as_f64(resp.compact_solutions).reshape(len(T), -1)[:, :model.nq]
        ok = np.asarray(resp.status) == codes.SUCCESS
        if x is not None and ok.any():
            assert np.all(clearance(model, cm, sol[ok], w)[0] >= MARGIN - 1e-9)
    _update(ros, WorldUpdate.CLEAR)


def test_trajectory_nodes_keep_clear(ros):
    from ros2_ik_interfaces.action import TrajectorySeed

    model = ros.model
    r = _update(ros, WorldUpdate.ADD, ["post"], [_prim(SolidPrimitive.CYLINDER, (0.8, 0.05))],
                [_pose((0.35, 0.0, 0.4))])
    assert r.error_code.val == codes.SUCCESS
    a = model.neutral_q().copy()
    a[0] = -0.9
    b = model.neutral_q().copy()
    b[0] = 0.9
    T = np.asarray(fk_frames(model, np.stack([a, b]), [TIP]))[:, 0]
    goal = TrajectorySeed.Goal()
    for pq in pose_to_pq(T):
        ps = PoseStamped()
        ps.pose = Pose()
        ps.pose.position = Point(x=float(pq[0]), y=float(pq[1]), z=float(pq[2]))
        ps.pose.orientation.x, ps.pose.orientation.y = float(pq[3]), float(pq[4])
        ps.pose.orientation.z, ps.pose.orientation.w = float(pq[5]), float(pq[6])
        goal.keyframes.append(ps)
    goal.node_indices = [0, 12]
    goal.collisions = 1
    handle = ros.client.send_goal(goal, timeout=30)
    _, res = ros.client.result(handle, timeout=120)
    st = np.asarray(res.node_status)
    # the path's middle runs the hand through the post: those nodes cannot be clear
    assert st[0] == codes.SUCCESS and st[-1] == codes.SUCCESS and (st == codes.SUCCESS).sum() >= 6
    assert set(st[st != codes.SUCCESS]) <= {codes.NO_IK_SOLUTION, codes.GOAL_IN_COLLISION}
    names = list(res.trajectory.joint_names)
    qs = np.array([[p.positions[names.index(n)] for n in model.q_names]
                   for p in res.trajectory.points])
    from ros2_ik.world import Obstacle

    w = World().add(Obstacle.make("post", "cylinder", (0.05, 0.8), [0.35, 0, 0.4, 0, 0, 0, 1]))
    d = clearance(model, collision_model(model), qs[st == codes.SUCCESS], w)[0]
    assert np.all(d >= MARGIN - 1e-9)
    _update(ros, WorldUpdate.CLEAR)


def test_collision_markers_show_the_world_and_the_spheres(ros):
    """~/collision_markers (latched): the obstacles, and after a collision-aware answer the
    robot's spheres coloured by clearance."""
    from visualization_msgs.msg import Marker, MarkerArray
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)
    got, cond = ros.client.subscribe(MarkerArray, f"{ros.client.ns}/collision_markers", qos)
    r = _update(ros, WorldUpdate.ADD, ["m1"], [_prim(SolidPrimitive.BOX, (0.2, 0.2, 0.2))],
                [_pose((0.6, 0.5, 0.3))])
    assert r.error_code.val == codes.SUCCESS

    def has(pred):
        return any(pred(m) for m in got)

    assert ros.client.wait_for(cond, lambda: has(lambda m: any(
        x.type == Marker.CUBE for x in m.markers)), 10)
    q, T = _clear_goals(ros.model, _world_of(ros), 1, 5)
    ros.client.call(ros.client.ik, ik_request(pose_to_pq(T), compact_response=True,
                                              collisions=1), timeout=60)
    n_spheres = collision_model(ros.model).num_spheres
    assert ros.client.wait_for(cond, lambda: has(lambda m: sum(
        x.type == Marker.SPHERE for x in m.markers) >= n_spheres), 10)
    _update(ros, WorldUpdate.CLEAR)
