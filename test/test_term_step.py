"""The step bound (ros2_ik/ik/terms/step.py, ros2_ik/backends/terms/step.py): how far each
joint may move from where it stands, a hard bound like the joint limits.

- its rows' Jacobian equals finite differences (the reference);
- every success keeps the bound (a continuous joint's step the short way round), every problem
  whose answer lies well inside it is solved, and the ones that are not say which joint;
- the host rows, the AVX2 lanes and the CUDA text (run on the CPU, float64) give the same
  answers bit for bit, and the host agrees with the reference;
- on a path among two boxes (the trajectory seed, collision avoidance on): no step between
  solved nodes exceeds the bound, every solved node is clear, and the path gets as far as a
  dense search of the same bound (256 seeds a node, every answer kept) wherever that one goes;
- its arguments are checked and named.
"""

from __future__ import annotations

import numpy as np
import pytest
from term_kernels import driver_answers, fd_jacobian, kernel_answers

from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot
from ros2_ik.api import interpolate_keyframes, trajectory_seed
from ros2_ik.backends import host as hostrun
from ros2_ik.errors import IKError, InvalidInputError
from ros2_ik.ik import Status
from ros2_ik.ik.objectives import EvalContext
from ros2_ik.ik.seeds import movable_coordinates, seed_distance
from ros2_ik.ik.terms import StepBound
from ros2_ik.ik.terms.step import wrapped
from ros2_ik.model import Model
from ros2_ik.model.collision import collision_model
from ros2_ik.world import Obstacle, World

TIP = "panda_hand_tcp"
need_cxx = pytest.mark.skipif(hostrun.available() is None, reason="no g++ here")

#: an arm whose base turns without limit (a continuous joint), then three revolute joints
TURRET = """<robot name="turret">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="l3"/><link name="tool"/>
  <joint name="pan" type="continuous"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/></joint>
  <joint name="lift" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="elbow" type="revolute"><parent link="l2"/><child link="l3"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2.5" upper="2.5" effort="1" velocity="1"/></joint>
  <joint name="wrist" type="revolute"><parent link="l3"/><child link="tool"/>
    <origin xyz="0.25 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
</robot>"""


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda")


def _problems(m, n, seed, spread=0.15):
    """Goals near the seeds: the seeds, and the poses of the seeds moved by ``spread``."""
    rng = np.random.default_rng(seed)
    q0 = m.random_q(rng, n)
    q1 = np.clip(q0 + rng.normal(0, spread, q0.shape), m.lower, m.upper)
    return np.asarray(fk_frames(m, q1, [TIP]))[:, 0], q0, q1


def _steps(m, q, origin, tips=(TIP,)):
    """(N, nq) the wrap-aware steps of the coordinates the solve moves (0 elsewhere)."""
    c = movable_coordinates(m, list(tips))
    return np.where(c, np.abs(wrapped(q - origin, np.asarray(m.q_continuous), np)), 0.0)


def test_the_rows_jacobian_equals_finite_differences(panda):
    m = panda
    rng = np.random.default_rng(1)
    q = m.random_q(rng, 6)
    origin = np.clip(q + rng.uniform(-0.5, 0.5, q.shape), m.lower, m.upper)
    term = StepBound(0.2)
    call = term.check(m, 6, origin, {})
    call["coords"] = np.nonzero(movable_coordinates(m, [TIP]))[0]
    obj = term.objective(m, call)
    r, J, Jfd = fd_jacobian(m, obj, q, 1e-7)
    assert (r != 0).any() and (r == 0).any()  # rows on both sides of the hinge
    np.testing.assert_allclose(Jfd, J, atol=1e-5)
    cv = obj.constraint(EvalContext(m, q, q), np.arange(6))
    np.testing.assert_allclose(cv, np.min(0.2 - _steps(m, q, origin)[:, call["coords"]], axis=1))


