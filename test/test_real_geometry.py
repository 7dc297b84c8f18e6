"""Every piece of geometry a real URDF declares is modelled (issue 47): link by link, the
collision geometry ros2_ik reads from each URDF of example-robot-data is compared with
Pinocchio's geometry model of the same URDF (``buildGeomFromUrdf``, coal's meshes), never with
ros2_ik's own idea of it:

- the same number of collision elements on every link (none dropped: a mirrored mesh, a
  ``<mesh scale="-1 1 1">``, is read mirrored, as Pinocchio and coal read it);
- each mesh in the same place: its vertices' bounding box in the link frame is Pinocchio's
  (placement and scale applied), to 0.1 mm, so a mirror or a scale is not read another way.

And memory stays bounded: the largest meshes and sweeps of the package (Baxter's pedestal,
Tiago's five-finger hand swept over its joints, the Z1 on the B1) are fitted in a process of
their own under an address-space cap, their peak resident memory measured against the
documented budget (:data:`ros2_ik.model.spheres.MEMORY_BUDGET`).

Skipped (with the reason) only where example-robot-data or Pinocchio is not installed
(``make setup`` installs both).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is not installed; run make setup")
try:
    DIST = metadata.distribution("example-robot-data")
except metadata.PackageNotFoundError:
    pytest.skip("example-robot-data is not installed; run make setup", allow_module_level=True)
SHARE = Path(DIST.locate_file("")) / "cmeel.prefix/share"
FILES = sorted(str(DIST.locate_file(f)) for f in (DIST.files or ()) if str(f).endswith(".urdf"))

from ros2_ik.model import Model  # noqa: E402
from ros2_ik.model.meshes import element_shape  # noqa: E402
from ros2_ik.model.spheres import MEMORY_BUDGET  # noqa: E402


def _pinocchio(path: str):
    """{link: [(kind, AABB (2, 3) in the link frame or None)]} of Pinocchio's collision model."""
    model = pin.buildModelFromUrdf(path)
    geom = pin.buildGeomFromUrdf(model, path, pin.GeometryType.COLLISION,
                                 package_dirs=[str(SHARE)])
    out: dict = {}
    for g in geom.geometryObjects:
        link = model.frames[g.parentFrame].name
        box = None
        shape = g.geometry
        if hasattr(shape, "num_vertices") and shape.num_vertices > 0:
            V = np.array([shape.vertices(i) for i in range(shape.num_vertices)])
            # the geometry's placement is relative to its parent joint; the link's body frame
            # is placed relative to that joint too
            M = model.frames[g.parentFrame].placement.inverse() * g.placement
            W = V @ M.rotation.T + M.translation
            box = np.stack([W.min(axis=0), W.max(axis=0)])
        out.setdefault(link, []).append((type(shape).__name__, box))
    return out


