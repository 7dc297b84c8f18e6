"""IK solvers: round trips verified by FK, limits, frozen/mimic/continuous joints, modes, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import BACKEND, ENDLESS, cupy_or_skip
from ros2_ik import robots
from ros2_ik.errors import InvalidInputError, ShapeError, UnknownLinkError
from ros2_ik.kinematics import fk, fk_frames, pose_error, pose_to_pq
from ros2_ik.ik import IKConfig, Objective, PoseObjective, PostureObjective, Status
from ros2_ik.api import solve_pose
from ros2_ik.ik.seeds import seed_distance

TOL_P, TOL_R = 1e-4, 1e-3


def _targets(m, tips, n, seed):
    q = m.random_q(seed, n)
    return q, fk_frames(m, q, tips)


def _verify(m, tips, T, res):
    """Independent check of every reported success: FK error and limits."""
    Tq = fk_frames(m, res.q, tips)
    for k in range(len(tips)):
        dp, dr = pose_error(T[:, k], Tq[:, k])
        ok = (dp <= TOL_P * (1 + 1e-9)) & (dr <= TOL_R * (1 + 1e-9))
        assert np.all(ok[res.success]), "a reported success fails the FK check"
    assert np.all(res.q >= m.lower - 1e-12) and np.all(res.q <= m.upper + 1e-12)


# documented success-rate floors on random reachable targets (100 iterations per seed; 64 seeds
# given up after 5 slow iterations on the compiled chains, 16 seeds on misc's floating base)
FLOORS = {"panda": 0.99, "ur": 0.99, "dual_arm": 0.9, "misc": 0.9}  # dual_arm: two tips
SEEDS = {"panda": 64, "ur": 64, "dual_arm": 64, "misc": 16}


@pytest.mark.parametrize("name", sorted(robots.ROBOTS))
def test_round_trip_success_floor(models, name):
    m = models[name]
    tips = list(robots.ROBOTS[name]["tips"])
    q, T = _targets(m, tips, 200 if name != "misc" else 60, 7)
    cfg = IKConfig(num_seeds=SEEDS[name], max_iterations=100, rng_seed=3,
                   stall_iterations=5 if name != "misc" else 0)
    res = solve_pose(m, T if len(tips) > 1 else T[:, 0], tips=tips, config=cfg)
    _verify(m, tips, T, res)
    assert res.success_rate >= FLOORS[name], (name, res.success_rate)
    assert set(np.unique(res.status)) <= {Status.CONVERGED, Status.NOT_CONVERGED}


def test_random_seeds_round_trip(models, rng):
    m = models["panda"]
    q, T = _targets(m, ["panda_hand_tcp"], 40, 11)
    seeds = m.random_q(rng, 40)
    res = solve_pose(m, T[:, 0], tips="panda_hand_tcp", seeds=seeds,
                     config=IKConfig(num_seeds=16))
    _verify(m, ["panda_hand_tcp"], T, res)
    assert res.success_rate >= 0.9


def test_success_matches_reported_errors(models):
    m = models["ur"]
    q, T = _targets(m, ["tool0"], 30, 5)
    res = solve_pose(m, T[:, 0], tips="tool0", config=IKConfig(num_seeds=4))
    dp, dr = pose_error(T[:, 0], fk_frames(m, res.q, ["tool0"])[:, 0])
    np.testing.assert_allclose(res.position_error, dp, atol=1e-12)
    np.testing.assert_allclose(res.orientation_error, dr, atol=1e-9)
    assert np.array_equal(res.success, (dp <= TOL_P) & (dr <= TOL_R))


def test_batched_equals_loop_of_singles(models):
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 6, 9)
    cfg = IKConfig(num_seeds=4, rng_seed=5)
    seeds = m.random_q(2, 6)
    batch = solve_pose(m, T[:, 0], tips="panda_link8", seeds=seeds, config=cfg)
    for i in range(6):
        one = solve_pose(m, T[i:i + 1, 0], tips="panda_link8", seeds=seeds[i], config=cfg)
        assert one.success[0] == batch.success[i]
        if one.success[0]:
            np.testing.assert_allclose(one.q[0], batch.q[i], atol=1e-9)


def test_frozen_joints_untouched(models):
    m = models["panda"].lock(["panda_joint1", "panda_joint4"])
    q, T = _targets(m, ["panda_link8"], 10, 21)
    seeds = m.neutral_q()[None].repeat(10, 0)
    seeds[:, [0, 3]] = q[:, [0, 3]]  # frozen joints already at the target's values
    res = solve_pose(m, T[:, 0], tips="panda_link8", seeds=seeds,
                     config=IKConfig(num_seeds=16))
    np.testing.assert_array_equal(res.q[:, [0, 3]], seeds[:, [0, 3]])
    assert res.success_rate >= 0.6  # 5 free joints for a 6-D goal: harder, measured 0.7-0.8


def test_continuous_joint_does_not_flip(models):
    m = models["misc"]
    tips = ["tool"]
    i = m.q_names.index("turret_joint")
    q = m.neutral_q()[None].repeat(5, 0)
    q[:, i] = [3.0, -3.0, 3.1, 6.0, -6.2]
    seeds = q.copy()
    seeds[:, i] += 0.05  # a small motion needed, near the +-pi boundary or several turns out
    T = fk_frames(m, q, tips)
    res = solve_pose(m, T[:, 0], tips=tips, seeds=seeds, config=IKConfig())
    assert res.success.all()
    assert np.all(np.abs(res.q[:, i] - seeds[:, i]) < math.pi)


def test_mimic_joint_consistent(models):
    m = models["misc"]
    tips = ["finger_right"]
    q, T = _targets(m, tips, 10, 13)
    res = solve_pose(m, T[:, 0], tips=tips, seeds=q + 0.0, config=IKConfig())
    Tq = fk(m, res.q)
    l = m.link_index("finger_right")
    parent = Tq[:, m.link_parent[l]] @ m.origin[l]
    d = np.einsum("bi,i->b", (np.linalg.inv(parent) @ Tq[:, l])[:, :3, 3], m.axis[l])
    lead = res.q[:, m.q_names.index("finger_left_joint")]
    np.testing.assert_allclose(d, -lead + 0.01, atol=1e-12)


def test_distance_mode_picks_nearest_converged(models):
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 8, 17)
    seeds = m.random_q(4, 8)
    cfg = IKConfig(num_seeds=12, solve_mode="distance", rng_seed=1)
    # (the reference, whose rows are recomputed below: the compiled host's arithmetic is not
    # the reference's bit for bit (its sine and cosine, for one), so a row near a branch point
    # may land elsewhere there, as problem 5's row 5 does on an AMD EPYC; the host's choice
    # among its own rows is the same rule, emitted)
    res = solve_pose(m, T[:, 0], tips="panda_link8", seeds=seeds, config=cfg,
                     backend="reference")
    # recompute every seed's outcome with the same rows and check the winner is the nearest
    from ros2_ik.ik.seeds import expand_seeds, finalize_q
    from ros2_ik.ik.lm import lm_solve_rows

    objs = [PoseObjective(m, "panda_link8", T[:, 0])]
    rows = expand_seeds(m, seeds, 12, 1, np)
    pidx = np.repeat(np.arange(8), 12)
    qr, conv, *_ = lm_solve_rows(m, objs, rows, rows, pidx, cfg, deadline=None)
    qr = finalize_q(m, qr, rows)
    d = seed_distance(m, qr, np.repeat(seeds, 12, axis=0)).reshape(8, 12)
    for p in range(8):
        if res.success[p]:
            best = np.min(np.where(conv.reshape(8, 12)[p], d[p], np.inf))
            assert seed_distance(m, res.q[p:p + 1], seeds[p:p + 1])[0] == pytest.approx(best)


def test_multi_tip_two_hands(models):
    m = models["dual_arm"]
    tips = ["left_tool", "right_tool"]
    q, T = _targets(m, tips, 20, 23)
    res = solve_pose(m, T, tips=tips, config=IKConfig(num_seeds=64, stall_iterations=5))
    _verify(m, tips, T, res)
    assert res.success_rate >= FLOORS["dual_arm"]


def test_position_only_and_free_yaw(models):
    m = models["ur"]
    q, T = _targets(m, ["tool0"], 20, 29)
    T2 = T[:, 0].copy()
    T2[:, :3, :3] = np.eye(3)  # orientation ignored below
    res = solve_pose(m, T2, tips="tool0", weights=(1, 1, 1, 0, 0, 0),
                     config=IKConfig(num_seeds=4))
    p = fk_frames(m, res.q, ["tool0"])[:, 0, :3, 3]
    assert np.all(np.linalg.norm(p - T2[:, :3, 3], axis=1)[res.success] <= TOL_P)
    assert res.success_rate >= 0.95
    # free rotation about the tool z axis: the tool z axis must match, yaw may differ
    res = solve_pose(m, T[:, 0], tips="tool0", weights=(1, 1, 1, 1, 1, 0),
                     config=IKConfig(num_seeds=64, stall_iterations=5))
    Tq = fk_frames(m, res.q, ["tool0"])[:, 0]
    zdot = np.einsum("bi,bi->b", Tq[:, :3, 2], T[:, 0, :3, 2])
    assert np.all(zdot[res.success] > math.cos(2 * TOL_R))
    assert res.success_rate >= 0.9


def test_custom_objective_extension_point(models):
    """A user objective: keep the elbow (link4) above a height, as residual rows + Jacobian."""

    class ElbowHeight(Objective):
        dim = 1

        def __init__(self, model, z_min):
            self.link, self.z_min = model.link_index("panda_link4"), z_min

        def residual(self, ctx, problem_idx):
            xp = ctx.xp
            z = ctx.T[:, self.link, 2, 3]
            viol = xp.minimum(z - self.z_min, 0.0)
            J = ctx.world_jacobian(self.link)[:, 2:3] * (viol < 0)[:, None, None]
            return viol[:, None], J

    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 20, 31)
    res = solve_pose(m, T[:, 0], tips="panda_link8", regularizers=[ElbowHeight(m, 0.3)],
                     config=IKConfig(num_seeds=8))
    z = fk_frames(m, res.q, ["panda_link4"])[:, 0, 2, 3]
    assert res.success_rate >= 0.7
    # a regularizer is a cost, lowered beside the goal (not a constraint): the elbow ends
    # above the height or within a few mm of it, where without it it ends 3-5 cm below
    assert np.all(z[res.success] >= 0.3 - 5e-3), z[res.success]
    plain = solve_pose(m, T[:, 0], tips="panda_link8", config=IKConfig(num_seeds=8))
    z0 = fk_frames(m, plain.q, ["panda_link4"])[:, 0, 2, 3]
    assert np.min(z0[plain.success]) < 0.3 - 0.02


def test_posture_regularizer_keeps_solution_near_seed(models):
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 10, 37)
    seeds = np.clip(q + 0.05, m.lower, m.upper)
    res = solve_pose(m, T[:, 0], tips="panda_link8", seeds=seeds,
                     regularizers=[PostureObjective(m, weight=1e-3)], config=IKConfig())
    assert res.success.all()
    assert np.max(np.abs(res.q - seeds)) < 0.5


def test_unreachable_goal_reports_best_error_in_bounded_time(models):
    m = models["panda"]
    T = np.eye(4)[None]
    T[0, :3, 3] = [3.0, 0, 0.5]  # 3 m away: out of reach
    res = solve_pose(m, T, tips="panda_link8",
                     config=IKConfig(num_seeds=4, max_iterations=50))
    assert not res.success[0] and res.status[0] == Status.NOT_CONVERGED
    assert 1.5 < res.position_error[0] < 3.0
    assert "no solution" in res.messages[0]


def test_timeout_honoured_and_reported(models):
    m = models["panda"]
    T = np.eye(4)[None].repeat(50, 0)
    T[:, 0, 3] = 3.0
    res = solve_pose(m, T, tips="panda_link8",
                     config=IKConfig(num_seeds=16, max_iterations=100000, timeout=0.05,
                                     **ENDLESS))
    assert np.all(res.status == Status.TIMED_OUT)
    assert "timed out" in res.messages[0]
    assert res.solve_time < 5.0  # generous: only checks that the deadline ends the loop


@pytest.mark.parametrize("fast", [False, True])
def test_cancel_via_should_stop(models, fast):
    m = models["panda"]
    T = np.eye(4)[None]
    T[0, 0, 3] = 3.0
    calls = []
    res = solve_pose(m, T, tips="panda_link8",
                     config=IKConfig(max_iterations=10_000_000, **ENDLESS), backend=BACKEND[fast],
                     should_stop=lambda: calls.append(1) or len(calls) > 3)
    assert not res.success[0] and len(calls) >= 4
    assert res.iterations[0] < 10_000_000  # the cancel ended the loop, not the iteration cap


def test_invalid_problems_flagged_alone(models):
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 4, 41)
    pq = pose_to_pq(T[:, 0])
    pq[1, 0] = np.nan
    pq[2, 3:] *= 3.0  # a scaled quaternion is normalized, not refused
    res = solve_pose(m, pq, tips="panda_link8", config=IKConfig(num_seeds=8))
    assert res.status[1] == Status.INVALID_INPUT and "NaN" in res.messages[1]
    assert res.status[2] != Status.INVALID_INPUT
    assert res.success[[0, 2, 3]].sum() >= 2
    for p in np.nonzero(res.success)[0]:  # problem 2 against the normalized target
        pe, re = pose_error(T[p, 0], fk_frames(m, res.q[p], ["panda_link8"])[0, 0])
        assert pe <= 1e-4 * 1.0001 and re <= 1e-3 * 1.0001
    seeds = m.neutral_q()[None].repeat(4, 0)
    seeds[3, 0] = 10.0
    res = solve_pose(m, T[:, 0], tips="panda_link8", seeds=seeds, config=IKConfig(num_seeds=8))
    assert res.status[3] == Status.INVALID_INPUT and "outside its limits" in res.messages[3]


def test_whole_batch_errors_are_clear(models):
    m = models["panda"]
    with pytest.raises(InvalidInputError, match="empty batch"):
        solve_pose(m, np.zeros((0, 4, 4)), tips="panda_link8")
    with pytest.raises(ShapeError, match="targets must have shape"):
        solve_pose(m, np.zeros((3, 5)), tips="panda_link8")
    with pytest.raises(UnknownLinkError, match="panda_link8"):
        solve_pose(m, np.eye(4)[None], tips="gripper")
    with pytest.raises(ShapeError, match="seeds must have shape"):
        solve_pose(m, np.eye(4)[None], tips="panda_link8", seeds=np.zeros(5))
    with pytest.raises(InvalidInputError, match="unknown solver"):
        solve_pose(m, np.eye(4)[None], tips="panda_link8", solver="magic")
    with pytest.raises(InvalidInputError, match="position_tolerance"):
        IKConfig(position_tolerance=-1)
    with pytest.raises(InvalidInputError, match="num_seeds must be in"):
        IKConfig(num_seeds=100_001)


def test_numpy_and_cupy_agree(models):
    """Like with like: the xp reference path (backend="reference") on NumPy and on CuPy, same
    seeds and seed rule. Last-bit differences of the two linear-algebra libraries may send a
    row along another path, so the outcomes agree on nearly every problem and every success
    is verified; the fused GPU kernels are compared with the reference in test_gpu.py."""
    cp = cupy_or_skip()
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 64, 43)
    cfg = IKConfig(num_seeds=4)
    a = solve_pose(m, T[:, 0], tips="panda_link8", config=cfg, backend="reference")
    b = solve_pose(m, cp.asarray(T[:, 0]), tips="panda_link8", config=cfg, backend="reference")
    assert np.mean(a.success == b.success) >= 0.95
    assert np.mean(a.iterations == b.iterations) >= 0.9
    same = (a.success & b.success) & (a.iterations == b.iterations) & (a.seed_index == b.seed_index)
    np.testing.assert_allclose(a.q[same], b.q[same], atol=1e-6)
    pe, re = pose_error(T[:, 0], fk_frames(m, b.q, ["panda_link8"])[:, 0])
    assert np.all(pe[b.success] <= cfg.position_tolerance)
    assert np.all(re[b.success] <= cfg.orientation_tolerance)


def _one_joint(lower, upper, jtype="revolute"):
    from ros2_ik.model import Model

    limit = "" if jtype == "continuous" else f'<limit lower="{lower!r}" upper="{upper!r}" '\
        'effort="1" velocity="1"/>'
    return Model.from_urdf(f"""<robot name="w"><link name="b"/><link name="l"/><link name="t"/>
      <joint name="j" type="{jtype}"><parent link="b"/><child link="l"/><axis xyz="0 0 1"/>
        {limit}</joint>
      <joint name="f" type="fixed"><parent link="l"/><child link="t"/><origin xyz="0.5 0 0"/>
      </joint></robot>""", tips=["t"])


# (lower, upper, seed, goal): the goal lies across the arc outside the limits from the seed
# (+-2 pi: the arc is empty; +-2.6 rad: the shortest way, 1.28 rad, crosses 0.68 rad of arc)
ROUND = [(-2 * math.pi, 2 * math.pi, 6.1, 0.2), (-2.6, 2.6, 2.5, -2.5), (0.82, 5.46, 1.0, 5.0)]


@pytest.mark.parametrize("path", ["reference", "one goal", "a batch"])
@pytest.mark.parametrize("lower,upper,seed,goal", ROUND)
def test_a_revolute_joint_goes_round_its_limits_instead_of_sticking_at_one(
        path, lower, upper, seed, goal, monkeypatch):
    """A revolute joint whose step goes past a limit continues 2 pi on where that is inside the
    limits (the same pose), on every backend: a goal across the arc outside the limits is
    reached from the seed on the near side of it, in a handful of iterations."""
    m = _one_joint(lower, upper)
    n = 64 if path == "a batch" else 1  # the host lanes take 4 problems at a time
    T = np.repeat(fk_frames(m, np.array([[goal]]), ["t"])[:, 0], n, axis=0)
    res = solve_pose(m, T, tips="t", seeds=np.full((n, 1), seed), config=IKConfig(),
                     backend="reference" if path == "reference" else "host")
    assert res.success.all(), res.messages[0]
    assert np.abs(res.q[:, 0] - goal).max() < 1e-3
    assert res.iterations.max() <= 10
    _verify(m, ["t"], T[:, None], res)


@pytest.mark.parametrize("fast", [False, True])
def test_a_step_that_cannot_go_round_stops_at_the_limit(fast):
    """2 pi on from past the limit is still outside (an arc wider than the step): the joint
    stops at the limit it pushes against, and the goal past it is not reported reached."""
    m = _one_joint(-1.0, 1.0)
    T = fk_frames(m, np.array([[1.4]]), ["t"])[:, 0]
    res = solve_pose(m, T, tips="t", seeds=np.array([0.5]), backend=BACKEND[fast])
    assert not res.success[0]
    assert res.q[0, 0] == 1.0


def test_clip_to_limits_goes_round_only_where_that_lands_inside():
    """Against a scalar statement of the rule: revolute joints with limits go 2 pi on when
    past a limit and that lands inside; everything else is clipped; a continuous joint is
    untouched."""
    from ros2_ik.ik.seeds import clip_to_limits

    rng = np.random.default_rng(5)
    for lower, upper, jtype in ((-2.6, 2.6, "revolute"), (0.82, 5.46, "revolute"),
                                (-6.3, 6.3, "revolute"), (-0.5, 0.5, "revolute"),
                                (-0.2, 0.3, "prismatic"), (0.0, 0.0, "continuous")):
        m = _one_joint(lower, upper, jtype)
        v = rng.uniform(-15, 15, 4000)
        got = clip_to_limits(m, v[:, None])[:, 0]
        lo, hi = m.lower[0], m.upper[0]
        for x, y in zip(v, got):
            want = x
            if jtype == "revolute":
                if x > hi and lo <= x - 2 * math.pi:
                    want = x - 2 * math.pi
                elif x < lo and x + 2 * math.pi <= hi:
                    want = x + 2 * math.pi
            assert y == min(max(want, lo), hi), (jtype, lower, upper, x, y)
        if jtype == "revolute":  # where it went round, the pose is the same
            moved = np.abs(np.abs(got - v) - 2 * math.pi) < 1e-9
            assert moved.any()
            np.testing.assert_allclose(
                fk_frames(m, got[moved, None], ["t"]), fk_frames(m, v[moved, None], ["t"]),
                atol=1e-12)


def test_target_shapes_for_one_tip(models):
    """(P, 7), (P, 4, 4), (P, 1, 7), (P, 1, 4, 4) all mean P goals for one tip, P = 1 too."""
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 2, 51)
    pq = pose_to_pq(T[:, 0])
    for P in (1, 2):
        ref = solve_pose(m, T[:P, 0], tips="panda_link8")
        for t in (pq[:P], pq[:P, None], T[:P], T[:P, 0]):
            res = solve_pose(m, t, tips="panda_link8")
            assert len(res) == P
            np.testing.assert_allclose(res.q, ref.q, atol=1e-9)


@pytest.mark.parametrize("fast", [False, True])
def test_stall_gives_up_seeds_but_never_the_last(models, fast):
    m = models["panda"]
    q, T = _targets(m, ["panda_link8"], 40, 61)
    base = dict(max_iterations=100)
    bk = BACKEND[fast]
    one = solve_pose(m, T[:, 0], tips="panda_link8", config=IKConfig(**base), backend=bk)
    one_st = solve_pose(m, T[:, 0], tips="panda_link8",
                        config=IKConfig(stall_iterations=1, **base), backend=bk)
    np.testing.assert_array_equal(one.success, one_st.success)  # one seed: it is the last
    np.testing.assert_allclose(one.q, one_st.q, atol=1e-12)
    many = solve_pose(m, T[:, 0], tips="panda_link8",
                      config=IKConfig(num_seeds=32, stall_iterations=5, **base), backend=bk)
    _verify(m, ["panda_link8"], T, many)
    assert many.success_rate >= one.success_rate
    # stalled seeds stopped early: the winning seed's iteration count stays small
    assert np.median(many.iterations[many.success]) < 30


_ARC_URDF = """<robot name="arc"><link name="base"/><link name="l1"/><link name="tip"/>
<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
<limit lower="0.5" upper="4.0" effort="1" velocity="1"/></joint>
<joint name="f" type="fixed"><parent link="l1"/><child link="tip"/><origin xyz="0.5 0 0"/>
</joint></robot>"""


@pytest.mark.parametrize("fast_path", [True, False])
def test_limit_excursion_crosses_the_arc_outside_the_limits(fast_path):
    """A joint limited to [0.5, 4.0] rad, seeded at 0.6, with a goal at 3.9 rad: the shortest
    way runs through the arc outside the limits, so LM inside the limits stalls at 0.5. The
    excursion (IKConfig) starts again from the seed without the limits, ends at 3.9 - 2 pi and
    answers 3.9, inside the limits and checked by FK; with it off, or with too few iterations
    left to finish it, the answer stays where it stalled (not converged, inside the limits)."""
    from ros2_ik import Model
    from ros2_ik.api import ChainSolver

    m = Model.from_urdf(_ARC_URDF, base="base", tips=["tip"])
    T = fk_frames(m, np.array([[3.9]]), ["tip"])[:, 0]
    seeds = np.array([[0.6]])
    cfg = IKConfig()
    bk = BACKEND[fast_path]
    on = solve_pose(m, T, tips="tip", seeds=seeds, config=cfg, backend=bk)
    assert on.success[0] and on.iterations[0] <= cfg.max_iterations
    assert m.lower[0] <= on.q[0, 0] <= m.upper[0] and abs(on.q[0, 0] - 3.9) < 1e-3
    pe, re = pose_error(T, fk_frames(m, on.q, ["tip"])[:, 0])
    assert pe[0] <= cfg.position_tolerance and re[0] <= cfg.orientation_tolerance
    if fast_path:  # the prepared one-goal path spells the same steps
        one = ChainSolver(m, "tip", cfg).solve(T[0], seed=seeds[0])
        assert one.success[0] and abs(one.q[0, 0] - on.q[0, 0]) < 1e-9
    for short in (IKConfig(excursion_iterations=0), IKConfig(max_iterations=32)):
        off = solve_pose(m, T, tips="tip", seeds=seeds, config=short, backend=bk)
        assert not off.success[0] and off.status[0] == Status.NOT_CONVERGED
        assert off.q[0, 0] == pytest.approx(0.5)  # where it stalled, inside the limits
        assert off.position_error[0] > 0.1
