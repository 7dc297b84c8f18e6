"""joint_states at a robot's rate from another process (test_ros_joint_states.py); not a test.

    python test/joint_states_publisher.py DOMAIN_ID SECONDS RATE_HZ [FOREIGN [TOPIC]]

Publishes sensor_msgs/JointState on TOPIC (default /joint_states): panda's seven joints at a
fixed configuration (the seed the node should use) plus FOREIGN (default 20) joint names the
robot does not have, new ones in every message (0: the robot's joints only, as an arm's driver
publishes them). Prints one JSON line: messages sent and the achieved rate.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from ros2_ik import load_robot

#: the configuration published for panda's joints (the test's goals are near it)
Q0 = (0.1, -0.3, 0.2, -2.0, 0.1, 1.8, 0.5)
FOREIGN = 20


def main() -> int:
    domain, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    foreign = int(sys.argv[4]) if len(sys.argv) > 4 else FOREIGN
    topic = sys.argv[5] if len(sys.argv) > 5 else "/joint_states"
    names = list(load_robot("panda").q_names)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = rclpy.create_node("joint_states_publisher", context=ctx)
    pub = node.create_publisher(JointState, topic, qos_profile_sensor_data)
    time.sleep(1.0)  # discovery
    period = 1.0 / rate
    sent = 0
    t0 = time.monotonic()
    nxt = t0
    pos = list(Q0) + [0.0] * foreign
    while time.monotonic() - t0 < seconds:
        msg = JointState()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.name = names + [f"other_robot_{sent}_{k}" for k in range(foreign)]
        msg.position = pos
        pub.publish(msg)
        sent += 1
        nxt += period
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
    dt = time.monotonic() - t0
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)
    print(json.dumps({"sent": sent, "rate": sent / dt, "q0": list(np.asarray(Q0))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
