"""MoveIt's planning scene with the message classes rosidl generates (test/interfaces: the
moveit_msgs definitions, built by scripts/setup.sh): every operation, primitives, meshes,
planes, attached objects, the allowed collision matrix, padding, full scenes and diffs, and
bad messages refused whole with the object and the field named. The node's side (over DDS) is
test_ros_moveit_scene.py."""

from __future__ import annotations

import array

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")
moveit_msgs = pytest.importorskip("moveit_msgs", reason="the test build of moveit_msgs is not "
                                                        "installed; run make setup")

from geometry_msgs.msg import Point, Pose  # noqa: E402
from moveit_msgs.msg import (AllowedCollisionEntry, AttachedCollisionObject,  # noqa: E402
                             CollisionObject, LinkPadding, PlanningScene)
from shape_msgs.msg import Mesh, MeshTriangle, Plane, SolidPrimitive  # noqa: E402

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.ik.collision import CollisionObjective, clearance  # noqa: E402
from ros2_ik.model.collision import collision_model  # noqa: E402
from ros2_ik.ros.codes import RequestError  # noqa: E402
from ros2_ik.ros.robot import build_robot  # noqa: E402
from ros2_ik.ros.scene import (Scene, apply_attached_object,  # noqa: E402
                               apply_collision_object, apply_planning_scene, byte,
                               collision_model_for, world_for)
from ros2_ik.ros.world_input import Frames  # noqa: E402
from ros2_ik import robots  # noqa: E402


@pytest.fixture(scope="module")
def robot():
    r = build_robot(robots.urdf_string("panda"), source="test")
    return r


def _pose(xyz, quat=(0.0, 0.0, 0.0, 1.0)):
    p = Pose()
    p.position = Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = map(float, quat)
    return p


def _prim(kind, dims):
    p = SolidPrimitive()
    p.type = kind
    p.dimensions = [float(d) for d in dims]
    return p


def _co(oid, op, prims=(), frame="world", pose=(0, 0, 0), meshes=(), planes=()):
    co = CollisionObject()
    co.header.frame_id = frame
    co.id = oid
    co.pose = _pose(pose)
    co.primitives = [p for p, _ in prims]
    co.primitive_poses = [_pose(x) for _, x in prims]
    co.meshes = [m for m, _ in meshes]
    co.mesh_poses = [_pose(x) for _, x in meshes]
    co.planes = [p for p, _ in planes]
    co.plane_poses = [_pose(x) for _, x in planes]
    co.operation = op
    return co


def _frames(robot, q=None):
    return Frames(robot, robot.model.neutral_q() if q is None else q, ("world",))


def test_rosidl_gives_bytes_for_byte_fields():
    """What the node must read: a byte field is bytes, as are its constants."""
    co = CollisionObject()
    assert co.operation == b"\x00" and CollisionObject.MOVE == b"\x03"
    assert isinstance(CollisionObject.ADD, bytes)
    assert byte(CollisionObject.APPEND, "op") == 2 and byte(3, "op") == 3
    with pytest.raises(RequestError, match="one byte"):
        byte(b"\x00\x01", "op")
    with pytest.raises(RequestError, match="must be a byte"):
        byte("ADD", "op")


def test_every_operation_as_move_group_sends_it(robot):
    f = _frames(robot)
    notes = []
    s = apply_collision_object(Scene(), _co("table", CollisionObject.ADD,
                                            [(_prim(SolidPrimitive.BOX, (1, 1, 0.1)),
                                              (0.5, 0, -0.05))]), f, notes)
    assert s.world.ids == ["table"] and s.world["table"].size == (1.0, 1.0, 0.1)
    v1 = s.version
    s = apply_collision_object(s, _co("parts", CollisionObject.ADD,
                                      [(_prim(SolidPrimitive.SPHERE, (0.05,)), (0.3, 0.2, 0.3)),
                                       (_prim(SolidPrimitive.CYLINDER, (0.2, 0.04)),
                                        (0.3, -0.2, 0.3))]), f, notes)
    assert sorted(s.world.ids) == ["parts/0", "parts/1", "table"]
    assert s.world["parts/1"].shape == "cylinder" and s.world["parts/1"].size == (0.04, 0.2)
    s = apply_collision_object(s, _co("parts", CollisionObject.APPEND,
                                      [(_prim(SolidPrimitive.CONE, (0.1, 0.03)),
                                        (0.3, 0.0, 0.6))]), f, notes)
    assert "parts/2" in s.world.ids and any("cone" in n for n in notes)
    s = apply_collision_object(s, _co("parts", CollisionObject.MOVE, pose=(0.1, 0.0, 0.0)),
                               f, notes)
    np.testing.assert_allclose(s.world["parts/0"].pose[:3, 3], (0.4, 0.2, 0.3))
    s = apply_collision_object(s, _co("parts", CollisionObject.REMOVE), f, notes)
    assert s.world.ids == ["table"] and s.version > v1
    s = apply_collision_object(s, _co("", CollisionObject.REMOVE), f, notes)
    assert s.world.ids == []


