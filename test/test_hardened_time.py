"""Hardened core (issue 11): timeouts and cancels are honoured at any size, a cancelled problem
is PREEMPTED (never "no solution"), and ChainSolver keeps solve_pose's contract for bad seeds.

Wall-clock bounds here are the timeout contract only, with generous slack for a shared machine
(the fuzz tier reports the measured overruns)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from conftest import BACKEND, ENDLESS

from ros2_ik import load_robot
from ros2_ik.kinematics import fk_frames
from ros2_ik.ik import IKConfig, Status
from ros2_ik.api import solve_pose, trajectory_seed
from ros2_ik.api import ChainSolver
from ros2_ik.errors import InvalidInputError

SLACK = 0.5  # [s] allowed overrun on this noisy shared machine (the goal is ~20 ms)


@pytest.fixture(scope="module")
def ur():
    m = load_robot("ur")
    solve_pose(m, _reachable(m, m.tips[0], 1))  # the compiled path's one-time load/compile
    return m


@pytest.fixture(scope="module")
def panda():
    m = load_robot("panda")
    solve_pose(m, _reachable(m, "panda_link8", 1), tips="panda_link8")  # one-time compile
    return m


def _reachable(m, tip, n, seed=3):
    q = m.random_q(np.random.default_rng(seed), n)
    return fk_frames(m, q, [tip])[:, 0]


def _verify(m, tip, r, T, tol=1e-4):
    """Every success re-checked by FK."""
    ok = np.nonzero(r.success)[0]
    if ok.size:
        got = fk_frames(m, r.q[ok], [tip])[:, 0]
        assert np.abs(got[:, :3, 3] - T[ok, :3, 3]).max() <= tol * 1.01


@pytest.mark.parametrize("fast", [True, False])
def test_large_batch_timeout_is_honoured_and_finished_problems_kept(ur, fast):
    tip = ur.tips[0]
    n = 200_000 if fast else 40_000
    T = np.broadcast_to(_reachable(ur, tip, 64), (n // 64, 64, 4, 4)).reshape(-1, 4, 4).copy()
    timeout = 0.2 if fast else 2.0  # the reference path: long enough to finish some chunks
    cfg = IKConfig(timeout=timeout, num_seeds=2)
    t0 = time.perf_counter()
    r = solve_pose(ur, T, tips=tip, config=cfg, backend=BACKEND[fast])
    dt = time.perf_counter() - t0
    assert dt <= timeout + SLACK, f"{n} problems, timeout {timeout} s: returned after {dt:.3f} s"
    assert len(r) == T.shape[0]
    st = r.status
    assert set(np.unique(st)) <= {Status.CONVERGED, Status.TIMED_OUT, Status.NOT_CONVERGED}
    assert np.all(r.success == (st == Status.CONVERGED))
    assert (st == Status.TIMED_OUT).any(), "the batch should not finish in time"
    assert r.success.any(), "the problems solved before the deadline are kept"
    _verify(ur, tip, r, T)
    unfinished = np.nonzero(st == Status.TIMED_OUT)[0]
    assert all("timed out" in r.messages[i] for i in unfinished[:100])


def test_many_seeds_reference_path_timeout(panda):
    tip = "panda_link8"
    far = np.tile(np.eye(4), (100, 1, 1))
    far[:, 0, 3] = 5.0  # unreachable: every seed runs until the deadline
    cfg = IKConfig(timeout=0.01, num_seeds=1000)
    t0 = time.perf_counter()
    r = solve_pose(panda, far, tips=tip, config=cfg, backend="reference")
    dt = time.perf_counter() - t0
    assert dt <= 0.01 + SLACK, f"returned after {dt:.3f} s"
    assert np.all(r.status == Status.TIMED_OUT)


def test_trajectory_timeout_many_nodes(panda):
    tip = "panda_link8"
    K = _reachable(panda, tip, 2)
    t0 = time.perf_counter()
    r = trajectory_seed(panda, K, [0, 199_999], tip=tip, config=IKConfig(timeout=0.3))
    dt = time.perf_counter() - t0
    assert dt <= 0.3 + SLACK, f"returned after {dt:.3f} s"
    assert (r.status == Status.TIMED_OUT).any() and r.success[0]
    # the targets of every node (built on first use) are the interpolated path's
    from ros2_ik.api import interpolate_keyframes

    np.testing.assert_array_equal(r.targets, interpolate_keyframes(K, [0, 199_999]))
    solved = np.nonzero(r.success)[0]
    np.testing.assert_allclose(fk_frames(panda, r.q[solved], [tip])[:, 0, :3, 3],
                               r.targets[solved, :3, 3], atol=1.01e-4)


def _cancel_after(delay):
    t_start = [None]

    def should_stop():
        if t_start[0] is None:
            t_start[0] = time.perf_counter()
        return time.perf_counter() - t_start[0] >= delay

    return should_stop


@pytest.mark.parametrize("fast", [True, False])
def test_cancel_is_seen_at_any_size_and_reported_preempted(panda, fast):
    far = np.eye(4)[None].copy()
    far[0, 0, 3] = 5.0  # one unreachable goal, a huge iteration budget
    cfg = IKConfig(max_iterations=100_000, **ENDLESS)
    t0 = time.perf_counter()
    r = solve_pose(panda, far, tips="panda_link8", config=cfg, should_stop=_cancel_after(0.005),
                   backend=BACKEND[fast])
    dt = time.perf_counter() - t0
    assert dt <= 0.005 + SLACK
    assert r.status[0] == Status.PREEMPTED and not r.success[0]
    assert r.messages[0].startswith("cancelled") and "no solution" not in r.messages[0]
    assert r.iterations[0] < 100_000


def test_cancel_from_another_thread_in_a_large_batch(ur):
    tip = ur.tips[0]
    T = np.tile(_reachable(ur, tip, 1), (100_000, 1, 1))
    T[:, 0, 3] += 3.0  # unreachable
    flag = threading.Event()
    threading.Timer(0.05, flag.set).start()
    t0 = time.perf_counter()
    r = solve_pose(ur, T, tips=tip, config=IKConfig(max_iterations=1000),
                   should_stop=flag.is_set)
    dt = time.perf_counter() - t0
    assert dt <= 0.05 + SLACK
    assert np.all(r.status == Status.PREEMPTED)


def test_chain_solver_invalid_seed_matches_solve_pose(panda):
    tip = "panda_link8"
    T = _reachable(panda, tip, 1)[0]
    seed = panda.neutral_q()
    seed[0] = 10.0  # outside the limits
    a = ChainSolver(panda, tip).solve(T, seed=seed)
    b = solve_pose(panda, T[None], tips=tip, seeds=seed[None])
    for r in (a, b):
        assert r.status[0] == Status.INVALID_INPUT and not r.success[0]
        assert np.isnan(r.position_error[0]) and r.iterations[0] == 0
        assert "outside its limits" in r.messages[0]
    np.testing.assert_allclose(a.q, b.q)


def test_memory_bounded_by_chunks_with_identical_results(panda, rng, monkeypatch):
    import importlib

    from ros2_ik.kinematics import jacobian

    fk_mod = importlib.import_module("ros2_ik.kinematics.fk")

    q = panda.random_q(rng, 1000)
    whole_T = fk_frames(panda, q, ["panda_link8", "panda_link3"])
    whole_J = jacobian(panda, q, "panda_link8")
    monkeypatch.setattr(fk_mod, "CHUNK_BYTES", 64 * 1024)  # force many chunks
    np.testing.assert_array_equal(fk_frames(panda, q, ["panda_link8", "panda_link3"]), whole_T)
    np.testing.assert_array_equal(jacobian(panda, q, "panda_link8"), whole_J)


def test_solve_chunks_give_the_same_results(panda, monkeypatch):
    from ros2_ik.backends import host
    from ros2_ik.ik import batch

    tip = "panda_link8"
    T = _reachable(panda, tip, 40)
    for fast in (True, False):
        cfg = IKConfig(num_seeds=3)
        whole = solve_pose(panda, T, tips=tip, config=cfg, backend=BACKEND[fast])
        with monkeypatch.context() as mp:
            mp.setattr(host, "MAX_SLICE_ROWS", 7)  # slices of 2 problems, on 2 threads
            mp.setattr(host, "SMALL", 1)
            mp.setattr(batch, "REFERENCE_CHUNK_ROWS", 7)
            parts = solve_pose(panda, T, tips=tip, config=cfg, backend=BACKEND[fast])
        np.testing.assert_array_equal(parts.q, whole.q)
        np.testing.assert_array_equal(parts.status, whole.status)
        assert whole.success.mean() > 0.5
        _verify(panda, tip, parts, T)


def test_over_budget_calls_are_refused_up_front_saying_how_to_split(panda):
    from ros2_ik.errors import InvalidInputError

    K = _reachable(panda, "panda_link8", 2)
    with pytest.raises(InvalidInputError, match="memory budget.*split the path into calls of"):
        trajectory_seed(panda, K, [0, 50_000_000 - 1], tip="panda_link8")
    far = np.eye(4)[None]
    with pytest.raises(InvalidInputError, match="memory budget.*fewer seeds"):
        solve_pose(panda, far, tips="panda_link8", config=IKConfig(num_seeds=100_000),
                   backend="reference")
    q = np.zeros((1, 7))
    with pytest.raises(InvalidInputError, match="memory budget.*split q"):
        fk_frames(panda, np.broadcast_to(q, (10_000_000, 7)), ["panda_link8"] * 1)
    from ros2_ik.kinematics import jacobians_all

    with pytest.raises(InvalidInputError, match="memory budget.*split q"):
        jacobians_all(panda, np.broadcast_to(q, (10_000_000, 7)))
    J, T = jacobians_all(panda, np.broadcast_to(q, (1000, 7)))  # within the budget: answered
    assert J.shape[0] == T.shape[0] == 1000


def test_a_timeout_shorter_than_writing_the_results_is_refused_at_once(ur, monkeypatch):
    """A batch whose result rows alone (measured per byte on this machine) would end the call
    more than 20 ms past its timeout is refused up front, saying what to do; with a timeout
    long enough, or none, the same batch is solved. The cost is set by hand here (this
    machine's real one depends on its load), so the test is exact."""
    from ros2_ik.errors import InvalidInputError
    from ros2_ik.ik import batch as api

    tip = ur.tips[0]
    T = np.broadcast_to(_reachable(ur, tip, 64), (20_000 // 64, 64, 4, 4)).reshape(-1, 4, 4)
    cost = api.ResultCost()
    cost.FIRST_GUESS = 5e-7  # [s/byte]: about 1 s for these 20,000 rows
    monkeypatch.setattr(api, "RESULT_COST", cost)
    monkeypatch.setattr("ros2_ik.api.solver.RESULT_COST", cost)
    t0 = time.perf_counter()
    with pytest.raises(InvalidInputError, match="timeout is too short for 19968 problems") as e:
        solve_pose(ur, T, tips=tip, config=IKConfig(timeout=0.05, num_seeds=2))
    assert time.perf_counter() - t0 < 0.05 + SLACK
    assert "split the batch" in str(e.value) and "give a timeout of at least" in str(e.value)
    r = solve_pose(ur, T[:2000], tips=tip, config=IKConfig(num_seeds=2))  # no timeout: solved
    assert r.success.mean() > 0.9
    _verify(ur, tip, r, T[:2000])
    # what a batch measured is learnt for its size: half way to the measured cost
    cost.record(20_000, ur.nq, 0.0)
    assert cost.estimate(20_000, ur.nq) == pytest.approx(0.5 * 5e-7 * cost.nbytes(20_000, ur.nq))
    cost.record(5_000, ur.nq, 0.0)  # fewer than MIN_ROWS problems: not learnt
    assert cost.estimate(5_000, ur.nq) == pytest.approx(5e-7 * cost.nbytes(5_000, ur.nq))


@pytest.mark.parametrize("backend", ["host", "reference"])
@pytest.mark.parametrize("P", [3, 20_000])
def test_a_call_whose_time_went_before_it_began_answers_timed_out(ur, monkeypatch, backend, P):
    """A call whose start_time lies a timeout in the past (a request that waited in the node's
    queue): its problems are TIMED_OUT, not started, on every path and at any size, never
    refused as a bad request (the reference refused a small batch so: "the timeout is too
    short ... 0 ms are left", which MoveIt saw as FAILURE). A timeout too short for the batch's
    results in itself is still refused (the test above)."""
    from ros2_ik.ik import batch as api

    tip = ur.tips[0]
    T = np.broadcast_to(_reachable(ur, tip, 3), (-(-P // 3), 3, 4, 4)).reshape(-1, 4, 4)[:P]
    cost = api.ResultCost()
    cost.FIRST_GUESS = 1e-9  # (the writing of 20,000 rows fits 50 ms many times)
    monkeypatch.setattr(api, "RESULT_COST", cost)
    monkeypatch.setattr("ros2_ik.api.solver.RESULT_COST", cost)
    r = solve_pose(ur, T, tips=tip, config=IKConfig(timeout=0.05, num_seeds=2),
                   backend=backend, start_time=time.perf_counter() - 1.0)
    assert np.all(np.asarray(r.status) == Status.TIMED_OUT), np.unique(r.status)
    assert not r.success.any()


def test_a_trajectory_too_long_for_its_timeout_is_refused_at_once(panda, monkeypatch):
    """The same rule for a trajectory's nodes (one result row each)."""
    from ros2_ik.errors import InvalidInputError
    from ros2_ik.ik import batch as api

    cost = api.ResultCost()
    cost.FIRST_GUESS = 5e-7
    monkeypatch.setattr(api, "RESULT_COST", cost)
    monkeypatch.setattr("ros2_ik.api.trajectory.RESULT_COST", cost)
    K = _reachable(panda, "panda_link8", 2)
    with pytest.raises(InvalidInputError, match="timeout is too short for 20000 trajectory nodes"):
        trajectory_seed(panda, K, [0, 19_999], tip="panda_link8",
                        config=IKConfig(timeout=0.05, solve_mode="distance"))


@pytest.mark.parametrize("backend", ["reference", "host"])
def test_a_bad_goal_is_invalid_input_whether_or_not_it_was_reached(ur, backend):
    """Defect: a NaN goal whose chunk had not started when the timeout expired was reported
    TIMED_OUT on the reference path, INVALID_INPUT on the compiled one. Goals and seeds are
    checked for the whole batch up front now: a bad one is INVALID_INPUT on every backend,
    started or not; the others not reached are TIMED_OUT."""
    tip = ur.tips[0]
    T = _reachable(ur, tip, 200).copy()
    T[-1, 0, 0] = np.nan                 # the last goal (its chunk is never reached)
    T[-2, :3, 3] = 1e7                   # beyond the position bound
    seeds = np.tile(ur.neutral_q(), (200, 1))
    seeds[-3, 0] = 100.0                 # a seed outside the limits
    cfg = IKConfig(num_seeds=8, timeout=0.05, max_iterations=10**6, **ENDLESS)
    far = T.copy()
    far[:-3, :3, 3] += 5.0               # unreachable: no chunk finishes early
    r = solve_pose(ur, far, tips=tip, seeds=seeds, config=cfg, backend=backend)
    assert list(r.status[-3:]) == [Status.INVALID_INPUT] * 3, r.status[-3:]
    assert "seed" in r.messages[-3] and "NaN" in r.messages[-1]
    assert np.all(r.status[:-3] == Status.TIMED_OUT)


# ---------------------------------------------------------------- the timeout contract
# (issue: solve_pose(panda, 1000 goals, solver="ccd+dls", num_seeds=1000, timeout=0.01) came
# back after 0.26 s: the compiled CCD ran every row of every problem whatever the deadline, a
# row's start and first errors costing an FK each after it; the reference took one step of a
# problem's thousand seeds with the collision terms, 0.1-0.2 s, without looking at the clock)

def _mixed_goals(m, tip, n):
    """n goals, every other one out of reach (its seeds run until the deadline)."""
    T = np.asarray(_reachable(m, tip, n, seed=7)).copy()
    T[1::2, 0, 3] += 3.0
    return T


def _box_world():
    from ros2_ik.world import Obstacle, World

    return World([Obstacle.make("box", "box", (0.2, 0.2, 0.2), (0.6, 0.0, 0.3, 0, 0, 0, 1))])


def _contract(m, tip, T, r, dt, timeout):
    """Back within timeout + SLACK; every status a timeout may leave; every success verified."""
    assert dt <= timeout + SLACK, f"returned {dt - timeout:+.3f} s past a timeout of {timeout}"
    assert set(np.unique(r.status)) <= {Status.CONVERGED, Status.TIMED_OUT,
                                        Status.NOT_CONVERGED, Status.IN_COLLISION}
    assert np.all(r.success == (r.status == Status.CONVERGED))
    _verify(m, tip, r, T)


@pytest.mark.parametrize("backend", ["host", "reference"])
@pytest.mark.parametrize("solver", ["dls", "ccd", "ccd+dls"])
def test_the_fuzzed_case_returns_at_its_timeout(panda, solver, backend):
    """The issue's call, on every solver and backend: 1,000 goals x 1,000 seeds, a million
    iterations allowed, 10 ms."""
    tip = "panda_link8"
    T = _mixed_goals(panda, tip, 1000)
    cfg = IKConfig(num_seeds=1000, max_iterations=10**6, timeout=0.01)
    solve_pose(panda, T[:2], tips=tip, config=IKConfig(num_seeds=1000, timeout=0.01),
               solver=solver, backend=backend)  # (prepared: not timed)
    t0 = time.perf_counter()
    r = solve_pose(panda, T, tips=tip, config=cfg, solver=solver, backend=backend)
    _contract(panda, tip, T, r, time.perf_counter() - t0, 0.01)
    assert (r.status == Status.TIMED_OUT).any()
    unstarted = [m for m in r.messages if "before this problem was started" in m]
    assert unstarted, "problems after the deadline are not started"


CONTRACT_CASES = [  # (problems, seeds, collisions)
    (1, 1000, False), (1, 1000, True), (1000, 32, False), (1000, 32, True), (100_000, 1, False)]


@pytest.mark.parametrize("backend", ["host", "reference"])
@pytest.mark.parametrize("solver", ["dls", "ccd", "ccd+dls"])
@pytest.mark.parametrize("P,K,coll", CONTRACT_CASES,
                         ids=[f"{p}x{k}{'-coll' if c else ''}" for p, k, c in CONTRACT_CASES])
def test_solve_pose_returns_within_its_timeout(panda, solver, backend, P, K, coll):
    """Any batch size, seed count, solver and backend, with and without collision avoidance
    (a box in the world): back within the timeout (the strict 50 ms figure is
    bench/bench_timeouts.py's; SLACK here for a loaded machine), unsolved problems TIMED_OUT,
    every success verified by FK (and its clearance)."""
    if coll and solver == "ccd":
        pytest.skip("CCD alone does not take collision avoidance")
    tip = "panda_link8"
    T = _mixed_goals(panda, tip, P)
    kw = dict(world=_box_world()) if coll else {}
    base = dict(num_seeds=K, max_iterations=10**6, avoid_collisions=coll)
    solve_pose(panda, T[:2], tips=tip, config=IKConfig(timeout=0.01, **base), solver=solver,
               backend=backend, **kw)  # (prepared: not timed)
    for timeout in (0.0, 0.01):
        t0 = time.perf_counter()
        try:
            r = solve_pose(panda, T, tips=tip, config=IKConfig(timeout=timeout, **base),
                           solver=solver, backend=backend, **kw)
        except InvalidInputError as exc:
            # a machine too slow (or too busy) to write 100,000 results within the timeout
            # says so at once instead of answering late: the contract too
            assert P >= 10_000 and "timeout is too short" in str(exc), exc
            assert time.perf_counter() - t0 <= timeout + SLACK
            continue
        _contract(panda, tip, T, r, time.perf_counter() - t0, timeout)
        if coll:
            ok = r.success
            assert np.all(r.clearance[ok] >= 0.01 - 1e-9)


@pytest.mark.parametrize("backend", ["host", "reference"])
@pytest.mark.parametrize("solver", ["dls", "ccd+dls"])
def test_solve_ik_and_trajectory_seed_return_within_their_timeouts(panda, solver, backend):
    from ros2_ik.api import solve_ik
    from ros2_ik.ik.objectives import PoseObjective

    tip = "panda_link8"
    T = _mixed_goals(panda, tip, 1000)
    obj = PoseObjective(panda, tip, T)
    cfg = IKConfig(num_seeds=32, max_iterations=10**6, timeout=0.01)
    solve_ik(panda, [PoseObjective(panda, tip, T[:2])], config=cfg, solver=solver,
             backend=backend)
    t0 = time.perf_counter()
    r = solve_ik(panda, [obj], config=cfg, solver=solver, backend=backend)
    _contract(panda, tip, T, r, time.perf_counter() - t0, 0.01)
    world = _box_world()
    tcfg = IKConfig(num_seeds=4, max_iterations=10**6, timeout=0.01, solve_mode="distance",
                    avoid_collisions=True)
    K2 = _reachable(panda, tip, 2)
    trajectory_seed(panda, K2, [0, 1], tip=tip, config=tcfg, solver=solver, backend=backend,
                    world=world)
    t0 = time.perf_counter()
    tr = trajectory_seed(panda, K2, [0, 2999], tip=tip, config=tcfg, solver=solver,
                         backend=backend, world=world)
    dt = time.perf_counter() - t0
    assert dt <= 0.01 + SLACK, f"returned {dt - 0.01:+.3f} s past its timeout"
    assert (tr.status == Status.TIMED_OUT).any()
    solved = np.nonzero(tr.success)[0]
    if solved.size:
        np.testing.assert_allclose(fk_frames(panda, tr.q[solved], [tip])[:, 0, :3, 3],
                                   tr.targets[solved, :3, 3], atol=1.01e-4)


def test_lm_blocks_change_no_answer(panda):
    """The reference's LM step taken block by block (the deadline seen between blocks) gives
    the rows of one step over all of them, bit for bit, with the collision terms too."""
    from ros2_ik.ik.collision import CollisionObjective, default_collision_model
    from ros2_ik.ik.lm import lm_solve_rows
    from ros2_ik.ik.objectives import PoseObjective
    from ros2_ik.ik.seeds import expand_seeds, movable_coordinates

    tip = "panda_link8"
    P, K = 10, 5
    T = _mixed_goals(panda, tip, P)
    obj = PoseObjective(panda, tip, T)
    coll = CollisionObjective(panda, default_collision_model(panda, within=0.01), _box_world(),
                              margin=0.01, activation=0.005, weight=1.0, self_collisions=True)
    rows = expand_seeds(panda, np.tile(panda.neutral_q(), (P, 1)), K, 0, np,
                        movable_coordinates(panda, [tip]))
    pidx = np.repeat(np.arange(P), K)
    for objs in ([obj], [obj, coll]):
        cfg = IKConfig(num_seeds=K, max_iterations=40, stall_iterations=3)
        whole = lm_solve_rows(panda, objs, rows, rows, pidx, cfg, deadline=None,
                              first_per_problem=True, num_problems=P)
        for block in (7, 16):
            parts = lm_solve_rows(panda, objs, rows, rows, pidx, cfg, deadline=None,
                                  first_per_problem=True, num_problems=P, block_rows=block)
            for a, b in zip(whole[:5], parts[:5]):
                np.testing.assert_array_equal(a, b)
        assert whole[1].any()


def test_a_deadline_in_the_first_step_leaves_rows_unstarted(panda):
    """A deadline reached while the first blocks are evaluated: the rows never evaluated are
    not converged, their errors infinite, and the call says it timed out."""
    from ros2_ik.ik.lm import lm_solve_rows
    from ros2_ik.ik.objectives import PoseObjective

    tip = "panda_link8"
    T = _mixed_goals(panda, tip, 64)
    rows = np.tile(panda.neutral_q(), (64, 1))
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 1  # after the first block

    q, conv, iters, pe, re, timed_out = lm_solve_rows(
        panda, [PoseObjective(panda, tip, T)], rows, rows, np.arange(64), IKConfig(),
        deadline=None, should_stop=stop, block_rows=16)
    assert np.isfinite(pe[:16]).all() and np.isinf(pe[32:]).all()
    assert not conv[16:].any() and np.all(iters == 0) and not timed_out


def test_ccd_dls_keeps_what_ccd_found_when_the_polish_cannot_start(panda, monkeypatch):
    """The compiled ccd+dls polishes blocks of problems as CCD finishes them (without a
    deadline the blocks change no answer: one block per problem vs many problems a block); a
    problem CCD ran but LM could not start (the deadline came between) keeps CCD's rows: it is
    reported as solved or as timed out with its best error, not as never started."""
    from ros2_ik.api import IKSolver
    from ros2_ik.backends import codegen

    tip = "panda_link8"
    T = np.asarray(_reachable(panda, tip, 24, seed=11))
    cfg = IKConfig(num_seeds=3)
    whole = solve_pose(panda, T, tips=tip, config=cfg, solver="ccd+dls", backend="host")
    with monkeypatch.context() as mp:
        mp.setattr(codegen, "CCD_BLOCK_ROWS", 3)  # a block per problem
        blocks = IKSolver(panda, tip, cfg, solver="ccd+dls", backend="host").solve(T)
    np.testing.assert_array_equal(blocks.q, whole.q)
    np.testing.assert_array_equal(blocks.status, whole.status)
    assert whole.success.mean() > 0.9
    # one out-of-reach goal whose 20,000 seeds' CCD outlasts the timeout: CCD starts it, LM
    # cannot; its CCD rows are the answer
    far = _mixed_goals(panda, tip, 2)[1:]
    s = IKSolver(panda, tip, IKConfig(num_seeds=20_000, timeout=0.05), solver="ccd+dls",
                 backend="host")
    r = s.solve(far)
    assert r.status[0] == Status.TIMED_OUT
    assert r.messages[0].startswith("timed out: best error"), r.messages[0]


def test_chunk_costs_are_learnt_per_kind():
    """A chunk's checks and answer verification are learnt per kind: 8 problems x 32 seeds
    (8 answers to verify) tell nothing of 256 problems x 1 seed (the same rows, 32 times the
    answers; with the collision terms 30 ms more: a 10 ms call came back 32 ms late), nor of
    chunks without the collision terms or in another solve mode."""
    from ros2_ik.ik.batch import _ChunkCost

    c = _ChunkCost()
    c.record(8, 32, 0.001, 0.002, True, True)
    assert c.fixed(8, 32, True, True) == pytest.approx(0.003)
    assert c.fixed(256, 1, True, True) == pytest.approx(c._guess(256, 1, True))
    assert c.reserve(256, 1, True, True) >= 0.002 * 32  # scaled up to its answers
    assert c.fixed(8, 32, False, True) == pytest.approx(c._guess(8, 32, False))
    assert c.fixed(8, 32, True, False) == pytest.approx(c._guess(8, 32, True))
    c.record(8, 32, 0.001, 0.010, True, True)  # slower: raised at once
    assert c.reserve(8, 32, True, True) == pytest.approx(0.010)
