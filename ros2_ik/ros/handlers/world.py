"""The node's world (the obstacles collision-aware answers keep clear of): ros2_ik's own
``~/world`` topic and ``~/update_world`` service (ros2_ik_interfaces/WorldUpdate), the
``collision.world_file`` parameter, and, when ``moveit_msgs`` is importable, MoveIt's planning
scene (``collision_object``, ``planning_scene``, ``monitored_planning_scene``).

Every change runs on the executor thread and replaces the world by one reference assignment
(:class:`ros2_ik.world.World` is immutable): a request keeps the world it was taken with, and
its answer says which version that was. A change that cannot be applied (an unknown frame, a
degenerate primitive, an id that is not there) is refused with the reason (the service's
answer, or a warning for a topic) and the world stays as it was.
"""

from __future__ import annotations

from ...errors import IKError
from ...world import World, world_from_yaml
from .. import codes
from ..codes import RequestError
from ..world_input import Frames, apply_collision_object, apply_planning_scene, apply_update

__all__ = ["WorldState", "register"]


class WorldState:
    """The world in use (``world``) and its changes; executor thread only, except reading
    ``world`` (one reference)."""

    def __init__(self, w):
        self.w = w
        self.world = World()
        self._object_poses: dict = {}  # MoveIt object id -> its pose (for MOVE)
        self.on_change = lambda world: None

    def frames(self) -> Frames:
        robot = self.w.robot()
        q = None
        if robot is not None:
            try:
                q = self.w.context().current_q(robot)
            except Exception:  # noqa: BLE001 - no joint states yet: the neutral state
                q = None
        aliases = tuple(a.strip() for a in self.w.settings().collision_base_frame_aliases
                        .split(",") if a.strip())
        return Frames(robot, q, aliases)

    def _set(self, world: World, why: str) -> None:
        self.world = world
        self.w.node.get_logger().info(f"world version {world.version}: {len(world)} obstacles "
                                      f"({why})")
        self.on_change(world)

    def update(self, msg, why: str) -> World:
        """Apply a WorldUpdate (RequestError when it cannot be)."""
        new = apply_update(self.world, msg, self.frames())
        self._set(new, why)
        return new

    def moveit_object(self, co) -> None:
        warned = []
        new = apply_collision_object(self.world, co, self.frames(), self._object_poses,
                                     warned.append)
        for t in warned:
            self.w.node.get_logger().warning(t)
        self._set(new, f"collision_object {co.id!r}")

    def moveit_scene(self, scene, topic: str) -> None:
        warned = []
        new = apply_planning_scene(self.world, scene, self.frames(), self._object_poses,
                                   warned.append)
        for t in warned:
            self.w.node.get_logger().warning(t)
        if new is not self.world:
            self._set(new, topic)

    def load_file(self, path: str) -> None:
        """The ``collision.world_file`` parameter's world (replaces the world)."""
        if not path:
            return
        try:
            with open(path, encoding="utf-8") as f:
                loaded = world_from_yaml(f.read(), self.world.version + 1)
        except (OSError, IKError) as exc:
            self.w.node.get_logger().error(f"collision.world_file {path!r} not loaded: {exc}; "
                                           "the world stays as it was")
            return
        self._set(loaded, f"collision.world_file {path}")


def register(w) -> WorldState:
    """The world's topic, service and (with moveit_msgs) planning-scene subscriptions."""
    from ros2_ik_interfaces.msg import WorldUpdate  # noqa: PLC0415
    from ros2_ik_interfaces.srv import UpdateWorld  # noqa: PLC0415

    state = WorldState(w)
    log = w.node.get_logger()

    def on_topic(msg):
        try:
            state.update(msg, "~/world")
        except RequestError as exc:
            log.warning(f"~/world update refused: {exc.message}")
        except Exception as exc:  # noqa: BLE001 - never let a message stop the node
            log.warning(f"~/world update refused: {type(exc).__name__}: {exc}")

    w.node.create_subscription(WorldUpdate, "~/world", on_topic, 100)

    def answer(ctx, req, resp):
        try:
            state.update(req.update, "~/update_world")
            resp.error_code.val = codes.SUCCESS
        except RequestError as exc:
            resp.error_code.val = exc.code
            resp.message = exc.message
        resp.version = state.world.version
        resp.ids = state.world.ids
        return resp

    w.service(UpdateWorld, "~/update_world", answer, inline=lambda req: True)

    try:
        from moveit_msgs.msg import CollisionObject, PlanningScene  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - no moveit_msgs: ros2_ik's own world interface only
        CollisionObject = PlanningScene = None
    if CollisionObject is not None:

        def guarded(fn, topic):
            def cb(msg):
                try:
                    fn(msg)
                except RequestError as exc:
                    log.warning(f"{topic} not applied: {exc.message}")
                except Exception as exc:  # noqa: BLE001
                    log.warning(f"{topic} not applied: {type(exc).__name__}: {exc}")
            return cb

        w.node.create_subscription(CollisionObject, "collision_object",
                                   guarded(state.moveit_object, "collision_object"), 100)
        for topic in ("planning_scene", "monitored_planning_scene"):
            w.node.create_subscription(
                PlanningScene, topic,
                guarded(lambda m, t=topic: state.moveit_scene(m, t), topic), 10)
        log.info("moveit_msgs found: the world also follows collision_object, planning_scene and "
                 "monitored_planning_scene")
    return state
