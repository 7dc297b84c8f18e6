"""Issue 10, points 2 and 3: the MoveIt-compatible services with requests built exactly as
MoveIt 2's ``srv_kinematics_plugin`` builds them, and answers read back as the plugin reads them
(the moveit_msgs classes rosidl generates; the plugin's side in ``moveit_standin.py``).

Each answer is checked on MoveIt's side: the plugin's state must accept every variable name of
the solution, only the group's variables may differ from the request's state, and FK of the
resulting state must reach the requested pose (in the request's frame) within the node's
tolerances.
"""

from __future__ import annotations

import time
import types

import numpy as np
import pytest

pytest.importorskip("sensor_msgs", reason="ROS 2 messages not installed; run make setup")
pytest.importorskip("moveit_msgs", reason="the test build of moveit_msgs is not installed; "
                                   "run make setup")

from moveit_standin import GetPositionFK, GetPositionIK, MoveItState, plugin_request

from ros2_ik import robots
from ros2_ik.kinematics import fk_frames, pose_error, pose_inverse
from ros2_ik.model import parse_srdf
from ros2_ik.ik.collision import clearance
from ros2_ik.model.collision import collision_model
from ros2_ik.ros import codes, moveit_compat, request
from ros2_ik.ros.handlers import compute_fk, compute_ik
from ros2_ik.ros.params import Settings
from ros2_ik.ros.robot import build_robot
from ros_testing import joint_state

POS_TOL, ROT_TOL = 1e-4, 1e-3

MISC_SRDF = """<?xml version="1.0"?>
<robot name="misc">
  <group name="arm"><chain base_link="base" tip_link="tool"/></group>
</robot>
"""


def _robot(name, base_link="", srdf=None):
    r = build_robot(robots.urdf_string(name), source=f"bundled {name}", base_link=base_link)
    text = srdf if srdf is not None else robots.srdf_string(name)
    return r.with_srdf(parse_srdf(text), "test") if text else r


def _ctx(robot, current=None, **settings):
    base = (lambda _r: current) if current is not None else None
    return request.Context(robot=robot, settings=Settings.from_values(settings),
                            seed_base=base)


def _pose_msg(T):
    from geometry_msgs.msg import Pose

    from ros2_ik.kinematics import pose_to_pq

    pq = np.asarray(pose_to_pq(T)).reshape(7)
    p = Pose()
    p.position.x, p.position.y, p.position.z = map(float, pq[:3])
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = map(float, pq[3:])
    return p


def _goal_in(model, q, tip, frame):
    T = np.asarray(fk_frames(model, q, [tip, frame]))[0]
    return np.asarray(pose_inverse(T[1])) @ T[0]


def _clear(robot, model, q) -> bool:
    """q (of ``model``, the robot's whole model) keeps 2 cm clear of the robot itself, on the
    collision model with the robot's SRDF pairs."""
    cm = collision_model(model, srdf=robot.srdf if robot.srdf is not None else "<robot/>")
    d = clearance(model, cm, q[None])[0]
    return bool(d[0] > 0.02)


def _plugin_round_trip(ctx, full_model, group, group_vars, base_frame, tip, rng, n,
                       set_state=None):
    """n plugin calls with reachable goals; returns (#success, worst errors). Every answer is
    read back as the plugin reads it and checked on MoveIt's side."""
    ok, worst = 0, (0.0, 0.0)
    for _ in range(n):
        state = MoveItState(full_model)
        if set_state is not None:
            set_state(state, rng)
        # a goal: the group's variables at random values, the rest as in the state
        goal_state = MoveItState(full_model)
        goal_state.q = state.q.copy()
        lo, hi = full_model.lower, full_model.upper
        # (the plugin asks avoid_collisions: a goal reached by a configuration clear of the
        # robot itself, so that a clear answer exists)
        for _ in range(1000):
            rand = full_model.random_q(rng, 1)[0]
            goal_state.set_group(group_vars, [
                rand[goal_state.q_of_var[goal_state.var_names.index(v)]] for v in group_vars])
            if _clear(ctx.robot, full_model, goal_state.q):
                break
        else:
            raise AssertionError("no goal configuration clear of the robot itself")
        T_goal = _goal_in(full_model, goal_state.q, tip, base_frame)
        # the seed: the group's variables mid-range (MoveIt's seed is the current state)
        mid = full_model.neutral_q()
        state.set_group(group_vars, [mid[state.q_of_var[state.var_names.index(v)]]
                                     for v in group_vars])
        request_q = state.q.copy()
        req = plugin_request(state, group, base_frame, [tip], [_pose_msg(T_goal)])
        resp = GetPositionIK.Response()
        moveit_compat.serve_ik(ctx, req, resp, compute_ik.handle)
        if resp.error_code.val != codes.SUCCESS:
            continue
        # the plugin: robotStateMsgToRobotState (throws on an unknown variable), then the
        # group's variables out of its state
        back = MoveItState(full_model)
        back.q = request_q.copy()
        back.from_msg(resp.solution)
        others = [v for v in back.var_names if v not in group_vars]
        got = {v: back.value(v) for v in others}
        want = {v: state.value(v) for v in others}
        # every joint outside the group is exactly where the request had it
        assert got == pytest.approx(want, abs=1e-12), {
            v: (got[v], want[v]) for v in others if abs(got[v] - want[v]) > 1e-12}
        solution = back.group_values(group_vars)
        final = MoveItState(full_model)
        final.q = request_q.copy()
        final.set_group(group_vars, solution)
        assert np.all(final.q >= lo - 1e-9) and np.all(final.q <= hi + 1e-9)
        T = _goal_in(full_model, final.q, tip, base_frame)
        pe, re = pose_error(T_goal[None], T[None])
        assert pe[0] <= POS_TOL * 1.0001 and re[0] <= ROT_TOL * 1.0001, (pe, re)
        worst = (max(worst[0], float(pe[0])), max(worst[1], float(re[0])))
        ok += 1
    return ok, worst