def _ros2_ik(path: str):
    """{link: [(shape, AABB or None)]} of the elements ros2_ik reads (unreadable ones as
    such)."""
    text = Path(path).read_text(encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = Model.from_urdf(text)
    out: dict = {}
    for d in m.desc.collisions:
        box = None
        if d.shape == "mesh":
            s, why = element_shape(d, [str(SHARE)])
            assert s is not None, f"link {d.link!r}: {why}"
            box = np.stack([s.vertices.min(axis=0), s.vertices.max(axis=0)])
        out.setdefault(d.link, []).append((d.shape, box))
    return out


def _robot_files():
    keep = []
    for p in FILES:
        if "<link" in Path(p).read_text(encoding="utf-8", errors="replace"):
            keep.append(p)
    return keep


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("path", _robot_files(), ids=lambda p: p.split("/robots/")[-1])
def test_every_collision_element_pinocchio_models_is_modelled_in_the_same_place(path):
    try:
        theirs = _pinocchio(path)
    except Exception as exc:  # noqa: BLE001 - a URDF Pinocchio itself cannot read
        pytest.skip(f"Pinocchio cannot read this URDF: {type(exc).__name__}: {exc}")
    ours = _ros2_ik(path)
    # none dropped, none unreadable where Pinocchio reads it
    count_ours = Counter({k: len(v) for k, v in ours.items()})
    count_theirs = Counter({k: len(v) for k, v in theirs.items()})
    assert count_ours == count_theirs, (count_ours - count_theirs, count_theirs - count_ours)
    unreadable = [link for link, els in ours.items() for s, _ in els if s == "unreadable"]
    assert unreadable == []
    # meshes in the same place (mirrors and scales read the same way), in element order
    for link, els in ours.items():
        for (_, a), (kind, b) in zip(els, theirs[link]):
            if a is not None:
                # every mesh compared (but a mesh coal reads as a shape with no vertices)
                assert b is not None or not kind.startswith("BVH"), (link, kind)
                if b is not None:
                    np.testing.assert_allclose(a, b, atol=1e-4, err_msg=f"{link!r} ({kind})")


#: (URDF, base, tip, link): the package's largest mesh (Baxter's pedestal), a distal finger of
#: a five-finger hand swept over its joints (Tiago's), a jaw swept on an arm on a legged base
#: (the Z1 on the B1)
HEAVY = {
    "baxter_pedestal": ("baxter_description/urdf/baxter.urdf", "base", "left_hand_link",
                        "pedestal"),
    "tiago_finger": ("tiago_description/robots/tiago.urdf", "torso_lift_link", "arm_tool_link",
                     "hand_index_flex_3_link"),
    "z1_jaw": ("b1_description/urdf/b1-z1.urdf", "link00", "gripperStator", "gripperMover"),
}

_FIT = r"""
import json, sys, warnings
from pathlib import Path
from ros2_ik.model import Model
from ros2_ik.model.collision import full_tree, sphere_placements
from ros2_ik.model.meshes import element_shape
from ros2_ik.model.spheres import Shape, fit_link, report
share, urdf, base, tip, link = sys.argv[1:6]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    m = Model.from_urdf(Path(urdf).read_text(), base=base, tips=[tip])
_, Ts = sphere_placements(m, full_tree(m), link, {}, [])
shapes = [element_shape(d, [share])[0] for d in m.desc.collisions if d.link == link]
placed = [Shape(s.vertices @ T[:3, :3].T + T[:3, 3], s.faces) for T in Ts for s in shapes]
c, r = fit_link(placed, cache=False)
rep = report(placed, c, r)
# the peak resident memory of this process (VmHWM: getrusage's ru_maxrss carries a parent's
# across fork and exec, a large test runner's included)
peak = [int(ln.split()[1]) * 1024 for ln in open("/proc/self/status")
        if ln.startswith("VmHWM:")][0]
print(json.dumps({"placements": len(Ts), "vertices": sum(len(s.vertices) for s in placed),
                  "spheres": rep["spheres"], "overshoot": rep["overshoot"],
                  "uncovered": rep["uncovered"], "peak": peak}))
"""


@pytest.mark.parametrize("name", list(HEAVY))
def test_the_heaviest_meshes_and_sweeps_fit_within_the_memory_budget(name):
    """The link's whole fit (its placements, the fit, a fresh report) in a process of its own
    whose address space is capped: an unbounded fit fails here, not the machine; the peak
    resident memory within the budget; the fit covers and is tight."""
    urdf, base, tip, link = HEAVY[name]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cap = 3 * MEMORY_BUDGET + (1 << 30)  # (+1 GiB: the interpreter, NumPy, SciPy, trimesh)
    code = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))\n" + _FIT
    r = subprocess.run([sys.executable, "-c", code, str(SHARE),
                        str(SHARE / "example-robot-data/robots" / urdf), base, tip, link],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["peak"] <= MEMORY_BUDGET, f"{out['peak'] / 2 ** 20:.0f} MiB"
    assert out["spheres"] > 0 and out["uncovered"] <= 1e-9
    assert out["overshoot"] <= 0.005 + 1e-6


def test_a_real_concave_link_s_spheres_reach_at_most_5_mm_past_its_mesh():
    """The Z1's moving jaw (a concave, closed mesh), fitted to the mesh: its spheres cover it
    and reach at most 5 mm past the mesh itself (exact signed distances), where a fit bounded
    by its hull alone reaches centimetres into the jaw's gap."""
    from ros2_ik.model.concavity import mesh_overshoot
    from ros2_ik.model.spheres import Shape, coverage, fit_link, overshoot, surface_points

    text = (SHARE / "example-robot-data/robots/z1_description/urdf/z1.urdf").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = Model.from_urdf(text)
    (d,) = [d for d in m.desc.collisions if d.link == "gripperMover"]
    s, why = element_shape(d, [str(SHARE)])
    assert s is not None, why
    s = Shape(s.vertices, s.faces)
    c, r = fit_link([s], cache=False, to_mesh=True)
    assert coverage(c, r, surface_points([s], seed=5)) <= 0.0
    assert overshoot(c, r, s.vertices) <= 0.005 + 1e-9
    assert mesh_overshoot(c, r, [s]) <= 0.005 + 1e-6


def test_heavy_meshes_are_measured_against_each_other_at_their_corners():
    """The SO-101's wrist and moving jaw (71,310 and 141,350 triangles: more corners than the
    lattice may hold) are measured by :func:`meshes_within` at their triangles' corners (the
    lattice step once looped for ever looking for a coarser lattice), and the answer is a
    fraction; the lattice step of such a mesh is at most its longest edge."""
    from ros2_ik.ik.collision import meshes_within
    from ros2_ik.model.collision import collision_model, full_tree, link_shapes
    from ros2_ik.model.concavity import lattice_step

    root = SHARE / "example-robot-data/robots/so_arm_description"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = Model.from_urdf((root / "urdf/so101.urdf").read_text(), base="base_link",
                            tips=["gripper_frame_link"])
        # (spheres given: the meshes are what is measured here, not a fit)
        cm = collision_model(m, spheres={d.link: [[0.0, 0.0, 0.0, 0.01]]
                                         for d in m.desc.collisions})
    shapes = link_shapes(m, "moving_jaw_so101_v1_link", [str(SHARE)], full_tree(m))
    assert sum(len(s.faces) for s in shapes) > 50_000
    step = lattice_step(shapes, 0.002, 50_000)
    tri = np.concatenate([np.asarray(s.vertices)[np.asarray(s.faces)] for s in shapes])
    assert step <= 1.25 * float(np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2).max())
    (f,) = meshes_within(m, cm, [("wrist_link", "moving_jaw_so101_v1_link")], 0.01,
                         [str(SHARE)])
    assert f is not None and 0.0 <= f <= 1.0
