"""Collision-aware IK on real robots with their real meshes, judged by an independent library.

The robots are example-robot-data's (PyPI): the Franka Panda (STL meshes, box fingers; the
model cut to the chain to its TCP, so its fingers are a side branch), the UR5 (STL meshes, a
box on its flange) and the xArm7, with their URDFs and SRDFs as published. Every
collision-aware SUCCESS is judged on the URDF's own meshes by Pinocchio's FK and coal's
distances (coal 3: GJK/EPA and BVH on the meshes), never by ros2_ik's spheres, against the
pairs ros2_ik checks and a world of a table (the robot stands on it), a box and a post:

- no success closer than the margin less 1 mm (the meshes' own approximation) to anything;
- >= 99 % of reachable goals whose known answer is clear by >= 1.5 cm on the meshes are
  solved, >= 95 % of those 0-10 cm above the table;
- the spheres cover each link's mesh and reach at most 5 mm past it (``ros2_ik_spheres``);
- a mesh that cannot be found is an error naming the link, the file and what to set.

Goals and seeds are fixed, so the figures are the same on every run. Skipped (with the reason)
only where example-robot-data or Pinocchio is not installed (``make setup`` installs both).
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is not installed; run make setup")
coal = pytest.importorskip("coal", reason="coal is not installed; run make setup")
try:
    SHARE = Path(metadata.distribution("example-robot-data").locate_file("")) / "cmeel.prefix/share"
except metadata.PackageNotFoundError:
    pytest.skip("example-robot-data is not installed; run make setup", allow_module_level=True)
ROBOTS = SHARE / "example-robot-data" / "robots"

from coal_judge import coal_triangles, meshes_as_read  # noqa: E402

from ros2_ik import IKConfig, IKSolver, fk_frames  # noqa: E402
from ros2_ik.ik.collision import clearance, default_collision_model  # noqa: E402
from ros2_ik.model import Model  # noqa: E402
from ros2_ik.model.collision import CollisionGeometryError, collision_model  # noqa: E402
from ros2_ik.world import Obstacle, World  # noqa: E402

MARGIN = 0.01
SLACK = 0.001  # the meshes' own approximation
#: robot: (URDF, SRDF, base, tip, joints outside the model and the values to judge them at)
CASES = {
    "panda": ("panda_description/urdf/panda.urdf", "panda_description/srdf/panda.srdf",
              "panda_link0", "panda_hand_tcp", {"panda_finger_joint1": (0.0, 0.04)}),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "ur_description/srdf/ur5.srdf",
            "base_link", "tool0", {}),
    "xarm7": ("xarm_description/urdf/xarm7.urdf", "xarm_description/srdf/xarm7.srdf",
              "link_base", "link_eef", {}),
}
#: the robot stands on a table (z = 0) with a box and a post beside it
WORLD = World().add(
    Obstacle.make("table", "halfspace", (), [0, 0, 0, 0, 0, 0, 1]),
    Obstacle.make("box", "box", (0.2, 0.3, 0.3), [0.55, 0.3, 0.15, 0, 0, 0, 1]),
    Obstacle.make("post", "cylinder", (0.04, 0.9), [-0.4, 0.35, 0.45, 0, 0, 0, 1]))


class Judge:
    """Pinocchio's FK and coal's distances on a URDF's collision meshes."""

    def __init__(self, urdf: Path, extra: dict, base: str | None = None, world=WORLD):
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.geom = pin.buildGeomFromUrdf(self.model, str(urdf), pin.GeometryType.COLLISION,
                                          package_dirs=[str(SHARE)])
        # (the meshes as their files say: coal misreads some COLLADA files)
        self.replaced = meshes_as_read(self.geom)
        self.data = self.model.createData()
        self.gdata = pin.GeometryData(self.geom)
        self.idx = {self.model.names[j]: self.model.joints[j].idx_q
                    for j in range(1, self.model.njoints)}
        self.link = [self.model.frames[g.parentFrame].name for g in self.geom.geometryObjects]
        self.extra = extra
        # the world is given in the solved model's base frame: placed at that link's pose
        # (the joints above it at their neutral values, as ros2_ik holds them)
        B = pin.SE3.Identity()
        if base is not None:
            pin.framesForwardKinematics(self.model, self.data, pin.neutral(self.model))
            B = self.data.oMf[self.model.getFrameId(base)].copy()
        self.world = {}
        for ob in world:
            shape = {"box": lambda o: coal.Box(*o.size), "cylinder":
                     lambda o: coal.Cylinder(o.size[0], o.size[1]),
                     "halfspace": lambda o: coal.Halfspace(np.array([0.0, 0, 1]), 0.0)}[
                ob.shape](ob)
            P = B * pin.SE3(ob.pose[:3, :3], ob.pose[:3, 3])
            self.world[ob.id] = (shape, coal.Transform3s(P.rotation, P.translation))

    def set(self, qp, name: str, v: float) -> None:
        """Joint ``name`` at ``v`` in Pinocchio's configuration ``qp`` (a continuous joint is
        (cos, sin) there)."""
        i = self.idx[name]
        if self.model.joints[self.model.getJointId(name)].nq == 2:
            qp[i], qp[i + 1] = np.cos(v), np.sin(v)
        else:
            qp[i] = v

    @staticmethod
    def _near(a, ta, b, tb, d: float) -> bool:
        """Whether two shapes come closer than ``d`` (coal's collision test with a security
        margin: on meshes, triangles' distances)."""
        req, res = coal.CollisionRequest(), coal.CollisionResult()
        req.security_margin = d
        return coal.collide(a, ta, b, tb, req, res) > 0

    def clear_by(self, names, q, moving, pairs, d: float) -> bool:
        """Whether the configuration (ros2_ik's coordinate names and values) keeps ``d`` clear,
        for every value of the joints outside the model: moving links to the world, and the
        link pairs checked."""
        variants = [dict(zip(self.extra, v)) for v in zip(*self.extra.values())] or [{}]
        for ex in variants:
            qp = pin.neutral(self.model)
            for n, v in list(zip(names, q)) + list(ex.items()):
                if n in self.idx:
                    self.set(qp, n, v)
            pin.updateGeometryPlacements(self.model, self.data, self.geom, self.gdata, qp)
            tf = [coal.Transform3s(M.rotation, M.translation) for M in self.gdata.oMg]
            objs = self.geom.geometryObjects
            for k, link in enumerate(self.link):
                if link in moving:
                    for shape, t in self.world.values():
                        if self._near(objs[k].geometry, tf[k], shape, t, d):
                            return False
            for a, b in pairs:
                for i in (k for k, n in enumerate(self.link) if n == a):
                    for j in (k for k, n in enumerate(self.link) if n == b):
                        if self._near(objs[i].geometry, tf[i], objs[j].geometry, tf[j], d):
                            return False
        return True


