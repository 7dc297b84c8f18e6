"""State checks (:func:`ros2_ik.api.states.check_states`, :func:`check_path`): the compiled
check against the reference's exact distances, limits, paths, cancel and time-outs, bad
input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros2_ik import load_robot
from ros2_ik.api.states import (MAX_STATES, StateCheck, check_path, check_states,
                                interpolate_path)
from ros2_ik.backends import host as hostrun
from ros2_ik.errors import (BackendUnavailableError, InputTypeError, InvalidInputError,
                            ShapeError)
from ros2_ik.ik.collision import clearance, default_collision_model
from ros2_ik.model.collision import collision_model
from ros2_ik.world import Obstacle, World
from test_collision import _cells_world

need_cxx = pytest.mark.skipif(hostrun.available() is None, reason="no C++ compiler here")
pytestmark = pytest.mark.timeout(300)


def _quat_z(a):
    return [0.0, 0.0, math.sin(a / 2), math.cos(a / 2)]


def _world(z_floor=-0.3):
    """Every shape, obstacles near the arms, a floor."""
    return World().add(
        Obstacle.make("box", "box", (0.3, 0.2, 0.25), [0.4, 0.1, 0.4] + _quat_z(0.4)),
        Obstacle.make("ball", "sphere", (0.1,), [0.3, -0.3, 0.5, 0, 0, 0, 1]),
        Obstacle.make("can", "cylinder", (0.05, 0.6), [0.5, 0.3, 0.3] + _quat_z(0.3)),
        Obstacle.make("bar", "capsule", (0.05, 0.4),
                      [0.2, 0.4, 0.6, 0.0, math.sin(0.3), 0.0, math.cos(0.3)]),
        Obstacle.make("far", "box", (0.1, 0.1, 0.1), [3.0, 3.0, 3.0, 0, 0, 0, 1]),
        Obstacle.make("floor", "halfspace", pose=[0, 0, z_floor, 0, 0, 0, 1]))


def _reference(m, cm, q, world):
    ds, ps, _ = clearance(m, cm, q, None)
    dw, pw, _ = clearance(m, cm, q, world, self_collisions=False)
    return ds, ps, dw, pw


@need_cxx
@pytest.mark.parametrize("name", ["panda", "ur", "dual_arm"])
def test_compiled_check_equals_the_reference(name):
    """Per state, both clearances equal the reference's exact distances (every pair looked
    at) and the nearest pairs are the reference's, on every shape, self pairs included, for
    states far from anything, near contact and colliding."""
    m = load_robot(name)
    cm = collision_model(m)
    world = _world()
    rng = np.random.default_rng(3)
    q = m.random_q(rng, 3000)
    r = check_states(m, q, world, collision=cm)
    assert r.backend == "host" and r.complete and r.checked.all()
    ds, ps, dw, pw = _reference(m, cm, q, world)
    np.testing.assert_allclose(r.self_clearance, ds, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.world_clearance, dw, rtol=0, atol=1e-12)
    assert (r.self_pair == ps).mean() > 0.995, (r.self_pair != ps).sum()
    assert (r.world_pair == pw).mean() > 0.995, (r.world_pair != pw).sum()
    assert np.all(np.isfinite(r.clearance))
    np.testing.assert_array_equal(r.clearance, np.minimum(r.self_clearance, r.world_clearance))
    np.testing.assert_array_equal(r.pair, np.where(r.world_clearance < r.self_clearance,
                                                   r.world_pair, r.self_pair))
    # the spread of the states: colliding, near and far ones all seen
    assert (r.clearance < 0).sum() > 100 and (r.world_clearance > 0.05).sum() > 100
    assert ((r.clearance > 0) & (r.clearance < 0.02)).sum() > 10
    # the reference backend, asked for, gives the same
    rr = check_states(m, q[:300], world, collision=cm, backend="reference")
    assert rr.backend == "reference"
    np.testing.assert_allclose(rr.self_clearance, r.self_clearance[:300], atol=1e-12)
    np.testing.assert_allclose(rr.world_clearance, r.world_clearance[:300], atol=1e-12)


@need_cxx
def test_compiled_check_in_a_sensed_world_equals_the_reference():
    """In a sensed world (hundreds of boxes in a tree, some allowed to touch a link, whole
    nodes among them), the compiled check's world clearance and nearest pair
    equal the reference's exact ones (every sphere and obstacle looked at)."""
    m = load_robot("panda")
    cm = collision_model(m)
    world = _cells_world(touch=["panda_link7"])
    q = m.random_q(np.random.default_rng(3), 60)
    r = check_states(m, q, world, collision=cm)
    assert r.backend == "host" and r.complete
    dw, pw, _ = clearance(m, cm, q, world, self_collisions=False)
    np.testing.assert_allclose(r.world_clearance, dw, rtol=0, atol=1e-12)
    assert (r.world_pair == pw).mean() > 0.95
    assert (dw < 0).sum() > 5 and (dw > 0).sum() > 5


