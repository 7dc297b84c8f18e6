"""Cyclic coordinate descent (CCD), batched over problems x seeds.

One sweep visits the 1-DOF joints between the base and the tip, from the tip towards the base,
and sets each to the value that best moves the tip onto its target with every other joint held
(closed form per joint, as in scikit-bot's ``ccd``):

- revolute / continuous joint with world axis ``z`` at ``p_j``: the tip's error as a function of
  the joint's rotation ``theta`` is ``a cos(theta) + b sin(theta)`` + const, maximal at
  ``theta = atan2(b, a)``, with, for the position part (vectors from the joint to the tip ``u``
  and to the target ``v``, projected on the plane normal to ``z``) ``a_p = u.v``,
  ``b_p = z.(u x v)``, and for the orientation part (tip axes ``e_i``, target axes ``t_i``)
  ``a_o = sum(e_i.t_i - (z.e_i)(z.t_i))``, ``b_o = sum(z.(e_i x t_i))``;
  ``a = w_p a_p + w_o a_o``, ``b`` likewise;
- prismatic joint along ``z``: ``d = z.(p_target - p_tip)``.

Each new value is clipped to the joint's limits (hard limits). Position and orientation are
weighted by the objective's weights: ``w_p`` the mean squared position weight, ``w_o`` the mean
squared orientation weight times ``ORIENTATION_SCALE`` [m^2] (metres and radians are mixed; one
radian of tool rotation counts like 0.1 m of position). Mimic, frozen, planar and floating joints
are not moved by CCD.

A row stops when it meets the tolerances (converged), when a sweep lowered its error by less than
the fraction ``rtol`` (stalled), at the sweep cap (``max_iterations``) or at the deadline. CCD gets
close fast but converges slowly at the end: ``solver="ccd+dls"`` runs a few sweeps and then the LM
solver from where CCD stopped.
"""

from __future__ import annotations

import time

from ..backend import get_xp
from ..errors import InvalidInputError
from ..kinematics.fk import fk
from ..model import JointType, Model
from .config import IKConfig
from .seeds import clip_to_limits
from .residuals import evaluate, goal_errors
from .objectives import PoseObjective

__all__ = ["ccd_solve_rows", "ORIENTATION_SCALE", "DEFAULT_RTOL"]

ORIENTATION_SCALE = 0.01  # [m^2]: (0.1 m)^2 per rad^2
DEFAULT_RTOL = 1e-6


def _ccd_joints(model: Model, link: int):
    """(link index, q index, is_prismatic) of the CCD-movable joints, tip first."""
    frozen = {model.joint_index(n) for n in model.frozen}
    out = []
    l = link
    while l > 0:
        t = int(model.joint_type[l])
        if (t in (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC)
                and model.mimic_q[l] < 0 and l not in frozen):
            out.append((l, int(model.q_start[l]), t == JointType.PRISMATIC))
        l = int(model.link_parent[l])
    return out


def ccd_solve_rows(model: Model, objectives, q0, seed_q, problem_idx, cfg: IKConfig, *,
                   deadline: float | None, active=None, rtol: float = DEFAULT_RTOL,
                   max_sweeps: int | None = None, should_stop=None):
    """Run CCD sweeps on rows q0 (N, nq). Returns (q, converged, sweeps, pos_err, rot_err,
    timed_out), the same contract as :func:`.dls.lm_solve_rows`."""
    if len(objectives) != 1 or not isinstance(objectives[0], PoseObjective):
        raise InvalidInputError("CCD solves one pose/position/orientation goal on one tip; use "
                                "solver='dls' for several tips or custom objectives")
    obj = objectives[0]
    xp = get_xp(q0)
    N = q0.shape[0]
    joints = _ccd_joints(model, obj.link)
    if not joints:
        raise InvalidInputError(f"no revolute or prismatic joint moves {obj.link_name!r}; "
                                f"CCD has nothing to turn")
    q = clip_to_limits(model, q0)
    active = xp.ones(N, dtype=bool) if active is None else active.copy()
    w = obj.weights[problem_idx]
    wp = xp.mean(w[:, :3] ** 2, axis=1)[:, None]
    wo = (ORIENTATION_SCALE * xp.mean(w[:, 3:] ** 2, axis=1))[:, None]
    Tt = obj.targets[problem_idx]
    pt, Rt = Tt[:, :3, 3], Tt[:, :3, :3]
    lower = xp.asarray(model.lower)
    upper = xp.asarray(model.upper)

    def errors(qq):
        _, _, cost, ctx = evaluate(model, objectives, qq, seed_q, problem_idx,
                                   need_jacobian=False)
        pe, re = goal_errors(objectives, ctx, problem_idx)
        return pe, re, cost

    pe, re, cost = errors(q)
    converged = (pe <= cfg.position_tolerance) & (re <= cfg.orientation_tolerance)
    sweeps = xp.zeros(N, dtype=xp.int64)
    timed_out = False
    cap = cfg.max_iterations if max_sweeps is None else min(cfg.max_iterations, max_sweeps)
    for _ in range(cap):
        active &= ~converged
        if not bool(xp.any(active)):
            break
        if deadline is not None and time.perf_counter() >= deadline:
            timed_out = True
            break
        if should_stop is not None and should_stop():
            break
        for j, (l, qi, prismatic) in enumerate(joints):
            if j and ((deadline is not None and time.perf_counter() >= deadline)
                      or (should_stop is not None and should_stop())):
                break  # a partial sweep: every row stays a valid configuration
            T = fk(model, q, check=False)
            Te = T[:, obj.link]
            pe_w, Re = Te[:, :3, 3], Te[:, :3, :3]
            Rj = T[:, l, :3, :3]
            z = Rj @ xp.asarray(model.axis[l])
            if prismatic:
                step = xp.sum(z * (pt - pe_w), axis=1) * (wp[:, 0] > 0)
            else:
                pj = T[:, l, :3, 3]
                u = pe_w - pj
                v = pt - pj
                u = u - xp.sum(u * z, axis=1)[:, None] * z
                v = v - xp.sum(v * z, axis=1)[:, None] * z
                a = wp[:, 0] * xp.sum(u * v, axis=1)
                b = wp[:, 0] * xp.sum(z * xp.cross(u, v), axis=1)
                e, t = xp.swapaxes(Re, 1, 2), xp.swapaxes(Rt, 1, 2)  # rows: axes
                ze = xp.sum(e * z[:, None, :], axis=2)
                zt = xp.sum(t * z[:, None, :], axis=2)
                a = a + wo[:, 0] * (xp.sum(e * t, axis=(1, 2)) - xp.sum(ze * zt, axis=1))
                b = b + wo[:, 0] * xp.sum(z[:, None, :] * xp.cross(e, t), axis=(1, 2))
                step = xp.arctan2(b, a)
            new = xp.clip(q[:, qi] + step, lower[qi], upper[qi])
            q[:, qi] = xp.where(active, new, q[:, qi])
        sweeps = sweeps + active
        pe2, re2, cost2 = errors(q)
        stalled = active & (cost2 >= cost * (1.0 - rtol))
        pe = xp.where(active, pe2, pe)
        re = xp.where(active, re2, re)
        cost = xp.where(active, cost2, cost)
        converged = converged | (active & (pe <= cfg.position_tolerance)
                                 & (re <= cfg.orientation_tolerance))
        active &= ~stalled
    return q, converged, sweeps, pe, re, timed_out