def test_plugin_group_whose_root_is_not_the_base():
    """dual_arm, group left_arm = torso_link -> left_tool, the waist turned: the waist and the
    right arm stay where the request had them, the pose is reached in torso_link's frame."""
    robot = _robot("dual_arm")
    full = robot.model
    left = [f"left_joint{i}" for i in range(1, 8)]

    def turned(state, rng):
        state.q[state.q_of_var[state.var_names.index("waist_joint")]] = rng.uniform(-1, 1)
        for i in range(1, 8):
            v = f"right_joint{i}"
            state.q[state.q_of_var[state.var_names.index(v)]] = rng.uniform(-0.5, 0.5)

    ok, worst = _plugin_round_trip(_ctx(robot), full, "left_arm", left, "torso_link",
                                   "left_tool", np.random.default_rng(1), 12, set_state=turned)
    assert ok >= 11, (ok, worst)


def test_plugin_floating_and_planar_base_read_from_multi_dof_state():
    """misc: floating base + planar joint sent as transforms in multi_dof_joint_state, the goal
    in the model's root frame: solved only if the base pose is read from the request; the
    answer names the floating joint's variables as MoveIt does (the plugin throws on any other
    name) and carries them in multi_dof_joint_state too."""
    robot = _robot("misc", srdf=MISC_SRDF)
    full = robot.model
    group = robot.group("arm")
    state0 = MoveItState(full)
    group_vars = [v for v in state0.var_names if v in group.joints]
    assert "lift_joint" in group_vars and "base_joint/trans_x" not in group_vars

    def moved_base(state, rng):
        s = state.multi["base_joint"][1]
        rot = rng.normal(size=4)
        state.q[s:s + 7] = [*rng.uniform(-1, 1, 3), *(rot / np.linalg.norm(rot))]
        p = state.multi["planar_joint"][1]
        state.q[p:p + 3] = [*rng.uniform(-1, 1, 2), rng.uniform(-3, 3)]

    ok, worst = _plugin_round_trip(_ctx(robot), full, "arm", group_vars, full.base, "tool",
                                   np.random.default_rng(2), 8, set_state=moved_base)
    assert ok >= 7, (ok, worst)
    # the names in the answer
    state = MoveItState(full)
    moved_base(state, np.random.default_rng(3))
    T = _goal_in(full, state.q, "tool", full.base)
    resp = GetPositionIK.Response()
    moveit_compat.serve_ik(_ctx(robot), plugin_request(state, "arm", full.base, ["tool"],
                                                       [_pose_msg(T)]),
                           resp, compute_ik.handle)
    assert resp.error_code.val == codes.SUCCESS
    names = list(resp.solution.joint_state.name)
    assert [n for n in names if n.startswith("base_joint/")] == [
        f"base_joint/{v}" for v in ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z",
                                    "rot_w")]
    assert set(names) <= set(state.var_names)
    assert list(resp.solution.multi_dof_joint_state.joint_names) == ["base_joint",
                                                                     "planar_joint"]
    t = resp.solution.multi_dof_joint_state.transforms[0].translation
    s = state.multi["base_joint"][1]
    np.testing.assert_allclose([t.x, t.y, t.z], state.q[s:s + 3], atol=1e-12)


def test_plugin_panda_arm_group_default_frame():
    robot = _robot("panda")
    full = robot.model
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    ok, worst = _plugin_round_trip(_ctx(robot), full, "panda_arm", arm, "panda_link0",
                                   "panda_link8", np.random.default_rng(4), 8)
    assert ok >= 7, (ok, worst)


