"""The first pass on the cover (ros2_ik.model.cover, ros2_ik.ik.cover): a collision model of many
spheres is solved first on a few spheres holding whole fine ones, then the problems left on the
fine spheres.

Judged on the fine model by the reference's exact distances, never by the cover: every success
is clear by the margin on the fine spheres; every problem the fine spheres solve in one pass is
solved; a problem the first pass leaves gets exactly the one-pass answer; host and reference agree.
The fine models: the bundled panda's spheres each split into nine (702 spheres, no meshes
needed), and example-robot-data's UR5 fitted to its meshes where it is installed (a robot on a
table whose shoulder's cover would reach through it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ros2_ik.robots
from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot
from ros2_ik.errors import InvalidInputError
from ros2_ik.ik.collision import clearance, default_collision_model
from ros2_ik.ik.config import Status
from ros2_ik.ik.cover import MIN_SPHERES, first_pass
from ros2_ik.model.cover import cover_model, cover_spheres
from ros2_ik.world import Obstacle, World

TIP = "panda_hand_tcp"
MARGIN = 0.01
REACH = 0.02
WORLD = World().add(
    Obstacle.make("table", "halfspace", (), [0, 0, 0, 0, 0, 0, 1]),
    Obstacle.make("box", "box", (0.2, 0.3, 0.3), [0.55, 0.3, 0.15, 0, 0, 0, 1]),
    Obstacle.make("post", "cylinder", (0.04, 0.9), [-0.4, 0.35, 0.45, 0, 0, 0, 1]))
_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) / 3 ** 0.5


@pytest.fixture(scope="module")
def fine():
    """The bundled panda with each of its spheres split into nine inside it (a centre sphere and
    eight towards the corners, half its radius): a model of many spheres, as a fit to meshes
    gives, with the bundled SRDF's pairs."""
    m = load_robot("panda")
    spheres = {}
    for link, rows in default_collision_model(m, within=MARGIN).own_frame_spheres().items():
        out = []
        for x, y, z, r in np.asarray(rows).tolist():
            c = np.array([x, y, z])
            out += [[*(c + 0.5 * r * u), 0.5 * r] for u in [np.zeros(3), *_CORNERS]]
        spheres[link] = out
    srdf = (Path(ros2_ik.robots.__file__).parent / "panda.srdf").read_text()
    cm = default_collision_model(m, srdf, within=MARGIN, spheres=spheres)
    assert cm.num_spheres >= MIN_SPHERES
    return m, cm


def _goals(m, cm, n, seed, near_table=False):
    """Goals whose known answer is clear by 2 cm on the fine spheres; with ``near_table`` the
    tip 0-12 cm above the table and clear by 1.2 cm (near enough that the cover fails some)."""
    rng = np.random.default_rng(seed)
    Q = m.random_q(rng, 6000 if near_table else 600)
    T = np.asarray(fk_frames(m, Q, [TIP]))[:, 0]
    if near_table:
        keep = (T[:, 2, 3] >= 0.0) & (T[:, 2, 3] <= 0.12)
        Q, T = Q[keep], T[keep]
    d = clearance(m, cm, Q, WORLD, reach=0.03)[0]
    return T[d >= (0.012 if near_table else 0.02)][:n]


def _fine_clearance(m, cm, q):
    return clearance(m, cm, q, WORLD, reach=2 * MARGIN)[0]


