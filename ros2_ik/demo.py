"""Live demo: the ros2_ik node on a bundled robot, used through its ROS 2 interfaces.

Starts ``KinematicsNode`` in this process (on its own executor, in a thread) and a client
node beside it, then, over DDS: a batch of reachable goals through ``~/compute_ik``, an FK and
a Jacobian call, a trajectory seed through the ``~/trajectory_seed`` action with feedback, a
planning group's request, collision avoidance against a box put in the world through
``~/update_world``, and an obstacle published as MoveIt's move_group publishes it (a
``moveit_msgs/CollisionObject`` on ``collision_object``) avoided by MoveIt's ``GetPositionIK``
(``~/solve_ik``), then an octomap in the planning scene avoided too. Every answer is checked
here by forward kinematics (and, with collision avoidance, on the collision model). Exit code
0 only when all of it worked. The node's own log shows warnings and errors only
(``--node-log-level``): the demo prints what it checks.

Run ``ros2_ik_demo [--robot panda] [--goals 100]`` (installed console script, ``make demo``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time

import numpy as np

from . import robots

MIN_SUCCESS = 0.9  # fraction of goals (and trajectory nodes) that must be solved
NODE_NAME = "ros2_ik"


def _wait(fut, timeout: float):
    ev = threading.Event()
    fut.add_done_callback(lambda _f: ev.set())
    if not ev.wait(timeout):
        raise TimeoutError(f"no answer within {timeout} s")
    return fut.result()


def node_log_level(name: str, level: str) -> None:
    """Let the log of node ``name`` (and of its child loggers, which inherit the level) through
    at ``level`` ('debug', 'info', 'warn', 'error') and above only; rclpy initialised."""
    from rclpy.logging import LoggingSeverity, set_logger_level

    set_logger_level(name, getattr(LoggingSeverity, level.upper()))


def _check(ok: bool, what: str, failures: list) -> None:
    print(f"  [{'ok' if ok else 'FAILED'}] {what}")
    if not ok:
        failures.append(what)


def run(args) -> int:
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.parameter import Parameter

    from ros2_ik_interfaces.action import TrajectorySeed
    from ros2_ik_interfaces.srv import ComputeFK, ComputeIK, ComputeJacobian

    from .api import fk_frames, interpolate_keyframes, jacobian
    from .kinematics import pose_error, pose_to_pq
    from .ros import codes
    from .ros.conversions import (as_f64, f64_array, joint_states, pq_to_pose_stamped,
                                  sec_to_duration)
    from .ros.node import CLIENT_QOS, KinematicsNode, make_executor

    failures: list[str] = []
    domain = args.domain_id
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    # the node's own log below --node-log-level (default: warnings and errors only) stays out
    # of the demo's output
    node_log_level(NODE_NAME, args.node_log_level)
    executor = make_executor(context=ctx)
    server = client = None
    try:
        t0 = time.perf_counter()
        server = KinematicsNode(NODE_NAME, context=ctx, parameter_overrides=[
            Parameter("robot", value=args.robot)])  # the node's defaults (config/ros2_ik.yaml)
        client = rclpy.create_node("ros2_ik_demo_client", context=ctx)
        executor.add_node(server)
        executor.add_node(client)
        ns = f"/{server.get_name()}"
        ik = client.create_client(ComputeIK, f"{ns}/compute_ik", qos_profile=CLIENT_QOS)
        fk = client.create_client(ComputeFK, f"{ns}/compute_fk", qos_profile=CLIENT_QOS)
        jac = client.create_client(ComputeJacobian, f"{ns}/compute_jacobian",
                                   qos_profile=CLIENT_QOS)
        traj = ActionClient(client, TrajectorySeed, f"{ns}/trajectory_seed")
        # spun only now: rclpy's ActionClient joins the node's wait sets before its lock
        # exists, and an executor spinning meanwhile failed on it (seen once in CI)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        for c in (ik, fk, jac):
            if not c.wait_for_service(timeout_sec=20.0):
                raise TimeoutError(f"service {c.srv_name} did not come up")
        if not traj.wait_for_server(timeout_sec=20.0):
            raise TimeoutError("the trajectory_seed action did not come up")
        # the model serves once prepared (its kernels loaded, or built once on a new machine)
        if not server.wait_until_ready(120.0) or server.robot is None:
            print("the node could not load the robot model (see the log above)")
            return 1
        robot = server.robot
        model, tip = robot.model, robot.default_tip
        print(f"node {ns} up in {time.perf_counter() - t0:.2f} s (ROS_DOMAIN_ID {domain}): robot "
              f"{model.name!r}, {model.nq} joints, base {robot.base!r}, tip {tip!r}")
        print(f"  services {ns}/compute_ik, compute_fk, compute_jacobian; action "
              f"{ns}/trajectory_seed")
        np.set_printoptions(precision=4, suppress=True, linewidth=120)
        rng = np.random.default_rng(args.seed)

        # ---- 1. a batch of reachable goals through ComputeIK (compact form)
        q_true = model.random_q(rng, args.goals)
        T_goal = np.asarray(fk_frames(model, q_true, [tip]))[:, 0]
        req = ComputeIK.Request()
        req.compact_goals = f64_array(pose_to_pq(T_goal))
        req.tip_links = [tip]
        req.compact_response = True
        sec_to_duration(10.0, req.timeout)
        print(f"\n1. ComputeIK: {args.goals} reachable goals (FK of random joint values), "
              f"{server.get_parameter('num_seeds').value} seeds each (the node's default)")
        t = time.perf_counter()
        resp = _wait(ik.call_async(req), 60.0)
        dt = time.perf_counter() - t
        status = np.asarray(resp.status)
        ok = status == codes.SUCCESS
        print(f"  answered in {1e3 * dt:.1f} ms round trip: {int(ok.sum())}/{args.goals} solved, "
              f"overall {codes.name_of(resp.error_code.val)}"
              + (f" ({resp.message[:160]})" if resp.message else ""))
        Q = as_f64(resp.compact_solutions).reshape(args.goals, -1)[:, :model.nq]
        pe, re = pose_error(T_goal, np.asarray(fk_frames(model, Q, [tip]))[:, 0])
        print(f"  FK check of the returned joints: position error max {pe[ok].max():.2e} m, "
              f"orientation error max {re[ok].max():.2e} rad over the solved goals"
              if ok.any() else "  nothing solved")
        for p in range(min(3, args.goals)):
            print(f"    goal {p}: xyz {T_goal[p, :3, 3]} -> {codes.name_of(status[p])}, "
                  f"error {pe[p]:.1e} m / {re[p]:.1e} rad")
        _check(ok.mean() >= MIN_SUCCESS, f"at least {MIN_SUCCESS:.0%} of the goals solved",
               failures)
        _check(bool(np.all(pe[ok] <= 1e-4 * 1.0001) and np.all(re[ok] <= 1e-3 * 1.0001)),
               "every reported success verified by FK (1e-4 m, 1e-3 rad)", failures)

        # ---- 2. FK and Jacobian services at the first solution
        q0 = Q[0]
        freq = ComputeFK.Request()
        freq.states = [joint_states(model.q_names, q0)[0]]
        freq.link_names = [tip]
        fresp = _wait(fk.call_async(freq), 20.0)
        p = fresp.poses[0].pose.position if fresp.poses else None
        want = np.asarray(fk_frames(model, q0, [tip]))[0, 0, :3, 3]
        print(f"\n2. ComputeFK at solution 0: {tip} at "
              f"{[round(p.x, 4), round(p.y, 4), round(p.z, 4)] if p else None} in "
              f"{fresp.poses[0].header.frame_id if p else '?'}")
        _check(p is not None and np.allclose([p.x, p.y, p.z], want, atol=1e-12),
               "FK service equals the core FK", failures)
        jreq = ComputeJacobian.Request()
        jreq.state = joint_states(model.q_names, q0)[0]
        jreq.link_name = tip
        jresp = _wait(jac.call_async(jreq), 20.0)
        J = as_f64(jresp.jacobian).reshape(jresp.rows, jresp.cols) if jresp.rows else None
        print(f"   ComputeJacobian: {jresp.rows}x{jresp.cols}, manipulability "
              f"{np.sqrt(max(np.linalg.det(J @ J.T), 0.0)) if J is not None else float('nan'):.4f}")
        _check(J is not None and np.allclose(J, np.asarray(jacobian(model, q0, tip))[0],
                                             atol=1e-12),
               "Jacobian service equals the core Jacobian", failures)

        # ---- 3. a trajectory seed through the action, with feedback
        start = model.random_q(rng, 1)[0]
        step = rng.uniform(-0.25, 0.25, size=(2, model.nq))
        q_keys = np.clip(np.stack([start, start + step[0], start + step[0] + step[1]]),
                         model.lower, model.upper)
        T_keys = np.asarray(fk_frames(model, q_keys, [tip]))[:, 0]
        n = args.nodes
        goal = TrajectorySeed.Goal()
        goal.keyframes = pq_to_pose_stamped(pose_to_pq(T_keys), robot.base)
        goal.node_indices = [0, n // 2, n - 1]
        goal.tip_link = tip
        goal.mode = "sequential"
        goal.seed = joint_states(model.q_names, start)[0]
        goal.time_step = 0.05
        print(f"\n3. TrajectorySeed action: {n} nodes through 3 keyframes, sequential")
        last = [None]

        def feedback(msg):
            f = msg.feedback
            last[0] = (f.nodes_done, f.nodes_total, f.nodes_failed)
            print(f"\r  feedback: {f.nodes_done}/{f.nodes_total} nodes, {f.nodes_failed} failed",
                  end="", flush=True)

        t = time.perf_counter()
        handle = _wait(traj.send_goal_async(goal, feedback_callback=feedback), 20.0)
        if not handle.accepted:
            raise RuntimeError("the trajectory goal was rejected")
        res = _wait(handle.get_result_async(), 120.0).result
        dt = time.perf_counter() - t
        print()
        st = np.asarray(res.node_status)
        tok = st == codes.SUCCESS
        Qt = np.array([list(pt.positions)[:model.nq] for pt in res.trajectory.points])
        targets = interpolate_keyframes(T_keys, list(goal.node_indices))
        tpe, tre = (pose_error(targets, np.asarray(fk_frames(model, Qt, [tip]))[:, 0])
                    if len(Qt) else (np.array([np.inf]), np.array([np.inf])))
        print(f"  done in {dt:.2f} s: {int(tok.sum())}/{len(st)} nodes solved, overall "
              f"{codes.name_of(res.error_code.val)}, largest joint jump between nodes "
              f"{res.max_joint_jump:.4f} rad")
        if tok.any():
            print(f"  FK check along the path: position error max {tpe[tok].max():.2e} m, "
                  f"orientation error max {tre[tok].max():.2e} rad")
        _check(last[0] is not None and last[0][0] == last[0][1] == n, "feedback reached the "
               "last node", failures)
        _check(len(st) == n and tok.mean() >= MIN_SUCCESS,
               f"at least {MIN_SUCCESS:.0%} of the trajectory nodes solved", failures)
        _check(bool(np.all(tpe[tok] <= 1e-4 * 1.0001) and np.all(tre[tok] <= 1e-3 * 1.0001)),
               "every solved node verified by FK", failures)

        # ---- 4. a planning-group request (the SRDF's first group)
        groups = server.robot.group_names
        if not groups:
            print(f"\n4. no planning groups for robot {model.name!r} (no SRDF): skipped")
        else:
            g = server.robot.group(groups[0])
            gtip = g.tip or tip
            seed_q = model.random_q(rng, 1)[0]
            cols = [model.q_names.index(j) for j in g.joints if j in model.q_names]
            q_goal = seed_q.copy()
            q_goal[cols] = model.random_q(rng, 1)[0][cols]
            T_g = np.asarray(fk_frames(model, q_goal, [gtip]))[:, 0]
            greq = ComputeIK.Request()
            greq.compact_goals = f64_array(pose_to_pq(T_g))
            greq.group_name = g.name
            greq.seed = joint_states(model.q_names, seed_q)[0]
            greq.compact_response = True
            print(f"\n4. ComputeIK for planning group {g.name!r} (SRDF groups {groups}): "
                  f"joints {[model.q_names[i] for i in cols]}, tip {gtip!r} (the group's), "
                  "no tip_links given")
            gresp = _wait(ik.call_async(greq), 30.0)
            names = list(gresp.joint_names)
            gq = seed_q * np.nan  # nothing returned: every check below fails
            if names:
                row = as_f64(gresp.compact_solutions)[:len(names)]
                gq = np.array([row[names.index(n)] for n in model.q_names])
            others = [i for i in range(model.nq) if i not in cols]
            gpe, gre = pose_error(T_g, np.asarray(fk_frames(model, gq, [gtip]))[:, 0])
            print(f"  {codes.name_of(gresp.error_code.val)}: error {gpe[0]:.1e} m / "
                  f"{gre[0]:.1e} rad; {len(others)} joints outside the group left at the seed")
            _check(gresp.error_code.val == codes.SUCCESS and gpe[0] <= 1e-4 * 1.0001
                   and gre[0] <= 1e-3 * 1.0001, "group request solved and verified by FK",
                   failures)
            _check(bool(np.array_equal(gq[others], seed_q[others])),
                   "joints outside the group unchanged", failures)

        # ---- 5. collision avoidance: the same goal with and without it, a box in the way
        box = _collision_section(ik, client, ns, model, tip, rng, failures, _wait,
                                 server.robot.collision_model())

        # ---- 6. MoveIt's planning scene: an object published as move_group does, avoided
        _planning_scene_section(client, server, ns, box, args.seed, failures, _wait)

        # ---- 7. an octomap in the planning scene, as a depth camera's map arrives
        _octomap_section(client, server, ns, failures, _wait)
    except Exception as exc:  # noqa: BLE001
        print(f"\ndemo failed: {type(exc).__name__}: {exc}")
        failures.append(str(exc))
    finally:
        executor.shutdown(timeout_sec=2.0)
        for n_ in (client, server):
            if n_ is not None:
                n_.destroy_node()
        rclpy.try_shutdown(context=ctx)
    print("\nSee it and drive it: `make viewer` (or .venv/bin/ros2_ik_viewer) and open "
          "http://127.0.0.1:8080 in a browser; with ROS 2 and rviz: ros2 launch ros2_ik "
          "demo.launch.py rviz:=true, then drag the handle at the tip.")
    print("\n" + ("demo OK" if not failures else f"demo FAILED: {'; '.join(failures)}"))
    return 0 if not failures else 1


def _collision_section(ik, client, ns, model, tip, rng, failures, wait, cm):
    """A box beside the robot through ~/update_world; goals whose answer without collision
    avoidance runs through the box or the robot itself (checked here on the collision model);
    the same goals with collisions on: clear by the margin, within the tolerances. Returns the
    world it made (the box)."""
    from geometry_msgs.msg import PoseStamped
    from ros2_ik_interfaces.srv import ComputeIK, UpdateWorld
    from shape_msgs.msg import SolidPrimitive

    from .api import fk_frames
    from .ik.collision import clearance
    from .kinematics import pose_error, pose_to_pq
    from .ros import codes
    from .ros.conversions import as_f64, f64_array, joint_states
    from .world import Obstacle, World

    reach = float(np.linalg.norm(np.asarray(fk_frames(model, model.neutral_q(), [tip]))
                                 [0, 0, :3, 3]))
    size, where = (0.25, 0.25, 0.25), (0.5 * reach, 0.0, 0.5 * reach)
    world_cli = client.create_client(UpdateWorld, f"{ns}/update_world")
    if not world_cli.wait_for_service(timeout_sec=10):
        raise TimeoutError("~/update_world not available")
    wreq = UpdateWorld.Request()
    wreq.update.operation = 0
    wreq.update.ids = ["demo_box"]
    prim = SolidPrimitive()
    prim.type = SolidPrimitive.BOX
    prim.dimensions = list(size)
    wreq.update.primitives = [prim]
    ps = PoseStamped()
    ps.pose.position.x, ps.pose.position.y, ps.pose.position.z = where
    ps.pose.orientation.w = 1.0
    wreq.update.poses = [ps]
    wresp = wait(world_cli.call_async(wreq), 10.0)
    world = World().add(Obstacle.make("demo_box", "box", size, list(where) + [0, 0, 0, 1]))
    q = model.random_q(rng, 400)
    q = q[clearance(model, cm, q, world)[0] > 0.02][:60]  # a known answer 2 cm clear
    T = np.asarray(fk_frames(model, q, [tip]))[:, 0]
    seeds = model.random_q(rng, len(T))
    off = ~_moves(model, tip)  # joints that do not move the tip: as in the known answer
    seeds[:, off] = q[:, off]

    def solve(collisions, rows):
        out = []
        for i in rows:
            req = ComputeIK.Request()
            req.compact_goals = f64_array(pose_to_pq(T[i:i + 1]))
            req.seed = joint_states(model.q_names, seeds[i])[0]
            req.num_seeds = 1 if collisions == 2 else 32
            req.collisions = collisions
            req.compact_response = True
            r = wait(ik.call_async(req), 60.0)
            names = list(r.joint_names)
            row = as_f64(r.compact_solutions)[:len(names)]
            out.append((r, np.array([row[names.index(n)] for n in model.q_names])))
        return out

    free = solve(2, range(len(T)))
    bad = [i for i, (r, qa) in enumerate(free) if r.status[0] == codes.SUCCESS
           and clearance(model, cm, qa[None], world)[0][0] < 0.0][:3]
    print(f"\n5. Collision avoidance: box {size} m at {where} (world version {wresp.version}); "
          f"{len(bad)} of {len(T)} goals whose answer without it collides (checked here)")
    if not bad:
        print("  none found this run: skipped")
        return world
    aware = solve(1, bad)
    all_ok = True
    for i, (r, qa) in zip(bad, aware):
        d_free = clearance(model, cm, free[i][1][None], world)[0][0]
        d_aware, _, describe = clearance(model, cm, qa[None], world)
        pe, re = pose_error(T[i:i + 1], np.asarray(fk_frames(model, qa, [tip]))[:, 0])
        ok = (r.status[0] == codes.SUCCESS and d_aware[0] >= 0.01 - 1e-9
              and pe[0] <= 1e-4 * 1.0001 and re[0] <= 1e-3 * 1.0001)
        all_ok &= bool(ok)
        print(f"  goal {i}: without: clearance {d_free:+.3f} m (collides); with: "
              f"{codes.name_of(r.status[0])}, clearance {d_aware[0]:+.3f} m (answered "
              f"{as_f64(r.clearances)[0]:+.3f}), error {pe[0]:.1e} m / {re[0]:.1e} rad")
        print(f"     q without {np.round(free[i][1], 2).tolist()}")
        print(f"     q with    {np.round(qa, 2).tolist()}")
    _check(all_ok, "collision-aware answers clear by the margin and verified by FK", failures)
    return world


def _moves(model, link: str) -> np.ndarray:
    """(nq,) bool: the coordinates of the joints that move ``link``."""
    chain = set(model.ancestors(model.link_index(link)).tolist())
    return np.array([int(j) in chain for j in model.q_joint])


def _diagnostics_watch(client, node_name: str):
    """The node's latest kinematics diagnostic values ({key: value}) as they come in on
    /diagnostics, and a condition notified at each."""
    from diagnostic_msgs.msg import DiagnosticArray

    latest: dict = {}
    cond = threading.Condition()

    def on_array(msg):
        for st in msg.status:
            if st.hardware_id == node_name and st.name.endswith(": kinematics"):
                with cond:
                    latest.clear()
                    latest.update({kv.key: kv.value for kv in st.values})
                    latest["_seen"] = "1"
                    cond.notify_all()
    client.create_subscription(DiagnosticArray, "/diagnostics", on_array, 10)
    return latest, cond


def _planning_scene_section(client, server, ns, box_world, seed, failures, wait) -> None:
    """An obstacle as MoveIt's move_group publishes it: a moveit_msgs/CollisionObject (ADD, a
    box primitive, the robot's base as its frame) on ``collision_object``; waited for (bounded)
    until the node's diagnostics count it in the world; then MoveIt's GetPositionIK on
    ``~/solve_ik``, as srv_kinematics_plugin builds it (group, ik_link_name, pose_stamped,
    robot_state, avoid_collisions, timeout), for goals whose answer without avoidance runs
    through the object (checked here on the collision model): with avoidance, SUCCESS, within
    the tolerances by FK and clear of the object and the box by the margin."""
    try:
        from moveit_msgs.msg import CollisionObject
        from moveit_msgs.srv import GetPositionIK
    except ImportError:
        print("\n6. MoveIt's planning scene: moveit_msgs is not importable here: skipped")
        return
    from geometry_msgs.msg import Pose
    from shape_msgs.msg import SolidPrimitive

    from .api import fk_frames
    from .ik.collision import clearance
    from .kinematics import pose_error, pose_to_pq
    from .ros import codes
    from .ros.conversions import as_f64, joint_states, sec_to_duration
    from .ros.moveit_compat import moveit_names
    from .ros.node import CLIENT_QOS
    from .world import Obstacle, World

    robot = server.robot
    model, cm = robot.model, robot.collision_model()
    margin = float(server.get_parameter("collision.margin").value)
    groups = robot.group_names
    group = robot.group(groups[0]) if groups else None
    link = (group.tip if group is not None and group.tip else None) or robot.default_tip
    rng = np.random.default_rng([seed, 6])  # its own draws: the same whatever ran before

    # the object: a box on the robot's left, turned about z, in the base frame
    reach = float(np.linalg.norm(np.asarray(fk_frames(model, model.neutral_q(), [link]))
                                 [0, 0, :3, 3]))
    size, yaw = (0.3, 0.3, 0.3), 0.4
    xyz = (0.0, 0.5 * reach, 0.45 * reach)
    quat = (0.0, 0.0, float(np.sin(yaw / 2)), float(np.cos(yaw / 2)))
    oid = "demo_shelf"
    co = CollisionObject()
    co.header.frame_id = robot.base
    co.id = oid
    co.pose.position.x, co.pose.position.y, co.pose.position.z = map(float, xyz)
    (co.pose.orientation.x, co.pose.orientation.y, co.pose.orientation.z,
     co.pose.orientation.w) = quat
    prim = SolidPrimitive()
    prim.type = SolidPrimitive.BOX
    prim.dimensions = list(size)
    co.primitives = [prim]
    at_origin = Pose()
    at_origin.orientation.w = 1.0
    co.primitive_poses = [at_origin]
    co.operation = CollisionObject.ADD
    obj = World().add(Obstacle.make(oid, "box", size, list(xyz) + list(quat)))
    world = World().add(*box_world, *obj)

    # published once the node listens, then waited for in its diagnostics (bounded)
    diags, cond = _diagnostics_watch(client, server.get_name())
    with cond:
        if not cond.wait_for(lambda: "_seen" in diags, 15.0):
            raise TimeoutError("no diagnostics from the node on /diagnostics within 15 s")
        v0 = int(diags.get("scene_version", 0))
        n0 = int(diags.get("scene_obstacles", 0))
    pub = client.create_publisher(CollisionObject, "collision_object", 100)
    end = time.monotonic() + 15.0
    while pub.get_subscription_count() < 1:
        if time.monotonic() > end:
            raise TimeoutError("the node does not subscribe to collision_object (15 s)")
        time.sleep(0.01)
    t = time.perf_counter()
    pub.publish(co)

    def applied():
        return (int(diags.get("scene_version", 0)) > v0
                and int(diags.get("scene_obstacles", 0)) == n0 + 1) or oid in diags.get(
                    "scene_error", "")
    with cond:
        arrived = cond.wait_for(applied, 15.0)
        version, error = diags.get("scene_version", "?"), diags.get("scene_error", "")
    dt = time.perf_counter() - t
    print(f"\n6. MoveIt's planning scene: moveit_msgs/CollisionObject {oid!r} (ADD, box {size} "
          f"m at {tuple(round(v, 3) for v in xyz)}, yaw {yaw} rad, frame {robot.base!r}) on "
          f"/collision_object; "
          + (f"in the node's world after {dt:.2f} s (scene version {version})" if arrived
             and oid not in error else f"not applied: {error or 'nothing within 15 s'}"))
    _check(arrived and oid not in error, "the planning-scene object reached the node's world "
           "(its diagnostics)", failures)
    if not arrived or oid in error:
        return

    ik = client.create_client(GetPositionIK, f"{ns}/solve_ik", qos_profile=CLIENT_QOS)
    if not ik.wait_for_service(timeout_sec=10.0):
        raise TimeoutError(f"{ns}/solve_ik (GetPositionIK) not available")
    names = moveit_names(robot, model.q_names)

    def solve(T, q_seed, avoid):
        """GetPositionIK as srv_kinematics_plugin sends it: (error code, q (nq,))."""
        req = GetPositionIK.Request()
        r = req.ik_request
        r.group_name = group.name if group is not None else ""
        r.ik_link_name = link
        r.pose_stamped.header.frame_id = robot.base
        pq = pose_to_pq(T)
        r.pose_stamped.pose.position.x, r.pose_stamped.pose.position.y, \
            r.pose_stamped.pose.position.z = map(float, pq[:3])
        o = r.pose_stamped.pose.orientation
        o.x, o.y, o.z, o.w = map(float, pq[3:])
        r.robot_state.joint_state = joint_states(names, q_seed)[0]
        r.avoid_collisions = bool(avoid)
        sec_to_duration(1.0, r.timeout)
        resp = wait(ik.call_async(req), 60.0)
        js = resp.solution.joint_state
        got = dict(zip(js.name, as_f64(js.position).tolist()))
        q = np.array([got.get(n, np.nan) for n in names])
        return int(resp.error_code.val), q

    # goals with a known answer 2 cm clear of everything; seeds through the object: the known
    # answer with the solved joints (the group's, else those moving the link) drawn again
    cols = _moves(model, link)
    if group is not None:
        cols = np.isin(np.arange(model.nq), [model.q_names.index(j) for j in group.joints
                                              if j in model.q_names])
    Q = model.random_q(rng, 3000)
    Q = Q[clearance(model, cm, Q, world)[0] > 0.02][:60]
    tries = 8  # draws of the solved joints per goal
    S = np.repeat(Q, tries, axis=0)
    S[:, cols] = model.random_q(rng, len(S))[:, cols]
    through = (clearance(model, cm, S, obj, self_collisions=False)[0] < -0.02).reshape(-1, tries)
    keep = through.any(axis=1)
    Q, S = Q[keep], S.reshape(-1, tries, model.nq)[keep, through[keep].argmax(axis=1)]
    T = np.asarray(fk_frames(model, Q, [link]))[:, 0]
    bad, free = [], {}
    for i in range(len(T)):
        code, q = solve(T[i], S[i], avoid=False)
        if code == codes.SUCCESS:  # (ros2_ik's codes are MoveIt's MoveItErrorCodes)
            d = float(clearance(model, cm, q[None], obj, self_collisions=False)[0][0])
            if d < 0.0:
                bad.append(i)
                free[i] = (q, d)
        if len(bad) == 3:
            break
    print(f"  GetPositionIK on {ns}/solve_ik (group {group.name if group else None!r}, "
          f"ik_link_name {link!r}): {len(bad)} goals whose answer without avoid_collisions runs "
          f"through {oid!r} (checked here)")
    if not bad:
        print("  none found this run: skipped")
        return
    all_ok = True
    for i in bad:
        code, q = solve(T[i], S[i], avoid=True)
        ok_code = code == codes.SUCCESS
        if ok_code:
            pe, re = pose_error(T[i:i + 1], np.asarray(fk_frames(model, q, [link]))[:, 0])
            d_obj = float(clearance(model, cm, q[None], obj, self_collisions=False)[0][0])
            d_all = float(clearance(model, cm, q[None], world)[0][0])
        else:
            pe = re = np.array([np.inf])
            d_obj = d_all = -np.inf
        ok = (ok_code and d_all >= margin - 1e-9 and pe[0] <= 1e-4 * 1.0001
              and re[0] <= 1e-3 * 1.0001)
        all_ok &= bool(ok)
        print(f"  goal {i}: without: {free[i][1]:+.3f} m from {oid!r} (collides); with "
              f"avoid_collisions: {codes.name_of(code)}, "
              f"{d_obj:+.3f} m from {oid!r}, {d_all:+.3f} m from everything, error "
              f"{pe[0]:.1e} m / {re[0]:.1e} rad")
    _check(all_ok, "MoveIt's GetPositionIK answers clear of the planning-scene object by the "
           "margin and verified by FK", failures)


def _octomap_section(client, server, ns, failures, wait) -> None:
    """An octomap as move_group carries it (``world.octomap`` of a PlanningScene diff, the
    binary stream of a 16 cm block of 2 cm cells, ``ros2_ik.world.octomap.encode_binary``),
    waited for (bounded) in the node's diagnostics; then GetPositionIK on goals inside the
    block: reached without ``avoid_collisions``, never SUCCESS with it."""
    try:
        from moveit_msgs.msg import PlanningScene
        from moveit_msgs.srv import GetPositionIK
    except ImportError:
        print("\n7. An octomap: moveit_msgs is not importable here: skipped")
        return
    from .api import fk_frames
    from .kinematics import pose_to_pq
    from .ros import codes
    from .ros.node import CLIENT_QOS
    from .world import octomap

    robot = server.robot
    model, link = robot.model, robot.default_tip
    reach = float(np.linalg.norm(np.asarray(fk_frames(model, model.neutral_q(), [link]))
                                 [0, 0, :3, 3]))
    centre = np.array([0.55 * reach, -0.35 * reach, 0.45 * reach])
    g = np.arange(-0.08, 0.08, 0.01) + 0.005
    cells = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) + centre
    sc = PlanningScene()
    sc.is_diff = True
    m = sc.world.octomap
    m.header.frame_id = robot.base
    m.origin.orientation.w = 1.0
    m.octomap.binary, m.octomap.id, m.octomap.resolution = True, "OcTree", 0.02
    m.octomap.data = np.frombuffer(octomap.encode_binary(cells, 0.02), np.int8).tolist()
    diags, cond = _diagnostics_watch(client, server.get_name())
    with cond:
        if not cond.wait_for(lambda: "_seen" in diags, 15.0):
            raise TimeoutError("no diagnostics from the node on /diagnostics within 15 s")
        v0, n0 = int(diags.get("scene_version", 0)), int(diags.get("scene_obstacles", 0))
    pub = client.create_publisher(PlanningScene, "planning_scene", 10)
    end = time.monotonic() + 15.0
    while pub.get_subscription_count() < 1:
        if time.monotonic() > end:
            raise TimeoutError("the node does not subscribe to planning_scene (15 s)")
        time.sleep(0.01)
    pub.publish(sc)
    with cond:
        arrived = cond.wait_for(lambda: int(diags.get("scene_version", 0)) > v0 and int(
            diags.get("scene_obstacles", 0)) > n0, 15.0)
        boxes = int(diags.get("scene_obstacles", 0)) - n0
    where = tuple(round(float(v), 3) for v in centre)
    print(f"\n7. An octomap in the planning scene (world.octomap, binary, 2 cm, a 16 cm block "
          f"of {len(m.octomap.data)} bytes at {where}): "
          + (f"in the node's world as {boxes} box(es)" if arrived else "not applied in 15 s"))
    _check(arrived, "the octomap reached the node's world (its diagnostics)", failures)
    if not arrived:
        return
    ik = client.create_client(GetPositionIK, f"{ns}/solve_ik", qos_profile=CLIENT_QOS)
    if not ik.wait_for_service(timeout_sec=10.0):
        raise TimeoutError(f"{ns}/solve_ik (GetPositionIK) not available")
    rng = np.random.default_rng(7)
    results = []
    for _ in range(3):
        T = np.eye(4)
        T[:3, :3] = np.diag([1.0, -1.0, -1.0])  # the tool pointing down, into the block
        T[:3, 3] = centre + rng.uniform(-0.03, 0.03, 3)
        got = []
        for avoid in (False, True):
            req = GetPositionIK.Request()
            r = req.ik_request
            r.ik_link_name = link
            r.pose_stamped.header.frame_id = robot.base
            pq = pose_to_pq(T)
            p, o = r.pose_stamped.pose.position, r.pose_stamped.pose.orientation
            p.x, p.y, p.z = map(float, pq[:3])
            o.x, o.y, o.z, o.w = map(float, pq[3:])
            r.avoid_collisions = avoid
            r.timeout.sec = 1
            got.append(int(wait(ik.call_async(req), 60.0).error_code.val))
        results.append(got)
        print(f"  a goal inside the block: without avoid_collisions {codes.name_of(got[0])}, "
              f"with it {codes.name_of(got[1])}")
    _check(all(a == codes.SUCCESS and b != codes.SUCCESS for a, b in results),
           "goals inside the octomap reached without collision avoidance, never with it",
           failures)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="panda", choices=sorted(robots.ROBOTS),
                    help="bundled robot model (default: panda)")
    ap.add_argument("--goals", type=int, default=100, help="IK goals in the batch (default 100)")
    ap.add_argument("--nodes", type=int, default=61,
                    help="trajectory nodes, >= 3 (default 61)")
    ap.add_argument("--seed", type=int, default=0, help="random seed of the goals (default 0)")
    ap.add_argument("--node-log-level", default="warn", choices=["debug", "info", "warn",
                                                                 "error"],
                    help="the node's own log lines at this severity and above (default warn: "
                         "the demo prints what it checks)")
    ap.add_argument("--domain-id", type=int,
                    default=int(os.environ.get("ROS_DOMAIN_ID") or
                                random.SystemRandom().randrange(40, 200)),
                    help="ROS_DOMAIN_ID (default: $ROS_DOMAIN_ID, else a random private one)")
    args = ap.parse_args(argv)
    if args.goals < 1 or args.nodes < 3:
        ap.error("--goals must be >= 1 and --nodes >= 3")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
