"""Point clouds (``ros2_ik.ros.cloud``) with the message classes rosidl generates
(sensor_msgs/PointCloud2): read in every layout a driver sends (FLOAT32 and FLOAT64, little and
big endian, padded points and rows, NaN points), placed by their frame, cut to range, the
robot's own points removed at its current state, held as the cells they fall in; a cloud that
cannot be read is an error naming the field; and through the node over DDS: a cloud on
``point_cloud.topic`` avoided by GetPositionIK, each success judged on the URDF's geometry
against the cubes of the cells the published points fall in, and by coal (its octree of
those cells against the URDF's geometry as Pinocchio reads it)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from sensor_msgs.msg import PointCloud2, PointField

from ros2_ik import fk_frames
from ros2_ik.ik.collision_geometry import sphere_centers
from ros2_ik.ros.cloud import apply_cloud, cloud_points
from ros2_ik.ros.codes import RequestError
from ros2_ik.ros.robot import build_robot
from ros2_ik.ros.scene import Scene
from ros2_ik.ros.world_input import Frames
from ros2_ik import robots

RES = 0.02


def cloud_msg(P, frame="world", f64=False, big=False, pad=4, row_pad=0, width=None):
    """A PointCloud2 of points P (N, 3) laid out as a driver might: x y z at offsets 0, s, 2s
    (s = 4 or 8), then ``pad`` bytes of another field; rows of ``width`` points and
    ``row_pad`` bytes."""
    P = np.asarray(P, dtype=np.float64)
    kind = (">" if big else "<") + ("f8" if f64 else "f4")
    size = 8 if f64 else 4
    step = 3 * size + pad
    n = len(P)
    width = width or max(n, 1)
    height = max(1, -(-n // width)) if n else 1
    row = width * step + row_pad
    buf = np.zeros((height, row), dtype=np.uint8)
    pts = np.full((height * width, 3), np.nan)
    pts[:n] = P
    for i in range(height):
        for k in range(3):
            col = np.ascontiguousarray(pts[i * width:(i + 1) * width, k].astype(kind))
            view = buf[i, :width * step].reshape(width, step)
            view[:, k * size:(k + 1) * size] = col.view(np.uint8).reshape(width, size)
    m = PointCloud2()
    m.header.frame_id = frame
    m.height, m.width = height, width
    m.fields = [PointField(name=c, offset=k * size, datatype=8 if f64 else 7, count=1)
                for k, c in enumerate("xyz")] + [PointField(name="rgb", offset=3 * size,
                                                             datatype=7, count=1)]
    m.is_bigendian, m.point_step, m.row_step = big, step, row
    m.data = buf.tobytes()
    m.is_dense = False
    return m


def _values(diags) -> dict:
    """The node's latest kinematics diagnostic values ({} before the first)."""
    for arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(": kinematics"):
                return {kv.key: kv.value for kv in st.values}
    return {}


@pytest.fixture(scope="module")
def robot():
    return build_robot(robots.urdf_string("panda"), source="test")


@pytest.mark.parametrize("f64,big,pad,row_pad,width", [
    (False, False, 4, 0, None), (True, False, 0, 0, None), (False, True, 12, 8, 7),
    (True, True, 4, 3, 5)])
def test_every_layout_reads_the_same_points(f64, big, pad, row_pad, width):
    P = np.random.default_rng(1).uniform(-1, 1, (33, 3))
    P[5] = np.nan
    got = cloud_points(cloud_msg(P, f64=f64, big=big, pad=pad, row_pad=row_pad, width=width))
    assert got.shape[0] >= len(P)
    np.testing.assert_allclose(got[:len(P)], P, atol=0 if f64 else 1e-6)
    assert np.all(np.isnan(got[len(P):]))  # (the padding points of the last row)