def test_the_cover_holds_every_fine_sphere_and_reaches_at_most_reach_past_them():
    rng = np.random.default_rng(0)
    # a plate of small spheres, a rod, a blob: what fits to meshes look like
    cases = [np.c_[rng.uniform(-0.1, 0.1, (300, 2)), np.zeros(300)],
             np.c_[np.zeros((80, 2)), np.linspace(0, 0.4, 80)],
             rng.normal(0, 0.05, (200, 3))]
    dirs = rng.normal(size=(2000, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    for C in cases:
        R = rng.uniform(0.004, 0.015, len(C))
        for reach in (0.005, 0.02, 0.05):
            cc, rr, holder = cover_spheres(C, R, reach)
            assert len(rr) < len(R)
            # each fine sphere inside the cover sphere said to hold it
            assert np.all(np.linalg.norm(C - cc[holder], axis=1) + R <= rr[holder])
            # the support functions: at most reach past the fine spheres' (their hull's)
            over = (cc @ dirs.T + rr[:, None]).max(0) - (C @ dirs.T + R[:, None]).max(0)
            assert over.max() <= reach + 1e-6, (reach, over.max())
        # deterministic
        a, b = cover_spheres(C, R, 0.02), cover_spheres(C, R, 0.02)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    # two spheres or fewer, or spheres in a line with no volume: themselves
    cc, rr, _ = cover_spheres(np.zeros((2, 3)), np.array([0.1, 0.2]), 0.02)
    np.testing.assert_array_equal(rr, [0.1, 0.2])


def test_a_cover_model_holds_its_links_spheres_and_keeps_the_rest(fine):
    m, cm = fine
    cv = cover_model(cm, REACH)
    assert cv.num_spheres < cm.num_spheres // 4
    assert cv.link_names == cm.link_names and cv.allowances == cm.allowances
    np.testing.assert_array_equal(cv.pairs, cm.pairs)
    for c in range(len(cm.link_names)):
        s, t = cm.spheres_of(c), cv.spheres_of(c)
        d = np.linalg.norm(cm.center[s][:, None] - cv.center[t][None], axis=2) + \
            cm.radius[s][:, None] - cv.radius[t][None]
        assert np.all(d.min(axis=1) <= 0), cm.link_names[c]
    # distances never larger on the cover: at random configurations, pair by pair
    q = m.random_q(np.random.default_rng(1), 50)
    assert np.all(clearance(m, cv, q, WORLD)[0] <= clearance(m, cm, q, WORLD)[0] + 1e-12)
    # a link kept fine, and one cover sphere opened into the fine spheres it holds
    link = cm.link_names[3]
    kept = cover_model(cm, REACH, fine={link})
    c = cm.link_names.index(link)
    assert kept.spheres_of(c).stop - kept.spheres_of(c).start == \
        cm.spheres_of(c).stop - cm.spheres_of(c).start
    opened = cover_model(cm, REACH, split={(link, 0)})
    assert cv.num_spheres < opened.num_spheres < kept.num_spheres + cv.num_spheres


def test_no_first_pass_on_a_few_spheres_or_when_off(fine):
    m, cm = fine
    small = default_collision_model(m, within=MARGIN)
    assert small.num_spheres < MIN_SPHERES
    assert first_pass(m, small, WORLD, REACH, MARGIN) is None
    assert first_pass(m, cm, WORLD, 0.0, MARGIN) is None
    assert first_pass(m, cm, WORLD, REACH, MARGIN) is not None
    with pytest.raises(InvalidInputError, match="collision_cover"):
        IKConfig(collision_cover=-0.01)


def test_two_passes_keep_the_fine_models_promise_and_lose_no_goal(fine):
    """Every success clear by the margin on the fine spheres; every goal the fine spheres solve
    in one pass solved; the goals the first pass leaves get the one-pass answer bit for bit (the
    reference: test_host_and_reference_answer_two_passes_alike)."""
    backend = "host"
    m, cm = fine
    T = np.concatenate([_goals(m, cm, 40, 7), _goals(m, cm, 40, 8, near_table=True)])
    assert len(T) >= 60
    cfg = IKConfig(num_seeds=16, stall_iterations=5, avoid_collisions=True,
                   collision_margin=MARGIN)
    two = IKSolver(m, [TIP], cfg, collision=cm, backend=backend).solve(T, world=WORLD)
    one = IKSolver(m, [TIP], replace(cfg, collision_cover=0.0),
                   collision=cm, backend=backend).solve(T, world=WORLD)
    cover = first_pass(m, cm, WORLD, REACH, MARGIN)
    first = IKSolver(m, [TIP], replace(cfg, collision_cover=0.0),
                     collision=cover, backend=backend).solve(T, world=WORLD)
    assert two.success.mean() >= 0.95
    assert np.all(two.success[one.success])  # no goal lost
    d = _fine_clearance(m, cm, two.q[two.success])
    assert np.all(d >= MARGIN - 1e-9), d.min()
    # the first pass's answers where it succeeded; the one-pass answers where it did not
    np.testing.assert_array_equal(two.q[first.success], first.q[first.success])
    left = ~first.success
    assert left.any() and (~left).any(), "both passes should answer some of these goals"
    np.testing.assert_array_equal(two.q[left], one.q[left])
    np.testing.assert_array_equal(two.status[left], one.status[left])
    np.testing.assert_array_equal(two.clearance[left], one.clearance[left])
    # a first-pass answer's clearance is the cover's: never more than the fine spheres' (both
    # exact below margin + activation, bounds above)
    ok = first.success & (two.clearance < MARGIN + cfg.collision_activation)
    assert ok.any()
    assert np.all(two.clearance[ok] <= _fine_clearance(m, cm, two.q[ok]) + 1e-12)


def test_host_and_reference_answer_two_passes_alike(fine):
    m, cm = fine
    T = np.concatenate([_goals(m, cm, 12, 9), _goals(m, cm, 12, 10, near_table=True)])
    cfg = IKConfig(num_seeds=8, max_iterations=60, nonmonotone_iterations=0,
                   avoid_collisions=True)
    a, b = (IKSolver(m, [TIP], cfg, collision=cm, backend=k).solve(T, world=WORLD)
            for k in ("host", "reference"))
    assert np.mean(a.status == b.status) >= 0.9, (a.status, b.status)
    both = a.success & b.success
    assert both.sum() >= 0.8 * len(T)
    np.testing.assert_array_equal(a.seed_index[both], b.seed_index[both])
    np.testing.assert_allclose(a.q[both], b.q[both], atol=1e-6)
    assert np.all(_fine_clearance(m, cm, b.q[b.success]) >= MARGIN - 1e-9)


def test_a_stop_between_the_passes_is_honoured(fine, monkeypatch):
    """A cancel seen after the first pass: the problems it left are PREEMPTED, not solved."""
    m, cm = fine
    T = np.concatenate([_goals(m, cm, 10, 11), _goals(m, cm, 20, 12, near_table=True)])
    cfg = IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True)
    s = IKSolver(m, [TIP], cfg, collision=cm)
    stop = {"now": False}
    once = IKSolver._solve_once

    def first_then_stop(self, *args):
        r = once(self, *args)
        stop["now"] = True
        return r
    monkeypatch.setattr(IKSolver, "_solve_once", first_then_stop)
    r = s.solve(T, world=WORLD, should_stop=lambda: stop["now"])
    monkeypatch.setattr(IKSolver, "_solve_once", once)
    full = s.solve(T, world=WORLD)
    left = ~r.success
    assert left.any() and not np.all(full.success == r.success)
    assert np.all(r.status[left] == Status.PREEMPTED)
    np.testing.assert_array_equal(r.q[r.success], full.q[r.success])


def test_the_terms_arguments_follow_the_problems_into_the_second_pass(fine):
    """A posture's rest, one per problem, reaches the second pass with its problem."""
    from ros2_ik.ik.terms import Posture

    m, cm = fine
    T = np.concatenate([_goals(m, cm, 6, 13), _goals(m, cm, 40, 14, near_table=True)])
    rest = m.random_q(np.random.default_rng(3), len(T))
    cfg = IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True)
    two = IKSolver(m, [TIP], cfg, collision=cm, terms=[Posture()]).solve(
        T, world=WORLD, rest=rest)
    one = IKSolver(m, [TIP], replace(cfg, collision_cover=0.0),
                   collision=cm, terms=[Posture()])
    cover = first_pass(m, cm, WORLD, REACH, cfg.collision_margin)
    first = IKSolver(m, [TIP], replace(cfg, collision_cover=0.0),
                     collision=cover, terms=[Posture()]).solve(T, world=WORLD, rest=rest)
    left = np.nonzero(~first.success)[0]
    assert left.size
    alone = one.solve(T[left], world=WORLD, rest=rest[left])
    np.testing.assert_array_equal(two.q[left], alone.q)


