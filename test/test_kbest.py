"""k best answers (ros2_ik/api/kbest.py, IKSolver.solve_k_best): up to k distinct answers a
problem, ranked by the solve mode's cost.

- every answer reaches the goal (checked here by FK, independently), inside the limits;
- the answers of a problem are pairwise at least min_distance apart, wrap-aware (a continuous
  joint modulo 2 pi: an answer and the same one turned by 2 pi are one answer);
- they are ranked: fewest iterations, nearest the seed, or largest manipulability first;
- with collision avoidance every answer keeps the margin (checked by the exact distances),
  with a step bound every answer keeps it from the problem's seed;
- ``best`` is the first answer, or for a problem with none the attempt nearest its goal;
- its arguments are checked and named.
"""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot
from ros2_ik.backends import host as hostrun
from ros2_ik.errors import IKError
from ros2_ik.ik import Status
from ros2_ik.ik.objectives import EvalContext
from ros2_ik.ik.seeds import seed_distance
from ros2_ik.ik.terms import StepBound
from ros2_ik.kinematics import pose_error
from ros2_ik.model import Model
from ros2_ik.model.collision import collision_model
from ros2_ik.world import Obstacle, World

from test_term_step import TURRET

BACKENDS = ["auto", "reference"]


def _check_answers(m, tip, r, T, cfg, min_distance):
    """Every answer reaches its goal within the limits; a problem's answers are distinct."""
    P, k, nq = r.q.shape
    for p in range(P):
        n = int(r.count[p])
        q = r.q[p, :n]
        assert np.isnan(r.q[p, n:]).all()
        if not n:
            continue
        pe, re = pose_error(np.broadcast_to(T[p], (n, 4, 4)),
                            np.asarray(fk_frames(m, q, [tip]))[:, 0])
        assert np.all(pe <= cfg.position_tolerance * 1.0001)
        assert np.all(re <= cfg.orientation_tolerance * 1.0001)
        assert np.all((q >= m.lower - 1e-12) & (q <= m.upper + 1e-12))
        for i in range(n):
            for j in range(i):
                d = float(seed_distance(m, q[i:i + 1], q[j:j + 1])[0])
                assert d >= min_distance, (p, i, j, d)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["speed", "distance", "manipulability"])
