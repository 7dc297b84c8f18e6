"""Goal handles for rviz: a 6-DOF interactive marker at each tip; drag one and the node solves
the handles' poses, colours them by the answer and publishes the solution.

The ROS 2 interactive markers protocol is spoken here with rclpy (the ``interactive_markers``
package is not on the package index), under ``~/goal_marker``, as its server offers it and
rviz's InteractiveMarkers display reads it:

- ``~/goal_marker/get_interactive_markers`` (visualization_msgs/srv/GetInteractiveMarkers):
  every marker and the sequence number of the state they are in (a client starts from it);
- ``~/goal_marker/update`` (visualization_msgs/InteractiveMarkerUpdate, reliable, depth 100):
  every change as an ``UPDATE`` whose ``seq_num`` is one more than the last (a client that sees
  a gap asks for the whole state again), and a ``KEEP_ALIVE`` every second;
- ``~/goal_marker/feedback`` (visualization_msgs/InteractiveMarkerFeedback): a client's drag.
  A ``POSE_UPDATE`` (and the ``MOUSE_UP`` that ends a drag) is solved as a one-problem
  ComputeIK request with every handle's pose as the goal of its tip (the node's parameters,
  ``collision.enabled``, ``interactive.group`` as the request's group, a time budget of
  ``interactive.timeout``), seeded from the last answer, so a drag moves the arm smoothly.
  Only the latest pose waits while one is solved (a drag sends many). The handles stay where
  the user left them, coloured green (solved), orange (only colliding answers) or red (no
  answer); the answer is published as sensor_msgs/JointState on
  ``interactive.solution_topic`` (default ``~/goal_marker/solution``; a second
  robot_state_publisher with a frame prefix turns it into a ghost robot:
  ``launch/demo.launch.py``). Feedback from a second client within a second of another's is
  ignored for that handle, as ``interactive_markers``' server does.

The handles: one per link of ``interactive.tips`` (comma-separated; '' = the tip of
``interactive.group`` when set, else the model's default tip), placed by FK at the robot's
current state. A new model, or a change of those parameters, replaces them (``erase`` and new
markers).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
from geometry_msgs.msg import PoseStamped, Quaternion
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros2_ik_interfaces.srv import ComputeIK
from sensor_msgs.msg import JointState
from visualization_msgs.msg import (InteractiveMarker, InteractiveMarkerControl,
                                    InteractiveMarkerFeedback, InteractiveMarkerUpdate, Marker)
from visualization_msgs.srv import GetInteractiveMarkers

from ...kinematics import fk_frames, pose_to_pq, pq_to_pose
from .. import codes
from ..conversions import pose_msg_to_pq, pq_to_pose_msg, sec_to_duration
from ..executor import quiet_events
from . import compute_ik

__all__ = ["InteractiveGoals", "register", "NAMESPACE", "COLORS"]

NAMESPACE = "~/goal_marker"
#: the handle's colour (r, g, b, a): before any drag, and by the answer's code
COLORS = {None: (0.7, 0.7, 0.7, 0.9), codes.SUCCESS: (0.1, 0.8, 0.2, 0.9),
          codes.GOAL_IN_COLLISION: (1.0, 0.55, 0.0, 0.9)}
FAILED_COLOR = (0.9, 0.1, 0.1, 0.9)
CLIENT_HOLD_S = 1.0   # feedback of another client within this time is ignored
KEEP_ALIVE_S = 1.0


def _quat(x, y, z, w) -> Quaternion:
    n = math.sqrt(x * x + y * y + z * z + w * w)
    return Quaternion(x=x / n, y=y / n, z=z / n, w=w / n)


def handle_marker(name: str, frame_id: str, T: np.ndarray, code=None,
                  message: str = "") -> InteractiveMarker:
    """The handle: a sphere coloured by ``code`` (None: not solved yet) with move and rotate
    rings on the three axes, at pose ``T`` (4, 4) in ``frame_id``."""
    im = InteractiveMarker()
    im.header.frame_id = frame_id
    im.name = name
    im.scale = 0.2
    im.description = (f"{name}: drag to solve" if code is None
                      else f"{name}: {codes.name_of(code)}" + (f" ({message})" if message
                                                               and code != codes.SUCCESS else ""))
    pq_to_pose_msg(pose_to_pq(np.asarray(T, dtype=np.float64)), im.pose)
    ball = Marker()
    ball.type = Marker.SPHERE
    ball.scale.x = ball.scale.y = ball.scale.z = 0.05
    ball.color.r, ball.color.g, ball.color.b, ball.color.a = COLORS.get(code, FAILED_COLOR)
    c = InteractiveMarkerControl()
    c.name = "status"
    c.always_visible = True
    c.interaction_mode = InteractiveMarkerControl.MOVE_ROTATE_3D
    c.markers = [ball]
    im.controls.append(c)
    for axis, q in (("x", (1, 0, 0, 1)), ("y", (0, 0, 1, 1)), ("z", (0, 1, 0, 1))):
        for mode, kind in (("rotate", InteractiveMarkerControl.ROTATE_AXIS),
                           ("move", InteractiveMarkerControl.MOVE_AXIS)):
            c = InteractiveMarkerControl()
            c.name = f"{mode}_{axis}"
            c.orientation = _quat(*q)
            c.orientation_mode = InteractiveMarkerControl.INHERIT
            c.interaction_mode = kind
            im.controls.append(c)
    return im


class InteractiveGoals:
    """The interactive markers server of the node's goal handle (see the module docstring).
    Protocol state (markers, sequence numbers) lives on the executor thread; solves run in the
    node's ``interactive`` pool."""

    def __init__(self, w, solution_topic: str):
        node = w.node
        self.w = w
        self.server_id = node.get_fully_qualified_name()
        self.seq = 0
        self.markers: dict[str, InteractiveMarker] = {}
        self.robot = None
        self.q: np.ndarray | None = None   # the handle's last answer (nq,)
        self._last_client: dict = {}       # marker -> (client id, time)
        self._lock = threading.Lock()
        self._busy = False
        self._pending = None               # (robot, name, {tip: PoseStamped}, seed): the latest
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        quiet = quiet_events(publisher=True)
        self.update_pub = node.create_publisher(InteractiveMarkerUpdate,
                                                f"{NAMESPACE}/update", qos, event_callbacks=quiet)
        self.solution_pub = node.create_publisher(JointState, solution_topic, 10,
                                                  event_callbacks=quiet)
        node.create_subscription(InteractiveMarkerFeedback, f"{NAMESPACE}/feedback",
                                 self._on_feedback, 100)
        node.create_service(GetInteractiveMarkers, f"{NAMESPACE}/get_interactive_markers",
                            self._get_markers)
        node.create_timer(KEEP_ALIVE_S, self._keep_alive)

    # ------------------------------------------------------------------ protocol (executor)
    def _get_markers(self, request, response):
        response.sequence_number = self.seq
        response.markers = list(self.markers.values())
        return response

    def _update(self, markers=(), erases=()) -> None:
        self.seq += 1
        msg = InteractiveMarkerUpdate(server_id=self.server_id, seq_num=self.seq,
                                      type=InteractiveMarkerUpdate.UPDATE)
        msg.markers = list(markers)
        msg.erases = list(erases)
        self.update_pub.publish(msg)

    def _keep_alive(self) -> None:
        self.update_pub.publish(InteractiveMarkerUpdate(
            server_id=self.server_id, seq_num=self.seq, type=InteractiveMarkerUpdate.KEEP_ALIVE))

    def tips(self, robot) -> list[str]:
        """The handles' links for ``robot`` (see the module docstring); a name the model lacks,
        or a group without a single tip, is logged and left out (the default tip instead when
        nothing is left)."""
        st = self.w.settings()
        tips = [t.strip() for t in st.interactive_tips.split(",") if t.strip()]
        if not tips and st.interactive_group:
            try:
                tip = robot.group(st.interactive_group).tip
            except Exception as exc:  # noqa: BLE001 - (no SRDF, unknown group): said, not fatal
                tip = None
                self.w.log("warning", f"interactive.group: {exc}")
            if tip is None:
                self.w.log("warning", f"interactive.group {st.interactive_group!r} has no single "
                                      "tip: set interactive.tips; the default tip is used")
            tips = [tip] if tip else []
        ok = []
        for t in dict.fromkeys(tips):
            try:
                robot.check_link(t, "interactive.tips link")
                ok.append(t)
            except Exception as exc:  # noqa: BLE001 - RequestError with the valid links
                self.w.log("warning", f"{exc}")
        return ok or [robot.default_tip]

    def reset(self, robot, force: bool = False) -> None:
        """Handles for ``robot`` (None: none); the old ones are erased. The same model with
        new planning groups keeps its handles (unless ``force``: their parameters changed)."""
        old = self.robot
        if not force and robot is not None and old is not None and self.markers and (
                old.digest, old.base, old.default_tip) == (robot.digest, robot.base,
                                                           robot.default_tip):
            self.robot = robot
            return
        erases = list(self.markers)
        self.markers = {}
        self.robot = robot
        self.q = None
        with self._lock:
            self._pending = None
        if robot is None:
            if erases:
                self._update(erases=erases)
            return
        q = np.asarray(self.w.context().current_q(robot), dtype=np.float64)
        tips = self.tips(robot)
        T = np.asarray(fk_frames(robot.model, q[None], tips))[0]
        self.q = q
        for k, tip in enumerate(tips):
            self.markers[tip] = handle_marker(tip, robot.base, T[k])
        self._update(markers=list(self.markers.values()),
                     erases=[e for e in erases if e not in self.markers])

    def _on_feedback(self, fb: InteractiveMarkerFeedback) -> None:
        name = fb.marker_name
        if name not in self.markers or self.robot is None:
            return
        now = time.monotonic()
        last = self._last_client.get(name)
        if last is not None and last[0] != fb.client_id and now - last[1] < CLIENT_HOLD_S:
            return  # another client holds this handle
        self._last_client[name] = (fb.client_id, now)
        if fb.event_type not in (InteractiveMarkerFeedback.POSE_UPDATE,
                                 InteractiveMarkerFeedback.MOUSE_UP):
            return
        moved = PoseStamped(pose=fb.pose)
        moved.header.frame_id = fb.header.frame_id
        goals = {}
        for tip, m in self.markers.items():
            if tip == name:
                goals[tip] = moved
            else:
                g = PoseStamped(pose=m.pose)
                g.header.frame_id = m.header.frame_id
                goals[tip] = g
        with self._lock:
            self._pending = (self.robot, name, goals, self.q)
            if self._busy:
                return  # solved after the one in flight
            self._busy = True
        self._submit()

    def _submit(self) -> None:
        with self._lock:  # the latest answer seeds the waiting pose (a drag stays smooth)
            if self._pending is not None:
                self._pending = (*self._pending[:3], self.q)
        try:
            self.w.pool("interactive").submit(self._solve_pending, self.w.context())
        except RuntimeError:  # shutting down
            pass

    # ------------------------------------------------------------------ solves (pool)
    def _solve_pending(self, ctx) -> None:
        with self._lock:
            job, self._pending = self._pending, None
        if job is not None:
            robot, name, goals, seed = job
            resp = self.solve(ctx, goals, seed)
            self.w.post(self._answered, robot, name, goals, resp)
        with self._lock:
            if self._pending is None:
                self._busy = False
                return
        self.w.post(self._submit)  # a newer pose came in meanwhile: with a fresh context

    def solve(self, ctx, goals: dict, seed) -> ComputeIK.Response:
        """The handles' poses ({tip: PoseStamped}) as a one-problem ComputeIK request seeded
        from ``seed``."""
        s = ctx.settings
        req = ComputeIK.Request(goals=list(goals.values()), tip_links=list(goals),
                                group_name=s.interactive_group)
        if seed is not None and ctx.robot is not None:
            req.seed = JointState(name=list(ctx.robot.model.q_names),
                                  position=[float(v) for v in seed])
        sec_to_duration(s.interactive_timeout, req.timeout)
        resp, _ = self.w.serve("interactive goal", compute_ik.handle, ctx, req,
                               ComputeIK.Response(), ComputeIK.Response)
        return resp

    # ------------------------------------------------------------------ answers (executor)
    def _answered(self, robot, name: str, goals: dict, resp) -> None:
        if robot is not self.robot or set(goals) != set(self.markers):
            return  # the model or the handles changed meanwhile
        code = int(resp.status[0]) if len(resp.status) else int(resp.error_code.val)
        for tip, goal in goals.items():
            T = pq_to_pose(np.array(pose_msg_to_pq(goal.pose), dtype=np.float64))
            frame = goal.header.frame_id or robot.base
            self.markers[tip] = handle_marker(tip, frame, T, code, resp.message)
        self._update(markers=list(self.markers.values()))
        if code == codes.SUCCESS and resp.solutions:
            sol = resp.solutions[0]
            # (the solution's names: the model's coordinates, then the mimic joints)
            self.q = np.array(sol.position[:robot.nq], dtype=np.float64)
            sol.header.stamp = self.w.node.get_clock().now().to_msg()
            self.solution_pub.publish(sol)


def register(w):
    """The goal handles, when ``interactive.enabled``; None otherwise."""
    s = w.settings()
    return InteractiveGoals(w, s.interactive_solution_topic) if s.interactive_enabled else None