def _erd_ur5():
    pytest.importorskip("pinocchio", reason="example-robot-data comes with make setup")
    from importlib import metadata

    from ros2_ik.model import Model

    try:
        share = Path(metadata.distribution("example-robot-data").locate_file("")) / \
            "cmeel.prefix/share"
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed; run make setup")
    robots = share / "example-robot-data" / "robots"
    m = Model.from_urdf((robots / "ur_description/urdf/ur5_robot.urdf").read_text(),
                        base="base_link", tips=["tool0"])
    cm = default_collision_model(m, (robots / "ur_description/srdf/ur5.srdf").read_text(),
                                 within=MARGIN, search_path=[str(share)])
    return m, cm


def test_what_only_the_cover_brings_near_keeps_its_fine_spheres():
    """example-robot-data's UR5 on a table: its wrist and the box on its flange (a pair checked
    for contact only) keep their fine spheres; so does the part of its shoulder whose cover
    would reach through the table (its fine spheres do not); the rest is covered."""
    m, cm = _erd_ur5()
    fp = first_pass(m, cm, WORLD, REACH, MARGIN)
    assert fp is not None and fp.num_spheres <= cm.num_spheres // 2

    def count(c, link):
        s = c.spheres_of(c.link_names.index(link))
        return s.stop - s.start
    for link in ("wrist_2_link", "ee_link"):
        assert count(fp, link) == count(cm, link)
    plain = cover_model(cm, REACH)
    assert count(plain, "shoulder_link") < count(fp, "shoulder_link")
    assert count(fp, "forearm_link") < count(cm, "forearm_link") // 4
    # without the table, the shoulder is covered
    bare = first_pass(m, cm, World(), REACH, MARGIN)
    assert count(bare, "shoulder_link") == count(plain, "shoulder_link")


