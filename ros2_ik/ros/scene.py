"""MoveIt's planning scene as ros2_ik keeps it: an immutable :class:`Scene` (the world's
obstacles, the objects attached to the robot, the allowed collision matrix, link padding and
scale), changed by ``moveit_msgs`` messages as rosidl generates them. No rclpy here.

Messages are read by their fields, as rosidl's Python classes give them: a ``byte`` field
(``CollisionObject.operation``) is a ``bytes`` object of length 1 (``b'\\x00'`` ADD, ``b'\\x01'``
REMOVE, ``b'\\x02'`` APPEND, ``b'\\x03'`` MOVE), ``uint8[]`` may be ``bytes`` or ``array``,
``float64[]`` an ``array('d')`` or a NumPy array; a plain int is taken as well (:func:`byte`).

What is honoured (move_group's ``PlanningScene`` semantics):

- ``collision_object`` (``CollisionObject``): ADD (replaces an object of that id), APPEND,
  MOVE (to ``pose``), REMOVE (an empty id: every object); primitives (BOX, SPHERE, CYLINDER,
  CONE as its cylinder, PRISM as its box), meshes (the boxes of the cells of
  ``mesh_resolution`` the mesh passes through, :func:`ros2_ik.world.voxels.mesh_cells`: they
  hold the mesh and reach at most a cell's diagonal past it, so a shelf's compartments stay
  open; an attached object's mesh: its smallest oriented box) and planes (the half-space on the
  side their normal points away from), each pose in ``header.frame_id`` (see
  :class:`~.world_input.Frames`).
- ``attached_collision_object`` (``AttachedCollisionObject``): ADD attaches the object to
  ``link_name`` (its geometry, or with none the world object of that id, which leaves the
  world); it moves with the link and is checked against the world and against every other link
  but ``link_name`` and ``touch_links``. REMOVE detaches it (an empty id: every object of
  ``link_name``, or every object) and puts it back into the world where it is now, as
  move_group does.
- ``planning_scene`` / ``monitored_planning_scene`` (``PlanningScene``): a diff applies its
  world objects, its robot state's attached objects, and replaces the allowed collision matrix
  and the padding / scale of the links it names when it carries them; a full scene
  (``is_diff`` false) replaces all of it.
- The allowed collision matrix: a pair allowed (``entry_values``, or a ``default_entry``) is
  not checked: two links (as the SRDF's disabled pairs), a link and an object (the object's
  obstacles do not touch that link), a link and an attached object.
- Link padding and scale: the links' spheres grown (``radius * scale + padding``).

- ``world.octomap`` (``OctomapWithPose``, binary or full, ``OcTree`` or ``ColorOcTree``): its
  occupied cells become box obstacles ``<octomap>/k`` whose union is exactly those cells
  (:mod:`ros2_ik.world.octomap`, decoded in NumPy), at ``origin`` in ``header.frame_id``; each
  map replaces the last, a whole scene without one removes it, and the allowed collision
  matrix's ``<octomap>`` entries let links touch it. The node's ``collision.ignore_octomap``
  leaves maps out (noted in the log).

What is not: subframes are not used (a pose in a subframe's frame is refused).

A message that cannot be applied raises :class:`~.codes.RequestError` naming the object and
the field; the scene it was applied to is unchanged (every message is applied whole or not
at all).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import IKError
from ..world import MAX_OBSTACLES, Obstacle, World
from .codes import INVALID_REQUEST, RequestError

__all__ = ["Scene", "AttachedObject", "Acm", "byte", "apply_collision_object",
           "apply_attached_object", "apply_planning_scene", "apply_octomap", "replace_octomap",
           "replace_cells", "replace_sensed",
           "members_of", "sensed_members", "collision_model_for", "world_for", "CO_ADD",
           "CO_REMOVE", "CO_APPEND", "CO_MOVE", "OCTOMAP", "CLOUD", "SENSED"]

CO_ADD, CO_REMOVE, CO_APPEND, CO_MOVE = 0, 1, 2, 3  # moveit_msgs/CollisionObject.operation
#: the edge [m] of the cells a world object's mesh is held in (the node's
#: collision.mesh_resolution), and the most boxes one mesh becomes (coarser cells past it)
MESH_RESOLUTION, MESH_BOXES = 0.005, 2000
BOX, SPHERE, CYLINDER, CONE, PRISM = 1, 2, 3, 4, 5  # shape_msgs/SolidPrimitive.type
_OPS = {CO_ADD: "ADD", CO_REMOVE: "REMOVE", CO_APPEND: "APPEND", CO_MOVE: "MOVE"}


def byte(value, what: str) -> int:
    """A ``byte`` / ``uint8`` field as an int: rosidl's ``bytes`` of length 1, or an int."""
    if isinstance(value, (bytes, bytearray)):
        if len(value) != 1:
            raise RequestError(INVALID_REQUEST, f"{what} must be one byte, got {value!r}")
        return value[0]
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RequestError(INVALID_REQUEST, f"{what} must be a byte, got {value!r}") from None


