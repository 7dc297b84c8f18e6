"""The compiled (Numba) fast path against the NumPy reference, and the prepared ChainSolver."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ENDLESS

from ros2_ik.errors import InputTypeError, ShapeError
from ros2_ik.kinematics import fk_frames, pose_error
from ros2_ik.solvers import (ChainSolver, IKConfig, PoseObjective, PositionObjective,
                             PostureObjective, Status, solve_ik, solve_pose)
from ros2_ik.solvers import fast

pytestmark = pytest.mark.skipif(not fast.available(), reason="Numba is not importable")

CASES = [("panda", ["panda_link8"]), ("ur", ["tool0"]), ("dual_arm", ["left_tool", "right_tool"])]


def _targets(m, tips, n, seed):
    q = m.random_q(np.random.default_rng(seed), n)
    T = fk_frames(m, q, tips)
    return T if len(tips) > 1 else T[:, 0]


def _objectives(m, tips, T):
    T = T if len(tips) > 1 else T[:, None]
    return [PoseObjective(m, tip, T[:, k]) for k, tip in enumerate(tips)]


@pytest.mark.parametrize("name, tips", CASES)
def test_plan_covers_chains_of_1dof_joints(models, name, tips):
    m = models[name]
    T = _targets(m, tips, 3, 0)
    assert fast.plan(m, _objectives(m, tips, T), (), IKConfig(), "dls", np) is not None


def test_plan_declines_what_it_does_not_cover(models):
    m = models["misc"]  # floating and planar joints on the way to the tool
    T = _targets(m, ["tool"], 2, 0)
    assert fast.plan(m, _objectives(m, ["tool"], T), (), IKConfig(), "dls", np) is None
    p = models["panda"]
    Tp = _targets(p, ["panda_link8"], 2, 0)
    objs = _objectives(p, ["panda_link8"], Tp)
    assert fast.plan(p, objs, [PostureObjective(p)], IKConfig(), "dls", np) is None
    assert fast.plan(p, objs, (), IKConfig(use_fast_path=False), "dls", np) is None


@pytest.mark.parametrize("name, tips", CASES)
def test_fast_equals_reference(models, name, tips):
    """Same algorithm: with one seed the same problems converge to the same q, with the same
    status and the same iteration count (same damping and acceptance), problem by problem.
    Classic LM (no non-monotone phase, whose rows amplify roundings: the next test). Exact on
    these problems (and on seeds 3..7, 600 problems, when measured); q differs only by
    rounding (Numba's loops vs NumPy's, and the kernels' own sine and cosine, an ulp from
    NumPy's: at most ~1e-10 measured). A failing row stops when a step is rejected at
    lambda_max; near such a stationary point a cost can tie or not by a rounding, so there the
    two may stop some iterations apart, or one at the cap (10 measured on seeds 3..7)."""
    m = models[name]
    T = _targets(m, tips, 40, 3)
    cap = 60
    res = {f: solve_pose(m, T, tips=tips, config=IKConfig(use_fast_path=f, max_iterations=cap,
                                                          nonmonotone_iterations=0))
           for f in (True, False)}
    a, b = res[True], res[False]
    np.testing.assert_array_equal(a.success, b.success)
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_array_equal(a.iterations[a.success], b.iterations[b.success])
    failed = ~a.success
    assert np.abs(a.iterations - b.iterations)[failed].max(initial=0) <= 12  # 10 measured
    both = a.success & b.success
    assert both.sum() >= 0.2 * len(T)  # enough common successes to compare
    np.testing.assert_allclose(a.q[both], b.q[both], atol=1e-6)


@pytest.mark.parametrize("name, tips", CASES)
def test_fast_and_reference_agree_with_the_nonmonotone_phase(models, name, tips):
    """The defaults (a non-monotone phase): a step that raises the cost is taken and the next
    one starts from there, so on a hard problem a rounding (Numba's loops against NumPy's) can
    send the two on different paths. Most problems still end the same, status and iteration
    count (measured 0.90-0.99 on seeds 3..7), and the share solved is the same (within 0.05
    measured); every success is verified by FK in solve_pose."""
    m = models[name]
    T = _targets(m, tips, 120, 3)
    a, b = (solve_pose(m, T, tips=tips, config=IKConfig(use_fast_path=f, max_iterations=60))
            for f in (True, False))
    same = (a.status == b.status) & (a.iterations == b.iterations)
    assert np.mean(same) >= 0.85, np.mean(same)
    assert abs(np.mean(a.success) - np.mean(b.success)) <= 0.08
    for r in (a, b):
        pe, re = pose_error(T if len(tips) > 1 else T[:, None], fk_frames(m, r.q, tips))
        ok = (np.max(pe, axis=1) <= 1e-4) & (np.max(re, axis=1) <= 1e-3)
        np.testing.assert_array_equal(ok, r.success)


def test_nonmonotone_phase_raises_single_seed_success(models):
    """The non-monotone phase is what the defaults run, in the reference, the compiled batch
    rows and the prepared solver alike: from random seeds it solves more of the Panda's goals
    with one seed than classic LM (measured 0.70 -> 0.85 in all three)."""
    m = models["panda"]
    tip = m.tips[0]
    rng = np.random.default_rng(11)
    T = fk_frames(m, m.random_q(rng, 150), [tip])[:, 0]
    S = m.random_q(rng, 150)
    rate = {}
    for nm in (0, 50):
        for f in (False, True):
            r = solve_pose(m, T, tips=tip, seeds=S,
                           config=IKConfig(use_fast_path=f, nonmonotone_iterations=nm))
            rate[nm, f] = np.mean(r.success)
        cs = ChainSolver(m, tip, IKConfig(nonmonotone_iterations=nm))
        rate[nm, "chain"] = np.mean([cs.solve(T[i], seed=S[i]).success[0] for i in range(150)])
    for way in (False, True, "chain"):
        assert rate[50, way] >= rate[0, way] + 0.08, rate


@pytest.mark.parametrize("name, tips", CASES)
def test_fast_verification_is_fk(models, name, tips):
    """The compiled chain FK used to verify answers equals fk() on every robot."""
    m = models[name]
    T = _targets(m, tips, 30, 5)
    objs = _objectives(m, tips, T)
    plan = fast.plan(m, objs, (), IKConfig(), "dls", np)
    q = m.random_q(np.random.default_rng(9), 30)
    pe, re = plan.verify(q)
    Tq = fk_frames(m, q, tips)
    Tt = T if len(tips) > 1 else T[:, None]
    dp = np.max([pose_error(Tt[:, k], Tq[:, k])[0] for k in range(len(tips))], axis=0)
    dr = np.max([pose_error(Tt[:, k], Tq[:, k])[1] for k in range(len(tips))], axis=0)
    np.testing.assert_allclose(pe, dp, atol=1e-12)
    np.testing.assert_allclose(re, dr, atol=1e-9)


def test_fast_frozen_and_mimic(models):
    """Frozen joints are untouched and mimic joints follow their leader on the fast path."""
    urdf = """<robot name="mim">
      <link name="b"/><link name="l1"/><link name="l2"/><link name="l3"/><link name="t"/>
      <joint name="j1" type="revolute"><parent link="b"/><child link="l1"/><axis xyz="0 0 1"/>
        <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
        <origin xyz="0.4 0 0"/><axis xyz="0 1 0"/>
        <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <joint name="j3" type="revolute"><parent link="l2"/><child link="l3"/>
        <origin xyz="0.3 0 0"/><axis xyz="0 1 0"/><mimic joint="j2" multiplier="0.5"/>
        <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <joint name="j4" type="prismatic"><parent link="l3"/><child link="t"/>
        <origin xyz="0.2 0 0"/><axis xyz="1 0 0"/>
        <limit lower="0" upper="0.3" effort="1" velocity="1"/></joint>
    </robot>"""
    from ros2_ik.model import Model

    m = Model.from_urdf(urdf, tips=["t"])
    q = m.random_q(np.random.default_rng(2), 30)
    T = fk_frames(m, q, ["t"])[:, 0]
    w = (1, 1, 1, 0, 0, 0)
    objs = [PoseObjective(m, "t", T, w)]
    assert fast.plan(m, objs, (), IKConfig(), "dls", np) is not None
    a = solve_ik(m, objs, config=IKConfig(num_seeds=8))
    b = solve_ik(m, objs, config=IKConfig(num_seeds=8, use_fast_path=False))
    assert a.success_rate >= 0.9 and b.success_rate >= 0.9
    dp, _ = pose_error(T, fk_frames(m, a.q, ["t"])[:, 0])
    assert np.all(dp[a.success] <= 1e-4)
    locked = m.lock(["j1"])  # lock() takes joint names; each problem's seed holds the value
    assert locked.frozen == {"j1"} and not m.frozen
    seeds = np.tile(locked.neutral_q(), (30, 1))
    seeds[:, locked.q_names.index("j1")] = 0.3
    objs = [PoseObjective(locked, "t", T, w)]
    assert fast.plan(locked, objs, (), IKConfig(), "dls", np) is not None
    r = solve_ik(locked, objs, seeds=seeds, config=IKConfig(num_seeds=4))
    assert np.all(r.q[:, locked.q_names.index("j1")] == 0.3)


def test_fast_position_only_and_weights(models):
    m = models["panda"]
    tip = "panda_link8"
    T = _targets(m, [tip], 20, 8)
    T2 = T.copy()
    T2[:, :3, :3] = np.eye(3)  # orientation ignored by a position objective
    r = solve_ik(m, [PositionObjective(m, tip, T2[:, :3, 3])], config=IKConfig(num_seeds=4))
    assert fast.plan(m, [PositionObjective(m, tip, T2[:, :3, 3])], (), IKConfig(), "dls",
                     np) is not None
    dp, _ = pose_error(T2, fk_frames(m, r.q, [tip])[:, 0])
    assert r.success.all() and np.all(dp <= 1e-4)


@pytest.mark.parametrize("name, tip", [("panda", "panda_link8"), ("ur", "tool0")])
def test_chain_solver_round_trip(models, name, tip):
    m = models[name]
    T = _targets(m, [tip], 60, 11)
    cs = ChainSolver(m, tip, IKConfig(num_seeds=32, stall_iterations=5))
    assert cs.compiled
    ok = 0
    for i in range(len(T)):
        r = cs.solve(T[i])
        dp, dr = pose_error(T[i], fk_frames(m, r.q, [tip])[0, 0])
        assert (dp <= 1e-4 and dr <= 1e-3) == bool(r.success[0])
        assert np.all(r.q >= m.lower) and np.all(r.q <= m.upper)
        ok += bool(r.success[0])
    assert ok >= 58


def test_chain_solver_matches_solve_pose_single_seed(models):
    m = models["panda"]
    T = _targets(m, ["panda_link8"], 10, 12)
    cs = ChainSolver(m, "panda_link8")
    ref = solve_pose(m, T, tips="panda_link8", config=IKConfig(use_fast_path=False))
    for i in range(10):
        r = cs.solve(T[i])
        assert r.success[0] == ref.success[i]
        if r.success[0]:
            np.testing.assert_allclose(r.q[0], ref.q[i], atol=1e-6)


def test_chain_solver_bad_input_and_timeout(models):
    m = models["panda"]
    cs = ChainSolver(m, "panda_link8")
    T = np.eye(4)
    T[0, 0] = np.nan
    r = cs.solve(T)
    assert r.status[0] == Status.INVALID_INPUT and "NaN" in r.messages[0]
    T = np.eye(4)
    T[:3, :3] *= 2
    assert cs.solve(T).status[0] == Status.INVALID_INPUT
    seed = m.neutral_q()
    seed[0] = 10.0
    r = cs.solve(np.eye(4), seed=seed)
    assert r.status[0] == Status.INVALID_INPUT and "outside its limits" in r.messages[0]
    with pytest.raises(ShapeError, match=r"target must have shape \(4, 4\) or \(7,\)"):
        cs.solve(np.eye(3))
    far = np.eye(4)
    far[0, 3] = 5.0
    r = ChainSolver(m, "panda_link8", IKConfig(timeout=0.0, max_iterations=10**9)).solve(far)
    assert r.status[0] == Status.TIMED_OUT and "timed out" in r.messages[0]
    r = ChainSolver(m, "panda_link8", IKConfig(max_iterations=50)).solve(far)
    assert r.status[0] == Status.NOT_CONVERGED and r.position_error[0] > 1.0


def test_chain_solver_input_forms_give_one_answer(models):
    """The kernel checks the target and the seed itself; every form a caller may pass (views,
    other dtypes, lists, a (7,) pose) gives the same answer, and each bad value its message."""
    m = models["panda"]
    cs = ChainSolver(m, "panda_link8")
    q0 = m.random_q(np.random.default_rng(4), 1)[0]
    T = np.ascontiguousarray(fk_frames(m, q0[None], ["panda_link8"])[0, 0])
    seed = np.clip(q0 + 0.2, m.lower, m.upper)
    ref = cs.solve(T, seed=seed)
    assert ref.success[0] and ref.position_error[0] <= 1e-4
    big = np.zeros((4, 8))
    big[:, ::2] = T  # a strided view of the same values
    seeds2 = np.zeros((m.nq, 2))
    seeds2[:, 1] = seed
    for target, sd in ((big[:, ::2], seed), (T.tolist(), seed.tolist()), (T, seeds2[:, 1]),
                       (np.asfortranarray(T), seed)):
        r = cs.solve(target, seed=sd)
        np.testing.assert_array_equal(r.q, ref.q)
        assert r.iterations[0] == ref.iterations[0] and r.status[0] == ref.status[0]
    from ros2_ik.kinematics import pose_to_pq

    r7 = cs.solve(pose_to_pq(T), seed=seed)
    assert r7.success[0] and np.abs(r7.q - ref.q).max() < 1e-6
    # bad values, each named: a far translation, an inf seed, a NaN seed
    far = T.copy()
    far[1, 3] = 1e7
    r = cs.solve(far, seed=seed)
    assert r.status[0] == Status.INVALID_INPUT and "beyond" in r.messages[0]
    for bad in (np.inf, np.nan):
        s = seed.copy()
        s[2] = bad
        r = cs.solve(T, seed=s)
        assert r.status[0] == Status.INVALID_INPUT and "NaN or infinity" in r.messages[0]
        assert np.isnan(r.position_error[0]) and np.all(np.isfinite(r.q))
    with pytest.raises(ShapeError):
        cs.solve(T, seed=seed[:3])
    # read-only inputs (message buffers) are answered by the compiled kernel already loaded,
    # not by a new compilation of it for read-only arrays (seconds, inside a request)
    kernel = fast._get_kernels().solve_one
    n_sig = len(kernel.signatures)
    T_ro, seed_ro = T.copy(), seed.copy()
    T_ro.setflags(write=False)
    seed_ro.setflags(write=False)
    r = cs.solve(T_ro, seed=seed_ro)
    np.testing.assert_array_equal(r.q, ref.q)
    r = cs.solve(np.frombuffer(pose_to_pq(T).tobytes()), seed=np.frombuffer(seed.tobytes()))
    assert r.success[0] and np.abs(r.q - ref.q).max() < 1e-6
    assert len(kernel.signatures) == n_sig, kernel.signatures
    # the results are the caller's own arrays: one call's answer does not change the next's
    a, b = cs.solve(T, seed=seed), cs.solve(far, seed=seed)
    assert a.status[0] == Status.CONVERGED and b.status[0] == Status.INVALID_INPUT


def test_chain_solver_continuous_wrap():
    urdf = """<robot name="c">
      <link name="b"/><link name="l1"/><link name="t"/>
      <joint name="j1" type="continuous"><parent link="b"/><child link="l1"/>
        <axis xyz="0 0 1"/></joint>
      <joint name="jt" type="fixed"><parent link="l1"/><child link="t"/>
        <origin xyz="0.5 0 0"/></joint>
    </robot>"""
    from ros2_ik.model import Model

    m = Model.from_urdf(urdf, tips=["t"])
    T = fk_frames(m, np.array([[3.0]]), ["t"])[0, 0]
    r = ChainSolver(m, "t").solve(T, seed=np.array([-3.0 + 2 * np.pi * 2]))
    assert r.success[0]
    assert abs(r.q[0, 0] - (3.0 + 2 * np.pi)) < 1e-3  # the 2 pi branch nearest the seed


def test_cancel_before_start_and_small_solves_are_polled(models):
    m = models["panda"]
    T = _targets(m, ["panda_link8"], 3, 13)
    calls = []
    r = solve_pose(m, T, tips="panda_link8",
                   should_stop=lambda: calls.append(1) or True)  # cancelled from the start
    assert not r.success.any() and np.all(r.iterations == 0)
    calls.clear()
    r = solve_pose(m, T, tips="panda_link8", config=IKConfig(num_seeds=4),
                   should_stop=lambda: calls.append(1) or False)
    assert r.success.all() and len(calls) >= 1  # polled before the start, then while running


@pytest.fixture
def single_calls(monkeypatch):
    """Counts solve_pose's one-goal calls answered by the prepared path."""
    seen = []
    orig = fast.solve_single

    def spy(*args, **kw):
        r = orig(*args, **kw)
        if r is not None:
            seen.append(1)
        return r
    monkeypatch.setattr(fast, "solve_single", spy)
    return seen


@pytest.mark.parametrize("name, tip, weights", [("panda", "panda_link8", (1, 1, 1, 1, 1, 1)),
                                                ("ur", "tool0", (1, 1, 1, 1, 1, 0)),
                                                ("dual_arm", "left_tool", (1, 1, 1, 1, 1, 1))])
def test_solve_pose_one_goal_equals_the_batch_path(models, single_calls, name, tip, weights):
    """One goal per call (the prepared ChainSolver) gives exactly the rows of one batch call
    (the general path): q, status, errors, iterations, winning seed and message, also for an
    invalid goal, an invalid seed and the (7,) target form."""
    m = models[name]
    n = 10
    T = _targets(m, [tip], n, 21)
    T[3, 0, 0] = np.nan                                     # invalid goal
    seeds = m.random_q(np.random.default_rng(5), n)
    seeds[4, 0] = m.upper[0] + 1.0                          # invalid seed
    seeds[5, 0] = m.upper[0] + 1e-7                         # clipped back
    cfg = IKConfig(num_seeds=6, stall_iterations=3, max_iterations=40)
    batch = solve_pose(m, T, tips=tip, seeds=seeds, config=cfg, weights=weights)
    assert not single_calls
    for i in range(n):
        target = T[i:i + 1] if i != 7 else np.concatenate(
            [T[i, :3, 3], _quat(T[i, :3, :3])])[None]       # (1, 7)
        r = solve_pose(m, target, tips=tip, seeds=seeds[i], config=cfg, weights=weights)
        assert len(single_calls) == i + 1
        for f in ("success", "status", "iterations", "seed_index"):
            assert getattr(r, f)[0] == getattr(batch, f)[i], (i, f)
        assert r.messages[0] == batch.messages[i]
        tol = 1e-9 if i == 7 else 0.0  # the quaternion form rounds
        np.testing.assert_allclose(r.q[0], batch.q[i], rtol=0, atol=tol)
        np.testing.assert_allclose(r.position_error, batch.position_error[i:i + 1], atol=1e-12)
        np.testing.assert_allclose(r.orientation_error, batch.orientation_error[i:i + 1],
                                   atol=1e-12)
    assert batch.status[3] == Status.INVALID_INPUT and batch.status[4] == Status.INVALID_INPUT
    assert batch.success.sum() >= 6


def _quat(R):
    from ros2_ik.kinematics import matrix_to_quat

    return matrix_to_quat(R)


def test_solve_pose_one_goal_timeout_cancel_and_checks(models, single_calls):
    m = models["panda"]
    tip = "panda_link8"
    far = np.eye(4)[None].copy()
    far[0, 0, 3] = 5.0
    r = solve_pose(m, far, tips=tip, config=IKConfig(timeout=0.0, max_iterations=10**9))
    assert r.status[0] == Status.TIMED_OUT and r.messages[0].startswith("timed out")
    r = solve_pose(m, far, tips=tip, should_stop=lambda: True)
    assert r.status[0] == Status.PREEMPTED and r.messages[0].startswith("cancelled")
    assert r.iterations[0] == 0
    stop_after = iter([False] * 3 + [True] * 10**6)
    r = solve_pose(m, far, tips=tip, config=IKConfig(max_iterations=10**8, **ENDLESS),
                   should_stop=lambda: next(stop_after))
    assert r.status[0] == Status.PREEMPTED
    assert len(single_calls) == 3
    with pytest.raises(ShapeError, match=r"weights must have 6 entries"):
        solve_pose(m, far, tips=tip, weights=(1, 1, 1))
    with pytest.raises(ShapeError, match=r"seeds must have shape \(7,\) or \(1, 7\)"):
        solve_pose(m, far, tips=tip, seeds=np.zeros(3))
    with pytest.raises(InputTypeError, match="should_stop must be a callable"):
        solve_pose(m, far, tips=tip, should_stop=5)


def test_continuous_joints_come_back_near_the_problems_seed(single_calls):
    """A restart row that wins returns its continuous joints within pi of the problem's seed
    (not of the restart's random seed), on the batch path and the one-goal path alike."""
    from ros2_ik.model import Model

    urdf = """<robot name="c2">
      <link name="b"/><link name="l1"/><link name="l2"/><link name="t"/>
      <joint name="j1" type="continuous"><parent link="b"/><child link="l1"/>
        <axis xyz="0 0 1"/></joint>
      <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
        <origin xyz="0.5 0 0"/><axis xyz="0 0 1"/>
        <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
      <joint name="jt" type="fixed"><parent link="l2"/><child link="t"/>
        <origin xyz="0.4 0 0"/></joint>
    </robot>"""
    m = Model.from_urdf(urdf, tips=["t"])
    rng = np.random.default_rng(3)
    n = 40
    T = fk_frames(m, m.random_q(rng, n), ["t"])[:, 0]
    seeds = m.random_q(rng, n)
    seeds[:, 0] += 4 * np.pi * rng.choice([-1, 1], n)   # far from (-pi, pi]
    cfg = IKConfig(num_seeds=16, max_iterations=3)       # restarts win where the seed is slow
    batch = solve_pose(m, T, tips="t", seeds=seeds, config=cfg)
    assert np.any(batch.seed_index[batch.success] > 0)
    for r, s in [(batch, seeds)] + [
            (solve_pose(m, T[i:i + 1], tips="t", seeds=seeds[i], config=cfg), seeds[i:i + 1])
            for i in range(n)]:
        assert np.all(np.abs(r.q[:, 0] - s[:, 0]) <= np.pi + 1e-9)
    assert len(single_calls) == n


def test_a_far_goal_stops_where_its_step_would_repeat():
    """An unreachable goal: the LM reaches the stretched arm, its steps are rejected until lambda
    is at lambda_max, and then the next step would be the same rejected step again, for ever:
    the row stops there, long before max_iterations, on every path alike (the NumPy reference,
    the one-goal Numba kernel, the batch rows in Numba and in compiled C++). With lambda_up=1
    lambda never changes, so a row stops at its first rejected step; with lambda growing without
    end it runs to the cap."""
    from ros2_ik import load_robot
    from ros2_ik.solvers import cxx

    m = load_robot("panda")
    far = np.eye(4)[None].copy()
    far[0, :3, 3] = (5.0, 0.0, 0.3)
    cfg = IKConfig(max_iterations=100_000)
    one = solve_pose(m, far, tips="panda_link8", config=cfg)
    ref = solve_pose(m, far, tips="panda_link8", config=IKConfig(max_iterations=100_000,
                                                                   use_fast_path=False))
    for r in (one, ref):
        assert r.status[0] == Status.NOT_CONVERGED and 10 < r.iterations[0] < 1000
    np.testing.assert_allclose(one.q, ref.q, atol=1e-6)
    assert abs(int(one.iterations[0]) - int(ref.iterations[0])) <= 12  # rounding at the end
    rows = solve_pose(m, np.repeat(far, cxx.MIN_ROWS, axis=0), tips="panda_link8", config=cfg)
    assert np.all(rows.iterations == one.iterations[0])
    np.testing.assert_array_equal(rows.q, np.repeat(one.q, cxx.MIN_ROWS, axis=0))
    flat = solve_pose(m, far, tips="panda_link8",
                      config=IKConfig(max_iterations=100_000, lambda_up=1.0))
    assert flat.iterations[0] < one.iterations[0]
    capped = solve_pose(m, far, tips="panda_link8",
                        config=IKConfig(max_iterations=3000, **ENDLESS))
    assert capped.iterations[0] == 3000
