"""Trajectory seeds: interpolation, parallel vs sequential, flags, jumps, cancel, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik.errors import InvalidInputError, ShapeError, UnknownLinkError
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq
from ros2_ik.ik import IKConfig, Status
from ros2_ik.api import interpolate_keyframes, trajectory_seed
from ros2_ik.ik.seeds import seed_distance

TIP = "panda_hand_tcp"


def _path(m, n_key=4, span=0.6):
    """Keyframes: FK of a straight joint-space path in the middle of the limits."""
    mid = m.neutral_q()
    d = np.linspace(-1, 1, n_key)[:, None] * span * np.array([1, 0.5, -0.7, 0.4, 0.8, -0.5, 1])
    qk = mid + d * (m.upper - m.lower) / 8
    return qk, fk_frames(m, qk, [TIP])[:, 0]


def _check_fk(m, res):
    Tq = fk_frames(m, res.q, [TIP])[:, 0]
    dp, dr = pose_error(res.targets, Tq)
    assert np.all(dp[res.success] <= 1e-4 * (1 + 1e-9))
    assert np.all(dr[res.success] <= 1e-3 * (1 + 1e-9))
    assert np.all(res.q >= m.lower - 1e-12) and np.all(res.q <= m.upper + 1e-12)


def test_interpolation_linear_and_slerp(models):
    m = models["panda"]
    _, K = _path(m, 2)
    T = interpolate_keyframes(pose_to_pq(K), [0, 4])
    assert T.shape == (5, 4, 4)
    np.testing.assert_allclose(T[0], K[0], atol=1e-12)
    np.testing.assert_allclose(T[4], K[1], atol=1e-12)
    np.testing.assert_allclose(T[2, :3, 3], K[:, :3, 3].mean(axis=0), atol=1e-12)
    _, total = pose_error(K[1], K[0])
    _, half0 = pose_error(T[2], K[0])
    _, half1 = pose_error(K[1], T[2])
    assert half0 == pytest.approx(total / 2, abs=1e-9)
    assert half1 == pytest.approx(total / 2, abs=1e-9)
    R = T[:, :3, :3]
    np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.broadcast_to(np.eye(3), R.shape),
                               atol=1e-12)


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_modes_reach_every_node(models, mode):
    m = models["panda"]
    qk, K = _path(m)
    res = trajectory_seed(m, K, [0, 5, 10, 15], tip=TIP, mode=mode, seed=qk[0],
                          config=IKConfig(num_seeds=4))
    assert res.q.shape == (16, m.nq)
    _check_fk(m, res)
    assert res.success.all(), res.failed_nodes
    assert np.all(res.status == Status.CONVERGED)
    assert res.max_joint_jump == pytest.approx(res.jumps.max())
    np.testing.assert_allclose(res.jumps, seed_distance(m, res.q[1:], res.q[:-1]))


def test_sequential_no_larger_jumps_than_parallel(models):
    m = models["panda"]
    qk, K = _path(m, 3, span=0.9)
    seed = m.neutral_q()
    kw = dict(tip=TIP, seed=seed, config=IKConfig(num_seeds=8, rng_seed=5, solve_mode="speed"))
    par = trajectory_seed(m, K, [0, 20, 40], mode="parallel", **kw)
    seq = trajectory_seed(m, K, [0, 20, 40], mode="sequential", **kw)
    assert par.success.all() and seq.success.all()
    _check_fk(m, par)
    _check_fk(m, seq)
    assert seq.max_joint_jump <= par.max_joint_jump + 1e-9
    # a smooth Cartesian path sampled at 41 nodes: neighbouring solutions stay close
    assert seq.max_joint_jump < 0.2


def test_unreachable_nodes_flagged(models):
    m = models["panda"]
    qk, K = _path(m, 2)
    K = K.copy()
    K[1, :3, 3] = [3.0, 0.0, 0.5]  # 3 m away: out of reach
    res = trajectory_seed(m, K, [0, 3], tip=TIP, config=IKConfig(max_iterations=30))
    assert res.success[0] and not res.success[3]
    assert res.status[3] == Status.NOT_CONVERGED
    assert "no solution" in res.messages[3]
    assert 3 in res.failed_nodes


def test_progress_and_cancel(models):
    m = models["panda"]
    _, K = _path(m)
    calls = []
    res = trajectory_seed(m, K, [0, 3, 6, 9], tip=TIP, mode="sequential",
                          progress=lambda d, n, f: calls.append((d, n, f)),
                          should_stop=lambda: len(calls) >= 3)
    assert calls[:3] == [(1, 10, 0), (2, 10, 0), (3, 10, 0)]
    assert res.cancelled
    assert np.all(res.status[3:] == Status.PREEMPTED)
    assert res.success[:3].all() and not res.success[3:].any()


def test_timeout_bounds_the_whole_path(models):
    m = models["panda"]
    _, K = _path(m)
    res = trajectory_seed(m, K, [0, 100, 200, 300], tip=TIP, mode="sequential",
                          config=IKConfig(timeout=0.0))
    assert not res.cancelled
    assert np.all(res.status[~res.success] == Status.TIMED_OUT)
    assert not res.success.all()


@pytest.mark.parametrize("kf, nodes, kw, exc, text", [
    ("ok", [1, 4], {}, InvalidInputError, "start at 0"),
    ("ok", [0, 0], {}, InvalidInputError, "strictly increasing"),
    ("ok", [0], {}, ShapeError, "one entry per keyframe"),
    ("ok", [0, 4], {"mode": "zigzag"}, InvalidInputError, "unknown trajectory mode"),
    ("ok", [0, 4], {"tip": "nope"}, UnknownLinkError, "nope"),
    ("ok", [0, 4], {"seed": np.zeros(3)}, ShapeError, "seed must have shape"),
    ("nan", [0, 4], {}, InvalidInputError, "NaN"),
    ("quat", [0, 4], {}, InvalidInputError, "unit quaternion"),
    ("shape", [0, 4], {}, ShapeError, "keyframes must have shape"),
])
def test_bad_input(models, kf, nodes, kw, exc, text):
    m = models["panda"]
    _, K = _path(m, 2)
    pq = pose_to_pq(K)
    if kf == "nan":
        pq[1, 0] = np.nan
    elif kf == "quat":
        pq[1, 3:] *= 2
    elif kf == "shape":
        pq = pq[:, :5]
    with pytest.raises(exc, match=text):
        trajectory_seed(m, pq, nodes, **{"tip": TIP, **kw})