def test_meshes_planes_and_frames(robot):
    f = _frames(robot)
    notes = []
    mesh = Mesh()
    V = np.array([[0, 0, 0], [0.2, 0, 0], [0, 0.1, 0], [0, 0, 0.05]], dtype=float)
    mesh.vertices = [Point(x=float(a), y=float(b), z=float(c)) for a, b, c in V]
    for tri in ([0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]):
        t = MeshTriangle()
        t.vertex_indices = array.array("I", tri)
        mesh.triangles.append(t)
    plane = Plane()
    plane.coef = [0.0, 0.0, 1.0, -0.02]  # z = 0.02, solid below
    s = apply_collision_object(Scene(), _co("thing", CollisionObject.ADD,
                                            meshes=[(mesh, (0.5, 0, 0.5))],
                                            planes=[(plane, (0, 0, 0))]), f, notes)
    ids = s.world.ids
    floor = s.world[ids[-1]]
    cells = [s.world[i] for i in ids[:-1]]
    assert floor.shape == "halfspace" and cells and all(b.shape == "box" for b in cells)
    # the mesh's cells hold every point of its triangles, and reach at most a cell's diagonal
    # (5 mm cells) past it
    import trimesh

    tm = trimesh.Trimesh(V + [0.5, 0, 0.5], [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])
    P = tm.sample(5000, seed=1)
    inside = np.zeros(len(P), dtype=bool)
    for b in cells:
        inside |= np.all(np.abs(P - b.pose[:3, 3]) <= 0.5 * np.asarray(b.size) + 1e-9, axis=1)
    assert inside.all()
    for b in cells:
        corners = b.pose[:3, 3] + 0.5 * np.asarray(b.size) * np.array(
            [[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)])
        _, d, _ = trimesh.proximity.closest_point(tm, corners)
        assert d.max() <= 0.005 * 3 ** 0.5 + 1e-9  # (a box's corner is a cell's corner)
    assert abs(floor.pose[2, 3] - 0.02) < 1e-12
    # attached, the mesh is its smallest oriented box (a link's spheres are fitted to it)
    aco = AttachedCollisionObject()
    aco.link_name = "panda_hand"
    aco.object = _co("held", CollisionObject.ADD, meshes=[(mesh, (0, 0, 0.1))],
                     frame="panda_hand")
    s2 = apply_attached_object(Scene(), aco, f, robot, notes)
    assert s2.attached[0].parts[0][0] == "box" and len(s2.attached[0].parts) == 1
    assert any("oriented box" in n for n in notes)
    # a pose in a link's frame is placed by FK at the robot's state
    s = apply_collision_object(Scene(), _co("on_hand", CollisionObject.ADD,
                                            [(_prim(SolidPrimitive.SPHERE, (0.02,)), (0, 0, 0))],
                                            frame="panda_hand"), f, notes)
    from ros2_ik import fk_frames

    T = np.asarray(fk_frames(robot.model, robot.model.neutral_q()[None], ["panda_hand"]))[0, 0]
    np.testing.assert_allclose(s.world["on_hand"].pose[:3, 3], T[:3, 3], atol=1e-12)


