"""rviz markers (visualization_msgs/MarkerArray) of IK goals and the poses reached, and of
the world and the robot's collision spheres (:func:`collision_markers`).

Per shown problem and tip: an arrow along the goal's x axis (green when the problem was solved,
red otherwise), a small sphere at the position reached by the returned solution, and a line
from goal to reached position when they differ. All in the robot's base frame. A first
DELETEALL marker clears the previous request's markers.
"""

from __future__ import annotations

import numpy as np

from ..world.voxels import DRAWN_ONE_BY_ONE, box_mesh

from ..api import fk_frames
from ..kinematics import quat_to_matrix
from . import codes

__all__ = ["ik_markers", "collision_markers", "GREEN", "RED"]

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


# ---------------------------------------------------------------------- collision markers

def _clearance_color(d: float, margin: float):
    """Red in collision (below the margin), through yellow, to green 5 cm beyond it."""
    t = float(np.clip((d - margin) / 0.05, 0.0, 1.0)) if np.isfinite(d) else 1.0
    return (1.0 - t, 0.3 + 0.6 * t, 0.1, 0.6)


def collision_markers(frame: str, world, robot=None, collision=None, q=None, margin=0.01,
                      stamp=None, namespace: str = "ros2_ik_collision"):
    """MarkerArray of the world's obstacles (grey) and, given ``robot``, its collision model
    and a configuration ``q``, the robot's collision spheres coloured by their clearance
    (red: closer than ``margin``; green: 5 cm beyond it)."""
    from geometry_msgs.msg import Point  # noqa: PLC0415
    from std_msgs.msg import ColorRGBA  # noqa: PLC0415
    from visualization_msgs.msg import Marker, MarkerArray  # noqa: PLC0415

    from ..kinematics import matrix_to_quat  # noqa: PLC0415

    arr = MarkerArray()
    clear = Marker()
    clear.action = Marker.DELETEALL
    clear.ns = namespace
    arr.markers.append(clear)
    mid = [0]

    def new(kind, color, T=None, scale=(1, 1, 1)):
        m = Marker()
        m.header.frame_id = frame
        if stamp is not None:
            m.header.stamp = stamp
        m.ns, m.id, m.type, m.action = namespace, mid[0], kind, Marker.ADD
        mid[0] += 1
        if T is None:
            T = np.eye(4)
        m.pose.position = Point(x=float(T[0, 3]), y=float(T[1, 3]), z=float(T[2, 3]))
        qx, qy, qz, qw = (float(v) for v in matrix_to_quat(T[:3, :3]))
        m.pose.orientation.x, m.pose.orientation.y = qx, qy
        m.pose.orientation.z, m.pose.orientation.w = qz, qw
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
        m.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=color[3])
        arr.markers.append(m)
        return m

    grey = (0.55, 0.55, 0.6, 0.5)
    obs = list(world) if world is not None else []
    boxes = [ob for ob in obs if ob.shape == "box"]
    if len(boxes) > DRAWN_ONE_BY_ONE:  # (a map's, a cloud's or a mesh's cells: one marker)
        V, F = box_mesh([ob.pose for ob in boxes], [ob.size for ob in boxes])
        m = new(Marker.TRIANGLE_LIST, grey)
        m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in V[F.ravel()]]
        obs = [ob for ob in obs if ob.shape != "box"]
    for ob in obs:
        s, T = ob.size, ob.pose
        if ob.shape == "box":
            new(Marker.CUBE, grey, T, s)
        elif ob.shape == "sphere":
            new(Marker.SPHERE, grey, T, (2 * s[0],) * 3)
        elif ob.shape == "cylinder":
            new(Marker.CYLINDER, grey, T, (2 * s[0], 2 * s[0], s[1]))
        elif ob.shape == "capsule":
            new(Marker.CYLINDER, grey, T, (2 * s[0], 2 * s[0], s[1]))
            for z in (-0.5 * s[1], 0.5 * s[1]):
                E = np.eye(4)
                E[2, 3] = z
                new(Marker.SPHERE, grey, T @ E, (2 * s[0],) * 3)
        else:  # half-space: a thin slab 4 m wide below its plane
            E = np.eye(4)
            E[2, 3] = -0.005
            new(Marker.CUBE, grey, T @ E, (4.0, 4.0, 0.01))
    if robot is not None and collision is not None and q is not None:
        from ..api import fk  # noqa: PLC0415
        from ..ik.collision import sphere_centers, sphere_clearances  # noqa: PLC0415

        q = np.asarray(q, dtype=np.float64).reshape(1, -1)
        T = fk(robot.model, q)
        centers = sphere_centers(robot.model, collision, T)[0]
        per = sphere_clearances(robot.model, collision, q[0], world)
        for s in range(collision.num_spheres):
            E = np.eye(4)
            E[:3, 3] = centers[s]
            new(Marker.SPHERE, _clearance_color(per[s], margin), E,
                (2 * collision.radius[s],) * 3)
    return arr
