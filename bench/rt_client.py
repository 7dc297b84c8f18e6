"""Service round trips timed from a lean client process, for bench_node (not a test, not the
product).

    python bench/rt_client.py PLAN.json

The client a robot runs (a planner, a MoveIt plugin) is a process of its own that does not
solve IK itself; so is this one: rclpy, the interface packages and numpy, nothing of ros2_ik's
solvers, so the figures are those of a client that only asks. It spins its executor in the
calling thread.

PLAN.json: ``{"domain": int, "calls": int, "rounds": int, "targets": [{"name", "service",
"type" ("ComputeIK" | "ComputeJacobian" | "GetParameters" |
"Trigger" | "GetPositionIK"), "request" (a file holding the
serialized request, or "" for an empty one)}]}``. Every target is waited for, called 30 times
to warm up, then ``calls`` times per round; the rounds go over the targets in turn, so that a
slow spell of the machine falls on all of them alike. Prints one JSON line: per target, every
round trip in seconds.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message

#: the service types a target may name: (module, class)
TYPES = {"ComputeIK": ("ros2_ik_interfaces.srv", "ComputeIK"),
         "ComputeJacobian": ("ros2_ik_interfaces.srv", "ComputeJacobian"),
         "GetParameters": ("rcl_interfaces.srv", "GetParameters"),
         "Trigger": ("std_srvs.srv", "Trigger"),
         "GetPositionIK": ("moveit_msgs.srv", "GetPositionIK")}


def _type(name: str):
    module, cls = TYPES[name]
    return getattr(importlib.import_module(module), cls)


def main() -> int:
    plan = json.loads(open(sys.argv[1]).read())
    os.environ["ROS_DOMAIN_ID"] = str(plan["domain"])
    rclpy.init()
    node = rclpy.create_node("bench_rt_client")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    # the node's recommended client QoS (ros2_ik.ros.node.CLIENT_QOS)
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    calls = []
    for t in plan["targets"]:
        srv = _type(t["type"])
        cli = node.create_client(srv, t["service"], qos_profile=qos)
        if not cli.wait_for_service(timeout_sec=60):
            raise TimeoutError(f"{t['service']} is not available")
        req = (deserialize_message(open(t["request"], "rb").read(), srv.Request)
               if t["request"] else srv.Request())
        calls.append((t["name"], cli, req))

    def call(cli, req):
        # spin_once until the answer, not spin_until_future_complete: Jazzy's rclpy (7.1)
        # rebuilds its wait set for every new future there (about 3 ms a call in a client with
        # one service, 50-170 ms with the five here), which would time the client, not the
        # node; Kilted's (9.1) does not
        fut = cli.call_async(req)
        end = time.monotonic() + 30.0
        while not fut.done() and time.monotonic() < end:
            ex.spin_once(timeout_sec=min(1.0, max(0.0, end - time.monotonic())))
        if not fut.done():
            raise TimeoutError(f"no answer from {cli.srv_name} within 30 s")
        return fut.result()

    for _, cli, req in calls:
        for _ in range(30):
            call(cli, req)
    times = {name: [] for name, _, _ in calls}
    for _ in range(int(plan["rounds"])):
        for name, cli, req in calls:
            for _ in range(int(plan["calls"])):
                t0 = time.perf_counter()
                call(cli, req)
                times[name].append(time.perf_counter() - t0)
    print(json.dumps(times), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
