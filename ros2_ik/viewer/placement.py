"""A base placement on the viewer's page (:meth:`ros2_ik.viewer.app.Viewer.show_placement`):
the coarse candidates as a coloured map on the floor (each x-y cell coloured by the best
fraction of task poses reached there, over yaws and heights: red none, green all; grey where
the base would stand in an obstacle), the best candidates marked and numbered, the task poses
as small axes (green reached from the base shown, red not), and the robot standing at the
selected base, at its answer for one task pose.

Click a cell of the map: the robot moves to that cell's best candidate, its answers computed
with the search's fine options (as the refinement scores). A dropdown picks among the best
candidates, a slider steps through the task poses.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["PlacementView", "fraction_color", "TILE_Z"]

#: [m] height of the map's tiles above the floor
TILE_Z = 0.004
#: the obstacles' colour on a placement's page (the robot's links are white and grey)
WORLD_COLOR = (95, 125, 175)
_RED, _GREEN, _GREY = np.array([230, 30, 30]), np.array([40, 200, 60]), np.array([150, 150, 150])


def fraction_color(fraction) -> np.ndarray:
    """(N, 3) uint8 colours of fractions (N,): red (0) to green (1)."""
    f = np.clip(np.asarray(fraction, dtype=np.float64), 0.0, 1.0)[:, None]
    return (_RED * (1 - f) + _GREEN * f).astype(np.uint8)


def _tile(dx: float, dy: float, dz: float):
    """(vertices, faces) of a box centred at the origin."""
    v = np.array([[x, y, z] for x in (-dx, dx) for y in (-dy, dy) for z in (-dz, dz)],
                 dtype=np.float32) / 2
    f = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4],
                  [2, 6, 3], [3, 6, 7], [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]],
                 dtype=np.uint32)
    return v, f


def _wxyz_yaw(yaw: float) -> tuple:
    return (float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2)))


class PlacementView:
    """What a viewer shows of a placement (see the module docstring). ``selected``: the
    candidate the robot stands at (its columns, one row, with its answers); ``selections``
    counts the candidates shown so far (:meth:`wait_selections` waits for one)."""

    def __init__(self, viewer, placement, result):
        from ..reach.placement import rank  # noqa: PLC0415

        if result.coarse is None or result.candidates is None:
            raise ValueError("the placement did not finish: nothing to show (run it again to "
                             "resume it)")
        self.viewer, self.placement, self.result = viewer, placement, result
        self._spec = None
        self.selected: dict | None = None
        self.shown_q = None
        self.selections = 0
        self._cond = threading.Condition()
        s = viewer.server.scene
        coarse = result.coarse
        base = np.asarray(coarse["base"], dtype=np.float64)
        key = np.round(base[:, :2], 9)
        self.cells, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        best = np.full(len(self.cells), -1, dtype=np.int64)
        for i in rank(coarse).tolist():  # best first: the first seen per cell is its best
            if best[inv[i]] < 0:
                best[inv[i]] = i
        self.cell_best = best
        clear = np.zeros(len(self.cells), dtype=bool)
        np.logical_or.at(clear, inv, np.asarray(coarse["base_clear"], dtype=bool))
        self.cell_fraction = np.asarray(coarse["fraction"], dtype=np.float64)[best]
        colors = fraction_color(self.cell_fraction)
        colors[~clear] = _GREY
        res = placement.config.resolution
        v, f = _tile(0.92 * res, 0.92 * res, 0.004)
        n = len(self.cells)
        pos = np.column_stack([self.cells, np.full(n, TILE_Z)]).astype(np.float32)
        self.map = s.add_batched_meshes_simple(
            "/placement/map", v, f, np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)), pos,
            batched_colors=colors, cast_shadow=False, receive_shadow=False)
        self.map.on_click(self._clicked)
        c = result.candidates
        self.top = []
        for k, b in enumerate(np.asarray(c["base"])):
            fr = s.add_frame(f"/placement/top/{k}", axes_length=0.12, axes_radius=0.006,
                             position=b[:3] + (0, 0, 0.01), wxyz=_wxyz_yaw(b[3]))
            self.top.append(fr)
        s.add_label("/placement/top/0/rank", "best base", position=(0.0, 0.0, 0.05))
        T = placement.poses
        from ..kinematics import quat_to_matrix  # noqa: PLC0415

        R = np.asarray(quat_to_matrix(T[:, 3:]))
        self.task_wxyz = np.array([viewer_wxyz(Rk) for Rk in R])
        self.task_axes = s.add_batched_axes("/placement/task", self.task_wxyz,
                                            T[:, :3].astype(np.float32), axes_length=0.05,
                                            axes_radius=0.004)
        self.reached_balls = None
        # the robot stands at the selected base: its root frame moves; nothing else is solved
        for g in viewer.gizmos.values():
            g.visible = False
        for b in viewer.balls.values():
            b.visible = False
        viewer.seed_robot.visible = False
        viewer.attempt_robot.visible = False
        viewer.attempt_label.visible = False
        if placement.world is not None and viewer.world is None:
            viewer.world = placement.world
        viewer._draw_world(solid=WORLD_COLOR)  # the obstacles apart from the (white) robot
        gui = viewer.server.gui
        P = len(T)
        self.md = gui.add_markdown("")
        names = [f"{k + 1}" for k in range(len(c["fraction"]))]
        self.pick = gui.add_dropdown("best candidates", names, initial_value=names[0])
        self.pose = gui.add_slider("task pose", 0, max(P - 1, 1), 1, 0, disabled=P < 2)
        self.pick.on_update(lambda _e: self.select_top(int(self.pick.value) - 1))
        self.pose.on_update(lambda _e: self._pose_changed())
        self.select_top(0)
        self.frame_camera()

    # ------------------------------------------------------------------ selecting
    def select_top(self, k: int) -> dict:
        """Stand the robot at the ``k``-th best candidate (0: the best)."""
        c = self.result.candidates
        row = {name: np.asarray(v)[k] for name, v in c.items()}
        return self._select(row, f"candidate {k + 1} of the best")

    def select_cell(self, x: float, y: float) -> dict | None:
        """Stand the robot at the best coarse candidate of the map's cell nearest (x, y) (None
        when (x, y) is off the map); its answers computed with the fine options."""
        from ..reach.placement import score_bases  # noqa: PLC0415

        d = np.hypot(self.cells[:, 0] - x, self.cells[:, 1] - y)
        j = int(np.argmin(d))
        if d[j] > 0.75 * self.placement.config.resolution * np.sqrt(2):
            return None
        base = np.asarray(self.result.coarse["base"])[self.cell_best[j]]
        if self._spec is None:
            self._spec = self.placement.spec()
        cols = score_bases(self._spec, base[None], fine=True)
        row = {k: np.asarray(v)[0] for k, v in cols.items() if isinstance(v, np.ndarray)}
        return self._select(row, f"cell ({self.cells[j, 0]:.3f}, {self.cells[j, 1]:.3f}) of "
                                 "the map")

    def _clicked(self, event) -> None:
        o = np.asarray(event.ray_origin, dtype=np.float64)
        d = np.asarray(event.ray_direction, dtype=np.float64)
        if abs(d[2]) < 1e-9:
            return
        t = (TILE_Z - o[2]) / d[2]
        if t <= 0:
            return
        p = o + t * d
        threading.Thread(target=self.select_cell, args=(float(p[0]), float(p[1])),
                         daemon=True, name="ros2_ik-viewer-placement").start()

    def wait_selections(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` candidates were shown (a condition with a bound)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.selections >= n, timeout)

    def _select(self, row: dict, what: str) -> dict:
        v = self.viewer
        b = np.asarray(row["base"], dtype=np.float64)
        v.robot_root.position = tuple(float(x) for x in b[:3])
        v.robot_root.wxyz = _wxyz_yaw(float(b[3]))
        ok = np.asarray(row["success"], dtype=bool)
        self.selected = row
        colors = np.where(ok[:, None], [40, 200, 60], [230, 30, 30]).astype(np.uint8)
        s = v.server.scene
        if self.reached_balls is not None:
            self.reached_balls.remove()
        T = self.placement.poses
        P = len(T)
        vs, fs = _tile(0.02, 0.02, 0.02)
        self.reached_balls = s.add_batched_meshes_simple(
            "/placement/reached", vs, fs, np.tile([1.0, 0.0, 0.0, 0.0], (P, 1)),
            T[:, :3].astype(np.float32), batched_colors=colors)
        P_ok = int(ok.sum())
        self.md.content = (
            f"**base placement** · {what}: x {b[0]:.3f} m, y {b[1]:.3f} m, z {b[2]:.3f} m, "
            f"yaw {np.degrees(b[3]):.1f} deg · reaches **{P_ok}/{P}** task poses "
            f"({100 * P_ok / P:.0f} %) · manipulability worst {_fmt(row['worst_manipulability'])}"
            f", mean {_fmt(row['mean_manipulability'])} · clearance "
            f"{_fmt(row['min_clearance'])} m · click a cell of the map to stand there")
        self._show_pose()
        with self._cond:
            self.selections += 1
            self._cond.notify_all()
        return row

    def _pose_changed(self) -> None:
        if self.selected is not None:
            self._show_pose()

    def _show_pose(self) -> None:
        """The robot at the selected base, at its answer for the slider's task pose (the first
        reached one when that one is not)."""
        v = self.viewer
        row = self.selected
        ok = np.asarray(row["success"], dtype=bool)
        k = int(self.pose.value) if len(ok) > 1 else 0
        if not ok[k] and ok.any():
            k = int(np.argmax(ok))
        q = np.asarray(row["q"])[k] if ok.any() else v.model.neutral_q()
        self.shown_q = q  # the robot's configuration on the page (at the selected base)
        v.robot.show(q)
        v.robot.visible = True

    def frame_camera(self) -> None:
        """The page's camera: the map and the task poses in view, from the front and above."""
        pts = np.vstack([np.column_stack([self.cells, np.zeros(len(self.cells))]),
                         self.placement.poses[:, :3]])
        centre = 0.5 * (pts.min(0) + pts.max(0))
        size = max(float(np.ptp(pts, axis=0).max()), 0.8)
        cam = self.viewer.server.initial_camera
        cam.look_at = tuple(float(x) for x in centre)
        cam.position = tuple(float(x) for x in centre + size * np.array([-0.25, -0.85, 0.5]))


def _fmt(v) -> str:
    v = float(v)
    return f"{v:.4f}" if np.isfinite(v) else "-"


def viewer_wxyz(R) -> tuple:
    from ..kinematics import matrix_to_quat  # noqa: PLC0415

    x, y, z, w = (float(a) for a in matrix_to_quat(np.asarray(R)))
    return (w, x, y, z)