def test_a_cloud_is_its_cells_less_the_robot_and_the_far_points(robot):
    cm = robot.collision_model()
    q = robot.model.neutral_q()
    T = np.asarray(fk_frames(robot.model, q[None], list(robot.model.link_names)))
    on_robot = np.asarray(sphere_centers(robot.model, cm, T))[0]  # points on the robot
    g = np.arange(0.0, 0.2, 0.01)
    block = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) + [0.5, 0.2, 0.3]
    far = np.array([[4.0, 0.0, 0.0], [0.0, -3.5, 1.0]])
    P = np.concatenate([block, on_robot, far, [[np.nan, 0, 0]]])
    # without joint states for every joint, the robot's own points stay (the mid-range
    # configuration is not where the robot is)
    _, removed, kept = apply_cloud(Scene(), cloud_msg(P), Frames(robot, q, q_known=False),
                                   robot, resolution=RES, max_range=3.0, padding=0.03, cm=cm)
    assert removed is None and kept == len(block) + len(on_robot)
    frames = Frames(robot, q)
    scene, removed, kept = apply_cloud(Scene(), cloud_msg(P), frames, robot, resolution=RES,
                                       max_range=3.0, padding=0.03, cm=cm)
    assert removed >= len(on_robot) and kept == len(block)
    ids = [i for i in scene.world.ids if i.startswith("<cloud>/")]
    lo = np.min([scene.world[i].pose[:3, 3] - 0.5 * np.asarray(scene.world[i].size)
                 for i in ids], axis=0)
    hi = np.max([scene.world[i].pose[:3, 3] + 0.5 * np.asarray(scene.world[i].size)
                 for i in ids], axis=0)
    assert np.all(lo <= block.min(axis=0) + 1e-9) and np.all(hi >= block.max(axis=0) - 1e-9)
    assert np.all(hi - lo <= 0.2 + 2 * RES)
    # the next cloud replaces it; a cloud in a link's frame is placed at the link's pose
    s2, _, _ = apply_cloud(scene, cloud_msg(block[:10] - [0.5, 0.2, 0.3], frame="panda_hand"),
                           frames, robot, resolution=RES, max_range=3.0, padding=0.0)
    ids2 = [i for i in s2.world.ids if i.startswith("<cloud>/")]
    Th = np.asarray(fk_frames(robot.model, q[None], ["panda_hand"]))[0, 0]
    assert ids2 and max(np.linalg.norm(s2.world[i].pose[:3, 3] - Th[:3, 3])
                        for i in ids2) < 0.2  # (the first cloud's block is gone)
    assert s2.version > scene.version
    # a whole planning scene replaces its own parts, not the cloud; neither does REMOVE of all
    pytest.importorskip("moveit_msgs", reason="the test build of moveit_msgs is not installed")
    from moveit_msgs.msg import CollisionObject, PlanningScene

    from ros2_ik.ros.scene import apply_collision_object, apply_planning_scene

    full = PlanningScene()
    full.is_diff = False
    s3 = apply_planning_scene(s2, full, frames, robot, [])
    assert [i for i in s3.world.ids if i.startswith("<cloud>/")] == ids2
    rm = CollisionObject()
    rm.operation = CollisionObject.REMOVE
    s4 = apply_collision_object(s3, rm, frames, [])
    assert [i for i in s4.world.ids if i.startswith("<cloud>/")] == ids2


