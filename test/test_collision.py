"""Collision-aware IK: the collision model, the world, the reference terms, the compiled terms
(host scalar, host lanes, CUDA through its host run) and the solver's contract.

Answers are checked here against the URDF's own collision geometry with code that does not
share the solver's path: points sampled on each link's primitives (trimesh) placed by FK, and
containment tests written below against the obstacles and the other links' primitives."""

from __future__ import annotations

import functools
import math
import subprocess
import sys

import numpy as np
import pytest

import cupy_standin
from ros2_ik import IKConfig, IKSolver, Model, load_robot, solve_pose
from ros2_ik.api import ChainSolver
from ros2_ik.backends import host as hostrun
from ros2_ik.backends import interface
from ros2_ik.backends.codegen import chain_of, solve_source
from ros2_ik.errors import IKError, InvalidInputError, ShapeError, UnknownLinkError
from ros2_ik.ik import Status
from ros2_ik.ik.collision import (CollisionObjective, allowed_mask, clearance, penalty,
                                  sample_disabled_pairs, sdf, sphere_centers)
from ros2_ik.ik.objectives import EvalContext
from ros2_ik.kinematics import fk, fk_frames
from ros2_ik.backends.terms.collision_scene import pack_scene
from ros2_ik.model.spheres import Shape
from ros2_ik.model.collision import (CollisionGeometryError, CollisionWarning, collision_model,
                                     spheres_from_yaml)
from ros2_ik.world import (LEAF, MAX_OBSTACLES, TREE_DEPTH, Obstacle, World, bounding_radius,
                           voxels, world_from_yaml)

need_cxx = pytest.mark.skipif(hostrun.available() is None, reason="no C++ compiler here")
TIP = "panda_hand_tcp"


def _quat_z(a):
    return [0.0, 0.0, math.sin(a / 2), math.cos(a / 2)]


def _all_shapes_world():
    return World().add(
        Obstacle.make("box", "box", (0.3, 0.2, 0.25), [0.4, 0.1, 0.4] + _quat_z(0.4)),
        Obstacle.make("ball", "sphere", (0.1,), [0.3, -0.3, 0.5, 0, 0, 0, 1]),
        Obstacle.make("can", "cylinder", (0.05, 0.6), [0.5, 0.3, 0.3] + _quat_z(0.3)),
        Obstacle.make("bar", "capsule", (0.05, 0.4),
                      [0.2, 0.4, 0.6, 0.0, math.sin(0.3), 0.0, math.cos(0.3)]),
        Obstacle.make("floor", "halfspace", pose=[0, 0, -0.3, 0, 0, 0, 1]))


def _cells_world(touch=()):
    """Every shape and a sensed surface: the cells (3 cm) of noisy points on a curved wall and
    a slab around the arm, hundreds of small boxes in a tree (some of them allowed to touch
    ``touch``)."""
    rng = np.random.default_rng(5)
    a = rng.uniform(-1.2, 1.2, 4000)
    wall = np.stack([0.55 * np.cos(a), 0.55 * np.sin(a), rng.uniform(0.0, 0.9, a.size)], 1)
    slab = np.stack([rng.uniform(0.2, 0.6, 1500), rng.uniform(-0.4, 0.4, 1500),
                     rng.uniform(0.55, 0.6, 1500)], 1)
    P = np.concatenate([wall, slab]) + rng.normal(0.0, 0.01, (5500, 3))
    c, sz = voxels.boxes(voxels.cloud_cells(P, 0.03))
    cells = voxels.obstacles(c, sz, prefix="cells")
    # allowed to touch: every fifth cell, and the whole slab (nodes none of whose obstacles is
    # checked against the link)
    cells = [o.with_touch(touch) if touch and (k % 5 == 0 or c[k][2] > 0.5) else o
             for k, o in enumerate(cells)]
    world = _all_shapes_world().add(*cells)
    tree = world.tree()
    assert len(tree) > 100 and tree.alone == 1  # (the floor)
    if touch:
        every = [all(world[world.ids[o]].touch for o in tree.order[tree.first[k]:tree.end[k]])
                 for k in range(len(tree))]
        assert 0 < sum(every) < len(every)
    return world


# ---------------------------------------------------------------- independent geometry checks

def _rpy(xyz, rpy):
    r, p, y = rpy
    Rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    Ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    Rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    T = np.eye(4)
    T[:3, :3] = Rz @ Ry @ Rx
    T[:3, 3] = xyz
    return T


@functools.lru_cache(maxsize=None)
def _shape_points(desc, n=300):
    import trimesh

    if desc.shape == "box":
        mesh = trimesh.creation.box(extents=desc.size)
    elif desc.shape == "cylinder":
        mesh = trimesh.creation.cylinder(radius=desc.size[0], height=desc.size[1], sections=48)
    elif desc.shape == "sphere":
        mesh = trimesh.creation.icosphere(radius=desc.size[0], subdivisions=3)
    else:
        raise AssertionError(desc.shape)
    pts, _ = trimesh.sample.sample_surface(mesh, n, seed=3)
    return np.concatenate([np.asarray(mesh.vertices), pts])


def geometry_points(m: Model, q, link=None):
    """Points on the links' URDF collision primitives at configuration q, in the base frame:
    {link name: (n, 3)}."""
    T = fk(m, np.asarray(q, dtype=float)[None])[0]
    out = {}
    for d in m.desc.collisions:
        if link is not None and d.link != link or d.link not in m.link_names:
            continue
        P = _shape_points(d)
        Tl = T[m.link_index(d.link)] @ _rpy(d.xyz, d.rpy)
        out.setdefault(d.link, []).append(P @ Tl[:3, :3].T + Tl[:3, 3])
    return {k: np.concatenate(v) for k, v in out.items()}


def _inside_obstacle(P, ob: Obstacle, grow: float):
    """Points within ``grow`` of the obstacle (closest-point clamping, not the solver's sdf)."""
    l = (P - ob.pose[:3, 3]) @ ob.pose[:3, :3]
    if ob.shape == "sphere":
        return np.linalg.norm(l, axis=1) <= ob.size[0] + grow
    if ob.shape == "box":
        h = 0.5 * np.asarray(ob.size)
        closest = np.clip(l, -h, h)
        return np.linalg.norm(l - closest, axis=1) <= grow
    if ob.shape == "cylinder":
        r, half = ob.size[0], 0.5 * ob.size[1]
        rho = np.linalg.norm(l[:, :2], axis=1)
        dr, dz = np.maximum(rho - r, 0), np.maximum(np.abs(l[:, 2]) - half, 0)
        return np.hypot(dr, dz) <= grow
    if ob.shape == "capsule":
        r, half = ob.size[0], 0.5 * ob.size[1]
        z = np.clip(l[:, 2], -half, half)
        return np.linalg.norm(l - np.stack([0 * z, 0 * z, z], 1), axis=1) <= r + grow
    return l[:, 2] <= grow  # half-space


def _inside_desc(P, m, q, desc, grow: float):
    """Points within ``grow`` of a link's URDF primitive at q."""
    T = fk(m, np.asarray(q, dtype=float)[None])[0]
    Tl = T[m.link_index(desc.link)] @ _rpy(desc.xyz, desc.rpy)
    size = desc.size
    if desc.shape == "box":
        ob = Obstacle.make("x", "box", size, Tl)
    elif desc.shape == "cylinder":
        ob = Obstacle.make("x", "cylinder", size, Tl)
    else:
        ob = Obstacle.make("x", "sphere", size, Tl)
    return _inside_obstacle(P, ob, grow)


def geometry_clear(m, cm, q, world: World, margin: float) -> bool:
    """Whether configuration q keeps the URDF geometry of every link a solve checks ``margin``
    clear of every obstacle and of the links it is checked against (cm.pairs), by sampling."""
    pts = geometry_points(m, q)
    moving = {cm.link_names[c] for c in range(len(cm.link_names)) if not cm.static[c]}
    for link, P in pts.items():
        if link not in moving:
            continue
        for ob in world:
            if _inside_obstacle(P, ob, margin).any():
                return False
    descs = {}
    for d in m.desc.collisions:
        descs.setdefault(d.link, []).append(d)
    for a, b in cm.pairs:
        la, lb = cm.link_names[a], cm.link_names[b]
        for d in descs.get(lb, []):
            if la in pts and _inside_desc(pts[la], m, q, d, 0.0).any():
                return False
    return True


