"""Who answers the viewer's goals: the core in this process (:class:`CoreSolver`), or a running
ros2_ik node over its services and action (:class:`NodeSolver`). Both give an :class:`Answer`
per solve and a (N, nq) trajectory, every answer verified by FK by whoever solved it; the viewer
checks them again (:func:`check_answer`) before it calls one solved."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from .. import api
from ..ik import IKConfig, Status
from ..kinematics import fk_frames, pose_error, pose_to_pq

__all__ = ["Answer", "CoreSolver", "NodeSolver", "check_answer", "STATUS_NAMES"]

STATUS_NAMES = {int(s): s.name for s in Status}


@dataclass
class Answer:
    """One solve of the viewer's goals ({tip: (4, 4)})."""

    q: np.ndarray                 # (nq,) the answer (the best found when not solved)
    seed: np.ndarray              # (nq,) where the solve started
    status: str                   # SUCCESS, NO_SOLUTION, IN_COLLISION, TIMED_OUT, ...
    success: bool
    position_error: float         # [m], worst tip
    orientation_error: float      # [rad], worst tip
    clearance: float | None = None  # [m] with collision avoidance
    message: str = ""
    solve_time: float = 0.0       # [s]
    goals: dict = field(default_factory=dict)

    def summary(self) -> str:
        text = (f"**{self.status}** · position error {self.position_error:.2e} m · orientation "
                f"error {self.orientation_error:.2e} rad")
        if self.clearance is not None and np.isfinite(self.clearance):
            text += f" · clearance {1e3 * self.clearance:.1f} mm"
        text += f" · {1e3 * self.solve_time:.1f} ms"
        if self.message and not self.success:
            text += f"\n\n{self.message}"
        return text


def check_answer(model, q, goals: dict) -> tuple[float, float]:
    """The worst (position, orientation) error of ``q`` against ``goals``, by FK here."""
    tips = list(goals)
    T = np.asarray(fk_frames(model, np.asarray(q, dtype=np.float64)[None], tips))[0]
    G = np.stack([goals[t] for t in tips])
    pe, oe = pose_error(G, T)
    return float(np.max(pe)), float(np.max(oe))


class CoreSolver:
    """The core in this process: :func:`ros2_ik.api.solve_pose` and
    :func:`ros2_ik.api.trajectory_seed`, with collision avoidance against ``world`` when the
    config asks for it."""

    label = "core (this process)"

    def __init__(self, model, *, world=None, collision=None, mesh_path=()):
        self.model = model
        self.world = world
        self.collision = collision
        self.mesh_path = tuple(mesh_path)

    def collision_model(self):
        """The robot's collision model: the one given, else the default (built once, its
        meshes looked for as the viewer's visuals are: ``mesh_path``)."""
        if self.collision is None:
            import warnings  # noqa: PLC0415

            from ..ik.collision import default_collision_model  # noqa: PLC0415

            with warnings.catch_warnings():  # (shown on the page: collision_warnings)
                warnings.simplefilter("ignore")
                self.collision = default_collision_model(
                    self.model, within=IKConfig().collision_margin,
                    **({"search_path": self.mesh_path} if self.mesh_path else {}))
        return self.collision

    def collision_warnings(self) -> list:
        """What the collision model could not use or left out, in words (for the page)."""
        from ..model.collision import missing_message  # noqa: PLC0415

        cm = self.collision_model()
        out = list(cm.warnings)
        if cm.missing:
            out.insert(0, missing_message(cm.missing).replace(
                "search_path= in the library, the node's collision.mesh_path parameter, ", ""))
        return out

    def _collision(self, config: IKConfig):
        if not config.avoid_collisions:
            return None
        cm = self.collision_model()
        if cm.missing and not cm.accept_missing:  # the answer could not keep its promise
            from ..model.collision import CollisionGeometryError, missing_message  # noqa: PLC0415

            raise CollisionGeometryError(missing_message(cm.missing))
        return cm

    def solve(self, goals: dict, seed: np.ndarray, config: IKConfig) -> Answer:
        tips = list(goals)
        targets = np.stack([goals[t] for t in tips])[None]
        cm = self._collision(config)
        res = api.solve_pose(self.model, targets, tips=tips, seeds=seed, config=config,
                             world=self.world if cm is not None else None, collision=cm)
        clear = None if res.clearance is None else float(res.clearance[0])
        return Answer(q=np.asarray(res.q[0], dtype=np.float64), seed=np.array(seed),
                      status=STATUS_NAMES.get(int(res.status[0]), str(int(res.status[0]))),
                      success=bool(res.success[0]),
                      position_error=float(res.position_error[0]),
                      orientation_error=float(res.orientation_error[0]), clearance=clear,
                      message=res.messages[0] if res.messages else "",
                      solve_time=float(res.solve_time), goals=dict(goals))

    def trajectory(self, tip: str, start: np.ndarray, goal: np.ndarray, seed: np.ndarray,
                   nodes: int, config: IKConfig):
        """(q (N, nq), success (N,)) along the straight line from pose ``start`` to ``goal``."""
        cm = self._collision(config)
        res = api.trajectory_seed(self.model, np.stack([start, goal]), [0, nodes - 1],
                                  tip=tip, mode="sequential", seed=seed, config=config,
                                  world=self.world if cm is not None else None, collision=cm)
        return np.asarray(res.q), np.asarray(res.success)

    def close(self) -> None:
        pass