def _floats(values, what: str) -> np.ndarray:
    try:
        a = np.asarray(list(values) if not isinstance(values, np.ndarray) else values,
                       dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise RequestError(INVALID_REQUEST, f"{what} must be numbers") from None
    if not np.all(np.isfinite(a)):
        raise RequestError(INVALID_REQUEST, f"{what} has NaN or infinity; give finite numbers")
    return a


@dataclass(frozen=True)
class AttachedObject:
    """An object attached to a robot link: ``shapes`` (:class:`ros2_ik.model.spheres.Shape`,
    in the link's frame) for the robot's collision model, ``parts`` ((primitive code or
    "mesh", size, T link<-part) ...) to put it back into the world when it is detached."""

    id: str
    link: str
    shapes: tuple
    touch_links: tuple
    parts: tuple = ()


@dataclass(frozen=True)
class Acm:
    """MoveIt's allowed collision matrix: ``entries`` {(a, b) sorted: allowed}, ``defaults``
    {name: allowed}."""

    entries: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)

    def allowed(self, a: str, b: str) -> bool:
        key = (a, b) if a <= b else (b, a)
        hit = self.entries.get(key)
        if hit is not None:
            return hit
        return bool(self.defaults.get(a, False) or self.defaults.get(b, False))

    @property
    def empty(self) -> bool:
        return not self.entries and not self.defaults


@dataclass(frozen=True)
class Scene:
    """What collision-aware answers keep clear of (see the module docstring); ``version``
    counts every change (it is the world version answers report)."""

    world: World = field(default_factory=World)
    attached: tuple = ()          # AttachedObject, by attach order
    acm: Acm = field(default_factory=Acm)
    padding: dict = field(default_factory=dict)   # link -> m
    scale: dict = field(default_factory=dict)     # link -> factor
    object_poses: dict = field(default_factory=dict)  # object id -> its pose (for MOVE)
    #: ((source, why), ...) sensed input whose last message was refused (the octomap, a point
    #: cloud): collision-aware answers are refused until a good one replaces it
    unsupported: tuple = ()

    @property
    def version(self) -> int:
        return self.world.version

    def with_unsupported(self, source: str, why: str | None) -> "Scene":
        """This scene with ``source``'s entry in :attr:`unsupported` set to ``why`` (None:
        cleared)."""
        rest = tuple((s, w) for s, w in self.unsupported if s != source)
        return replace(self, unsupported=rest + (((source, why),) if why else ()))

    def bumped(self, **changes) -> "Scene":
        """A new scene with ``changes`` and a new version (the world's, one more)."""
        world = changes.pop("world", self.world)
        if world.version <= self.world.version:
            world = World(list(world), self.world.version + 1)
        return replace(self, world=world, **changes)


# ---------------------------------------------------------------------- shapes

def _box_mesh(size):
    import trimesh  # noqa: PLC0415

    return trimesh.creation.box(extents=size)


