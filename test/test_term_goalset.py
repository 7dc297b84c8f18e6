"""Goal sets (ros2_ik/ik/terms/goalset.py, ros2_ik/backends/terms/goalset.py): several
candidate goals a problem, success when any is reached, the answer says which.

- the rows are the nearest candidate's, their Jacobian the pose rows' (finite differences
  near a candidate, where the pose rows' small-error Jacobian is exact to first order);
- with one reachable candidate among unreachable ones, every problem the reachable goal alone
  solves is solved, at that goal; with several reachable, each answer reaches the candidate
  it names (checked by FK, independently), on one tip and on two;
- with collision avoidance, candidates inside an obstacle are passed over for a clear one;
- the host rows, the AVX2 lanes and the CUDA text (run on the CPU) give the same answers bit
  for bit, and the host agrees with the reference;
- bad candidates are INVALID_INPUT for their problem, shapes and sizes are checked and named.
"""

from __future__ import annotations

import numpy as np
import pytest
from term_kernels import driver_answers, fd_jacobian, kernel_answers

from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot
from ros2_ik.backends import host as hostrun
from ros2_ik.errors import IKError
from ros2_ik.ik import Status
from ros2_ik.ik.objectives import EvalContext
from ros2_ik.ik.terms import GoalSet
from ros2_ik.kinematics import pose_error, pose_to_pq
from ros2_ik.model.collision import collision_model
from ros2_ik.world import Obstacle, World

TIP = "panda_hand_tcp"
need_cxx = pytest.mark.skipif(hostrun.available() is None, reason="no g++ here")
BACKENDS = ["host", "reference"]


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda")


def _sets(m, tips, P, N, seed):
    """(P, N, T, 4, 4) candidates, each reachable (the pose of a random configuration)."""
    rng = np.random.default_rng(seed)
    q = m.random_q(rng, P * N)
    return np.asarray(fk_frames(m, q, tips)).reshape(P, N, len(tips), 4, 4), m.random_q(rng, P)


def _reached(m, tips, r, cand, cfg):
    """(P,) whether each answer reaches the candidate it names, by FK."""
    T = np.asarray(fk_frames(m, r.q, tips))
    goal = cand[np.arange(len(r.q)), r.goal_index]
    pe, re = pose_error(goal.reshape(-1, 4, 4), T.reshape(-1, 4, 4))
    pe, re = pe.reshape(len(r.q), -1).max(1), re.reshape(len(r.q), -1).max(1)
    return (pe <= cfg.position_tolerance * 1.0001) & (re <= cfg.orientation_tolerance * 1.0001)


