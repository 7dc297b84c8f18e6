"""Every real URDF loads (issue 11): the robots of the PyPI package ``example-robot-data``.

An optional tier (the package is 130 MB): ``make setup`` installs it
(scripts/requirements-python.txt); where it is not installed there is nothing to run.
"""

from __future__ import annotations

import warnings
from importlib import metadata

import numpy as np
import pytest

from ros2_ik import Model
from ros2_ik.kinematics import fk


def _urdf_files():
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return []
    return sorted(str(dist.locate_file(f)) for f in (dist.files or ())
                  if str(f).endswith(".urdf"))


FILES = _urdf_files()


def _load(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if "<link" not in text:
        pytest.skip("no robot in this file (the package ships an empty ur3.urdf)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a mimic on a fixed joint: loaded, warned
        return Model.from_urdf(text)


@pytest.mark.skipif(not FILES, reason="example-robot-data is not installed (optional, 130 MB: "
                                      "pip install --no-deps example-robot-data)")
@pytest.mark.parametrize("path", FILES or ["none"],
                         ids=[p.split("/robots/")[-1] for p in FILES] or ["none"])
def test_example_robot_data_urdf_loads(path):
    m = _load(path)
    q = m.random_q(0, 4)
    T = fk(m, q)
    assert np.all(np.isfinite(T))


@pytest.mark.skipif(not FILES, reason="example-robot-data is not installed (optional, 130 MB: "
                                      "pip install --no-deps example-robot-data)")
@pytest.mark.parametrize("path", FILES or ["none"],
                         ids=[p.split("/robots/")[-1] for p in FILES] or ["none"])
def test_generated_gpu_kernels_on_real_robots(path):
    """The generator on robots it was not written against: for each robot's longest 1-DOF
    chain, the CUDA text run on the host (float64) gives the host backend's answers bit for
    bit, the host backend agrees with the reference, and the generated FK kernel equals
    fk_frames."""
    import test_gpu as tg
    from ros2_ik.api import IKSolver
    from ros2_ik.backends import codegen
    from ros2_ik.backends import host as hostrun
    from ros2_ik.ik import IKConfig
    from ros2_ik.kinematics import fk_frames

    if hostrun.available() is None:
        pytest.skip("no g++ to run generated kernels on the host")
    m = _load(path)
    tips = [t for t in m.tips if codegen.chain_of(m, [t]) is not None]
    if not tips:
        pytest.skip("no tip reached through movable 1-DOF joints only")
    tip = max(tips, key=lambda t: len(codegen.chain_of(m, [t]).qi))
    T, W = tg._problems(m, [tip], 40, seed=2)
    cfg = IKConfig(num_seeds=2, stall_iterations=5)
    a = IKSolver(m, [tip], cfg).solve(T)
    b = tg.cuda_text_on_the_host(m, [tip], T, W, 2, cfg, "float64")
    np.testing.assert_array_equal(a.q, b[:, :m.nq])
    r = IKSolver(m, [tip], cfg, backend="reference").solve(T)
    assert abs(a.success.mean() - r.success.mean()) <= 0.1
    mod = hostrun.compile_host(codegen.frames_source(codegen.chain_of(m, [tip]), "float64",
                                                     host=True))
    q = m.random_q(np.random.default_rng(3), 20)
    F = np.zeros((20, 1, 4, 4))
    mod.get_function("r2ik_fk")(20, np.ascontiguousarray(q), 20, F)
    assert np.abs(F - fk_frames(m, q, [tip])).max() <= 1e-12


@pytest.mark.skipif(not FILES, reason="example-robot-data is not installed (optional, 130 MB: "
                                      "pip install --no-deps example-robot-data)")
@pytest.mark.parametrize("path", FILES or ["none"],
                         ids=[p.split("/robots/")[-1] for p in FILES] or ["none"])
def test_reach_bound_holds_on_real_robots(path):
    """The reach studies' bound (points on the joint axes) on robots it was not written
    against: no random configuration puts any leaf's tip, or its wrist point, beyond it.
    (Run here on 2026-11-23: 69 files, 721 chains, 499 with a bound, 0 beyond it with 3,000
    configurations each; the farthest sampled tip at a median 0.998 of its bound.)"""
    from test_reach import farthest_from_reach_bounds

    m = _load(path)
    q = m.random_q(np.random.default_rng(0), 2000)
    for tip, d, radius, dw, wrist_radius in farthest_from_reach_bounds(m, q):
        assert d <= radius + 1e-9 and dw <= wrist_radius + 1e-9, tip


@pytest.mark.skipif(not FILES, reason="example-robot-data is not installed (optional, 130 MB: "
                                      "pip install --no-deps example-robot-data)")
@pytest.mark.parametrize("name", ["panda_description/urdf/panda.urdf",
                                  "ur_description/urdf/ur5_robot.urdf"])
def test_the_viewer_finds_every_visual_mesh(name):
    """The viewer's mesh look-up (package:// through a search path, as --mesh-path gives it)
    finds every <visual> mesh of real description packages."""
    pytest.importorskip("yourdfpy")
    import re

    from ros2_ik.viewer.app import load_visuals

    path = next((p for p in FILES if p.endswith(name)), None)
    if path is None:
        pytest.skip(f"{name} not in this example-robot-data")
    share = path.split("/example-robot-data/")[0]
    text = open(path, encoding="utf-8").read()
    want = {m.group(1) for m in re.finditer(r'<link\s+name="([^"]+)"\s*>(.*?)</link>', text,
                                            re.S)
            if re.search(r"<visual\b.*?<mesh\b", m.group(2), re.S)}
    vis = load_visuals(text, [share])
    assert want and want <= set(vis), sorted(want - set(vis))  # every such link has its mesh