class NodeSolver:
    """A running ros2_ik node (``/<name>``): goals to ``compute_ik``, trajectories to the
    ``trajectory_seed`` action, the model from ``description_topic`` (the robot_description
    the node serves).
    Needs rclpy and ros2_ik_interfaces; every call has a timeout."""

    def __init__(self, node_name: str = "ros2_ik", *, timeout: float = 10.0,
                 domain_id: int | None = None, description_topic: str = "/robot_description"):
        import rclpy  # noqa: PLC0415
        from rclpy.action import ActionClient  # noqa: PLC0415
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: PLC0415
        from ros2_ik_interfaces.action import TrajectorySeed  # noqa: PLC0415
        from ros2_ik_interfaces.srv import ComputeIK  # noqa: PLC0415
        from std_msgs.msg import String  # noqa: PLC0415

        from ..ros.wiring import CLIENT_QOS  # noqa: PLC0415

        self.ns = "/" + node_name.strip("/")
        self.label = f"node {self.ns}"
        self.timeout = timeout
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("ros2_ik_viewer", context=self.context)
        self.ik = self.node.create_client(ComputeIK, f"{self.ns}/compute_ik",
                                          qos_profile=CLIENT_QOS)
        self.traj = ActionClient(self.node, TrajectorySeed, f"{self.ns}/trajectory_seed")
        self._urdf = None
        self._topic = description_topic
        self._got = threading.Event()

        def on_urdf(msg):
            self._urdf = msg.data
            self._got.set()
        self.node.create_subscription(
            String, description_topic, on_urdf,
            QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                       reliability=ReliabilityPolicy.RELIABLE))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.model = None
        self._collision_model = None
        self.mesh_path: tuple = ()  # where the viewer found the meshes (set by its command)

    def collision_model(self):
        """The default collision model of the node's robot (built once), for display: the
        node checks its own (``collision.spheres_file`` may give another)."""
        if self._collision_model is None:
            import warnings  # noqa: PLC0415

            from ..ik.collision import default_collision_model  # noqa: PLC0415

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._collision_model = default_collision_model(
                    self.model, within=IKConfig().collision_margin,
                    **({"search_path": self.mesh_path} if self.mesh_path else {}))
        return self._collision_model

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001 - the context was shut down
            pass

    def wait_for_model(self, timeout: float = 30.0) -> str:
        """The URDF the node serves (from robot_description); TimeoutError when none comes."""
        if not self._got.wait(timeout):
            raise TimeoutError(f"no URDF on {self._topic} within {timeout:g} s: is the node "
                               f"{self.ns} running with robot_state_publisher (or publish the "
                               f"URDF on {self._topic}, or give --description-topic)?")
        return self._urdf

    def _wait(self, future, what: str):
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(self.timeout):
            raise TimeoutError(f"{self.ns}/{what}: no answer within {self.timeout:g} s")
        return future.result()

    def solve(self, goals: dict, seed: np.ndarray, config: IKConfig) -> Answer:
        from ros2_ik_interfaces.srv import ComputeIK  # noqa: PLC0415
        from sensor_msgs.msg import JointState  # noqa: PLC0415

        from ..ros import codes  # noqa: PLC0415
        from ..ros.conversions import sec_to_duration  # noqa: PLC0415

        if not self.ik.wait_for_service(timeout_sec=self.timeout):
            raise TimeoutError(f"{self.ns}/compute_ik is not available")
        req = ComputeIK.Request(tip_links=list(goals),
                                goals=_pose_stamped(np.stack(list(goals.values()))))
        req.seed = JointState(name=list(self.model.q_names), position=[float(v) for v in seed])
        req.position_tolerance = config.position_tolerance
        req.orientation_tolerance = config.orientation_tolerance
        sec_to_duration(config.timeout or 0.0, req.timeout)
        req.collisions = _collisions(config)
        resp = self._wait(self.ik.call_async(req), "compute_ik")
        ok = int(resp.error_code.val) == codes.SUCCESS
        if resp.solutions:
            q = np.array(resp.solutions[0].position[:self.model.nq], dtype=np.float64)
        else:
            q = np.array(seed, dtype=np.float64)
        code = int(resp.status[0]) if len(resp.status) else int(resp.error_code.val)
        pe = float(resp.position_errors[0]) if len(resp.position_errors) else float("nan")
        oe = float(resp.orientation_errors[0]) if len(resp.orientation_errors) else float("nan")
        clear = float(resp.clearances[0]) if len(resp.clearances) else None
        # the per-problem codes are the core's Status values: named as CoreSolver names them
        return Answer(q=q, seed=np.array(seed),
                      status=STATUS_NAMES.get(code, codes.name_of(code)), success=ok,
                      position_error=pe, orientation_error=oe, clearance=clear,
                      message=resp.message, goals=dict(goals))

    def trajectory(self, tip, start, goal, seed, nodes, config):
        from ros2_ik_interfaces.action import TrajectorySeed  # noqa: PLC0415
        from sensor_msgs.msg import JointState  # noqa: PLC0415

        from ..ros import codes  # noqa: PLC0415

        if not self.traj.wait_for_server(timeout_sec=self.timeout):
            raise TimeoutError(f"{self.ns}/trajectory_seed is not available")
        g = TrajectorySeed.Goal(tip_link=tip, mode="sequential", node_indices=[0, nodes - 1],
                                keyframes=_pose_stamped(np.stack([start, goal])))
        g.seed = JointState(name=list(self.model.q_names), position=[float(v) for v in seed])
        g.collisions = _collisions(config)
        handle = self._wait(self.traj.send_goal_async(g), "trajectory_seed (goal)")
        if not handle.accepted:
            raise RuntimeError(f"{self.ns}/trajectory_seed refused the goal")
        result = self._wait(handle.get_result_async(), "trajectory_seed (result)").result
        names = list(result.trajectory.joint_names)
        idx = [names.index(n) for n in self.model.q_names]
        q = np.array([[p.positions[i] for i in idx] for p in result.trajectory.points])
        return q, np.asarray(result.node_status) == codes.SUCCESS

    def close(self) -> None:
        import rclpy  # noqa: PLC0415

        try:
            self.traj.destroy()
            self.executor.shutdown(timeout_sec=2.0)
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
            self._thread.join(timeout=5)


def _collisions(config: IKConfig) -> int:
    """The request's ``collisions`` field (ComputeIK's values; TrajectorySeed takes the same)
    for ``config``: on or off, never the node's default."""
    from ros2_ik_interfaces.srv import ComputeIK  # noqa: PLC0415

    return (ComputeIK.Request.COLLISIONS_ON if config.avoid_collisions
            else ComputeIK.Request.COLLISIONS_OFF)


def _pose_stamped(poses) -> list:
    """PoseStamped messages (base frame) of poses (..., 4, 4)."""
    from ..ros.conversions import pq_to_pose_stamped  # noqa: PLC0415

    return pq_to_pose_stamped(pose_to_pq(np.asarray(poses, dtype=np.float64)), "")
