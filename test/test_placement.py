"""Base placement (:mod:`ros2_ik.reach.placement`): scores that count only verified,
collision-free answers (checked here without the mount: FK of the robot at each base, the world
moved into the base frame and checked by check_states), the mount against per-base solves, the
reach bound's pruning, a base standing in an obstacle, resume and shards, cancel and timeouts,
bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros2_ik import IKConfig, IKSolver, check_states, fk_frames, jacobian, load_robot
from ros2_ik.errors import InputTypeError, InvalidInputError, UnknownLinkError
from ros2_ik.ik.collision import default_collision_model
from ros2_ik.kinematics import pose_error, pose_inverse
from ros2_ik.reach import manipulability
from ros2_ik.reach.placement import (Placement, PlacementConfig, Region, base_poses, rank,
                                     run_placement, score_bases)
from ros2_ik.world import Obstacle, World

pytestmark = pytest.mark.timeout(600)
TIP = "panda_hand_tcp"


def _rot(a, b):
    """Rz(a) @ Ry(b)."""
    Rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    Ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
    return Rz @ Ry


@pytest.fixture(scope="module")
def cell():
    return make_cell()


def make_cell():
    """The panda, a floor, a table with a box on it, 8 task poses over the table pointing
    down."""
    m = load_robot("panda")
    world = World().add(
        Obstacle.make("floor", "halfspace", pose=[0, 0, 0, 0, 0, 0, 1]),
        Obstacle.make("table", "box", (0.6, 0.8, 0.4), [0.7, 0, 0.2, 0, 0, 0, 1]),
        Obstacle.make("box", "box", (0.1, 0.1, 0.15), [0.6, 0.25, 0.475, 0, 0, 0, 1]))
    T = np.tile(np.eye(4), (8, 1, 1))
    for i, (x, y) in enumerate([(0.5, -0.2), (0.5, 0.0), (0.6, -0.1), (0.7, 0.1), (0.55, 0.15),
                                (0.65, -0.25), (0.8, 0.0), (0.75, -0.15)]):
        T[i, :3, :3] = _rot(0.3 * i, math.pi + 0.1 * (i % 3))
        T[i, :3, 3] = (x, y, 0.5 + 0.02 * i)
    return m, world, T


def _config(**kw):
    kw = dict(resolution=0.2, yaw_step=math.pi / 2, top=3, refine=2, xy_tolerance=0.05,
              yaw_tolerance=0.2, shard_size=8) | kw
    return PlacementConfig(**kw)


def _placement(cell, **kw):
    m, world, T = cell
    region = kw.pop("region", Region((-0.4, 0.2), (-0.3, 0.3)))
    return Placement(m, T, region, world=kw.pop("world", world), config=_config(**kw))


def _moved(world, Tb):
    inv = pose_inverse(Tb)
    return World().add(*[Obstacle.make(o.id, o.shape, o.size, inv @ o.pose, o.touch)
                         for o in world])


def _verify(m, world, T, cols, cfg, cm):
    """Every counted pose: its answer reaches it from the base (FK of the robot itself, the
    base pose applied) and keeps the margin from the world and itself (check_states, the world
    moved into the base frame)."""
    for k in range(len(cols["fraction"])):
        ok = cols["success"][k]
        assert cols["reached"][k] == ok.sum()
        assert cols["fraction"][k] == pytest.approx(ok.mean())
        if not ok.any():
            continue
        Tb = base_poses(cols["base"][k])[0]
        q = cols["q"][k][ok]
        got = Tb @ np.asarray(fk_frames(m, q, [TIP]))[:, 0]
        pe, re = pose_error(got, T[ok])
        assert np.all(np.asarray(pe) <= cfg.position_tolerance + 1e-9)
        assert np.all(np.asarray(re) <= cfg.orientation_tolerance + 1e-9)
        r = check_states(m, q, _moved(world, Tb), collision=cm)
        assert np.all(r.clearance >= cfg.collision_margin - 1e-9), r.clearance
        assert np.all(r.within_limits)
        np.testing.assert_allclose(cols["manipulability"][k][ok],
                                   manipulability(np.asarray(jacobian(m, q, TIP))), rtol=1e-9)
        assert cols["worst_manipulability"][k] == pytest.approx(
            cols["manipulability"][k][ok].min())


def test_scores_count_only_verified_collision_free_answers(cell):
    m, world, T = cell
    pl = _placement(cell)
    res = run_placement(pl)
    assert res.complete, res.summary
    c = res.candidates
    assert len(c["fraction"]) == 3 and c["fraction"][0] > 0.5
    np.testing.assert_array_equal(rank(c), np.arange(3))  # best first
    _verify(m, world, T, c, pl.config.fine, default_collision_model(m, within=0.01))
    # within the region; the coarse map covers the grid
    b = c["base"]
    assert np.all((b[:, 0] >= -0.4 - 1e-12) & (b[:, 0] <= 0.2 + 1e-12))
    assert np.all((b[:, 1] >= -0.3 - 1e-12) & (b[:, 1] <= 0.3 + 1e-12))
    assert res.coarse["base"].shape == (4 * 4 * 4, 4)
    np.testing.assert_array_equal(res.coarse["base"], pl.candidates())
    # the refinement scored with the fine options: the best is at least the best coarse one's
    assert c["fraction"][0] >= res.coarse["fraction"].max()
    assert res.summary["solves_coarse"] + res.summary["pruned"] <= 64 * 8


def test_the_mount_scores_as_a_solve_at_each_base(cell):
    """One seed (no random restarts): the mounted batch answers as IKSolver on the robot
    itself with the task poses and the world moved into each base's frame."""
    m, world, T = cell
    one = IKConfig(num_seeds=1, max_iterations=100, avoid_collisions=True)
    pl = _placement(cell, fine=one)
    spec = pl.spec()
    bases = np.array([[0.0, 0.0, 0.0, 0.0], [0.1, -0.1, 0.0, 0.5], [-0.1, 0.2, 0.0, -1.0],
                      [0.15, 0.0, 0.0, 2.5]])
    cols = score_bases(spec, bases, fine=True)
    s = IKSolver(m, [TIP], one)  # (its collision model: the placement's default one)
    same = []
    for k, base in enumerate(bases):
        Tb = base_poses(base)[0]
        r = s.solve(pose_inverse(Tb) @ T, world=_moved(world, Tb))
        same += (r.success == cols["success"][k]).tolist()
        both = r.success & cols["success"][k]
        np.testing.assert_allclose(r.q[both], cols["q"][k][both], atol=1e-6)
    assert np.mean(same) >= 0.95, np.mean(same)
    assert np.sum(cols["success"]) >= 8