def judging(judge: Judge, m, cm):
    """``judged(q, d)``: the configuration keeps ``d`` clear on the meshes, moving links to the
    world and the pairs ros2_ik checks, but the pairs it checks for contact only (an
    allowance: :attr:`CollisionModel.allowances`), which must not touch."""
    moving = {cm.link_names[c] for c in range(len(cm.link_names)) if not cm.static[c]}
    allowed = {frozenset(x[:2]) for x in cm.allowances}
    pairs = [(cm.link_names[a], cm.link_names[b]) for a, b in cm.pairs.tolist()]
    full = [p for p in pairs if frozenset(p) not in allowed]
    contact = [p for p in pairs if frozenset(p) in allowed]

    def judged(q, d):
        return judge.clear_by(m.q_names, q, moving, full, d) and \
            judge.clear_by(m.q_names, q, set(), contact, 0.0)
    return judged


@pytest.fixture(scope="module", params=list(CASES))
def robot(request):
    urdf, srdf, base, tip, extra = CASES[request.param]
    m = Model.from_urdf((ROBOTS / urdf).read_text(), base=base, tips=[tip])
    cm = default_collision_model(m, (ROBOTS / srdf).read_text(), within=MARGIN,
                                 search_path=[str(SHARE)])
    judged = judging(Judge(ROBOTS / urdf, extra), m, cm)
    return request.param, m, tip, cm, judged


