"""The browser viewer (``ros2_ik_viewer``) through its Python API, the API the page's gizmos
call: answers verified by FK here (independently of the viewer's own check), unreachable goals,
several tips, collision avoidance against a world, a trajectory seed, a reach map, bad input,
and the viewer attached to a running node. What it opens on: a solved answer clear of the robot
itself and the world (the bundled robots and example-robot-data's UR5, with and without its
meshes, on a table with a box), or "no answer yet" with nothing drawn as the answer; an
unsolved result is never drawn as the answer. The browser itself: ``test_viewer_browser.py``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("viser", reason="the viewer extra is not installed (pip install "
                                    "'ros2_ik[viewer]')")

from ros2_ik import load_robot, robots
from ros2_ik.ik import IKConfig
from ros2_ik.ik.collision import clearance, default_collision_model
from ros2_ik.kinematics import fk_frames, pose_error
from ros2_ik.viewer.app import COLORS, Viewer
from ros2_ik.world import Obstacle, World

TOL = IKConfig()


def _viewer(name="panda", **kw):
    return Viewer(load_robot(name), robots.urdf_string(name), port=0, **kw)


def _pose(model, q, tip):
    return np.asarray(fk_frames(model, np.asarray(q)[None], [tip]))[0, 0]


def _errors(model, q, goals):
    out = []
    for tip, T in goals.items():
        pe, oe = pose_error(T[None], _pose(model, q, tip)[None])
        out.append((float(pe[0]), float(oe[0])))
    return out


def _color(ball):
    return tuple(int(c) for c in ball.color)


#: a table (half-space at z = 0, the robot standing on it) and a box beside the robot
TABLE_AND_BOX = World().add(
    Obstacle.make("table", "halfspace", (), [0, 0, 0, 0, 0, 0, 1]),
    Obstacle.make("box", "box", (0.2, 0.3, 0.3), [0.55, 0.3, 0.15, 0, 0, 0, 1]))


def _drawn_at(view, model, q) -> bool:
    """Whether every link of a robot drawn on the page stands where FK puts it at ``q``."""
    return all(np.allclose(f.position, _pose(model, q, link)[:3, 3], atol=1e-6)
               for link, f in view.frames.items())


def _assert_opened_on_a_clear_answer(v, cm, world):
    """The viewer's opening: a solved answer (FK here), within the limits, clear of the robot
    itself and the world by the margin (``cm``, built here), drawn solid; no attempt drawn."""
    m, cfg = v.model, v.config
    sol = v.solution
    assert sol is not None and sol.success and v.answer is sol, v.status_md.content
    assert sol.status == "CONVERGED" and "no answer yet" not in v.status_md.content
    q = sol.q
    assert np.all(q >= m.lower - 1e-9) and np.all(q <= m.upper + 1e-9)
    for pe, oe in _errors(m, q, {t: v.goals[t] for t in v.tips}):  # the goals at its tips
        assert pe <= cfg.position_tolerance and oe <= cfg.orientation_tolerance
    c = float(clearance(m, cm, q[None], world)[0][0])
    assert c >= cfg.collision_margin, c
    assert v.robot.visible and not v.attempt_robot.visible and not v.attempt_label.visible
    assert _drawn_at(v.robot, m, q)
    np.testing.assert_array_equal(v.q, q)
    assert all(_color(b) == COLORS["ok"] for b in v.balls.values())


@pytest.fixture
def panda_viewer():
    v = _viewer()
    try:
        yield v
    finally:
        v.close()


def test_a_goal_is_solved_verified_and_shown(panda_viewer):
    v = panda_viewer
    m, tip = v.model, v.tips[0]
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = m.lower + (m.upper - m.lower) * (0.2 + 0.6 * rng.random(m.nq))
        T = _pose(m, q, tip)
        ans = v.set_goal(tip, T)
        assert ans.success, ans.summary()
        for pe, oe in _errors(m, ans.q, {tip: T}):
            assert pe <= TOL.position_tolerance and oe <= TOL.orientation_tolerance
        assert np.all(ans.q >= m.lower - 1e-9) and np.all(ans.q <= m.upper + 1e-9)
        assert _color(v.balls[tip]) == COLORS["ok"]
        assert "CONVERGED" in v.status_md.content
        # the robot on the page is the answer: its link frames where FK puts them
        link = next(iter(v.robot.frames))
        np.testing.assert_allclose(v.robot.frames[link].position, _pose(m, ans.q, link)[:3, 3],
                                   atol=1e-6)
        # the next solve starts from this answer (the seed shown)
        np.testing.assert_array_equal(v.q, ans.q)
    seed_before = v.q.copy()
    ans = v.set_goal(tip, T)
    np.testing.assert_array_equal(ans.seed, seed_before)


def test_an_unreachable_goal_is_red_and_the_robot_stays(panda_viewer):
    v = panda_viewer
    tip = v.tips[0]
    q0 = v.q.copy()
    opened = v.solution
    far = np.eye(4)
    far[:3, 3] = (3.0, 0.0, 0.4)
    ans = v.set_goal(tip, far)
    assert not ans.success and ans.status != "CONVERGED"
    assert _color(v.balls[tip]) == COLORS["failed"]
    np.testing.assert_array_equal(v.q, q0)  # the next solve starts from the last good answer
    # the robot still shows the last answer; the attempt is drawn apart, and said to be one
    assert v.solution is opened and v.robot.visible and _drawn_at(v.robot, v.model, q0)
    assert v.attempt_robot.visible and _drawn_at(v.attempt_robot, v.model, ans.q)
    assert v.attempt_label.visible and "last attempt" in v.attempt_label.text
    assert "last attempt" in v.status_md.content and "no answer yet" not in v.status_md.content
    with pytest.raises(ValueError, match="tips"):
        v.set_goal("no_such_link", far)
    bad = far.copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        v.set_goal(tip, bad)


def test_a_drag_stream_answers_the_last_pose(panda_viewer):
    """The page sends many poses while a gizmo is dragged: whichever are skipped, the last one
    is answered."""
    v = panda_viewer
    m, tip = v.model, v.tips[0]
    T0 = _pose(m, v.q, tip)
    poses = []
    for dz in np.linspace(0.0, 0.15, 25):
        T = T0.copy()
        T[2, 3] -= dz
        poses.append(T)
        v.request({tip: T})
    assert v.wait_answers(1, 30)
    assert v.wait_answers(v.answers, 30)
    ans = v.answer
    np.testing.assert_array_equal(ans.goals[tip], poses[-1])
    assert ans.success
    (pe, oe), = _errors(m, ans.q, {tip: poses[-1]})
    assert pe <= TOL.position_tolerance and oe <= TOL.orientation_tolerance


def test_several_tips_are_solved_together():
    v = _viewer("dual_arm", tips=["left_tool", "right_tool"])
    try:
        m = v.model
        q = m.neutral_q()
        left = [i for i, n in enumerate(m.q_names) if n.startswith("left")]
        q[left] += 0.2
        T = _pose(m, q, "left_tool")
        ans = v.set_goal("left_tool", T)
        assert ans.success, ans.summary()
        goals = {"left_tool": T, "right_tool": v.goals["right_tool"]}
        for pe, oe in _errors(m, ans.q, goals):  # the right arm kept its goal
            assert pe <= TOL.position_tolerance and oe <= TOL.orientation_tolerance
    finally:
        v.close()


def test_collision_avoidance_against_a_world():
    """A box just beside the elbow's way: with avoidance on, the answer keeps the margin (by an
    independent clearance here), and the world and the collision model are drawn."""
    m = load_robot("panda")
    tip = m.default_tip()
    q = m.neutral_q()
    T = _pose(m, q, tip)
    world = World().add(Obstacle.make("box", "box", (0.1, 0.1, 0.1),
                                      (T[0, 3], T[1, 3] + 0.25, T[2, 3], 0, 0, 0, 1)))
    v = Viewer(m, robots.urdf_string("panda"), port=0, world=world, avoid_collisions=True)
    try:
        assert v.avoid.value
        ans = v.set_goal(tip, T)
        assert ans.success, ans.summary()
        cm = default_collision_model(m)
        c = float(clearance(m, cm, ans.q[None], world)[0][0])
        cfg = IKConfig()
        assert c >= cfg.collision_margin - 1e-9
        assert ans.clearance is not None
        if c < cfg.collision_margin + cfg.collision_activation:  # exact there, a bound beyond
            assert abs(ans.clearance - c) < 1e-6
        else:
            assert cfg.collision_margin + cfg.collision_activation - 1e-9 <= ans.clearance
            assert ans.clearance <= c + 1e-9
        v.show_spheres.value = True
        v._draw_spheres()
        assert len(v._spheres) == cm.num_spheres
    finally:
        v.close()


@pytest.mark.parametrize("name", robots.names())
def test_it_opens_on_a_solved_answer_clear_of_itself_and_the_world(name):
    """Every bundled robot on a table with a box, collision avoidance on: the viewer opens on
    a configuration clear of both (the bundled UR's mid-range configuration lies on the table:
    another is taken), its goals at its tips, solved."""
    m = load_robot(name)
    cm = default_collision_model(m, within=IKConfig().collision_margin)
    mid = float(clearance(m, cm, m.neutral_q()[None], TABLE_AND_BOX)[0][0])
    v = Viewer(m, robots.urdf_string(name), port=0, world=TABLE_AND_BOX, avoid_collisions=True)
    try:
        _assert_opened_on_a_clear_answer(v, cm, TABLE_AND_BOX)
        if name == "ur":
            assert mid < 0  # the case: the mid-range configuration is not clear
        if mid < IKConfig().collision_margin:
            assert "the mid-range one is not" in v.status_md.content
            assert not np.array_equal(v.solution.q, m.neutral_q())
    finally:
        v.close()


def test_with_no_clear_configuration_no_answer_is_drawn():
    """A world that holds the whole robot: no configuration is clear, the page says "no answer
    yet" and draws none; an attempt that fails is drawn apart; an answer found without
    avoidance is dropped when avoidance finds none and it collides."""
    m = load_robot("panda")
    world = World().add(Obstacle.make("crate", "box", (4.0, 4.0, 4.0), [0, 0, 0, 0, 0, 0, 1]))
    v = Viewer(m, robots.urdf_string("panda"), port=0, world=world, avoid_collisions=True)
    try:
        tip = v.tips[0]
        assert v.solution is None and v.answer is None and v.answers == 0
        assert v.status_md.content.startswith("**no answer yet**")
        assert "no configuration" in v.status_md.content
        assert not v.robot.visible and not v.attempt_robot.visible
        T = _pose(m, m.neutral_q(), tip)
        ans = v.set_goal(tip, T)
        assert not ans.success and v.solution is None
        assert not v.robot.visible and v.attempt_robot.visible and v.attempt_label.visible
        assert "no answer yet" in v.status_md.content
        v.avoid.value = False  # re-solved without avoidance: an answer, drawn
        assert v.wait_answers(2, 60) and v.answer.success and v.solution is v.answer
        assert v.robot.visible and not v.attempt_robot.visible
        n = v.answers
        v.avoid.value = True  # with avoidance again: none, and the last one collides
        assert v.wait_answers(n + 1, 60) and not v.answer.success
        assert v.solution is None and not v.robot.visible
        assert "no answer yet" in v.status_md.content
    finally:
        v.close()


def _ur5():
    """example-robot-data's UR5: (URDF text, the directory its package:// meshes are under)."""
    from importlib import metadata
    from pathlib import Path

    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed; run make setup")
    share = Path(dist.locate_file("")) / "cmeel.prefix" / "share"
    urdf = share / "example-robot-data/robots/ur_description/urdf/ur5_robot.urdf"
    return urdf.read_text(), share


