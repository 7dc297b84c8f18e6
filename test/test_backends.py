"""The backends against the reference: the host backend (the one compiled source built for this
CPU) against the readable reference, problem by problem; where each applies (the prepared
solver's choice); the prepared one-goal ChainSolver."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BACKEND, ENDLESS
from term_kernels import driver_answers

from ros2_ik.errors import InputTypeError, ShapeError
from ros2_ik.kinematics import fk_frames, pose_error
from ros2_ik.api import ChainSolver, solve_ik, solve_pose
from ros2_ik.ik import IKConfig, PoseObjective, PositionObjective, PostureObjective, Status
from ros2_ik.api import IKSolver
from ros2_ik.backends import host

pytestmark = pytest.mark.skipif(host.available() is None, reason="no C++ compiler (g++) here")

CASES = [("panda", ["panda_link8"]), ("ur", ["tool0"]), ("dual_arm", ["left_tool", "right_tool"])]


def _targets(m, tips, n, seed):
    q = m.random_q(np.random.default_rng(seed), n)
    T = fk_frames(m, q, tips)
    return T if len(tips) > 1 else T[:, 0]


def _objectives(m, tips, T):
    T = T if len(tips) > 1 else T[:, None]
    return [PoseObjective(m, tip, T[:, k]) for k, tip in enumerate(tips)]


@pytest.mark.parametrize("name, tips", CASES)
def test_the_host_backend_covers_chains_of_1dof_joints(models, name, tips):
    m = models[name]
    s = IKSolver(m, tips, IKConfig())
    assert s.backend == "host" and s.reason == ""
    assert IKSolver(m, tips, IKConfig(), solver="ccd+dls").backend == (
        "host" if len(tips) == 1 else "reference")


def test_the_reference_answers_what_the_compiled_source_does_not_cover(models):
    from ros2_ik.errors import BackendUnavailableError

    m = models["misc"]  # floating and planar joints on the way to the tool
    s = IKSolver(m, ["tool"], IKConfig())
    assert s.backend == "reference" and "not revolute" in s.reason
    with pytest.raises(BackendUnavailableError, match="backend 'host' cannot solve"):
        IKSolver(m, ["tool"], IKConfig(), backend="host")
    p = models["panda"]
    s = IKSolver(p, ["panda_link8"], IKConfig(solve_mode="manipulability"))
    assert s.backend == "reference" and "manipulability" in s.reason
    assert IKSolver(p, ["panda_link8"], IKConfig(), backend="reference").backend == "reference"
    with pytest.raises(Exception, match="CuPy"):  # NumPy inputs: no GPU backend
        IKSolver(p, ["panda_link8"], IKConfig(), backend="cuda")
    # a regularizer: the reference (objectives the compiled source does not have)
    Tp = _targets(p, ["panda_link8"], 2, 0)
    r = solve_pose(p, Tp, tips="panda_link8", regularizers=[PostureObjective(p)])
    assert len(r) == 2 and np.all(np.isfinite(r.q))


@pytest.mark.parametrize("name, tips", CASES)
def test_fast_equals_reference(models, name, tips):
    """Same algorithm: with one seed the same problems converge to the same q, with the same
    status and the same iteration count (same damping and acceptance), problem by problem.
    Classic LM (no non-monotone phase, whose rows amplify roundings: the next test). q differs
    only by rounding (a Cholesky against LAPACK's solve, and the kernels' own sine and cosine,
    an ulp from NumPy's). A failing row stops when a step is rejected at
    lambda_max; near such a stationary point a cost can tie or not by a rounding, so there the
    two may stop some iterations apart, or one at the cap."""
    m = models[name]
    T = _targets(m, tips, 40, 3)
    cap = 60
    res = {f: solve_pose(m, T, tips=tips, config=IKConfig(max_iterations=cap,
                                                          nonmonotone_iterations=0),
                         backend=BACKEND[f])
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
@pytest.mark.parametrize("collisions", [False, True])
def test_speed_mode_picks_the_first_converged_seed_on_every_backend(models, name, tips,
                                                                    collisions):
    """One selection rule: in speed mode the answer is the first seed in seed order that
    converges (what the compiled rows give, running a problem's seeds one after the other), on
    the reference too (once it took the seed with the fewest iterations, running them side by
    side: 28 of 40 goals got another answer, up to 5.6 rad apart). Many seeds, goals from the
    mid-range seed, so that several converge; classic LM (rows that follow the same path)."""
    m = models[name]
    T = _targets(m, tips, 40, 8)
    cfg = IKConfig(num_seeds=16, max_iterations=60, nonmonotone_iterations=0,
                   avoid_collisions=collisions)
    world = None
    if collisions:
        from ros2_ik.world import Obstacle, World

        world = World().add(Obstacle.make("floor", "halfspace", pose=[0, 0, -0.3, 0, 0, 0, 1]))
    a, b = (IKSolver(m, tips, cfg, backend=BACKEND[f]).solve(T, world=world)
            for f in (True, False))
    assert np.mean(a.status == b.status) >= 0.9, (a.status, b.status)
    both = a.success & b.success
    assert np.any(a.seed_index[both] > 0)  # (not every answer from the first seed)
    np.testing.assert_array_equal(a.seed_index[both], b.seed_index[both])
    np.testing.assert_allclose(a.q[both], b.q[both], atol=1e-6)


@pytest.mark.parametrize("name, tips", CASES)
def test_fast_and_reference_agree_with_the_nonmonotone_phase(models, name, tips):
    """The defaults (a non-monotone phase): a step that raises the cost is taken and the next
    one starts from there, so on a hard problem a rounding (the compiled rows against NumPy's)
    can send the two on different paths. Most problems still end the same, status and
    iteration count, and the share solved is the same; every success is verified by FK."""
    m = models[name]
    T = _targets(m, tips, 120, 3)
    a, b = (solve_pose(m, T, tips=tips, config=IKConfig(max_iterations=60), backend=BACKEND[f])
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
    with one seed than classic LM."""
    m = models["panda"]
    tip = m.tips[0]
    rng = np.random.default_rng(11)
    T = fk_frames(m, m.random_q(rng, 150), [tip])[:, 0]
    S = m.random_q(rng, 150)
    rate = {}
    for nm in (0, 50):
        for f in (False, True):
            r = solve_pose(m, T, tips=tip, seeds=S, config=IKConfig(nonmonotone_iterations=nm),
                           backend=BACKEND[f])
            rate[nm, f] = np.mean(r.success)
        cs = ChainSolver(m, tip, IKConfig(nonmonotone_iterations=nm))
        rate[nm, "chain"] = np.mean([cs.solve(T[i], seed=S[i]).success[0] for i in range(150)])
    for way in (False, True, "chain"):
        assert rate[50, way] >= rate[0, way] + 0.08, rate


def test_fast_frozen_and_mimic(models):
    """Frozen joints are untouched and mimic joints follow their leader on the host backend."""
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
    assert IKSolver(m, ["t"], IKConfig()).backend == "host"
    a = solve_ik(m, objs, config=IKConfig(num_seeds=8))
    b = solve_ik(m, objs, config=IKConfig(num_seeds=8), backend="reference")
    assert a.success_rate >= 0.9 and b.success_rate >= 0.9
    dp, _ = pose_error(T, fk_frames(m, a.q, ["t"])[:, 0])
    assert np.all(dp[a.success] <= 1e-4)
    locked = m.lock(["j1"])  # lock() takes joint names; each problem's seed holds the value
    assert locked.frozen == {"j1"} and not m.frozen
    seeds = np.tile(locked.neutral_q(), (30, 1))
    seeds[:, locked.q_names.index("j1")] = 0.3
    objs = [PoseObjective(locked, "t", T, w)]
    assert IKSolver(locked, ["t"], IKConfig()).backend == "host"
    r = solve_ik(locked, objs, seeds=seeds, config=IKConfig(num_seeds=4))
    assert np.all(r.q[:, locked.q_names.index("j1")] == 0.3)


def test_fast_position_only_and_weights(models):
    m = models["panda"]
    tip = "panda_link8"
    T = _targets(m, [tip], 20, 8)
    T2 = T.copy()
    T2[:, :3, :3] = np.eye(3)  # orientation ignored by a position objective
    r = solve_ik(m, [PositionObjective(m, tip, T2[:, :3, 3])], config=IKConfig(num_seeds=4))
    assert IKSolver(m, [tip], IKConfig()).backend == "host"
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
    cfg = IKConfig(nonmonotone_iterations=0)  # classic LM: the same arithmetic, the same rows
    cs = ChainSolver(m, "panda_link8", cfg)
    ref = solve_pose(m, T, tips="panda_link8", backend="reference", config=cfg)
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
    # read-only inputs (message buffers) are taken as they are
    T_ro, seed_ro = T.copy(), seed.copy()
    T_ro.setflags(write=False)
    seed_ro.setflags(write=False)
    r = cs.solve(T_ro, seed=seed_ro)
    np.testing.assert_array_equal(r.q, ref.q)
    r = cs.solve(np.frombuffer(pose_to_pq(T).tobytes()), seed=np.frombuffer(seed.tobytes()))
    assert r.success[0] and np.abs(r.q - ref.q).max() < 1e-6
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


@pytest.mark.parametrize("name, tip, weights", [("panda", "panda_link8", (1, 1, 1, 1, 1, 1)),
                                                ("ur", "tool0", (1, 1, 1, 1, 1, 0)),
                                                ("dual_arm", "left_tool", (1, 1, 1, 1, 1, 1))])
def test_solve_pose_one_goal_equals_the_batch_path(models, name, tip, weights):
    """One goal per call (rows one at a time) gives exactly the rows of one batch call (rows
    side by side in vector lanes): q, status, errors, iterations, winning seed and message,
    also for an invalid goal, an invalid seed and the (7,) target form; and so does the
    prepared ChainSolver."""
    m = models[name]
    n = 10
    T = _targets(m, [tip], n, 21)
    T[3, 0, 0] = np.nan                                     # invalid goal
    seeds = m.random_q(np.random.default_rng(5), n)
    seeds[4, 0] = m.upper[0] + 1.0                          # invalid seed
    seeds[5, 0] = m.upper[0] + 1e-7                         # clipped back
    cfg = IKConfig(num_seeds=6, stall_iterations=3, max_iterations=40)
    batch = solve_pose(m, T, tips=tip, seeds=seeds, config=cfg, weights=weights)
    cs = ChainSolver(m, tip, cfg, weights=weights)
    for i in range(n):
        target = T[i:i + 1] if i != 7 else np.concatenate(
            [T[i, :3, 3], _quat(T[i, :3, :3])])[None]       # (1, 7)
        if i == 8:
            target = T[i]                                   # one goal (4, 4), no batch axis
        one = solve_pose(m, target, tips=tip, seeds=seeds[i], config=cfg, weights=weights)
        chain = cs.solve(target[0] if i != 8 else target, seed=seeds[i])
        for r in (one, chain):
            for f in ("success", "status", "iterations", "seed_index"):
                assert getattr(r, f)[0] == getattr(batch, f)[i], (i, f)
            assert r.messages[0] == batch.messages[i]
            tol = 1e-9 if i == 7 else 0.0  # the quaternion form rounds
            np.testing.assert_allclose(r.q[0], batch.q[i], rtol=0, atol=tol)
            np.testing.assert_allclose(r.position_error, batch.position_error[i:i + 1],
                                       atol=tol, equal_nan=True)
            np.testing.assert_allclose(r.orientation_error, batch.orientation_error[i:i + 1],
                                       atol=tol, equal_nan=True)
    assert batch.status[3] == Status.INVALID_INPUT and batch.status[4] == Status.INVALID_INPUT
    assert batch.success.sum() >= 6


def _quat(R):
    from ros2_ik.kinematics import matrix_to_quat

    return matrix_to_quat(R)


def test_solve_pose_one_goal_timeout_cancel_and_checks(models):
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
    with pytest.raises(ShapeError, match=r"weights must have 6 entries"):
        solve_pose(m, far, tips=tip, weights=(1, 1, 1))
    with pytest.raises(ShapeError, match=r"seeds must have shape \(7,\) or \(1, 7\)"):
        solve_pose(m, far, tips=tip, seeds=np.zeros(3))
    with pytest.raises(InputTypeError, match="should_stop must be a callable"):
        solve_pose(m, far, tips=tip, should_stop=5)


def test_continuous_joints_come_back_near_the_problems_seed():
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


def test_a_far_goal_stops_where_its_step_would_repeat():
    """An unreachable goal: the LM reaches the stretched arm, its steps are rejected until lambda
    is at lambda_max, and then the next step would be the same rejected step again, for ever:
    the row stops there, long before max_iterations, on every path alike (the reference, the
    host backend one row at a time and rows side by side). With lambda_up=1
    lambda never changes, so a row stops at its first rejected step; with lambda growing without
    end it runs to the cap."""
    from ros2_ik import load_robot

    m = load_robot("panda")
    far = np.eye(4)[None].copy()
    far[0, :3, 3] = (5.0, 0.0, 0.3)
    cfg = IKConfig(max_iterations=100_000)
    one = solve_pose(m, far, tips="panda_link8", config=cfg)
    ref = solve_pose(m, far, tips="panda_link8", config=IKConfig(max_iterations=100_000),
                     backend="reference")
    for r in (one, ref):
        assert r.status[0] == Status.NOT_CONVERGED and 10 < r.iterations[0] < 1000
    np.testing.assert_allclose(one.q, ref.q, atol=1e-6)
    assert abs(int(one.iterations[0]) - int(ref.iterations[0])) <= 12  # rounding at the end
    rows = solve_pose(m, np.repeat(far, 64, axis=0), tips="panda_link8", config=cfg)
    assert np.all(rows.iterations == one.iterations[0])
    np.testing.assert_array_equal(rows.q, np.repeat(one.q, 64, axis=0))
    flat = solve_pose(m, far, tips="panda_link8",
                      config=IKConfig(max_iterations=100_000, lambda_up=1.0))
    assert flat.iterations[0] < one.iterations[0]
    capped = solve_pose(m, far, tips="panda_link8",
                        config=IKConfig(max_iterations=3000, **ENDLESS))
    assert capped.iterations[0] == 3000


# ---------------------------------------------------------------- one source, its renderings

@pytest.mark.parametrize("name, tips", CASES)
def test_the_scalar_and_vector_renderings_give_the_same_rows_bit_for_bit(models, name, tips):
    """The LM rows are emitted once for both dialects: one row at a time, and 4 rows side by
    side in AVX2 lanes (where the CPU has it) give the same answers to the last bit, for every
    problem: q, status, errors, iterations, winning seed (restarts, the non-monotone phase and
    the limit excursion all on)."""
    m = models[name]
    P = 200
    rng = np.random.default_rng(8)
    T = np.ascontiguousarray(fk_frames(m, m.random_q(rng, P), tips))
    seeds = m.random_q(rng, P)
    cfg = IKConfig(num_seeds=4, stall_iterations=5)
    data = {"pose_target": T, "pose_weight": np.ones((len(tips), 6))}
    one = driver_answers(m, tips, [], data, seeds, cfg, lanes=False)
    lanes = driver_answers(m, tips, [], data, seeds, cfg)
    assert (one[:, m.nq] == Status.CONVERGED).mean() > 0.8
    np.testing.assert_array_equal(one, lanes)
    # and the prepared solver (slices on threads, lanes where 4 problems or more) the same
    r = IKSolver(m, tips, cfg).solve(T, seeds=seeds)
    np.testing.assert_array_equal(r.q, one[:, :m.nq])
    np.testing.assert_array_equal(r.iterations, one[:, m.nq + 3].astype(np.int64))


def test_the_kernel_interface_is_generated_from_the_spec(models):
    """Options reach the kernels by name, from IKConfig's fields; status codes and solve modes
    are the spec's; nothing is read by position."""
    import dataclasses

    from ros2_ik.backends import codegen, interface
    from ros2_ik.ik import SolveMode

    numeric = [f.name for f in dataclasses.fields(IKConfig) if f.name != "timeout"]
    assert [n for n, _ in interface.OPTION_FIELDS] == numeric
    rec = interface.options_record(IKConfig(lambda_up=2.5, solve_mode="distance"))
    assert rec["lambda_up"][0] == 2.5
    assert rec["solve_mode"][0] == list(SolveMode).index(SolveMode.DISTANCE)
    m = models["panda"]
    src = codegen.solve_source(codegen.chain_of(m, ["panda_link8"]), "float64", host=True)
    for s in Status:
        assert f"#define R2IK_STATUS_{s.name} {int(s.value)}" in src
    for name in ("position_tolerance", "lambda_initial", "lambda_up", "lambda_down",
                 "stall_ratio", "stall_iterations", "nonmonotone_iterations",
                 "excursion_iterations", "excursion_stall", "max_iterations", "solve_mode"):
        assert f"opt->{name}" in src, name
    assert "fp[" not in src  # no positional options array


def test_a_machine_without_a_compiler_gets_the_reference_with_the_same_contract(
        models, monkeypatch, tmp_path):
    """No C++ compiler and nothing built yet: every prepared solver answers with the
    reference, says why, and the answers are FK-verified as always."""
    from ros2_ik.api import compiled_status
    from ros2_ik.model import load_robot

    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("ROS2_IK_KERNEL_CACHE", str(tmp_path / "cache"))
    from ros2_ik.backends import build

    monkeypatch.setattr(build, "_loaded", {})
    m = load_robot("ur")  # a fresh model: no solver kept with it yet
    s = IKSolver(m, ["tool0"], IKConfig(num_seeds=4))
    assert s.backend == "reference" and "no C++ compiler" in s.reason
    assert "no C++ compiler" in compiled_status()
    T = _targets(m, ["tool0"], 20, 4)
    r = solve_pose(m, T, tips="tool0", config=IKConfig(num_seeds=4))
    assert r.success.mean() > 0.9
    pe, re = pose_error(T, fk_frames(m, r.q, ["tool0"])[:, 0])
    assert np.all(pe[r.success] <= 1e-4) and np.all(re[r.success] <= 1e-3)


def test_the_same_request_gives_the_same_answer_in_a_fresh_process(models):
    """Warm or cold, the answer is the same: a fresh interpreter (which builds nothing: the
    kernels are in the cache) solves the same batch, one goal and a timed batch exactly as
    this process does."""
    import subprocess
    import sys

    m = models["panda"]
    T = _targets(m, ["panda_link8"], 30, 17)
    cfg = IKConfig(num_seeds=8, stall_iterations=5, timeout=30.0)
    here = solve_pose(m, T, tips="panda_link8", config=cfg)
    one = solve_pose(m, T[:1], tips="panda_link8", config=cfg)
    code = (
        "import numpy as np, sys\n"
        "from ros2_ik import load_robot, solve_pose, IKConfig\n"
        "m = load_robot('panda')\n"
        "T = np.frombuffer(sys.stdin.buffer.read()).reshape(-1, 4, 4)\n"
        "cfg = IKConfig(num_seeds=8, stall_iterations=5, timeout=30.0)\n"
        "one = solve_pose(m, T[:1], tips='panda_link8', config=cfg)\n"
        "r = solve_pose(m, T, tips='panda_link8', config=cfg)\n"
        "sys.stdout.buffer.write(one.q.tobytes() + r.q.tobytes() + r.iterations.tobytes())\n")
    out = subprocess.run([sys.executable, "-c", code], input=T.tobytes(), capture_output=True,
                         timeout=120, check=True).stdout
    n = m.nq * 8
    assert out[:n] == one.q.tobytes()
    assert out[n:] == here.q.tobytes() + here.iterations.tobytes()


# ---------------------------------------------------------------- public FK and Jacobians

@pytest.mark.parametrize("name", ["panda", "ur", "dual_arm", "misc"])
@pytest.mark.parametrize("B", [1, 7, 40])
def test_public_fk_and_jacobian_equal_the_reference(models, name, B):
    """The public fk / fk_frames / jacobian (the frames kernels where they cover the frames,
    else the reference) against the reference kinematics, on every joint type."""
    from ros2_ik import api, kinematics

    m = models[name]
    q = m.random_q(np.random.default_rng(B), B)
    frames = list(m.tips)
    np.testing.assert_allclose(api.fk(m, q), kinematics.fk(m, q), atol=1e-12)
    np.testing.assert_allclose(api.fk_frames(m, q, frames), kinematics.fk_frames(m, q, frames),
                               atol=1e-12)
    for link in (frames[0], frames):
        np.testing.assert_allclose(api.jacobian(m, q, link), kinematics.jacobian(m, q, link),
                                   atol=1e-12)
    np.testing.assert_allclose(api.fk_frames(m, q[0], frames[:1]),
                               kinematics.fk_frames(m, q[0], frames[:1]), atol=1e-12)
    expected = "reference" if name == "misc" else "host"
    assert api.Kinematics(m, frames[-1:]).backend in (expected, "reference")
    if name == "panda":
        assert api.Kinematics(m, frames).backend == "host"


def test_small_calls_through_the_extension_equal_the_ctypes_path(models):
    """The small-call extension (ros2_ik.backends.pycall) answers the very bits of the ctypes
    call of the same kernel, for every input form it takes, and hands back the forms it does
    not take (non-contiguous, float32, too many rows) to the general path."""
    from ros2_ik import api
    from ros2_ik.backends import pycall
    from ros2_ik.model import MAX_VALUE

    if pycall.module() is None:
        pytest.skip("the small-call extension cannot be built here (no Python.h)")
    m = models["panda"]
    rng = np.random.default_rng(3)
    for frames in ("panda_link8", ["panda_link8"], ["panda_link3", "panda_link8"]):
        k = api.Kinematics(m, frames)
        assert k.backend == "host" and k._fk1 is not None
        for q in (m.random_q(rng, 1)[0], m.random_q(rng, 5), m.random_q(rng, 9)[::2],
                  m.random_q(rng, api.kinematics.SMALL_ROWS + 3)):
            qc = np.ascontiguousarray(q if q.ndim == 2 else q[None])
            want_T = k._host(qc, False, MAX_VALUE)
            want_J = k._host(qc, True, MAX_VALUE)
            if isinstance(frames, str):
                want_J = want_J[:, 0]
            assert k.fk(q).tobytes() == want_T.tobytes() and k.fk(q).shape == want_T.shape
            assert k.jacobian(q).tobytes() == want_J.tobytes()
            assert k.jacobian(q).shape == want_J.shape
        assert k._fk1(m.random_q(rng, 3)[::2], MAX_VALUE) is None  # not contiguous
        assert k._fk1(np.zeros((2, 7), np.float32), MAX_VALUE) is None
        assert k._fk1(np.zeros((2, 6)), MAX_VALUE) is None
        assert k._fk1(np.full((1, 7), np.nan), MAX_VALUE) is None  # the caller raises


@pytest.mark.parametrize("call", ["fk", "fk_frames", "jacobian"])
def test_public_kinematics_give_the_reference_errors(models, call):
    from ros2_ik import api, kinematics
    from ros2_ik.errors import IKError

    m = models["panda"]
    for bad in (np.full(7, np.nan), np.full(7, 1e7), np.zeros(5), np.zeros((0, 7)), "x"):
        args = {"fk": (), "fk_frames": (["panda_link8"],), "jacobian": ("panda_link8",)}[call]
        with pytest.raises(IKError) as ours:
            getattr(api, call)(m, bad, *args)
        with pytest.raises(IKError) as ref:
            getattr(kinematics, call)(m, bad, *args)
        assert type(ours.value) is type(ref.value) and str(ours.value) == str(ref.value)
    q = np.zeros(7, np.float32)  # float32 keeps its dtype (the reference's rule)
    assert api.fk_frames(m, q, ["panda_link8"]).dtype == np.float32


def test_a_model_without_joints_answers_fk_every_time():
    """Defect: fk_frames on a model with no movable joint answered once, then raised a bare
    ValueError once a compiled path was loaded; q of shape (0,) raised too."""
    from ros2_ik import Model, api

    m = Model.from_urdf('<robot name="r"><link name="a"/></robot>')
    for _ in range(3):
        for q in (np.zeros((1, 0)), np.zeros(0), np.zeros((5, 0))):
            T = api.fk_frames(m, q, ["a"])
            assert T.shape == (1 if q.ndim == 1 else q.shape[0], 1, 4, 4)
            np.testing.assert_array_equal(T[:, 0], np.broadcast_to(np.eye(4), T[:, 0].shape))
            assert api.fk(m, q).shape[1] == 1
            assert api.jacobian(m, q, "a").shape[-1] == 0