def _primitive(prim, what: str):
    """(kind, size) of a shape_msgs/SolidPrimitive: kind "box", "sphere" or "cylinder" (a cone
    as its cylinder, a prism as its box), size as ros2_ik.world takes it; notes for what was
    approximated."""
    kind = byte(prim.type, f"{what}.type")
    dims = _floats(prim.dimensions, f"{what}.dimensions")
    need = {BOX: 3, SPHERE: 1, CYLINDER: 2, CONE: 2, PRISM: 1}.get(kind)
    if need is None:
        raise RequestError(INVALID_REQUEST, f"{what}.type = {kind} is not BOX (1), SPHERE (2), "
                                            "CYLINDER (3), CONE (4) or PRISM (5)")
    if len(dims) < need or np.any(dims[:need] <= 0):
        raise RequestError(INVALID_REQUEST, f"{what}.dimensions {dims.tolist()} must hold {need} "
                                            "positive sizes for its type")
    if kind == BOX:
        return "box", tuple(dims[:3]), None
    if kind == SPHERE:
        return "sphere", (dims[0],), None
    if kind in (CYLINDER, CONE):  # (height, radius) -> (radius, length)
        return "cylinder", (dims[1], dims[0]), ("a cone is covered by its cylinder"
                                                if kind == CONE else None)
    poly = getattr(prim, "polygon", None)
    pts = [(p.x, p.y) for p in getattr(poly, "points", [])]
    if len(pts) < 3:
        raise RequestError(INVALID_REQUEST, f"{what}: a PRISM needs a polygon of 3 points or more")
    P = _floats([v for p in pts for v in p], f"{what}.polygon").reshape(-1, 2)
    lo, hi = P.min(axis=0), P.max(axis=0)
    return "box", (max(hi[0] - lo[0], 1e-4), max(hi[1] - lo[1], 1e-4), dims[0]), \
        "a prism is covered by its box"


def _mesh_vertices(mesh, what: str) -> np.ndarray:
    V = _floats([c for v in mesh.vertices for c in (v.x, v.y, v.z)], f"{what}.vertices")
    V = V.reshape(-1, 3)
    if len(V) < 3:
        raise RequestError(INVALID_REQUEST, f"{what} has {len(V)} vertices; a mesh needs 3 or "
                                            "more")
    if np.abs(V).max() > 1e4:
        raise RequestError(INVALID_REQUEST, f"{what} has vertices beyond 10 km")
    return V


def _mesh_cells(mesh, what: str, resolution: float, notes: list) -> list:
    """[(size, T mesh<-box)] of boxes whose union is the cells of edge ``resolution`` a
    shape_msgs/Mesh passes through (:func:`ros2_ik.world.voxels.mesh_cells`: they hold the
    mesh; an open shelf stays open), twice as coarse while they would be more than
    :data:`MESH_BOXES` boxes or cells."""
    from ..world import voxels  # noqa: PLC0415

    V = _mesh_vertices(mesh, what)
    try:
        F = np.array([list(t.vertex_indices) for t in mesh.triangles],
                     dtype=np.int64).reshape(-1, 3)
    except (TypeError, ValueError):
        raise RequestError(INVALID_REQUEST, f"{what}.triangles must each hold 3 vertex "
                                            "indices") from None
    if not len(F):
        raise RequestError(INVALID_REQUEST, f"{what} has no triangles")
    if F.min() < 0 or F.max() >= len(V):
        raise RequestError(INVALID_REQUEST, f"{what}.triangles index vertex {int(F.max())}; it "
                                            f"has {len(V)} vertices (0 to {len(V) - 1})")
    res = float(resolution)
    for _ in range(8):
        try:
            centre, size = voxels.boxes(voxels.mesh_cells(V, F, res, what), what)
            if len(centre) <= MESH_BOXES:
                break
        except IKError:  # (too many cells at this resolution)
            pass
        res *= 2.0
    else:
        raise RequestError(INVALID_REQUEST, f"{what}: no resolution up to {res:g} m gives "
                                            f"{MESH_BOXES} boxes or fewer; give a smaller mesh")
    if res != resolution:
        notes.append(f"{what}: held in cells of {res:g} m (collision.mesh_resolution "
                     f"{resolution:g} m would make more than {MESH_BOXES} boxes); they reach "
                     f"at most {res * 3 ** 0.5:.3f} m past the mesh")
    out = []
    for c, s in zip(centre, size):
        T = np.eye(4)
        T[:3, 3] = c
        out.append((tuple(s), T))
    return out


def _mesh_box(mesh, what: str):
    """(T mesh<-box, box size) of the smallest oriented box around a shape_msgs/Mesh."""
    import trimesh  # noqa: PLC0415

    V = _mesh_vertices(mesh, what)
    try:
        to_box, ext = trimesh.bounds.oriented_bounds(V)
        T = np.linalg.inv(to_box)
    except Exception:  # noqa: BLE001 - a flat or degenerate set: its axis-aligned box
        lo, hi = V.min(axis=0), V.max(axis=0)
        T = np.eye(4)
        T[:3, 3] = 0.5 * (lo + hi)
        ext = hi - lo
    return T, tuple(np.maximum(np.asarray(ext, dtype=np.float64), 1e-3))