@pytest.mark.parametrize("avoid", [True, False], ids=["avoid", "no-avoid"])
def test_a_ur5_from_its_urdf_opens_clear_of_the_table_and_the_box(avoid):
    """The issue's robot: example-robot-data's UR5 with its meshes, on a table with a box. Its
    mid-range configuration lies on the table and through the box; the viewer opens on one
    clear of both (judged on the collision model built here from its meshes), solved, with
    avoidance on or off; an unreachable goal then leaves that answer drawn."""
    from ros2_ik.model import Model

    text, share = _ur5()
    m = Model.from_urdf(text, base="base_link", tips=["tool0"])
    cm = default_collision_model(m, within=IKConfig().collision_margin, search_path=[str(share)])
    assert not cm.missing
    assert float(clearance(m, cm, m.neutral_q()[None], TABLE_AND_BOX)[0][0]) < 0
    v = Viewer(m, text, port=0, world=TABLE_AND_BOX, mesh_path=[str(share)],
               avoid_collisions=avoid)
    try:
        assert len(v.robot.frames) >= 6  # its meshes are drawn
        _assert_opened_on_a_clear_answer(v, cm, TABLE_AND_BOX)
        opened = v.solution.q.copy()
        far = np.eye(4)
        far[:3, 3] = (3.0, 0.0, 0.4)
        ans = v.set_goal("tool0", far)
        assert not ans.success and v.solution is not None and v.robot.visible
        np.testing.assert_array_equal(v.solution.q, opened)
        assert _drawn_at(v.robot, m, opened) and _drawn_at(v.attempt_robot, m, ans.q)
    finally:
        v.close()