@pytest.mark.parametrize("field,build,words", [
    ("operation", lambda: _co("x", b"\x07"), ".operation = 7"),
    ("frame", lambda: _co("x", CollisionObject.ADD, [(_prim(1, (1, 1, 1)), (0, 0, 0))],
                          frame="map"), "frame 'map'"),
    ("dimensions", lambda: _co("x", CollisionObject.ADD, [(_prim(1, (1, 1)), (0, 0, 0))]),
     "primitives[0].dimensions"),
    ("type", lambda: _co("x", CollisionObject.ADD, [(_prim(9, (1,)), (0, 0, 0))]),
     "primitives[0].type = 9"),
    ("nan", lambda: _co("x", CollisionObject.ADD, [(_prim(2, (0.1,)), (0, 0, float("nan")))]),
     "NaN"),
    ("move", lambda: _co("nothere", CollisionObject.MOVE), "MOVE of an object"),
    ("append", lambda: _co("nothere", CollisionObject.APPEND,
                           [(_prim(2, (0.1,)), (0, 0, 0))]), "APPEND to an object"),
    ("empty", lambda: _co("x", CollisionObject.ADD), "no primitives, meshes or planes"),
    ("noid", lambda: _co("", CollisionObject.ADD, [(_prim(2, (0.1,)), (0, 0, 0))]),
     "needs an id"),
])
def test_a_bad_object_is_refused_naming_it_and_the_scene_stays(robot, field, build, words):
    s = apply_collision_object(Scene(), _co("keep", CollisionObject.ADD,
                                            [(_prim(2, (0.1,)), (1, 1, 1))]), _frames(robot), [])
    with pytest.raises(RequestError) as exc:
        apply_collision_object(s, build(), _frames(robot), [])
    assert words in exc.value.message, exc.value.message
    assert s.world.ids == ["keep"]


def test_attached_object_rides_on_its_link_and_goes_back_into_the_world(robot):
    f = _frames(robot)
    m = robot.model
    cm = robot.collision_model()
    aco = AttachedCollisionObject()
    aco.link_name = "panda_hand"
    aco.object = _co("grasped", CollisionObject.ADD, [(_prim(SolidPrimitive.BOX,
                                                             (0.04, 0.04, 0.12)),
                                                       (0, 0, 0.16))], frame="panda_hand")
    aco.touch_links = ["panda_hand"]
    s = apply_attached_object(Scene(), aco, f, robot, [])
    assert [a.id for a in s.attached] == ["grasped"] and s.world.ids == []
    cm2, world = robot.scene_collisions(cm, s)
    assert "grasped" in cm2.link_names and cm2.num_spheres > cm.num_spheres
    c = cm2.link_names.index("grasped")
    named = {(cm2.link_names[a], cm2.link_names[b]) for a, b in cm2.pairs}
    assert ("panda_link0", "grasped") in named and ("panda_hand", "grasped") not in named
    # the spheres cover the box where it is on the hand, at any configuration
    q = m.random_q(np.random.default_rng(0), 5)
    from ros2_ik import fk_frames

    T = np.asarray(fk_frames(m, q, ["panda_hand"]))[:, 0]
    sl = cm2.spheres_of(c)
    for k in range(5):
        P = np.array([[x, y, z] for x in (-0.02, 0.02) for y in (-0.02, 0.02)
                      for z in (0.10, 0.22)])
        P = P @ T[k, :3, :3].T + T[k, :3, 3]
        Tl = T[k]  # the anchor of a link of the model is itself
        cen = cm2.center[sl] @ Tl[:3, :3].T + Tl[:3, 3]
        d = np.linalg.norm(P[:, None] - cen[None], axis=2) - cm2.radius[sl][None]
        assert d.min(axis=1).max() <= 1e-9
    # an obstacle where the object is (not where the hand is): the objective sees it
    ball = np.asarray(fk_frames(m, m.neutral_q()[None], ["panda_hand"]))[0, 0] @ np.array(
        [0, 0, 0.22, 1.0])
    s2 = apply_collision_object(s, _co("ball", CollisionObject.ADD,
                                       [(_prim(SolidPrimitive.SPHERE, (0.03,)), ball[:3])]),
                                f, [])
    cm3, world3 = robot.scene_collisions(cm, s2)
    d, k, describe = clearance(m, cm3, m.neutral_q()[None], world3)
    assert d[0] < 0 and "grasped" in describe(int(k[0]))
    # detached: back into the world at the hand's place
    det = AttachedCollisionObject()
    det.link_name = "panda_hand"
    det.object.id = "grasped"
    det.object.operation = CollisionObject.REMOVE
    s3 = apply_attached_object(s2, det, f, robot, [])
    assert s3.attached == () and "grasped" in s3.world.ids


