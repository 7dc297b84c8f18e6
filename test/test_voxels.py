"""Meshes as the cells they pass through (``ros2_ik.world.voxels.mesh_cells``): every point of
every triangle inside a cell (sampled densely, and at the vertices), no cell farther than its
diagonal from the mesh (trimesh's exact distances), concave meshes left open; and an open shelf
given as one mesh: goals inside its compartments with a known answer 2.4 cm clear of the mesh
are solved, every SUCCESS clear of the mesh itself by the margin (trimesh's distances to the
triangles and containment in the mesh's parts, not the cells under test)."""

from __future__ import annotations

import numpy as np
import pytest

trimesh = pytest.importorskip("trimesh")

from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot  # noqa: E402
from ros2_ik.errors import InvalidInputError  # noqa: E402
from ros2_ik.ik.collision import clearance, default_collision_model  # noqa: E402
from ros2_ik.ik.collision_geometry import sphere_centers  # noqa: E402
from ros2_ik.world import Obstacle, World, voxels  # noqa: E402

RES = 0.005


def _shelf(x0=0.45):
    """An open shelf (0.35 deep, 0.8 wide, 0.86 high; 2 cm boards; three compartments open
    towards -x) as its parts, and as one mesh."""
    T = trimesh.transformations.translation_matrix
    parts = [trimesh.creation.box(extents=(0.35, 0.8, 0.02), transform=T([x0 + 0.175, 0, z]))
             for z in (0.01, 0.30, 0.59, 0.85)]
    parts += [trimesh.creation.box(extents=(0.35, 0.02, 0.86), transform=T([x0 + 0.175, y, 0.43]))
              for y in (-0.39, 0.39)]
    parts.append(trimesh.creation.box(extents=(0.02, 0.8, 0.86), transform=T([x0 + 0.34, 0, 0.43])))
    return parts, trimesh.util.concatenate(parts)


def _meshes():
    rot = trimesh.transformations.rotation_matrix(0.7, [1, 2, 3])
    yield "shelf", _shelf()[1]
    yield "sphere", trimesh.creation.icosphere(subdivisions=3, radius=0.1)
    yield "slanted cylinder", trimesh.creation.cylinder(radius=0.05, height=0.3, transform=rot)
    move = trimesh.transformations.translation_matrix([0.09, 0.09, 0])
    yield "bracket", trimesh.util.concatenate([  # an L: concave
        trimesh.creation.box(extents=(0.2, 0.02, 0.1)),
        trimesh.creation.box(extents=(0.02, 0.2, 0.1), transform=move)])


@pytest.mark.parametrize("name,mesh", list(_meshes()), ids=[n for n, _ in _meshes()])
def test_a_meshs_cells_hold_it_and_reach_at_most_a_diagonal_past_it(name, mesh):
    L = voxels.mesh_cells(mesh.vertices, mesh.faces, RES)
    cells = set(map(tuple, L.key.tolist()))
    P = np.concatenate([mesh.sample(30_000, seed=2), mesh.vertices])
    keys = np.floor(P / RES).astype(np.int64) + voxels.HALF
    assert all(tuple(k) in cells for k in keys.tolist())
    _, d, _ = trimesh.proximity.closest_point(mesh, L.centers())
    assert d.max() <= 0.5 * RES * 3 ** 0.5 + 1e-9
    centre, size = voxels.boxes(L)
    assert len(centre) < len(L) and np.isclose(np.prod(size, axis=1).sum(), len(L) * RES ** 3)
    if name == "bracket":  # the inside of the L stays empty
        assert not any(np.all(np.abs(np.array([0.04, 0.04, 0.0]) - c) <= 0.5 * s)
                       for c, s in zip(centre, size))