def test_a_ur5_without_its_meshes(monkeypatch):
    """The UR5's URDF with its meshes nowhere to be found: without avoidance it opens on a
    configuration whose link origins keep the margin from the table and the box, solved; with
    avoidance the collision model cannot keep its promise: "no answer yet", nothing drawn as
    the answer, and the reason on the page."""
    from ros2_ik.ik.collision import sdf
    from ros2_ik.kinematics import fk
    from ros2_ik.model import Model

    monkeypatch.delenv("ROS2_IK_MESH_PATH", raising=False)
    text, _ = _ur5()
    m = Model.from_urdf(text, base="base_link", tips=["tool0"])
    v = Viewer(m, text, port=0, world=TABLE_AND_BOX)
    try:
        assert v.solution is not None and v.solution.success, v.status_md.content
        moving = [m.link_index(n) for n in ("upper_arm_link", "forearm_link", "wrist_1_link",
                                            "wrist_2_link", "wrist_3_link", "tool0")]
        P = np.asarray(fk(m, v.solution.q[None]))[0, moving, :3, 3]
        assert np.asarray(sdf(TABLE_AND_BOX.packed(), P)[0]).min() >= IKConfig().collision_margin
    finally:
        v.close()
    v = Viewer(m, text, port=0, world=TABLE_AND_BOX, avoid_collisions=True)
    try:
        assert v.solution is None and v.answer is not None and not v.answer.success
        assert v.status_md.content.startswith("**no answer yet**")
        assert "no spheres" in v.status_md.content and not v.robot.visible
    finally:
        v.close()