# ---------------------------------------------------------------- the collision model

def test_urdf_collision_elements_are_read_and_bad_ones_are_warnings(tmp_path):
    import trimesh

    mesh = trimesh.creation.box(extents=(0.1, 0.2, 0.3))
    stl = tmp_path / "part.stl"
    mesh.export(stl)
    (tmp_path / "junk.stl").write_text("this is not a mesh")
    urdf = f"""<robot name="r">
      <link name="a"><collision><geometry><box size="0.2 0.2 0.1"/></geometry></collision></link>
      <link name="b">
        <collision><origin xyz="0 0 0.1"/><geometry><cylinder radius="0.05" length="0.2"/>
        </geometry></collision>
        <collision><geometry><sphere radius="-1"/></geometry></collision>
        <collision><geometry><mesh filename="file://{stl}" scale="2 2 2"/></geometry></collision>
      </link>
      <link name="c">
        <collision><geometry><mesh filename="package://nowhere/meshes/x.stl"/></geometry>
        </collision>
        <collision><geometry><mesh filename="{tmp_path / 'junk.stl'}"/></geometry></collision>
        <collision><geometry><cone/></geometry></collision>
      </link>
      <joint name="j1" type="revolute"><parent link="a"/><child link="b"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="j2" type="revolute"><parent link="b"/><child link="c"/><origin xyz="0 0 0.5"/>
        <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>"""
    with pytest.warns(UserWarning) as seen:
        m = Model.from_urdf(urdf)
    text = " ".join(str(w.message) for w in seen)
    assert "link 'b'" in text and "sphere radius" in text and "'c'" in text
    # an element that cannot be read is kept as such: its link's geometry is missing, not absent
    assert [d.shape for d in m.desc.collisions] == ["box", "cylinder", "unreadable", "mesh",
                                                    "mesh", "mesh", "unreadable"]
    with pytest.warns(CollisionWarning) as seen:
        cm = collision_model(m, search_path=[tmp_path])
    text = " ".join(str(w.message) for w in seen)
    assert "package://nowhere/meshes/x.stl" in text and "not found" in text and "'c'" in text
    assert "junk.stl" in text and "could not be read" in text
    assert cm.link_names == ("a", "b")  # c has nothing usable: no spheres, still a robot
    missing = dict(cm.missing)
    assert sorted(missing) == ["b", "c"]
    assert "sphere radius" in missing["b"] and "x.stl" in missing["c"] and "cone" in missing["c"]
    with pytest.raises(CollisionGeometryError, match="'b'"):
        cm.check_complete()
    # the scaled mesh (0.2 x 0.4 x 0.6) is covered by b's spheres
    pts = np.asarray(trimesh.creation.box(extents=(0.2, 0.4, 0.6)).vertices)
    sl = cm.spheres_of(1)
    d = np.linalg.norm(pts[:, None] - cm.center[sl][None], axis=2) - cm.radius[sl][None]
    assert np.all(d.min(axis=1) <= 1e-9)


@pytest.mark.parametrize("scale", ["-1 1 1", "1 -2 1", "-1 -1 -1"])
def test_a_mirrored_mesh_is_read_mirrored_and_covered(tmp_path, scale):
    """A <mesh scale> with negative factors mirrors the mesh (as urdfdom, Pinocchio and coal
    read it): the link keeps spheres, they cover the mirrored vertices within 5 mm and reach
    nowhere near where the unmirrored part would be."""
    import trimesh

    part = trimesh.creation.box(extents=(0.1, 0.06, 0.04))
    part.apply_translation((0.25, 0.12, 0.08))  # off-centre: a mirror moves it
    stl = tmp_path / "part.stl"
    part.export(stl)
    urdf = f"""<robot name="r"><link name="a"/>
      <link name="b"><collision><geometry><mesh filename="file://{stl}" scale="{scale}"/>
      </geometry></collision></link>
      <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    m = Model.from_urdf(urdf)
    assert [d.shape for d in m.desc.collisions] == ["mesh"]
    cm = collision_model(m)
    assert cm.missing == () and cm.link_names == ("b",)
    f = np.array([float(v) for v in scale.split()])
    V = np.asarray(part.vertices) * f
    sl = cm.spheres_of(0)
    cen, rad = np.asarray(cm.center[sl]), np.asarray(cm.radius[sl])
    d = np.linalg.norm(V[:, None] - cen[None], axis=2) - rad[None]
    assert np.all(d.min(axis=1) <= 1e-6)  # every mirrored vertex covered
    from ros2_ik.model.spheres import overshoot

    assert overshoot(cen, rad, V) <= 0.005 + 1e-6  # (the STL stores float32)
    far = np.linalg.norm(cen - np.asarray(part.vertices).mean(axis=0), axis=1)
    assert far.min() > 0.1  # not where the unmirrored part is


def test_a_zero_mesh_scale_is_missing_geometry_not_a_silent_gap():
    urdf = """<robot name="r"><link name="a"/>
      <link name="b"><collision><geometry><mesh filename="x.stl" scale="1 0 1"/>
      </geometry></collision></link>
      <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    with pytest.warns(UserWarning, match="non-zero"):
        m = Model.from_urdf(urdf)
    with pytest.warns(CollisionWarning):
        cm = collision_model(m)
    assert [link for link, _ in cm.missing] == ["b"] and "non-zero" in cm.missing[0][1]
    with pytest.raises(CollisionGeometryError, match="'b'"):
        cm.check_complete()


def _u_bracket():
    """A U of three boxes (a 6 cm slot between two 2 cm arms), as one mesh."""
    import trimesh

    parts = [trimesh.creation.box(extents=(0.10, 0.02, 0.04)),
             trimesh.creation.box(extents=(0.02, 0.06, 0.04)),
             trimesh.creation.box(extents=(0.02, 0.06, 0.04))]
    parts[1].apply_translation((-0.04, 0.04, 0.0))
    parts[2].apply_translation((0.04, 0.04, 0.0))
    m = trimesh.util.concatenate(parts)
    return Shape(np.asarray(m.vertices, dtype=float), np.asarray(m.faces))


def test_a_concave_link_s_spheres_fitted_to_the_mesh_stay_out_of_its_slot():
    """Fitted to the mesh (``to_mesh``), the overshoot bound holds against the link's own
    mesh, not only its hull: the spheres of a U reach at most 5 mm past it (exact signed
    distances), and none reaches the middle of its slot; bounded by the hull alone (the
    default) they fill the slot (the check can fail)."""
    from ros2_ik.model.concavity import mesh_overshoot
    from ros2_ik.model.spheres import coverage, fit_link, surface_points

    u = _u_bracket()
    c, r = fit_link([u], cache=False, to_mesh=True)
    assert mesh_overshoot(c, r, [u]) <= 0.005 + 1e-6
    assert coverage(c, r, surface_points([u], seed=99)) <= 0.0
    slot = np.array([[0.0, 0.04, 0.0], [0.0, 0.06, 0.0], [0.02, 0.05, 0.01]])
    assert np.all((np.linalg.norm(slot[:, None] - c[None], axis=2) - r[None]).min(axis=1) > 0)
    c0, r0 = fit_link([u], cache=False)
    assert mesh_overshoot(c0, r0, [u]) > 0.02


