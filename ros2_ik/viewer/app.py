"""The browser viewer (``ros2_ik_viewer``): the robot with its meshes, a draggable goal gizmo per
tip, the live answer with its status and errors, the seed it started from, a trajectory seed
played back, a reach-study map, a base placement's map on the floor (click a cell: the robot
stands there, :mod:`.placement`), and the collision model and world.

The robot drawn solid is always a solved answer: the viewer opens on a configuration within the
limits and clear of the robot itself and the world (:func:`opening_configuration`, checked on the
collision model), its tips' goals at that configuration, solved; a solve that fails leaves the
last answer where it is and draws its own result apart, see-through red and labelled "last
attempt" (with no answer yet, that is all that is drawn).

Built on viser (a 3D viewer served to a browser over a websocket, made for robotics; PyRoki's
and cuRobo v2's viewers use it) and yourdfpy (the URDF's visual meshes). Every link is placed by
ros2_ik's own FK (one source of truth for poses: floating, planar and mimic joints included);
yourdfpy only loads the meshes. The viewer's Python API (:meth:`Viewer.set_goal`,
:attr:`Viewer.answer`, ...) is what the page's gizmos call, and what tests and scripts drive.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import numpy as np

from ..ik import IKConfig
from ..kinematics import fk, fk_frames, matrix_to_quat, quat_to_matrix
from ..model.joint_types import JointType
from ..validate import check_transforms
from ..world.voxels import DRAWN_ONE_BY_ONE, box_mesh
from .solvers import Answer, CoreSolver, check_answer

__all__ = ["Viewer", "COLORS", "opening_configuration"]

#: goal / status colours (RGB 0-255): solved, only colliding answers, not solved, not yet
COLORS = {"ok": (40, 200, 60), "collision": (255, 140, 0), "failed": (230, 30, 30),
          "none": (170, 170, 170)}
SEED_COLOR = (120, 140, 255)
#: the last attempt when it was not solved (see-through, apart from the answer)
ATTEMPT_COLOR = (230, 30, 30)


def _wxyz(R) -> tuple:
    x, y, z, w = (float(v) for v in matrix_to_quat(np.asarray(R)))
    return (w, x, y, z)


def _matrix(position, wxyz) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = np.asarray(position, dtype=np.float64)
    w, x, y, z = (float(v) for v in wxyz)
    T[:3, :3] = quat_to_matrix(np.array([x, y, z, w]))
    return T


def _status_color(answer: Answer | None):
    if answer is None:
        return COLORS["none"]
    if answer.success:
        return COLORS["ok"]
    return COLORS["collision"] if answer.status == "IN_COLLISION" else COLORS["failed"]


def _bare_links(model, collision) -> list:
    """Links of ``model`` that some joint moves but that carry no sphere of ``collision`` (their
    geometry could not be found, or they declare none): their origins are checked instead."""
    have = {int(v) for v in np.asarray(collision.links)[np.asarray(collision.sphere_link)]}
    return [l for l in range(1, model.num_links) if l not in have and any(
        model.joint_type[a] != JointType.FIXED for a in model.ancestors(l))]


def opening_configuration(model, collision, world=None, *, clear: float, samples: int = 2048,
                          rng_seed: int = 0):
    """Where the viewer opens: a configuration within the limits whose collision model keeps
    ``clear`` [m] from the robot itself and from ``world`` (and, for moving links without
    spheres, whose origins keep it from ``world``): the mid-range configuration when it does,
    else the first of ``samples`` random ones taken ever further from it (a fixed draw: the
    same on every run). Returns ``(q (nq,), text)``, ``q`` None when none is clear; ``text``
    says what was found, in words."""
    from ..ik.collision import clearance, sdf  # noqa: PLC0415

    q0 = model.neutral_q()
    R = model.random_q(np.random.default_rng(rng_seed), samples)
    Q = q0 + np.linspace(0.0, 1.0, samples + 1)[1:, None] * (R - q0)  # between two in limits
    for st in model.floating_q_starts:
        quat = Q[:, st + 3:st + 7]
        n = np.linalg.norm(quat, axis=1, keepdims=True)
        Q[:, st + 3:st + 7] = np.where(n > 1e-6, quat / np.maximum(n, 1e-12), R[:, st + 3:st + 7])
    Q = np.vstack([q0[None], Q])
    bare = _bare_links(model, collision) if world is not None and len(world) else []
    what = "the robot itself and the world" if world is not None and len(world) else \
        "the robot itself"
    best, nearest = -np.inf, ""
    for lo in range(0, len(Q), 256):
        chunk = Q[lo:lo + 256]
        d, k, describe = clearance(model, collision, chunk, world, reach=clear)
        d = np.asarray(d, dtype=np.float64)
        dp = np.full(len(chunk), np.inf)
        if bare:
            P = np.asarray(fk(model, chunk, check=False))[:, bare][..., :3, 3]  # (B, n, 3)
            dp = np.asarray(sdf(world.packed(), P)[0]).min(axis=(1, 2))
        ok = np.nonzero(np.minimum(d, dp) >= clear)[0]
        if len(ok):
            i = int(ok[0])
            where = "the mid-range configuration" if lo + i == 0 else \
                f"configuration {lo + i} of {len(Q)} tried (the mid-range one is not)"
            how = " (links without spheres: by their origins)" if bare and collision.missing \
                else ""
            return chunk[i].copy(), (f"{where}, clear of {what} by {1e3 * clear:g} mm on the "
                                     f"collision model{how}")
        j = int(np.argmax(np.minimum(d, dp)))
        if min(d[j], dp[j]) > best:
            best = float(min(d[j], dp[j]))
            nearest = describe(int(k[j])) if d[j] <= dp[j] else "a link's origin and the world"
    return None, (f"no configuration within the limits was found clear of {what} by "
                  f"{1e3 * clear:g} mm ({len(Q)} tried; the clearest: {1e3 * best:.1f} mm, "
                  f"{nearest})")


def load_visuals(urdf_text: str, mesh_path=()) -> dict:
    """{link name: [(trimesh.Trimesh, T_link_visual (4, 4)), ...]}: the URDF's visual geometry
    by yourdfpy, meshes found as the collision model finds them (``package://`` in the ament
    index, then ``mesh_path``). A mesh that cannot be found is left out (the link still shows
    its other visuals)."""
    import io  # noqa: PLC0415

    import yourdfpy  # noqa: PLC0415

    from ..model.collision import resolve_mesh  # noqa: PLC0415

    def handler(fname: str) -> str:
        path = resolve_mesh(fname, [Path(p) for p in mesh_path])
        return str(path) if path is not None else fname

    # bytes: lxml refuses str input that carries an encoding declaration (<?xml ... encoding=)
    urdf = yourdfpy.URDF.load(io.BytesIO(urdf_text.encode("utf-8")), filename_handler=handler,
                              build_scene_graph=True, load_meshes=True)
    out: dict = {}
    scene = urdf.scene
    if scene is None:
        return out
    parents = scene.graph.transforms.parents
    for node in scene.graph.nodes_geometry:
        link = parents.get(node)
        T, geom_name = scene.graph.get(node)
        mesh = scene.geometry.get(geom_name)
        if link is None or mesh is None:
            continue
        T_link = urdf.get_transform(node, link)
        out.setdefault(link, []).append((mesh, np.asarray(T_link, dtype=np.float64)))
    return out


class RobotView:
    """A robot drawn from its visuals under ``root``, each link placed by our FK."""

    def __init__(self, server, root: str, model, visuals: dict, color=None, opacity=None):
        self.server, self.model, self.root = server, model, root
        self.frames = {}
        self._visible = True
        for link, items in visuals.items():
            try:
                model.link_index(link)
            except Exception:  # noqa: BLE001 - a link above the model's base
                continue
            frame = server.scene.add_frame(f"{root}/{link}", show_axes=False)
            self.frames[link] = frame
            for k, (mesh, T) in enumerate(items):
                name = f"{root}/{link}/visual_{k}"
                if color is not None:  # one colour, see-through (the seed)
                    server.scene.add_mesh_simple(
                        name, np.asarray(mesh.vertices, dtype=np.float32),
                        np.asarray(mesh.faces, dtype=np.uint32), color=color, opacity=opacity,
                        position=T[:3, 3], wxyz=_wxyz(T[:3, :3]))
                else:  # the URDF's own colours
                    server.scene.add_mesh_trimesh(name, mesh, position=T[:3, 3],
                                                  wxyz=_wxyz(T[:3, :3]))
        self._ids = {link: model.link_index(link) for link in self.frames}

    def show(self, q) -> None:
        T = np.asarray(fk(self.model, np.asarray(q, dtype=np.float64)[None]))[0]
        with self.server.atomic():
            for link, frame in self.frames.items():
                Tl = T[self._ids[link]]
                frame.position = Tl[:3, 3]
                frame.wxyz = _wxyz(Tl[:3, :3])

    @property
    def visible(self) -> bool:
        """Whether it is drawn (as set; a robot with no visual found draws nothing either way)."""
        return self._visible

    @visible.setter
    def visible(self, on: bool) -> None:
        self._visible = bool(on)
        for f in self.frames.values():
            f.visible = self._visible


class Viewer:
    """The viewer (see the module docstring).

    Args:
        model: the :class:`ros2_ik.model.Model` shown and solved.
        urdf_text: its URDF (for the visual meshes).
        solver: :class:`CoreSolver` (default, on ``model``) or :class:`NodeSolver`.
        tips: links with a goal gizmo (default: the model's default tip).
        config: the solves' :class:`IKConfig` (default: 32 seeds, a 0.2 s budget).
        world, collision: shown (and, through the solver, avoided when the page's
            "avoid collisions" is on).
        reach_dir: a reach study's output folder (``voxels.npz``), shown as a point cloud.
        placement_dir: a base placement's output folder, shown as a map on the floor
            (:meth:`show_placement`).
        host, port: where the page is served (port 0: a free one; see :attr:`url`).
        open_timeout: [s] how long the constructor waits for the opening answer (a robot's
            first solve may build its compiled kernels); one that comes later is shown then.

    It opens on :func:`opening_configuration` (the goals at its tips, solved): :attr:`solution`
    is that answer, or None with "no answer yet" on the page when no clear configuration is
    found or the solve fails. :attr:`answer` is the last solve's result, solved or not;
    :attr:`q` the configuration the next solve starts from (the last answer's).
    """

    def __init__(self, model, urdf_text: str, *, solver=None, tips=None, config=None,
                 world=None, collision=None, reach_dir=None, placement_dir=None, mesh_path=(),
                 host: str = "127.0.0.1", port: int = 8080, avoid_collisions: bool = False,
                 open_timeout: float = 120.0):
        import viser  # noqa: PLC0415 - the optional extra 'viewer'

        self.model = model
        self.solver = solver or CoreSolver(model, world=world, collision=collision,
                                           mesh_path=mesh_path)
        self.world = world
        self.tips = list(tips) if tips else [model.default_tip()]
        for t in self.tips:
            model.link_index(t)  # UnknownLinkError naming the links
        self.config = config or IKConfig(num_seeds=32, timeout=0.2)
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.host, self.port = host, self.server.get_port()
        self.q = model.neutral_q()          # where the next solve starts
        self.answer: Answer | None = None   # the last solve's result, solved or not
        #: the answer drawn (solid): the last solved one; None: no answer yet
        self.solution: Answer | None = None
        self._solution_avoided = False      # solved with collision avoidance on
        self.answers = 0                    # solves answered so far
        self.trajectory: np.ndarray | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._pending: dict | None = None   # the latest goals waiting for a solve
        self._busy = False
        self._closed = False
        self._play_stop = threading.Event()
        self._player: threading.Thread | None = None

        s = self.server.scene
        s.set_up_direction("+z")
        s.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, position=(0.0, 0.0, 0.0))
        visuals = load_visuals(urdf_text, mesh_path)
        #: the solid robot's root: the base frame (moved to a base candidate by
        #: :meth:`show_placement`; the world's frame otherwise)
        self.robot_root = s.add_frame("/robot", show_axes=False)
        self.robot = RobotView(self.server, "/robot", model, visuals)
        self.seed_robot = RobotView(self.server, "/seed", model, visuals, color=SEED_COLOR,
                                    opacity=0.35)
        #: the last attempt when it was not solved (never the answer), labelled so
        self.attempt_robot = RobotView(self.server, "/attempt", model, visuals,
                                       color=ATTEMPT_COLOR, opacity=0.3)
        self.attempt_label = s.add_label("/attempt_label", "last attempt (not solved)")
        start, self.opening = self._opening_configuration()
        if start is not None:
            self.q = start
        for view in (self.robot, self.seed_robot, self.attempt_robot):
            view.show(self.q)
            view.visible = False  # the answer shows once it is solved
        self.attempt_label.visible = False
        T0 = np.asarray(fk_frames(model, self.q[None], self.tips))[0]
        self.goals = {t: T0[k] for k, t in enumerate(self.tips)}
        self.gizmos = {}
        self.balls = {}
        for k, tip in enumerate(self.tips):
            g = s.add_transform_controls(f"/goal/{tip}", scale=0.2, position=T0[k][:3, 3],
                                         wxyz=_wxyz(T0[k][:3, :3]))
            g.on_update(self._on_gizmo(tip))
            self.gizmos[tip] = g
            self.balls[tip] = s.add_icosphere(f"/goal/{tip}/status", radius=0.025,
                                              color=COLORS["none"])
        self._draw_world()
        self.frame_camera()
        self._spheres = []
        self._build_gui(avoid_collisions)
        if reach_dir:
            self.show_reach(reach_dir)
        self.placement = None  # the base placement shown (show_placement)
        if start is None:
            self.status_md.content = f"**no answer yet** · {self.opening}; drag a goal to solve"
        else:
            self.request(dict(self.goals))
            self.wait_answers(1, open_timeout)
        if placement_dir:
            self.show_placement(placement_dir)

    def _opening_configuration(self):
        """(q or None, text): :func:`opening_configuration` on the solver's collision model,
        clear by the margin and the activation band (no penalty at the start)."""
        cfg = self.config
        try:
            cm = self.solver.collision_model()
            return opening_configuration(self.model, cm, self.world,
                                         clear=cfg.collision_margin + cfg.collision_activation)
        except Exception as exc:  # noqa: BLE001 - said on the page; the mid-range one is tried
            return self.model.neutral_q(), (f"the mid-range configuration (not checked for "
                                            f"collisions: {type(exc).__name__}: {exc})")

    # ------------------------------------------------------------------ page
    def frame_camera(self) -> None:
        """The camera a new page starts with: the robot at the current answer in view, seen
        from the front right and above."""
        pts = np.asarray(fk(self.model, self.q[None]))[0][:, :3, 3]
        centre = 0.5 * (pts.min(0) + pts.max(0))
        size = max(float(np.ptp(pts, axis=0).max()), 0.5)
        cam = self.server.initial_camera
        cam.look_at = tuple(float(v) for v in centre)
        cam.position = tuple(float(v) for v in centre + size * np.array([1.15, 0.85, 0.55]))

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _build_gui(self, avoid_collisions: bool = False) -> None:
        gui = self.server.gui
        gui.add_markdown(f"**ros2_ik** · {self.model.name} · {self.model.nq} joints · "
                         f"answers from {self.solver.label}")
        self.status_md = gui.add_markdown("drag a goal to solve")
        warned = getattr(self.solver, "collision_warnings", lambda: [])()
        #: the collision model's warnings as the page shows them ('' when there are none)
        self.warnings_text = ("**collision model:** " + " · ".join(warned)) if warned else ""
        if warned:
            self.warnings_md = gui.add_markdown(self.warnings_text)
        self.avoid = gui.add_checkbox("avoid collisions", bool(avoid_collisions),
                                      hint="solve clear of the robot itself and the world")
        self.show_seed = gui.add_checkbox("show seed", False,
                                          hint="the configuration the last solve started from")
        self.show_spheres = gui.add_checkbox("show collision model", False)
        self.nodes = gui.add_slider("trajectory nodes", 2, 200, 1, 30)
        self.plan = gui.add_button("plan a trajectory seed to the goal",
                                   hint="from the last answer's tip pose to the goal, played "
                                        "back")
        self.scrub = gui.add_slider("trajectory node", 0, 1, 1, 0, disabled=True)
        self.show_seed.on_update(lambda _e: self._show_seed())
        self.show_spheres.on_update(lambda _e: self._draw_spheres())
        self.avoid.on_update(lambda _e: self._resolve())
        self.plan.on_click(lambda _e: self._plan_clicked())
        self.scrub.on_update(lambda _e: self._scrub())

    def _on_gizmo(self, tip: str):
        def cb(event) -> None:
            g = event.target
            self.request({**self.goals, tip: _matrix(g.position, g.wxyz)})
        return cb

    # ------------------------------------------------------------------ API
    def set_goal(self, tip: str, T, wait: float | None = 30.0) -> Answer | None:
        """Move ``tip``'s gizmo to pose ``T`` (4, 4) and solve (as a drag on the page does);
        with ``wait``, the answer once it is in (TimeoutError after ``wait`` s)."""
        if tip not in self.goals:
            raise ValueError(f"{tip!r} has no goal gizmo; the viewer's tips are {self.tips}")
        T = np.asarray(T, dtype=np.float64)
        if T.shape != (4, 4):
            raise ValueError(f"a goal pose is a finite (4, 4) matrix, got shape {T.shape}")
        check_transforms(T[None], f"the goal of {tip!r}")
        g = self.gizmos[tip]
        g.position, g.wxyz = T[:3, 3], _wxyz(T[:3, :3])
        n = self.answers
        self.request({**self.goals, tip: T})
        if wait is None:
            return None
        if not self.wait_answers(n + 1, wait):
            raise TimeoutError(f"no answer within {wait:g} s")
        return self.answer

    def request(self, goals: dict) -> None:
        """Solve ``goals`` ({tip: (4, 4)}) from the last answer; while one solve runs only the
        latest request waits (a drag sends many)."""
        with self._lock:
            self.goals = dict(goals)
            self._pending = dict(goals)
            if self._busy or self._closed:
                return
            self._busy = True
        threading.Thread(target=self._work, daemon=True, name="ros2_ik-viewer-solve").start()

    def wait_answers(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` solves were answered (a condition with a bound)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.answers >= n and not self._busy, timeout)

    def _resolve(self) -> None:
        self.request(self.goals)

    def _work(self) -> None:
        while True:
            with self._lock:
                goals, self._pending = self._pending, None
                if goals is None or self._closed:
                    self._busy = False
                    self._cond.notify_all()
                    return
            self._answer(goals)

    def _answer(self, goals: dict) -> None:
        """Solve ``goals``, check the result, draw it, and keep it (the solution if solved)."""
        cfg = self._config()
        try:
            ans = self.solver.solve(goals, self.q.copy(), cfg)
        except Exception as exc:  # noqa: BLE001 - shown on the page, the viewer goes on
            ans = Answer(q=self.q.copy(), seed=self.q.copy(), status="ERROR",
                         success=False, position_error=float("nan"),
                         orientation_error=float("nan"),
                         message=f"{type(exc).__name__}: {exc}", goals=goals)
        if ans.success:  # checked here again, by our own FK, before it is shown as solved
            pe, oe = check_answer(self.model, ans.q, goals)
            if pe > cfg.position_tolerance * (1 + 1e-6) or \
                    oe > cfg.orientation_tolerance * (1 + 1e-6):
                ans.success, ans.status = False, "NOT_VERIFIED"
                ans.message = f"FK here: position {pe:.2e} m, orientation {oe:.2e} rad"
        solution, avoided = self.solution, self._solution_avoided
        if ans.success:
            solution, avoided = ans, cfg.avoid_collisions
        elif cfg.avoid_collisions and solution is not None and not avoided and \
                not self._clear(solution.q, cfg):
            solution = None  # found without avoidance, and it collides: no answer now
        first = self.answers == 0
        self._show(ans, solution, self.opening if first else "")
        with self._cond:
            self.answer = ans
            self.solution, self._solution_avoided = solution, avoided
            if ans.success:
                self.q = ans.q.copy()
            self.answers += 1
            self._cond.notify_all()

    def _clear(self, q, cfg: IKConfig) -> bool:
        """Whether ``q`` keeps the margin from the robot itself and the world on the collision
        model (False when that cannot be told)."""
        from ..ik.collision import clearance  # noqa: PLC0415

        try:
            d = clearance(self.model, self.solver.collision_model(), np.asarray(q)[None],
                          self.world, reach=cfg.collision_margin)[0]
        except Exception:  # noqa: BLE001
            return False
        return bool(d[0] >= cfg.collision_margin)

    def _config(self) -> IKConfig:
        return dataclasses.replace(self.config, avoid_collisions=bool(self.avoid.value))

    def _show(self, ans: Answer, solution: Answer | None, opening: str = "") -> None:
        """Draw the solution (solid; nothing when there is none) and, when ``ans`` was not
        solved, ``ans`` apart as the last attempt."""
        self._draw(solution.q if solution is not None else None,
                   None if ans.success else ans.q, f"last attempt: {ans.status} (not an answer)")
        self.seed_robot.show(ans.seed)
        color = _status_color(ans)
        for tip, ball in self.balls.items():
            ball.color = color
        text = ans.summary()
        if not ans.success:
            text += ("\n\nThe last attempt (not an answer) is drawn see-through red; "
                     + ("the robot shows the last answer." if solution is not None else
                        "nothing is drawn as the answer."))
        if ans.success and opening:
            text += f"\n\nOpened on {opening}."
        self.status_md.content = text if solution is not None or ans.success else \
            "**no answer yet** · last attempt: " + text
        if self.show_spheres.value:
            self._draw_spheres(solution)

    def _draw(self, q_answer, q_attempt, label: str = "") -> None:
        """The answer's configuration on the solid robot (hidden when None) and an unsolved one
        on the see-through red robot with its label (hidden when None)."""
        if q_answer is not None:
            self.robot.show(q_answer)
        self.robot.visible = q_answer is not None
        if q_attempt is not None:
            self.attempt_robot.show(q_attempt)
            tip = np.asarray(fk_frames(self.model, np.asarray(q_attempt)[None],
                                       self.tips[:1]))[0, 0]
            self.attempt_label.position = tip[:3, 3]
            self.attempt_label.text = label
        self.attempt_robot.visible = q_attempt is not None
        self.attempt_label.visible = q_attempt is not None

    def _show_seed(self) -> None:
        self.seed_robot.visible = bool(self.show_seed.value)

    # ------------------------------------------------------------------ trajectory
    def plan_trajectory(self, nodes: int | None = None, play: bool = True) -> np.ndarray:
        """A trajectory seed from the last answer's tip pose to the first tip's goal
        ((N, nq)); played back on the page."""
        tip = self.tips[0]
        n = int(nodes or self.nodes.value)
        start = np.asarray(fk_frames(self.model, self.q[None], [tip]))[0, 0]
        q, ok = self.solver.trajectory(tip, start, self.goals[tip], self.q.copy(), n,
                                       self._config())
        self.trajectory = np.asarray(q)
        self.trajectory_ok = np.asarray(ok)
        tips = np.asarray(fk_frames(self.model, self.trajectory, [tip]))[:, 0, :3, 3]
        self.server.scene.add_spline_catmull_rom("/trajectory", tips, color=(60, 120, 255),
                                                 thickness=0.004)
        self.scrub.max = len(self.trajectory) - 1
        self.scrub.disabled = False
        if play:
            self._play()
        return self.trajectory

    def _plan_clicked(self) -> None:
        try:
            self.plan_trajectory()
        except Exception as exc:  # noqa: BLE001
            self.status_md.content = f"trajectory: {type(exc).__name__}: {exc}"

    def _play(self) -> None:
        self._play_stop.set()
        if self._player is not None:
            self._player.join(timeout=2)
        self._play_stop = threading.Event()
        stop, traj, ok = self._play_stop, self.trajectory, self.trajectory_ok

        def run():
            for k in range(len(traj)):
                if stop.is_set() or self._closed:
                    return
                self._draw_node(traj, ok, k)
                self.scrub.value = k
                time.sleep(1 / 30)
        self._player = threading.Thread(target=run, daemon=True, name="ros2_ik-viewer-play")
        self._player.start()

    def _scrub(self) -> None:
        if self.trajectory is not None:
            k = int(np.clip(self.scrub.value, 0, len(self.trajectory) - 1))
            self._draw_node(self.trajectory, self.trajectory_ok, k)

    def _draw_node(self, traj, ok, k: int) -> None:
        """Trajectory node ``k`` on the robot when it was solved, else apart as an attempt."""
        if ok[k]:
            self._draw(traj[k], None)
        else:
            self._draw(None, traj[k], f"trajectory node {k}: not solved")

    # ------------------------------------------------------------------ base placement
    def show_placement(self, placement, result=None):
        """A base placement on the page (:class:`~.placement.PlacementView`: the map on the
        floor, click a cell to stand the robot there): ``placement`` a
        :class:`~ros2_ik.reach.placement.Placement` and its ``result``, or a finished search's
        folder (``result`` None; read by :func:`ros2_ik.reach.placement.load_placement` on this
        viewer's model and collision model). The goal gizmos are hidden: the task poses are
        the goals."""
        from .placement import PlacementView  # noqa: PLC0415

        if result is None:
            from ..reach.placement import load_placement  # noqa: PLC0415

            placement, result = load_placement(placement, self.model,
                                               self.solver.collision_model())
        self.placement = PlacementView(self, placement, result)
        return self.placement

    # ------------------------------------------------------------------ reach, collisions
    def show_reach(self, reach_dir) -> int:
        """A reach study's map (``voxels.npz`` in ``reach_dir``): one point per voxel with
        targets, coloured from red (none reached) to green (all); the number of points."""
        from ..reach.store import read_npz  # noqa: PLC0415

        vox = read_npz(Path(reach_dir) / "voxels.npz")
        keep = np.asarray(vox["targets"]) > 0
        pts = np.asarray(vox["centre"], dtype=np.float32)[keep]
        r = np.asarray(vox["reachability"], dtype=np.float64)[keep][:, None]
        colors = (np.array([230, 30, 30]) * (1 - r) + np.array([40, 200, 60]) * r)
        self.server.scene.add_point_cloud("/reach_map", pts, colors.astype(np.uint8),
                                          point_size=float(np.min(vox["cell"])) * 0.5
                                          if np.size(vox["cell"]) else 0.02,
                                          point_shape="rounded")
        return int(keep.sum())

    def _draw_world(self, solid=(150, 150, 160)) -> None:
        """The world's obstacles, see-through: ``solid`` the colour of those that are not
        half-spaces (a half-space, the floor or a table top, is grey)."""
        s = self.server.scene
        obs = list(self.world or ())
        boxes = [ob for ob in obs if ob.shape == "box"]
        if len(boxes) > DRAWN_ONE_BY_ONE:  # (a map's, a cloud's or a mesh's cells: one mesh)
            V, F = box_mesh([ob.pose for ob in boxes], [ob.size for ob in boxes])
            s.add_mesh_simple("/world/cells", V.astype(np.float32), F.astype(np.uint32),
                              color=solid, opacity=0.6)
            obs = [ob for ob in obs if ob.shape != "box"]
        for ob in obs:
            grey = (150, 150, 160) if ob.shape == "halfspace" else solid
            T, z = ob.pose, ob.size
            kw = dict(position=T[:3, 3], wxyz=_wxyz(T[:3, :3]), opacity=0.6)
            name = f"/world/{ob.id}"
            if ob.shape == "box":
                s.add_box(name, grey, dimensions=z, **kw)
            elif ob.shape == "sphere":
                s.add_icosphere(name, radius=z[0], color=grey, **kw)
            elif ob.shape in ("cylinder", "capsule"):
                s.add_cylinder(name, radius=z[0], height=z[1], color=grey, **kw)
            elif ob.shape == "halfspace":  # its boundary, a thin slab
                s.add_box(name, grey, dimensions=(4.0, 4.0, 0.002), **kw)

    def _draw_spheres(self, solution: Answer | None | str = "drawn") -> None:
        """The collision model's spheres at ``solution`` (default: the one drawn; none for
        None)."""
        solution = self.solution if isinstance(solution, str) else solution
        for h in self._spheres:
            h.remove()
        self._spheres = []
        if not self.show_spheres.value:
            return
        if solution is None:  # the spheres of the answer: none yet
            return
        cm = self.solver.collision_model()
        from ..ik.collision import sphere_centers  # noqa: PLC0415

        T = np.asarray(fk(self.model, solution.q[None]))
        c = np.asarray(sphere_centers(self.model, cm, T))[0]
        for k in range(cm.num_spheres):
            self._spheres.append(self.server.scene.add_icosphere(
                f"/collision/s{k}", radius=float(cm.radius[k]), color=(255, 200, 0),
                opacity=0.35, subdivisions=1, position=c[k]))

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._play_stop.set()
        try:
            self.server.stop()
        finally:
            self.solver.close()