def test_a_pose_out_of_reach_is_not_solved_again_on_the_fine_spheres(fine, monkeypatch):
    """A problem the first pass leaves that no seed reaches even without collision avoidance
    (the screen: a collision-free solve) is not solved again; a reachable one is."""
    m, cm = fine
    near = _goals(m, cm, 30, 15, near_table=True)
    far = near.copy()
    far[:, 0, 3] += 3.0  # 3 m away: out of reach
    cfg = IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True)
    s = IKSolver(m, [TIP], cfg, collision=cm)
    fine_rows = []
    once = IKSolver._solve_once

    def counted(self, t, *args):
        if args[-1] is cm:
            fine_rows.append(t.shape[0])
        return once(self, t, *args)
    monkeypatch.setattr(IKSolver, "_solve_once", counted)
    r = s.solve(far, world=WORLD)
    assert not r.success.any() and np.all(r.status == Status.NOT_CONVERGED)
    assert fine_rows == []
    r = s.solve(np.concatenate([far, near]), world=WORLD)
    assert fine_rows and fine_rows[0] <= len(near)  # only reachable ones went on
    assert r.success[len(far):].mean() >= 0.95


def test_per_problem_seeds_and_weights_follow_their_problems_in_any_form(fine):
    """Seeds and weights given one per problem, as arrays or as lists, reach the second pass
    with their problems: the same answers either way."""
    m, cm = fine
    T = np.concatenate([_goals(m, cm, 4, 16), _goals(m, cm, 30, 17, near_table=True)])
    P = len(T)
    seeds = m.random_q(np.random.default_rng(5), P)
    w = np.tile([1.0, 1, 1, 1, 1, 0.5], (P, 1))
    s = IKSolver(m, [TIP], IKConfig(num_seeds=8, stall_iterations=5, avoid_collisions=True),
                 collision=cm)
    a = s.solve(T, seeds=seeds, weights=w, world=WORLD)
    b = s.solve(T.tolist(), seeds=seeds.tolist(), weights=w.tolist(), world=WORLD)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.status, b.status)
    assert a.success.mean() >= 0.9
    # and some of them were answered by the second pass
    cover = first_pass(m, cm, WORLD, REACH, MARGIN, seeds)
    first = IKSolver(m, [TIP], replace(s.config, collision_cover=0.0), collision=cover).solve(
        T, seeds=seeds, weights=w, world=WORLD)
    assert (a.success & ~first.success).any()