def _plane_pose(plane, what: str) -> np.ndarray:
    """The pose of the half-space of a shape_msgs/Plane (ax + by + cz + d = 0; the solid side
    is where the normal (a, b, c) points away from)."""
    a, b, c, d = _floats(plane.coef, f"{what}.coef")[:4]
    n = np.array([a, b, c])
    norm = float(np.linalg.norm(n))
    if norm < 1e-9:
        raise RequestError(INVALID_REQUEST, f"{what}.coef has no normal (a, b, c all 0)")
    n = n / norm
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(z, n)
    s, cth = float(np.linalg.norm(axis)), float(np.dot(z, n))
    R = np.eye(3)
    if s > 1e-12:
        K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]],
                      [-axis[1], axis[0], 0]]) / s
        R = np.eye(3) + s * K + (1 - cth) * (K @ K)
    elif cth < 0:
        R = np.diag([1.0, -1.0, -1.0])
    P = np.eye(4)
    P[:3, :3] = R
    P[:3, 3] = -d / norm * n
    return P


def _parts(co, frames, T_obj, what: str, notes: list, mesh_resolution=None) -> list:
    """(shape, size, T base<-part) of every primitive, mesh and plane of a CollisionObject:
    a mesh as the boxes of the cells it passes through (``mesh_resolution`` [m]), or with
    None its smallest oriented box (an attached object's)."""
    out = []
    prims, ppos = list(co.primitives), list(co.primitive_poses)
    meshes, mpos = list(co.meshes), list(co.mesh_poses)
    planes, plpos = list(co.planes), list(co.plane_poses)
    for name, items, poses in (("primitives", prims, ppos), ("meshes", meshes, mpos),
                               ("planes", planes, plpos)):
        if len(items) != len(poses):
            raise RequestError(INVALID_REQUEST, f"{what}: {len(items)} {name} but {len(poses)} "
                                                f"{name[:-1]}_poses; give one pose each")
    for k, (prim, p) in enumerate(zip(prims, ppos)):
        w = f"{what}.primitives[{k}]"
        kind, size, note = _primitive(prim, w)
        if note:
            notes.append(f"{what}: {note}")
        out.append((kind, size, T_obj @ frames.pose(p, "", w + " pose")))
    for k, (mesh, p) in enumerate(zip(meshes, mpos)):
        w = f"{what}.meshes[{k}]"
        if mesh_resolution is not None:
            T_mesh = T_obj @ frames.pose(p, "", w + " pose")
            out += [("box", s, T_mesh @ B) for s, B in _mesh_cells(mesh, w, mesh_resolution,
                                                                   notes)]
            continue
        B, size = _mesh_box(mesh, w)
        out.append(("box", size, T_obj @ frames.pose(p, "", w + " pose") @ B))
        notes.append(f"{what}: mesh {k} is covered by its smallest oriented box "
                     f"({' x '.join(f'{v:.3f}' for v in size)} m)")
    for k, (plane, p) in enumerate(zip(planes, plpos)):
        w = f"{what}.planes[{k}]"
        out.append(("halfspace", (), T_obj @ frames.pose(p, "", w + " pose") @ _plane_pose(plane,
                                                                                         w)))
    return out


def _object_pose(co, frames, what: str) -> np.ndarray:
    frame = co.header.frame_id
    if hasattr(co, "pose"):  # (Iron and later: the object's own pose, parts relative to it)
        return frames.pose(co.pose, frame, what + ".pose")
    return frames.to_base(frame, what + ".header.frame_id")


#: the ids of sensed input's obstacles (``<octomap>/k``, ``<cloud>/k``)
OCTOMAP, CLOUD = "<octomap>", "<cloud>"
SENSED = (OCTOMAP, CLOUD)


def sensed_members(world: World) -> list:
    """The ids of the world's obstacles that sensed input made (an octomap, a point cloud)."""
    return [i for s in SENSED for i in members_of(world, s)]


def members_of(world: World, oid: str) -> list:
    """The ids of the obstacles of object ``oid`` (``oid``, or ``oid/k`` for its parts)."""
    return [i for i in world.ids if i == oid or i.startswith(oid + "/")]