def test_pruned_pairs_are_never_reached(cell):
    """Without the reach bound every pair is solved: the same scores (the pairs the bound
    leaves out fail every time)."""
    a = run_placement(_placement(cell))
    b = run_placement(_placement(cell, prune=False))
    assert a.summary["pruned"] > 0 and b.summary["pruned"] == 0
    assert b.summary["solves_coarse"] > a.summary["solves_coarse"]
    np.testing.assert_array_equal(a.coarse["success"], b.coarse["success"])
    np.testing.assert_array_equal(a.coarse["fraction"], b.coarse["fraction"])
    np.testing.assert_array_equal(a.candidates["base"], b.candidates["base"])


def test_a_base_standing_in_an_obstacle_reaches_nothing(cell):
    m, world, T = cell
    crate = world.add(Obstacle.make("crate", "box", (0.3, 0.3, 0.3), [0.0, 0.0, 0.15, 0, 0, 0, 1]))
    pl = _placement(cell, world=crate, region=Region((0.0, 0.2), (0.0, 0.0)))
    spec = pl.spec()
    cols = score_bases(spec, np.array([[0.0, 0.0, 0.0, 0.0], [0.4, 0.0, 0.0, 0.0]]))
    assert not cols["base_clear"][0] and cols["fraction"][0] == 0 and cols["solved"][0] == 0
    # the floor under the base (a half-space) does not count
    free = score_bases(_placement(cell).spec(), np.array([[0.0, 0.0, 0.0, 0.0]]))
    assert free["base_clear"][0] and free["fraction"][0] > 0