def _goals(m, tip, cm, judged, n, seed, near_table=False, world=WORLD, table=0.0,
           with_q=False, spheres_first=True, up=(0.0, 0.0, 1.0)):
    """Goals whose known answer is clear by >= 1.5 cm on the meshes (judged), ``n`` at most;
    with ``near_table`` the tip 0-10 cm above the table (its top at z = ``table``); with
    ``with_q``, (goals, their known answers). ``spheres_first``: only configurations whose
    spheres too are 1.5 cm clear go to the judge (cheap); else every one (the goals a fit
    looser than the meshes cannot answer are among them). ``up``: the direction heights are
    measured along, in the base frame."""
    rng = np.random.default_rng(seed)
    Q = m.random_q(rng, 40_000 if near_table else 1500)
    T = np.asarray(fk_frames(m, Q, [tip]))[:, 0]
    keep = np.ones(len(Q), dtype=bool)
    if near_table:
        z = T[:, :3, 3] @ np.asarray(up, dtype=np.float64)
        keep &= (z >= table) & (z <= table + 0.10)
    # the spheres first (cheap; they cover the meshes), then the judge (pairs checked for
    # contact only need not be 1.5 cm apart: their allowance made 1.5 cm)
    idx = np.nonzero(keep)[0]
    if spheres_first:
        cm = cm.with_allowances([(a, b, 0.015) for a, b, _ in cm.allowances])
        idx = idx[clearance(m, cm, Q[idx], world, reach=0.02)[0] >= 0.015]
    out = [i for i in idx[:int((1.4 if spheres_first else 4) * n) + 20]
           if judged(Q[i], 0.015)][:n]
    return (T[out], Q[out]) if with_q else T[out]


def test_the_spheres_cover_the_meshes_and_overshoot_at_most_5_mm(robot):
    name, m, tip, cm, _ = robot
    from ros2_ik.api.spheres_cli import sphere_report

    rows = sphere_report(m, cm, [str(SHARE)], mesh=False)
    assert rows
    for link, n, over, uncovered, _ in rows:
        assert over <= 0.005 + 1e-9 and uncovered <= 1e-6, (name, link, n, over, uncovered)
    if name == "panda":  # the fingers, a side branch of the TCP chain, are in the model
        assert {"panda_leftfinger", "panda_rightfinger"} <= set(cm.link_names)
        assert any("covered over the whole range" in t for t in cm.notes)
    if name == "ur5":  # the wrist and the flange's box: never 1 cm apart, said so
        assert any("'wrist_2_link'-'ee_link'" in w for w in cm.warnings)


def test_clear_goals_are_solved_and_every_success_is_clear_on_the_meshes(robot):
    name, m, tip, cm, judged = robot
    cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True,
                   collision_margin=MARGIN, timeout=None)
    s = IKSolver(m, [tip], cfg, collision=cm)
    for near_table, n, rate in ((False, 400, 0.99), (True, 100, 0.95)):
        T = _goals(m, tip, cm, judged, n, seed=11 + near_table, near_table=near_table)
        assert len(T) >= 0.8 * n, (name, near_table, len(T))
        r = s.solve(T, world=WORLD)
        assert r.success.mean() >= rate, (name, near_table, r.success.mean(),
                                          [r.messages[i] for i in np.nonzero(~r.success)[0]])
        bad = [i for i in np.nonzero(r.success)[0] if not judged(r.q[i], MARGIN - SLACK)]
        assert not bad, (name, near_table, bad)


