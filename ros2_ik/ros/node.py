"""``KinematicsNode``: the ROS 2 node of ros2_ik, and ``main()`` (console script ``ros2_ik_node``).

Interfaces (node name ``ros2_ik`` by default; ``~`` is the node's namespace + name, so
``~/compute_ik`` is ``/ros2_ik/compute_ik``):

- subscribes ``robot_description`` (std_msgs/String, reliable + transient local, depth 1),
  ``robot_description_semantic`` (the SRDF: planning groups; same QoS),
  ``joint_states`` (sensor_msgs/JointState, sensor-data QoS: default seed, matched by name),
  ``~/goal`` (geometry_msgs/PoseStamped: solved for the default tip)
- publishes ``~/solution`` (sensor_msgs/JointState, for ``~/goal``), ``~/markers``
  (visualization_msgs/MarkerArray), ``/diagnostics`` (diagnostic_msgs/DiagnosticArray)
- services ``~/compute_ik``, ``~/compute_fk``, ``~/compute_jacobian`` (ros2_ik_interfaces),
  and, when moveit_msgs is importable, ``~/solve_ik`` / ``~/solve_fk`` (MoveIt's
  GetPositionIK / GetPositionFK, for ``srv_kinematics_plugin``; see :mod:`.moveit_compat`)
- action ``~/trajectory_seed`` (ros2_ik_interfaces/action/TrajectorySeed)

Threading (see :mod:`.executor`): one executor thread does every rcl call (takes requests,
sends responses, publishes, accepts and finishes goals); solves run in worker pools (services,
the goal topic in order, trajectories), so no service waits behind a long solve and no answer
is lost between threads. (Services on a second executor thread were measured: the round-trip
floor did not change, and with joint_states at 1 kHz the two threads' contention for the GIL
raised the 1-goal p99 from 8.6 to 59 ms, so one thread it is.) ``joint_states`` only keeps
the latest message per set of names; it is turned into a seed when a request needs one. The
robot model is one immutable object swapped by
reference; every request reads the model and a parameter snapshot once, when it starts.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
import time
import traceback
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import rclpy
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import (CallbackGroup, MutuallyExclusiveCallbackGroup,
                                   ReentrantCallbackGroup)
from rclpy.executors import ExternalShutdownException
from rclpy.logging import LoggingSeverity
from rclpy.node import Node
from rclpy.exceptions import InvalidHandle
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rcl_interfaces.msg import SetParametersResult

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from ros2_ik_interfaces.action import TrajectorySeed
from ros2_ik_interfaces.srv import ComputeFK, ComputeIK, ComputeJacobian
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from .. import solvers
from ..backend import BackendUnavailableError, get_backend
from ..errors import IKError
from ..kinematics import fk_frames
from ..solvers import IKConfig, cxx, fast
from . import codes, moveit_compat, reach_action, services
from .codes import RequestError, code_of_exception
from .conversions import as_f64, f64_array, joint_state_fields
from .diagnostics import Stats, diagnostic_status
from .executor import NodeExecutor, WorkerActionServer, defer_service, goal_finisher
from .markers import ik_markers
from .model_source import ModelSource, describe
from .params import PARAMS, Settings, descriptor, validate
from .robot import LoadedRobot

__all__ = ["KinematicsNode", "main", "make_executor", "ROBOT_DESCRIPTION_QOS", "CLIENT_QOS"]

#: QoS of robot_description, as robot_state_publisher publishes it (latched).
ROBOT_DESCRIPTION_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                   reliability=ReliabilityPolicy.RELIABLE)
WARM_UP_BATCH = 512  # problems in the second warm-up solve
WARM_UP_JOIN_S = 10.0  # how long shutdown waits for warm-up threads
FEEDBACK_PERIOD = 0.05  # [s] fewest seconds between two action feedback messages (last always)
#: QoS of the services: reliable, with a history deep enough that a response is never
#: replaced in the writer's history before a slow client has taken it (the default depth 10 is
#: shared by every client of a service)
SERVICE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
#: QoS for service clients of a busy node (the demo's, the tests'; recommended to any client).
#: With Fast DDS every client of a service reads every response on the service's reply topic and
#: keeps its own by writer id; at rclpy's default depth of 10, a client that is slow to take (a
#: loaded machine) can see its own response pushed out by ten others: measured with 8 client
#: processes x 200 requests, 0-8 answers were lost per run at depth 10 (the node had sent every
#: one), none in 3 runs at depth 1000.
CLIENT_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)
# answered on the executor thread: a one-goal IK with at most this many seeds x iterations
# (the compiled solve of an unreachable goal then stays within a few milliseconds), FK of a
# few states, any Jacobian
INLINE_IK_SEEDS = 64
INLINE_IK_ITERATIONS = 200
INLINE_FK = 8  # states (friendly form) + joint values (compact form)
#: depth of the ~/goal subscription and the ~/solution publisher: 1 s of a 100 Hz stream, so
#: that no goal or solution is dropped while the executor thread (or a subscriber) is held up
GOAL_QUEUE = 100
SERVICE_WORKERS = 4  # threads solving service requests (a long one leaves the others free)
ACTION_WORKERS = 2   # threads running trajectory goals
JOINT_STATE_SOURCES = 8  # joint_states: latest message kept per set of names, for this many sets
#: joint_states are not waited on by the executor (at a robot's 1 kHz, a wait set built per
#: message took a whole core with no request at all): DDS keeps up to this many
#: messages, which the node takes whenever a request needs a seed and every
#: JOINT_STATES_DRAIN_S (so a slow source's latest message outlasts a fast one's stream: up to
#: JOINT_STATES_DEPTH / JOINT_STATES_DRAIN_S = 5 kHz of messages in all)
JOINT_STATES_DEPTH = 500
JOINT_STATES_DRAIN_S = 0.1
JOINT_STATES_QOS = QoSProfile(depth=JOINT_STATES_DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT,
                              durability=DurabilityPolicy.VOLATILE)


class _Polled(CallbackGroup):
    """The callback group of an entity no executor waits on: the node takes its data itself
    (joint_states, see JOINT_STATES_DEPTH)."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


