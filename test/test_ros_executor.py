"""The node's executor (ros2_ik.ros.executor.NodeExecutor) in-process, over DDS on loopback.

- one wait set per request: rclpy's handler woke the executor again after every callback (a
  wait set built and waited on for nothing, about half a millisecond per message with the
  node's entities); the NodeExecutor does not, and still serves everything;
- answers sent later from another thread (a deferred service, as the node's worker pool does)
  wake the idle executor and arrive;
- a mutually exclusive callback group still runs its callbacks one at a time and all of them.
"""

from __future__ import annotations

import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import Int32  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from ros2_ik.ros.executor import NodeExecutor, defer_service  # noqa: E402
from ros_testing import random_domain_id  # noqa: E402

REQUESTS = 150


class _Participant:
    """A node in its own context and domain on an executor of ``executor_type``."""

    def __init__(self, domain: int, name: str, executor_type):
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = executor_type(context=self.context)
        self.executor.add_node(self.node)

    def close(self):
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


class _Server(_Participant):
    """A node on a NodeExecutor spinning in its own thread; counts the executor's waits."""

    def __init__(self, domain: int):
        super().__init__(domain, "executor_test_server", NodeExecutor)
        self.waits = 0
        self._count = False
        self.thread = threading.Thread(target=self._spin, daemon=True, name="executor-under-test")

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001 (context shut down)
            pass

    def start(self):
        self.thread.start()

    def count(self, on: bool):
        self._count = on

    def close(self):
        super().close()
        self.thread.join(timeout=5)


class _Caller(_Participant):
    """A client node spinning in the calling thread."""

    def __init__(self, domain: int):
        super().__init__(domain, "executor_test_client", SingleThreadedExecutor)

    def call(self, cli, timeout: float = 10.0):
        fut = cli.call_async(Trigger.Request())
        self.executor.spin_until_future_complete(fut, timeout_sec=timeout)
        assert fut.done(), f"no answer from {cli.srv_name} within {timeout} s"
        return fut.result()


@pytest.fixture
def pair(monkeypatch):
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    domain = random_domain_id()
    server, caller = _Server(domain), _Caller(domain)
    real_wait = _rclpy.WaitSet.wait

    def counting_wait(wait_set, timeout):  # every wait of the server's executor thread
        if server._count and threading.current_thread() is server.thread:
            server.waits += 1
        return real_wait(wait_set, timeout)

    monkeypatch.setattr(_rclpy.WaitSet, "wait", counting_wait)
    try:
        yield server, caller
    finally:
        caller.close()
        server.close()


def test_one_wait_set_per_request_and_later_answers_arrive(pair):
    server, caller = pair
    node = server.node
    answered_later = []

    def inline(req, resp):
        resp.success, resp.message = True, "inline"
        return resp

    srv_late = node.create_service(Trigger, "later", lambda req, resp: resp)

    def defer(request, header):  # answered 20 ms later from another thread
        def answer():
            time.sleep(0.02)
            resp = Trigger.Response(success=True, message="later")
            server.executor.create_task(srv_late.send_response, resp, header)
            answered_later.append(1)
        threading.Thread(target=answer, daemon=True).start()

    defer_service(srv_late, defer)
    node.create_service(Trigger, "inline", inline)
    # a mutually exclusive group: callbacks one at a time, none dropped
    group = MutuallyExclusiveCallbackGroup()
    got, busy = [], []

    def on_msg(msg):
        busy.append(1)
        assert len(busy) == 1, "two callbacks of a mutually exclusive group at once"
        got.append(msg.data)
        busy.pop()

    node.create_subscription(Int32, "numbers", on_msg, 1000, callback_group=group)
    server.start()

    c_inline = caller.node.create_client(Trigger, "inline")
    c_late = caller.node.create_client(Trigger, "later")
    pub = caller.node.create_publisher(Int32, "numbers", 1000)
    for c in (c_inline, c_late):
        assert c.wait_for_service(timeout_sec=20), c.srv_name
    end = time.monotonic() + 20
    while pub.get_subscription_count() == 0 and time.monotonic() < end:
        time.sleep(0.05)
    for _ in range(20):  # discovery settles (the first replies of a new client)
        caller.call(c_inline)

    server.count(True)
    for _ in range(REQUESTS):
        assert caller.call(c_inline).message == "inline"
    server.count(False)
    # one wait set per request, plus a few for discovery traffic; rclpy's own handler made it
    # about 1.9 here (every callback woke the executor once more)
    assert server.waits <= 1.25 * REQUESTS, (server.waits, REQUESTS)

    # deferred answers from another thread wake the idle executor: none is lost or late
    for _ in range(10):
        t0 = time.monotonic()
        assert caller.call(c_late, timeout=5.0).message == "later"
        assert time.monotonic() - t0 < 2.0
    assert len(answered_later) == 10

    for i in range(200):
        pub.publish(Int32(data=i))
    end = time.monotonic() + 10
    while len(got) < 200 and time.monotonic() < end:
        time.sleep(0.02)
    assert sorted(got) == list(range(200))


def test_a_request_taken_late_knows_how_long_it_waited(pair):
    """A request that arrives while the executor is busy with another callback: its arrival
    (ros2_ik.ros.executor.arrival, the middleware's timestamp) is before the busy callback ends,
    so the time it waited in the queue counts against its timeout."""
    from ros2_ik.ros.executor import arrival

    server, caller = pair
    node = server.node
    started, release = threading.Event(), threading.Event()
    waited = []

    def busy(req, resp):  # holds the executor thread until the test releases it
        started.set()
        release.wait(30)
        return resp

    node.create_service(Trigger, "busy", busy)
    srv = node.create_service(Trigger, "timed", lambda req, resp: resp)

    def defer(request, header):
        waited.append(time.perf_counter() - arrival(header))
        srv.send_response(Trigger.Response(success=True), header)

    defer_service(srv, defer)
    server.start()
    c_busy = caller.node.create_client(Trigger, "busy")
    c_timed = caller.node.create_client(Trigger, "timed")
    for c in (c_busy, c_timed):
        assert c.wait_for_service(timeout_sec=20), c.srv_name
    caller.call(c_timed)  # discovery settles
    waited.clear()
    f_busy = c_busy.call_async(Trigger.Request())
    end = time.monotonic() + 20
    while not started.is_set() and time.monotonic() < end:
        caller.executor.spin_once(timeout_sec=0.05)
    assert started.is_set(), "the busy callback never ran"
    f_timed = c_timed.call_async(Trigger.Request())
    caller.executor.spin_once(timeout_sec=0.05)  # (sent)
    time.sleep(0.4)  # the request waits in the queue meanwhile
    release.set()
    end = time.monotonic() + 20
    while not (f_busy.done() and f_timed.done()) and time.monotonic() < end:
        caller.executor.spin_once(timeout_sec=0.05)
    assert f_timed.done() and f_timed.result().success
    assert len(waited) == 1 and 0.35 <= waited[0] < 20, waited