def test_group_names_answered_with_clear_codes():
    robot = _robot("dual_arm")
    state = MoveItState(robot.model)
    T = _goal_in(robot.model, state.q, "left_tool", "torso_link")
    for group, has_srdf, words in (("nope", True, "left_arm"),
                                   ("left_arm", False, "robot_description_semantic")):
        r = robot if has_srdf else robot.with_srdf(None)
        resp = GetPositionIK.Response()
        with pytest.raises(codes.RequestError) as e:
            moveit_compat.serve_ik(_ctx(r), plugin_request(state, group, "torso_link",
                                                           ["left_tool"], [_pose_msg(T)]),
                                   resp, compute_ik.handle)
        assert e.value.code == codes.INVALID_GROUP_NAME and words in e.value.message
        moveit_compat.set_error(resp, e.value.code, e.value.message)
        assert resp.error_code.val == -15 and words in resp.error_code.message
        assert resp.error_code.source == "ros2_ik"


def test_unknown_joints_ignored_for_moveit_but_not_for_ros2_ik():
    """A model rooted at torso_link lacks waist_joint; MoveIt's robot_state carries it."""
    robot = _robot("dual_arm", base_link="torso_link")
    assert "waist_joint" not in robot.model.q_names
    whole = _robot("dual_arm").model
    left = [f"left_joint{i}" for i in range(1, 8)]
    ok, _ = _plugin_round_trip(_ctx(robot), whole, "left_arm", left, "torso_link", "left_tool",
                               np.random.default_rng(5), 4)
    assert ok >= 3
    # ros2_ik's own ComputeIK stays strict
    req = types.SimpleNamespace(
        goals=[], tip_links=["left_tool"], group_name="", compact_goals=[0, 0, 0.5, 0, 0, 0, 1],
        compact_frame_id="", seed=joint_state(["waist_joint"], [0.1]), solver="",
        position_tolerance=0.0, orientation_tolerance=0.0,
        timeout=types.SimpleNamespace(sec=0, nanosec=0), num_seeds=0, solve_mode="",
        position_only=False, axis_weights=[], rng_seed=-1, compact_response=True)
    with pytest.raises(codes.RequestError) as e:
        compute_ik.handle(_ctx(robot), req, moveit_compat.compute_ik_response())
    assert e.value.code == codes.INVALID_ROBOT_STATE and "waist_joint" in e.value.message


def test_fk_partial_state_uses_the_current_state():
    """GetPositionFK with only the left arm given: the waist is the node's current state (the
    latest joint_states), not 0."""
    robot = _robot("dual_arm")
    m = robot.model
    rng = np.random.default_rng(6)
    current = m.random_q(rng, 1)[0]
    given = m.random_q(rng, 1)[0]
    left = [f"left_joint{i}" for i in range(1, 8)]
    idx = [m.q_names.index(n) for n in left]
    req = GetPositionFK.Request()
    req.fk_link_names = ["left_tool", "right_tool"]
    req.robot_state.joint_state.name = left
    req.robot_state.joint_state.position = [float(given[i]) for i in idx]
    req.robot_state.joint_state.name.append("not_in_this_model")  # MoveIt's other joints
    req.robot_state.joint_state.position.append(0.3)
    resp = GetPositionFK.Response()
    moveit_compat.serve_fk(_ctx(robot, current=current), req, resp, compute_fk.handle)
    assert resp.error_code.val == codes.SUCCESS
    q = current.copy()
    q[idx] = given[idx]
    T = np.asarray(fk_frames(m, q, ["left_tool", "right_tool"]))[0]
    for k, ps in enumerate(resp.pose_stamped):
        p = ps.pose.position
        np.testing.assert_allclose([p.x, p.y, p.z], T[k, :3, 3], atol=1e-12)
        assert ps.header.frame_id == m.base
    assert list(resp.fk_link_names) == ["left_tool", "right_tool"]


def test_node_serves_solve_ik_not_move_groups_names():
    """With moveit_msgs importable the node offers ~/solve_ik and ~/solve_fk, never
    move_group's compute_ik / compute_fk, and follows the planning scene's topics."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter

    from ros2_ik.ros.node import KinematicsNode
    from ros_testing import random_domain_id

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=random_domain_id())
    node = None
    try:
        node = KinematicsNode(context=ctx, parameter_overrides=[Parameter("robot", value="ur")])
        names = {node.resolve_service_name(s.srv_name) for s in node.services}
        assert {"/ros2_ik/solve_ik", "/ros2_ik/solve_fk", "/ros2_ik/compute_ik"} <= names
        assert "/compute_ik" not in names and "/compute_fk" not in names
        topics = {node.resolve_topic_name(s.topic_name) for s in node.subscriptions}
        assert {"/collision_object", "/attached_collision_object", "/planning_scene",
                "/monitored_planning_scene", "/ros2_ik/world"} <= topics
        from ros2_ik.ros.node import make_executor

        ex = make_executor(ctx)  # the model serves once prepared: spin until it does
        ex.add_node(node)
        end = time.monotonic() + 60
        while node.robot is None and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.05)
        assert node.robot.group_names == ["ur_manipulator"]  # the bundled robot's SRDF
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=ctx)
