"""The chain table: the base -> tip paths of a tip set as flat, typed, read-only arrays.

This is what the compiled kernels are generated from (:mod:`ros2_ik.backends.codegen` bakes it
into the source as constants) and what the prepared solver checks its coverage by: every joint
on the paths from the base to the tips must be revolute, continuous, prismatic or fixed. Fixed
joints are folded into the transforms around the moving ones. Per moving joint ``j`` (``J`` of
them, tip by tip, base first)::

    T_tip = pre[j0] @ M_j0(q) @ pre[j1] @ M_j1(q) @ ... @ post[t]

with ``M_j`` a rotation about ``axis[j]`` by (or a translation along it of)
``q[qi[j]] * mult[j] + off[j]`` (``qi`` the leader's coordinate for a mimic joint). The residual
Jacobian's columns are ``colq`` (the q indices of the moving, not frozen coordinates on the
paths, ascending); ``col[j]`` is joint j's column, -1 for a frozen joint.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .joint_types import JointType

__all__ = ["ChainTable", "chain_table", "ONE_DOF"]

#: the joint types a chain table takes (besides fixed joints)
ONE_DOF = (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC)


@dataclass(frozen=True, eq=False)
class ChainTable:
    """The paths from the base to ``tips`` (see the module docstring); every array read-only."""

    tips: tuple           # (T,) link indices of the tips
    starts: np.ndarray    # (T+1,) int64: the joints of tip t are starts[t]:starts[t+1]
    pre: np.ndarray       # (J, 4, 4) float64 fixed transform before joint j
    axis: np.ndarray      # (J, 3) float64 unit axis in the joint frame
    prismatic: np.ndarray  # (J,) bool
    qi: np.ndarray        # (J,) int64 the q index driving joint j (a mimic joint's leader)
    mult: np.ndarray      # (J,) float64 mimic multiplier (1 otherwise)
    off: np.ndarray       # (J,) float64 mimic offset (0 otherwise) [rad or m]
    col: np.ndarray       # (J,) int64 residual Jacobian column of joint j (-1: frozen)
    link: np.ndarray      # (J,) int64 joint j's child link
    mimic: np.ndarray     # (J,) bool
    post: np.ndarray      # (T, 4, 4) float64 fixed transform after tip t's last joint
    colq: np.ndarray      # (nc,) int64 the q index of each column

    @property
    def T(self) -> int:
        """Number of tips."""
        return len(self.tips)

    @property
    def nc(self) -> int:
        """Number of residual Jacobian columns (moving coordinates)."""
        return int(self.colq.shape[0])

    @property
    def nj(self) -> int:
        """Number of moving joints on the paths (a joint on two paths counts twice)."""
        return int(self.qi.shape[0])


def chain_table(model, tips) -> ChainTable | None:
    """The chain table of ``tips`` (link names or indices) of ``model``, kept per model and tip
    set; None when a joint on a path is not revolute, continuous, prismatic or fixed."""
    ids = tuple(int(model.link_index(t)) if isinstance(t, str) else int(t) for t in tips)
    return model.memo("model.chain", ids, lambda: _build(model, ids))


def _build(model, tips) -> ChainTable | None:
    active_v = {int(v) for v in model.v_active}
    pre, axis, prismatic, qi, mult, off, colq_of, links, mimic = ([] for _ in range(9))
    starts, posts = [0], []
    for tip in tips:
        path = []
        l = tip
        while l > 0:
            path.append(l)
            l = int(model.link_parent[l])
        acc = np.eye(4)
        for l in reversed(path):
            t = int(model.joint_type[l])
            if t == JointType.FIXED:
                acc = acc @ model.origin[l]
                continue
            if t not in ONE_DOF:
                return None
            pre.append(acc @ model.origin[l])
            acc = np.eye(4)
            axis.append(model.axis[l])
            prismatic.append(t == JointType.PRISMATIC)
            links.append(l)
            if model.mimic_q[l] >= 0:
                qi.append(int(model.mimic_q[l]))
                mult.append(float(model.mimic_multiplier[l]))
                off.append(float(model.mimic_offset[l]))
                mimic.append(True)
            else:
                qi.append(int(model.q_start[l]))
                mult.append(1.0)
                off.append(0.0)
                mimic.append(False)
            colq_of.append(qi[-1] if int(model.q_to_v[qi[-1]]) in active_v else -1)
        posts.append(acc)
        starts.append(len(pre))
    colq = sorted({c for c in colq_of if c >= 0})
    index = {c: i for i, c in enumerate(colq)}
    table = ChainTable(
        tips=tuple(tips),
        starts=np.array(starts, dtype=np.int64),
        pre=np.array(pre, dtype=np.float64).reshape(-1, 4, 4),
        axis=np.array(axis, dtype=np.float64).reshape(-1, 3),
        prismatic=np.array(prismatic, dtype=bool),
        qi=np.array(qi, dtype=np.int64),
        mult=np.array(mult, dtype=np.float64),
        off=np.array(off, dtype=np.float64),
        col=np.array([index.get(c, -1) for c in colq_of], dtype=np.int64),
        link=np.array(links, dtype=np.int64),
        mimic=np.array(mimic, dtype=bool),
        post=np.array(posts, dtype=np.float64).reshape(-1, 4, 4),
        colq=np.array(colq, dtype=np.int64),
    )
    for f in fields(table):
        a = getattr(table, f.name)
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return table