def _obstacles(oid: str, parts, first: int = 0) -> list:
    n = first + len(parts)
    try:
        return [Obstacle.make(oid if n == 1 else f"{oid}/{first + k}", kind, size, T)
                for k, (kind, size, T) in enumerate(parts)]
    except IKError as exc:
        raise RequestError(INVALID_REQUEST, f"object {oid!r}: {exc}") from None


# ---------------------------------------------------------------------- world objects

def apply_collision_object(scene: Scene, co, frames, notes: list, *,
                           mesh_resolution: float = MESH_RESOLUTION) -> Scene:
    """``scene`` changed by a moveit_msgs/CollisionObject (see the module docstring); its
    meshes held in cells of ``mesh_resolution`` [m]."""
    oid = str(co.id)
    what = f"collision object {oid!r}" if oid else "collision object ''"
    op = byte(co.operation, what + ".operation")
    world, poses = scene.world, dict(scene.object_poses)
    if op not in _OPS:
        raise RequestError(INVALID_REQUEST, f"{what}.operation = {op} is not ADD (0), REMOVE "
                                            "(1), APPEND (2) or MOVE (3)")
    if op == CO_REMOVE:
        if not oid:
            keep = sensed_members(world)  # (MoveIt's removeAllCollisionObjects keeps the map)
            return scene.bumped(world=World([world[i] for i in keep], world.version),
                                object_poses={k: v for k, v in poses.items()
                                              if k in SENSED})
        poses.pop(oid, None)
        gone = members_of(world, oid)
        if not gone:
            notes.append(f"{what}: REMOVE of an object the world does not hold (nothing done)")
            return scene
        return scene.bumped(world=world.remove(*gone), object_poses=poses)
    if not oid:
        raise RequestError(INVALID_REQUEST, f"a collision object to {_OPS[op]} needs an id")
    T_obj = _object_pose(co, frames, what)
    if op == CO_MOVE:
        old = poses.get(oid)
        mine = members_of(world, oid)
        if old is None or not mine:
            raise RequestError(INVALID_REQUEST, f"{what}: MOVE of an object the world does not "
                                                f"hold; it holds {sorted(poses)[:20]}")
        delta = T_obj @ np.linalg.inv(old)
        for i in mine:
            world = world.move(i, delta @ world[i].pose)
        poses[oid] = T_obj
        return scene.bumped(world=world, object_poses=poses)
    parts = _parts(co, frames, T_obj, what, notes, mesh_resolution)
    if not parts:
        raise RequestError(INVALID_REQUEST, f"{what}: {_OPS[op]} with no primitives, meshes or "
                                            "planes")
    if op == CO_ADD:
        gone = members_of(world, oid)
        if gone:
            world = world.remove(*gone)
        first = 0
    else:
        first = len(members_of(world, oid))
        if not first:
            raise RequestError(INVALID_REQUEST, f"{what}: APPEND to an object the world does "
                                                "not hold (ADD it first)")
    if len(world) + len(parts) > 10_000:
        raise RequestError(INVALID_REQUEST, f"{what}: the world would hold more than 10000 "
                                            "obstacles; merge small ones")
    poses[oid] = T_obj
    return scene.bumped(world=world.add(*_obstacles(oid, parts, first)), object_poses=poses)


# ---------------------------------------------------------------------- attached objects

def _shape_of(kind, size, T):
    """A :class:`~ros2_ik.model.spheres.Shape` of a primitive at T."""
    import trimesh  # noqa: PLC0415

    from ..model.spheres import Shape  # noqa: PLC0415

    if kind == "box":
        m, prim = trimesh.creation.box(extents=size), ("box", T, tuple(0.5 * np.asarray(size)))
    elif kind == "sphere":
        m, prim = trimesh.creation.icosphere(subdivisions=3, radius=size[0]), ("sphere", T, size)
    else:
        m = trimesh.creation.cylinder(radius=size[0], height=size[1], sections=64)
        prim = ("cylinder", T, (size[0], 0.5 * size[1]))
    V = np.asarray(m.vertices) @ T[:3, :3].T + T[:3, 3]
    return Shape(V, np.asarray(m.faces, dtype=np.int64), prim)


