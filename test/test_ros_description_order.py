"""URDF and SRDF in any order: the planning groups of the latest SRDF apply to the model.

As on a robot: robot_state_publisher and move_group have latched robot_description and
robot_description_semantic (transient local) before ros2_ik starts, so a node joining late
receives both at once, in either order; or both are republished back to back to a running node
under load. Every start and every republication must end with the groups usable (a request for
a group is answered, not INVALID_GROUP_NAME), waited for with a bound."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ros2_ik import fk_frames, load_robot, robots
from ros2_ik.kinematics import pose_to_pq
from ros2_ik.ros import codes
from ros_testing import Client, NodeProcess, ik_request, random_domain_id

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)
#: robot: (group, its tip)
GROUPS = {"panda": ("panda_manipulator", "panda_hand_tcp"), "ur": ("ur_manipulator", "tool0")}


def _goal(name):
    m = load_robot(name)
    return pose_to_pq(np.asarray(fk_frames(m, m.neutral_q()[None], [GROUPS[name][1]]))[:, 0])


def _group_answered(client, name, timeout=30.0) -> int:
    """The code of a group request once it is no longer NO_ROBOT_MODEL / INVALID_GROUP_NAME /
    another model's INVALID_LINK_NAME (the node may still be preparing), within ``timeout``."""
    req = ik_request(_goal(name), compact_response=True, group_name=GROUPS[name][0])
    end = time.monotonic() + timeout
    code = None
    while time.monotonic() < end:
        code = client.call(client.ik, req, timeout=20).error_code.val
        if code not in (codes.NO_ROBOT_MODEL, codes.INVALID_GROUP_NAME, codes.INVALID_LINK_NAME):
            return code
        time.sleep(0.05)
    return code


def test_a_node_started_after_both_descriptions_were_latched_has_its_groups():
    """20 starts of a node joining late, the two descriptions published in alternating order
    (and robots alternating, so every start loads anew)."""
    domain = random_domain_id()
    with Client(domain) as client:
        urdf_pub = client.publisher(String, "robot_description", qos=LATCHED)
        srdf_pub = client.publisher(String, "robot_description_semantic", qos=LATCHED)
        for k in range(20):
            name = ("panda", "ur")[k % 2]
            u, s = String(data=robots.urdf_string(name)), String(data=robots.srdf_string(name))
            for pub, msg in ((urdf_pub, u), (srdf_pub, s))[::1 if k % 4 < 2 else -1]:
                pub.publish(msg)
            node = NodeProcess(domain, params={"robot": ""})
            try:
                client.wait_for_server(60)
                code = _group_answered(client, name)
                assert code == codes.SUCCESS, (k, name, code, node.log_text()[-3000:])
            finally:
                node.stop_cleanly()


def test_both_republished_under_load_keep_the_groups():
    """A running node, clients solving all along, the two descriptions republished back to
    back (either order, robots alternating) 6 times."""
    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": "panda"})
    try:
        with Client(domain) as client, Client(domain) as loader:
            client.wait_for_server(60)
            loader.wait_for_server(60)
            urdf_pub = client.publisher(String, "robot_description", qos=LATCHED)
            srdf_pub = client.publisher(String, "robot_description_semantic", qos=LATCHED)
            stop = threading.Event()
            answered = []

            def load():
                req = ik_request(np.array([[0.4, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0]]),
                                 compact_response=True)
                while not stop.is_set():
                    answered.append(loader.call(loader.ik, req, timeout=20).error_code.val)

            t = threading.Thread(target=load)
            t.start()
            try:
                for k in range(6):
                    name = ("ur", "panda")[k % 2]
                    u = String(data=robots.urdf_string(name))
                    s = String(data=robots.srdf_string(name))
                    for pub, msg in ((urdf_pub, u), (srdf_pub, s))[::1 if k < 3 else -1]:
                        pub.publish(msg)
                    assert _group_answered(client, name) == codes.SUCCESS, (k, name)
            finally:
                stop.set()
                t.join(timeout=60)
            # every request of the load was answered, and succeeded (its goal suits both)
            assert answered and not t.is_alive()
            assert set(answered) == {codes.SUCCESS}, answered
    finally:
        node.stop_cleanly()