def test_a_mirrored_arm_is_modelled_and_no_answer_or_valid_state_collides_on_its_meshes():
    """Centauro's arm (every link a mirrored mesh, <mesh scale="0.001 -0.001 0.001">: once
    dropped, the arm 14 cm inside a table while the answer reported 0.22 m of clearance):
    every link with geometry has spheres, no collision-aware SUCCESS and no state check_states
    calls valid collides on the meshes (Pinocchio + coal), and clear goals are solved."""

    urdf = ROBOTS / "centauro_description/urdf/centauro.urdf"
    m = Model.from_urdf(urdf.read_text(), base="torso_2", tips=["ball1_tip"])
    cm = default_collision_model(m, (ROBOTS / "centauro_description/srdf/centauro.srdf")
                                 .read_text(), within=MARGIN, search_path=[str(SHARE)])
    assert cm.missing == ()
    arm = {f"arm1_{k}" for k in range(1, 7)}
    assert arm <= set(cm.link_names)
    judged = judging(Judge(urdf, {}, base="torso_2"), m, cm)

    _answers_and_states_judged(m, "ball1_tip", cm, judged, (60, 60), 21, 400, 4)


def _answers_and_states_judged(m, tip, cm, judged, n, seed, states, state_seed,
                               rate: float = 0.95) -> None:
    """Free goals and goals near the table (``n``: how many of each) solved at ``rate`` at
    least, no SUCCESS colliding on the meshes; then random ``states``, many of them in the
    table or the box: none that check_states calls valid collides on the meshes."""
    from ros2_ik import check_states

    cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True,
                   collision_margin=MARGIN, timeout=None)
    s = IKSolver(m, [tip], cfg, collision=cm)
    for near_table, k in zip((False, True), n):
        T = _goals(m, tip, cm, judged, k, seed=seed + near_table, near_table=near_table)
        assert len(T) >= 0.8 * k, (near_table, len(T))
        r = s.solve(T, world=WORLD)
        assert r.success.mean() >= rate, (near_table, r.success.mean())
        bad = [i for i in np.nonzero(r.success)[0] if not judged(r.q[i], MARGIN - SLACK)]
        assert not bad, (near_table, bad)
    q = m.random_q(np.random.default_rng(state_seed), states)
    c = check_states(m, q, WORLD, collision=cm, margin=MARGIN)
    assert c.complete and 0 < c.valid.sum() < len(q)
    wrong = [i for i in np.nonzero(c.valid)[0] if not judged(q[i], MARGIN - SLACK)]
    assert not wrong, wrong


def _talos_torso_and_left_arm(tmp_path) -> Path:
    """Talos's torso and left arm (links torso_1 ... arm_left_7 of talos_reduced.urdf, the
    rest cut away: the whole robot's fit takes minutes), as a URDF file."""
    import xml.etree.ElementTree as ET

    keep = {"torso_1_link", "torso_2_link"} | {f"arm_left_{k}_link" for k in range(1, 8)}
    root = ET.parse(ROBOTS / "talos_data/robots/talos_reduced.urdf").getroot()
    for el in list(root):
        if el.tag == "link" and el.get("name") in keep:
            continue
        if el.tag == "joint" and el.find("parent").get("link") in keep and \
                el.find("child").get("link") in keep:
            continue
        root.remove(el)
    out = tmp_path / "talos_torso_left_arm.urdf"
    out.write_text(ET.tostring(root, encoding="unicode"))
    return out


