"""No log line is lost: every severity, logged from the node's worker threads in any order.

rclpy remembers the severity of each call site and refuses (dropping the message, with "Logger
severity cannot be changed between calls") a later call from the same site with another
severity. The node logs from worker threads through one hand-off to the executor thread
(:meth:`ros2_ik.ros.wiring.Wiring.log`), so that hand-off must keep one call site per severity.
Here four worker threads log every severity, interleaved, through the node's own hand-off, and
every message must reach ``/rosout`` (and none of rclpy's complaints may).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from rcl_interfaces.msg import Log  # noqa: E402
from rclpy.logging import LoggingSeverity  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402

from ros2_ik.ros.node import KinematicsNode, make_executor  # noqa: E402
from ros_testing import random_domain_id  # noqa: E402

LEVELS = ("debug", "info", "warning", "error", "fatal")
PER_THREAD = 40
THREADS = 4


def test_every_severity_from_worker_threads_reaches_rosout():
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=random_domain_id())
    node = KinematicsNode(context=ctx, parameter_overrides=[
        Parameter("robot", value="ur"), Parameter("interactive.enabled", value=False)])
    node.get_logger().set_level(LoggingSeverity.DEBUG)
    listener = rclpy.create_node("log_listener", context=ctx)
    got: list[str] = []
    cond = threading.Condition()

    def on_log(msg: Log) -> None:
        with cond:
            got.append(msg.msg)
            cond.notify_all()

    listener.create_subscription(
        Log, "/rosout", on_log,
        QoSProfile(depth=10_000, reliability=ReliabilityPolicy.RELIABLE,
                   durability=DurabilityPolicy.VOLATILE))
    executor = make_executor(ctx)
    executor.add_node(node)
    executor.add_node(listener)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert node.wait_until_ready(120)
        expected = []
        for t in range(THREADS):
            for i in range(PER_THREAD):
                # each thread walks the severities in another order, so the same call site
                # sees every change of severity, in both directions
                level = LEVELS[(i * (t + 1) + t) % len(LEVELS)]
                expected.append((t, i, level, f"log-test {t}/{i} at {level}"))

        def worker(t: int) -> None:
            for tt, _, level, text in expected:
                if tt == t:
                    node.wiring.log(level, text)

        with ThreadPoolExecutor(THREADS) as pool:
            for f in [pool.submit(worker, t) for t in range(THREADS)]:
                f.result(timeout=30)
        want = {text for *_, text in expected}
        with cond:
            cond.wait_for(lambda: want <= set(got), timeout=30)
            seen = set(got)
        missing = sorted(want - seen)
        assert not missing, f"{len(missing)} of {len(want)} log lines lost, e.g. {missing[:5]}"
        assert not [m for m in got if "severity cannot be changed" in m or "failed:" in m
                    and "on the executor thread" in m], got[-20:]
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        listener.destroy_node()
        rclpy.try_shutdown(context=ctx)
        spinner.join(timeout=5)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_stopped_nodes_last_lines_reach_rosout(sig):
    """Ctrl-C and SIGTERM are the node's own: its executor thread leaves its loop and shuts
    down with the context still valid, so the counts it logs while stopping reach /rosout
    (rclpy's handler shut the context down first, from a thread of its own: that line failed,
    "publisher's context is invalid", and the race with the executor thread ended one node
    with exit 1 and one with SIGSEGV); a request under way is answered or refused, exit 0."""
    import signal

    import numpy as np

    from ros2_ik import fk_frames, load_robot
    from ros2_ik.kinematics import pose_to_pq
    from ros_testing import Client, NodeProcess, ik_request

    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": "ur"})
    try:
        with Client(domain) as client:
            got, cond = client.subscribe(Log, "/rosout", QoSProfile(
                depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.VOLATILE))
            client.wait_for_server(60)
            m = load_robot("ur")
            q = m.random_q(np.random.default_rng(0), 2000)
            pq = pose_to_pq(np.asarray(fk_frames(m, q, [m.tips[0]]))[:, 0])
            one = client.call(client.ik, ik_request(pq[:1], compact_response=True), timeout=30)
            assert one.error_code.val == 1, one.message  # (serving: SUCCESS)
            # a batch sent just before the signal: taken or not, being solved or not
            fut = client.ik.call_async(ik_request(pq, compact_response=True, num_seeds=8,
                                                  timeout=60.0))
            node.stop_cleanly(sig=getattr(signal, sig))
            assert Client.wait_for(cond, lambda: any(
                "service requests:" in m.msg for m in got), timeout=30), \
                [m.msg for m in got][-10:]
            log = node.log_text()
            assert "context is invalid" not in log and "Traceback" not in log, log[-3000:]
            if fut.done():  # (answered before the stop, or refused while stopping)
                assert fut.result() is not None
    finally:
        node.stop()