def test_a_link_of_separate_bodies_fitted_to_the_mesh_leaves_the_gaps_between_them_open():
    """Two boxes 8 cm apart in one mesh and a third body, a box primitive, above them (as a
    torso of plates and brackets is modelled): fitted to the mesh, each body is fitted within
    its own hull (and solid), so no sphere reaches into the gaps (at most 5 mm past the mesh,
    exact signed distances), every body is covered, and with fewer spheres than the link fitted
    whole against its solid; the link's hull alone fills the gaps (the check can fail)."""
    import trimesh

    from ros2_ik.model.concavity import mesh_overshoot
    from ros2_ik.model.spheres import MAX_BODIES, Shape, _bodies, _fit, coverage, fit_link, \
        surface_points

    a = trimesh.creation.box((0.04, 0.04, 0.1))
    b = a.copy()
    b.apply_translation((0.12, 0.0, 0.0))
    two = trimesh.util.concatenate([a, b])
    pair = Shape(np.asarray(two.vertices), np.asarray(two.faces))
    lid = trimesh.creation.box((0.16, 0.04, 0.02))
    T = np.eye(4)
    T[:3, 3] = (0.06, 0.0, 0.1)
    lid.apply_transform(T)
    top = Shape(np.asarray(lid.vertices), np.asarray(lid.faces),
                ("box", T, (0.08, 0.02, 0.01)))
    shapes = [pair, top]
    assert len(_bodies(shapes)) == 3
    c, r = fit_link(shapes, cache=False, to_mesh=True)
    assert mesh_overshoot(c, r, shapes) <= 0.005 + 1e-6
    assert coverage(c, r, surface_points(shapes, seed=99)) <= 0.0
    gap = np.array([[0.06, 0.0, 0.0], [0.06, 0.0, -0.04], [0.05, 0.01, 0.03]])
    assert np.all((np.linalg.norm(gap[:, None] - c[None], axis=2) - r[None]).min(axis=1) > 0)
    c0, r0 = fit_link(shapes, cache=False)
    assert mesh_overshoot(c0, r0, shapes) > 0.02
    # (the link as a whole, against its solid (lattice-bounded), keeps out of the gaps too,
    # with more spheres: 535 against 348 here; Tiago's torso 33,808 against 10,976)
    assert len(r) < 0.8 * len(_fit(shapes, 0.005, True)[1])
    # (a mesh of more pieces than MAX_BODIES is fitted whole)
    many = trimesh.util.concatenate([trimesh.creation.box((0.01, 0.01, 0.01)).apply_translation(
        (0.02 * k, 0.0, 0.0)) for k in range(MAX_BODIES + 1)])
    assert len(_bodies([Shape(np.asarray(many.vertices), np.asarray(many.faces))])) == 1


def test_a_convex_link_is_fitted_against_its_hull_alone():
    """No concavity deeper than SHALLOW: the solid's depth plays no part (a box, a cylinder)."""
    import trimesh

    from ros2_ik.model.concavity import solid_depth
    from ros2_ik.model.spheres import _hull

    for m in (trimesh.creation.box(extents=(0.1, 0.2, 0.05)),
              trimesh.creation.cylinder(radius=0.04, height=0.2, sections=64)):
        V = np.asarray(m.vertices, dtype=float)
        N, b, _ = _hull(V)
        s = Shape(V, np.asarray(m.faces))
        assert solid_depth([s], lambda X: (b[None] - X @ N.T).min(axis=1)) is None
    u = _u_bracket()
    N, b, _ = _hull(u.vertices)
    assert solid_depth([u], lambda X: (b[None] - X @ N.T).min(axis=1)) is not None


def _primitive_mesh(d):
    import trimesh

    return {"box": lambda: trimesh.creation.box(extents=d.size),
            "cylinder": lambda: trimesh.creation.cylinder(radius=d.size[0], height=d.size[1],
                                                          sections=128),
            "sphere": lambda: trimesh.creation.icosphere(radius=d.size[0], subdivisions=4)
            }[d.shape]()