def test_a_pair_never_a_margin_apart_is_checked_for_contact_on_talos(tmp_path):
    """Talos's torso_2 and arm_left_2: their spheres come within the 1 cm margin in 99 % of
    configurations and overlap in 8.5 %. Once the pair was left out, unchecked: answers
    interpenetrated there on the meshes (0.4-0.5 mm), and of 6,000 random states the 11 whose
    meshes interpenetrate there, 7 were called valid. Now it is checked for contact (an
    allowance of the margin): none of those states is valid, and no collision-aware SUCCESS
    (free goals and goals near the table) or valid state collides on the meshes (Pinocchio +
    coal): the pair not even touching, every other pair and the world by the margin."""
    from ros2_ik import check_states
    from ros2_ik.ik.collision import link_pair_distances

    urdf = _talos_torso_and_left_arm(tmp_path)
    tip = "arm_left_7_link"
    m = Model.from_urdf(urdf.read_text(), base="torso_2_link", tips=[tip])
    cm = default_collision_model(m, (ROBOTS / "talos_data/srdf/talos.srdf").read_text(),
                                 within=MARGIN, search_path=[str(SHARE)])
    assert cm.missing == ()
    assert cm.allowances == (("arm_left_2_link", "torso_2_link", MARGIN),)
    assert not [d for d in cm.disabled if d[2] == "Always"]
    judge = Judge(urdf, {}, base="torso_2_link")
    judged = judging(judge, m, cm)
    contact = [("torso_2_link", "arm_left_2_link")]
    pairs = [(cm.link_names[a], cm.link_names[b]) for a, b in cm.pairs.tolist()]

    # the states whose meshes interpenetrate at the pair: none valid (7 of 11 once)
    raw = cm._replace(allowances=())
    q = m.random_q(np.random.default_rng(5), 6000)
    k = [set(p) for p in pairs].index(set(contact[0]))
    one = raw._replace(pairs=raw.pairs[[k]])
    cand = np.nonzero(link_pair_distances(m, one, q, 0.05)[:, 0] < 0.0)[0]
    inside = q[[i for i in cand if not judge.clear_by(m.q_names, q[i], set(), contact, 0.0)]]
    assert len(inside) >= 5, len(inside)
    c = check_states(m, inside, collision=cm, margin=MARGIN)
    assert c.complete and not c.valid.any()
    left_out = raw.with_disabled(contact, "Always")  # (what the test would see before)
    assert check_states(m, inside, collision=left_out, margin=MARGIN).valid.any()
    # answers and valid states, judged on the meshes
    _answers_and_states_judged(m, tip, cm, judged, (60, 40), 31, 300, 6)


def test_a_missing_mesh_is_an_error_naming_the_link_the_file_and_what_to_set(monkeypatch):
    monkeypatch.delenv("ROS2_IK_MESH_PATH", raising=False)
    urdf, srdf, base, tip, _ = CASES["panda"]
    m = Model.from_urdf((ROBOTS / urdf).read_text(), base=base, tips=[tip])
    with pytest.warns(UserWarning, match="not found"):
        cm = collision_model(m, srdf=(ROBOTS / srdf).read_text())
    assert {"panda_link0", "panda_link5"} <= {link for link, _ in cm.missing}
    with pytest.raises(CollisionGeometryError) as exc:
        IKSolver(m, [tip], IKConfig(avoid_collisions=True), collision=cm)
    text = str(exc.value)
    assert "panda_link5" in text and "link5.stl" in text and "search_path" in text
    assert "collision.mesh_path" in text
    # accepted explicitly: solves, the links without spheres not checked
    loose = collision_model(m, srdf=(ROBOTS / srdf).read_text(), accept_missing=True)
    IKSolver(m, [tip], IKConfig(avoid_collisions=True), collision=loose)
    # the mesh directory given: every link has its spheres
    assert not collision_model(m, search_path=[str(SHARE)]).missing


