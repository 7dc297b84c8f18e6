"""rviz markers (visualization_msgs/MarkerArray) of IK goals and the poses reached.

Per shown problem and tip: an arrow along the goal's x axis (green when the problem was solved,
red otherwise), a small sphere at the position reached by the returned solution, and a line
from goal to reached position when they differ. All in the robot's base frame. A first
DELETEALL marker clears the previous request's markers.
"""

from __future__ import annotations

import numpy as np

from ..api import fk_frames
from ..kinematics import quat_to_matrix
from . import codes

__all__ = ["ik_markers", "GREEN", "RED"]

GREEN = (0.1, 0.8, 0.2, 0.9)
RED = (0.9, 0.1, 0.1, 0.9)
GREY = (0.6, 0.6, 0.6, 0.8)
ARROW_LENGTH = 0.08  # [m]


def ik_markers(outcome, max_goals: int, stamp=None, namespace: str = "ros2_ik"):
    """MarkerArray for the first ``max_goals`` problems of an :class:`IKOutcome`."""
    from geometry_msgs.msg import Point  # noqa: PLC0415
    from std_msgs.msg import ColorRGBA  # noqa: PLC0415
    from visualization_msgs.msg import Marker, MarkerArray  # noqa: PLC0415

    arr = MarkerArray()
    clear = Marker()
    clear.action = Marker.DELETEALL
    clear.ns = namespace
    arr.markers.append(clear)
    n = min(int(max_goals), outcome.problems)
    if n <= 0:
        return arr
    robot = outcome.robot
    frame = robot.base
    reached = np.asarray(fk_frames(robot.model, outcome.q[:n], outcome.tips))[:, :, :3, 3]
    goals = np.asarray(outcome.targets[:n])  # (n, K, 7)
    R = np.asarray(quat_to_matrix(goals[..., 3:]))  # (n, K, 3, 3)
    mid = 0

    def new(kind, color):
        nonlocal mid
        m = Marker()
        m.header.frame_id = frame
        if stamp is not None:
            m.header.stamp = stamp
        m.ns = namespace
        m.id = mid
        mid += 1
        m.type = kind
        m.action = Marker.ADD
        m.pose.orientation.w = 1.0
        m.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=color[3])
        return m

    def pt(v):
        return Point(x=float(v[0]), y=float(v[1]), z=float(v[2]))

    for p in range(n):
        st = int(outcome.status[p])
        color = GREEN if st == codes.SUCCESS else (GREY if st == codes.INVALID_GOAL else RED)
        for k in range(goals.shape[1]):
            g = goals[p, k, :3]
            a = new(Marker.ARROW, color)
            a.scale.x, a.scale.y, a.scale.z = 0.008, 0.016, 0.02
            a.points = [pt(g), pt(g + ARROW_LENGTH * R[p, k, :, 0])]
            arr.markers.append(a)
            if st == codes.INVALID_GOAL:
                continue
            s = new(Marker.SPHERE, color)
            s.pose.position = pt(reached[p, k])
            s.scale.x = s.scale.y = s.scale.z = 0.015
            arr.markers.append(s)
            if np.linalg.norm(reached[p, k] - g) > 1e-3:
                line = new(Marker.LINE_STRIP, RED)
                line.scale.x = 0.003
                line.points = [pt(g), pt(reached[p, k])]
                arr.markers.append(line)
    return arr