def test_a_cloud_in_a_frame_placed_by_the_static_transform_parameter(robot):
    """point_cloud.frame_transform places a cloud whose frame the node does not know (a camera
    on a stand, no tf here) at the pose given in the base frame, an alias or a link; the same
    cloud in an unknown frame without it is refused, the message naming the parameter; bad
    values are refused by the parameter's check, saying what is wrong."""
    from ros2_ik.kinematics.se3 import pq_to_pose
    from ros2_ik.ros.cloud import frame_transform
    from ros2_ik.ros.params import validate

    q = robot.model.neutral_q()
    frames = Frames(robot, q)
    kw = dict(resolution=RES, max_range=3.0, padding=0.0)
    g = np.arange(0.0, 0.1, 0.01)
    block = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) + [0.0, 0.0, 1.0]
    c = np.sqrt(0.5)  # the camera 1.5 m up, looking down (its z axis along the base's -z)
    pose = [0.6, -0.1, 1.5, c, c, 0.0, 0.0]
    for parent, T_parent in (("panda_link0", np.eye(4)), ("world", np.eye(4)), (
            "panda_hand", np.asarray(fk_frames(robot.model, q[None], ["panda_hand"]))[0, 0])):
        static = frame_transform(f"camera {parent} " + " ".join(map(str, pose)))
        sc = apply_cloud(Scene(), cloud_msg(block, frame="camera"), frames, robot,
                         static=static, **kw)[0]
        assert not sc.unsupported
        want = block @ (T_parent @ pq_to_pose(np.array(pose)))[:3, :3].T + (
            T_parent @ pq_to_pose(np.array(pose)))[:3, 3]
        boxes = [sc.world[i] for i in sc.world.ids if i.startswith("<cloud>/")]
        lo = np.min([b.pose[:3, 3] - 0.5 * np.asarray(b.size) for b in boxes], axis=0)
        hi = np.max([b.pose[:3, 3] + 0.5 * np.asarray(b.size) for b in boxes], axis=0)
        assert np.all(lo <= want.min(axis=0) + 1e-9) and np.all(hi >= want.max(axis=0) - 1e-9)
        assert np.all(lo >= want.min(axis=0) - RES) and np.all(hi <= want.max(axis=0) + RES)
    # another frame is not placed by it; none given: the message names the parameter
    other = apply_cloud(Scene(), cloud_msg(block, frame="camera2"), frames, robot,
                        static=static, **kw)[0]
    assert other.unsupported and "point_cloud.frame_transform" in other.unsupported[0][1]
    assert validate("point_cloud.frame_transform", "") is None
    assert validate("point_cloud.frame_transform", "camera panda_link0 0 0 1 0 0 0 1") is None
    for bad, words in (("camera panda_link0 0 0 1 0 0 1", "9 fields"),
                       ("camera panda_link0 0 0 x 0 0 0 1", "must be numbers"),
                       ("camera panda_link0 0 nan 1 0 0 0 1", "finite"),
                       ("camera panda_link0 0 0 1 0 0 0 0", "unit quaternion"),
                       ("camera camera 0 0 1 0 0 0 1", "both")):
        assert words in validate("point_cloud.frame_transform", bad)
    # a parent the node cannot place is named where the cloud comes
    static = frame_transform("camera nowhere 0 0 1 0 0 0 1")
    sc = apply_cloud(Scene(), cloud_msg(block, frame="camera"), frames, robot, static=static,
                     **kw)[0]
    assert sc.unsupported and "'nowhere'" in sc.unsupported[0][1]


@pytest.mark.parametrize("mutate,words", [
    (lambda m: setattr(m, "fields", m.fields[:2]), "no field 'z'"),
    (lambda m: setattr(m.fields[0], "datatype", 2), "datatype 2"),
    (lambda m: setattr(m.fields[2], "offset", 40), "passes point_step"),
    (lambda m: setattr(m, "data", m.data[:-5]), "data holds"),
    (lambda m: setattr(m, "row_step", 3), "row_step 3"),
    (lambda m: setattr(m.header, "frame_id", "camera_link"), "frame 'camera_link'"),
])
def test_a_cloud_that_cannot_be_read_is_named_and_answers_wait_for_a_good_one(robot, mutate,
                                                                             words):
    """The last cloud is removed and the scene marked (collision-aware answers refused, naming
    it) until a good cloud comes."""
    good = cloud_msg(np.random.default_rng(2).uniform(-1, 1, (20, 3)))
    frames = Frames(robot, None)
    kw = dict(resolution=RES, max_range=3.0, padding=0.03)
    s1 = apply_cloud(Scene(), good, frames, robot, **kw)[0]
    assert s1.world.ids and not s1.unsupported
    m = cloud_msg(np.random.default_rng(2).uniform(-1, 1, (20, 3)))
    mutate(m)
    with pytest.raises(RequestError, match=words):
        cloud_points(m) if words != "frame 'camera_link'" else frames.to_base(
            m.header.frame_id, "x")
    s2 = apply_cloud(s1, m, frames, robot, **kw)[0]
    assert not s2.world.ids and s2.version > s1.version
    assert s2.unsupported and s2.unsupported[0][0] == "cloud" and words in s2.unsupported[0][1]
    s3 = apply_cloud(s2, good, frames, robot, **kw)[0]
    assert s3.world.ids and not s3.unsupported


