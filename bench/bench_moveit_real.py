"""MoveIt's GetPositionIK on a real robot (issue 48's node figure; not a test, not the product).

    python bench/bench_moveit_real.py [--goals 200] [--out FILE]

example-robot-data's Panda (its URDF and SRDF latched on the description topics before the node
starts, its meshes on the node's search path: 2,154 spheres) and the bundled panda (78 spheres),
each in a node process of its own; the planning scene as move_group publishes it: a table (a
plane), a shelf of three boards and two sides, a box and a post. Clear goals (a known answer
1.5 cm clear on the robot's collision model), one GetPositionIK request per goal built as
srv_kinematics_plugin builds it (the group, its tip, the pose in the base frame, the current
state), from one client, with ``avoid_collisions`` and without, with the node's default first
pass on the cover (``collision.cover`` 0.02) and with it off (0): round trip median and p95,
success, and the ratios. Prints the hardware, versions and load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test"))

from common import Report, banner, load_average

BASE, TIP = "panda_link0", "panda_hand_tcp"
#: (id, shape, size, position): the cell, in the base frame (boxes: full sizes)
CELL = [("table", "halfspace", (), (0, 0, 0)),
        ("shelf_bottom", "box", (0.3, 0.6, 0.02), (0.6, -0.1, 0.3)),
        ("shelf_middle", "box", (0.3, 0.6, 0.02), (0.6, -0.1, 0.6)),
        ("shelf_top", "box", (0.3, 0.6, 0.02), (0.6, -0.1, 0.9)),
        ("shelf_left", "box", (0.3, 0.02, 0.62), (0.6, 0.2, 0.6)),
        ("shelf_right", "box", (0.3, 0.02, 0.62), (0.6, -0.4, 0.6)),
        ("box", "box", (0.2, 0.2, 0.2), (-0.3, 0.45, 0.1)),
        ("post", "cylinder", (0.04, 0.9), (-0.4, -0.35, 0.45))]


def world():
    from ros2_ik.world import Obstacle, World

    return World().add(*[Obstacle.make(i, s, size, [*p, 0, 0, 0, 1]) for i, s, size, p in CELL])


def scene_message():
    from geometry_msgs.msg import Pose
    from moveit_msgs.msg import CollisionObject, PlanningScene
    from shape_msgs.msg import Plane, SolidPrimitive

    def pose(p):
        out = Pose()
        out.position.x, out.position.y, out.position.z = map(float, p)
        out.orientation.w = 1.0
        return out
    objs = []
    for i, shape, size, p in CELL:
        co = CollisionObject()
        co.header.frame_id, co.id, co.pose = BASE, i, pose(p)
        if shape == "halfspace":
            co.planes, co.plane_poses = [Plane(coef=[0.0, 0.0, 1.0, 0.0])], [pose((0, 0, 0))]
        else:
            prim = SolidPrimitive()
            if shape == "box":
                prim.type, prim.dimensions = SolidPrimitive.BOX, [float(v) for v in size]
            else:
                prim.type, prim.dimensions = SolidPrimitive.CYLINDER, [float(size[1]),
                                                                       float(size[0])]
            co.primitives, co.primitive_poses = [prim], [pose((0, 0, 0))]
        co.operation = CollisionObject.ADD
        objs.append(co)
    sc = PlanningScene()
    sc.is_diff = True
    sc.world.collision_objects = objs
    return sc


def goals(m, cm, n: int):
    from ros2_ik import fk_frames
    from ros2_ik.ik.collision import clearance

    q = m.random_q(np.random.default_rng(8), 12 * n)
    d = clearance(m, cm, q, world(), reach=0.02)[0]
    return np.asarray(fk_frames(m, q[d >= 0.015][:n], [TIP]))[:, 0]


def request(model, pq, avoid: bool, group: str):
    from moveit_msgs.srv import GetPositionIK

    req = GetPositionIK.Request()
    ik = req.ik_request
    ik.group_name, ik.ik_link_name, ik.avoid_collisions = group, TIP, avoid
    ik.pose_stamped.header.frame_id = BASE
    p, o = ik.pose_stamped.pose.position, ik.pose_stamped.pose.orientation
    p.x, p.y, p.z = map(float, pq[:3])
    o.x, o.y, o.z, o.w = map(float, pq[3:])
    ik.robot_state.joint_state.name = list(model.q_names)
    ik.robot_state.joint_state.position = [float(v) for v in model.neutral_q()]
    ik.timeout.sec = 5
    return req


def run(say, label: str, urdf: str, srdf: str, share, cover: float, T, model,
        group: str) -> dict:
    from diagnostic_msgs.msg import DiagnosticArray
    from moveit_msgs.msg import PlanningScene
    from moveit_msgs.srv import GetPositionIK
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from ros2_ik.kinematics import pose_to_pq
    from ros2_ik.ros import codes
    from ros_testing import Client, NodeProcess, random_domain_id

    domain = random_domain_id()
    client = Client(domain)
    node = None
    out = {}
    try:
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        client.publish_robot_description(urdf)
        client.publisher(String, "/robot_description_semantic", latched).publish(
            String(data=srdf))
        node = NodeProcess(domain, params={"base_link": BASE, "tip_link": TIP,
                                           "collision.margin": 0.01, "collision.cover": cover},
                           env={"ROS2_IK_MESH_PATH": str(share) if share else ""})
        client.wait_for_server(120)
        if not node.wait_for_log("]: ready: ", 600):
            raise RuntimeError(node.log_text()[-3000:])
        ik = client.node.create_client(GetPositionIK, f"{client.ns}/solve_ik")
        if not ik.wait_for_service(timeout_sec=60):
            raise RuntimeError("no solve_ik service")
        diags, cond = client.subscribe(DiagnosticArray, "/diagnostics")
        client.publisher(PlanningScene, "planning_scene", 10).publish(scene_message())

        def obstacles():
            for arr in reversed(diags):
                for st in arr.status:
                    if st.name.endswith(": kinematics"):
                        return {kv.key: kv.value for kv in st.values}.get("scene_obstacles")
            return None
        if not client.wait_for(cond, lambda: obstacles() == str(len(CELL)), 120):
            raise RuntimeError(f"the scene did not arrive: {obstacles()}")
        pqs = pose_to_pq(np.asarray(T))
        for avoid in (True, False):
            for pq in pqs[:3]:  # (warm: the kernels of both options loaded)
                client.call(ik, request(model, pq, avoid, group), timeout=600)
            times, ok = [], []
            for pq in pqs:
                req = request(model, pq, avoid, group)
                t = time.perf_counter()
                resp = client.call(ik, req, timeout=600)
                times.append(time.perf_counter() - t)
                ok.append(resp.error_code.val == codes.SUCCESS)
            ms = 1e3 * np.asarray(times)
            out[avoid] = (float(np.median(ms)), float(np.percentile(ms, 95)), float(np.mean(ok)))
            say(f"   {label}, cover {cover:g} m, avoid_collisions={avoid}: median "
                f"{out[avoid][0]:.2f} ms, p95 {out[avoid][1]:.2f} ms, success {out[avoid][2]:.3f}")
    finally:
        client.close()
        if node is not None:
            node.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--goals", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rep = Report()
    say = rep.say
    say(banner("bench_moveit_real: GetPositionIK on a real robot (issue 48)"))
    say(f"{load_average()} at start")
    from importlib import metadata
    from pathlib import Path

    import warnings

    from ros2_ik import load_robot, robots
    from ros2_ik.ik.collision import default_collision_model
    from ros2_ik.model import Model

    try:
        share = Path(metadata.distribution("example-robot-data").locate_file("")) / \
            "cmeel.prefix/share"
    except metadata.PackageNotFoundError:
        say("example-robot-data is not installed (make setup)")
        return 1
    erd = share / "example-robot-data" / "robots"
    urdf = (erd / "panda_description/urdf/panda.urdf").read_text()
    srdf = (erd / "panda_description/srdf/panda.srdf").read_text()
    m = Model.from_urdf(urdf, base=BASE, tips=[TIP])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = default_collision_model(m, srdf, within=0.01, search_path=[str(share)])
    mb = load_robot("panda")
    cmb = default_collision_model(mb, within=0.01)
    T = goals(m, cm, args.goals)
    Tb = goals(mb, cmb, args.goals)
    keep = min(len(T), len(Tb))
    say(f"{keep} clear goals per robot (1.5 cm on its own model); a table, a shelf, a box and "
        f"a post; {cm.num_spheres} spheres (example-robot-data's Panda), {cmb.num_spheres} "
        "(bundled)")
    res = {}
    res["real", 0.02] = run(say, "example-robot-data's Panda", urdf, srdf, share, 0.02,
                            T[:keep], m, "arm")
    res["real", 0.0] = run(say, "example-robot-data's Panda", urdf, srdf, share, 0.0, T[:keep],
                           m, "arm")
    res["bundled", 0.02] = run(say, "bundled panda", robots.urdf_string("panda"),
                               robots.srdf_string("panda"), None, 0.02, Tb[:keep], mb,
                               "panda_manipulator")
    b = res["bundled", 0.02][True][0]
    for cover in (0.02, 0.0):
        r = res["real", cover]
        say(f"   real / bundled with avoid_collisions, cover {cover:g} m: median "
            f"{r[True][0] / b:.2f}x; real aware / blind: {r[True][0] / r[False][0]:.2f}x "
            "(goal: <= 2 ms median)")
    say(f"{load_average()} at the end")
    rep.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