def test_allowed_collision_matrix_padding_and_full_scenes(robot):
    f = _frames(robot)
    cm = robot.collision_model()
    sc = PlanningScene()
    sc.is_diff = True
    sc.world.collision_objects = [_co("shelf", CollisionObject.ADD,
                                      [(_prim(SolidPrimitive.BOX, (0.2, 0.2, 0.2)),
                                        (0.5, 0, 0.5))])]
    acm = sc.allowed_collision_matrix
    acm.entry_names = ["panda_hand", "shelf", "panda_link0", "panda_link6"]
    for i in range(4):
        e = AllowedCollisionEntry()
        e.enabled = [False] * 4
        acm.entry_values.append(e)
    acm.entry_values[0].enabled[1] = acm.entry_values[1].enabled[0] = True   # hand - shelf
    acm.entry_values[2].enabled[3] = acm.entry_values[3].enabled[2] = True   # link0 - link6
    lp = LinkPadding()
    lp.link_name, lp.padding = "panda_link5", 0.02
    sc.link_padding = [lp]
    s = apply_planning_scene(Scene(), sc, f, robot, [])
    cm2, world = robot.scene_collisions(cm, s)
    assert world["shelf"].touch == ("panda_hand",)
    named = {(cm2.link_names[a], cm2.link_names[b]) for a, b in cm2.pairs}
    assert ("panda_link0", "panda_link6") not in named
    c5 = cm.link_names.index("panda_link5")
    np.testing.assert_allclose(cm2.radius[cm2.spheres_of(c5)],
                               cm.radius[cm.spheres_of(c5)] + 0.02)
    # the hand is not checked against the shelf, the other links are
    obj = CollisionObjective(robot.model, cm2, world)
    assert obj.skip[0, cm2.link_names.index("panda_hand")]
    assert not obj.skip[0, cm2.link_names.index("panda_link7")]
    # a full scene replaces everything: a new world, no padding, no allowed pairs
    full = PlanningScene()
    full.is_diff = False
    full.world.collision_objects = [_co("only", CollisionObject.ADD,
                                        [(_prim(SolidPrimitive.SPHERE, (0.1,)), (0, 0, 2))])]
    s2 = apply_planning_scene(s, full, f, robot, [])
    assert s2.world.ids == ["only"] and s2.padding == {} and s2.acm.empty
    assert s2.version > s.version


