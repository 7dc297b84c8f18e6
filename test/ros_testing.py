"""Start ``ros2_ik_node`` as a separate process and talk to it over DDS (a test harness, not part
of the installed package).

Used by the integration tests (``test/test_ros_*.py``, ``test/stress_client.py``) and
``bench/bench_node.py`` (which puts ``test/`` on ``sys.path``). Each :class:`NodeProcess` /
:class:`Client` pair shares one ``ROS_DOMAIN_ID`` so that parallel test runs on one machine do
not see each other; discovery stays on localhost.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

import rclpy
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from ros2_ik_interfaces.action import TrajectorySeed
from ros2_ik_interfaces.srv import ComputeFK, ComputeIK, ComputeJacobian

from ros2_ik.ros.node import CLIENT_QOS

__all__ = ["NodeProcess", "Client", "serving_node", "find_node_executable", "random_domain_id",
           "REPO_ROOT", "ik_request", "joint_state"]

REPO_ROOT = Path(__file__).resolve().parents[1]


def random_domain_id() -> int:
    """A ROS_DOMAIN_ID in [40, 200): valid on Linux, away from the common default 0."""
    return random.SystemRandom().randrange(40, 200)


def find_node_executable() -> str:
    """``ros2_ik_node`` where ``ros2 run`` finds it (``<prefix>/lib/ros2_ik``), else on PATH."""
    for cand in (Path(sys.prefix) / "lib" / "ros2_ik" / "ros2_ik_node",
                 Path(sys.prefix) / "bin" / "ros2_ik_node"):
        if cand.exists():
            return str(cand)
    found = shutil.which("ros2_ik_node")
    if found:
        return found
    raise FileNotFoundError("ros2_ik_node is not installed; run scripts/setup.sh (make setup)")


def _param_arg(name: str, value: Any) -> str:
    if isinstance(value, bool):
        v = "true" if value else "false"
    elif isinstance(value, str):
        v = value if value else "''"
    else:
        v = repr(value)
    return f"{name}:={v}"


class NodeProcess:
    """``ros2_ik_node`` in a subprocess, with a params file and ``-p`` overrides.

    Its output goes to a log file (``log_text()``); ``stop()`` sends SIGINT, then kills.
    """

    def __init__(self, domain_id: int, *, params: Mapping[str, Any] | None = None,
                 params_file: str | os.PathLike | None = REPO_ROOT / "config" / "ros2_ik.yaml",
                 node_name: str = "ros2_ik", log_level: str = "info",
                 env: Mapping[str, str] | None = None,
                 executable: str | os.PathLike | None = None,
                 setup_script: str | os.PathLike | None = None):
        # executable: another ros2_ik_node (default: this environment's); setup_script: a
        # shell script sourced first, as a user sources an install space's local_setup.sh
        self.domain_id = domain_id
        self.node_name = node_name
        self._log = tempfile.NamedTemporaryFile(prefix="ros2_ik_node_", suffix=".log",
                                                delete=False)
        self.log_path = self._log.name
        cmd = [str(executable or find_node_executable()), "--ros-args", "-r",
               f"__node:={node_name}", "--log-level", log_level]
        if params_file:
            cmd += ["--params-file", str(params_file)]
        for k, v in (params or {}).items():
            cmd += ["-p", _param_arg(k, v)]
        if setup_script:  # (exec: the node keeps the process, and gets the stop's SIGINT)
            cmd = ["bash", "-c", '. "$0" && exec "$@"', str(setup_script), *cmd]
        self.cmd = cmd
        env = dict(os.environ, **(env or {}))
        env["ROS_DOMAIN_ID"] = str(domain_id)
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        env["PYTHONUNBUFFERED"] = "1"
        env["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_count(self, text: str, n: int, timeout: float = 10.0) -> int:
        """Wait until the log contains ``text`` at least ``n`` times (a condition, with a
        bound: never a sleep standing in for it); returns the count seen last."""
        end = time.monotonic() + timeout
        while True:
            count = self.log_text().count(text)
            if count >= n or time.monotonic() >= end or not self.alive():
                return count
            time.sleep(0.05)

    def wait_for_log(self, text: str | tuple[str, ...], timeout: float = 10.0) -> bool:
        """Wait until the log contains ``text`` (or any of several texts)."""
        texts = (text,) if isinstance(text, str) else tuple(text)

        def found() -> bool:
            log = self.log_text()
            return any(t in log for t in texts)

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if found():
                return True
            if not self.alive():
                return found()
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 60.0, sig: int = signal.SIGINT) -> int | None:
        """SIGINT (or ``sig``), wait (a generous bound: the node's own waits at shutdown are a
        few seconds, a loaded machine makes them longer), then SIGKILL; returns the exit
        code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        return self.proc.returncode

    def stop_cleanly(self, timeout: float = 60.0, sig: int = signal.SIGINT) -> None:
        """:meth:`stop`, asserting exit code 0 (the log's end in the message otherwise)."""
        code = self.stop(timeout, sig)
        assert code == 0, (code, self.exit_report())

    def exit_report(self, most: int = 4000) -> str:
        """The log's end; after a crash, from faulthandler's header on, with the crashing
        thread's stack first (the main thread's alone says nothing: it was waiting)."""
        log = self.log_text()
        at = log.find("Fatal Python error")
        if at < 0:
            return log[-most:]
        crash = log[at:]
        return log[max(0, at - most // 4):at] + crash[:3 * most]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class LockedActionClient(ActionClient):
    """rclpy's ActionClient without its race (ros2/rclpy#1123, fixed upstream after the wheels
    pinned here): ``send_goal_async`` (and the cancel and result requests) register their
    future only after the request is sent, so an executor thread that takes the answer first
    drops it and the future never completes (a loaded machine widens the window: a placement
    goal's acceptance never came within 120 s). The request and its registration, and the
    handling of an answer, hold one lock here."""

    def __init__(self, *args, **kwargs):
        self._race_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def send_goal_async(self, *args, **kwargs):
        with self._race_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, *args, **kwargs):
        with self._race_lock:
            return super()._cancel_goal_async(*args, **kwargs)

    def _get_result_async(self, *args, **kwargs):
        with self._race_lock:
            return super()._get_result_async(*args, **kwargs)

    async def execute(self, taken_data):
        with self._race_lock:  # (the answer's future is registered by now)
            pass
        await super().execute(taken_data)

    def _remove_pending_result_request(self, future):
        """rclpy forgets a goal's feedback callback once its result is in; but feedback and
        the result travel on different topics and DDS does not order them, so a goal's last
        feedback may arrive after its result, and was dropped (a loaded run lost a reach
        study's final feedback that the node had published before the result). The callbacks
        are kept (a test makes a few goals)."""
        kept = dict(self._feedback_callbacks)
        super()._remove_pending_result_request(future)
        self._feedback_callbacks.update(kept)


class Client:
    """An rclpy node in its own context and domain, spinning in a background thread, with
    clients for the ros2_ik services and action (under ``/<server_name>``)."""

    def __init__(self, domain_id: int, server_name: str = "ros2_ik",
                 node_name: str = "ros2_ik_client", executor: str = "multi",
                 actions: Mapping[str, tuple] | None = None):
        # actions: more action clients, {key: (action type, name under the server)}, in
        # self.actions[key]; made here, before the node spins (see _open)
        self._args = (domain_id, node_name, executor, dict(actions or {}))
        self.ns = "/" + server_name.strip("/")
        self.reopened = 0  # times wait_for_server made a new participant (see there)
        self._open()

    def _open(self) -> None:
        domain_id, node_name, executor, actions = self._args
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(node_name, context=self.context)
        if executor == "single":
            from rclpy.executors import SingleThreadedExecutor

            self.executor = SingleThreadedExecutor(context=self.context)
        else:
            self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.node)
        self.spin_error: str | None = None
        self._make_service_clients()
        self.traj = LockedActionClient(self.node, TrajectorySeed, f"{self.ns}/trajectory_seed")
        self.actions = {key: LockedActionClient(self.node, t, f"{self.ns}/{name}")
                        for key, (t, name) in actions.items()}
        self._pubs = {}
        # started last: rclpy's ActionClient joins the node's wait sets before its lock exists,
        # and an executor spinning meanwhile can fail on it (seen in the demo)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _make_service_clients(self) -> None:
        ns = self.ns
        self.ik = self.node.create_client(ComputeIK, f"{ns}/compute_ik", qos_profile=CLIENT_QOS)
        self.fk = self.node.create_client(ComputeFK, f"{ns}/compute_fk", qos_profile=CLIENT_QOS)
        self.jac = self.node.create_client(ComputeJacobian, f"{ns}/compute_jacobian",
                                           qos_profile=CLIENT_QOS)

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001  (context shut down; kept for the error messages)
            self.spin_error = traceback.format_exc()

    def state(self) -> str:
        """The spinning thread's state, for error messages."""
        return (f"client spin thread alive: {self._thread.is_alive()}; "
                f"its error: {self.spin_error or 'none'}")

    # ------------------------------------------------------------------ waiting
    def wait_for_server(self, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        for c in (self.ik, self.fk, self.jac):
            if not c.wait_for_service(timeout_sec=max(0.1, end - time.monotonic())):
                raise TimeoutError(f"service {c.srv_name} not available after {timeout} s")
        if not self.traj.wait_for_server(timeout_sec=max(0.1, end - time.monotonic())):
            raise TimeoutError(f"action {self.ns}/trajectory_seed not available")
        # A service is "available" once the node's request reader matched this client; the
        # reply path (the node's reply writer -> this client's reader) may be matched later, and
        # a reply sent before that is lost (seen: the very first request of one client in
        # 8 x 500, the node's own count showing it answered). Make one round trip first.
        # Seen about once in 20 node starts (Fast DDS 3.2 on loopback): a client whose reply
        # path never matched, every reply lost for 30 s while the node logged each request
        # taken and answered; new service clients in the same participant did not help.
        # After 5 unanswered tries this client is made again in a new participant.
        for name in ("ik", "fk", "jac"):
            misses = 0
            while True:
                client = getattr(self, name)
                try:
                    self.call(client, client.srv_type.Request(), timeout=2.0)
                    break
                except TimeoutError:
                    if time.monotonic() > end:
                        raise TimeoutError(f"no reply from {client.srv_name} within "
                                           f"{timeout} s ({self.state()}; made again "
                                           f"{self.reopened} times)") from None
                    misses += 1
                    if misses % 5 == 0:
                        print(f"[ros_testing] no reply from {client.srv_name} after {misses} "
                              f"tries: a new client participant", file=sys.stderr, flush=True)
                        self.close()
                        self._open()
                        self.reopened += 1
                        for c in (self.ik, self.fk, self.jac):
                            c.wait_for_service(timeout_sec=max(0.1, end - time.monotonic()))

    @staticmethod
    def wait_future(fut, timeout: float):
        ev = threading.Event()
        fut.add_done_callback(lambda _f: ev.set())
        if not ev.wait(timeout):
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout} s")
        exc = fut.exception()
        if exc is not None:
            raise exc
        return fut.result()

    def call(self, client, request, timeout: float = 30.0):
        return self.wait_future(client.call_async(request), timeout)

    # ------------------------------------------------------------------ action
    def send_goal(self, goal, feedback: Callable | None = None, timeout: float = 10.0):
        """Send a TrajectorySeed goal; returns the accepted goal handle."""
        handle = self.wait_future(self.traj.send_goal_async(goal, feedback_callback=feedback),
                                  timeout)
        if not handle.accepted:
            raise RuntimeError("trajectory_seed goal rejected")
        return handle

    def result(self, handle, timeout: float = 60.0):
        """(status, result) of an accepted goal."""
        res = self.wait_future(handle.get_result_async(), timeout)
        return res.status, res.result

    def cancel(self, handle, timeout: float = 10.0):
        return self.wait_future(handle.cancel_goal_async(), timeout)

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, values: Mapping[str, Any], timeout: float = 10.0) -> list:
        """Set parameters of the server node; returns its SetParametersResult list."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        cli = self.node.create_client(SetParameters, f"{self.ns}/set_parameters")
        try:
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"{self.ns}/set_parameters not available")
            req = SetParameters.Request()
            req.parameters = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
            return list(self.call(cli, req, timeout).results)
        finally:
            self.node.destroy_client(cli)

    def get_parameters(self, names, timeout: float = 10.0) -> list:
        """Values (rclpy ParameterValue messages) of parameters of the server node."""
        from rcl_interfaces.srv import GetParameters

        cli = self.node.create_client(GetParameters, f"{self.ns}/get_parameters")
        try:
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"{self.ns}/get_parameters not available")
            req = GetParameters.Request()
            req.names = list(names)
            return list(self.call(cli, req, timeout).values)
        finally:
            self.node.destroy_client(cli)

    # ------------------------------------------------------------------ topics
    def publisher(self, msg_type, topic: str, qos=10):
        key = (msg_type, topic)
        if key not in self._pubs:
            self._pubs[key] = self.node.create_publisher(msg_type, topic, qos)
        return self._pubs[key]

    def publish_robot_description(self, urdf: str,
                                  topic: str = "/robot_description") -> None:
        """Publish like robot_state_publisher (and move_group, for the SRDF on
        ``/robot_description_semantic``): reliable, transient local, depth 1."""
        from std_msgs.msg import String

        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
        self.publisher(String, topic, qos).publish(String(data=urdf))

    def subscribe(self, msg_type, topic: str, qos=10):
        """Subscribe and collect messages; returns (list, threading.Condition)."""
        got: list = []
        cond = threading.Condition()

        def cb(msg):
            with cond:
                got.append(msg)
                cond.notify_all()

        self.node.create_subscription(msg_type, topic, cb, qos)
        return got, cond

    @staticmethod
    def wait_for(cond: threading.Condition, predicate: Callable[[], bool],
                 timeout: float = 10.0) -> bool:
        with cond:
            return cond.wait_for(predicate, timeout)

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        try:
            for action in (self.traj, *self.actions.values()):
                action.destroy()
            self.executor.shutdown(timeout_sec=2.0)
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
            self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@contextlib.contextmanager
def serving_node(params: Mapping[str, Any], *, server_timeout: float = 30.0, **client_kw):
    """A node process (its own ``ROS_DOMAIN_ID``, ``params`` over config/ros2_ik.yaml) and a
    :class:`Client` of it (``client_kw``), once the node's services answer and its model serves
    (the ``ready:`` log line; the model is prepared in the background after the services come
    up, and a request before it is refused with NO_ROBOT_MODEL): yields ``(node, client)``;
    both are stopped afterwards."""
    node = NodeProcess(random_domain_id(), params=params)
    client = None
    try:
        client = Client(node.domain_id, **client_kw)
        client.wait_for_server(server_timeout)
        assert node.wait_for_log("]: ready: ", 240), node.log_text()
        yield node, client
    finally:
        if client is not None:
            client.close()
        node.stop()


class Feedback:
    """An action goal's feedback as it arrives (pass the object as ``feedback_callback``), with
    a bounded wait for a condition on it: feedback and the result travel on different topics,
    and DDS does not order them, so the last feedback may arrive after the result."""

    def __init__(self):
        self.items: list = []
        self._cond = threading.Condition()

    def __call__(self, msg) -> None:
        with self._cond:
            self.items.append(msg.feedback)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[list], bool], timeout: float = 30.0) -> bool:
        """Whether ``predicate(items)`` came true within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self.items), timeout)


