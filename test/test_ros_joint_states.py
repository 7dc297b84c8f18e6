"""joint_states at a robot's rate must not starve the node, nor grow it.

Another process publishes joint_states at about 1 kHz (panda's joints at a fixed configuration
plus 20 joint names the robot does not have, new names in every message) while this process
streams pose goals on ``~/goal`` at 100 Hz and calls ``~/compute_ik`` with single goals. Every
goal of the stream must be answered on ``~/solution`` (in order, FK-verified), every call
answered (FK-verified), the seed must come from joint_states, and the node must keep a bounded
number of joint_states messages (its own count, logged when it stops). Speed is not asserted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq  # noqa: E402
from ros2_ik.ros import codes  # noqa: E402
from ros2_ik.ros.conversions import as_f64, pq_to_pose_stamped  # noqa: E402
from ros_testing import Client, NodeProcess, ik_request, random_domain_id  # noqa: E402

TIP = "panda_hand_tcp"
GOALS = 300        # at 100 Hz
RATE = 1000.0      # joint_states [Hz]
Q0 = np.array((0.1, -0.3, 0.2, -2.0, 0.1, 1.8, 0.5))  # = joint_states_publisher.Q0


def _fk(model, q):
    return np.asarray(fk_frames(model, np.atleast_2d(q), [TIP]))[:, 0]


def test_joint_states_at_1khz_do_not_starve_the_node():
    model = load_robot("panda")
    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": "panda", "markers.enabled": False})
    client = pub_proc = None
    try:
        client = Client(domain)
        client.wait_for_server(30)
        assert node.wait_for_log("]: ready: ", 240), node.log_text()[-3000:]
        solutions, cond = client.subscribe(JointState, "/ros2_ik/solution", QoSProfile(depth=1000))
        goal_pub = client.publisher(PoseStamped, "/ros2_ik/goal", QoSProfile(depth=1000))

        script = Path(__file__).with_name("joint_states_publisher.py")
        pub_proc = subprocess.Popen([sys.executable, str(script), str(domain), "8", str(RATE)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the seed comes from joint_states: a goal at FK(Q0) is solved at Q0 in 0 iterations
        end = time.monotonic() + 30
        while True:
            resp = client.call(client.ik, ik_request(pose_to_pq(_fk(model, Q0)),
                                                     compact_response=True), timeout=10)
            if resp.iterations[0] == 0 or time.monotonic() > end:
                break
            time.sleep(0.1)
        assert resp.status[0] == codes.SUCCESS and resp.iterations[0] == 0, resp.message
        np.testing.assert_allclose(as_f64(resp.compact_solutions)[:7], Q0, atol=1e-9)

        rng = np.random.default_rng(5)
        T_goals = _fk(model, Q0 + rng.uniform(-0.15, 0.15, (GOALS, 7)))
        goal_msgs = pq_to_pose_stamped(pose_to_pq(T_goals), "")
        calls = {"answered": 0, "errors": []}
        stop = threading.Event()

        def call_loop():
            r = np.random.default_rng(6)
            while not stop.is_set():
                T = _fk(model, Q0 + r.uniform(-0.15, 0.15, 7))
                try:
                    resp = client.call(client.ik, ik_request(pose_to_pq(T),
                                                             compact_response=True), timeout=10)
                except TimeoutError as exc:
                    calls["errors"].append(str(exc))
                    continue
                calls["answered"] += 1
                if resp.status[0] != codes.SUCCESS:
                    calls["errors"].append(resp.message)
                    continue
                pe, re_ = pose_error(T, _fk(model, as_f64(resp.compact_solutions)[:7])[0])
                if pe > 1e-4 * 1.0001 or re_ > 1e-3 * 1.0001:
                    calls["errors"].append(f"a success is off by {pe} m / {re_} rad")
                time.sleep(0.02)

        caller = threading.Thread(target=call_loop, daemon=True)
        caller.start()
        t = time.monotonic()
        for i, g in enumerate(goal_msgs):  # 100 Hz
            goal_pub.publish(g)
            time.sleep(max(0.0, t + 0.01 * (i + 1) - time.monotonic()))
        got_all = Client.wait_for(cond, lambda: len(solutions) >= GOALS, timeout=60)
        stop.set()
        caller.join(20)
        out, err = pub_proc.communicate(timeout=60)
        assert pub_proc.returncode == 0, err[-2000:]
        published = json.loads(out.strip().splitlines()[-1])
        assert node.alive()
    except TimeoutError as exc:  # lost or late: what the node says it took and answered
        node.stop()
        raise AssertionError(f"{exc}; the node's log ends with:\n"
                             f"{node.log_text()[-3000:]}") from exc
    finally:
        if pub_proc is not None and pub_proc.poll() is None:
            pub_proc.kill()
        if client is not None:
            client.close()
        node.stop()

    log = node.log_text()
    m = re.search(r"joint_states: (\d+) messages, (\d+) name sets kept", log)
    assert m, log[-2000:]
    received, kept = int(m.group(1)), int(m.group(2))
    print(f"joint_states: {published['sent']} published at {published['rate']:.0f} Hz, "
          f"{received} taken by the node, {kept} kept; goal stream {len(solutions)}/{GOALS} "
          f"answered; {calls['answered']} ComputeIK calls answered")
    assert published["rate"] > 0.4 * RATE, "the publisher did not reach the rate under test"
    assert received > 0.2 * published["sent"], "the node did not take the joint_states load"
    assert kept <= 8, "joint_states name sets accumulate"
    assert got_all, (f"{len(solutions)}/{GOALS} goals answered; the node's log ends with:\n"
                     f"{log[-3000:]}")
    Q = np.array([[dict(zip(s.name, s.position))[n] for n in model.q_names]
                  for s in solutions[:GOALS]])
    pe, re_ = pose_error(T_goals, _fk(model, Q))
    assert np.all(pe <= 1e-4 * 1.0001) and np.all(re_ <= 1e-3 * 1.0001), "solution != its goal"
    assert calls["answered"] >= 10 and not calls["errors"], calls["errors"][:5]
