"""Reach studies (ros2_ik.reach): targets, per-target results against independent solves,
the voxel index, the study folder (resume, byte-identical files), the command line."""

from __future__ import annotations

import dataclasses

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cli_testing import interrupt_after_shards

from ros2_ik import load_robot, robots
from ros2_ik.errors import InvalidInputError, UnknownLinkError
from ros2_ik.kinematics import (fk_frames, numerical_jacobian, pose_error, pose_to_pq,
                                pq_to_pose, quat_to_matrix)
from ros2_ik.reach import (OUT_OF_REACH, Box, Sphere, Study, StudyConfig, fibonacci_directions,
                           from_poses, grid_targets, load_targets, reach_bound, run_study,
                           tool_orientations, voxel_table)
from ros2_ik.ik import IKConfig
from ros2_ik.api import solve_pose

REPO = Path(__file__).resolve().parents[1]
POS_TOL, ROT_TOL = 1e-4, 1e-3


def small_config(**kw) -> StudyConfig:
    """The node's restart settings, small shards."""
    return StudyConfig(**{"shard_size": 64, **kw})


# ---------------------------------------------------------------------- targets
def test_fibonacci_directions_are_unit_and_even():
    d = fibonacci_directions(200)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-12)
    # evenly spread: every direction's nearest neighbour is at a similar angle, and the
    # lattice's centroid is at the centre of the sphere
    cos = np.clip(d @ d.T, -1, 1)
    np.fill_diagonal(cos, -1)
    nearest = np.arccos(cos.max(axis=1))
    assert nearest.max() < 1.6 * nearest.min()
    assert np.linalg.norm(d.mean(axis=0)) < 1e-2
    # equal-area bands: as many directions above as below the equator
    assert (d[:, 2] > 0).sum() == 100


def test_tool_orientations_point_the_tool_axis_and_roll():
    dirs, rolls = 7, 4
    q = tool_orientations(dirs, rolls)
    assert q.shape == (dirs * rolls, 4)
    R = np.asarray(quat_to_matrix(q)).reshape(dirs, rolls, 3, 3)
    d = fibonacci_directions(dirs)
    np.testing.assert_allclose(R[:, :, :, 2], np.repeat(d[:, None], rolls, axis=1), atol=1e-12)
    # consecutive rolls: the x axis turns by 2 pi / rolls about the tool axis
    cosang = np.einsum("dri,dri->dr", R[:, :-1, :, 0], R[:, 1:, :, 0])
    np.testing.assert_allclose(cosang, np.cos(2 * np.pi / rolls), atol=1e-12)