@need_cxx
def test_compiled_check_allowed_touch_static_links_and_no_world():
    m = load_robot("panda")
    cm = collision_model(m)
    q = m.random_q(np.random.default_rng(4), 400)
    # an obstacle every link may touch is not checked; the base (static) is never checked
    base = World().add(Obstacle.make("pedestal", "box", (0.4, 0.4, 0.2), [0, 0, 0.0, 0, 0, 0, 1]))
    r = check_states(m, q, base, collision=cm)
    ds, ps, dw, pw = _reference(m, cm, q, base)
    np.testing.assert_allclose(r.world_clearance, dw, atol=1e-12)
    allowed = World().add(Obstacle.make("pedestal", "box", (0.4, 0.4, 0.2), [0, 0, 0, 0, 0, 0, 1],
                                        touch=("*",)))
    r = check_states(m, q, allowed, collision=cm)
    assert np.all(np.isinf(r.world_clearance)) and np.all(r.world_pair == -1)
    assert r.world_version == allowed.version
    # no world: self only; no self pairs asked for: inf
    r = check_states(m, q, None, collision=cm, self_collisions=False)
    assert np.all(np.isinf(r.clearance)) and np.all(r.pair == -1) and r.world_version is None
    assert r.valid.all()


@need_cxx
def test_validity_margin_limits_and_words():
    m = load_robot("panda")
    cm = collision_model(m)
    world = _world()
    q = m.random_q(np.random.default_rng(5), 500)
    q[7, 3] = m.upper[3] + 0.2  # beyond a limit
    r = check_states(m, q, world, collision=cm, margin=0.02)
    expect = (r.self_clearance >= 0.02) & (r.world_clearance >= 0.02) & r.within_limits
    np.testing.assert_array_equal(r.valid, expect)
    assert not r.within_limits[7] and abs(r.limit_violation[7] - 0.2) < 1e-12
    assert r.within_limits.sum() == 499
    assert r.first_invalid == int(np.nonzero(~expect)[0][0])
    assert "joint limits by 0.2" in r.why(7)
    k = int(np.nonzero(r.world_clearance < 0)[0][0])
    assert "obstacle" in r.why(k) and "apart" in r.why(k)
    k = int(np.nonzero(r.valid)[0][0])
    assert r.why(k) == ""
    assert r.describe(-1) == "nothing within reach"


@need_cxx
def test_path_interpolation_and_first_invalid():
    m = load_robot("panda")
    cm = collision_model(m)
    world = _world(z_floor=0.0)
    a = m.neutral_q()
    b = a.copy()
    b[1] += 1.2  # the arm swings down into the floor and the obstacles
    c = a.copy()
    c[0] -= 0.5
    wp = np.stack([a, b, c])
    states, index = interpolate_path(m, wp, 0.01)
    np.testing.assert_array_equal(states[index], wp)
    assert np.abs(np.diff(states, axis=0)).max() <= 0.01 + 1e-12
    assert index[1] == math.ceil(1.2 / 0.01)
    r = check_path(m, wp, 0.01, world, collision=cm)
    np.testing.assert_array_equal(r.waypoints, index)
    ds, _, dw, _ = _reference(m, cm, states, world)
    bad = np.nonzero((ds < 0) | (dw < 0))[0]
    assert bad.size and r.first_invalid == int(bad[0])
    assert 0 < r.first_invalid < index[1]
    # one waypoint: one state
    one = check_path(m, a, 0.01, world, collision=cm)
    assert one.q.shape == (1, 7) and list(one.waypoints) == [0]


def test_path_continuous_and_floating_joints_short_way():
    m = load_robot("misc")
    cont = np.nonzero(m.q_continuous)[0]
    assert cont.size
    a = m.neutral_q()
    b = a.copy()
    a[cont[0]], b[cont[0]] = 3.0, -3.0  # the short way is through pi: 0.28 rad, not 6
    s, idx = interpolate_path(m, np.stack([a, b]), 0.05)
    assert idx[1] == math.ceil((2 * math.pi - 6.0) / 0.05)
    assert np.all(np.abs(s[:, cont[0]]) >= 3.0 - 1e-12)
    for st in m.floating_q_starts:
        quat = s[:, st + 3:st + 7]
        np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0, atol=1e-12)
    # the reference answers a model the compiled check does not cover
    r = check_states(m, s[:5], None)
    assert r.backend == "reference" and r.complete
    with pytest.raises(BackendUnavailableError, match="revolute, continuous, prismatic"):
        check_states(m, s[:5], None, backend="host")


