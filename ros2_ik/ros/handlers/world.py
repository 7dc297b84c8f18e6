"""The node's planning scene (what collision-aware answers keep clear of): ros2_ik's own
``~/world`` topic and ``~/update_world`` service (ros2_ik_interfaces/WorldUpdate), the
``collision.world_file`` parameter, and, when ``moveit_msgs`` is importable, MoveIt's planning
scene: ``collision_object``, ``attached_collision_object``, ``planning_scene`` and
``monitored_planning_scene`` (:mod:`ros2_ik.ros.scene` says what each honours).

Changes are applied in the order they arrive by one worker thread (an attached object's
spheres are fitted there, which may take a second the first time an object is seen; the
executor thread never waits for it) and swapped in by one reference assignment
(:class:`~ros2_ik.ros.scene.Scene` is immutable): a request keeps the scene it was taken with,
and its answer says which version that was. A change that cannot be applied (an unknown
frame, a degenerate primitive, an id that is not there, a byte that is not an operation) is
refused whole, the scene stays as it was, and the error goes to the log and to the
diagnostics (``scene_error``), naming the message, the object and the field;
``~/update_world`` answers it.
"""

from __future__ import annotations

import collections
import threading
import time

from ...errors import IKError
from ...world import World, world_from_yaml
from .. import codes
from ..codes import RequestError
from ..scene import (Scene, apply_attached_object, apply_collision_object,
                     apply_planning_scene, replace_octomap)
from ..world_input import Frames, apply_update

__all__ = ["SceneState", "register", "QUEUE_MAX"]

#: scene messages waiting to be applied at most (more are refused, with an error)
QUEUE_MAX = 10_000


def _every_joint_given(model, seeds) -> bool:
    """Whether the joint states of ``seeds`` (a joint-states snapshot) name every joint of
    ``model`` that no other joint drives (so the state they give is the robot's, not the
    mid-range configuration)."""
    names = {n for ns, _ in getattr(seeds, "kept", ()) for n in ns}
    need = {model.joint_names[int(model.q_joint[i])] for i in range(model.nq)
            if int(model.mimic_q[int(model.q_joint[i])]) < 0}
    return need <= names