def test_grid_box_and_sphere_points():
    t = grid_targets(Box((0, 0, 0), (0.2, 0.1, 0.3)), 0.1, 2, 1)
    assert t.num_voxels == 3 * 2 * 4 and len(t) == 2 * t.num_voxels
    np.testing.assert_allclose(t.centres.min(axis=0), [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(t.centres.max(axis=0), [0.2, 0.1, 0.3], atol=1e-12)
    # voxel-major: target v * O + o sits at voxel v's centre
    np.testing.assert_allclose(t.poses[:, :3], t.centres[t.voxel], atol=0)
    s = grid_targets(Sphere((0.1, 0, 0.5), 0.25), 0.1, 1, 1)
    # brute force over the enclosing grid
    g = np.arange(-3, 4) * 0.1
    pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    assert s.num_voxels == int((np.linalg.norm(pts, axis=1) <= 0.25).sum())
    assert np.all(np.linalg.norm(s.centres - [0.1, 0, 0.5], axis=1) <= 0.25 + 1e-9)


def test_target_files_csv_npz_yaml(tmp_path):
    rng = np.random.default_rng(3)
    pos = rng.uniform(-0.5, 0.5, (5, 3))
    quat = rng.normal(size=(5, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    poses = np.hstack([pos, quat])
    (tmp_path / "t.csv").write_text("x,y,z,qx,qy,qz,qw\n" + "\n".join(
        ",".join(repr(float(v)) for v in row) for row in poses) + "\n")
    np.savez(tmp_path / "t.npz", poses=poses)
    (tmp_path / "t.yaml").write_text("poses:\n" + "".join(
        f"  - {{position: {list(map(float, r[:3]))}, orientation: {list(map(float, r[3:]))}}}\n"
        for r in poses))
    loaded = [load_targets(tmp_path / f"t.{ext}", 0.1) for ext in ("csv", "npz", "yaml")]
    for t in loaded:
        np.testing.assert_allclose(t.poses, poses, atol=1e-15)
        np.testing.assert_array_equal(t.voxel, loaded[0].voxel)
        # every target is in the voxel whose centre is nearest on the 0.1 m grid
        np.testing.assert_allclose(t.centres[t.voxel], np.round(pos / 0.1) * 0.1, atol=1e-12)


@pytest.mark.parametrize("text, words", [
    ("1,2,3,0,0,0\n", ["6 values", "expected 7"]),
    ("1,2,3,0,0,0,2\n", ["norm", "unit quaternions"]),
    ("1,2,3,0,0,0,1\nfoo,2,3,0,0,0,1\n", [":2", "not a number"]),
    ("1,nan,3,0,0,0,1\n", ["NaN", "target 0"]),
])
def test_bad_target_files_say_what_and_where(tmp_path, text, words):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(InvalidInputError) as e:
        load_targets(f)
    for w in words:
        assert w in str(e.value), str(e.value)
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_targets(tmp_path / "missing.csv")
    (tmp_path / "x.txt").write_text("1")
    with pytest.raises(InvalidInputError, match=r"unknown type '\.txt'; use \.csv"):
        load_targets(tmp_path / "x.txt")


def test_bad_regions_are_refused():
    with pytest.raises(InvalidInputError, match="below the lower corner"):
        Box((0, 0, 0), (1, 1, -1))
    with pytest.raises(InvalidInputError, match="resolution"):
        grid_targets(Box((0, 0, 0), (1, 1, 1)), -0.1, 2)
    with pytest.raises(InvalidInputError, match="directions"):
        grid_targets(Box((0, 0, 0), (1, 1, 1)), 0.1, 0)
    with pytest.raises(InvalidInputError, match="too large"):
        grid_targets(Box((0, 0, 0), (100, 100, 100)), 1e-3, 1)


# ---------------------------------------------------------------------- study vs per-pose
def _study_targets(model, tip, n_near=24, seed=0):
    """A few grid targets around the robot plus poses reached by FK (some reachable)."""
    grid = grid_targets(Sphere((0, 0, 0.4), 1.3), 0.65, 3, 2)
    q = model.random_q(np.random.default_rng(seed), n_near)
    T = np.asarray(fk_frames(model, q, [tip]))[:, 0]
    poses = np.vstack([grid.poses, np.asarray(pose_to_pq(T))])
    return from_poses(poses, 0.25)


@pytest.mark.parametrize("robot", ["panda", "ur"])
def test_small_study_equals_independent_per_pose_solves(robot):
    model = load_robot(robot)
    study = Study(model, _study_targets(model, "panda_hand_tcp" if robot == "panda"
                                        else "tool0"), config=small_config())
    res = run_study(study).results
    n = len(study.targets)
    assert res["q"].shape == (n, model.nq) and res["reached"].shape == (n,)
    cfg = study.config.ik
    seed = model.neutral_q()
    bound = reach_bound(model, study.tip)
    for i in range(n):
        one = solve_pose(model, study.targets.poses[i:i + 1], tips=study.tip, seeds=seed,
                         config=cfg)
        if res["status"][i] == OUT_OF_REACH:  # skipped: provably unreachable
            assert bound.unreachable(study.targets.poses[i:i + 1], POS_TOL, ROT_TOL)[0]
            assert not one.success[0]
            assert np.isnan(res["position_error"][i])
            continue
        assert bool(one.success[0]) == bool(res["reached"][i]), i
        np.testing.assert_array_equal(one.q[0], res["q"][i])
        assert one.position_error[0] == res["position_error"][i]
    reached = res["reached"]
    assert 0 < reached.sum() < n
    # reached targets verified again here, by FK of the returned q
    T = np.asarray(fk_frames(model, res["q"][reached], [study.tip]))[:, 0]
    pe, re = pose_error(np.asarray(pq_to_pose(study.targets.poses[reached])), T)
    assert pe.max() <= POS_TOL and re.max() <= ROT_TOL
    assert np.all(res["q"][reached] >= model.lower) and np.all(res["q"][reached] <= model.upper)
    # manipulability from a numerical Jacobian; limit margin by a loop over the joints
    Jn = np.asarray(numerical_jacobian(model, res["q"][reached], study.tip))
    w = np.sqrt(np.linalg.det(Jn @ np.swapaxes(Jn, 1, 2)))
    np.testing.assert_allclose(res["manipulability"][reached], w, rtol=1e-5, atol=1e-9)
    for k, q in zip(np.nonzero(reached)[0], res["q"][reached]):
        m = min(2 * min(q[j] - model.lower[j], model.upper[j] - q[j])
                / (model.upper[j] - model.lower[j]) for j in range(model.nq))
        assert res["limit_margin"][k] == pytest.approx(m, abs=1e-12)
    assert np.all(np.isnan(res["manipulability"][~reached]))


def test_study_on_the_gpu_reaches_what_the_cpu_reaches():
    """backend "cupy" (the fused float32 kernels): every reached target verified here by FK,
    and the reached set within 2 % of the CPU path's (float32 may flip borderline targets)."""
    from conftest import cupy_or_skip

    cupy_or_skip()
    model = load_robot("panda")
    targets = _study_targets(model, "panda_hand_tcp", n_near=200, seed=3)
    cpu = run_study(Study(model, targets, "panda_hand_tcp", small_config())).results
    gpu = run_study(Study(model, targets, "panda_hand_tcp",
                               small_config(backend="cupy"))).results
    np.testing.assert_array_equal(cpu["status"] == OUT_OF_REACH, gpu["status"] == OUT_OF_REACH)
    ok = gpu["reached"]
    assert ok.sum() >= 150
    assert abs(int(ok.sum()) - int(cpu["reached"].sum())) <= 0.02 * len(targets)
    T = np.asarray(fk_frames(model, gpu["q"][ok], ["panda_hand_tcp"]))[:, 0]
    pe, re = pose_error(np.asarray(pq_to_pose(targets.poses[ok])), T)
    assert pe.max() <= POS_TOL and re.max() <= ROT_TOL
    assert np.all(gpu["q"][ok] >= model.lower) and np.all(gpu["q"][ok] <= model.upper)


def farthest_from_reach_bounds(model, q) -> list[tuple]:
    """For every tip of ``model`` with a reach bound, over the configurations ``q``: (tip, the
    farthest tip distance, its bound, the farthest wrist point distance, its bound; 0 and inf
    without a wrist bound), after checking that the bound calls no FK pose unreachable (also
    used by test_real_urdfs.py on example-robot-data)."""
    out = []
    for tip in model.tips:
        bound = reach_bound(model, tip)
        if bound is None:
            continue
        T = np.asarray(fk_frames(model, q, [tip]))[:, 0]
        d = np.linalg.norm(T[:, :3, 3] - bound.anchor, axis=1).max()
        assert not bound.unreachable(np.asarray(pose_to_pq(T)), 0.0, 0.0).any(), tip
        dw = 0.0
        if bound.wrist is not None:  # the wrist point too, on its own
            w = T[:, :3, 3] - np.einsum("bij,j->bi", T[:, :3, :3], bound.wrist)
            anchor = bound.anchor if bound.wrist_anchor is None else bound.wrist_anchor
            dw = np.linalg.norm(w - anchor, axis=1).max()
        out.append((tip, d, bound.radius, dw, bound.wrist_radius))
    return out


@pytest.mark.parametrize("robot", robots.names())
def test_reach_bound_holds_for_random_configurations(robot):
    """No configuration puts the tip (or the wrist point) beyond the bound, on every bundled
    robot's tips; and the bound is not loose (random configurations come near it)."""
    model = load_robot(robot)
    q = model.random_q(np.random.default_rng(1), 20000)
    for tip, d, radius, dw, wrist_radius in farthest_from_reach_bounds(model, q):
        assert d <= radius + 1e-12 and dw <= wrist_radius + 1e-12, tip
        assert d >= 0.5 * radius, tip  # and it is not absurdly loose


def test_reach_bound_is_the_hand_computed_one_on_the_panda():
    """Points on the joint axes, not the frame origins: the shoulder (axes 1-3 meet there),
    the elbow axis 0.316 m up and 0.0825 m out, the wrist (axes 5 and 6 meet) 0.384 m along
    the forearm and 0.0825 m back, the last axis 0.088 m beside it, the TCP on that axis
    0.2104 m out (flange 0.107 + hand TCP 0.1034): the wrist point's bound is the sum of the
    three hops, and the tip's is the distance of a straight arm."""
    model = load_robot("panda")
    bound = reach_bound(model, "panda_hand_tcp")
    hops = math.hypot(0.316, 0.0825) + math.hypot(0.384, 0.0825) + 0.088
    assert bound.wrist_radius == pytest.approx(hops, abs=1e-6)
    assert bound.radius == pytest.approx(math.hypot(0.316, 0.0825) + math.hypot(
        0.384, 0.0825) + math.hypot(0.088, 0.2104), abs=1e-6)
    np.testing.assert_allclose(bound.anchor, [0, 0, 0.333], atol=1e-6)
    assert np.linalg.norm(bound.wrist) == pytest.approx(0.2104, abs=1e-6)
    # it rules out poses the sphere alone allows: pushed along the tool axis
    q = model.random_q(np.random.default_rng(1), 20000)
    T = np.asarray(fk_frames(model, q, ["panda_hand_tcp"]))[:, 0]
    far = np.asarray(pose_to_pq(T))
    far[:, :3] += 0.15 * T[:, :3, 2]
    inside = np.linalg.norm(far[:, :3] - bound.anchor, axis=1) <= bound.radius
    assert bound.unreachable(far[inside], 1e-4, 1e-3).any()


def test_voxel_index_matches_a_hand_computed_case():
    # voxel (0,0,0): 4 targets, 3 reached; voxel (1,0,0): 2 targets, none; voxel (0,0,1): 1, 1
    pos = np.array([[0, 0, 0]] * 4 + [[0.1, 0, 0]] * 2 + [[0, 0, 0.1]], float)
    poses = np.hstack([pos, np.tile([0, 0, 0, 1.0], (7, 1))])
    t = from_poses(poses, 0.1)
    reached = np.array([1, 1, 0, 1, 0, 0, 1], bool)
    manip = np.array([0.1, 0.2, 9.0, 0.3, 9.0, 9.0, 0.05])
    margin = np.array([0.5, 0.7, 9.0, 0.9, 9.0, 9.0, 0.1])
    v = voxel_table(t, reached, manip, margin)
    order = np.lexsort(t.cells.T[::-1])  # cells sorted by (x, y, z)
    cells = t.cells[order]
    np.testing.assert_array_equal(cells, [[0, 0, 0], [0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(v["targets"][order], [4, 1, 2])
    np.testing.assert_array_equal(v["reached"][order], [3, 1, 0])
    np.testing.assert_allclose(v["reachability"][order], [0.75, 1.0, 0.0])
    np.testing.assert_allclose(v["mean_manipulability"][order][:2], [0.2, 0.05])
    np.testing.assert_allclose(v["mean_limit_margin"][order][:2], [0.7, 0.1])
    assert np.isnan(v["mean_manipulability"][order][2])


def test_study_voxels_agree_with_its_own_columns():
    model = load_robot("ur")
    t = grid_targets(Box((-0.6, -0.6, 0.0), (0.6, 0.6, 0.6)), 0.3, 4, 2)
    out = run_study(Study(model, t, config=small_config(shard_size=100)))
    r, v = out.results, out.voxels
    for k in range(t.num_voxels):
        rows = np.nonzero(r["voxel"] == k)[0]
        assert len(rows) == 8  # 4 directions x 2 rolls
        assert v["reachability"][k] == r["reached"][rows].mean()
    assert 0 < v["reachability"].mean() < 1
    assert out.summary["reached"] == int(r["reached"].sum())


def test_study_is_deterministic_and_independent_of_the_shard_size():
    model = load_robot("panda")
    t = grid_targets(Sphere((0, 0, 0.333), 0.9), 0.45, 3, 2)
    a = run_study(Study(model, t, config=small_config(shard_size=40))).results
    b = run_study(Study(model, t, config=small_config(shard_size=1000))).results
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # another rng seed draws other restarts (the same seed, the same answers)
    c = run_study(Study(model, t, config=small_config(
        ik=IKConfig(num_seeds=32, stall_iterations=5, rng_seed=11)))).results
    assert not np.array_equal(a["q"], c["q"])


def test_study_bytes_do_not_depend_on_the_process():
    """A Ray worker or a fresh process solves with the backends its prepared solvers fixed
    when they were built, as this one: the results are the same bytes (manipulability
    included) from a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from test_reach import small_config\n"
        "from ros2_ik import load_robot\n"
        "from ros2_ik.reach import Sphere, Study, grid_targets, run_study\n"
        "t = grid_targets(Sphere((0, 0, 0.333), 0.9), 0.45, 3, 2)\n"
        "r = run_study(Study(load_robot('panda'), t, config=small_config())).results\n"
        "sys.stdout.buffer.write(b''.join(np.asarray(r[k]).tobytes() for k in sorted(r)))\n")
    model = load_robot("panda")
    t = grid_targets(Sphere((0, 0, 0.333), 0.9), 0.45, 3, 2)
    a = run_study(Study(model, t, config=small_config())).results
    assert a["reached"].any()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300,
                         check=True, cwd=str(__import__("pathlib").Path(__file__).parent)).stdout
    assert out == b"".join(np.asarray(a[k]).tobytes() for k in sorted(a))


def test_defaults_are_the_nodes_parameters():
    from ros2_ik.ros.params import SPECS

    ik = StudyConfig().ik
    for name in ("num_seeds", "stall_iterations", "max_iterations", "position_tolerance",
                 "orientation_tolerance", "rng_seed"):
        assert getattr(ik, name) == SPECS[name].default, name
    assert ik.timeout is None
    with pytest.raises(InvalidInputError, match="timeout=None"):
        StudyConfig(ik=IKConfig(timeout=1.0))


def test_unknown_tip_lists_the_links():
    with pytest.raises(UnknownLinkError, match="panda_link8"):
        Study(load_robot("panda"), grid_targets(Box((0, 0, 0), (0.1, 0.1, 0.1)), 0.1, 1),
              tip="nope")


# ---------------------------------------------------------------------- folder and resume
def _resume_study():
    model = load_robot("panda")
    t = grid_targets(Sphere((0, 0, 0.333), 0.9), 0.3, 3, 2)
    return Study(model, t, config=small_config(shard_size=100))


def test_resume_after_a_stop_gives_the_same_file(tmp_path):
    study = _resume_study()
    full = run_study(study, tmp_path / "full", plots=False)
    assert full.complete
    data = (tmp_path / "full" / "results.npz").read_bytes()

    seen = []

    def stop_after_three():
        return len(seen) >= 3

    part = run_study(study, tmp_path / "part", progress=lambda d, n, r: seen.append(d),
                     should_stop=stop_after_three, plots=False)
    assert not part.complete and part.results is None
    shards = sorted((tmp_path / "part" / "shards").glob("shard-*.npz"))
    assert 1 <= len(shards) < study.num_shards
    assert not (tmp_path / "part" / "results.npz").exists()
    done = run_study(study, tmp_path / "part", plots=False)
    assert done.complete and done.summary["shards_resumed"] == len(shards)
    assert done.summary["targets_solved_this_run"] < len(study.targets)
    assert (tmp_path / "part" / "results.npz").read_bytes() == data
    assert (tmp_path / "part" / "voxels.npz").read_bytes() == \
        (tmp_path / "full" / "voxels.npz").read_bytes()
    summary = json.loads((tmp_path / "part" / "summary.json").read_text())
    assert summary["targets"] == len(study.targets) and summary["reached"] == \
        int(full.results["reached"].sum())
    # a different study in the same folder is refused, naming what differs
    other = study.with_config(ik=IKConfig(num_seeds=4, stall_iterations=5))
    with pytest.raises(InvalidInputError, match="different study.*config.*--overwrite"):
        run_study(other, tmp_path / "part", plots=False)


def test_results_file_columns(tmp_path):
    study = _resume_study()
    run_study(study, tmp_path, plots=True)
    with np.load(tmp_path / "results.npz") as f:
        assert f.files[:11] == ["pose", "voxel", "reached", "status", "q", "position_error",
                                "orientation_error", "iterations", "seed_index",
                                "manipulability", "limit_margin"]
        assert list(f["q_names"]) == list(study.model.q_names)
        assert f["q"].shape == (len(study.targets), study.model.nq)
    for png in ("reach_projections.png", "reach_slices_z.png", "manipulability_projections.png"):
        data = (tmp_path / "plots" / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


# ---------------------------------------------------------------------- command line
def _reach_exe() -> str:
    exe = Path(sys.prefix) / "lib" / "ros2_ik" / "reach_study"  # where `ros2 run` looks
    if not exe.exists():
        pytest.skip("reach_study is not installed under <prefix>/lib/ros2_ik; run make setup")
    return str(exe)


CLI_ARGS = ["--robot", "panda", "--sphere", "0", "0", "0.333", "0.9", "--resolution", "0.3",
            "--directions", "3", "--rolls", "2", "--shard-size", "100"]


def test_command_runs_a_study_and_draws_it(tmp_path):
    out = tmp_path / "study"
    p = subprocess.run([_reach_exe(), *CLI_ARGS, "--out", str(out)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "reached" in p.stdout and "solves/s" in p.stdout
    assert "target/s" in p.stderr  # the progress bar
    # the same study as the library's (the command avoids collisions by default)
    study = _resume_study()
    study = Study(study.model, study.targets, config=dataclasses.replace(
        study.config, ik=dataclasses.replace(study.config.ik, avoid_collisions=True)))
    lib = run_study(study, tmp_path / "lib", plots=False)
    assert (out / "results.npz").read_bytes() == (tmp_path / "lib" / "results.npz").read_bytes()
    assert lib.summary["reached"] == json.loads((out / "summary.json").read_text())["reached"]
    assert sorted(p.name for p in (out / "plots").glob("*.png")) == [
        "manipulability_projections.png", "reach_projections.png", "reach_slices_z.png"]


@pytest.mark.parametrize("args, words", [
    (["--robot", "pandax", "--box", "0", "0", "0", "1", "1", "1"], ["unknown robot", "panda"]),
    (["--box", "0", "0", "0", "1", "1", "-1"], ["below the lower corner"]),
    (["--targets", "/nonexistent/poses.csv"], ["does not exist", ".csv"]),
    (["--sphere", "0", "0", "0", "1", "--tip", "foo"], ["unknown link 'foo'", "panda_link8"]),
    ([], ["no targets", "--box", "--sphere", "--targets"]),
    (["--sphere", "0", "0", "0", "1", "--num-seeds", "0"], ["num_seeds"]),
])
def test_command_bad_input(tmp_path, args, words):
    p = subprocess.run([sys.executable, "-m", "ros2_ik.reach", *args, "--out",
                        str(tmp_path / "o"), "-q"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("reach_study: error: ")
    for w in words:
        assert w in p.stderr, p.stderr


def test_command_ctrl_c_keeps_finished_shards_and_resumes(tmp_path):
    out = tmp_path / "study"
    args = ["--robot", "panda", "--sphere", "0", "0", "0.333", "1.0", "--resolution", "0.2",
            "--directions", "4", "--rolls", "2", "--shard-size", "200", "--no-plots"]
    code, err = interrupt_after_shards([_reach_exe(), *args, "--out", str(out)], out, "study")
    assert code == 130, err
    assert "run the same command again to resume" in err
    kept = sorted((out / "shards").glob("shard-*.npz"))
    assert len(kept) >= 2
    with np.load(kept[0]) as f:  # finished shards are whole files
        assert f["reached"].shape == (200,)
    assert not (out / "results.npz").exists()
    again = subprocess.run([_reach_exe(), *args, "--out", str(out), "-q"], capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{len(kept)} shards resumed" in again.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["shards_done"] == summary["shards"]


def test_reach_runs_without_rclpy_ray_and_cupy():
    code = textwrap.dedent("""
        import sys
        for name in ('rclpy', 'ray', 'cupy'):
            sys.modules[name] = None  # any import of them now raises ImportError
        from ros2_ik import load_robot
        from ros2_ik.errors import BackendUnavailableError
        from ros2_ik.reach import Box, Study, StudyConfig, grid_targets, run_study
        from ros2_ik.reach import cli  # noqa: F401
        from ros2_ik.reach.ray_executor import RayExecutor, ray_available
        t = grid_targets(Box((0.3, 0, 0.3), (0.4, 0, 0.3)), 0.1, 2, 1)
        out = run_study(Study(load_robot('ur'), t, config=StudyConfig(shard_size=2)))
        assert out.complete and out.results['reached'].shape == (4,)
        assert not ray_available()
        try:
            RayExecutor()
        except BackendUnavailableError as exc:
            assert 'pip install' in str(exc) and 'without --ray' in str(exc), exc
        else:
            raise AssertionError('RayExecutor without ray')
        bad = [k for k in sys.modules if k.startswith(('rclpy', 'ray', 'cupy')) and sys.modules[k]]
        assert not bad, bad
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