def test_a_cloud_on_the_topic_is_avoided_through_the_node():
    pytest.importorskip("moveit_msgs", reason="the test build of moveit_msgs is not installed")
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import Point
    from moveit_msgs.srv import GetPositionIK

    from ros2_ik import load_robot
    from ros2_ik.ik.collision import clearance
    from ros2_ik.kinematics import pose_to_pq
    from ros2_ik.model.collision import collision_model
    from ros2_ik.ros import codes
    from ros2_ik.world import Obstacle, World
    from ros_testing import serving_node
    from test_collision import geometry_clear

    g = np.arange(0.0, 0.16, 0.01) + 0.005
    block = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) + [0.32, -0.08,
                                                                                 0.32]
    cells = np.unique(np.floor(block / RES), axis=0)
    judge = World([Obstacle.make(f"c{k}", "box", (RES,) * 3, list((c + 0.5) * RES) +
                                 [0, 0, 0, 1]) for k, c in enumerate(cells)])
    m, tip = load_robot("panda"), "panda_hand_tcp"
    cm = collision_model(m)
    params = {"robot": "panda", "point_cloud.topic": "/camera/points",
              "point_cloud.max_rate": 50.0}
    with serving_node(params, server_timeout=60) as (node, client):
        ik = client.node.create_client(GetPositionIK, f"{client.ns}/solve_ik")
        assert ik.wait_for_service(timeout_sec=30)
        diags, cond = client.subscribe(DiagnosticArray, "/diagnostics")
        pub = client.publisher(PointCloud2, "/camera/points", qos=10)

        def obstacles():
            return int(_values(diags).get("scene_obstacles", 0))

        def published():
            pub.publish(cloud_msg(block))
            return obstacles() > 0
        assert client.wait_for(cond, published, 30.0), "the cloud never reached the world"
        rng = np.random.default_rng(4)
        q = m.random_q(rng, 600)
        q = q[clearance(m, cm, q, judge, reach=0.05)[0] > 0.03][:10]
        T = [np.asarray(fk_frames(m, q, [tip]))[:, 0]]
        inside = np.eye(4)
        inside[:3, :3] = np.diag([1.0, -1.0, -1.0])
        inside[:3, 3] = [0.4, 0.0, 0.4]
        out = []
        for pq in pose_to_pq(np.concatenate([T[0], inside[None]])):
            req = GetPositionIK.Request()
            req.ik_request.avoid_collisions = True
            req.ik_request.ik_link_name = tip
            req.ik_request.pose_stamped.header.frame_id = "panda_link0"
            req.ik_request.pose_stamped.pose.position = Point(x=pq[0], y=pq[1], z=pq[2])
            o = req.ik_request.pose_stamped.pose.orientation
            o.x, o.y, o.z, o.w = map(float, pq[3:])
            req.ik_request.timeout.sec = 30
            resp = client.call(ik, req, timeout=120.0)
            sol = m.neutral_q()
            js = resp.solution.joint_state
            for n, v in zip(js.name, js.position):
                if n in m.q_names:
                    sol[m.q_names.index(n)] = v
            out.append((resp.error_code.val, sol))
        assert out[-1][0] != codes.SUCCESS  # the goal inside the block
        ok = [s for c, s in out[:-1] if c == codes.SUCCESS]
        assert len(ok) >= 8, [c for c, _ in out]
        for s in ok:
            assert geometry_clear(m, cm, s, judge, 0.01 - 1e-6)
    # and by coal: its octree of the cloud's cells against the URDF's geometry as Pinocchio
    # reads it (test/coal_judge.py)
    coal = pytest.importorskip("coal", reason="coal (the test judge) is not installed")
    from coal_judge import UrdfJudge, octree_of_cells

    from ros2_ik import robots

    tree = octree_of_cells(coal, [(*((c + 0.5) * RES), RES) for c in cells], RES)
    urdf = UrdfJudge.of_moving_links(robots.urdf_string("panda"), cm)
    d = min(urdf.distance(m.q_names, s, tree) for s in ok)
    assert d >= 0.01 - 1e-6, d
    # (the judge sees the block: the hand solved into it without collisions is inside)
    from ros2_ik import IKConfig, IKSolver

    r = IKSolver(m, [tip], IKConfig(num_seeds=8)).solve(inside[None])
    assert r.success[0] and urdf.distance(m.q_names, r.q[0], tree) < 0.0