@pytest.mark.parametrize("backend", ["host", "reference"])
def test_every_success_keeps_the_bound(panda, backend):
    m = panda
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no g++ here")
    P = 200 if backend == "host" else 60
    T, q0, q1 = _problems(m, P, 2, spread=0.1)
    bound = np.linspace(0.15, 0.3, m.nq)  # one per coordinate
    cfg = IKConfig(num_seeds=4, timeout=None)
    s = IKSolver(m, [TIP], cfg, backend=backend, terms=[StepBound(bound)])
    assert s.backend == backend
    r = s.solve(T, seeds=q0)
    plain = IKSolver(m, [TIP], cfg, backend=backend).solve(T, seeds=q0)
    step = _steps(m, r.q, q0)
    assert np.all(step[r.success] <= bound + 1e-12)
    # every problem whose answer lies well inside the bound is solved
    inside = np.all(_steps(m, q1, q0) <= 0.8 * bound, axis=1)
    assert inside.sum() >= 10 and r.success[inside].all()
    # the bound binds: without it more are solved, most of them past the bound
    assert r.success.mean() < plain.success.mean()
    assert r.success.sum() >= 0.3 * P
    fail = np.nonzero(~r.success)[0]
    assert np.all(r.status[fail] == Status.NOT_CONVERGED)
    for p in fail:
        assert "max_joint_step" in r.messages[p] and "panda_joint" in r.messages[p]
    # a call's own bound: a number for every joint, and where to count from
    wide = s.solve(T, seeds=q0, max_joint_step=10.0)
    np.testing.assert_array_equal(wide.success, plain.success)
    moved = s.solve(T, seeds=q1, step_from=q0, max_joint_step=0.2)
    assert np.all(_steps(m, moved.q, q0)[moved.success] <= 0.2 + 1e-12)


@pytest.mark.parametrize("backend", ["host", "reference"])
def test_a_continuous_joint_steps_the_short_way_round(backend):
    if backend == "host" and hostrun.available() is None:
        pytest.skip("no g++ here")
    m = Model.from_urdf(TURRET, tips=["tool"])
    assert m.q_continuous[0]
    rng = np.random.default_rng(3)
    P = 40
    q0 = m.random_q(rng, P)
    q0[:, 0] = np.where(rng.random(P) < 0.5, 3.1, -3.1)  # next to +-pi
    q1 = np.clip(q0 + rng.uniform(-0.05, 0.05, q0.shape), m.lower, m.upper)
    q1[:, 0] = q0[:, 0] + np.where(q0[:, 0] > 0, 0.12, -0.12)  # across +-pi: 0.12 away
    T = np.asarray(fk_frames(m, q1, ["tool"]))[:, 0]
    cfg = IKConfig(num_seeds=2, timeout=None)
    s = IKSolver(m, ["tool"], cfg, backend=backend, terms=[StepBound(0.2)])
    assert s.backend == backend
    r = s.solve(T, seeds=q0, weights=(1, 1, 1, 0, 0, 0))
    assert r.success.mean() > 0.9
    d = np.abs(wrapped(r.q - q0, np.asarray(m.q_continuous), np))
    assert np.all(d[r.success] <= 0.2 + 1e-12)
    tight = s.solve(T, seeds=q0, weights=(1, 1, 1, 0, 0, 0), max_joint_step=0.05)
    assert not tight.success.any()  # the pan must turn 0.12
    assert all("pan" in msg for msg in tight.messages)


@need_cxx
def test_the_renderings_give_the_same_answers_bit_for_bit(panda):
    """The host's prepared solver, the driver's LM rows one at a time and in AVX2 lanes, and
    the CUDA text run on the CPU: the same answers to the last bit."""
    m = panda
    P = 48
    T, q0, _ = _problems(m, P, 4, spread=0.25)
    cfg = IKConfig(num_seeds=3, stall_iterations=5, timeout=None)
    bound = np.full(m.nq, 0.25)
    host = IKSolver(m, [TIP], cfg, terms=[StepBound(bound)]).solve(T, seeds=q0)
    assert 0.2 < host.success.mean() < 1.0
    data = {"pose_target": T.reshape(P, -1), "pose_weight": np.ones(6), "step_origin": q0,
            "step_max_step": bound, "step_weight": np.full((P, 1), 10.0)}
    one = driver_answers(m, [TIP], ["step"], data, q0, cfg, lanes=False)
    lanes = driver_answers(m, [TIP], ["step"], data, q0, cfg)
    kern = kernel_answers(m, [TIP], ["step"], data, q0, cfg)
    np.testing.assert_array_equal(one, lanes)
    np.testing.assert_array_equal(one[:, :m.nq], host.q)
    np.testing.assert_array_equal(one[:, m.nq].astype(np.int64), host.status)
    np.testing.assert_array_equal(kern[:, :m.nq], host.q)
    np.testing.assert_array_equal(kern[:, m.nq].astype(np.int64), host.status)


