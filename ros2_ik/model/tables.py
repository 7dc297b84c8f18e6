"""Derived tables of a model: arrays computed from its fields once, read-only, typed.

:meth:`ros2_ik.model.Model.tables` builds them (lazily, on first access) with
:func:`build_tables`; every consumer (forward kinematics, Jacobians, the compiled kinematics,
the solvers) reads them from there, so each table has one definition. Notation: ``L`` links,
``nq`` / ``nv`` coordinates / velocities, ``C`` screw contributions (one per 1-D motion of a
joint: 1 for a revolute, continuous or prismatic joint, 3 for planar, 6 for floating), ``F``
floating joints. Every array is NumPy and not writeable (``writeable=False``). Every table is
linear in the model's size (a robot of 20,000 links has tables of a few megabytes): what is
quadratic (which joints move which link) is computed for the frames a call asks for.

What depends on a model *and* something else (a tip set, a seed count, a frame selection) is not
here: those are memos, :meth:`ros2_ik.model.Model.memo`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .joint_types import JointType

__all__ = ["MotionTable", "ScrewTable", "ModelTables", "build_tables"]

_ONE_DOF = (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC)


def _read_only(obj):
    """``obj`` with every array field set ``writeable=False`` (returned for chaining)."""
    for f in fields(obj):
        a = getattr(obj, f.name)
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return obj


@dataclass(frozen=True, eq=False)
class MotionTable:
    """The joints by motion type, for the joint motion transforms and ``q (+) v`` (FK).

    Revolute and continuous joints (R of them), prismatic (Pr): the child link, the q index that
    drives the joint (a mimic joint's leader) and the factor and offset applied to it (1 and 0
    unless mimic)."""

    rot_l: np.ndarray     # (R,) int64 child link of each revolute / continuous joint
    rot_q: np.ndarray     # (R,) int64 q index driving it
    rot_m: np.ndarray     # (R,) float64 multiplier (mimic; else 1)
    rot_o: np.ndarray     # (R,) float64 offset [rad] (mimic; else 0)
    pri_l: np.ndarray     # (Pr,) int64 child link of each prismatic joint
    pri_q: np.ndarray     # (Pr,) int64
    pri_m: np.ndarray     # (Pr,) float64
    pri_o: np.ndarray     # (Pr,) float64 [m]
    planar: np.ndarray    # (n_planar,) int64 child links of planar joints
    floating: np.ndarray  # (F,) int64 child links of floating joints
    simple_q: np.ndarray  # (n,) int64 coordinates that add directly to a velocity (q_to_v >= 0)
    simple_v: np.ndarray  # (n,) int64 their velocity indices


@dataclass(frozen=True, eq=False)
class ScrewTable:
    """The elementary screw contributions of the Jacobians, one per 1-D motion of a joint."""

    link: np.ndarray     # (C,) int64 the joint's child link
    dir: np.ndarray      # (C, 3) float64 unit direction in the joint frame
    rot: np.ndarray      # (C,) bool rotation (else translation)
    col: np.ndarray      # (C,) int64 the velocity column it adds into
    factor: np.ndarray   # (C,) float64 times this (a mimic joint's multiplier; else 1)
    parent: np.ndarray   # (C,) int64 the parent link of ``link``


@dataclass(frozen=True, eq=False)
class ModelTables:
    """Every model-wide derived table (see the module docstring)."""

    motion: MotionTable
    screws: ScrewTable
    neutral_q: np.ndarray        # (nq,) float64 mid-range configuration (Model.neutral_q)
    wide_revolute: np.ndarray    # (nq,) bool revolute coordinates whose limits span >= 2 pi
    limited_revolute: np.ndarray  # (nq,) bool revolute coordinates with finite limits (a value
    #                               past a limit goes around by 2 pi where that lands inside)
    limited_columns: np.ndarray  # (n,) int64 active Jacobian columns of bounded 1-DOF joints
    #                              (not wide revolute ones, which go around)
    limited_q: np.ndarray        # (n,) int64 their q indices


def build_tables(model) -> ModelTables:
    """All derived tables of ``model`` (a :class:`ros2_ik.model.Model`)."""
    screws = _screws(model)
    rev = _revolute(model)
    with np.errstate(invalid="ignore"):
        limited = rev & np.isfinite(model.lower) & np.isfinite(model.upper)
        wide = limited & (model.upper - model.lower >= 2 * math.pi)
    cols, qs = _limited_columns(model, wide)
    return _read_only(ModelTables(
        motion=_motion(model), screws=screws, neutral_q=_neutral_q(model), wide_revolute=wide,
        limited_revolute=limited, limited_columns=cols, limited_q=qs))


def _motion(model) -> MotionTable:
    rot_l, rot_q, rot_m, rot_o = [], [], [], []
    pri_l, pri_q, pri_m, pri_o = [], [], [], []
    planar, floating = [], []
    for l in range(1, model.num_links):
        t = model.joint_type[l]
        if model.mimic_q[l] >= 0:
            qi, m, o = int(model.mimic_q[l]), float(model.mimic_multiplier[l]), float(
                model.mimic_offset[l])
        else:
            qi, m, o = int(model.q_start[l]), 1.0, 0.0
        if t in (JointType.REVOLUTE, JointType.CONTINUOUS):
            rot_l.append(l), rot_q.append(qi), rot_m.append(m), rot_o.append(o)
        elif t == JointType.PRISMATIC:
            pri_l.append(l), pri_q.append(qi), pri_m.append(m), pri_o.append(o)
        elif t == JointType.PLANAR:
            planar.append(l)
        elif t == JointType.FLOATING:
            floating.append(l)
    I = lambda a: np.array(a, dtype=np.int64)  # noqa: E731
    F = lambda a: np.array(a, dtype=float)  # noqa: E731
    qv = np.asarray(model.q_to_v)
    simple = np.nonzero(qv >= 0)[0]
    return _read_only(MotionTable(
        rot_l=I(rot_l), rot_q=I(rot_q), rot_m=F(rot_m), rot_o=F(rot_o),
        pri_l=I(pri_l), pri_q=I(pri_q), pri_m=F(pri_m), pri_o=F(pri_o),
        planar=I(planar), floating=I(floating), simple_q=I(simple), simple_v=I(qv[simple])))


def _screws(model) -> ScrewTable:
    links, dirs, rot, cols, fac = [], [], [], [], []
    ex = np.eye(3)
    for l in range(1, model.num_links):
        t = model.joint_type[l]
        ax = model.axis[l]
        if model.mimic_q[l] >= 0:
            col, f = int(model.q_to_v[model.mimic_q[l]]), float(model.mimic_multiplier[l])
        else:
            col, f = int(model.v_start[l]), 1.0
        if t in _ONE_DOF:
            links.append(l), dirs.append(ax), rot.append(t != JointType.PRISMATIC)
            cols.append(col), fac.append(f)
        elif t == JointType.PLANAR:
            for k, (d, r) in enumerate(((model.planar_e1[l], False), (model.planar_e2[l], False),
                                        (ax, True))):
                links.append(l), dirs.append(d), rot.append(r), cols.append(col + k)
                fac.append(1.0)
        elif t == JointType.FLOATING:
            for k in range(6):
                links.append(l), dirs.append(ex[k % 3]), rot.append(k >= 3)
                cols.append(col + k), fac.append(1.0)
    C = len(links)
    link = np.array(links, dtype=np.int64)
    return _read_only(ScrewTable(link=link, dir=np.array(dirs, dtype=float).reshape(C, 3),
                                 rot=np.array(rot, dtype=bool),
                                 col=np.array(cols, dtype=np.int64),
                                 factor=np.array(fac, dtype=np.float64),
                                 parent=np.asarray(model.link_parent)[link]))


def _neutral_q(model) -> np.ndarray:
    bounded = np.isfinite(model.lower) & np.isfinite(model.upper)
    q = np.zeros(model.nq)
    q[bounded] = 0.5 * (model.lower[bounded] + model.upper[bounded])
    # a limit on one side only: 0 when allowed, else that limit
    q = np.clip(q, model.lower, model.upper)
    for s in model.floating_q_starts:
        q[s + 6] = 1.0
    return q


def _revolute(model) -> np.ndarray:
    return np.array([model.joint_type[int(l)] == JointType.REVOLUTE for l in model.q_joint],
                    dtype=bool).reshape(-1)


def _limited_columns(model, wide) -> tuple[np.ndarray, np.ndarray]:
    cols, qs = [], []
    for c, v in enumerate(model.v_active):
        l = int(model.v_joint[v])
        if int(model.joint_type[l]) not in _ONE_DOF or model.mimic_q[l] >= 0:
            continue
        qi = int(model.q_start[l])
        if np.isfinite(model.lower[qi]) and np.isfinite(model.upper[qi]) and not wide[qi]:
            cols.append(c)
            qs.append(qi)
    return np.array(cols, dtype=np.int64), np.array(qs, dtype=np.int64)