def _octomap_scene(data, binary, frame="world", origin=(0, 0, 0), res=0.02, diff=True,
                   tree_id="OcTree"):
    sc = PlanningScene()
    sc.is_diff = diff
    o = sc.world.octomap
    o.header.frame_id = frame
    o.origin = _pose(origin)
    o.octomap.binary, o.octomap.id, o.octomap.resolution = binary, tree_id, float(res)
    o.octomap.data = array.array("b", np.frombuffer(data, np.int8).tolist())
    return sc


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "full"])
def test_the_scenes_octomap_is_its_occupied_cells_replaced_and_allowed(robot, binary):
    """world.octomap written by OctoMap itself (octomap-python), as move_group carries it:
    its occupied cells become exact boxes at its origin in its frame; the next map replaces
    it, a whole scene without one removes it, the allowed collision matrix's <octomap> lets a
    link touch it, a malformed map is an error and the scene keeps its last good map."""
    octomap = pytest.importorskip("octomap", reason="octomap-python is not installed")
    t = octomap.OcTree(0.02)
    for x in np.arange(0.0, 0.1, 0.01):  # a 10 x 4 x 2 cm slab of cells
        for y in np.arange(0.0, 0.04, 0.01):
            for z in np.arange(0.0, 0.02, 0.01):
                t.updateNode(np.array([x, y, z]), True)
    t.updateInnerOccupancy()
    data = (t.writeBinary() if binary else t.write()).partition(b"\ndata\n")[2]
    f = _frames(robot)
    s = apply_collision_object(Scene(), _co("box", CollisionObject.ADD,
                                            [(_prim(SolidPrimitive.BOX, (0.1, 0.1, 0.1)),
                                              (0, 1, 1))]), f, [])
    s1 = apply_planning_scene(s, _octomap_scene(data, binary, origin=(0.5, 0, 0.3)), f, robot,
                              [])
    ids = [i for i in s1.world.ids if i.startswith("<octomap>/")]
    assert ids and "box" in s1.world and s1.version > s.version
    lo = np.min([s1.world[i].pose[:3, 3] - 0.5 * np.asarray(s1.world[i].size) for i in ids], 0)
    hi = np.max([s1.world[i].pose[:3, 3] + 0.5 * np.asarray(s1.world[i].size) for i in ids], 0)
    np.testing.assert_allclose(lo, [0.5, 0.0, 0.3], atol=1e-9)
    np.testing.assert_allclose(hi, [0.6, 0.04, 0.32], atol=1e-9)
    vol = sum(np.prod(s1.world[i].size) for i in ids)
    assert np.isclose(vol, 0.1 * 0.04 * 0.02)
    # the next map replaces it (a map in a link's frame: placed at the link's current pose)
    s2 = apply_planning_scene(s1, _octomap_scene(data, binary, frame="panda_link0",
                                                 origin=(0, 0.5, 0.0)), f, robot, [])
    ids2 = [i for i in s2.world.ids if i.startswith("<octomap>/")]
    assert len(ids2) == len(ids) and s2.world[ids2[0]].pose[1, 3] > 0.45
    # a malformed map is named, the stale map removed and the scene marked (collision-aware
    # answers refused) until a good map comes; the rest of the message is applied
    for bad, words in ((_octomap_scene(data[:-3], binary), "truncated"),
                       (_octomap_scene(data, binary, tree_id="OcTreeStamped"), "tree type id"),
                       (_octomap_scene(data, binary, res=0.0), "resolution")):
        bad.world.collision_objects = [_co("extra", CollisionObject.ADD,
                                           [(_prim(SolidPrimitive.SPHERE, (0.1,)), (1, 1, 1))])]
        sb = apply_planning_scene(s2, bad, f, robot, [])
        assert not [i for i in sb.world.ids if i.startswith("<octomap>")] and "extra" in sb.world
        assert sb.unsupported[0][0] == "octomap" and "world.octomap" in sb.unsupported[0][1]
        assert words in sb.unsupported[0][1]
        assert not apply_planning_scene(sb, _octomap_scene(data, binary), f, robot,
                                        []).unsupported
    # a diff whose map a newer waiting diff replaces: its map is not decoded (the last one
    # stays), the rest of it is applied
    notes: list = []
    late = _octomap_scene(data, binary, origin=(0.9, 0, 0.3))
    late.world.collision_objects = [_co("late", CollisionObject.ADD,
                                        [(_prim(SolidPrimitive.SPHERE, (0.1,)), (1, 1, 1))])]
    sk = apply_planning_scene(s2, late, f, robot, notes, octomap_superseded=True)
    assert [sk.world[i].pose.tolist() for i in sk.world.ids if i.startswith("<octomap>/")] == \
        [s2.world[i].pose.tolist() for i in ids2] and "late" in sk.world
    assert any("not decoded (a newer map waits" in n for n in notes), notes
    # an origin whose orientation was left unset (all zero) is the identity, as MoveIt
    unset = _octomap_scene(data, binary, origin=(0.5, 0, 0.3))
    unset.world.octomap.origin.orientation.w = 0.0
    su = apply_planning_scene(s, unset, f, robot, [])
    assert not su.unsupported
    assert [su.world[i].pose.tolist() for i in su.world.ids if i != "box"] == \
        [s1.world[i].pose.tolist() for i in s1.world.ids if i != "box"]
    # REMOVE of every object (an empty id) keeps the map, as move_group's does
    rm = apply_collision_object(s2, _co("", CollisionObject.REMOVE), f, [])
    assert [i for i in rm.world.ids if i.startswith("<octomap>/")] == ids2
    assert "box" not in rm.world
    # the allowed collision matrix's <octomap>: the hand may touch the map, not the arm
    acm = _octomap_scene(b"", binary)
    a = acm.allowed_collision_matrix
    a.default_entry_names, a.default_entry_values = ["<octomap>"], [False]
    a.entry_names = ["panda_hand", "<octomap>"]
    for i in range(2):
        e = AllowedCollisionEntry()
        e.enabled = [i == 1, i == 0]
        a.entry_values.append(e)
    s3 = apply_planning_scene(s2, acm, f, robot, [])
    assert [i for i in s3.world.ids if i.startswith("<octomap>/")] == ids2  # (a diff: kept)
    _, world = robot.scene_collisions(robot.collision_model(), s3)
    assert world[ids2[0]].touch == ("panda_hand",) and world["box"].touch == ()
    # a whole scene without a map removes it; collision.ignore_octomap leaves maps out, said
    full = PlanningScene()
    full.is_diff = False
    assert not any(i.startswith("<octomap>") for i in
                   apply_planning_scene(s3, full, f, robot, []).world.ids)
    notes = []
    s4 = apply_planning_scene(s, _octomap_scene(data, binary), f, robot, notes,
                              octomap_ok=True)
    assert s4.world.ids == ["box"] and any("ignore_octomap" in n for n in notes)


