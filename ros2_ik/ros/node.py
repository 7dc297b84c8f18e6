"""``KinematicsNode``: the ROS 2 node of ros2_ik, and ``main()`` (console script ``ros2_ik_node``).

This module wires; the work is elsewhere. Interfaces (node name ``ros2_ik`` by default; ``~``
is the node's namespace + name, so ``~/compute_ik`` is ``/ros2_ik/compute_ik``):

- subscribes ``robot_description`` (std_msgs/String, reliable + transient local, depth 1) and
  ``robot_description_semantic`` (the SRDF: planning groups; same QoS), both through
  :mod:`.model_source`; ``joint_states`` (:mod:`.joint_states`); ``~/goal``
  (:mod:`.handlers.goal`)
- publishes ``~/solution``, ``~/markers`` (visualization_msgs/MarkerArray), ``/diagnostics``
  (diagnostic_msgs/DiagnosticArray), ``~/reach_map``
- services ``~/compute_ik``, ``~/compute_fk``, ``~/compute_jacobian``, ``~/check_states``
  and, when moveit_msgs is
  importable, ``~/solve_ik`` / ``~/solve_fk`` (:mod:`.handlers`, one module each)
- actions ``~/trajectory_seed``, ``~/reach_study`` and ``~/base_placement``

Threading (:mod:`.wiring`, :mod:`.executor`): one executor thread does every rcl call; solves
run in worker pools; models are prepared in the background. (Services on a second executor
thread were measured: the round-trip floor did not change, and with joint_states at 1 kHz the
two threads' contention for the GIL raised the 1-goal p99 from 8.6 to 59 ms, so one thread it
is.)
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading

import numpy as np
import rclpy
import rclpy.signals
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rcl_interfaces.msg import SetParametersResult

from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from ..api import compiled_status
from ..backend import BackendUnavailableError, get_backend
from .compat import distribution
from .diagnostics import Stats, diagnostic_status
from .executor import NodeExecutor, quiet_events
from .handlers import (base_placement, check_states, compute_fk, compute_ik, compute_jacobian,
                       goal, interactive, moveit, reach_study, trajectory_seed, world)
from .joint_states import DRAIN_S, JointStates
from .markers import collision_markers, ik_markers
from .model_source import ModelSource, describe
from .params import PARAMS, Settings, descriptor, validate
from .robot import LoadedRobot
from .wiring import CLIENT_QOS, SERVICE_QOS, Wiring

__all__ = ["KinematicsNode", "main", "make_executor", "StopSignals", "ROBOT_DESCRIPTION_QOS",
           "CLIENT_QOS", "SERVICE_QOS"]

#: QoS of robot_description, as robot_state_publisher publishes it (latched).
ROBOT_DESCRIPTION_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                   reliability=ReliabilityPolicy.RELIABLE)
CLOSE_WAIT_S = 10.0  # how long shutdown waits for a model being prepared (its build ended)


def preload() -> None:
    """Import, in this thread, what the node's worker threads import lazily (the sphere fit,
    the reach studies, the planning scene's meshes): two threads importing SciPy's subpackages
    at once can fail with ``_DeadlockError`` (seen: a reach study and a sphere fit, 'deadlock
    detected by _ModuleLock('scipy.spatial')'), so none is first imported by a worker."""
    import scipy.optimize  # noqa: PLC0415
    import scipy.sparse  # noqa: PLC0415
    import scipy.spatial  # noqa: PLC0415
    import scipy.spatial.transform  # noqa: F401, PLC0415
    import trimesh  # noqa: F401, PLC0415


def make_executor(context=None) -> NodeExecutor:
    """The executor the node is meant to run on (see :mod:`ros2_ik.ros.executor`)."""
    return NodeExecutor(context=context)


class KinematicsNode(Node):
    """Batched IK / FK / Jacobian services and trajectory and reach-study actions for one
    robot model."""

    def __init__(self, node_name: str = "ros2_ik", **kwargs):
        preload()  # (before any worker thread exists)
        super().__init__(node_name, **kwargs)
        self._stats = Stats()
        self._stopping = False
        self._ready = threading.Event()   # set when the first model serves
        self._ready_text = ""
        self._backend_text = ""
        self._handle = None  # the rviz goal handle (handlers.interactive), when enabled

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

        # ---- plumbing, joint states, the model
        self._cb_topics = MutuallyExclusiveCallbackGroup()
        self._joints = JointStates(self)
        self.wiring = w = Wiring(self, self._stats, settings=lambda: self._settings,
                                 robot=lambda: self._source.robot, xp=lambda: self._xp,
                                 seeds=self._joints.snapshot, stopping=lambda: self._stopping)
        self._markers_pub = self.create_publisher(MarkerArray, "~/markers", 1,
                                                  event_callbacks=quiet_events(publisher=True))
        # the world and the last collision-aware answer's spheres, latched for a late rviz
        self._collision_pub = self.create_publisher(
            MarkerArray, "~/collision_markers",
            QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                       reliability=ReliabilityPolicy.RELIABLE),
            event_callbacks=quiet_events(publisher=True))
        w.markers = self._publish_markers
        # the tick: joint states taken, and what other threads handed over before the node
        # was spinning run (afterwards each hand-off wakes the executor by itself)
        self.create_timer(DRAIN_S, self._tick, callback_group=self._cb_topics)
        self._source = ModelSource(self.get_logger(), self._stats, w.post,
                                   lambda: self._settings, lambda: self._xp, self._after_swap,
                                   self._after_compiled)
        w.model_pending = lambda: self._source.pending
        w.wait_model = self._source.wait_model
        self.get_logger().info(f"ROS 2 {distribution()}; {compiled_status()}")
        self._source.load_from_settings(self._settings, startup=True)
        self.create_subscription(String, "robot_description",
                                 lambda m: self._source.on_robot_description(m.data,
                                                                             self._settings),
                                 ROBOT_DESCRIPTION_QOS, callback_group=self._cb_topics)
        self.create_subscription(String, "robot_description_semantic",
                                 lambda m: self._source.on_robot_description_semantic(m.data),
                                 ROBOT_DESCRIPTION_QOS, callback_group=self._cb_topics)

        # ---- the world, then requests: one module each
        w.world_state = world.register(w)
        w.world_state.on_change = lambda scene: self._publish_collision(scene.world)
        w.world_state.load_file(self._settings.collision_world_file)
        compute_ik.register(w)
        compute_fk.register(w)
        compute_jacobian.register(w)
        check_states.register(w)
        goal.register(w, self._cb_topics)
        self._actions = [trajectory_seed.register(w), reach_study.register(w),
                         base_placement.register(w)]
        moveit.register(w)
        self._handle = interactive.register(w)
        if self._handle is not None and self._source.robot is not None:
            self._handle.reset(self._source.robot)

        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10,
                                               event_callbacks=quiet_events(publisher=True))
        self._diag_timer = self.create_timer(self._settings.diagnostics_period,
                                             self._publish_diagnostics,
                                             callback_group=self._cb_topics)
        self._ready_text = (
            f"services {self.resolve_service_name('~/compute_ik')} (and compute_fk, "
            f"compute_jacobian), action {self.resolve_service_name('~/trajectory_seed')}, "
            f"backend {self._backend}")
        self.get_logger().info(f"serving: {self._ready_text}; model: {self._model_text()}")

    def _tick(self) -> None:
        self._joints.drain()
        self.wiring.run_posted()

    # ================================================================== model
    def _after_swap(self, robot: LoadedRobot, seconds: float) -> None:
        """A new model serves (executor thread), its compiled kernels not necessarily built
        yet (:meth:`_after_compiled`)."""
        if not robot.compiled_ready:
            self._backend_text = ("reference while the compiled kernels of model "
                                  f"{robot.version} are built")
        self.get_logger().info(f"model {robot.version} ({robot.name!r}, URDF digest "
                               f"{robot.digest}) serves, loaded in {seconds:.2f} s")
        if self._handle is not None:
            self._handle.reset(robot)
        if not self._ready.is_set():
            self._ready.set()
            self.get_logger().info(f"ready: {self._ready_text}; model: {self._model_text()}")

    def _after_compiled(self, robot: LoadedRobot, solver, seconds: float) -> None:
        """The compiled kernels of ``robot`` are built (executor thread): say which backend
        answers it from now on."""
        text = solver.backend + (f" ({solver.reason})" if solver.reason else "")
        if robot is self._source.robot or (self._source.robot is not None and
                                           self._source.robot._compiled is robot._compiled):
            self._backend_text = text
        self.get_logger().info(f"solver for {robot.name!r}: backend {text}; compiled kernels "
                               f"ready in {seconds:.2f} s")

    def _model_text(self) -> str:
        robot = self._source.robot
        return describe(robot) if robot else "none yet (waiting for robot_description)"

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
        if names & {"collision.spheres_file", "collision.mesh_path", "collision.margin"}:
            self._source.refresh_collisions()
        if self._handle is not None and names & {"interactive.tips", "interactive.group"}:
            self._handle.reset(self._source.robot, force=True)
        if "diagnostics.period" in names:
            self._diag_timer.cancel()
            self.destroy_timer(self._diag_timer)
            self._diag_timer = self.create_timer(self._settings.diagnostics_period,
                                                 self._publish_diagnostics,
                                                 callback_group=self._cb_topics)

    # ================================================================== output
    def _publish_collision(self, world, outcome=None) -> None:
        """The world (and a collision-aware answer's spheres, coloured by clearance) on
        ~/collision_markers."""
        s = self._settings
        robot = self._source.robot
        if not s.markers_enabled or robot is None:
            return
        try:
            args = {}
            if outcome is not None and outcome.collision is not None and outcome.problems:
                args = dict(robot=outcome.robot, collision=outcome.collision,
                            q=outcome.q[0], margin=s.collision_margin)
            msg = collision_markers(robot.base, world, stamp=self.get_clock().now().to_msg(),
                                    **args)
        except Exception as exc:  # noqa: BLE001
            self.wiring.log("warning", f"could not build collision markers: {exc}")
            return
        self.wiring.publish(self._collision_pub, msg)

    def _publish_markers(self, outcome) -> None:
        s = self._settings
        if outcome is not None and getattr(outcome, "collision", None) is not None and \
                self._collision_pub.get_subscription_count():
            # (a collision-aware answer's spheres: built only while someone looks; the
            # world's obstacles stay latched from the scene's last change)
            self._publish_collision(outcome.world, outcome)
        if outcome is None or not s.markers_enabled or s.markers_max_goals <= 0:
            return
        if self._markers_pub.get_subscription_count() == 0:
            return
        try:
            msg = ik_markers(outcome, s.markers_max_goals, stamp=self.get_clock().now().to_msg())
        except Exception as exc:  # noqa: BLE001
            self.wiring.log("warning", f"could not build markers: {exc}")
            return
        self.wiring.publish(self._markers_pub, msg)

    def _publish_diagnostics(self) -> None:
        try:
            arr = DiagnosticArray()
            arr.header.stamp = self.get_clock().now().to_msg()
            counts = self.wiring.resender.counts
            arr.status = [diagnostic_status(
                self.get_name(), self._stats, self._source.robot, self._backend,
                self._backend_text, self._source.preparing,
                {"model_pending": str(self._source.pending).lower(),
                 "responses_resent": counts["resent"], "responses_lost": counts["lost"]})]
            self._diag_pub.publish(arr)
        except Exception as exc:  # noqa: BLE001
            self.get_logger().warning(f"could not publish diagnostics: {exc}")

    # ================================================================== lifecycle
    @property
    def robot(self) -> LoadedRobot | None:
        """The model now in use (None before one is loaded)."""
        return self._source.robot

    @property
    def joint_state_sources(self) -> int:
        """How many joint_states messages (one per set of names) are kept."""
        return self._joints.sources

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Block until a model serves (True) or ``timeout``."""
        return self._ready.wait(timeout)

    wait_until_warm = wait_until_ready  # (the name earlier releases used)

    def stop(self) -> None:
        """Ask running solves to stop (they return PREEMPTED / best so far)."""
        self._stopping = True

    def destroy_node(self):
        self.stop()
        # (any part may be missing: __init__ may have failed part-way)
        source = getattr(self, "_source", None)
        if source is not None:
            # a model being prepared: its compiler processes are ended and its thread waited
            # for (it never touches rclpy: what it posts to the executor thread is dropped)
            source.close(CLOSE_WAIT_S)
        w = getattr(self, "wiring", None)
        if w is not None and w.world_state is not None:
            w.world_state.close()
        if w is not None:
            self.get_logger().info(
                f"service requests: {w.taken} taken, {w.answered} answered; joint_states: "
                f"{self._joints.version} messages, {self.joint_state_sources} name sets kept")
            w.close()
        for a in getattr(self, "_actions", ()):
            a.destroy()
        self._actions = []
        return super().destroy_node()


class StopSignals:
    """SIGINT and SIGTERM as a request to stop that the executor thread acts on.

    rclpy's own handlers shut the context down from a thread of their own at the moment the
    signal comes, while the executor thread may be building a wait set ("the given context is
    not valid": a loaded machine's node exited 1) or tearing the node down (one exited with
    SIGSEGV there). Here the signal only sets :attr:`requested`; Python's wakeup fd carries it
    to a small thread that wakes the executor (``wake``: its guard condition, which is what
    rclpy's handler triggers too), so a wait with nothing to do returns at once; the executor
    thread then leaves its loop and does every shutdown step itself, in order, with the
    context still valid (the last log lines still reach /rosout)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.wake = lambda: None
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        for s in self.SIGNALS:
            signal.signal(s, self._on_signal)
        self._thread = threading.Thread(target=self._run, daemon=True, name="ros2_ik-signals")
        self._thread.start()

    def _on_signal(self, signum, frame) -> None:  # (Python runs it on the main thread)
        self.requested = True

    def is_requested(self) -> bool:
        return self.requested

    def _run(self) -> None:
        wanted = {int(s) for s in self.SIGNALS}
        while True:
            try:
                data = os.read(self._r, 64)
            except OSError:
                return
            if not data:  # closed: the node is stopping
                return
            if wanted & set(data):
                # (set here too: the main thread runs the Python handler only between
                # bytecodes, and must not go back to wait before it has)
                self.requested = True
                try:
                    self.wake()
                except Exception:  # noqa: BLE001 - the executor is shut down already
                    pass

    def close(self) -> None:
        """Further signals ignored (the shutdown runs to its end); the thread ended."""
        for s in self.SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        signal.set_wakeup_fd(self._old_fd)
        os.close(self._w)
        self._thread.join(5.0)
        os.close(self._r)


def main(args=None) -> int:
    """Run the node on its :class:`NodeExecutor` until Ctrl-C / SIGTERM / ros shutdown."""
    # a crash in native code (a kernel, the middleware) prints every thread's stack to stderr
    faulthandler.enable()
    rclpy.init(args=args, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    signals = StopSignals()
    try:
        node = KinematicsNode()
    except Exception as exc:  # noqa: BLE001
        hint = ""
        if "expecting type 'DOUBLE'" in str(exc):
            hint = " (write double parameters with a decimal point, e.g. 5.0)"
        print(f"[ros2_ik_node] cannot start: {exc}{hint}", file=sys.stderr)
        signals.close()
        rclpy.try_shutdown()
        return 1
    executor = make_executor()
    executor.add_node(node)
    signals.wake = executor.wake
    try:
        executor.spin_until(signals.is_requested)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        # another part of the process shut the context down at any moment: a wait set built
        # just then fails ("the given context is not valid", RCLError), a clean stop too
        if rclpy.ok():
            raise
    finally:
        signals.close()
        node.stop()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()
    _exit_past_busy_threads(0)
    return 0


def _exit_past_busy_threads(code: int) -> None:
    """Exit now, past the interpreter's finalization, when a background preparation is still
    running (a sphere fit in NumPy cannot be interrupted, and a daemon thread inside native
    code while the interpreter finalizes can crash it: a node stopped during a real robot's
    first fit ended with SIGSEGV). Logs and streams are flushed first; nothing else is left."""
    busy = [t for t in threading.enumerate() if t.daemon and t.is_alive()
            and t.name in ("ros2_ik-model", "ros2_ik-collision")]
    if not busy:
        return
    print(f"[ros2_ik_node] exiting with {len(busy)} background preparation(s) still running "
          f"({', '.join(sorted({t.name for t in busy}))})", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