def test_resume_shards_and_determinism(cell, tmp_path):
    one = run_placement(_placement(cell))
    calls = [0]

    def stop():
        calls[0] += 1
        return calls[0] > 3

    part = run_placement(_placement(cell), tmp_path, should_stop=stop)
    assert part.status == "cancelled" and not part.complete
    shards = sorted((tmp_path / "shards").glob("shard-*.npz"))
    assert 0 < len(shards) < 8
    again = run_placement(_placement(cell), tmp_path)
    assert again.complete and again.summary["shards_resumed"] == len(shards)
    for k in ("fraction", "worst_manipulability", "success"):
        np.testing.assert_array_equal(again.coarse[k], one.coarse[k])
    np.testing.assert_array_equal(again.candidates["base"], one.candidates["base"])
    np.testing.assert_array_equal(again.candidates["q"], one.candidates["q"])
    assert (tmp_path / "candidates.npz").exists() and (tmp_path / "summary.json").exists()
    # another shard size: the same scores
    other = run_placement(_placement(cell, shard_size=5))
    np.testing.assert_array_equal(other.coarse["fraction"], one.coarse["fraction"])
    np.testing.assert_array_equal(other.candidates["base"], one.candidates["base"])
    # another question in the same folder is refused, naming what differs
    m, world, T = cell
    with pytest.raises(InvalidInputError, match="differs in: .*poses"):
        run_placement(Placement(m, T[:5], Region((-0.4, 0.2), (-0.3, 0.3)), world=world,
                                config=_config()), tmp_path)


def test_cancel_and_timeout(cell):
    r = run_placement(_placement(cell), timeout=0.0)
    assert r.status == "timed_out" and r.candidates is None
    r = run_placement(_placement(cell), should_stop=lambda: True)
    assert r.status == "cancelled"
    stages = []

    def progress(stage, done, total, best):
        stages.append(stage)

    calls = [0]

    def late():  # stops in the refinement
        calls[0] += 1
        return "refine" in stages

    r = run_placement(_placement(cell), progress=progress, should_stop=late)
    assert r.status == "cancelled" and r.coarse is not None and r.candidates is None
    assert stages[0] == "coarse" and "refine" in stages


def test_region_grid_and_clip():
    r = Region((0.0, 0.25), (1.0, 1.0), yaw=(-math.pi, math.pi), heights=(0.0, 0.5))
    g = r.grid(0.1, math.pi / 2)
    assert g.shape == (2 * 3 * 1 * 4, 4)
    assert sorted(set(g[:, 0].round(9))) == [0.0, 0.1, 0.2]
    assert sorted(set(g[:, 3].round(9))) == sorted(np.round(-math.pi + np.arange(4) * math.pi / 2,
                                                            9))
    c = r.clip(np.array([[0.3, 2.0, 0.0, 4.0]]))
    assert c[0, 0] == 0.25 and c[0, 1] == 1.0 and -math.pi <= c[0, 3] < math.pi
    half = Region((0, 0), (0, 0), yaw=(0.0, 1.0))
    assert half.grid(0.1, 0.4)[:, 3].tolist() == pytest.approx([0.0, 0.4, 0.8])


def test_bad_input_names_it(cell):
    m, world, T = cell
    reg = Region((-0.4, 0.2), (-0.3, 0.3))
    cases = [
        (lambda: Placement(m, T[:0], reg), InvalidInputError, "empty"),
        (lambda: Placement(m, np.full((2, 7), np.nan), reg), InvalidInputError, "NaN"),
        (lambda: Placement(m, [[0.5, 0, 0.5, 0, 0, 0, 2.0]], reg), InvalidInputError,
         "norm"),
        (lambda: Placement(m, np.zeros((100_001, 7)), reg), InvalidInputError, "exceed"),
        (lambda: Placement(m, T, reg, tip="nope"), UnknownLinkError, "nope"),
        (lambda: Placement(m, T, reg, world="table"), InputTypeError, "World"),
        (lambda: Placement(m, T, (0, 1)), InputTypeError, "Region"),
        (lambda: Region((0.5, -0.5), (0, 1)), InvalidInputError, "upside down"),
        (lambda: Region((np.nan, 1), (0, 1)), InvalidInputError, "not finite"),
        (lambda: Region((0, 1, 2), (0, 1)), InvalidInputError, r"\(low, high\)"),
        (lambda: Region((0, 1), (0, 1), yaw=(-4, 4)), InvalidInputError, "full circle"),
        (lambda: Region((0, 1), (0, 1), heights=()), InvalidInputError, "heights"),
        (lambda: Region((0, 200), (0, 1)), InvalidInputError, "beyond"),
        (lambda: Placement(m, T, Region((-5, 5), (-5, 5)), config=PlacementConfig(
            resolution=0.001)), InvalidInputError, "candidates"),
        (lambda: Placement(m, T, Region((5, 6), (5, 6))), InvalidInputError,
         "beyond the arm's reach"),
        (lambda: PlacementConfig(coarse=IKConfig()), InvalidInputError, "avoid_collisions"),
        (lambda: PlacementConfig(fine=IKConfig(avoid_collisions=True, timeout=1.0)),
         InvalidInputError, "timeout"),
        (lambda: PlacementConfig(resolution=0.0), InvalidInputError, "resolution"),
        (lambda: PlacementConfig(top=0), InvalidInputError, "top"),
        (lambda: PlacementConfig(solver="ccd"), InvalidInputError, "ccd"),
        (lambda: run_placement("nope"), InputTypeError, "Placement"),
        (lambda: run_placement(_placement(cell), timeout=-1), InvalidInputError, "timeout"),
    ]
    for make, err, words in cases:
        with pytest.raises(err, match=words):
            make()