def test_the_rows_are_the_nearest_candidates(panda):
    m = panda
    cand, _ = _sets(m, [TIP], 5, 3, 1)
    rng = np.random.default_rng(2)
    cfg = IKConfig()
    # points near the configuration of candidate 1 (small errors: the small-error Jacobian)
    qs = m.random_q(np.random.default_rng(1), 15).reshape(5, 3, m.nq)[:, 1]
    q = qs + rng.normal(0, 1e-4, qs.shape)
    term = GoalSet(3)
    call = {"targets": cand, "weights": np.ones((5, 1, 6)), "tips": (TIP,), "config": cfg}
    obj = term.objective(m, call)
    k, pe, _ = obj.nearest(EvalContext(m, q, q), np.arange(5))
    np.testing.assert_array_equal(k, 1)
    assert np.all(pe < 1e-3)
    _, J, Jfd = fd_jacobian(m, obj, q, 1e-7)
    np.testing.assert_allclose(Jfd, J, atol=2e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_any_candidate_will_do_and_the_answer_names_it(panda, backend):
    m = panda
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no g++ here")
    P = 120 if backend == "host" else 30
    cand, seeds = _sets(m, [TIP], P, 5, 3)
    reach = np.random.default_rng(4).integers(0, 5, P)  # the one reachable candidate
    far = np.ones((P, 5), bool)
    far[np.arange(P), reach] = False
    cand[far, 0, 2, 3] += 3.0  # 3 m up: out of reach
    cfg = IKConfig(num_seeds=4, timeout=None)
    s = IKSolver(m, [TIP], cfg, backend=backend, terms=[GoalSet(6)])
    assert s.backend == backend
    r = s.solve(cand[:, :, 0], seeds=seeds)  # (P, n, 4, 4) for one tip; n < max_goals
    alone = IKSolver(m, [TIP], cfg, backend=backend).solve(cand[np.arange(P), reach, 0],
                                                           seeds=seeds)
    assert r.success.mean() > 0.9
    assert np.all(r.success[alone.success])
    np.testing.assert_array_equal(r.goal_index[r.success], reach[r.success])
    assert _reached(m, [TIP], r, cand, cfg)[r.success].all()
    # every candidate reachable: each answer reaches the one it names; (P, n, 7) as well
    cand, seeds = _sets(m, [TIP], P, 4, 5)
    pq = pose_to_pq(cand.reshape(-1, 4, 4)).reshape(P, 4, 7)
    r = s.solve(pq, seeds=seeds)
    assert r.success.mean() > 0.95
    assert _reached(m, [TIP], r, cand, cfg)[r.success].all()
    assert len(np.unique(r.goal_index)) > 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_goal_set_of_two_tips(backend):
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no g++ here")
    m = load_robot("dual_arm")
    tips = list(m.tips)
    P = 60 if backend == "host" else 15
    cand, seeds = _sets(m, tips, P, 3, 6)
    cand[:, :2, 1, 2, 3] += 3.0  # candidates 0 and 1: the second arm out of reach
    cfg = IKConfig(num_seeds=4, timeout=None)
    r = IKSolver(m, tips, cfg, backend=backend, terms=[GoalSet(3)]).solve(cand, seeds=seeds)
    assert r.success.mean() > 0.9
    np.testing.assert_array_equal(r.goal_index[r.success], 2)
    assert _reached(m, tips, r, cand, cfg)[r.success].all()


@need_cxx
def test_candidates_in_an_obstacle_are_passed_over(panda):
    m = panda
    rng = np.random.default_rng(7)
    q = m.random_q(rng, 40000)
    T = np.asarray(fk_frames(m, q, [TIP]))[:, 0]
    p = T[:, :3, 3]
    centre, half = np.array([0.45, 0.0, 0.4]), 0.1
    inside = np.all(np.abs(p - centre) < half - 0.02, axis=1)
    clear = np.any(np.abs(p - centre) > half + 0.25, axis=1)
    P = 40
    assert inside.sum() >= P and clear.sum() >= P
    cand = np.stack([T[inside][:P], T[clear][:P]], axis=1)  # candidate 0 in the box
    world = World().add(Obstacle.make("box", "box", (2 * half,) * 3, list(centre) + [0, 0, 0, 1]))
    cfg = IKConfig(num_seeds=4, timeout=None, avoid_collisions=True)
    s = IKSolver(m, [TIP], cfg, collision=collision_model(m), terms=[GoalSet(2)])
    assert s.backend == "host"
    r = s.solve(cand, seeds=m.random_q(rng, P), world=world)
    ok = r.success
    assert ok.mean() > 0.7
    assert np.all(r.goal_index[ok] == 1) and np.all(r.clearance[ok] >= cfg.collision_margin)
    assert _reached(m, [TIP], r, cand[:, :, None], cfg)[ok].all()


@need_cxx
def test_the_renderings_give_the_same_answers_bit_for_bit(panda):
    m = panda
    P = 40
    cand, seeds = _sets(m, [TIP], P, 3, 8)
    cand[:, 0, 0, 2, 3] += 3.0
    cfg = IKConfig(num_seeds=3, stall_iterations=5, timeout=None)
    host = IKSolver(m, [TIP], cfg, terms=[GoalSet(3)]).solve(cand[:, :, 0], seeds=seeds)
    assert host.success.mean() > 0.8
    data = {"goalset_target": cand.reshape(P, -1), "goalset_weight": np.ones(6)}
    one = driver_answers(m, [TIP], [], data, seeds, cfg, lanes=False, goal="goalset/3")
    lanes = driver_answers(m, [TIP], [], data, seeds, cfg, goal="goalset/3")
    kern = kernel_answers(m, [TIP], [], data, seeds, cfg, goal="goalset/3")
    np.testing.assert_array_equal(one, lanes)
    np.testing.assert_array_equal(one[:, :m.nq], host.q)
    np.testing.assert_array_equal(kern[:, :m.nq], host.q)
    np.testing.assert_array_equal(kern[:, m.nq].astype(np.int64), host.status)


@need_cxx
def test_the_host_rows_agree_with_the_reference(panda):
    m = panda
    cand, _ = _sets(m, [TIP], 40, 3, 9)
    # seeds near candidate 1's configuration
    q = m.random_q(np.random.default_rng(9), 120).reshape(40, 3, m.nq)[:, 1]
    seeds = np.clip(q + np.random.default_rng(10).normal(0, 0.1, q.shape), m.lower, m.upper)
    cfg = IKConfig(num_seeds=1, timeout=None)
    h = IKSolver(m, [TIP], cfg, terms=[GoalSet(3)]).solve(cand[:, :, 0], seeds=seeds)
    r = IKSolver(m, [TIP], cfg, backend="reference", terms=[GoalSet(3)]).solve(
        cand[:, :, 0], seeds=seeds)
    assert (h.success == r.success).mean() > 0.9
    both = h.success & r.success
    assert (h.goal_index[both] == r.goal_index[both]).mean() > 0.9
    assert (np.abs(h.q - r.q).max(axis=1)[both] < 1e-5).mean() > 0.8


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_candidates_and_shapes(panda, backend):
    m = panda
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no g++ here")
    cand, seeds = _sets(m, [TIP], 4, 2, 11)
    cand[1, 1, 0, 0, 0] = np.nan
    cand[2, 0, 0, :3, :3] *= 2.0  # not a rotation
    s = IKSolver(m, [TIP], IKConfig(num_seeds=2), backend=backend, terms=[GoalSet(2)])
    r = s.solve(cand[:, :, 0], seeds=seeds)
    assert r.status[1] == Status.INVALID_INPUT and r.status[2] == Status.INVALID_INPUT
    assert "goal" in r.messages[1]
    assert r.status[0] != Status.INVALID_INPUT
    for bad in (np.zeros((4, 3, 4, 4)), np.zeros((4, 2, 5)), np.zeros((0, 2, 4, 4)),
                np.zeros((4, 4)), "x"):
        with pytest.raises(IKError, match="targets|goal set|empty"):
            s.solve(bad, seeds=seeds[:1])
    for bad in (0, 65, 2.0, True):
        with pytest.raises(IKError, match="max_goals"):
            GoalSet(bad)
    with pytest.raises(IKError, match="dls"):
        IKSolver(m, [TIP], IKConfig(), solver="ccd", terms=[GoalSet(2)])
    with pytest.raises(IKError, match="goal terms"):
        IKSolver(m, [TIP], IKConfig(), terms=[GoalSet(2), _OtherGoal(3)])


class _OtherGoal(GoalSet):
    """(a second goal term, of another class: check_terms refuses one class twice)"""