def test_many_cells_are_drawn_as_one_marker():
    """A world of many boxes (a cloud's, a map's or a mesh's cells) is one triangle list in
    ~/collision_markers, each box's 12 triangles on its faces; a few boxes stay cubes."""
    from visualization_msgs.msg import Marker

    from ros2_ik.ros.markers import collision_markers
    from ros2_ik.world import Obstacle, World
    from ros2_ik.world import voxels
    from ros2_ik.world.voxels import DRAWN_ONE_BY_ONE as BOX_MARKERS

    P = np.random.default_rng(6).uniform(0, 1, (600, 3))
    world = World(voxels.obstacles(*voxels.boxes(voxels.cloud_cells(P, 0.05)), prefix="c")
                  + [Obstacle.make("ball", "sphere", (0.1,))])
    n = len(world) - 1
    assert n > BOX_MARKERS
    arr = collision_markers("world", world)
    tri = [m for m in arr.markers if m.type == Marker.TRIANGLE_LIST]
    assert len(tri) == 1 and len(tri[0].points) == 36 * n
    V = np.array([[p.x, p.y, p.z] for p in tri[0].points]).reshape(n, 36, 3)
    lo, hi = V.min(axis=1), V.max(axis=1)
    boxes = sorted(world, key=lambda o: o.id)
    want = {(tuple(np.round(o.pose[:3, 3] - 0.5 * np.asarray(o.size), 9)),
             tuple(np.round(o.pose[:3, 3] + 0.5 * np.asarray(o.size), 9)))
            for o in boxes if o.shape == "box"}
    got = {(tuple(np.round(a, 9)), tuple(np.round(b, 9))) for a, b in zip(lo, hi)}
    assert got == want
    assert sum(m.type == Marker.SPHERE for m in arr.markers) == 1
    few = collision_markers("world", World(list(world)[:5]))
    assert sum(m.type == Marker.CUBE for m in few.markers) == 5


def test_an_octomap_on_the_topic_reaches_the_world_and_a_bad_one_is_named():
    """octomap_msgs/Octomap on ``octomap.topic`` (as octomap_server publishes it; written by
    OctoMap itself): its occupied cells reach the world as <octomap>/k, a malformed map is a
    scene_error naming it, and the map stays."""
    pytest.importorskip("octomap_msgs", reason="octomap_msgs is not importable")
    octomap = pytest.importorskip("octomap", reason="octomap-python is not installed")
    import array

    from diagnostic_msgs.msg import DiagnosticArray
    from octomap_msgs.msg import Octomap

    from ros_testing import serving_node

    t = octomap.OcTree(RES)
    for p in np.random.default_rng(8).uniform([0.4, -0.2, 0.2], [0.6, 0.2, 0.4], (200, 3)):
        t.updateNode(p, True)
    t.updateInnerOccupancy()
    data = t.writeBinary().partition(b"\n" + b"data\n")[2]

    def msg(payload):
        m = Octomap()
        m.header.frame_id = "world"
        m.binary, m.id, m.resolution = True, "OcTree", RES
        m.data = array.array("b", np.frombuffer(payload, np.int8).tolist())
        return m

    with serving_node({"robot": "panda", "octomap.topic": "/octomap_binary"},
                      server_timeout=60) as (node, client):
        diags, cond = client.subscribe(DiagnosticArray, "/diagnostics")
        pub = client.publisher(Octomap, "/octomap_binary", qos=10)

        def values():
            return _values(diags)

        def reached():
            pub.publish(msg(data))
            return int(values().get("scene_obstacles", 0)) > 0
        assert client.wait_for(cond, reached, 30.0), values()
        n = values()["scene_obstacles"]

        # a malformed map: named, the stale map removed, collision-aware answers refused
        # (COLLISION_CHECKING_UNAVAILABLE naming it) until a good map comes
        from geometry_msgs.msg import Point
        from moveit_msgs.srv import GetPositionIK

        from ros2_ik.ros import codes

        def refused():
            pub.publish(msg(data[:-3]))
            return "truncated" in values().get("scene_unsupported", "")
        assert client.wait_for(cond, refused, 30.0), values()
        assert values()["scene_obstacles"] == "0"
        ik = client.node.create_client(GetPositionIK, f"{client.ns}/solve_ik")
        assert ik.wait_for_service(timeout_sec=30)
        req = GetPositionIK.Request()
        req.ik_request.avoid_collisions = True
        req.ik_request.ik_link_name = "panda_hand_tcp"
        req.ik_request.pose_stamped.header.frame_id = "panda_link0"
        req.ik_request.pose_stamped.pose.position = Point(x=0.3, y=0.0, z=0.5)
        req.ik_request.pose_stamped.pose.orientation.x = 1.0
        req.ik_request.pose_stamped.pose.orientation.w = 0.0
        req.ik_request.timeout.sec = 30
        resp = client.call(ik, req, timeout=120.0)
        assert resp.error_code.val == codes.COLLISION_CHECKING_UNAVAILABLE
        assert client.wait_for(cond, reached, 30.0), values()
        assert values()["scene_obstacles"] == n and "scene_unsupported" not in values()
        resp = client.call(ik, req, timeout=120.0)
        assert resp.error_code.val == codes.SUCCESS, resp.error_code.val