def apply_attached_object(scene: Scene, aco, frames, robot, notes: list) -> Scene:
    """``scene`` changed by a moveit_msgs/AttachedCollisionObject (see the module
    docstring). ``robot``: the :class:`~.robot.LoadedRobot` (its links; FK for the object's
    pose in the link's frame)."""
    co = aco.object
    oid, link = str(co.id), str(aco.link_name)
    what = f"attached object {oid!r}"
    op = byte(co.operation, what + ".object.operation")
    attached = list(scene.attached)
    if op == CO_REMOVE:
        keep, gone = [], []
        for a in attached:
            (gone if (not oid or a.id == oid) and (not link or a.link == link) else keep).append(a)
        if not gone:
            notes.append(f"{what}: REMOVE of an object not attached (nothing done)")
            return scene
        world, poses = scene.world, dict(scene.object_poses)
        for a in gone:  # back into the world, where it is now (move_group does so)
            T_link = frames.to_base(a.link, f"{what} (detached from {a.link!r})")
            parts = [(kind, size, T_link @ T) for kind, size, T in a.parts]
            if parts:
                world = world.remove(*members_of(world, a.id)) if members_of(world, a.id) else world
                world = world.add(*_obstacles(a.id, parts))
                poses[a.id] = T_link
        return scene.bumped(attached=tuple(keep), world=world, object_poses=poses)
    if op not in (CO_ADD, CO_APPEND):
        raise RequestError(INVALID_REQUEST, f"{what}.object.operation = {op}: an attached object "
                                            "takes ADD, APPEND or REMOVE")
    if not oid:
        raise RequestError(INVALID_REQUEST, "an attached object needs an id")
    if robot is None:
        raise RequestError(INVALID_REQUEST, f"{what}: no robot model loaded yet to attach it to")
    try:
        robot.model.link_index(link)
    except IKError:
        raise RequestError(INVALID_REQUEST, f"{what}.link_name {link!r} is not a link of robot "
                                            f"{robot.name!r}") from None
    world, poses = scene.world, dict(scene.object_poses)
    has_geometry = bool(len(co.primitives) or len(co.meshes) or len(co.planes))
    T_link_inv = np.linalg.inv(frames.to_base(link, what + ".link_name"))
    if has_geometry:
        if len(co.planes):
            raise RequestError(INVALID_REQUEST, f"{what}.object.planes: a plane cannot be "
                                                "attached to a link")
        T_obj = _object_pose(co, frames, what + ".object")
        parts = [(k, s, T_link_inv @ T) for k, s, T in _parts(co, frames, T_obj, what, notes)]
    else:  # the world object of that id is attached (and leaves the world)
        mine = members_of(world, oid)
        if not mine:
            raise RequestError(INVALID_REQUEST, f"{what}: no geometry given and no world "
                                                "object of that id to attach")
        parts = []
        for i in mine:
            ob = world[i]
            if ob.shape == "halfspace":
                raise RequestError(INVALID_REQUEST, f"{what}: a plane cannot be attached")
            kind = "cylinder" if ob.shape == "capsule" else ob.shape
            parts.append((kind, ob.size, T_link_inv @ ob.pose))
    if members_of(world, oid):  # it is the robot's now, not the world's
        world = world.remove(*members_of(world, oid))
        poses.pop(oid, None)
    old = next((a for a in attached if a.id == oid), None)
    if op == CO_APPEND and old is not None:
        parts = list(old.parts) + parts
    shapes = tuple(_shape_of(k, s, T) for k, s, T in parts)
    new = AttachedObject(oid, link, shapes, tuple(str(t) for t in aco.touch_links), tuple(parts))
    attached = [a for a in attached if a.id != oid] + [new]
    return scene.bumped(attached=tuple(attached), world=world, object_poses=poses)


# ---------------------------------------------------------------------- the planning scene

def _acm(msg, what: str) -> Acm:
    names = [str(n) for n in msg.entry_names]
    values = list(msg.entry_values)
    if len(values) != len(names):
        raise RequestError(INVALID_REQUEST, f"{what}: {len(names)} entry_names but "
                                            f"{len(values)} entry_values")
    entries = {}
    for i, (a, row) in enumerate(zip(names, values)):
        enabled = list(row.enabled)
        if len(enabled) != len(names):
            raise RequestError(INVALID_REQUEST, f"{what}.entry_values[{i}].enabled has "
                                                f"{len(enabled)} values for {len(names)} names")
        for j, b in enumerate(names):
            if i != j:
                entries[(a, b) if a <= b else (b, a)] = bool(enabled[j])
    dn, dv = [str(n) for n in msg.default_entry_names], list(msg.default_entry_values)
    if len(dn) != len(dv):
        raise RequestError(INVALID_REQUEST, f"{what}: {len(dn)} default_entry_names but "
                                            f"{len(dv)} default_entry_values")
    return Acm(entries, {a: bool(v) for a, v in zip(dn, dv)})


