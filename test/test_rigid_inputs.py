"""Every entry point that takes a 4x4 pose checks that it is a rigid transform, the same way:
a scale (2I), a shear, a reflection and a last row that is not ``0 0 0 1`` are named, never read
as a rotation. Batch solves answer such a goal INVALID per problem (on every backend); the
commands and the one-shot entry points refuse it with an error naming the pose and the problem."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ros2_ik import IKSolver, load_robot
from ros2_ik.errors import InvalidInputError
from ros2_ik.ik.config import Status
from ros2_ik.kinematics import fk
from ros2_ik.validate import check_transforms, transform_problems

pytestmark = pytest.mark.timeout(600)


def _good():
    m = load_robot("panda")
    T = fk(m, m.neutral_q()[None])[0, m.link_index("panda_hand_tcp")]
    return m, T


def _bad(T):
    """{name: (matrix, a word the error must hold)}."""
    out = {}
    a = T.copy()
    a[:3, :3] = 2.0 * T[:3, :3]
    out["scale 2I"] = (a, "not orthonormal")
    a = T.copy()
    a[:3, :3] = T[:3, :3] @ np.array([[1, 0.7, 0], [0, 1, 0], [0, 0, 1]])
    out["shear 0.7"] = (a, "not orthonormal")
    a = T.copy()
    a[:3, :3] = T[:3, :3] @ np.diag([1.0, 1.0, -1.0])
    out["reflection"] = (a, "reflection")
    a = T.copy()
    a[3] = (0.1, 0.0, 0.0, 1.0)
    out["last row"] = (a, "last row")
    a = T.copy()
    a[3, 3] = 2.0
    out["homogeneous scale"] = (a, "last row")
    return out


BAD = ["scale 2I", "shear 0.7", "reflection", "last row", "homogeneous scale"]


def test_the_shared_check_names_each_problem():
    _, T = _good()
    assert transform_problems(T[None]) == []
    for name, (a, word) in _bad(T).items():
        got = transform_problems(np.stack([T, a, T]))
        assert [i for i, _ in got] == [1], name
        assert word in got[0][1], (name, got)
        with pytest.raises(InvalidInputError, match=rf"poses: pose 1 is not a rigid.*{word}"):
            check_transforms(np.stack([T, a]), "poses")
    nan = T.copy()
    nan[0, 0] = np.nan
    assert "NaN" in transform_problems(nan[None])[0][1]


@pytest.mark.parametrize("backend", ["reference", "host"])
def test_a_batch_answers_each_non_rigid_goal_invalid_on_every_backend(backend):
    m, T = _good()
    bad = _bad(T)
    goals = np.stack([T] + [bad[k][0] for k in BAD] + [T])
    r = IKSolver(m, "panda_hand_tcp", backend=backend).solve(goals, seeds=m.neutral_q())
    st = np.asarray(r.status).ravel()
    assert st[0] == Status.CONVERGED and st[-1] == Status.CONVERGED, st
    assert np.all(st[1:-1] == Status.INVALID_INPUT), dict(zip(BAD, st[1:-1].tolist()))


def test_placement_and_reach_targets_refuse_non_rigid_poses():
    from ros2_ik.reach.placement import Placement, Region
    from ros2_ik.reach.targets import from_poses

    m, T = _good()
    for name, (a, word) in _bad(T).items():
        with pytest.raises(InvalidInputError, match=word):
            from_poses(np.stack([T, a]), 0.05)
        with pytest.raises(InvalidInputError, match=rf"pose 1 is not a rigid.*{word}"):
            Placement(m, np.stack([T, a]), Region(x=(-0.2, 0.2), y=(-0.2, 0.2)))


def test_keyframes_and_obstacles_refuse_non_rigid_poses():
    from ros2_ik.api.trajectory import trajectory_seed
    from ros2_ik.world import Obstacle

    m, T = _good()
    for name, (a, word) in _bad(T).items():
        with pytest.raises(InvalidInputError, match=word):
            trajectory_seed(m, np.stack([T, a]), [0, 4], tip="panda_hand_tcp")
        with pytest.raises(InvalidInputError, match=word):
            Obstacle.make("o", "box", (0.1, 0.1, 0.1), pose=a)


@pytest.mark.parametrize("name", ["shear 0.7", "last row"])
def test_the_placement_command_refuses_a_non_rigid_npz_pose(tmp_path, name):
    m, T = _good()
    a, word = _bad(T)[name]
    np.savez(tmp_path / "poses.npz", poses=np.stack([T, a]))
    p = subprocess.run([sys.executable, "-m", "ros2_ik.reach.placement_cli", "--robot", "panda",
                        "--poses", str(tmp_path / "poses.npz"), "--x", "-0.2", "0.2",
                        "--y", "-0.2", "0.2", "--out", str(tmp_path / "o"), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "pose 1 is not a rigid transform" in p.stderr and word in p.stderr, p.stderr