def test_the_spheres_command_reports_every_link(tmp_path):
    urdf = ROBOTS / CASES["ur5"][0]
    out = tmp_path / "ur5.srdf"
    r = subprocess.run([sys.executable, "-m", "ros2_ik.api.spheres_cli", "--urdf", str(urdf),
                        "--mesh-path", str(SHARE), "--write-srdf", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for link in ("shoulder_link", "upper_arm_link", "forearm_link", "wrist_3_link"):
        assert link in r.stdout
    from ros2_ik.model import parse_srdf

    srdf = parse_srdf(out.read_text())
    assert set(srdf.link_spheres) >= {"shoulder_link", "forearm_link"}
    # the written spheres are the model's: read back without any mesh
    m = Model.from_file(urdf)
    back = collision_model(m, srdf=srdf, accept_missing=True)
    fitted = collision_model(m, search_path=[str(SHARE)])
    assert back.num_spheres == fitted.num_spheres and not back.missing
    r = subprocess.run([sys.executable, "-m", "ros2_ik.api.spheres_cli", "--urdf", str(urdf)],
                       capture_output=True, text=True, timeout=120, env={
                           **__import__("os").environ, "ROS2_IK_MESH_PATH": ""})
    assert r.returncode == 2 and "shoulder.stl" in r.stderr and "--mesh-path" in r.stderr


def test_the_documented_constructor_says_when_a_pair_is_never_clear():
    """example-robot-data's UR5 through collision_model (not the default model): its wrist and
    the box on its flange never part by 1 cm; the solver says so when built, naming the pair
    (once 0 of 600 goals were solved with no word)."""
    import warnings

    from ros2_ik.model.collision import CollisionWarning

    urdf, srdf, base, tip, _ = CASES["ur5"]
    m = Model.from_urdf((ROBOTS / urdf).read_text(), base=base, tips=[tip])
    cm = collision_model(m, srdf=(ROBOTS / srdf).read_text(), search_path=[str(SHARE)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = IKSolver(m, [tip], IKConfig(avoid_collisions=True, collision_margin=MARGIN),
                     collision=cm)
    said = [str(x.message) for x in w if issubclass(x.category, CollisionWarning)]
    assert len(said) == 1 and "'wrist_2_link'-'ee_link'" in said[0], said
    assert s.collision_warnings == said


def test_the_judge_and_ros2_ik_read_a_mesh_as_its_file_says():
    """iCub's head (a COLLADA file of two ``<polylist>``s, one per material): its triangles as
    the file gives them (read here with ElementTree, a third reading) are the ones ros2_ik
    models and the judge measures; coal's own loader misplaces the second list's (its area
    3.6 times the file's), so the judge replaces that mesh (the iCub's arm could otherwise
    never be judged clear of its head)."""
    import xml.etree.ElementTree as ET

    from ros2_ik.model.urdf import parse_urdf

    def area(V, F):
        T = np.asarray(V, dtype=np.float64)[np.asarray(F)]
        return 0.5 * float(np.linalg.norm(np.cross(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0]),
                                          axis=1).sum())

    urdf = ROBOTS / "icub_description/robots/icub_reduced.urdf"
    dae = ROBOTS / "icub_description/meshes/upmc/collision/icub_simple_collision_head.dae"
    root = ET.parse(dae).getroot()
    ns = {"c": root.tag.split("}")[0][1:]}
    (geo,) = root.findall(".//c:geometry", ns)
    V = np.array(geo.find(".//c:float_array", ns).text.split(), dtype=float).reshape(-1, 3)
    F = []
    for pl in geo.findall(".//c:polylist", ns):
        assert set(pl.find("c:vcount", ns).text.split()) == {"3"}
        stride = len(pl.findall("c:input", ns))
        F.append(np.array(pl.find("c:p", ns).text.split(), dtype=int).reshape(-1, stride)[:, 0]
                 .reshape(-1, 3))
    assert len(F) == 2
    want = area(V, np.concatenate(F))
    # ros2_ik's reading
    from ros2_ik.model.meshes import element_shape

    (d,) = [c for c in parse_urdf(urdf.read_text()).collisions if c.link == "head"]
    shape, _ = element_shape(d, [str(SHARE)])
    assert area(shape.vertices, shape.faces) == pytest.approx(want, rel=1e-6)
    # coal's, and the judge's
    model = pin.buildModelFromUrdf(str(urdf))
    geom = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION,
                                 package_dirs=[str(SHARE)])
    (g,) = [g for g in geom.geometryObjects if g.name.startswith("head")]

    def coal_area(G):
        return area(*coal_triangles(G))
    misread = abs(coal_area(g.geometry) - want) > 0.01 * want  # (coal 3.0.3: 3.6 times)
    judge = Judge(urdf, {})
    assert bool([p for p in judge.replaced if p.endswith(dae.name)]) == misread
    (k,) = [k for k, n in enumerate(judge.link) if n == "head"]
    assert coal_area(judge.geom.geometryObjects[k].geometry) == pytest.approx(want, rel=1e-6)