@need_cxx
def test_the_host_rows_agree_with_the_reference(panda):
    m = panda
    T, q0, _ = _problems(m, 60, 5)
    cfg = IKConfig(num_seeds=1, timeout=None)
    h = IKSolver(m, [TIP], cfg, terms=[StepBound(0.2)]).solve(T, seeds=q0)
    r = IKSolver(m, [TIP], cfg, backend="reference", terms=[StepBound(0.2)]).solve(T, seeds=q0)
    assert (h.success == r.success).mean() > 0.9
    both = h.success & r.success
    assert (np.abs(h.q - r.q).max(axis=1)[both] < 1e-5).mean() > 0.9


def test_the_arguments_are_checked_and_named(panda):
    m = panda
    T, q0, _ = _problems(m, 3, 6)
    s = IKSolver(m, [TIP], IKConfig(), terms=[StepBound(0.2)])
    for kw, word in (({"max_joint_step": -0.1}, "max_joint_step"),
                     ({"max_joint_step": np.full(m.nq, np.nan)}, "max_joint_step"),
                     ({"max_joint_step": np.ones(3)}, "max_joint_step"),
                     ({"max_joint_step": "x"}, "max_joint_step"),
                     ({"step_from": np.zeros(2)}, "step_from"),
                     ({"step_from": np.full(m.nq, np.inf)}, "step_from"),
                     ({"rest": np.zeros(m.nq)}, "rest")):
        with pytest.raises(IKError, match=word):
            s.solve(T, seeds=q0, **kw)
    for args, word in (((), "max_step"), ((0.1,), "dt"), ((-1,), "max_step")):
        with pytest.raises(IKError, match=word):
            StepBound(*args, **({"dt": 0.1} if word == "dt" else {}))
    with pytest.raises(IKError, match="dt"):
        StepBound(dt=-1.0)
    # velocity limits x dt: the URDF's limits
    vel = np.asarray(m.velocity_limit)[np.asarray(m.q_to_v)]
    np.testing.assert_allclose(StepBound(dt=0.01).default_step(m), vel * 0.01)
    with pytest.raises(IKError, match="StepBound"):
        IKSolver(m, [TIP], IKConfig(), terms=[StepBound(0.1), StepBound(0.2)])


# ---------------------------------------------------------------- the trajectory seed

B = 0.3      # [rad] the bound between neighbouring nodes
NODES = 25


def _two_boxes():
    return World().add(
        Obstacle.make("left", "box", (0.2, 0.2, 0.3), [0.45, 0.25, 0.35, 0, 0, 0, 1]),
        Obstacle.make("right", "box", (0.2, 0.2, 0.3), [0.45, -0.25, 0.35, 0, 0, 0, 1]))


