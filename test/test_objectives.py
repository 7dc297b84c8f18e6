"""The solvers' objectives tested the way the kinematics are: every objective's residual
Jacobian against central finite differences of its residual, on every bundled robot (floating,
planar, prismatic, continuous, mimic and frozen joints included), along the model's own
velocity coordinates (``integrate``: a floating joint's rotation moves on SO(3)).

Position rows, the joint-limit and posture objectives are exact Jacobians: they must match to
FD precision anywhere. The rotation rows of the pose / orientation objectives use the
small-error approximation of the log map's Jacobian (documented in ``PoseObjective``): exact at
the target, with an error growing with the rotation error. That is checked here as such: near
the target they match closely, and the mismatch stays within the bound the approximation
implies (the second-order term of the log map, |e|/2 per unit of angular velocity).
"""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik.kinematics import fk_frames, integrate
from ros2_ik.kinematics.se3 import rotation_angle
from ros2_ik.ik.objectives import (EvalContext, JointLimitObjective, OrientationObjective,
                                   PoseObjective, PositionObjective, PostureObjective)

from conftest import ROBOT_NAMES

EPS = 1e-6


def _fd(model, obj, q, seed_q):
    """Analytic J and central-difference J (N, dim, nv_active) of ``obj`` at q (N, nq)."""
    N = q.shape[0]
    idx = np.arange(N)
    r0, J = obj.residual(EvalContext(model, q, seed_q), idx)
    Jfd = np.zeros_like(J)
    for j, c in enumerate(model.v_active):
        dv = np.zeros((N, model.nv))
        dv[:, c] = EPS
        rp, _ = obj.residual(EvalContext(model, integrate(model, q, dv), seed_q), idx)
        rm, _ = obj.residual(EvalContext(model, integrate(model, q, -dv), seed_q), idx)
        Jfd[:, :, j] = (rp - rm) / (2 * EPS)
    return np.asarray(r0), np.asarray(J), Jfd


def _inside(model, rng, n):
    """Configurations well inside the limits (central differences stay inside them)."""
    q = model.random_q(rng, n)
    q = model.neutral_q() + 0.9 * (q - model.neutral_q())
    return np.asarray(integrate(model, q, np.zeros((n, model.nv))))  # unit quaternions again


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_exact_objectives_match_finite_differences(models, name, rng):
    m = models[name]
    q = _inside(m, rng, 6)
    seed_q = _inside(m, rng, 6)
    # limit objective: also a configuration inside its margin band, where it is active
    lo, hi = m.lower, m.upper
    lim = JointLimitObjective(m, weight=0.7, margin=0.2)
    near = q[0].copy()
    near[lim._qi] = hi[lim._qi] - 0.02 * (hi[lim._qi] - lo[lim._qi])
    q_lim = np.vstack([q, near[None]])
    seed_lim = np.vstack([seed_q, seed_q[:1]])
    for obj, qq, ss in ((JointLimitObjective(m, weight=0.7, margin=0.2), q_lim, seed_lim),
                        (PostureObjective(m, weight=0.3), q, seed_q),
                        (PostureObjective(m, weight=0.3, q_ref=m.neutral_q()), q, seed_q)):
        r, J, Jfd = _fd(m, obj, qq, ss)
        assert r.shape == (qq.shape[0], obj.dim) and J.shape == (qq.shape[0], obj.dim,
                                                                 m.nv_active)
        np.testing.assert_allclose(J, Jfd, atol=1e-6, err_msg=type(obj).__name__)
    if lim.dim:  # the limit objective is really active near a limit, zero in the middle
        r, _, _ = _fd(m, lim, q_lim, seed_lim)
        assert np.abs(r[-1]).max() > 0.1
        mid = m.neutral_q()
        mid[lim._qi] = 0.5 * (lo[lim._qi] + hi[lim._qi])
        r_mid, _ = lim.residual(EvalContext(m, mid[None], mid[None]), np.arange(1))
        assert np.all(np.asarray(r_mid) == 0.0)
    # position rows of every tip: exact anywhere (far from the target too)
    for tip in m.tips:
        targets = fk_frames(m, _inside(m, rng, q.shape[0]), [tip])[:, 0]
        for obj in (PositionObjective(m, tip, targets[:, :3, 3], weight=2.0),
                    PoseObjective(m, tip, targets, weights=(1, 2, 3, 0, 0, 0))):
            r, J, Jfd = _fd(m, obj, q, seed_q)
            np.testing.assert_allclose(J[:, :3], Jfd[:, :3], atol=1e-6,
                                       err_msg=f"{type(obj).__name__} {tip}")


@pytest.mark.parametrize("name", ROBOT_NAMES)
def test_rotation_rows_match_finite_differences_near_the_target(models, name, rng):
    """The small-error approximation: exact at the target; off by at most about |e|/2 (the
    log map's second-order term) per unit column norm at a rotation error e."""
    m = models[name]
    q = _inside(m, rng, 6)
    for tip in m.tips:
        T_now = fk_frames(m, q, [tip])[:, 0]
        for angle in (0.0, 1e-3, 0.1, 0.5):
            # targets rotated by `angle` about random axes from the current poses
            ax = rng.normal(size=(q.shape[0], 3))
            ax /= np.linalg.norm(ax, axis=1, keepdims=True)
            from ros2_ik.kinematics.se3 import so3_exp

            T_t = T_now.copy()
            T_t[:, :3, :3] = T_now[:, :3, :3] @ so3_exp(ax * angle)
            for obj in (PoseObjective(m, tip, T_t),
                        OrientationObjective(m, tip, T_t, weight=1.5)):
                r, J, Jfd = _fd(m, obj, q, q)
                rot = slice(3, 6)
                e = np.asarray(rotation_angle(np.swapaxes(T_t[:, :3, :3], 1, 2)
                                              @ T_now[:, :3, :3]))
                np.testing.assert_allclose(e, angle, atol=1e-9)
                col = np.linalg.norm(Jfd[:, rot], axis=1, keepdims=True) + 1e-12
                err = np.abs(J[:, rot] - Jfd[:, rot]) / col
                w = 1.5 if isinstance(obj, OrientationObjective) else 1.0
                bound = 0.5 * angle * 1.05 + 1e-6 / min(1.0, col.min()) + 1e-7
                assert err.max() <= w * bound, (type(obj).__name__, tip, angle, err.max())
