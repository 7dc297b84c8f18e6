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
from ros2_ik.ik.seeds import branch_distance, seed_distance
from ros2_ik.ik.terms import StepBound
from ros2_ik.kinematics import pose_error
from ros2_ik.model import Model
from ros2_ik.model.collision import collision_model
from ros2_ik.world import Obstacle, World

from test_term_step import TURRET

BACKENDS = ["auto", "reference"]


def _check_answers(m, tip, r, T, cfg, min_distance, apart=seed_distance):
    """Every answer reaches its goal within the limits; a problem's answers are distinct
    (``apart``: by joints, or by configuration branch)."""
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
                d = float(apart(m, q[i:i + 1], q[j:j + 1])[0])
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


SLIDE = """<robot name="slide">
  <link name="base"/><link name="cart"/><link name="tool"/>
  <joint name="rail" type="prismatic"><parent link="base"/><child link="cart"/>
    <axis xyz="1 0 0"/><limit lower="-10" upper="10" effort="1" velocity="1"/></joint>
  <joint name="turn" type="revolute"><parent link="cart"/><child link="tool"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 0 1"/>
    <limit lower="-6.3" upper="6.3" effort="1" velocity="1"/></joint>
</robot>"""


def _branches(m, q, apart=0.1) -> int:
    """How many configuration branches (whole-turn copies merged) the answers ``q`` cover."""
    kept: list = []
    for x in q:
        if not kept or float(np.min(branch_distance(m, np.asarray(kept), np.broadcast_to(
                x, (len(kept), m.nq))))) >= apart:
            kept.append(x)
    return len(kept)


def test_branch_distance_takes_every_angle_modulo_2_pi():
    m = load_robot("ur")
    rng = np.random.default_rng(7)
    q = np.clip(m.random_q(rng, 20), -np.pi, np.pi)
    turned = q.copy()
    turned[:, [0, 3, 5]] += 2 * np.pi * rng.choice([-1, 1], (20, 3))  # (+-2 pi joints)
    np.testing.assert_allclose(branch_distance(m, q, turned), 0.0, atol=1e-12)
    assert np.all(seed_distance(m, q, turned) > 6.0)  # (by joints: far apart)
    other = q.copy()
    other[:, 2] += 0.3
    np.testing.assert_allclose(branch_distance(m, q, other), 0.3, atol=1e-12)
    # a prismatic coordinate is a length: never wrapped (7 m is 7 m, not 0.72)
    p = Model.from_urdf(SLIDE, tips=["tool"])
    a = np.zeros((1, p.nq))
    b = a.copy()
    b[0, p.q_names.index("rail")] = 7.0
    np.testing.assert_allclose(branch_distance(p, a, b), 7.0, atol=1e-12)
    b[0, p.q_names.index("rail")] = 0.0
    b[0, p.q_names.index("turn")] = 2 * np.pi
    np.testing.assert_allclose(branch_distance(p, a, b), 0.0, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_distinct_branches_returns_an_arms_branches_not_whole_turn_copies(backend):
    """A UR (+-2 pi joints), k = 8: plain distinctness fills slots with copies of a branch
    turned by 2 pi; distinct_branches returns the branches a dense search (256 seeds) finds."""
    if backend == "auto" and hostrun.available() is None:
        pytest.skip("no g++ here")
    m = load_robot("ur")
    tip = m.tips[0]
    rng = np.random.default_rng(8)
    P = 24 if backend == "auto" else 6
    q = rng.uniform(np.maximum(m.lower, -np.pi), np.minimum(m.upper, np.pi), (P, m.nq))
    T = np.asarray(fk_frames(m, q, [tip]))[:, 0]
    cfg = IKConfig(timeout=None)
    s = IKSolver(m, [tip], cfg, backend=backend)
    r = s.solve_k_best(T, 8, distinct_branches=True)
    _check_answers(m, tip, r, T, cfg, 0.1, apart=branch_distance)
    plain = s.solve_k_best(T, 8)
    dense = IKSolver(m, [tip], IKConfig(num_seeds=256, timeout=None),
                     backend=backend).solve_k_best(T, 64, distinct_branches=True)
    want = np.minimum(dense.count, 8)
    got = np.array([_branches(m, r.q[p, :r.count[p]]) for p in range(P)])
    was = np.array([_branches(m, plain.q[p, :plain.count[p]]) for p in range(P)])
    np.testing.assert_array_equal(got, r.count)  # (every answer a branch of its own)
    assert got.sum() >= 0.97 * want.sum(), (got, want)
    assert got.sum() > was.sum()  # (the plain answers repeat branches: what this is for)


def test_distinct_branches_on_example_robot_datas_ur5_judged_by_pinocchio():
    """The real UR5 (example-robot-data's URDF): k = 8 by branch covers the branches a dense
    search finds; every answer reaches its goal by Pinocchio's FK."""
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is not installed")
    from importlib import metadata

    try:
        share = metadata.distribution("example-robot-data").locate_file("")
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed; run make setup")
    urdf = (share / "cmeel.prefix/share/example-robot-data/robots" / "ur_description" / "urdf"
            / "ur5_robot.urdf")
    m = Model.from_urdf(urdf.read_text(), tips=["tool0"])
    rng = np.random.default_rng(9)
    P = 16
    q = rng.uniform(np.maximum(m.lower, -np.pi), np.minimum(m.upper, np.pi), (P, m.nq))
    T = np.asarray(fk_frames(m, q, ["tool0"]))[:, 0]
    cfg = IKConfig(timeout=None)
    r = IKSolver(m, ["tool0"], cfg).solve_k_best(T, 8, distinct_branches=True)
    dense = IKSolver(m, ["tool0"], IKConfig(num_seeds=256, timeout=None)).solve_k_best(
        T, 64, distinct_branches=True)
    assert r.count.sum() >= 0.97 * np.minimum(dense.count, 8).sum()
    assert (r.count >= 4).all()  # (every goal: at least its shoulder and elbow branches)
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    fid = pm.getFrameId("tool0")
    for p in range(P):
        n = int(r.count[p])
        assert _branches(m, r.q[p, :n]) == n
        for x in r.q[p, :n]:
            qp = pin.neutral(pm)
            for name, v in zip(m.q_names, x):
                qp[pm.joints[pm.getJointId(name)].idx_q] = v
            pin.framesForwardKinematics(pm, data, qp)
            M = data.oMf[fid]
            got = np.eye(4)
            got[:3, :3], got[:3, 3] = M.rotation, M.translation
            pe, re = pose_error(T[p][None], got[None])
            assert pe[0] <= cfg.position_tolerance * 1.0001
            assert re[0] <= cfg.orientation_tolerance * 1.0001


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
                     ({"k": 2, "min_distance": "x"}, "min_distance"),
                     ({"k": 2, "distinct_branches": "yes"}, "distinct_branches")):
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