def apply_planning_scene(scene: Scene, msg, frames, robot, notes: list, *,
                         octomap_ok: bool = False,
                         mesh_resolution: float = MESH_RESOLUTION,
                         octomap_superseded: bool = False) -> Scene:
    """``scene`` changed by a moveit_msgs/PlanningScene (a diff, or a full scene that
    replaces it; see the module docstring). ``octomap_superseded``: a newer diff with a map
    waits to be applied next, so a diff's map is not decoded (the last map stays until that
    one replaces it; the rest of the diff is applied)."""
    diff = bool(getattr(msg, "is_diff", False))
    # (a whole scene replaces its own parts; a point cloud is not one of them)
    new = scene if diff else Scene(
        world=World([scene.world[i] for i in members_of(scene.world, CLOUD)],
                    scene.world.version),
        object_poses={k: v for k, v in scene.object_poses.items() if k == CLOUD},
        unsupported=tuple(x for x in scene.unsupported if x[0] != "octomap"))
    w = msg.world
    for k, co in enumerate(w.collision_objects):
        new = apply_collision_object(new, co, frames, notes,
                                     mesh_resolution=mesh_resolution)
    rs = msg.robot_state
    if not diff or len(rs.attached_collision_objects):
        if not diff:
            new = replace(new, attached=())
        for aco in rs.attached_collision_objects:
            new = apply_attached_object(new, aco, frames, robot, notes)
    acm = msg.allowed_collision_matrix
    if not diff or len(acm.entry_names) or len(acm.default_entry_names):
        new = replace(new, acm=_acm(acm, "planning scene allowed_collision_matrix"))
    padding = dict(new.padding) if diff else {}
    for k, lp in enumerate(msg.link_padding):
        v = float(lp.padding)
        if not (np.isfinite(v) and 0.0 <= v <= 1.0):
            raise RequestError(INVALID_REQUEST, f"planning scene link_padding[{k}] "
                                                f"({lp.link_name!r}) = {v}: give a padding in "
                                                "[0, 1] m")
        padding[str(lp.link_name)] = v
    scale = dict(new.scale) if diff else {}
    for k, ls in enumerate(msg.link_scale):
        v = float(ls.scale)
        if not (np.isfinite(v) and 0.0 < v <= 100.0):
            raise RequestError(INVALID_REQUEST, f"planning scene link_scale[{k}] "
                                                f"({ls.link_name!r}) = {v}: give a scale in "
                                                "(0, 100]")
        scale[str(ls.link_name)] = v
    om = getattr(w, "octomap", None)
    data = getattr(getattr(om, "octomap", None), "data", ())
    if len(data) and diff and octomap_superseded:
        notes.append("world.octomap: not decoded (a newer map waits, applied next)")
    elif len(data) and octomap_ok:
        notes.append("world.octomap: left out of the world (collision.ignore_octomap is true): "
                     "its voxels are not avoided")
        new = replace_cells(new, OCTOMAP).with_unsupported("octomap", None)
    elif len(data) or not diff:  # a map replaces the last; a whole scene without one clears it
        new = replace_octomap(new, om if len(data) else None, frames)
    return new.bumped(padding=padding, scale=scale)


def replace_cells(scene: Scene, prefix: str, cells=None, T=None, *, what: str = "",
                  hint: str = "give a coarser resolution") -> Scene:
    """``scene`` with the obstacles ``prefix/k`` (a map's or a cloud's) replaced by the boxes
    ``cells`` = (centres, sizes) at pose ``T`` (None: removed); more than
    :data:`ros2_ik.world.MAX_OBSTACLES` obstacles in all raise :class:`RequestError` (``hint``:
    what to do)."""
    from ..world import voxels  # noqa: PLC0415

    world, poses = scene.world, dict(scene.object_poses)
    gone = members_of(world, prefix)
    if gone:
        world = world.remove(*gone)
    poses.pop(prefix, None)
    if cells is not None:
        centre, size = cells
        if len(world) + len(centre) > MAX_OBSTACLES:
            raise RequestError(INVALID_REQUEST, f"{what}: its {len(centre)} boxes and the "
                                                f"{len(world)} other obstacles exceed "
                                                f"{MAX_OBSTACLES}; {hint}")
        world = world.add(*voxels.obstacles(centre, size, T, prefix=prefix))
        poses[prefix] = T
    return replace(scene, world=world, object_poses=poses)


