"""World files for ``--world`` (``ros2_ik.world.files``): an octomap written by OctoMap itself,
a point cloud in every format (PCD ascii and binary, PLY, NPZ, XYZ) and a mesh (STL) give the
boxes of their cells, the same cells whatever the format; a YAML world as before; bad files an
error naming the file and what is wrong; and a base placement's command taking a cloud."""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik.errors import InvalidInputError
from ros2_ik.world import Obstacle, World, voxels
from ros2_ik.world.files import load_world, read_points

trimesh = pytest.importorskip("trimesh")


def _cells(world: World) -> set:
    """The 1 cm cells (centres, rounded) the world's boxes cover."""
    out = set()
    for ob in world:
        lo = ob.pose[:3, 3] - 0.5 * np.asarray(ob.size)
        n = np.rint(np.asarray(ob.size) / 0.01).astype(int)
        for idx in np.ndindex(*n):
            out.add(tuple(np.rint((lo + (np.array(idx) + 0.5) * 0.01) * 1000).astype(int)))
    return out


@pytest.fixture()
def points():
    rng = np.random.default_rng(3)
    return rng.uniform([0.3, -0.2, 0.1], [0.5, 0.2, 0.3], (400, 3))


def _pcd(path, P, binary):
    head = ("# .PCD v0.7\nVERSION 0.7\nFIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\n"
            f"COUNT 1 1 1 1\nWIDTH {len(P)}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n"
            f"POINTS {len(P)}\nDATA {'binary' if binary else 'ascii'}\n")
    rows = np.concatenate([P, np.ones((len(P), 1))], axis=1).astype(np.float32)
    if binary:
        path.write_bytes(head.encode() + rows.tobytes())
    else:
        path.write_text(head + "\n".join(" ".join(f"{v:.9g}" for v in r) for r in rows) + "\n")


def test_a_cloud_gives_the_same_cells_in_every_format(tmp_path, points):
    ref = World(voxels.obstacles(*voxels.boxes(voxels.cloud_cells(
        points.astype(np.float32).astype(np.float64), 0.02))))
    np.savez(tmp_path / "c.npz", points=points.astype(np.float32))
    np.savetxt(tmp_path / "c.xyz", points.astype(np.float32))
    _pcd(tmp_path / "a.pcd", points, False)
    _pcd(tmp_path / "b.pcd", points, True)
    trimesh.PointCloud(points.astype(np.float32)).export(tmp_path / "c.ply")
    for name in ("c.npz", "c.xyz", "a.pcd", "b.pcd", "c.ply"):
        w = load_world(tmp_path / name)
        assert _cells(w) == _cells(ref), name
    assert len(read_points(tmp_path / "b.pcd")) == len(points)


def test_an_octomap_and_a_mesh_file(tmp_path):
    octomap = pytest.importorskip("octomap", reason="octomap-python is not installed")
    t = octomap.OcTree(0.02)
    for p in np.random.default_rng(1).uniform(0, 0.2, (300, 3)):
        t.updateNode(p, True)
    t.updateInnerOccupancy()
    t.writeBinary(str(tmp_path / "m.bt").encode())
    t.write(str(tmp_path / "m.ot").encode())
    leaves = [(it.getCoordinate(), it.getSize()) for it in t.begin_leafs()
              if t.isNodeOccupied(it)]
    judge = World([Obstacle.make(f"c{k}", "box", (s, s, s), list(c) + [0, 0, 0, 1])
                   for k, (c, s) in enumerate(leaves)])
    for name in ("m.bt", "m.ot"):
        assert _cells(load_world(tmp_path / name)) == _cells(judge), name
    box = trimesh.creation.box(extents=(0.1, 0.2, 0.05))
    box.export(tmp_path / "b.stl")
    w = load_world(tmp_path / "b.stl", mesh_resolution=0.01)
    lo = np.min([o.pose[:3, 3] - 0.5 * np.asarray(o.size) for o in w], axis=0)
    hi = np.max([o.pose[:3, 3] + 0.5 * np.asarray(o.size) for o in w], axis=0)
    assert np.all(lo <= [-0.05, -0.1, -0.025]) and np.all(hi >= [0.05, 0.1, 0.025])
    assert np.all(hi - lo <= np.array([0.1, 0.2, 0.05]) + 0.02 + 1e-9)
    # a YAML world as it always was
    (tmp_path / "w.yaml").write_text(World([Obstacle.make("t", "halfspace")]).to_yaml())
    assert load_world(tmp_path / "w.yaml").ids == ["t"]


@pytest.mark.parametrize("name,data,words", [
    ("x.pcd", b"VERSION 0.7\nFIELDS x y\nSIZE 4 4\nTYPE F F\nPOINTS 1\nDATA ascii\n1 2\n",
     "FIELDS with x y z"),
    ("x.pcd", b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nPOINTS 10\nDATA binary\n" + bytes(12),
     "truncated"),
    ("x.pcd", b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nPOINTS 1\nDATA binary_compressed\n",
     "binary_compressed"),
    ("x.pcd", b"no header at all", "no PCD header"),
    ("x.npz", None, "no array 'points'"),
    ("x.bt", b"# Octomap OcTree binary file\nid OcTree\nres 0.02\ndata\n\x03", "truncated"),
    ("x.stl", b"solid nothing\nendsolid nothing\n", "no triangles"),
])
def test_a_bad_file_is_an_error_naming_it(tmp_path, name, data, words):
    path = tmp_path / name
    if data is None:
        np.savez(path, other=np.zeros(3))
    else:
        path.write_bytes(data)
    with pytest.raises(InvalidInputError, match=words):
        load_world(path)
    with pytest.raises(InvalidInputError, match="No such file"):
        load_world(tmp_path / "missing.pcd", label="--world")


def test_the_placement_command_takes_a_cloud_world(tmp_path):
    import subprocess
    import sys

    import yaml

    P = np.random.default_rng(2).uniform([0.5, 0.5, 0.0], [0.7, 0.7, 0.4], (2000, 3))
    np.savez(tmp_path / "cloud.npz", points=P)
    (tmp_path / "poses.yaml").write_text(yaml.safe_dump({"poses": [
        {"position": [0.4, 0.0, 0.4], "orientation": [1.0, 0.0, 0.0, 0.0]}]}))
    args = ["--robot", "panda", "--world", str(tmp_path / "cloud.npz"), "--poses",
            str(tmp_path / "poses.yaml"), "--x", "-0.3", "0.0", "--y", "-0.2", "0.2",
            "--resolution", "0.2", "--yaw-step", "180", "--top", "1", "--refine", "1",
            "--out", str(tmp_path / "out"), "-q"]
    p = subprocess.run([sys.executable, "-m", "ros2_ik.reach.placement_cli", *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-m", "ros2_ik.reach.placement_cli",
                          *[a if a != str(tmp_path / "cloud.npz") else str(tmp_path / "no.pcd")
                            for a in args]], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--world" in bad.stderr and "No such file" in bad.stderr