def _never_called(msg) -> None:  # pragma: no cover - a _Polled subscription's callback
    raise RuntimeError("joint_states are taken by KinematicsNode._drain_joint_states")


def make_executor(context=None) -> NodeExecutor:
    """The executor the node is meant to run on (see :mod:`ros2_ik.ros.executor`)."""
    return NodeExecutor(context=context)


class KinematicsNode(Node):
    """Batched IK / FK / Jacobian services and a trajectory-seed action for one robot model."""

    def __init__(self, node_name: str = "ros2_ik", **kwargs):
        super().__init__(node_name, **kwargs)
        self._stats = Stats()
        self._model_lock = threading.Lock()
        # one per warm-up thread, set when its solves are over (waited for at shutdown)
        self._warm_solved: list[threading.Event] = []
        self._bg_lock = threading.Lock()  # background threads' log calls vs destroy_node
        self._destroyed = False
        # the model and planning groups in use (parameters and topics; see .model_source)
        self._source = ModelSource(self.get_logger(), self._stats, self._after_swap)
        self._stopping = False
        self._warm = threading.Event()  # set when the current model's warm-up solve is done
        self._ready_logged = False
        self._ready_lock = threading.Lock()  # 'ready' once: the warm-up thread or __init__
        self._taken = self._answered = 0  # service requests taken / answered (executor thread)
        self._ready_text = ""
        # joint_states: the latest message per tuple of names (bounded), converted lazily
        self._js_lock = threading.Lock()
        self._js_entries: dict = {}  # id(kept positions) -> (positions, robot, q indices, values)
        self._js_latest: OrderedDict[tuple, np.ndarray] = OrderedDict()  # names -> positions
        self._js_version = 0
        self._seed_cache: tuple | None = None  # (version, robot, seed)
        # worker pools: rcl stays on the executor thread, solves run here
        self._pool = ThreadPoolExecutor(SERVICE_WORKERS, thread_name_prefix="ros2_ik-srv")
        self._goal_pool = ThreadPoolExecutor(1, thread_name_prefix="ros2_ik-goal")  # in order
        self._action_pool = ThreadPoolExecutor(ACTION_WORKERS, thread_name_prefix="ros2_ik-act")

        # ---- parameters: declared with descriptors, validated, then one snapshot
        for spec in PARAMS:
            self.declare_parameter(spec.name, spec.default, descriptor(spec))
        values = {spec.name: self.get_parameter(spec.name).value for spec in PARAMS}
        for name, value in values.items():
            reason = validate(name, value)
            if reason:
                raise ValueError(f"invalid parameter at start-up: {reason}")
        self._settings = Settings.from_values(values)
        self._xp, self._backend = self._select_backend(self._settings.backend)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.add_post_set_parameters_callback(self._after_set_parameters)

        # ---- callback groups
        self._cb_services = ReentrantCallbackGroup()
        self._cb_action = ReentrantCallbackGroup()
        self._cb_model = MutuallyExclusiveCallbackGroup()
        self._cb_joints = MutuallyExclusiveCallbackGroup()
        self._cb_goal = MutuallyExclusiveCallbackGroup()
        self._cb_timer = MutuallyExclusiveCallbackGroup()

        # ---- model from parameters (the robot_description topic may replace it any time)
        self._source.load_from_settings(self._settings, startup=True)

        # ---- topics
        self.create_subscription(String, "robot_description", self._on_robot_description,
                                 ROBOT_DESCRIPTION_QOS, callback_group=self._cb_model)
        self.create_subscription(String, "robot_description_semantic",
                                 self._on_robot_description_semantic, ROBOT_DESCRIPTION_QOS,
                                 callback_group=self._cb_model)
        self._js_sub = self.create_subscription(JointState, "joint_states", _never_called,
                                                JOINT_STATES_QOS, callback_group=_Polled())
        self.create_timer(JOINT_STATES_DRAIN_S, self._drain_joint_states,
                          callback_group=self._cb_joints)
        self.create_subscription(PoseStamped, "~/goal", self._on_goal, GOAL_QUEUE,
                                 callback_group=self._cb_goal)
        self._solution_pub = self.create_publisher(JointState, "~/solution", GOAL_QUEUE)
        self._markers_pub = self.create_publisher(MarkerArray, "~/markers", 1)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)

        # ---- services and action
        self._service(ComputeIK, "~/compute_ik", self._srv_compute_ik, inline=self._small_ik)
        self._service(ComputeFK, "~/compute_fk", self._srv_compute_fk,
                      inline=lambda r: len(r.states) + len(r.compact_positions) <= INLINE_FK)
        self._service(ComputeJacobian, "~/compute_jacobian", self._srv_compute_jacobian,
                      inline=lambda r: True)
        self._action = WorkerActionServer(
            self, TrajectorySeed, "~/trajectory_seed", self._run_trajectory,
            submit=self._action_pool.submit, post=self._post,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.ACCEPT,
            callback_group=self._cb_action)
        self._reach = reach_action.register(  # ~/reach_study action and ~/reach_map
            self, post=self._post, settings=lambda: self._settings,
            backend=lambda: self._backend, stopping=lambda: self._stopping, fail=self._fail)
        self._moveit_warned = False
        if moveit_compat.moveit_available():
            from moveit_msgs.srv import GetPositionFK, GetPositionIK  # noqa: PLC0415

            self._service(GetPositionIK, moveit_compat.SOLVE_IK, self._srv_moveit_ik)
            self._service(GetPositionFK, moveit_compat.SOLVE_FK, self._srv_moveit_fk)
            self.get_logger().info(
                "moveit_msgs found: also serving "
                f"{self.resolve_service_name(moveit_compat.SOLVE_IK)} (GetPositionIK, for "
                "srv_kinematics_plugin) and "
                f"{self.resolve_service_name(moveit_compat.SOLVE_FK)} (GetPositionFK)")
        else:
            self.get_logger().info("moveit_msgs is not importable: the MoveIt-compatible "
                                   "~/solve_ik / ~/solve_fk services are not offered (install "
                                   "moveit_msgs to get them); ros2_ik's own services run")

        self._diag_timer = self.create_timer(self._settings.diagnostics_period,
                                             self._publish_diagnostics,
                                             callback_group=self._cb_timer)
        self._ready_text = (
            f"services {self.resolve_service_name('~/compute_ik')} (and compute_fk, "
            f"compute_jacobian), action {self.resolve_service_name('~/trajectory_seed')}, "
            f"backend {self._backend}")
        # 'ready' is logged by the warm-up of the first model (requests are served meanwhile),
        # or here when that warm-up was quicker than the rest of the start-up
        self.get_logger().info(
            "serving (warming up: until the compiled solver is loaded, requests are solved by "
            f"the reference path): {self._ready_text}; model: {self._model_text()}")
        if self._warm.is_set():
            self._log_ready()

    # ================================================================== model
    def _on_robot_description(self, msg: String) -> None:
        self._source.on_robot_description(msg.data, self._settings)

    def _on_robot_description_semantic(self, msg: String) -> None:
        self._source.on_robot_description_semantic(msg.data)

    def _after_swap(self, robot: LoadedRobot) -> None:
        """A new model is in use: warm the solver up for it in the background."""
        self._warm.clear()
        solved = threading.Event()
        self._warm_solved = [e for e in self._warm_solved if not e.is_set()] + [solved]
        threading.Thread(target=self._warm_up, args=(robot, solved), daemon=True,
                         name="ros2_ik-warm-up").start()

    def _model_text(self) -> str:
        robot = self._source.robot
        return describe(robot) if robot else "none yet (waiting for robot_description)"

    def _log_ready(self) -> None:
        """Log 'ready' once, naming the model in use now (not the one at start-up)."""
        with self._ready_lock:
            if self._ready_logged:
                return
            self._ready_logged = True
        self._bg_log("info", f"ready: {self._ready_text}; model: {self._model_text()}")

    def _bg_log(self, level: str, text: str) -> None:
        """Log from a background thread: never once the node is being destroyed (a log call
        publishes on /rosout, whose publisher goes away with the node)."""
        with self._bg_lock:
            if not self._destroyed:
                getattr(self.get_logger(), level)(text)

    def _warm_up(self, robot: LoadedRobot, solved: threading.Event) -> None:
        """Load the compiled kernels (from Numba's cache; compiled in a child process if the
        cache is empty), then one small solve right after a model is loaded, so that one-time
        costs do not land on a request (requests meanwhile take the reference path)."""
        t0 = time.perf_counter()
        try:
            try:
                self._warm_solves(robot)
            except Exception as exc:  # noqa: BLE001  (a failed warm-up only costs time later)
                self._bg_log("warning", f"solver warm-up for {robot.name!r} failed: {exc}")
            else:
                if not self._stopping:
                    self._bg_log("info", f"solver warmed up for {robot.name!r} "
                                         f"in {time.perf_counter() - t0:.2f} s")
            if self._source.robot is robot:
                self._warm.set()
                if self._ready_text:
                    self._log_ready()
        finally:
            solved.set()
        # then, serving already, the compiled rows for large CPU batches (g++, about 2 s once
        # per robot and machine; until they are built the Numba kernel solves those)
        if self._xp is np and not self._stopping and self._source.robot is robot:
            try:
                cxx.build(robot.model, [robot.default_tip])
            except Exception as exc:  # noqa: BLE001 - the Numba kernel keeps solving
                self._bg_log("warning", f"compiled CPU rows for {robot.name!r}: {exc}")

    def _warm_solves(self, robot: LoadedRobot) -> None:
        fast.warm_up(wait=False)
        while not fast.is_warm() and fast.available() and not self._stopping:
            time.sleep(0.05)
        q = robot.model.random_q(0, WARM_UP_BATCH)
        T = fk_frames(robot.model, q, [robot.default_tip])[:, 0]
        # one problem and a batch: solvers may take different code paths for the two
        for n in (1, WARM_UP_BATCH):
            if self._stopping:
                return
            solvers.solve_pose(robot.model, self._xp.asarray(T[:n]),
                               tips=[robot.default_tip], seeds=robot.model.neutral_q(),
                               config=IKConfig(num_seeds=2, max_iterations=3))

    # ================================================================== joint states (seed)
    def _drain_joint_states(self) -> None:
        """Take every joint_states message DDS holds and keep the latest per set of names (at
        most JOINT_STATE_SOURCES sets); a message is only turned into a seed when a request
        needs one. Messages are taken as bytes and only their names and positions read
        (:func:`.conversions.joint_state_fields`: 14 + ~8 us a message here, against 47-62 us
        for rclpy's Python message). Any thread (the executor's timer, a request's worker):
        under the lock."""
        sub = self._js_sub
        with self._js_lock:
            latest = self._js_latest
            taken = 0
            while taken < JOINT_STATES_DEPTH:
                try:
                    with sub.handle:
                        got = sub.handle.take_message(sub.msg_type, True)
                except (InvalidHandle, RuntimeError):  # destroyed, shutting down
                    return
                if got is None:
                    break
                taken += 1
                fields = joint_state_fields(got[0])
                if fields is None:  # not plain little-endian CDR: rclpy reads it
                    try:
                        msg = deserialize_message(got[0], JointState)
                    except Exception:  # noqa: BLE001 - a message no reader can take: skipped
                        continue
                    fields = (tuple(msg.name), np.array(as_f64(msg.position)))
                key, positions = fields
                if not key:
                    continue
                latest.pop(key, None)
                latest[key] = positions
                if len(latest) > JOINT_STATE_SOURCES:
                    latest.popitem(last=False)
                self._js_version += 1

    def _seed_base(self, robot: LoadedRobot) -> np.ndarray:
        """Mid-range seed overwritten by the kept joint_states (oldest set first), clamped."""
        self._drain_joint_states()
        with self._js_lock:
            version = self._js_version
            kept = list(self._js_latest.items())
        cached = self._seed_cache
        if cached is not None and cached[0] == version and cached[1] is robot:
            return cached[2]
        # each kept message is read once per robot: a request re-reads only the new ones (a
        # source whose names change in every message made each request re-read all
        # JOINT_STATE_SOURCES of them name by name, 260 us with 27 names each)
        known = self._js_entries
        entries = {}
        base = np.array(robot.model.neutral_q(), dtype=np.float64)
        for names, positions in kept:
            e = known.get(id(positions))
            if e is None or e[0] is not positions or e[1] is not robot:
                e = (positions, robot, *robot.joint_state_entries(names, positions))
            entries[id(positions)] = e
            base[e[2]] = e[3]
        self._js_entries = entries
        base = np.clip(base, robot.model.lower, robot.model.upper)
        base.setflags(write=False)
        self._seed_cache = (version, robot, base)
        return base

    @property
    def joint_state_sources(self) -> int:
        """How many joint_states messages (one per set of names) are kept."""
        with self._js_lock:
            return len(self._js_latest)

    # ================================================================== parameters
    def _select_backend(self, name: str):
        """(xp module, label): CuPy requested but unusable is logged as an error and NumPy used
        (a runtime change to it is refused before, in the on-set-parameters callback)."""
        try:
            xp = get_backend(name)
        except BackendUnavailableError as exc:
            self.get_logger().error(f"{exc}; falling back to numpy")
            return np, "numpy (cupy requested but unavailable)"
        label = "cupy" if xp is not np else "numpy"
        if name == "auto":
            self.get_logger().info(f"backend auto -> {label}"
                                   + ("" if xp is not np else " (no usable CuPy / GPU)"))
        return xp, label

    def _on_set_parameters(self, params) -> SetParametersResult:
        changes = {}
        for p in params:
            reason = validate(p.name, p.value)
            if reason:
                return SetParametersResult(successful=False, reason=reason)
            changes[p.name] = p.value
        try:
            new = self._settings.replace(**{k: v for k, v in changes.items()
                                            if k in {s.name for s in PARAMS}})
        except Exception as exc:  # noqa: BLE001
            return SetParametersResult(successful=False, reason=str(exc))
        if "backend" in changes:
            try:
                get_backend(new.backend)
            except BackendUnavailableError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        reason = self._source.prepare_change(changes, new)
        if reason:
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _after_set_parameters(self, params) -> None:
        names = {p.name for p in params}
        self._settings = self._settings.replace(**{p.name: p.value for p in params
                                                   if p.name in {s.name for s in PARAMS}})
        if "backend" in names:
            self._xp, self._backend = self._select_backend(self._settings.backend)
        self._source.apply_change()
        if "diagnostics.period" in names:
            self._diag_timer.cancel()
            self.destroy_timer(self._diag_timer)
            self._diag_timer = self.create_timer(self._settings.diagnostics_period,
                                                 self._publish_diagnostics,
                                                 callback_group=self._cb_timer)

    # ================================================================== threads
    def _post(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the executor thread (inline when the node spins nowhere)."""
        ex = self.executor
        if ex is None:
            fn(*args)
        else:
            ex.create_task(fn, *args)

    def _small_ik(self, req) -> bool:
        """A one-goal, one-tip ComputeIK request for the compiled solver with few seeds: it
        takes well under a millisecond, less than a hand-off to a worker costs."""
        s = self._settings
        return (fast.is_warm() and len(req.goals) + len(req.compact_goals) // 7 <= 1
                and len(req.tip_links) <= 1 and (req.solver or s.solver) == "dls"
                and (req.num_seeds or s.num_seeds) <= INLINE_IK_SEEDS
                and s.max_iterations <= INLINE_IK_ITERATIONS)

    def _service(self, srv_type, name: str, handler, inline=None):
        """A service whose requests are solved in the worker pool on a :class:`NodeExecutor`
        (answered from the executor thread), and inline on any other executor. Requests for
        which ``inline(request)`` is true are answered at once on the executor thread (small
        ones, bounded: a hand-off would cost more than the work)."""
        srv = self.create_service(srv_type, name, handler, qos_profile=SERVICE_QOS,
                                  callback_group=self._cb_services)

        def defer(request, header) -> None:
            self._taken += 1
            if inline is not None and inline(request):
                response = None
                try:
                    response = handler(request, srv_type.Response())
                finally:
                    if response is None:
                        response = srv_type.Response()
                        _set_failure(response, "internal error: the handler returned nothing; "
                                               "the node keeps serving")
                    self._send_response(srv, response, header)
                return
            def job():
                response = None
                try:
                    response = handler(request, srv_type.Response())
                finally:  # exactly one response per request, whatever happened
                    if response is None:
                        response = srv_type.Response()
                        _set_failure(response, "internal error: the handler returned nothing; "
                                               "the node keeps serving")
                    self._post(self._send_response, srv, response, header)
            try:
                self._pool.submit(job)
            except RuntimeError:  # the pool is shut down: the node is stopping
                response = srv_type.Response()
                _set_failure(response, "the node is shutting down")
                self._send_response(srv, response, header)

        return defer_service(srv, defer)

    def _send_response(self, srv, response, header) -> None:
        try:
            srv.send_response(response, header)
            self._answered += 1
        except Exception as exc:  # noqa: BLE001  (the client may be gone)
            self.get_logger().warning(f"could not send a {srv.srv_name} response: {exc}")

    # ================================================================== request plumbing
    def _request_context(self, should_stop=None) -> services.Context:
        return services.Context(robot=self._source.robot, settings=self._settings, xp=self._xp,
                                seed_base=self._seed_base,
                                should_stop=should_stop or (lambda: self._stopping))

    def _fail(self, kind: str, exc: BaseException) -> tuple[int, str]:
        """Code and message for an exception from a handler; logs it."""
        code = code_of_exception(exc)
        if isinstance(exc, RequestError):
            message = exc.message
        elif isinstance(exc, IKError):
            message = str(exc)
        else:
            message = (f"internal error ({type(exc).__name__}: {exc}); the node keeps serving. "
                       "Please report this together with the request.")
            self.get_logger().error(f"{kind}: {message}\n{traceback.format_exc()}")
        self.get_logger().warning(f"{kind} rejected: {codes.name_of(code)}: {message}")
        return code, message

    def _serve(self, kind: str, handler, req, resp, response_type):
        t0 = time.perf_counter()
        try:
            out = handler(self._request_context(), req, resp)
        except Exception as exc:  # noqa: BLE001  (no exception may escape a callback)
            code, message = self._fail(kind, exc)
            resp = response_type()
            resp.error_code.val = code
            resp.message = message
            self._stats.record(kind, code, message=message)
            return resp, None
        code = int(resp.error_code.val)
        problems = getattr(out, "problems", None) if out is not None else None
        solved = getattr(out, "solved", None) if out is not None else None
        if isinstance(out, int):
            problems, solved = out, out
        self._stats.record(kind, code, problems or 0, solved or 0, message=resp.message)
        if code != codes.SUCCESS:
            self.get_logger().info(f"{kind}: {codes.name_of(code)}: {resp.message}")
        logger = self.get_logger()
        if logger.is_enabled_for(LoggingSeverity.DEBUG):  # (formatting costs a one-goal call)
            logger.debug(f"{kind} answered in {1e3 * (time.perf_counter() - t0):.2f} ms")
        return resp, out

    def _publish_markers(self, outcome) -> None:
        s = self._settings
        if outcome is None or not s.markers_enabled or s.markers_max_goals <= 0:
            return
        if self._markers_pub.get_subscription_count() == 0:
            return
        try:
            msg = ik_markers(outcome, s.markers_max_goals, stamp=self.get_clock().now().to_msg())
        except Exception as exc:  # noqa: BLE001
            self.get_logger().warning(f"could not build markers: {exc}")
            return
        self._post(self._publish, self._markers_pub, msg)

    def _publish(self, pub, msg) -> None:
        try:
            pub.publish(msg)
        except Exception as exc:  # noqa: BLE001  (e.g. while shutting down)
            self.get_logger().warning(f"could not publish on {pub.topic_name}: {exc}")

    # ================================================================== services
    def _srv_compute_ik(self, req, resp):
        resp, out = self._serve("compute_ik", services.compute_ik, req, resp,
                                ComputeIK.Response)
        self._publish_markers(out)
        return resp

    def _srv_compute_fk(self, req, resp):
        return self._serve("compute_fk", services.compute_fk, req, resp, ComputeFK.Response)[0]

    def _srv_compute_jacobian(self, req, resp):
        return self._serve("compute_jacobian", services.compute_jacobian, req, resp,
                           ComputeJacobian.Response)[0]

    def _srv_moveit_ik(self, req, resp):
        kind = "solve_ik (MoveIt)"
        try:
            out, unsupported = moveit_compat.serve_ik(self._request_context(), req, resp,
                                                      services.compute_ik)
        except Exception as exc:  # noqa: BLE001
            code, message = self._fail(kind, exc)
            moveit_compat.set_error(resp, code, message)
            self._stats.record(kind, code, message=message)
            return resp
        if unsupported and not self._moveit_warned:
            self._moveit_warned = True
            self.get_logger().warning(moveit_compat.IGNORED_WARNING)
        ec = resp.error_code
        message = getattr(ec, "message", "") or getattr(ec, "error_message", "")
        self._stats.record(kind, out.code, out.problems, out.solved, message=message)
        self._publish_markers(out)
        return resp

    def _srv_moveit_fk(self, req, resp):
        kind = "solve_fk (MoveIt)"
        try:
            n = moveit_compat.serve_fk(self._request_context(), req, resp, services.compute_fk)
        except Exception as exc:  # noqa: BLE001
            code, message = self._fail(kind, exc)
            moveit_compat.set_error(resp, code, message)
            self._stats.record(kind, code, message=message)
            return resp
        self._stats.record(kind, codes.SUCCESS, n, n)
        return resp

    # ================================================================== pose-goal topic
    def _on_goal(self, msg: PoseStamped) -> None:
        try:
            self._goal_pool.submit(self._solve_goal, msg)  # one worker: solutions stay in order
        except RuntimeError:
            pass  # shutting down

    def _solve_goal(self, msg: PoseStamped) -> None:
        req = ComputeIK.Request()
        req.goals = [msg]
        req.compact_response = True
        resp, out = self._serve("goal topic", services.compute_ik, req, ComputeIK.Response(),
                                ComputeIK.Response)
        if resp.error_code.val != codes.SUCCESS:
            self.get_logger().warning(
                f"~/goal in frame {msg.header.frame_id!r} not solved "
                f"({codes.name_of(resp.error_code.val)}): {resp.message}; nothing published")
            self._publish_markers(out)
            return
        js = JointState()
        js.header.stamp = self.get_clock().now().to_msg()
        js.header.frame_id = msg.header.frame_id
        js.name = list(resp.joint_names)
        js.position = f64_array(resp.compact_solutions)
        self._post(self._publish, self._solution_pub, js)
        self._publish_markers(out)

    # ================================================================== action
    def _run_trajectory(self, goal_handle):
        """Solve a goal (in a worker); returns ``finish(goal_handle) -> result`` for the
        executor thread, which sets the terminal state."""
        result = TrajectorySeed.Result()
        last = [0.0]

        def should_stop() -> bool:
            return self._stopping or goal_handle.is_cancel_requested or not goal_handle.is_active

        def progress(done: int, total: int, failed: int) -> None:
            now = time.monotonic()
            if done < total and now - last[0] < FEEDBACK_PERIOD:
                return
            last[0] = now
            fb = TrajectorySeed.Feedback()
            fb.nodes_done, fb.nodes_total, fb.nodes_failed = int(done), int(total), int(failed)
            goal_handle.publish_feedback(fb)

        stats = None
        try:
            stats = services.trajectory_seed_goal(self._request_context(should_stop),
                                                  goal_handle.request, result, progress=progress)
            code = int(result.error_code.val)
        except Exception as exc:  # noqa: BLE001
            code, message = self._fail("trajectory_seed", exc)
            result = TrajectorySeed.Result()
            result.error_code.val = code
            result.message = message
        nodes = stats["nodes"] if stats else 0
        self._stats.record("trajectory_seed", code, nodes, stats["solved"] if stats else 0,
                           message=result.message)
        if code not in (codes.SUCCESS, codes.PREEMPTED):
            self.get_logger().info(f"trajectory_seed: {codes.name_of(code)}: {result.message}")
        return goal_finisher(result, code, "every node was solved")

    # ================================================================== diagnostics
    def _publish_diagnostics(self) -> None:
        try:
            arr = DiagnosticArray()
            arr.header.stamp = self.get_clock().now().to_msg()
            arr.status = [diagnostic_status(self.get_name(), self._stats, self._source.robot,
                                            self._backend)]
            self._diag_pub.publish(arr)
        except Exception as exc:  # noqa: BLE001
            self.get_logger().warning(f"could not publish diagnostics: {exc}")

    # ================================================================== lifecycle
    @property
    def robot(self) -> LoadedRobot | None:
        """The model now in use (None before one is loaded)."""
        return self._source.robot

    def wait_until_warm(self, timeout: float | None = None) -> bool:
        """Block until the current model's warm-up solve has finished (True) or ``timeout``."""
        return self._warm.wait(timeout)

    def stop(self) -> None:
        """Ask running solves to stop (they return PREEMPTED / best so far)."""
        self._stopping = True

    def destroy_node(self):
        self.stop()
        # Wait for the warm-up solves (they run Numba's OpenMP threads: a process that exits
        # under a running parallel region can crash in the runtime's teardown). They check
        # _stopping between steps; a g++ build of the compiled rows afterwards is not waited for.
        end = time.monotonic() + WARM_UP_JOIN_S
        for solved in self._warm_solved:
            solved.wait(max(0.0, end - time.monotonic()))
        fast.join_warm_up(max(0.0, end - time.monotonic()))
        with self._bg_lock:
            self._destroyed = True
        self.get_logger().info(f"service requests: {self._taken} taken, {self._answered} "
                               f"answered; joint_states: {self._js_version} messages, "
                               f"{self.joint_state_sources} name sets kept")
        for pool in (getattr(self, "_pool", None), getattr(self, "_goal_pool", None),
                     getattr(self, "_action_pool", None)):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        if getattr(self, "_reach", None) is not None:
            self._reach.destroy()
            self._reach = None
        action = getattr(self, "_action", None)  # absent when __init__ failed part-way
        if action is not None:
            action.destroy()
            self._action = None
        return super().destroy_node()


def _set_failure(response, message: str) -> None:
    if hasattr(response, "error_code"):
        response.error_code.val = codes.FAILURE
    if hasattr(response, "message"):
        response.message = message


def main(args=None) -> int:
    """Run the node on its :class:`NodeExecutor` until Ctrl-C / SIGTERM / ros shutdown."""
    # a crash in native code (a kernel, the middleware) prints every thread's stack to stderr
    faulthandler.enable()
    rclpy.init(args=args)
    try:
        node = KinematicsNode()
    except Exception as exc:  # noqa: BLE001
        hint = ""
        if "expecting type 'DOUBLE'" in str(exc):
            hint = " (write double parameters with a decimal point, e.g. 5.0)"
        print(f"[ros2_ik_node] cannot start: {exc}{hint}", file=sys.stderr)
        rclpy.try_shutdown()
        return 1
    executor = make_executor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        # rclpy's handler shuts the context down and then chains to Python's, whose
        # KeyboardInterrupt may land a moment later: ignore further Ctrl-C while cleaning up.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        node.stop()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