def test_trajectory_seed_and_reach_map(panda_viewer, tmp_path):
    v = panda_viewer
    m, tip = v.model, v.tips[0]
    start = _pose(m, v.q, tip)
    goal = start.copy()
    goal[:3, 3] += (0.0, 0.1, -0.1)
    v.goals[tip] = goal
    traj = v.plan_trajectory(nodes=12, play=False)
    assert traj.shape == (12, m.nq) and v.trajectory_ok.all()
    tips = np.asarray(fk_frames(m, traj, [tip]))[:, 0, :3, 3]
    line = start[:3, 3] + np.linspace(0, 1, 12)[:, None] * (goal[:3, 3] - start[:3, 3])
    np.testing.assert_allclose(tips, line, atol=TOL.position_tolerance * 1.01)
    assert v.scrub.max == 11
    v.scrub.value = 5
    v._scrub()
    link = next(iter(v.robot.frames))
    np.testing.assert_allclose(v.robot.frames[link].position, _pose(m, traj[5], link)[:3, 3],
                               atol=1e-6)
    # a node that was not solved is drawn apart, as an attempt, never on the robot
    v.trajectory_ok[6] = False
    v.scrub.value = 6
    v._scrub()
    assert not v.robot.visible and v.attempt_robot.visible
    assert _drawn_at(v.attempt_robot, m, traj[6]) and "node 6" in v.attempt_label.text

    from ros2_ik.reach import Sphere, Study, StudyConfig, grid_targets, run_study

    study = Study(m, grid_targets(Sphere((0, 0, 0.333), 0.6), 0.3, 2, 1),
                  config=StudyConfig(shard_size=64))
    run_study(study, tmp_path / "reach", plots=False)
    vox = np.load(tmp_path / "reach" / "voxels.npz")
    assert v.show_reach(tmp_path / "reach") == int(np.sum(vox["targets"] > 0)) > 0