# ---------------------------------------------------------------------- command line
def _exe() -> str:
    import sys
    from pathlib import Path

    exe = Path(sys.prefix) / "lib" / "ros2_ik" / "ros2_ik_base_placement"  # as ros2 run finds it
    if not exe.exists():
        pytest.skip("ros2_ik_base_placement is not installed under <prefix>/lib/ros2_ik; run "
                    "make setup")
    return str(exe)


def _files(cell, tmp_path) -> dict:
    """The files of the cell, and the command's options for the test's search (option ->
    values)."""
    import yaml

    from ros2_ik.kinematics import pose_to_pq

    m, world, T = cell
    (tmp_path / "world.yaml").write_text(world.to_yaml())
    pq = np.asarray(pose_to_pq(T))
    (tmp_path / "poses.yaml").write_text(yaml.safe_dump({"poses": [
        {"position": p[:3].tolist(), "orientation": p[3:].tolist()} for p in pq]}))
    np.savez(tmp_path / "poses.npz", poses=T)
    return {"--robot": ["panda"], "--world": [str(tmp_path / "world.yaml")],
            "--poses": [str(tmp_path / "poses.yaml")], "--x": ["-0.4", "0.2"],
            "--y": ["-0.3", "0.3"], "--resolution": ["0.2"], "--yaw-step": ["90"],
            "--top": ["3"], "--refine": ["2"], "--xy-tolerance": ["0.05"],
            "--yaw-tolerance": [str(math.degrees(0.2))], "--shard-size": ["8"]}


def _argv(opts: dict) -> list:
    return [str(v) for k, vs in opts.items() for v in [k, *vs]]


