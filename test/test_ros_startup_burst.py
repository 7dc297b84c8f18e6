"""No response is lost to a client that starts while the node is busy.

A service client counts the server available once the server's request reader matches it; the
reply path (the server's reply writer to the client's reply reader) is discovered on its own
and may match later. rmw_fastrtps waits 100 ms for it when a response is sent, then drops the
response ("failed to send response (timeout)", a RuntimeWarning in rclpy). The node sends such a
response again until the reply path matches (:mod:`ros2_ik.ros.resend`).

- the resender on its own: a response refused twice is delivered on the third try, once, and
  the warning is not printed; one refused for longer than ``RESEND_FOR`` is given up with an
  error in the log;
- over DDS: bursts of eight new client participants (each its own DDS participant, as a new
  process is) that send their first request the moment ``wait_for_service`` returns (no warm-up
  round trip) and 200 requests each, with the node busy serving the others and both cores kept
  busy by two more processes: every request is answered. ``STARTUP_BURSTS`` bursts (default
  5 here; ``STARTUP_BURSTS=20 make test-ros ARGS="-k burst"`` for the issue's 20: 0 lost, one
  reply delivered late by the node in a run here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.kinematics import fk_frames, pose_to_pq  # noqa: E402
from ros2_ik.ros import codes, resend  # noqa: E402
from ros2_ik.ros.node import CLIENT_QOS  # noqa: E402
from ros2_ik_interfaces.srv import ComputeIK  # noqa: E402
from ros_testing import NodeProcess, ik_request, random_domain_id  # noqa: E402

BURSTS = int(os.environ.get("STARTUP_BURSTS", "5"))
CLIENTS, REQUESTS = 8, 200


class _FlakyService:
    """A service whose first ``refusals`` sends warn as rclpy does when the reply path is not
    matched; records what it delivered."""

    srv_name = "/test/compute_ik"

    def __init__(self, refusals: int):
        self.refusals = refusals
        self.delivered = []
        self.lock = threading.Lock()

    def send_response(self, response, header):
        with self.lock:
            if self.refusals > 0:
                self.refusals -= 1
                warnings.warn("failed to send response (timeout): client will not receive "
                              "response, at ./src/rmw_response.cpp:154", RuntimeWarning,
                              stacklevel=1)
                return
            self.delivered.append((response, header))


def test_a_refused_response_is_sent_again_until_delivered_once(capsys):
    logs = []
    r = resend.Resender(lambda level, text: logs.append((level, text)))
    try:
        srv = _FlakyService(refusals=3)
        failed = resend.send_watched(lambda: srv.send_response("answer", "header"))
        assert failed.startswith("failed to send response")
        r.add(srv, "answer", "header", failed)
        end = time.monotonic() + 10
        while time.monotonic() < end and not srv.delivered:
            time.sleep(0.01)
        assert srv.delivered == [("answer", "header")]
        assert r.counts == {"resent": 1, "lost": 0} and r.pending() == 0
        assert any(level == "info" and "delivered" in text for level, text in logs)
        assert "failed to send response" not in capsys.readouterr().err
        # a warning of another kind, or outside a watched send, is shown as usual
        with pytest.warns(RuntimeWarning, match="something else"):
            warnings.warn("something else", RuntimeWarning, stacklevel=1)
    finally:
        r.close()


def test_a_response_never_delivered_is_given_up_with_an_error(monkeypatch):
    monkeypatch.setattr(resend, "RESEND_FOR", 0.3)
    logs = []
    r = resend.Resender(lambda level, text: logs.append((level, text)))
    try:
        srv = _FlakyService(refusals=10**9)
        r.add(srv, "answer", "header", "failed to send response (timeout)")
        end = time.monotonic() + 10
        while time.monotonic() < end and r.counts["lost"] == 0:
            time.sleep(0.01)
        assert r.counts == {"resent": 0, "lost": 1} and not srv.delivered
        assert any(level == "error" and "given up" in text for level, text in logs)
    finally:
        r.close()


def _burst(domain: int, goals: np.ndarray, seed: int) -> list[str]:
    """Eight new participants at once, each: wait_for_service, then at once 200 requests one
    after the other (10 s timeout each). Returns the problems seen."""
    problems: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(k: int) -> None:
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id=domain)
        node = rclpy.create_node(f"burst_client_{seed}_{k}", context=ctx)
        ex = rclpy.executors.SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        spin = threading.Thread(target=ex.spin, daemon=True)
        spin.start()
        try:
            cli = node.create_client(ComputeIK, "/ros2_ik/compute_ik", qos_profile=CLIENT_QOS)
            start.wait(timeout=60)
            if not cli.wait_for_service(timeout_sec=60):
                raise TimeoutError("service not available")
            for i in range(REQUESTS):
                pq = goals[(k * REQUESTS + i) % len(goals)]
                fut = cli.call_async(ik_request(pq[None], compact_response=True))
                done = threading.Event()
                fut.add_done_callback(lambda _f: done.set())
                if not done.wait(10.0):
                    with lock:
                        problems.append(f"client {k} request {i}: no answer within 10 s")
                    continue
                code = fut.result().error_code.val
                if code not in (codes.SUCCESS, codes.NO_IK_SOLUTION):
                    with lock:
                        problems.append(f"client {k} request {i}: {codes.name_of(code)}")
        except Exception as exc:  # noqa: BLE001
            with lock:
                problems.append(f"client {k}: {type(exc).__name__}: {exc}")
        finally:
            ex.shutdown(timeout_sec=2.0)
            node.destroy_node()
            rclpy.try_shutdown(context=ctx)
            spin.join(timeout=5)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return problems


def test_startup_bursts_of_new_clients_lose_no_response():
    model = load_robot("panda")
    rng = np.random.default_rng(3)
    goals = pose_to_pq(np.asarray(fk_frames(model, model.random_q(rng, 500),
                                            ["panda_hand_tcp"]))[:, 0])
    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": "panda"})
    hot = []
    try:
        assert node.wait_for_log("]: ready: ", 120), node.log_text()[-2000:]
        # both cores kept busy, as on a robot's computer with its other work
        hot = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        lost = []
        for b in range(BURSTS):
            lost += [f"burst {b}: {p}" for p in _burst(domain, goals, b)]
        log = node.log_text()
        resent = log.count("response was delivered")
        print(f"{BURSTS} bursts of {CLIENTS} new clients x {REQUESTS} requests: "
              f"{len(lost)} problems; {resent} responses delivered late by the node")
        assert not lost, lost[:10]
        assert "could not be delivered" not in log
        assert node.alive()
    finally:
        for p in hot:
            p.kill()
        node.stop()