def test_a_world_of_many_cells_is_drawn_as_one_mesh(monkeypatch):
    """A map's, a cloud's or a mesh's cells (hundreds of boxes) are one mesh on the page, with
    every box's faces; other shapes as before."""
    from ros2_ik.world import voxels

    P = np.random.default_rng(6).uniform([0.4, -0.3, 0.0], [0.8, 0.3, 0.4], (500, 3))
    world = World(voxels.obstacles(*voxels.boxes(voxels.cloud_cells(P, 0.04)), prefix="c")
                  + [Obstacle.make("ball", "sphere", (0.05,), (0, 0.6, 0.3, 0, 0, 0, 1))])
    n = len(world) - 1
    assert n > voxels.DRAWN_ONE_BY_ONE
    v = Viewer(load_robot("panda"), robots.urdf_string("panda"), port=0, world=world)
    try:
        calls = []
        scene = v.server.scene
        for fn in ("add_mesh_simple", "add_box", "add_icosphere"):
            real = getattr(scene, fn)
            monkeypatch.setattr(scene, fn, lambda *a, _f=fn, _r=real, **k: (
                calls.append((_f, a, k)), _r(*a, **k))[1])
        v._draw_world()
        meshes = [c for c in calls if c[0] == "add_mesh_simple"]
        assert len(meshes) == 1 and meshes[0][1][0] == "/world/cells"
        assert len(meshes[0][1][1]) == 8 * n and len(meshes[0][1][2]) == 12 * n
        assert [c[0] for c in calls].count("add_box") == 0
        assert [c[0] for c in calls].count("add_icosphere") == 1
    finally:
        v.close()