def _paths(m, n, seed, clear, plain, world):
    """n straight paths of the tool (0.3-0.5 m, its orientation held) from a clear
    configuration to a pose some clear configuration reaches."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        q = m.random_q(rng, 64)
        for qa in q[clear(q)][:1]:
            Ta = np.asarray(fk_frames(m, qa[None], [TIP]))[0, 0]
            v = rng.normal(size=3)
            Tb = Ta.copy()
            Tb[:3, 3] += v / np.linalg.norm(v) * rng.uniform(0.3, 0.5)
            if plain.solve(np.repeat(Tb[None], 16, 0), seeds=m.random_q(rng, 16),
                           world=world).success.any():
                out.append((qa, Ta, Tb))
    return out


def _dense_reach(m, plain, world, qa, T, rng) -> int:
    """How far a dense search gets with the bound B: at every node, 256 seeds (64 of the
    configurations kept, 192 drawn within B around them), collision-aware IK without the
    bound, and every distinct answer within B of a kept configuration kept. Returns the first
    node it cannot reach (NODES: all)."""
    R = qa[None]
    for i in range(NODES):
        par = R[rng.choice(len(R), min(len(R), 64), replace=False)]
        near = par[rng.integers(0, len(par), 192)] + rng.uniform(-B, B, (192, m.nq))
        seeds = np.concatenate([par, np.clip(near, m.lower, m.upper)])
        r = plain.solve(np.repeat(T[i:i + 1], len(seeds), 0), seeds=seeds, world=world)
        sol = r.q[r.success]
        if len(sol):
            sol = sol[(np.abs(sol[:, None, :] - R[None]).max(-1) <= B).any(1)]
        if not len(sol):
            return i
        R = sol[np.unique(np.round(sol / 0.02), axis=0, return_index=True)[1]]
    return NODES


@need_cxx
def test_a_bounded_path_among_two_boxes_goes_as_far_as_a_dense_search(panda):
    m = panda
    world = _two_boxes()
    cm = collision_model(m)
    cfg = IKConfig(avoid_collisions=True, solve_mode="distance", num_seeds=8, timeout=None)
    plain = IKSolver(m, [TIP], IKConfig(avoid_collisions=True, num_seeds=1, timeout=None),
                     collision=cm)
    obj = plain.collision_objective(world)

    def clear(q):
        return np.asarray(obj.nearest(EvalContext(m, q, q))[0]) >= cfg.collision_margin

    rng = np.random.default_rng(11)
    greedy_short = 0
    for qa, Ta, Tb in _paths(m, 16, 2, clear, plain, world):
        kw = dict(tip=TIP, mode="sequential", seed=qa, config=cfg, world=world, collision=cm,
                  max_joint_step=B)
        res = trajectory_seed(m, np.stack([Ta, Tb]), [0, NODES - 1], **kw)
        ok = res.success
        # every solved node clear, no step past the bound (times the nodes since the last)
        assert clear(res.q[ok]).all()
        prev, last = qa, -1
        for i in np.nonzero(ok)[0]:
            assert float(seed_distance(m, res.q[i:i + 1], prev[None])[0]) <= B * (i - last) + 1e-9
            prev, last = res.q[i], i
        reach = int(np.argmin(ok)) if not ok.all() else NODES
        for i in np.nonzero(~ok)[0]:  # a node that failed says why
            assert res.status[i] in (Status.NOT_CONVERGED, Status.IN_COLLISION)
            assert "max_joint_step" in res.messages[i] or "collision" in res.messages[i]
        T = interpolate_keyframes(np.stack([Ta, Tb]), [0, NODES - 1])
        dense = _dense_reach(m, plain, world, qa, T, rng)
        assert reach >= dense, (reach, dense)
        greedy = trajectory_seed(m, np.stack([Ta, Tb]), [0, NODES - 1], beam_width=1, **kw)
        g = int(np.argmin(greedy.success)) if not greedy.success.all() else NODES
        greedy_short += g < dense
    assert greedy_short >= 1  # (paths where one branch alone would have stopped short)


def test_the_bound_takes_sequential_paths_and_checks_its_arguments(panda):
    m = panda
    key = np.asarray(fk_frames(m, m.random_q(np.random.default_rng(7), 2), [TIP]))[:, 0]
    with pytest.raises(InvalidInputError, match="sequential"):
        trajectory_seed(m, key, [0, 5], tip=TIP, mode="parallel", max_joint_step=0.2)
    for bad in (-0.1, 0.0, np.ones(3), float("nan")):
        with pytest.raises(IKError, match="max_joint_step"):
            trajectory_seed(m, key, [0, 5], tip=TIP, mode="sequential", max_joint_step=bad)
    for bad in (0, 1.5, "4", True):
        with pytest.raises(IKError, match="beam_width"):
            trajectory_seed(m, key, [0, 5], tip=TIP, mode="sequential", max_joint_step=0.2,
                            beam_width=bad)