def test_command_answers_as_the_library(cell, tmp_path):
    import subprocess

    opts = _files(cell, tmp_path)
    out = tmp_path / "out"
    p = subprocess.run([_exe(), *_argv(opts), "--out", str(out), "--task-frame", "cell"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "best bases in frame 'cell'" in p.stdout and "base/s" in p.stderr
    lib = run_placement(_placement(cell))
    with np.load(out / "candidates.npz") as f:
        np.testing.assert_allclose(f["base"], lib.candidates["base"], atol=1e-12)
        np.testing.assert_array_equal(f["success"], lib.candidates["success"])
        np.testing.assert_allclose(f["q"], lib.candidates["q"], atol=1e-12)
    with np.load(out / "coarse.npz") as f:
        np.testing.assert_array_equal(f["fraction"], lib.coarse["fraction"])
    # NPZ poses (4 x 4 matrices): the same answer
    opts["--poses"] = [str(tmp_path / "poses.npz")]
    p2 = subprocess.run([_exe(), *_argv(opts), "--out", str(tmp_path / "out2"), "-q"],
                        capture_output=True, text=True, timeout=300)
    assert p2.returncode == 0, p2.stderr
    assert p2.stdout.splitlines()[-5:-1] == p.stdout.splitlines()[-5:-1]  # the table


@pytest.mark.parametrize("change, words", [
    ({"--robot": ["pandax"]}, ["unknown robot", "panda"]),
    ({"--poses": ["/nonexistent/poses.yaml"]}, ["does not exist"]),
    ({"--x": ["0.2", "-0.4"]}, ["region x", "upside down"]),
    ({"--x": ["nan", "0.2"]}, ["region x", "not finite"]),
    ({"--x": ["4", "5"]}, ["beyond the arm's reach", "task poses 0, 1"]),
    ({"--tip": ["foo"]}, ["unknown link 'foo'", "panda_link8"]),
    ({"--world": ["/nonexistent/world.yaml"]}, ["--world", "No such file"]),
    ({"--yaw": ["-360", "360"]}, ["region yaw", "full circle"]),
    ({"--seeds": ["0"]}, ["num_seeds"]),
])
def test_command_bad_input(cell, tmp_path, change, words):
    import subprocess
    import sys

    opts = _files(cell, tmp_path) | change
    p = subprocess.run([sys.executable, "-m", "ros2_ik.reach.placement_cli", *_argv(opts),
                        "--out", str(tmp_path / "o"), "-q"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("ros2_ik_base_placement: error: "), p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


def test_command_ctrl_c_keeps_finished_shards_and_resumes(cell, tmp_path):
    import json
    import subprocess

    from cli_testing import interrupt_after_shards

    opts = _files(cell, tmp_path) | {"--resolution": ["0.02"], "--shard-size": ["40"]}
    args = _argv(opts)  # 31 x 31 x 4 candidates
    out = tmp_path / "out"
    code, err = interrupt_after_shards([_exe(), *args, "--out", str(out)], out, "search")
    assert code == 130, err
    assert "run the same command again to resume" in err
    kept = sorted((out / "shards").glob("shard-*.npz"))
    assert len(kept) >= 2 and not (out / "candidates.npz").exists()
    again = subprocess.run([_exe(), *args, "--out", str(out), "-q"], capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["shards_resumed"] == len(kept)
    assert summary["shards_done"] == summary["shards"]


def test_the_documentation_s_worked_example_runs_as_printed(tmp_path):
    """docs/placement.md's command, taken from the page, run from the project root: it exits
    0 and its table of best bases is the page's (the same seed, the same numbers), and every
    answer of the best base is verified here without the mount."""
    import re
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "placement.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", page, re.S)
    cmd = next(b for b in blocks if b.startswith("ros2_ik_base_placement"))
    argv = shlex.split(cmd.replace("\\\n", " "))
    out = tmp_path / "cell_placement"
    argv[argv.index("--out") + 1] = str(out)
    p = subprocess.run([sys.executable, "-m", "ros2_ik.reach.placement_cli", *argv[1:]],
                       cwd=root, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    printed = re.search(r"```text\n(.*?)```", page, re.S).group(1)
    rows = [ln.split() for ln in printed.splitlines() if re.match(r"\s+\d+\s", ln)]
    got = [ln.split() for ln in p.stdout.splitlines() if re.match(r"\s+\d+\s", ln)]
    assert len(rows) == 3 and [r[:6] for r in got] == [r[:6] for r in rows], p.stdout
    # the best base's answers, checked at that base without the mount
    from ros2_ik.reach.store import read_npz

    cand = read_npz(out / "candidates.npz")
    x, y, z, yaw = np.asarray(cand["base"][0], float)
    base = np.eye(4)
    base[:3, :3] = _rot(yaw, 0.0)
    base[:3, 3] = (x, y, z)
    robot = load_robot("panda")
    ok = np.asarray(cand["success"][0], bool)
    q = np.asarray(cand["q"][0])[ok]
    from ros2_ik.reach.targets import load_targets

    from ros2_ik.kinematics import pq_to_pose

    T = np.asarray(pq_to_pose(load_targets(root / "docs/examples/placement/picks.yaml",
                                           1.0).poses[ok]))
    tool = base @ np.asarray(fk_frames(robot, q, [TIP]))[:, 0]
    pe, oe = pose_error(tool, T)
    assert ok.sum() == int(rows[0][5].split("/")[0])
    assert np.all(np.asarray(pe) < 1e-3) and np.all(np.asarray(oe) < 1e-2)