def test_a_bad_scene_is_refused_whole(robot):
    f = _frames(robot)
    s = apply_collision_object(Scene(), _co("keep", CollisionObject.ADD,
                                            [(_prim(2, (0.1,)), (1, 1, 1))]), f, [])
    sc = PlanningScene()
    sc.is_diff = True
    sc.world.collision_objects = [_co("good", CollisionObject.ADD,
                                      [(_prim(2, (0.1,)), (0, 1, 1))]),
                                  _co("bad", CollisionObject.ADD,
                                      [(_prim(2, (-0.1,)), (0, 1, 1))])]
    with pytest.raises(RequestError, match="collision object 'bad'.primitives\\[0\\]"):
        apply_planning_scene(s, sc, f, robot, [])
    assert s.world.ids == ["keep"]  # nothing of it applied
    aco = AttachedCollisionObject()
    aco.link_name = "no_such_link"
    aco.object = _co("x", CollisionObject.ADD, [(_prim(2, (0.1,)), (0, 0, 0))])
    with pytest.raises(RequestError, match="link_name 'no_such_link'"):
        apply_attached_object(s, aco, f, robot, [])


def test_world_for_and_collision_model_for_leave_the_base_model_alone(robot):
    cm = robot.collision_model()
    s = Scene()
    cm2 = collision_model_for(cm, s, robot.model)
    assert cm2 is cm and world_for(s, cm) is s.world
    assert collision_model(load_robot("panda")).num_spheres == cm.num_spheres


def test_the_scene_worker_skips_a_diff_s_map_only_when_a_newer_one_waits():
    """move_group sends a map with every sensor update: of the planning-scene diffs waiting
    on the scene worker, only the last one's map is decoded (each earlier one is told that a
    newer map waits); a change without a map never counts; a map left for a newer message
    that is then refused is applied alone (never lost), and dropped once a newer map is
    applied."""
    import threading
    import types

    from ros2_ik.ros import codes
    from ros2_ik.ros.handlers.world import SceneState

    logs: list = []
    w = types.SimpleNamespace(
        robot=lambda: None, settings=lambda: types.SimpleNamespace(
            collision_base_frame_aliases=""),
        log=lambda *a: logs.append(a), stats=types.SimpleNamespace(set_scene=lambda *a: None))
    state = SceneState(w)
    try:
        gate, seen = threading.Event(), []

        def hold(scene, frames, robot, notes):
            assert gate.wait(60)
            return scene

        def record(tag):
            def apply(scene, frames, robot, notes):
                seen.append((tag, state.map_superseded))
                return scene
            return apply
        state.submit("hold", hold)
        for tag, has_map in (("a", True), ("b", False), ("c", True), ("d", True),
                             ("e", False)):
            state.submit(tag, record(tag), carries_map=has_map)
        gate.set()
        assert state.wait_idle(60)
        assert seen == [("a", True), ("b", False), ("c", True), ("d", False), ("e", False)]
        # (one alone is decoded)
        state.submit("f", record("f"), carries_map=True)
        assert state.wait_idle(60) and seen[-1] == ("f", False)

        # a map left for a newer message that is then refused is applied alone: never lost
        def left(scene, frames, robot, notes):
            assert state.map_superseded
            state.map_fallback = lambda sc, fr, rb, nt: sc.bumped()  # (its map)
            return scene

        def refused(scene, frames, robot, notes):
            raise RequestError(codes.INVALID_REQUEST, "link_padding[0] is bad")
        gate.clear()
        state.submit("hold", hold)
        state.submit("g", left, carries_map=True)
        state.submit("h", refused, carries_map=True)
        version = state.scene.version
        gate.set()
        assert state.wait_idle(60)
        said = " ".join(str(a) for a in logs)
        assert "h not applied: link_padding[0] is bad" in said, said
        assert "the map of an earlier diff, left for h" in said, said
        assert state.scene.version > version and state.map_fallback is None
        # and one that a newer applied map replaced is dropped
        gate.clear()
        state.submit("hold", hold)
        state.submit("i", left, carries_map=True)
        state.submit("j", record("j"), carries_map=True)
        gate.set()
        assert state.wait_idle(60) and state.map_fallback is None
    finally:
        state.close()