def test_distinct_verified_ranked_answers(mode, backend):
    if backend == "auto" and hostrun.available() is None:
        pytest.skip("no g++ here")
    m = load_robot("ur")
    tip = m.tips[0]
    rng = np.random.default_rng(1)
    P = 30 if backend == "auto" else 8
    T = np.asarray(fk_frames(m, m.random_q(rng, P), [tip]))[:, 0]
    seeds = m.random_q(rng, P)
    cfg = IKConfig(num_seeds=16, timeout=None, solve_mode=mode)
    s = IKSolver(m, [tip], cfg, backend=backend)
    r = s.solve_k_best(T, 6, min_distance=0.2, seeds=seeds)
    _check_answers(m, tip, r, T, cfg, 0.2)
    assert (r.count >= 4).mean() > 0.8  # (a UR arm has 8 branches, and more by 2 pi turns)
    c = r.cost
    for p in range(P):
        n = int(r.count[p])
        step = np.diff(c[p, :n])
        assert np.all(step <= 1e-12) if mode == "manipulability" else np.all(step >= -1e-12)
    if mode == "distance":
        d = seed_distance(m, r.q[:, 0][r.count > 0], seeds[r.count > 0])
        np.testing.assert_allclose(d, c[r.count > 0, 0])
    np.testing.assert_array_equal(r.best.q[r.count > 0], r.q[r.count > 0, 0])
    assert np.all(r.best.success == (r.count > 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_continuous_joint_turned_by_2_pi_is_one_answer(backend):
    if backend == "auto" and hostrun.available() is None:
        pytest.skip("no g++ here")
    m = Model.from_urdf(TURRET, tips=["tool"])
    rng = np.random.default_rng(2)
    P = 10
    T = np.asarray(fk_frames(m, m.random_q(rng, P), ["tool"]))[:, 0]
    cfg = IKConfig(num_seeds=24, timeout=None)
    seeds = m.random_q(rng, P)
    r = IKSolver(m, ["tool"], cfg, backend=backend).solve_k_best(
        T, 8, min_distance=0.05, seeds=seeds, weights=(1, 1, 1, 0, 1, 0))
    # (the tool's position and pitch: four numbers for four joints; the check of every
    # answer's full pose is loosened to what is asked)
    for p in range(P):
        n = int(r.count[p])
        got = np.asarray(fk_frames(m, r.q[p, :n], ["tool"]))[:, 0]
        assert np.all(np.linalg.norm(got[:, :3, 3] - T[p, :3, 3], axis=1) <= 1e-4 * 1.0001)
        for i in range(n):
            for j in range(i):
                assert float(seed_distance(m, r.q[p, i:i + 1], r.q[p, j:j + 1])[0]) >= 0.05
    # elbow up or down, from the front or reached over the top: several, and the pan of
    # every answer within pi of the seed's (never the same answer turned by 2 pi)
    assert (r.count >= 2).mean() > 0.8
    have = ~np.isnan(r.q[..., 0])
    pan = (r.q[..., 0] - seeds[:, None, 0])[have]
    assert np.all(np.abs(pan) <= np.pi + 1e-9)


def test_every_answer_keeps_the_margin_and_the_step_bound():
    if hostrun.available() is None:
        pytest.skip("no g++ here")
    m = load_robot("panda")
    tip = "panda_hand_tcp"
    rng = np.random.default_rng(3)
    P = 20
    q = m.random_q(rng, P)
    T = np.asarray(fk_frames(m, q, [tip]))[:, 0]
    world = World().add(Obstacle.make("table", "box", (2, 2, 0.1), [0, 0, -0.05, 0, 0, 0, 1]),
                        Obstacle.make("post", "box", (0.1, 0.1, 1.0), [0.5, 0.3, 0.5, 0, 0, 0,
                                                                        1]))
    cfg = IKConfig(num_seeds=16, timeout=None, avoid_collisions=True)
    s = IKSolver(m, [tip], cfg, collision=collision_model(m))
    r = s.solve_k_best(T, 4, seeds=m.random_q(rng, P), world=world)
    _check_answers(m, tip, r, T, cfg, 0.1)
    assert r.count.sum() >= 2 * P
    obj = s.collision_objective(world)
    have = ~np.isnan(r.q[..., 0])
    qq = r.q[have]
    d = np.asarray(obj.nearest(EvalContext(m, qq, qq))[0])
    assert np.all(d >= cfg.collision_margin - 1e-9)
    np.testing.assert_allclose(r.clearance[have], d, atol=1e-9)
    # a step bound counts from each problem's own seed, for every answer
    seeds = np.clip(q + rng.normal(0, 0.1, q.shape), m.lower, m.upper)
    b = IKSolver(m, [tip], IKConfig(num_seeds=16, timeout=None), terms=[StepBound(0.4)])
    rb = b.solve_k_best(T, 4, min_distance=0.05, seeds=seeds)
    assert rb.count.sum() >= P
    for p in range(P):
        n = int(rb.count[p])
        assert np.all(np.abs(rb.q[p, :n] - seeds[p]) <= 0.4 + 1e-12)


def test_a_problem_without_answers_and_the_arguments():
    m = load_robot("panda")
    tip = "panda_hand_tcp"
    T = np.asarray(fk_frames(m, m.random_q(np.random.default_rng(4), 3), [tip]))[:, 0]
    T[1, :3, 3] += 5.0  # out of reach
    s = IKSolver(m, [tip], IKConfig(num_seeds=4, timeout=None))
    r = s.solve_k_best(T, 3)
    assert r.count[1] == 0 and not r.best.success[1]
    assert r.best.status[1] == Status.NOT_CONVERGED and "error" in r.best.messages[1]
    assert np.isnan(r.q[1]).all() and np.isnan(r.cost[1]).all()
    for kw, word in (({"k": 0}, "k must"), ({"k": 65}, "k must"), ({"k": 2.0}, "k must"),
                     ({"k": 2, "min_distance": -1.0}, "min_distance"),
                     ({"k": 2, "min_distance": "x"}, "min_distance")):
        with pytest.raises(IKError, match=word):
            s.solve_k_best(T, **kw)


def test_k_best_of_a_goal_set_name_their_goals():
    from ros2_ik.ik.terms import GoalSet

    m = load_robot("panda")
    tip = "panda_hand_tcp"
    rng = np.random.default_rng(5)
    P = 12
    cand = np.asarray(fk_frames(m, m.random_q(rng, P * 3), [tip]))[:, 0].reshape(P, 3, 4, 4)
    cfg = IKConfig(num_seeds=12, timeout=None)
    r = IKSolver(m, [tip], cfg, terms=[GoalSet(3)]).solve_k_best(cand, 5, seeds=m.random_q(
        rng, P))
    assert r.goal_index is not None and (r.count >= 2).mean() > 0.8
    for p in range(P):
        n = int(r.count[p])
        got = np.asarray(fk_frames(m, r.q[p, :n], [tip]))[:, 0]
        pe, re = pose_error(cand[p, r.goal_index[p, :n]], got)
        assert np.all(pe <= cfg.position_tolerance * 1.0001)
        assert np.all(re <= cfg.orientation_tolerance * 1.0001)