@pytest.mark.parametrize("name", ["panda", "ur", "dual_arm"])
def test_the_spheres_cover_the_urdf_geometry_and_overshoot_at_most_5_mm(name):
    """Every point of every link's URDF primitives (sampled densely, independently of the
    fit's own samples; points inside another primitive of the link need no cover) lies in one
    of its spheres, and in no direction do the spheres reach more than 5 mm past the link's
    geometry (support functions, 2000 directions)."""
    import trimesh

    m = load_robot(name)
    cm = collision_model(m)
    descs = {}
    for d in m.desc.collisions:
        descs.setdefault(d.link, []).append(d)
    dirs = np.random.default_rng(5).normal(size=(2000, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    for link, ds in descs.items():
        c = cm.link_names.index(link)
        sl = cm.spheres_of(c)
        cen, rad = cm.center[sl], cm.radius[sl]
        surface, support = [], []
        for d in ds:
            mesh = _primitive_mesh(d)
            pts, _ = trimesh.sample.sample_surface(mesh, 20000, seed=11)
            T = _rpy(d.xyz, d.rpy)
            P = np.concatenate([pts, mesh.vertices]) @ T[:3, :3].T + T[:3, 3]
            inside = np.zeros(len(P), dtype=bool)
            for o in ds:
                if o is not d:
                    l = (P - _rpy(o.xyz, o.rpy)[:3, 3]) @ _rpy(o.xyz, o.rpy)[:3, :3]
                    if o.shape == "sphere":
                        inside |= np.linalg.norm(l, axis=1) < o.size[0] - 1e-6
                    elif o.shape == "cylinder":
                        inside |= ((np.linalg.norm(l[:, :2], axis=1) < o.size[0] - 1e-6)
                                   & (np.abs(l[:, 2]) < 0.5 * o.size[1] - 1e-6))
                    else:
                        inside |= np.all(np.abs(l) < 0.5 * np.asarray(o.size) - 1e-6, axis=1)
            surface.append(P[~inside])
            support.append((P @ dirs.T).max(axis=0))
        P = np.concatenate(surface)
        gap = (np.linalg.norm(P[:, None] - cen[None], axis=2) - rad[None]).min(axis=1)
        assert gap.max() <= 5e-4, (link, gap.max())  # covered (0.5 mm: sampling between)
        over = (cen @ dirs.T + rad[:, None]).max(axis=0) - np.max(support, axis=0)
        assert over.max() <= 0.005 + 1e-4, (link, over.max())
    assert cm.overshoot == 0.005


def test_spheres_yaml_round_trip_and_bad_input():
    m = load_robot("panda")
    cm = collision_model(m)
    text = cm.to_yaml()
    again = collision_model(m, spheres=text)
    assert again.link_names == cm.link_names
    for c in range(len(cm.link_names)):
        a = np.concatenate([cm.center, cm.radius[:, None]], 1)[cm.spheres_of(c)]
        b = np.concatenate([again.center, again.radius[:, None]], 1)[again.spheres_of(c)]
        np.testing.assert_allclose(b[np.lexsort(b.T[::-1])], a[np.lexsort(a.T[::-1])],
                                   atol=2e-6)
    one = collision_model(m, spheres={"panda_hand": [[0, 0, 0.05, 0.08]]})
    assert one.num_spheres == cm.num_spheres - (cm.spheres_of(cm.link_names.index(
        "panda_hand")).stop - cm.spheres_of(cm.link_names.index("panda_hand")).start) + 1
    for bad, what in (("spheres: {nolink: [[0, 0, 0, 0.1]]}", "nolink"),
                      ("spheres: {panda_hand: [[0, 0, 0, -0.1]]}", "radius"),
                      ("spheres: {panda_hand: [[0, 0, .nan, 0.1]]}", "finite"),
                      ("spheres: {panda_hand: [[0, 0]]}", "list"),
                      ("just text", "mapping"), ("spheres: [1, 2", "cannot be read")):
        with pytest.raises(IKError) as exc:
            spheres_from_yaml(bad, m)
        assert what in str(exc.value), (bad, str(exc.value))


def test_self_pairs_leave_out_adjacent_and_srdf_pairs():
    m = load_robot("panda")
    plain = collision_model(m, srdf='<robot name="panda"/>')
    names = plain.link_names
    checked = {(names[a], names[b]) for a, b in plain.pairs}
    assert ("panda_link0", "panda_link1") not in checked  # adjacent
    assert ("panda_link7", "panda_hand") not in checked   # adjacent through a fixed link
    assert ("panda_link0", "panda_link5") in checked
    cm = collision_model(m)  # the bundled SRDF's disable_collisions
    assert len(cm.pairs) < len(plain.pairs)
    assert ("panda_link2", "panda_link4", "Never") in cm.disabled or \
        ("panda_link2", "panda_link4") in {(names[a], names[b]) for a, b in cm.pairs}


def test_sampled_pairs_include_every_adjacent_pair_and_no_pair_seen_to_collide():
    """The sampled "Never" pairs never overlap in an independent check of the same samples
    (sphere centres from FK, distances by scipy), and every adjacent pair is in the list."""
    from scipy.spatial.distance import cdist

    for name in ("panda", "dual_arm"):
        m = load_robot(name)
        cm = collision_model(m, srdf=f'<robot name="{name}"/>')
        out = sample_disabled_pairs(m, cm, samples=2000, rng_seed=4)
        got = {(a, b): why for a, b, why in out}
        for a, b, why in cm.disabled:
            if why == "Adjacent":
                assert got.get((a, b)) == "Adjacent"
        q = m.random_q(np.random.default_rng(4), 2000)
        T = fk(m, q)
        for (a, b), why in got.items():
            if why != "Never":
                continue
            ca, cb = cm.link_names.index(a), cm.link_names.index(b)
            sa, sb = cm.spheres_of(ca), cm.spheres_of(cb)
            Ta, Tb = T[:, cm.links[ca]], T[:, cm.links[cb]]
            pa = np.einsum("nij,sj->nsi", Ta[:, :3, :3], cm.center[sa]) + Ta[:, None, :3, 3]
            pb = np.einsum("nij,sj->nsi", Tb[:, :3, :3], cm.center[sb]) + Tb[:, None, :3, 3]
            rr = cm.radius[sa][:, None] + cm.radius[sb][None]
            for k in range(0, 2000, 97):
                assert np.all(cdist(pa[k], pb[k]) >= rr), (a, b, k)


def test_collision_pairs_command_writes_an_srdf(tmp_path):
    out = tmp_path / "ur.srdf"
    r = subprocess.run([sys.executable, "-m", "ros2_ik.api.collision_pairs", "--robot", "ur",
                        "--samples", "500", "--write", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    from ros2_ik.model import parse_srdf

    srdf = parse_srdf(out.read_text())
    assert len(srdf.disabled_collisions) >= 6 and srdf.group_names == ["ur_manipulator"]
    r = subprocess.run([sys.executable, "-m", "ros2_ik.api.collision_pairs", "--urdf",
                        str(tmp_path / "none.urdf")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "error:" in r.stderr


# ---------------------------------------------------------------- the world

def test_bad_obstacles_are_refused_naming_them():
    cases = [(("a", "cone", (1,)), "unknown shape"), (("a", "sphere", (-0.1,)), "positive"),
             (("a", "box", (1, 1)), "3 sizes"), (("a", "box", (1, 0, 1)), "degenerate"),
             (("a", "sphere", (0.1,), [0, 0, float("nan"), 0, 0, 0, 1]), "NaN"),
             (("a", "sphere", (0.1,), [0, 0, 0, 0, 0, 0, 0]), "unit quaternion"),
             (("a", "sphere", (0.1,), np.diag([2.0, 1, 1, 1])), "rigid"),
             (("", "sphere", (0.1,)), "non-empty"), (("a", "sphere", (np.inf,)), "positive"),
             (("a", "sphere", (0.1,), np.zeros(3)), "shape")]
    for args, what in cases:
        with pytest.raises((InvalidInputError, ShapeError)) as exc:
            Obstacle.make(*args)
        assert what in str(exc.value), (args, str(exc.value))
    too_many = [Obstacle.make(f"o{i}", "sphere", (0.01,)) for i in range(MAX_OBSTACLES + 1)]
    with pytest.raises(InvalidInputError, match="exceed"):
        World(too_many)


def test_world_changes_are_new_versions_and_yaml_round_trips():
    w0 = World()
    w1 = w0.add(Obstacle.make("t", "box", (1, 1, 0.1), [0, 0, -0.05, 0, 0, 0, 1]))
    w2 = w1.move("t", [0, 0, 0.2, 0, 0, 0, 1])
    w3 = w2.remove("t")
    assert [w.version for w in (w0, w1, w2, w3)] == [0, 1, 2, 3]
    assert len(w0) == 0 and w1["t"].pose[2, 3] == -0.05 and w2["t"].pose[2, 3] == 0.2
    with pytest.raises(InvalidInputError, match="no obstacle 'x'"):
        w1.remove("x")
    w = _all_shapes_world()
    back = world_from_yaml(w.to_yaml())
    np.testing.assert_allclose(back.packed(), w.packed(), atol=1e-12)
    for bad in ("obstacles: 3", "obstacles: [{id: a, shape: box, size: [1, 1]}]",
                "obstacles: [{id: a, shape: sphere, size: [1], colour: red}]", "[: :"):
        with pytest.raises(IKError):
            world_from_yaml(bad)


# ---------------------------------------------------------------- the reference terms

def test_sdf_matches_closest_point_distances_and_its_gradient():
    """The signed distance of points outside each shape equals the closest-point distance
    (clamping, written here), inside it is negative, and its gradient is the distance's
    derivative (finite differences)."""
    w = _all_shapes_world()
    rng = np.random.default_rng(0)
    P = rng.uniform(-0.6, 1.0, size=(4000, 3))
    d, g = sdf(w.packed(), P)
    for k, ob in enumerate(w):
        l = (P - ob.pose[:3, 3]) @ ob.pose[:3, :3]
        if ob.shape == "box":
            h = 0.5 * np.asarray(ob.size)
            outside = np.linalg.norm(l - np.clip(l, -h, h), axis=1)
            ref = np.where(outside > 0, outside, np.max(np.abs(l) - h, axis=1))
        elif ob.shape == "sphere":
            ref = np.linalg.norm(l, axis=1) - ob.size[0]
        elif ob.shape == "cylinder":
            r, half = ob.size[0], 0.5 * ob.size[1]
            q = np.stack([np.linalg.norm(l[:, :2], axis=1) - r, np.abs(l[:, 2]) - half], 1)
            ref = np.linalg.norm(np.maximum(q, 0), axis=1) + np.minimum(q.max(axis=1), 0)
        elif ob.shape == "capsule":
            r, half = ob.size[0], 0.5 * ob.size[1]
            z = np.clip(l[:, 2], -half, half)
            ref = np.linalg.norm(l - np.stack([0 * z, 0 * z, z], 1), axis=1) - r
        else:
            ref = l[:, 2]
        np.testing.assert_allclose(d[:, k], ref, atol=1e-12, err_msg=ob.shape)
        eps = 1e-6
        for axis in range(3):
            dP = np.zeros(3)
            dP[axis] = eps
            fd = (sdf(w.packed(), P + dP)[0][:, k] - sdf(w.packed(), P - dP)[0][:, k]) / (2 * eps)
            smooth = np.abs(fd - g[:, k, axis]) < 1e-4
            assert smooth.mean() > 0.97, (ob.shape, axis, smooth.mean())
    np.testing.assert_allclose(np.linalg.norm(g, axis=-1), 1.0, atol=1e-9)


def test_penalty_shape():
    x = np.array([-0.1, 0.0, 0.005, 0.01, 0.2])
    v, dv = penalty(x, 0.01)
    np.testing.assert_allclose(v, [0.105, 0.005, 0.00125, 0.0, 0.0])
    np.testing.assert_allclose(dv, [-1, -1, -0.5, 0, 0])
    v, dv = penalty(x, 0.0)
    np.testing.assert_allclose(v, [0.1, 0, 0, 0, 0])


@pytest.mark.parametrize("name", ["panda", "dual_arm"])
def test_collision_objective_jacobian_matches_finite_differences(name):
    m = load_robot(name)
    cm = collision_model(m)
    obj = CollisionObjective(m, cm, _all_shapes_world(), margin=0.01, activation=0.05)
    q = m.random_q(np.random.default_rng(2), 40)
    cost, _, H, g = obj.terms(EvalContext(m, q, q))
    assert (cost > 0).sum() > 10
    eps = 1e-7
    for k, v in enumerate(m.v_active):
        i = int(np.nonzero(m.q_to_v == v)[0][0])
        dq = np.zeros(m.nq)
        dq[i] = eps
        cp_ = obj.terms(EvalContext(m, q + dq, q))[0]
        cm_ = obj.terms(EvalContext(m, q - dq, q))[0]
        fd = (cp_ - cm_) / (2 * eps)  # d cost / dq = J^T r
        close = np.abs(fd - g[:, k]) <= 1e-5 + 1e-4 * np.abs(fd)
        assert close.mean() > 0.95, (name, k, close.mean())
    # J^T J is a sum of outer products of the rows: symmetric, positive semi-definite
    np.testing.assert_allclose(H, np.swapaxes(H, 1, 2), atol=1e-12)
    assert np.linalg.eigvalsh(H).min() > -1e-9


def test_a_world_of_many_obstacles_is_checked_through_a_tree_of_bounding_boxes():
    """A sensed world's obstacles are held in a tree (each obstacle in exactly one leaf of at
    most LEAF, every node's box holding its obstacles' surfaces, children splitting their
    parent's range; half-spaces alone; a world of a few primitives all alone, as before), and
    the reference's distances through the tree equal a brute-force check of every sphere
    against every obstacle it may not touch."""
    small = _all_shapes_world().tree()
    assert np.array_equal(small.order, np.arange(5)) and small.alone == 5 and not len(small)
    m = load_robot("panda")
    cm = collision_model(m)
    world = _cells_world(touch=[cm.link_names[-1]])
    tree = world.tree()
    assert np.array_equal(np.sort(tree.order), np.arange(len(world)))
    assert world.ids[tree.order[0]] == "floor" and tree.first[0] == 1 == tree.alone
    assert tree.end[0] == len(world) and 2 < tree.depth <= TREE_DEPTH
    packed = world.packed()
    orad = bounding_radius(packed)
    # every obstacle's surface (points sampled on it, trimesh) inside its nodes' boxes
    import trimesh

    surface = {}
    for o in range(len(world)):
        ob = world[world.ids[o]]
        if ob.shape == "box":
            mesh = trimesh.creation.box(extents=ob.size, transform=ob.pose)
        elif ob.shape == "sphere":
            mesh = trimesh.creation.icosphere(radius=ob.size[0]).apply_transform(ob.pose)
        elif ob.shape == "halfspace":
            continue
        else:
            mesh = trimesh.creation.capsule(radius=ob.size[0], height=ob.size[1]) \
                if ob.shape == "capsule" else trimesh.creation.cylinder(
                    radius=ob.size[0], height=ob.size[1])
            mesh.apply_transform(ob.pose)
        surface[o] = np.concatenate([mesh.vertices, mesh.sample(200, seed=o)])
    for k in range(len(tree)):
        mem = tree.order[tree.first[k]:tree.end[k]]
        assert np.all(orad[mem] >= 0)
        pts = np.concatenate([surface[o] for o in mem])
        assert np.all(pts >= tree.lo[k] - 1e-9) and np.all(pts <= tree.hi[k] + 1e-9)
        a, b = tree.left[k], tree.right[k]
        if a < 0:
            assert b < 0 and 1 <= len(mem) <= LEAF
        else:
            assert a > k and b > k and tree.first[a] == tree.first[k]
            assert tree.end[a] == tree.first[b] and tree.end[b] == tree.end[k]
    q = m.random_q(np.random.default_rng(2), 300)
    obj = CollisionObjective(m, cm, world, margin=0.0, activation=0.05,
                             self_collisions=False)
    d, which = obj.nearest(EvalContext(m, q, q))
    P = sphere_centers(m, cm, fk(m, q))
    brute = np.full(len(q), np.inf)
    skip = allowed_mask(cm, world)
    for o in range(len(world)):
        ok = ~skip[o][cm.sphere_link]
        do = sdf(packed[o:o + 1], P[:, ok])[0][..., 0] - cm.radius[ok]
        brute = np.minimum(brute, do.min(axis=1))
    near = brute < 0.05
    assert near.sum() > 100 and (~near).sum() > 10
    np.testing.assert_allclose(d[near], brute[near], atol=1e-12)
    assert np.all(d[~near] >= 0.05 - 1e-12) and np.all(d <= brute + 1e-12)
    np.testing.assert_allclose(clearance(m, cm, q, world, self_collisions=False)[0], brute,
                               atol=1e-12)


def test_the_check_of_no_configurations_is_empty():
    m = load_robot("panda")
    cm = collision_model(m)
    for world in (None, _all_shapes_world(), _cells_world()):
        d, k, _ = clearance(m, cm, np.zeros((0, m.nq)), world)
        assert d.shape == (0,) and k.shape == (0,) and k.dtype == np.int64


def test_links_within_the_margin_of_an_obstacle_in_every_configuration_are_all_found():
    """always_touching (the node's warning: no clear answer exists) in a world of hundreds of
    boxes and a collar around the panda's shoulder: the links it names are exactly those a
    brute-force check of every sphere against every obstacle finds within the margin in 95 %
    of the same random configurations (its bounding-sphere filter leaves none out)."""
    from ros2_ik.ik.collision import always_touching

    m = load_robot("panda")
    cm = collision_model(m)
    world = _cells_world().add(Obstacle.make("collar", "cylinder", (0.12, 0.1),
                                             [0.0, 0.0, 0.333, 0, 0, 0, 1]))
    got = always_touching(m, cm, world, margin=0.01)
    q = m.random_q(np.random.default_rng(0), 200)
    P = sphere_centers(m, cm, fk(m, q))
    packed, skip = world.packed(), allowed_mask(cm, world)
    want = []
    for c, link in enumerate(cm.link_names):
        sl = cm.spheres_of(c)
        if cm.static[c] or sl.stop <= sl.start:
            continue
        for o in np.nonzero(~skip[:, c])[0]:
            d = sdf(packed[o:o + 1], P[:, sl])[0][..., 0] - cm.radius[sl]
            frac = float(np.mean(d.min(axis=1) < 0.01))
            if frac >= 0.95:
                want.append((link, world.ids[o], frac))
    assert sorted(got) == sorted(want)
    assert {o for _, o, _ in got} == {"collar"} and len(got) >= 1


# ---------------------------------------------------------------- compiled terms

def _terms(m, tips, cm, world, q, cfg):
    ch = chain_of(m, tips, cm)
    mod = hostrun.compile_host(solve_source(ch, "float64", host=True))
    f = mod.get_function("r2ik_coll_terms")
    nc = ch.nc
    out = np.zeros((len(q), 4 + nc * nc + nc))
    sc = pack_scene(ch.coll, cm, world)
    f(len(q), len(q), np.ascontiguousarray(q), sc.data, sc.n_obs,
      interface.options_record(cfg).view(np.uint8), out)
    return ch, out


@need_cxx
@pytest.mark.parametrize("name,tips,cells", [
    ("panda", [TIP], False), ("ur", ["tool0"], False),
    ("dual_arm", ["left_tool", "right_tool"], False), ("panda", [TIP], True),
    ("dual_arm", ["left_tool", "right_tool"], True)])
def test_compiled_collision_terms_equal_the_reference(name, tips, cells):
    """The generated terms (cost, J^T J, J^T r of the collision rows, the exact check's
    distance and pair) equal the reference's, on every shape, self pairs included; and in a
    sensed world of hundreds of boxes in a tree (some allowed to touch a link)."""
    m = load_robot(name)
    cm = collision_model(m)
    world = _cells_world(touch=[cm.link_names[-1]]) if cells else _all_shapes_world()
    cfg = IKConfig(avoid_collisions=True, collision_activation=0.05)
    q = m.random_q(np.random.default_rng(1), 200)
    ch, out = _terms(m, tips, cm, world, q, cfg)
    obj = CollisionObjective(m, cm, world, margin=cfg.collision_margin,
                             activation=cfg.collision_activation)
    ctx = EvalContext(m, q, q)
    cost, clear, H, g = obj.terms(ctx)
    cols = [list(m.v_active).index(m.q_to_v[c]) for c in ch.colq]
    nc = ch.nc
    assert (cost > 0).sum() > 20
    np.testing.assert_allclose(out[:, 0], cost, atol=1e-12)
    np.testing.assert_allclose(out[:, 4:4 + nc * nc].reshape(-1, nc, nc),
                               H[:, cols][:, :, cols], atol=1e-11)
    np.testing.assert_allclose(out[:, 4 + nc * nc:], g[:, cols], atol=1e-11)
    # the rows' smallest distance: exact where nothing penetrates (the kernels stop looking
    # once a pair does), and then below margin + activation
    thr = cfg.collision_margin + cfg.collision_activation
    ok = clear >= 0
    np.testing.assert_allclose(np.minimum(out[ok, 1], thr), np.minimum(clear[ok], thr),
                               atol=1e-12)
    assert np.all(out[~ok, 1] < 0)
    # the rows equal as the solver takes them
    r, J = obj.residual(ctx, np.arange(len(q)))
    Jc = J[:, :, cols]
    np.testing.assert_allclose(np.einsum("nri,nrj->nij", Jc, Jc), H[:, cols][:, :, cols],
                               atol=1e-9)
    np.testing.assert_allclose(0.5 * (r * r).sum(1), cost, atol=1e-12)
    # the check: its distance exact below margin + activation, with the nearest pair (one of
    # the equally near ones), and a bound below the distance beyond
    d, which = obj.nearest(ctx)
    near = d < thr
    np.testing.assert_allclose(out[near, 2], d[near], atol=1e-12)
    same = out[near, 3] == which[near]
    assert same.mean() > 0.95
    assert np.all(out[~near, 2] >= thr - 1e-12)
    d_exact = clearance(m, cm, q, world)[0]
    assert np.all(out[:, 2] <= d_exact + 1e-12)


@need_cxx
@pytest.mark.parametrize("cells", [False, True])
def test_scalar_and_vector_rows_are_bit_equal_with_collisions(cells):
    m = load_robot("panda")
    q = m.random_q(np.random.default_rng(7), 64)
    T = fk_frames(m, q, [TIP])[:, 0]
    cfg = IKConfig(num_seeds=4, stall_iterations=5, avoid_collisions=True)
    s = IKSolver(m, [TIP], cfg)
    assert s.backend == "host" and s._impl.lanes in (0, 4)
    world = _cells_world(touch=["panda_link7"]) if cells else _all_shapes_world()
    batch = s.solve(T, world=world)  # lanes (P >= 4)
    for i in range(0, 64, 9):
        one = s.solve(T[i:i + 1], world=world)  # one row at a time
        np.testing.assert_array_equal(one.q[0], batch.q[i])
        assert one.status[0] == batch.status[i] and one.iterations[0] == batch.iterations[i]


# ---------------------------------------------------------------- the solver's contract

def _colliding_free_answers(m, cm, world, n=3000, seed=0, want=8):
    """Goals made by FK of configurations clear of the robot itself and of ``world`` (so a
    clear answer exists), and random seeds from which today's answer (no avoidance) collides
    by the independent geometry check: (targets, seeds), at most ``want``."""
    rng = np.random.default_rng(seed)
    q = m.random_q(rng, n)
    clear_q = clearance(m, cm, q, world)[0] > 0.03
    T = fk_frames(m, q[clear_q], [TIP])[:, 0]
    seeds = m.random_q(rng, len(T))
    free = solve_pose(m, T, tips=TIP, seeds=seeds, config=IKConfig(num_seeds=1))
    suspects = np.nonzero(free.success & (clearance(m, cm, free.q, world)[0] < 0))[0]
    hits = [i for i in suspects if not geometry_clear(m, cm, free.q[i], world, 0.0)][:want]
    return T[hits], seeds[hits]


@pytest.mark.parametrize("backend", ["reference", "host"])
@pytest.mark.parametrize("scene", ["self", "box"])
def test_an_answer_that_collides_is_replaced_by_a_clear_one(backend, scene):
    """Goals where today's answer (no avoidance) collides, by the independent check on the
    URDF geometry: the arm folded into itself, or through a box in front of the robot. With
    avoidance the answers succeed within the tolerances and are clear by the margin."""
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no C++ compiler")
    m = load_robot("panda")
    cm = collision_model(m)
    world = World()
    if scene == "box":
        world = world.add(Obstacle.make("box", "box", (0.3, 0.6, 0.3), [0.45, 0.0, 0.35, 0, 0,
                                                                         0, 1]))
    T, seeds = _colliding_free_answers(m, cm, world)
    assert len(T) >= 4  # the scene has goals where today's answer collides
    cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True)
    r = solve_pose(m, T, tips=TIP, seeds=seeds, config=cfg, world=world, backend=backend)
    assert r.success.mean() >= 0.75, r.messages
    assert np.all(r.status[r.success] == Status.CONVERGED)
    assert np.all(r.clearance[r.success] >= cfg.collision_margin)
    for i in np.nonzero(r.success)[0]:
        assert geometry_clear(m, cm, r.q[i], world, cfg.collision_margin), i
    assert r.world_version == world.version


@pytest.mark.parametrize("backend", ["reference", "host"])
def test_a_goal_reached_only_in_collision_is_in_collision_naming_the_pair(backend):
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no C++ compiler")
    m = load_robot("panda")
    q = m.neutral_q()
    T = fk_frames(m, q[None], [TIP])[0, 0]
    p = T[:3, 3]
    # a ball around the hand's goal: every answer within the tolerances is inside it
    world = World().add(Obstacle.make("ball", "sphere", (0.12,), [p[0], p[1], p[2], 0, 0, 0, 1]))
    cfg = IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True, max_iterations=60)
    r = solve_pose(m, T[None], tips=TIP, config=cfg, world=world, backend=backend)
    assert not r.success[0]
    assert r.status[0] in (Status.IN_COLLISION, Status.NOT_CONVERGED)
    if r.status[0] == Status.IN_COLLISION:
        assert "obstacle 'ball'" in r.messages[0] and "collides" in r.messages[0]
        assert r.clearance[0] < cfg.collision_margin
    # a goal reachable only by the link inside the ball: IN_COLLISION with the pair named
    cfg1 = IKConfig(num_seeds=1, avoid_collisions=True, collision_weight=1e-6,
                    max_iterations=200)
    r = solve_pose(m, T[None], tips=TIP, config=cfg1, world=world, seeds=q, backend=backend)
    assert r.status[0] == Status.IN_COLLISION and not r.success[0]
    assert "obstacle 'ball'" in r.messages[0]
    assert r.position_error[0] <= cfg1.position_tolerance


def test_collision_options_and_inputs_are_checked():
    m = load_robot("panda")
    for bad in ({"collision_margin": -0.1}, {"collision_activation": float("nan")},
                {"collision_weight": 0.0}, {"avoid_collisions": 1}):
        with pytest.raises(IKError):
            IKConfig(**bad)
    with pytest.raises(InvalidInputError, match="collision avoidance is off"):
        solve_pose(m, np.eye(4)[None], tips=TIP, world=_all_shapes_world())
    with pytest.raises(InvalidInputError, match="'dls' or 'ccd\\+dls'"):
        solve_pose(m, np.eye(4)[None], tips=TIP, solver="ccd",
                   config=IKConfig(avoid_collisions=True))
    with pytest.raises(IKError, match="World"):
        solve_pose(m, np.eye(4)[None], tips=TIP, config=IKConfig(avoid_collisions=True),
                   world="table")
    with pytest.raises(UnknownLinkError):
        collision_model(m, spheres={"nolink": [[0, 0, 0, 0.1]]})


@need_cxx
def test_ccd_then_lm_keeps_clear_and_chain_solver_takes_the_world():
    m = load_robot("panda")
    q = m.random_q(np.random.default_rng(3), 20)
    cm = collision_model(m)
    world = World().add(Obstacle.make("floor", "halfspace", pose=[0, 0, 0.02, 0, 0, 0, 1]))
    ok = clearance(m, cm, q, world)[0] > 0.03
    T = fk_frames(m, q[ok], [TIP])[:, 0]
    cfg = IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True)
    r = solve_pose(m, T, tips=TIP, config=cfg, solver="ccd+dls", world=world)
    assert r.success.mean() > 0.8
    assert np.all(clearance(m, cm, r.q[r.success], world)[0] >= 0.01 - 1e-12)
    cs = ChainSolver(m, TIP, cfg)
    for i in range(len(T)):
        one = cs.solve(T[i], world=world)
        if one.success[0]:
            assert clearance(m, cm, one.q, world)[0][0] >= 0.01 - 1e-12


def test_collisions_off_give_the_same_answers_as_before():
    """avoid_collisions=False: the solver has no collision terms (the same rows as a solve that
    never heard of them); the result carries no clearance."""
    m = load_robot("ur")
    q = m.random_q(np.random.default_rng(5), 30)
    T = fk_frames(m, q, ["tool0"])[:, 0]
    a = solve_pose(m, T, tips="tool0", config=IKConfig(num_seeds=4))
    b = solve_pose(m, T, tips="tool0", config=IKConfig(num_seeds=4, collision_margin=0.5))
    np.testing.assert_array_equal(a.q, b.q)
    assert a.clearance is None and a.world_version is None


@pytest.mark.parametrize("dtype,cells", [("float64", False), ("float32", False),
                                         ("float64", True)])
@need_cxx
def test_cuda_text_with_collisions_through_the_standin(monkeypatch, dtype, cells):
    """The CUDA rendering of the collision terms (run on the CPU through the host shim):
    every success clear by the exact check, close to the host's success rate; in float64 the
    host's answers bit for bit (a sensed world's tree too)."""
    from ros2_ik.backends.cuda import GpuSolver

    cp = cupy_standin.install(monkeypatch)
    m = load_robot("panda")
    cm = collision_model(m)
    world = _cells_world(touch=["panda_link7"]) if cells else _all_shapes_world()
    q = m.random_q(np.random.default_rng(9), 60)
    ok = clearance(m, cm, q, world)[0] > 0.03
    T = fk_frames(m, q[ok], [TIP])[:, 0]
    cfg = IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True)
    g = GpuSolver(m, [TIP], cfg, dtype=dtype, xp=cp)
    r = g.solve(cp.asarray(T), world=world)
    h = IKSolver(m, [TIP], cfg).solve(T, world=world)
    assert r.success.mean() >= h.success.mean() - 0.1 and r.success.mean() > 0.7
    d = clearance(m, cm, r.q[r.success], world)[0]
    assert np.all(d >= cfg.collision_margin - 1e-9)
    band = d < cfg.collision_margin + cfg.collision_activation  # exact there, a bound beyond
    np.testing.assert_allclose(r.clearance[r.success][band], d[band], atol=1e-6)
    assert np.all(r.clearance[r.success] <= d + 1e-6)
    if dtype == "float64":
        np.testing.assert_array_equal(r.q, h.q)


def test_a_solver_says_when_a_checked_pair_is_never_clear_whichever_constructor_made_it():
    """A collision model built directly (collision_model) whose pair is within the margin at
    every configuration: IKSolver warns when it is built, naming the pair (default_collision_
    model checks such a pair for contact only, with its own warning, and the solver says
    nothing more)."""
    import warnings

    from ros2_ik.ik.collision import always_within, default_collision_model, link_pair_distances

    m = load_robot("ur")
    cm = collision_model(m)
    margin = 0.03
    # the pair really is never 3 cm clear (fresh samples), and is clear of 1 cm often
    d = link_pair_distances(m, cm, m.random_q(np.random.default_rng(5), 300), margin)
    names = [(cm.link_names[a], cm.link_names[b]) for a, b in cm.pairs.tolist()]
    k = names.index(("base_link", "upper_arm_link"))
    assert np.mean(d[:, k] < margin) >= 0.95
    assert [(a, b) for a, b, _ in always_within(m, cm, margin)] == [("base_link",
                                                                      "upper_arm_link")]
    cfg = IKConfig(avoid_collisions=True, collision_margin=margin)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = IKSolver(m, config=cfg, collision=cm, backend="reference")
    said = [str(x.message) for x in w if issubclass(x.category, CollisionWarning)]
    assert len(said) == 1 and "'base_link'-'upper_arm_link'" in said[0], said
    assert s.collision_warnings == said
    # at 1 cm nothing is said
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = IKSolver(m, config=IKConfig(avoid_collisions=True, collision_margin=0.01),
                     collision=cm, backend="reference")
    assert not [x for x in w if issubclass(x.category, CollisionWarning)]
    assert s.collision_warnings == []
    # the default model leaves it out, said once by the model
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dm = default_collision_model(m, within=margin)
        s = IKSolver(m, config=cfg, collision=dm, backend="reference")
    assert s.collision_warnings == []
    assert any("'base_link'-'upper_arm_link'" in t for t in dm.warnings)


def test_a_pair_never_clear_by_the_margin_is_checked_for_contact_not_left_out():
    """The bundled UR's base and upper arm are within 3 cm at every configuration: the default
    model at a 3 cm margin gives the pair an allowance of the margin (once it was left out,
    unchecked: a real robot's pair so pruned interpenetrated on its meshes). Its spheres may
    then come within the margin but never overlap: every success keeps the pair's spheres apart
    and every other pair 3 cm apart, on the host as on the reference (the same seed and q),
    where the model without the allowance solves nothing."""
    import warnings

    from ros2_ik.ik.collision import default_collision_model, link_pair_distances

    m = load_robot("ur")
    margin = 0.03
    raw = collision_model(m)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dm = default_collision_model(m, within=margin)
    said = [str(x.message) for x in w if issubclass(x.category, CollisionWarning)]
    assert any("checked for contact only" in t and "'base_link'-'upper_arm_link'" in t
               for t in said), said
    assert dm.allowances == (("base_link", "upper_arm_link", margin),)
    assert not [d for d in dm.disabled if d[2] == "Always"]
    np.testing.assert_array_equal(dm.pairs, raw.pairs)
    names = [(raw.link_names[a], raw.link_names[b]) for a, b in raw.pairs.tolist()]
    k = names.index(("base_link", "upper_arm_link"))
    T = fk_frames(m, m.random_q(np.random.default_rng(4), 40), [m.tips[0]])[:, 0]
    cfg = IKConfig(num_seeds=16, max_iterations=60, nonmonotone_iterations=0,
                   stall_iterations=5, avoid_collisions=True, collision_margin=margin)
    a, b = (IKSolver(m, config=cfg, collision=dm, backend=be).solve(T)
            for be in ("reference", "auto"))
    with pytest.warns(CollisionWarning, match="never clear"):
        blind = IKSolver(m, config=cfg, collision=raw, backend="reference").solve(T)
    assert blind.success.sum() == 0  # (never 3 cm clear)
    assert a.success.mean() >= 0.6 and b.backend == "host"
    assert np.mean(a.status == b.status) >= 0.9
    both = a.success & b.success
    np.testing.assert_array_equal(a.seed_index[both], b.seed_index[both])
    np.testing.assert_allclose(a.q[both], b.q[both], atol=1e-6)
    for r in (a, b):
        d = link_pair_distances(m, raw, r.q[r.success], 1.0)  # every pair exact, raw
        assert np.all(d[:, k] >= 0.0)
        assert np.all(np.delete(d, k, axis=1) >= margin - 1e-9)
        assert np.any(d[:, k] < margin)  # (the allowance used)


@need_cxx
def test_an_allowance_adds_to_its_pairs_distances_in_every_check():
    """A pair's allowance is added to each of its distances by every check (the reference's
    exact clearance, the compiled exact check of check_states, the reference check_states,
    the spheres' own clearances), and by no other pair's: the smallest of each pair's raw
    distance plus its allowance."""
    from ros2_ik.api.states import check_states
    from ros2_ik.ik.collision import link_pair_distances, sphere_clearances

    m = load_robot("panda")
    raw = collision_model(m)
    names = [(raw.link_names[a], raw.link_names[b]) for a, b in raw.pairs.tolist()]
    al = np.zeros(len(names))
    al[::3] = 0.02
    cm = raw.with_allowances([(a, b, v) for (a, b), v in zip(names, al) if v])
    np.testing.assert_array_equal(cm.pair_allowances(), al)
    q = m.random_q(np.random.default_rng(2), 60)
    want = (link_pair_distances(m, raw, q, 10.0) + al).min(axis=1)
    np.testing.assert_allclose(clearance(m, cm, q)[0], want, atol=1e-12)
    for be in ("host", "reference"):
        r = check_states(m, q, collision=cm, margin=0.01, backend=be)
        np.testing.assert_allclose(r.self_clearance, want, atol=1e-9)
        np.testing.assert_array_equal(r.valid, want >= 0.01)
    per = sphere_clearances(m, cm, q[0])
    assert abs(per.min() - want[0]) < 1e-12
    with pytest.raises(InvalidInputError, match="allowance"):
        raw.with_allowances([(names[0][0], names[0][1], -0.1)])
    with pytest.raises(UnknownLinkError):
        raw.with_allowances([("nope", names[0][1], 0.01)])


def _fork_and_rod(tmp_path, half_width: float) -> Model:
    """A fork (a U of boxes: prongs whose inner faces are 4 cm either side of the middle) and a
    rod of ``half_width`` moving along the gap between the prongs (a prismatic joint), both on
    the base, as STL meshes: the fork's hull fills the gap, so its spheres always overlap the
    rod's while the meshes stay ``0.04 - half_width`` apart."""
    import trimesh

    d = tmp_path / "forkpkg"
    d.mkdir(exist_ok=True)
    parts = [trimesh.creation.box((0.2, 0.02, 0.05), trimesh.transformations.translation_matrix(
        (0.0, y, 0.0))) for y in (-0.05, 0.05)]
    parts.append(trimesh.creation.box((0.02, 0.12, 0.05),
                                      trimesh.transformations.translation_matrix((-0.11, 0, 0))))
    trimesh.util.concatenate(parts).export(d / "fork.stl")
    trimesh.creation.box((2 * half_width, 2 * half_width, 0.3)).export(d / "rod.stl")
    urdf = """<robot name="fork_rod">
  <link name="base"/>
  <link name="fork"><collision><geometry><mesh filename="package://forkpkg/fork.stl"/>
    </geometry></collision></link>
  <link name="rod"><collision><geometry><mesh filename="package://forkpkg/rod.stl"/>
    </geometry></collision></link>
  <joint name="hold" type="fixed"><parent link="base"/><child link="fork"/></joint>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="rod"/>
    <axis xyz="1 0 0"/><limit lower="-0.05" upper="0.05" effort="1" velocity="1"/></joint>
</robot>"""
    return Model.from_urdf(urdf, base="base", tips=["rod"])


def test_meshes_of_many_triangles_are_not_found_near_for_their_lattice_s_sake(tmp_path):
    """A fork whose mesh has more triangles than :func:`meshes_within` samples (a finely
    tessellated knob on its back, 81,920 triangles) and a wide plate far below: its lattice
    is coarser than the rod's distance, yet the rod, 3 cm from the prongs, is never found
    within 1 cm of it (its points were once given the lattice's step as room: near in every
    configuration, so the pair could be left out as "always in contact"), and the step search
    ends (it once looped for ever on such a mesh)."""
    import trimesh

    from ros2_ik.ik.collision import MESH_POINTS, meshes_within
    from ros2_ik.model.collision import link_shapes
    from ros2_ik.model.concavity import lattice_step

    m = _fork_and_rod(tmp_path, 0.01)
    fork = tmp_path / "forkpkg/fork.stl"
    knob = trimesh.creation.icosphere(subdivisions=6, radius=0.01)
    knob.apply_translation((-0.11, 0.0, 0.1))
    # and a wide plate far below (its area makes the lattice coarser than the rod's distance)
    plate = trimesh.creation.box((5.0, 5.0, 0.01),
                                 trimesh.transformations.translation_matrix((0, 0, -2.0)))
    trimesh.util.concatenate([trimesh.load(fork), knob, plate]).export(fork)
    search = [str(tmp_path)]
    shapes = link_shapes(m, "fork", search)
    assert sum(len(s.faces) for s in shapes) > MESH_POINTS
    assert lattice_step(shapes, 0.002, MESH_POINTS) > 0.03  # (all corners)
    assert lattice_step(shapes, 0.002, MESH_POINTS, corners=False) > 0.03
    cm = collision_model(m, spheres={"fork": [[0.0, 0.0, 0.0, 0.2]],
                                     "rod": [[0.0, 0.0, 0.0, 0.15]]})
    assert meshes_within(m, cm, [("fork", "rod")], 0.01, search) == [0.0]
    # (3 cm apart: within 3.5 cm always; the coarse points see it less often, never more)
    (f,) = meshes_within(m, cm, [("fork", "rod")], 0.035, search)
    assert 0.5 < f <= 1.0, f


def test_a_mesh_wholly_inside_another_is_found_within_it(tmp_path):
    """A rod inside a closed housing, its surface 3 cm from the housing's walls everywhere:
    the surfaces never come within 1 cm, yet the meshes interpenetrate (one solid holds the
    other), so the pair is near in every configuration and left out as in contact by
    construction (FCL, which measures meshes as surfaces, would call them apart; their spheres
    overlap in every configuration, so checking the pair would fail every answer); the same
    rod beside the housing, 3 cm from its wall, is never near. A housing open on one side (no
    solid) holds nothing."""
    import warnings

    import trimesh

    from ros2_ik.ik.collision import default_collision_model, meshes_within

    d = tmp_path / "housepkg"
    d.mkdir()
    trimesh.creation.box((0.3, 0.1, 0.4)).export(d / "house.stl")
    open_box = trimesh.creation.box((0.3, 0.1, 0.4))
    open_box.update_faces(open_box.face_normals[:, 2] < 0.5)  # (its lid taken off)
    open_box.export(d / "open.stl")
    trimesh.creation.box((0.02, 0.02, 0.3)).export(d / "rod.stl")
    search = [str(d.parent)]

    def robot(house: str, y: float) -> Model:
        return Model.from_urdf(f"""<robot name="house_rod">
  <link name="base"/>
  <link name="house"><collision><geometry><mesh filename="package://housepkg/{house}"/>
    </geometry></collision></link>
  <link name="rod"><collision><origin xyz="0 {y} 0"/><geometry>
    <mesh filename="package://housepkg/rod.stl"/></geometry></collision></link>
  <joint name="hold" type="fixed"><parent link="base"/><child link="house"/></joint>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="rod"/>
    <axis xyz="1 0 0"/><limit lower="-0.1" upper="0.1" effort="1" velocity="1"/></joint>
</robot>""", base="base", tips=["rod"])

    balls = {"house": [[0.0, 0.0, 0.0, 0.3]], "rod": [[0.0, 0.0, 0.0, 0.16]]}
    inside, beside, open_ = robot("house.stl", 0.0), robot("house.stl", 0.09), \
        robot("open.stl", 0.0)
    for m, f in ((inside, 1.0), (beside, 0.0), (open_, 0.0)):
        cm = collision_model(m, spheres=balls)
        assert meshes_within(m, cm, [("house", "rod")], 0.01, search) == [f]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dm = default_collision_model(inside, within=0.01, search_path=search, spheres=balls)
    said = " ".join(str(x.message) for x in w if issubclass(x.category, CollisionWarning))
    assert "left out" in said and "'house'-'rod'" in said, said
    assert len(dm.pairs) == 0 and ("house", "rod", "Always") in dm.disabled


def test_a_pair_is_left_out_only_where_its_meshes_agree(tmp_path):
    """Spheres that overlap in every configuration leave a pair out only where the meshes are
    within the margin too (parts in contact by construction). A rod in a fork's gap, its mesh
    3 cm from the prongs: the fork's spheres (fitted to its hull) fill the gap, yet the pair is
    kept, checked for contact, and the warning says every answer will fail and to fit tighter
    spheres; fitted to the mesh (fit_to_mesh) it is an ordinary pair. A rod 5 mm from the
    prongs is in contact by construction: left out, said so."""
    import warnings

    from ros2_ik.ik.collision import default_collision_model, meshes_within

    search = [str(tmp_path)]
    m = _fork_and_rod(tmp_path, 0.01)
    hull = collision_model(m, search_path=search)
    assert [tuple(hull.link_names[i] for i in p) for p in hull.pairs.tolist()] == [("fork",
                                                                                   "rod")]
    assert meshes_within(m, hull, [("fork", "rod")], 0.01, search) == [0.0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dm = default_collision_model(m, within=0.01, search_path=search)
    said = " ".join(str(x.message) for x in w if issubclass(x.category, CollisionWarning))
    assert "though their meshes do not come within the margin ('fork'-'rod')" in said, said
    assert "fit_to_mesh" in said and "left out" not in said
    assert dm.allowances == (("fork", "rod", 0.01),) and len(dm.pairs) == 1
    assert clearance(m, dm, m.random_q(np.random.default_rng(0), 20))[0].max() < 0.01
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tight = default_collision_model(m, within=0.01, search_path=search, fit_to_mesh=True)
    assert not [x for x in w if issubclass(x.category, CollisionWarning)]
    assert tight.allowances == () and len(tight.pairs) == 1
    assert clearance(m, tight, m.random_q(np.random.default_rng(0), 20))[0].min() > 0.01
    # the SRDF tool likewise: "Always" only where the meshes agree
    assert sample_disabled_pairs(m, hull, samples=200, within=0.01, search_path=search) == []
    # a rod 5 mm from the prongs (its mesh replaces the thin one): the meshes within the
    # margin too, left out
    m2 = _fork_and_rod(tmp_path, 0.035)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dm2 = default_collision_model(m2, within=0.01, search_path=search)
    said = " ".join(str(x.message) for x in w if issubclass(x.category, CollisionWarning))
    assert "left out" in said and "'fork'-'rod'" in said, said
    assert len(dm2.pairs) == 0 and ("fork", "rod", "Always") in dm2.disabled
    hull2 = collision_model(m2, search_path=search)
    assert sample_disabled_pairs(m2, hull2, samples=200, within=0.01, search_path=search) == [
        ("fork", "rod", "Always")]
