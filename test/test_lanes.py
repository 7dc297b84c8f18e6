"""The host LM kernel that solves several rows side by side (ros2_ik/gpu/lanes.py) computes
every row exactly as the one-row-at-a-time kernel does, bit for bit: q, iterations, errors,
convergence and time-out flags, for every bundled robot (one and two tips, mimic and prismatic
joints, a locked joint), restarts with the stall rule, speed mode's shared done flag, inactive
problems, and a cancel or a deadline already past."""

from __future__ import annotations

import os
from dataclasses import replace
import time

import numpy as np
import pytest

from ros2_ik import Model, load_robot
from ros2_ik.gpu import codegen, hostrun
from ros2_ik.kinematics import fk_frames
from ros2_ik.solvers import IKConfig, cxx, fast
from ros2_ik.solvers.common import movable_coordinates, restart_seeds
from ros2_ik.solvers.fast import _fparams

ROBOTS_DIR = os.path.join(os.path.dirname(__file__), "..", "ros2_ik", "robots")
pytestmark = pytest.mark.skipif(hostrun.available() is None or not fast.available(),
                                reason="needs g++ and Numba")

CASES = {"panda": ["panda_hand_tcp"], "ur": ["tool0"], "dual_arm": ["left_tool", "right_tool"],
         "misc": None}


def _robot(name):
    if name == "misc":  # below its floating and planar joints: a prismatic lift, a continuous
        #                 joint, a general axis, and fingers (one a mimic) on two tips
        m = Model.from_file(os.path.join(ROBOTS_DIR, "misc.urdf"), base="base",
                            tips=["finger_left", "finger_right"])
        return m, ["finger_left", "finger_right"]
    return load_robot(name), CASES[name]


def _inputs(m, tips, P, K, seed=0):
    """Problems half reachable (FK of random q), half not; seeds, restart seeds, weights."""
    rng = np.random.default_rng(seed)
    T = np.array(fk_frames(m, m.random_q(rng, P), tips))          # (P, T, 4, 4)
    T[1::2, :, :3, 3] += rng.uniform(-0.6, 0.6, (len(T[1::2]), len(tips), 3))
    seeds_p = m.random_q(rng, P)
    movable = movable_coordinates(m, [int(m.link_index(t)) for t in tips])
    rnd = np.ascontiguousarray(restart_seeds(m, K, 0, movable)[0]) if K > 1 else \
        np.zeros((1, m.nq))
    W = np.ones((P, len(tips), 6))
    W[::3, :, 3:] = 0.0  # some problems position only (the weights' zero test)
    return np.ascontiguousarray(seeds_p), rnd, np.ascontiguousarray(T.reshape(P, -1)), W


def _rows(m, tips, lanes):
    ids = tuple(int(m.link_index(t)) for t in tips)
    return cxx.HostRows(m, ids, lanes=lanes)


def _run(rows, args, cfg, *, speed, deadline_ns=-1, stopped=False, active=None):
    seeds_p, rnd, T, W = args
    P = len(seeds_p)
    act = np.ones(P, np.uint8) if active is None else active.astype(np.uint8)
    stop = np.array([1 if stopped else 0], np.int64)
    return rows.solve(seeds_p, rnd, T, W, act, cfg.num_seeds, _fparams(cfg),
                      int(cfg.max_iterations), int(speed), deadline_ns, stop)


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)  # NaN-free; exact, bit for bit


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("K,speed,stall,eager", [(1, 1, 0, False), (6, 1, 5, False),
                                                 (3, 0, 0, False), (1, 1, 0, True),
                                                 (4, 0, 3, True)])
def test_lanes_rows_equal_the_one_row_kernel(name, K, speed, stall, eager):
    m, tips = _robot(name)
    one, four = _rows(m, tips, 0), _rows(m, tips, 4)
    if four.lanes == 0:
        pytest.skip("this CPU runs the rows one at a time (no AVX2)")
    assert one.lanes == 0 and four.lanes == 4
    P = 203  # not a multiple of the lanes
    args = _inputs(m, tips, P, K, seed=K)
    # eager: limit excursions start early and often (IKConfig), so the lanes' excursion steps
    # (start from the seed, the unclipped joints, the way back) are compared too
    exc = dict(excursion_iterations=4, excursion_stall=2) if eager else {}
    cfg = IKConfig(num_seeds=K, stall_iterations=stall, max_iterations=60, **exc)
    if eager and name in ("panda", "dual_arm"):  # joints of range under 2 pi: excursions ran
        off = _run(one, args, replace(cfg, excursion_iterations=0), speed=speed)
        on = _run(one, args, cfg, speed=speed)
        assert np.any(off[2] != on[2])
    active = np.arange(P) % 7 != 3
    a = _run(one, args, cfg, speed=speed, active=active)
    b = _run(four, args, cfg, speed=speed, active=active)
    conv = a[1].reshape(P, K)
    assert 0.1 < conv.any(axis=1).mean() < 0.95  # both outcomes are covered
    assert np.all(a[2].reshape(P, K)[~active] == 0)  # inactive problems: not iterated
    if speed and K > 1:  # speed mode: a problem's seeds after its first success are skipped
        assert np.any(conv[:, 0] & (a[2].reshape(P, K)[:, 1] == 0))
    _same(a, b)


def test_lanes_with_a_locked_joint_and_eight_lanes():
    m = load_robot("panda").lock(["panda_joint3"])
    tips = ["panda_hand_tcp"]
    args = _inputs(m, tips, 150, 4, seed=3)
    cfg = IKConfig(num_seeds=4, stall_iterations=5)
    one = _run(_rows(m, tips, 0), args, cfg, speed=1)
    eight = _rows(m, tips, 8)
    if eight.lanes == 0:
        pytest.skip("this CPU runs the rows one at a time (no AVX2)")
    _same(one, _run(eight, args, cfg, speed=1))


def test_lanes_cancel_and_deadline():
    m, tips = _robot("ur")
    one, four = _rows(m, tips, 0), _rows(m, tips, 4)
    args = _inputs(m, tips, 64, 2)
    cfg = IKConfig(num_seeds=2, max_iterations=1000)
    # cancelled before the start: every active row ends at iteration 0, not timed out
    a = _run(one, args, cfg, speed=1, stopped=True)
    b = _run(four, args, cfg, speed=1, stopped=True)
    _same(a, b)
    assert np.all(b[2] == 0) and not b[5].any()
    # a deadline already past: the rows end at their first check, timed out, as one-by-one
    past = time.monotonic_ns() - 1_000_000
    a = _run(one, args, cfg, speed=1, deadline_ns=past)
    b = _run(four, args, cfg, speed=1, deadline_ns=past)
    _same(a, b)
    assert np.array_equal(b[5], ~b[1]) and b[5].mean() > 0.9 and np.all(b[2] == 0)


def test_sources_without_lanes():
    """float32 sources, CUDA text and lanes=0 carry no lanes code; the CUDA text is the same
    whatever the host uses."""
    m, tips = _robot("panda")
    ch = codegen.chain_of(m, tips)
    assert "r2ik_lm_lanes" not in codegen.solve_source(ch, "float64")
    assert "r2ik_lm_lanes" not in codegen.solve_source(ch, "float32", host=True)
    assert "r2ik_lm_lanes" not in codegen.solve_source(ch, "float64", host=True, lanes=0)
    assert "r2ik_lm_lanes" in codegen.solve_source(ch, "float64", host=True)