# ---------------------------------------------------------------------- request builders
def ik_request(pq=None, *, goals=None, frame_id: str = "", **fields):
    """A ComputeIK request: compact goals from ``pq`` (N, 7) or (N, K, 7), or friendly ``goals``
    (PoseStamped list); other fields by keyword (``timeout`` in seconds)."""
    from ros2_ik.ros.conversions import f64_array, sec_to_duration

    req = ComputeIK.Request()
    if pq is not None:
        req.compact_goals = f64_array(pq)
        req.compact_frame_id = frame_id
    if goals is not None:
        req.goals = list(goals)
    for k, v in fields.items():
        if k == "timeout":
            sec_to_duration(v, req.timeout)
        elif k == "axis_weights":
            req.axis_weights = f64_array(v)
        else:
            setattr(req, k, v)
    return req


def add_box(client, box_id: str, size, xyz, timeout: float = 20.0):
    """Add a box (full sizes [m], centred at ``xyz`` in the base frame) to the node's world
    through ~/update_world, as a client builds the request; returns the response."""
    from geometry_msgs.msg import Point, PoseStamped
    from shape_msgs.msg import SolidPrimitive

    from ros2_ik_interfaces.srv import UpdateWorld

    upd = client.node.create_client(UpdateWorld, f"{client.ns}/update_world")
    if not upd.wait_for_service(timeout_sec=30):
        raise TimeoutError("~/update_world is not available")
    req = UpdateWorld.Request()
    req.update.operation = 0
    req.update.ids = [box_id]
    prim = SolidPrimitive()
    prim.type = SolidPrimitive.BOX
    prim.dimensions = [float(v) for v in size]
    req.update.primitives = [prim]
    ps = PoseStamped()
    ps.pose.position = Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))
    ps.pose.orientation.w = 1.0
    req.update.poses = [ps]
    return client.call(upd, req, timeout=timeout)


def joint_state(names, positions):
    from sensor_msgs.msg import JointState

    from ros2_ik.ros.conversions import f64_array

    js = JointState()
    js.name = list(names)
    js.position = f64_array(positions)
    return js