def test_degenerate_and_oversized_meshes():
    V = np.array([[0, 0, 0], [0.1, 0, 0], [0.2, 0, 0], [0, 0.1, 0]], dtype=float)
    L = voxels.mesh_cells(V, [[0, 1, 2]], RES)  # a triangle of zero area: its segment's cells
    assert len(L) >= 40 and np.all(L.key[:, 1:] - voxels.HALF >= -1)
    assert len(voxels.mesh_cells(V, np.zeros((0, 3), int), RES)) == 0
    big = trimesh.creation.box(extents=(50.0, 50.0, 50.0))
    with pytest.raises(InvalidInputError, match="coarser resolution"):
        voxels.boxes(voxels.mesh_cells(big.vertices, big.faces, 0.001))
    # a large slanted triangle (a sloped floor) at a fine resolution: refused, not split into
    # millions of triangles
    slope = np.array([[-5.0, -5.0, 0.0], [5.0, -5.0, 3.0], [0.0, 5.0, 1.0]])
    with pytest.raises(InvalidInputError, match="coarser resolution"):
        voxels.mesh_cells(slope, [[0, 1, 2]], 0.001)
    for bad in (np.array([[0.0, 0, 0], [np.nan, 0, 0], [0, 1, 0]]),
                np.array([[0.0, 0, 0], [1e6, 0, 0], [0, 1, 0]])):
        with pytest.raises(InvalidInputError, match="finite"):
            voxels.mesh_cells(bad, [[0, 1, 2]], RES)
    with pytest.raises(InvalidInputError, match="names vertex 7"):
        voxels.mesh_cells(V, [[0, 1, 7]], RES)
    with pytest.raises(InvalidInputError, match="positive and finite"):
        voxels.mesh_cells(V, [[0, 1, 2]], 0.0)


def test_goals_inside_an_open_shelf_given_as_one_mesh_are_solved_clear_of_it():
    parts, mesh = _shelf()
    centre, size = voxels.boxes(voxels.mesh_cells(mesh.vertices, mesh.faces, RES))
    world = World(voxels.obstacles(centre, size, prefix="shelf"))
    assert len(world) < 200
    m, tip = load_robot("panda"), "panda_hand_tcp"
    cm = default_collision_model(m)
    margin = 0.01

    def mesh_clear(Q):
        """Per configuration, the least distance of a sphere to the shelf's triangles, or -1
        where a sphere's centre lies in one of its parts."""
        P = np.asarray(sphere_centers(m, cm, np.asarray(fk_frames(m, Q, list(m.link_names)))))
        out = np.empty(len(Q))
        for i, p in enumerate(P):
            _, d, _ = trimesh.proximity.closest_point(mesh, p)
            inside = any(part.contains(p).any() for part in parts)
            out[i] = -1.0 if inside else (d - cm.radius).min()
        return out

    rng = np.random.default_rng(0)
    Q = m.random_q(rng, 60_000)
    T = np.asarray(fk_frames(m, Q, [tip]))[:, 0]
    p = T[:, :3, 3]
    deep = (p[:, 0] > 0.5) & (p[:, 0] < 0.75) & (np.abs(p[:, 1]) < 0.36) & (
        ((p[:, 2] > 0.05) & (p[:, 2] < 0.27)) | ((p[:, 2] > 0.33) & (p[:, 2] < 0.56)))
    idx = np.nonzero(deep)[0]
    idx = idx[clearance(m, cm, Q[idx])[0] > 0.015]
    idx = idx[mesh_clear(Q[idx]) > 0.024][:60]  # a known answer 2.4 cm clear of the mesh
    assert len(idx) >= 30
    cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True,
                   collision_margin=margin, timeout=None)
    r = IKSolver(m, [tip], cfg, collision=cm).solve(T[idx], world=world)
    ok = np.asarray(r.success)
    assert ok.mean() >= 0.95, ok.mean()
    assert mesh_clear(np.asarray(r.q)[ok]).min() >= margin - 1e-6
    # the shelf as a solid block (how its mesh was taken before): the compartments closed
    lo, hi = mesh.bounds
    block = World([Obstacle.make("block", "box", hi - lo, list(0.5 * (lo + hi)) + [0, 0, 0, 1])])
    r = IKSolver(m, [tip], cfg, collision=cm).solve(T[idx[:10]], world=block)
    assert not np.asarray(r.success).any()