class SceneState:
    """The scene in use (``scene``; ``world`` its obstacles) and the worker that changes it."""

    def __init__(self, w):
        self.w = w
        self.scene = Scene()
        self.on_change = lambda scene: None
        self._queue: collections.deque = collections.deque()
        self._wake = threading.Condition()
        #: planning-scene messages with an octomap that wait in the queue; while the worker
        #: applies one, whether a newer map waits behind it (that one is then not decoded:
        #: the newer map replaces it a moment later)
        self._maps_waiting = 0
        self.map_superseded = False
        #: ``apply(scene, frames, robot, notes) -> scene`` (as :meth:`submit` takes) applying
        #: the map of the last diff whose map was not decoded (set by that diff's change):
        #: applied instead when the newer map's message is refused, so a map is never lost to
        #: a message that was not applied
        self.map_fallback = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="ros2_ik-scene")
        self._thread.start()

    @property
    def world(self) -> World:
        return self.scene.world

    # ------------------------------------------------------------------ the worker
    def submit(self, what: str, apply, done=None, frames=None, carries_map: bool = False) -> None:
        """Queue ``apply(scene, frames, robot, notes) -> scene``; ``done(error or None)`` is
        called on the worker once it ran. From the executor thread (the model and joint states
        in use are taken now), or from another with ``frames`` = (robot, joint-states
        snapshot, aliases) taken there. ``carries_map``: the change holds an octomap (while
        it is applied, :attr:`map_superseded` says whether a newer one waits)."""
        with self._wake:
            if len(self._queue) >= QUEUE_MAX:
                self._error(f"{what} not applied: {QUEUE_MAX} scene messages wait already; "
                            "publish the planning scene less often")
                if done is not None:
                    done(RequestError(codes.FAILURE, "the scene queue is full"))
                return
            self._queue.append((what, apply, frames or self._frames_snapshot(), done,
                                carries_map))
            self._maps_waiting += bool(carries_map)
            self._wake.notify()

    def _frames_snapshot(self):
        """What :class:`Frames` needs, taken now (the model and joint states in use)."""
        robot = self.w.robot()
        seeds = self.w.seeds() if robot is not None else None
        aliases = tuple(a.strip() for a in self.w.settings().collision_base_frame_aliases
                        .split(",") if a.strip())
        return robot, seeds, aliases

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                what, apply, (robot, seeds, aliases), done, carries_map = \
                    self._queue.popleft()
                self._maps_waiting -= bool(carries_map)
                self.map_superseded = bool(carries_map) and self._maps_waiting > 0
            q, known = None, False
            if robot is not None:
                try:
                    q = seeds(robot) if seeds is not None else robot.model.neutral_q()
                    known = _every_joint_given(robot.model, seeds)
                except Exception:  # noqa: BLE001 - no joint states yet: the neutral state
                    q = None
            frames = Frames(robot, q, aliases, q_known=known)
            notes: list = []
            new, err = self._apply(apply, frames, robot, notes)
            # a map left for this message's newer one: dropped once a map is applied, applied
            # alone when this message (a map's) is refused
            fallback = None
            if carries_map and not self.map_superseded:
                fallback, self.map_fallback = self.map_fallback, None
            try:
                if err is not None:
                    self._error(f"{what} not applied: {err.message}; the planning scene stays "
                                f"at version {self.scene.version}")
                    if fallback is not None:
                        what, notes = f"the map of an earlier diff, left for {what}", []
                        new, err2 = self._apply(fallback, frames, robot, notes)
                        if err2 is not None:
                            self._error(f"{what} not applied: {err2.message}")
                            new = self.scene
                if err is None or fallback is not None:
                    self._adopt(new, notes, robot, what)
            except Exception as exc:  # noqa: BLE001 - the worker never dies; said
                self._error(f"{what}: {type(exc).__name__}: {exc} after it was applied")
            finally:
                if done is not None:
                    done(err)

    def _apply(self, apply, frames, robot, notes):
        """(the scene ``apply`` makes of the current one, None) or (None, the RequestError
        saying why it was refused)."""
        try:
            return apply(self.scene, frames, robot, notes), None
        except RequestError as exc:
            return None, exc
        except IKError as exc:
            return None, RequestError(codes.INVALID_REQUEST, str(exc))
        except Exception as exc:  # noqa: BLE001 - never let a message stop the node
            return None, RequestError(codes.FAILURE, f"{type(exc).__name__}: {exc}")

    def _adopt(self, new, notes, robot, what: str) -> None:
        """Make ``new`` the planning scene (logged, diagnosed, markers), its notes logged."""
        for t in dict.fromkeys(notes):
            self.w.log("info", t)
        if new is self.scene:
            return
        self.scene = new
        self.w.stats.set_scene(new, "", self._touching(robot, new))
        self.w.log("info", f"planning scene version {new.version}: {len(new.world)} obstacles, "
                           f"{len(new.attached)} attached objects ({what})")
        for source, why in new.unsupported:
            self.w.log("error", f"{why}; collision-aware answers are "
                                f"COLLISION_CHECKING_UNAVAILABLE until a good {source} comes")
        self.on_change(new)

    def _touching(self, robot, scene) -> list:
        """What the scene's world makes unsolvable for the robot (links that touch an obstacle
        in every configuration), logged as warnings; and the world's tree and the first
        pass's cover of the scene (:mod:`ros2_ik.ik.cover`) made here, not in the next
        request's time."""
        if robot is None:
            return []
        from ...api.solver import world_warnings  # noqa: PLC0415
        from ...ik.cover import first_pass  # noqa: PLC0415

        s = self.w.settings()
        prepared = robot.collision_prepared(s)  # (else no fit on this thread for the cover)
        if not prepared and not len(scene.world):
            return []
        try:
            cm, world = robot.scene_collisions(
                robot.collision_model(s.collision_spheres_file, s.collision_mesh_path,
                                      s.collision_margin), scene)
        except Exception:  # noqa: BLE001 - (a model without geometry: requests say so)
            return []
        world.tree()
        if prepared:
            try:
                first_pass(robot.model, cm, world, s.collision_cover, s.collision_margin)
            except Exception:  # noqa: BLE001 - (the request that needs it says what is wrong)
                pass
        if not len(scene.world):
            return []
        try:
            out = world_warnings(robot.model, cm, world, s.collision_margin)
        except Exception:  # noqa: BLE001 - (a model without geometry: requests say so)
            return []
        for text in out:
            self.w.log("warning", f"planning scene version {scene.version}: {text}")
        return out

    def _error(self, text: str) -> None:
        self.w.stats.set_scene(self.scene, text)
        self.w.log("error", text)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._queue.clear()
            self._wake.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Whether every queued change was applied within ``timeout`` (tests)."""
        done = threading.Event()
        self.submit("(a marker)", lambda scene, frames, robot, notes: scene,
                    lambda err: done.set())
        return done.wait(timeout)

    # ------------------------------------------------------------------ changes
    def update(self, msg, why: str, done=None, frames=None) -> None:
        """Queue a ros2_ik_interfaces/WorldUpdate."""
        def apply(scene, frames, robot, notes):
            world = apply_update(scene.world, msg, frames)
            return scene.bumped(world=world) if world is not scene.world else scene
        self.submit(why, apply, done, frames)

    def load_file(self, path: str) -> None:
        """The ``collision.world_file`` parameter's world (replaces the world's obstacles)."""
        if not path:
            return
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            self._error(f"collision.world_file {path!r} not loaded: {exc}; the world stays as "
                        "it was")
            return

        def apply(scene, frames, robot, notes):
            return scene.bumped(world=world_from_yaml(text, scene.version + 1))
        self.submit(f"collision.world_file {path}", apply)


def register(w) -> SceneState:
    """The world's topic, service and (with moveit_msgs) planning-scene subscriptions."""
    from ros2_ik_interfaces.msg import WorldUpdate  # noqa: PLC0415
    from ros2_ik_interfaces.srv import UpdateWorld  # noqa: PLC0415

    state = SceneState(w)
    log = w.node.get_logger()
    w.node.create_subscription(WorldUpdate, "~/world", lambda m: state.update(m, "~/world"), 100)

    def answer(ctx, req, resp):
        done = threading.Event()
        box = []
        aliases = tuple(a.strip() for a in ctx.settings.collision_base_frame_aliases.split(",")
                        if a.strip())
        state.update(req.update, "~/update_world", lambda err: (box.append(err), done.set()),
                     (ctx.settled_robot(), ctx.seed_base, aliases))
        if not done.wait(30.0):
            resp.error_code.val = codes.FAILURE
            resp.message = "the planning scene worker did not apply the change within 30 s"
        elif box[0] is not None:
            resp.error_code.val = box[0].code
            resp.message = box[0].message
        else:
            resp.error_code.val = codes.SUCCESS
        resp.version = state.scene.version
        resp.ids = state.scene.world.ids
        return resp

    w.service(UpdateWorld, "~/update_world", answer)
    _point_clouds(w, state)
    _octomaps(w, state)

    try:
        from moveit_msgs.msg import (AttachedCollisionObject, CollisionObject,  # noqa: PLC0415
                                     PlanningScene)
    except Exception:  # noqa: BLE001 - no moveit_msgs: ros2_ik's own world interface only
        return state

    def ignore_octomap():
        return bool(w.settings().collision_ignore_octomap)

    def mesh_resolution():
        return float(w.settings().collision_mesh_resolution)

    def on_object(msg):
        res = mesh_resolution()
        state.submit(f"collision_object {msg.id!r}",
                     lambda scene, frames, robot, notes: apply_collision_object(
                         scene, msg, frames, notes, mesh_resolution=res))

    def on_attached(msg):
        state.submit(f"attached_collision_object {msg.object.id!r}",
                     lambda scene, frames, robot, notes: apply_attached_object(
                         scene, msg, frames, robot, notes))

    def on_scene(msg, topic):
        octo, res = ignore_octomap(), mesh_resolution()
        # (a diff's map that a newer diff's map will replace before any request could use
        # it is not decoded: move_group sends one with every sensor update)
        has_map = bool(msg.is_diff) and len(msg.world.octomap.octomap.data) > 0

        def apply(scene, frames, robot, notes):
            skip = has_map and state.map_superseded
            if skip and not octo:  # (its map applied alone if the newer one's message fails)
                state.map_fallback = lambda sc, fr, rb, nt: replace_octomap(
                    sc, msg.world.octomap, fr).bumped()
            return apply_planning_scene(scene, msg, frames, robot, notes, octomap_ok=octo,
                                        mesh_resolution=res, octomap_superseded=skip)
        state.submit(f"{topic} ({'diff' if msg.is_diff else 'full scene'})", apply,
                     carries_map=has_map)

    w.node.create_subscription(CollisionObject, "collision_object", on_object, 100)
    w.node.create_subscription(AttachedCollisionObject, "attached_collision_object",
                               on_attached, 100)
    for topic in ("planning_scene", "monitored_planning_scene"):
        w.node.create_subscription(PlanningScene, topic,
                                   lambda m, t=topic: on_scene(m, t), 10)
    log.info("moveit_msgs found: the planning scene follows collision_object, "
             "attached_collision_object, planning_scene and monitored_planning_scene")
    return state


