"""CCD: closed-form joint updates, limits, rtol stop, CCD+DLS polish, all verified by FK."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import PLANAR_2LINK
from ros2_ik.errors import InvalidInputError
from ros2_ik.kinematics import fk_frames, pose_error
from ros2_ik.model import Model
from ros2_ik.ik import IKConfig, PositionObjective, PostureObjective, Status
from ros2_ik.api import solve_ik, solve_pose


def _check(m, tip, T, res, tol_p=1e-4, tol_r=1e-3, position_only=False):
    Tq = fk_frames(m, res.q, [tip])[:, 0]
    dp, dr = pose_error(T, Tq)
    ok = dp <= tol_p * (1 + 1e-9)
    if not position_only:
        ok &= dr <= tol_r * (1 + 1e-9)
    assert np.all(ok[res.success]), "a reported success fails the FK check"
    assert np.all(res.q >= m.lower - 1e-12) and np.all(res.q <= m.upper + 1e-12)


def test_planar_two_link_position():
    m = Model.from_urdf(PLANAR_2LINK.format(a1=0.5, a2=0.4), tips=["tip"])
    q = m.random_q(np.random.default_rng(0), 50)
    T = fk_frames(m, q, ["tip"])[:, 0]
    res = solve_ik(m, [PositionObjective(m, "tip", T[:, :3, 3])], solver="ccd",
                   config=IKConfig(max_iterations=500, num_seeds=2))
    _check(m, "tip", T, res, position_only=True)
    assert res.success_rate >= 0.95


def test_prismatic_closed_form_in_one_sweep():
    urdf = """<robot name="p"><link name="b"/><link name="s"/>
      <joint name="slide" type="prismatic"><parent link="b"/><child link="s"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
    </robot>"""
    m = Model.from_urdf(urdf, tips=["s"])
    pts = np.array([[0, 0, 0.3], [0, 0, -0.7], [0, 0, 2.0]])
    res = solve_ik(m, [PositionObjective(m, "s", pts)], solver="ccd")
    assert list(res.success) == [True, True, False]
    assert res.iterations[0] == 1 and res.iterations[1] == 1
    np.testing.assert_allclose(res.q[:, 0], [0.3, -0.7, 1.0])  # the last one clipped to 1.0
    assert res.status[2] == Status.NOT_CONVERGED


@pytest.mark.parametrize("name, tip", [("panda", "panda_link8"), ("ur", "tool0")])
def test_ccd_position_round_trip(models, name, tip):
    m = models[name]
    q = m.random_q(np.random.default_rng(1), 60)
    T = fk_frames(m, q, [tip])[:, 0]
    res = solve_ik(m, [PositionObjective(m, tip, T[:, :3, 3])], solver="ccd",
                   config=IKConfig(max_iterations=200, num_seeds=4))
    _check(m, tip, T, res, position_only=True)
    assert res.success_rate >= 0.85, res.success_rate


@pytest.mark.parametrize("name, tip", [("panda", "panda_link8"), ("ur", "tool0")])
def test_ccd_then_dls_pose(models, name, tip):
    m = models[name]
    q = m.random_q(np.random.default_rng(2), 60)
    T = fk_frames(m, q, [tip])[:, 0]
    res = solve_pose(m, T, tips=tip, solver="ccd+dls", config=IKConfig(num_seeds=8))
    _check(m, tip, T, res)
    assert res.success_rate >= 0.9, res.success_rate
    plain = solve_pose(m, T, tips=tip, solver="ccd", config=IKConfig(num_seeds=8))
    _check(m, tip, T, plain)
    # CCD alone gets close: median error well below the distance from the seed
    start = fk_frames(m, m.neutral_q()[None], [tip])[0, 0]
    d0 = np.median(pose_error(T, np.broadcast_to(start, T.shape))[0])
    assert np.median(plain.position_error) < 0.05 * d0


def test_ccd_rtol_stops_unreachable(models):
    m = models["panda"]
    T = np.eye(4)[None].repeat(2, axis=0)
    T[:, 0, 3] = 3.0
    res = solve_pose(m, T, tips="panda_link8", solver="ccd",
                     config=IKConfig(max_iterations=10_000))
    assert not res.success.any()
    assert np.all(res.iterations < 10_000)  # the rtol stall test ended it, not the cap
    assert np.all(res.position_error > 1.0)


def test_ccd_refuses_what_it_cannot_do(models):
    m = models["dual_arm"]
    q = m.random_q(np.random.default_rng(3), 2)
    T = fk_frames(m, q, ["left_tool", "right_tool"])
    with pytest.raises(InvalidInputError, match="one tip"):
        solve_pose(m, T, tips=["left_tool", "right_tool"], solver="ccd")
    p = models["panda"]
    Tp = fk_frames(p, p.random_q(np.random.default_rng(4), 2), ["panda_link8"])[:, 0]
    with pytest.raises(InvalidInputError, match="regularizers"):
        solve_pose(p, Tp, tips="panda_link8", solver="ccd", regularizers=[PostureObjective(p)])
    with pytest.raises(InvalidInputError, match="unknown solver"):
        solve_pose(p, Tp, tips="panda_link8", solver="newton")