@need_cxx
@pytest.mark.parametrize("backend", ["host", "reference"])
def test_cancel_and_timeout_at_any_size(backend):
    m = load_robot("panda")
    cm = collision_model(m)
    world = _world()
    n = 200_000 if backend == "host" else 20_000
    q = m.random_q(np.random.default_rng(6), n)
    r = check_states(m, q, world, collision=cm, backend=backend, should_stop=lambda: True)
    assert r.status == "cancelled" and not r.checked.any() and not r.valid.any()
    assert r.first_invalid == -1 and np.isnan(r.clearance).all()
    r = check_states(m, q, world, collision=cm, backend=backend, timeout=0.0)
    assert r.status == "timed_out" and not r.checked.any()
    calls = [0]

    def later():
        calls[0] += 1
        return calls[0] > 3

    r = check_states(m, q, world, collision=cm, backend=backend, should_stop=later)
    assert r.status == "cancelled" and 0 < r.checked.sum() < n
    ok = r.checked
    assert np.all(np.isfinite(r.clearance[ok])) and np.all(np.isnan(r.clearance[~ok]))


@need_cxx
def test_a_timeout_counts_from_the_call_not_from_the_first_block(monkeypatch):
    """What comes before the first block (validation, the collision model, a large batch's
    packing) is inside the timeout: when it alone outlasts the timeout, nothing is checked
    and the call says timed_out (it used to start the clock after it: 10^7 states with a 5 s
    timeout answered after 7-14 s)."""
    import time

    import ros2_ik.api.states as states_mod

    m = load_robot("panda")
    cm = collision_model(m)
    q = m.random_q(np.random.default_rng(6), 50_000)
    slow = states_mod._collision

    def slower(*a, **k):
        time.sleep(0.4)  # longer than the timeout below, whatever the machine's load
        return slow(*a, **k)

    monkeypatch.setattr(states_mod, "_collision", slower)
    r = check_states(m, q, _world(), collision=cm, backend="host", timeout=0.2)
    assert r.status == "timed_out" and not r.checked.any() and not r.valid.any()
    assert np.isnan(r.limit_violation).all() and not r.within_limits.any()
    monkeypatch.setattr(states_mod, "_collision", slow)
    r = check_states(m, q[:100], _world(), collision=cm, backend="host", timeout=60.0)
    assert r.complete and r.checked.all() and np.isfinite(r.limit_violation).all()


def test_bad_input_names_it():
    m = load_robot("panda")
    q = m.random_q(np.random.default_rng(7), 4)
    bad = q.copy()
    bad[2, 3] = np.nan
    with pytest.raises(InvalidInputError, match="row 2, coordinate 'panda_joint4'"):
        check_states(m, bad)
    with pytest.raises(ShapeError, match=r"shape \(B, 7\)"):
        check_states(m, q[:, :6])
    with pytest.raises(InvalidInputError, match="empty batch"):
        check_states(m, np.zeros((0, 7)))
    with pytest.raises(InvalidInputError, match="margin"):
        check_states(m, q, margin=-0.1)
    with pytest.raises(InputTypeError, match="world must be a ros2_ik.world.World"):
        check_states(m, q, world="table")
    with pytest.raises(InputTypeError, match="collision must be a CollisionModel"):
        check_states(m, q, collision=object())
    ur = load_robot("ur")
    with pytest.raises(InvalidInputError, match="collision model of 'ur5', not of"):
        check_states(m, q, collision=default_collision_model(ur))
    with pytest.raises(InvalidInputError, match="backend must be one of"):
        check_states(m, q, backend="gpu")
    with pytest.raises(InputTypeError, match="should_stop"):
        check_states(m, q, should_stop=3)
    with pytest.raises(InvalidInputError, match="timeout"):
        check_states(m, q, timeout=-1.0)
    with pytest.raises(InvalidInputError, match="resolution"):
        check_path(m, q, 0.0)
    with pytest.raises(InvalidInputError, match="resolution"):
        check_path(m, q, float("nan"))
    far = q.copy()
    far[1] += 3.0
    with pytest.raises(InvalidInputError, match=f"more than the limit {MAX_STATES}"):
        interpolate_path(m, far, 1e-7)
    assert isinstance(check_states(m, q[0]), StateCheck)