class _Newest:
    """The messages of one sensed topic, applied on the scene worker one at a time, each the
    newest that arrived: one waiting at a time, a newer message replacing it (not queued).
    ``apply(scene, frames, robot, msg) -> scene``."""

    def __init__(self, state: SceneState, what: str, apply):
        self._state, self._what, self._apply = state, what, apply
        self._waiting = threading.Event()
        self._latest = None

    def __call__(self, msg) -> None:
        self._latest = msg
        if self._waiting.is_set():
            return  # (the one waiting takes this newer message)
        self._waiting.set()
        self._state.submit(self._what, self._run, done=lambda err: self._waiting.clear())

    def _run(self, scene, frames, robot, notes):
        msg, self._latest = self._latest, None
        return scene if msg is None else self._apply(scene, frames, robot, msg)


def _point_clouds(w, state: SceneState) -> None:
    """The subscription to ``point_cloud.topic`` (none when ''): each cloud, at most
    ``point_cloud.max_rate`` a second and one waiting at a time, replaces the last
    (:func:`ros2_ik.ros.cloud.apply_cloud`)."""
    topic = w.settings().point_cloud_topic.strip()
    if not topic:
        return
    from rclpy.qos import qos_profile_sensor_data  # noqa: PLC0415
    from sensor_msgs.msg import PointCloud2  # noqa: PLC0415

    from ..cloud import apply_cloud, frame_transform  # noqa: PLC0415

    last = [-float("inf")]

    def apply(scene, frames, robot, msg):
        s = w.settings()
        cm = None
        if robot is not None:
            cm = robot.collision_model(s.collision_spheres_file, s.collision_mesh_path,
                                       s.collision_margin)
        return apply_cloud(scene, msg, frames, robot, resolution=s.point_cloud_resolution,
                           max_range=s.point_cloud_max_range, padding=s.point_cloud_padding,
                           cm=cm, what=f"point cloud on {topic}",
                           static=frame_transform(s.point_cloud_frame_transform))[0]
    newest = _Newest(state, f"point cloud on {topic}", apply)

    def on_cloud(msg):
        now = time.monotonic()
        if now - last[0] < 1.0 / w.settings().point_cloud_max_rate:
            return  # (dropped: the next one replaces it anyway)
        last[0] = now
        newest(msg)

    w.node.create_subscription(PointCloud2, topic, on_cloud, qos_profile_sensor_data)
    w.node.get_logger().info(f"point clouds on {topic} become obstacles "
                             f"({w.settings().point_cloud_resolution:g} m cells)")


def _octomaps(w, state: SceneState) -> None:
    """The subscription to ``octomap.topic`` (none when ''): each octomap_msgs/Octomap, one
    waiting at a time, replaces the map (:func:`ros2_ik.ros.scene.apply_octomap`, at the
    identity in its header's frame)."""
    topic = w.settings().octomap_topic.strip()
    if not topic:
        return
    try:
        from octomap_msgs.msg import Octomap  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - said, and the node serves without it
        w.log("error", f"octomap.topic is {topic!r} but octomap_msgs is not importable: maps "
                       "on it are not taken (source a ROS install with octomap_msgs)")
        return
    import types  # noqa: PLC0415

    from geometry_msgs.msg import Pose  # noqa: PLC0415

    def apply(scene, frames, robot, msg):
        with_pose = types.SimpleNamespace(header=msg.header, origin=Pose(), octomap=msg)
        return replace_octomap(scene, with_pose, frames).bumped()

    w.node.create_subscription(Octomap, topic, _Newest(state, f"octomap on {topic}", apply), 1)
    w.node.get_logger().info(f"octomaps on {topic} become obstacles")
