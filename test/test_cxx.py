"""The compiled CPU rows (solvers/cxx.py: the generated LM kernel built by g++) answer a large
batch exactly as the Numba kernel does: same q, iterations, errors and statuses; deadlines and
cancels are honoured there too; and everything it does not cover stays on the Numba kernel."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from conftest import ENDLESS
from scipy.spatial.transform import Rotation

from ros2_ik import load_robot
from ros2_ik.gpu import hostrun
from ros2_ik.kinematics import fk_frames
from ros2_ik.solvers import IKConfig, Status, cxx, fast, solve_pose

pytestmark = pytest.mark.skipif(hostrun.available() is None or not fast.available(),
                                reason="needs g++ and Numba")

CASES = {"panda": ["panda_hand_tcp"], "ur": ["tool0"],
         "dual_arm": ["left_tool", "right_tool"]}


def _goals(m, tips, n, seed=0):
    """Half reachable (FK of random q), half random poses around the base (mostly not)."""
    rng = np.random.default_rng(seed)
    T = np.asarray(fk_frames(m, m.random_q(rng, n), tips)).copy()   # (n, T, 4, 4)
    far = np.arange(n) % 2 == 1
    T[far, :, :3, :3] = Rotation.random(int(far.sum()) * len(tips), random_state=seed) \
        .as_matrix().reshape(-1, len(tips), 3, 3)
    T[far, :, :3, 3] = rng.uniform(-0.8, 0.8, (int(far.sum()), len(tips), 3))
    return T if len(tips) > 1 else T[:, 0]


class _Spy:
    def __init__(self, monkeypatch):
        self.calls = 0
        real = cxx.HostRows.solve

        def solve(obj, *a, **k):
            self.calls += 1
            return real(obj, *a, **k)
        monkeypatch.setattr(cxx.HostRows, "solve", solve)


def _solve(m, T, tips, cfg, mode, monkeypatch, **kw):
    monkeypatch.setenv("ROS2_IK_CXX", mode)
    return solve_pose(m, T, tips=tips if len(tips) > 1 else tips[0], config=cfg, **kw)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("K,speed,eager", [(1, "speed", False), (16, "speed", False),
                                           (4, "distance", False), (1, "speed", True)])
def test_compiled_rows_equal_the_numba_rows(name, K, speed, eager, monkeypatch):
    m, tips = load_robot(name), CASES[name]
    T = _goals(m, tips, max(cxx.MIN_ROWS // K, 1) + 37)
    # eager: limit excursions early and often (IKConfig), so their steps are compared too
    exc = dict(excursion_iterations=4, excursion_stall=2) if eager else {}
    cfg = IKConfig(num_seeds=K, stall_iterations=5 if K > 1 else 0, solve_mode=speed, **exc)
    spy = _Spy(monkeypatch)
    a = _solve(m, T, tips, cfg, "0", monkeypatch)
    assert spy.calls == 0
    b = _solve(m, T, tips, cfg, "wait", monkeypatch)
    assert spy.calls == 1, "the batch was not solved by the compiled rows"
    assert 0.2 < a.success.mean() < 0.9  # the comparison covers both outcomes
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_array_equal(a.iterations, b.iterations)
    np.testing.assert_array_equal(a.seed_index, b.seed_index)
    assert np.abs(a.q - b.q).max() <= 1e-12
    np.testing.assert_allclose(a.position_error, b.position_error, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.orientation_error, b.orientation_error, rtol=0, atol=1e-12)


def test_seeds_given_per_problem_and_locked_joints(monkeypatch):
    """Per-problem seeds and a locked joint (baked into the generated text) still agree."""
    m = load_robot("panda").lock(["panda_joint3"])
    tips = ["panda_hand_tcp"]
    T = _goals(m, tips, 600, seed=5)
    seeds = m.random_q(np.random.default_rng(9), 600)
    cfg = IKConfig(num_seeds=8, stall_iterations=5)
    spy = _Spy(monkeypatch)
    a = _solve(m, T, tips, cfg, "0", monkeypatch, seeds=seeds)
    b = _solve(m, T, tips, cfg, "wait", monkeypatch, seeds=seeds)
    assert spy.calls == 1
    np.testing.assert_array_equal(a.iterations, b.iterations)
    assert np.abs(a.q - b.q).max() <= 1e-12
    j = [i for i, lk in enumerate(m.q_joint) if m.joint_names[int(lk)] == "panda_joint3"][0]
    np.testing.assert_array_equal(b.q[:, j], seeds[:, j])  # frozen: each problem's own value


def test_deadline_and_cancel_are_honoured(monkeypatch):
    m = load_robot("ur")
    tip = "tool0"
    far = np.tile(np.eye(4), (4000, 1, 1))
    far[:, 0, 3] = 3.0  # unreachable, and lambda never tops out: every row runs until stopped
    cfg = IKConfig(num_seeds=4, max_iterations=10_000_000, **ENDLESS)
    monkeypatch.setenv("ROS2_IK_CXX", "wait")
    spy = _Spy(monkeypatch)
    solve_pose(m, far[:cxx.MIN_ROWS], tips=tip, config=IKConfig(num_seeds=1, max_iterations=3))
    assert spy.calls == 1  # built (no deadline in that call)
    t0 = time.perf_counter()
    r = solve_pose(m, far, tips=tip, config=IKConfig(num_seeds=4, max_iterations=10_000_000,
                                                     timeout=0.1, **ENDLESS))
    dt = time.perf_counter() - t0
    # the rows ran under the deadline: in one chunk of 4,096 rows, or in a second one too where
    # the first left time for it (each chunk stops early by its measured checking cost)
    assert spy.calls >= 2
    assert np.all(r.status == Status.TIMED_OUT) and dt < 5.0  # the deadline ended the rows
    calls = spy.calls
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    r = solve_pose(m, far, tips=tip, config=cfg, should_stop=stop.is_set)
    assert spy.calls == calls + 1  # no timeout: one call over every row
    assert np.all(r.status == Status.PREEMPTED)
    assert r.iterations.max() < 10_000_000  # the cancel ended the rows, not the cap


def test_what_the_compiled_rows_do_not_cover_stays_on_numba(monkeypatch):
    m = load_robot("panda")
    tips = ["panda_hand_tcp"]
    T = _goals(m, tips, 700)
    spy = _Spy(monkeypatch)
    # CCD then LM from where CCD stopped: the LM rows do not start from expand_seeds' rows
    _solve(m, T, tips, IKConfig(num_seeds=4), "wait", monkeypatch, solver="ccd+dls")
    assert spy.calls == 0
    # no C++ compiler: the Numba kernel, and the same answer
    monkeypatch.setattr(hostrun, "available", lambda: None)
    m2 = load_robot("panda")
    a = _solve(m2, T, tips, IKConfig(num_seeds=4), "wait", monkeypatch)
    assert spy.calls == 0 and cxx.rows_solver(m2, (int(m2.link_index(tips[0])),)) is None
    b = _solve(load_robot("panda"), T, tips, IKConfig(num_seeds=4), "0", monkeypatch)
    np.testing.assert_array_equal(a.q, b.q)


def test_background_build_then_the_compiled_rows(monkeypatch):
    monkeypatch.setenv("ROS2_IK_CXX", "background")
    m = load_robot("ur")
    tip = (int(m.link_index("tool0")),)
    assert cxx.rows_solver(m, tip) is None  # the build starts, the caller does not wait
    t0 = time.perf_counter()
    while cxx.rows_solver(m, tip) is None and time.perf_counter() - t0 < 120:
        time.sleep(0.05)
    assert isinstance(cxx.rows_solver(m, tip), cxx.HostRows)


def test_build_now_then_ready_without_waiting(monkeypatch):
    m = load_robot("panda")
    monkeypatch.setenv("ROS2_IK_CXX", "0")
    assert cxx.build(m, ["panda_link8"]) is False  # turned off: nothing built
    monkeypatch.setenv("ROS2_IK_CXX", "background")
    assert cxx.build(m, ["panda_link8"]) is True
    assert isinstance(cxx.rows_solver(m, (int(m.link_index("panda_link8")),)), cxx.HostRows)
    monkeypatch.setattr("ros2_ik.gpu.hostrun.available", lambda: None)
    assert cxx.build(load_robot("ur"), ["tool0"]) is False  # no compiler: the Numba kernel


def test_builds_per_process_are_capped(monkeypatch):
    """A process fed ever new robot variants (a node under a flood of robot descriptions) stops
    building after MAX_BUILDS; those are solved by the Numba kernel, while a robot built before
    is still served when it is loaded again (a new Model object)."""
    monkeypatch.setenv("ROS2_IK_CXX", "wait")
    assert cxx.build(load_robot("ur"), ["tool0"]) is True
    monkeypatch.setattr(cxx, "_sources", set(cxx._sources) | {f"x{i}" for i in
                                                               range(cxx.MAX_BUILDS)})
    assert cxx.build(load_robot("ur"), ["tool0"]) is True  # the same source: loaded again
    m = load_robot("ur").lock(["shoulder_pan_joint"])  # a variant never built here
    assert cxx.build(m, ["tool0"]) is False
    T = _goals(m, ["tool0"], cxx.MIN_ROWS + 5)
    spy = _Spy(monkeypatch)
    r = _solve(m, T, ["tool0"], IKConfig(), "wait", monkeypatch)
    assert spy.calls == 0 and r.success.any()