def replace_sensed(scene: Scene, source: str, prefix: str, apply) -> Scene:
    """``apply()`` (the scene with a new map or cloud, or :class:`RequestError`); input that
    cannot be used removes the last ``prefix/k`` and marks the scene (:attr:`Scene.
    unsupported`: collision-aware answers are refused, naming it, until a good one comes)."""
    try:
        return apply().with_unsupported(source, None)
    except RequestError as exc:
        return replace_cells(scene, prefix).with_unsupported(source, exc.message)


def replace_octomap(scene: Scene, msg, frames) -> Scene:
    """:func:`apply_octomap` through :func:`replace_sensed`."""
    return replace_sensed(scene, "octomap", OCTOMAP, lambda: apply_octomap(scene, msg, frames))


def _translation(p) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = p
    return T


def apply_octomap(scene: Scene, msg, frames) -> Scene:
    """``scene`` with its octomap replaced by ``msg`` (an octomap_msgs/OctomapWithPose; None:
    removed): the map's occupied cells as box obstacles ``<octomap>/k`` (exactly their union,
    :mod:`ros2_ik.world.octomap`) at the map's origin in ``header.frame_id``. A malformed map
    raises :class:`RequestError` naming what was wrong (the scene is unchanged)."""
    from ..world import octomap  # noqa: PLC0415

    if msg is None:
        return replace_cells(scene, OCTOMAP)
    what = "world.octomap"
    o, p = msg.origin.orientation, msg.origin.position
    if o.x == o.y == o.z == o.w == 0.0:  # (an orientation left unset: none, as MoveIt)
        T = frames.to_base(str(msg.header.frame_id), what) @ _translation(
            _floats([p.x, p.y, p.z], what + ".origin.position"))
    else:
        T = frames.pose(msg.origin, str(msg.header.frame_id), what)
    m = msg.octomap
    try:
        leaves = octomap.decode(m.data, binary=bool(m.binary), resolution=m.resolution,
                                id=str(m.id), what=what)
        cells = octomap.boxes(leaves, what)
    except IKError as exc:
        raise RequestError(INVALID_REQUEST, str(exc)) from None
    return replace_cells(scene, OCTOMAP, cells, T, what=what)


# ---------------------------------------------------------------------- for a solve

def collision_model_for(cm, scene: Scene, model):
    """The robot's collision model ``cm`` (of ``model``) with the scene applied: padding and
    scale, the link pairs the allowed collision matrix allows, and the attached objects (each
    on its link, touching its link and ``touch_links``, and the links the matrix allows)."""
    if scene.padding or scale_changes(scene):
        pad = {k: v for k, v in scene.padding.items() if k in cm.link_names}
        sc = {k: v for k, v in scene.scale.items() if k in cm.link_names}
        if pad or sc:
            cm = cm.with_padding(pad, sc)
    if not scene.acm.empty:
        names = cm.link_names
        allow = [(names[a], names[b]) for a, b in cm.pairs.tolist()
                 if scene.acm.allowed(names[a], names[b])]
        if allow:
            cm = cm.with_disabled(allow, "allowed collision matrix")
    for a in scene.attached:
        touch = set(a.touch_links)
        touch |= {n for n in cm.link_names if scene.acm.allowed(n, a.id)}
        cm = cm.with_attached(a.id, a.link, shapes=list(a.shapes), touch_links=sorted(touch),
                              model=model)
    return cm


def scale_changes(scene: Scene) -> bool:
    return any(v != 1.0 for v in scene.scale.values())


def world_for(scene: Scene, cm) -> World:
    """The scene's world with each obstacle's ``touch`` from the allowed collision matrix
    (the collision links allowed to touch its object)."""
    if scene.acm.empty or not len(scene.world):
        return scene.world
    names = cm.link_names
    changed = []
    for ob in scene.world:
        oid = ob.id
        if oid not in scene.object_poses and oid.rsplit("/", 1)[0] in scene.object_poses:
            oid = oid.rsplit("/", 1)[0]  # one of several parts of an object
        touch = {n for n in names if scene.acm.allowed(n, oid)}
        changed.append(ob.with_touch(sorted(touch | set(ob.touch))) if touch else ob)
    return World(changed, scene.world.version)