def test_command_line_bad_input():
    for args, words in ((["--robot", "r2d2"], ["r2d2", "panda"]),
                        (["--urdf", "/nonexistent.urdf"], ["No such file"]),
                        (["--robot", "panda", "--world", "/nonexistent.pcd"],
                         ["--world", "No such file"]),
                        (["--robot", "panda", "--tips", "foo"], ["foo"])):
        p = subprocess.run([sys.executable, "-m", "ros2_ik.viewer", *args, "--port", "0"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, (p.stdout, p.stderr)
        assert p.stderr.startswith("ros2_ik_viewer: error: ")
        for w in words:
            assert w in p.stderr, p.stderr


def test_attached_to_a_running_node():
    """--node: the model from the node's robot_description, goals answered by its
    compute_ik, trajectories by its trajectory_seed action."""
    pytest.importorskip("rclpy")
    from ros_testing import serving_node

    from ros2_ik.model import Model
    from ros2_ik.viewer.solvers import NodeSolver

    with serving_node({"robot": "panda"}, server_timeout=60) as (node, client):
        client.publish_robot_description(robots.urdf_string("panda"))
        solver = NodeSolver("ros2_ik", domain_id=node.domain_id, timeout=30)
        v = None
        try:
            urdf = solver.wait_for_model(30)
            model = Model.from_urdf(urdf)
            solver.model = model
            v = Viewer(model, urdf, solver=solver, port=0)
            assert "node /ros2_ik" in v.solver.label
            tip = v.tips[0]
            q = model.neutral_q() + 0.15
            T = _pose(model, q, tip)
            ans = v.set_goal(tip, T)
            assert ans.success, ans.summary()
            assert ans.status == "CONVERGED"  # named as the core names it (colours agree)
            (pe, oe), = _errors(model, ans.q, {tip: T})
            assert pe <= TOL.position_tolerance and oe <= TOL.orientation_tolerance
            goal = T.copy()
            goal[2, 3] -= 0.1
            v.goals[tip] = goal
            traj = v.plan_trajectory(nodes=8, play=False)
            assert traj.shape == (8, model.nq) and v.trajectory_ok.all()
        finally:
            if v is not None:
                v.close()  # (closes its solver)
            else:
                solver.close()


def test_meshes_are_found_as_the_collision_model_finds_them(tmp_path):
    """package:// and relative visual meshes through --mesh-path (no ament index needed); a
    mesh that is nowhere is left out and the rest still shows."""
    import trimesh

    from ros2_ik.viewer.app import load_visuals

    (tmp_path / "my_robot" / "meshes").mkdir(parents=True)
    box = trimesh.creation.box(extents=(0.1, 0.2, 0.3))
    box.export(tmp_path / "my_robot" / "meshes" / "link.stl")
    urdf = """<robot name="r">
  <link name="base"><visual><geometry><mesh filename="package://my_robot/meshes/link.stl"/>
    </geometry></visual></link>
  <link name="arm"><visual><origin xyz="0 0 0.5"/><geometry>
    <mesh filename="my_robot/meshes/link.stl" scale="2 2 2"/></geometry></visual>
    <visual><geometry><mesh filename="package://nowhere/gone.stl"/></geometry></visual></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""
    vis = load_visuals(urdf, [str(tmp_path)])
    assert sorted(vis) == ["arm", "base"]
    # as real description packages write them: with an XML declaration naming the encoding
    decl = load_visuals('<?xml version="1.0" encoding="utf-8"?>\n' + urdf, [str(tmp_path)])
    assert sorted(decl) == ["arm", "base"]
    (mesh_b, T_b), = vis["base"]
    np.testing.assert_allclose(mesh_b.extents, (0.1, 0.2, 0.3), atol=1e-9)
    assert len(vis["arm"]) == 1  # the missing one left out
    mesh_a, T_a = vis["arm"][0]
    np.testing.assert_allclose(mesh_a.extents, (0.2, 0.4, 0.6), atol=1e-9)
    np.testing.assert_allclose(T_a[:3, 3], (0, 0, 0.5))
    from ros2_ik.model import Model

    v = Viewer(Model.from_urdf(urdf), urdf, port=0, mesh_path=[str(tmp_path)],
               tips=["arm"])
    try:
        assert set(v.robot.frames) == {"base", "arm"}
    finally:
        v.close()


def test_the_mesh_path_reaches_the_collision_model_and_warnings_reach_the_page(tmp_path):
    """--mesh-path finds the collision meshes as it finds the visuals (the links get their
    spheres); a collision mesh that is nowhere is said on the page, and collision avoidance
    refuses to answer rather than ignore that link."""
    import trimesh

    from ros2_ik.viewer.cli import build_parser, make_viewer

    (tmp_path / "my_robot" / "meshes").mkdir(parents=True)
    trimesh.creation.box(extents=(0.1, 0.1, 0.4)).export(tmp_path / "my_robot" / "meshes" /
                                                       "arm.stl")
    link = ('<link name="arm"><visual><geometry><mesh filename="package://my_robot/meshes/'
            '{v}"/></geometry></visual><collision><origin xyz="0 0 0.2"/><geometry><mesh '
            'filename="package://my_robot/meshes/{f}"/></geometry></collision></link>')
    joint = ('<joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis '
             'xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    # found; the collision mesh gone but the visual one there (used, and said); both gone
    for k, (f, vis) in enumerate((("arm.stl", "arm.stl"), ("gone.stl", "arm.stl"),
                                  ("gone.stl", "gone_too.stl"))):
        path = tmp_path / f"r_{k}.urdf"
        path.write_text(f'<robot name="r"><link name="base"/>{link.format(f=f, v=vis)}{joint}'
                        '</robot>')
        args = build_parser().parse_args(["--urdf", str(path), "--mesh-path", str(tmp_path),
                                          "--port", "0"])
        v = make_viewer(args)
        try:
            cm = v.solver.collision_model()
            if k == 0:
                assert cm.link_names == ("arm",) and not cm.missing and not v.warnings_text
            elif k == 1:
                assert cm.link_names == ("arm",) and not cm.missing
                assert "gone.stl" in v.warnings_text and "<visual>" in v.warnings_text
            else:
                assert [link for link, _ in cm.missing] == ["arm"]
                assert "gone.stl" in v.warnings_text and "--mesh-path" in v.warnings_text
                v.avoid.value = True
                ans = v.set_goal("arm", _pose(v.model, v.model.neutral_q(), "arm"))
                assert not ans.success and "no spheres" in ans.message
        finally:
            v.close()


def test_command_serves_the_page_and_stops_on_ctrl_c():
    """ros2_ik_viewer as a user starts it: it says where the page is, the page is served, and
    Ctrl-C ends it cleanly."""
    import os
    import signal
    import time
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "ros2_ik.viewer", "--robot", "ur",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        url = None
        end = time.monotonic() + 120
        while url is None and time.monotonic() < end:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, proc.stderr.read()
            if "open http://" in line:
                url = line.split("open ", 1)[1].split()[0]
        assert url is not None
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200 and b"<html" in r.read(4096).lower()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait(10)
    assert rc == 0, proc.stderr.read()
