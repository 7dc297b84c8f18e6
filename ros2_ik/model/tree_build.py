"""Building a :class:`~ros2_ik.model.tree.Model`'s flat arrays from a parsed description
(:class:`~ros2_ik.model.urdf.RobotDesc`): the kept links and their order, the joints' arrays,
mimic joints resolved to their first free leader, the coordinate layout and the active
velocities; and the URDF origin's rotation (:func:`rpy_xyz_to_matrix`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidInputError, UnknownJointError, UnknownLinkError
from ..validate import check_name, check_names, naming
from .joint_types import JointType
from .urdf import JointDesc, RobotDesc

__all__ = ["rpy_xyz_to_matrix", "NQ", "NV", "BY_NAME", "check_build_args",
           "children_by_parent", "path_to_base", "subtree_links", "kept_links",
           "topological_order", "leaf_tips", "check_frozen", "MimicResolver",
           "joint_arrays", "CoordinateLayout", "coordinate_layout", "active_velocities",
           "read_only", "plane_basis"]

NQ = {JointType.FIXED: 0, JointType.REVOLUTE: 1, JointType.CONTINUOUS: 1,
       JointType.PRISMATIC: 1, JointType.PLANAR: 3, JointType.FLOATING: 7}
NV = {JointType.FIXED: 0, JointType.REVOLUTE: 1, JointType.CONTINUOUS: 1,
       JointType.PRISMATIC: 1, JointType.PLANAR: 3, JointType.FLOATING: 6}
BY_NAME = {"fixed": JointType.FIXED, "revolute": JointType.REVOLUTE,
            "continuous": JointType.CONTINUOUS, "prismatic": JointType.PRISMATIC,
            "planar": JointType.PLANAR, "floating": JointType.FLOATING}



def rpy_xyz_to_matrix(xyz, rpy) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    T = np.eye(4)
    # URDF: R = Rz(yaw) @ Ry(pitch) @ Rx(roll)
    T[:3, :3] = [[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                 [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                 [-sp, cp * sr, cp * cr]]
    T[:3, 3] = xyz
    return T


def plane_basis(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors spanning the plane normal to ``n`` (right-handed: e1 x e2 = n)."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = helper - n * (helper @ n)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    return e1, e2


# ---------------------------------------------------------------------- Model._build's steps
# Model._build runs these in order: the argument checks, the links kept, their order, the
# per-link joint arrays, the coordinate layout (mimic joints resolved to their free leaders)
# and the velocity columns left after freezing. A bad call fails at its first error in that
# order: the argument types, an unknown base, an unknown tip or one not below the base, an
# unknown frozen joint, a mimic joint locked on its own.

def check_build_args(desc: RobotDesc, base, tips, frozen):
    """Type-check ``base``/``tips``/``frozen`` and the base link's name.

    Returns ``(base, tips, frozen)``: ``base`` a link of ``desc`` (its root when None), ``tips``
    None or a list of names (not yet checked against the tree), ``frozen`` a list of names."""
    base = desc.root if base is None else check_name(base, "base")
    if tips is not None:
        tips = check_names(tips, "tips", allow_empty=True)
    frozen = check_names(frozen, "frozen", allow_empty=True, kind="joint")
    if base not in desc.links:
        raise naming(UnknownLinkError(base, desc.links), "base")
    if isinstance(tips, str):
        tips = [tips]
    return base, tips, frozen


def children_by_parent(desc: RobotDesc) -> dict[str, list[JointDesc]]:
    """Parent link name -> the joints out of it, in URDF order."""
    children: dict[str, list[JointDesc]] = {}
    for j in desc.joints:
        children.setdefault(j.parent, []).append(j)
    return children


def path_to_base(desc: RobotDesc, by_child: dict[str, JointDesc], base: str,
                  tip: str) -> list[str]:
    """The links from ``tip`` up to (excluding) ``base``, child first; ``tip`` must be below
    ``base``."""
    if tip not in desc.links:
        raise naming(UnknownLinkError(tip, desc.links), "tips")
    path, cur = [], tip
    while cur != base:
        path.append(cur)
        j = by_child.get(cur)
        if j is None:
            raise InvalidInputError(
                f"tip link {tip!r} is not below base link {base!r} in the tree; "
                "a chain or sub-tree must go from an ancestor down to its tips "
                "(for the motion of one frame relative to another on a different "
                "branch use the frame-to-frame Jacobian)"
            )
        cur = j.parent
    return path


def subtree_links(children: dict[str, list[JointDesc]], base: str) -> set[str]:
    """``base`` and every link below it."""
    keep, stack = {base}, [base]
    while stack:
        for j in children.get(stack.pop(), ()):
            keep.add(j.child)
            stack.append(j.child)
    return keep


def kept_links(desc: RobotDesc, by_child: dict[str, JointDesc],
                children: dict[str, list[JointDesc]], base: str, tips):
    """The links to keep and the tips: the union of the ``base`` -> tip paths and the tips as a
    tuple, or (no tips or an empty list) the whole sub-tree under ``base`` and None."""
    if tips:
        keep = {base}
        for tip in tips:
            keep.update(path_to_base(desc, by_child, base, tip))
        return keep, tuple(tips)
    return subtree_links(children, base), None


def topological_order(children: dict[str, list[JointDesc]], keep: set[str],
                       base: str) -> list[str]:
    """The kept links in DFS pre-order from ``base`` (parents first, URDF order among
    siblings)."""
    order: list[str] = []
    stack = [base]
    while stack:
        ln = stack.pop()
        order.append(ln)
        kids = [j.child for j in children.get(ln, ()) if j.child in keep]
        stack.extend(reversed(kids))
    return order


def leaf_tips(order: list[str], by_child: dict[str, JointDesc], base: str) -> tuple[str, ...]:
    """The default tips of a sub-tree: its leaf links in ``order`` (the base alone if none)."""
    has_child = {by_child[n].parent for n in order[1:]}
    return tuple(n for n in order if n not in has_child) or (base,)


def check_frozen(frozen: list[str], jindex: dict[str, int],
                  jdesc: list[JointDesc | None]) -> frozenset:
    """``frozen`` as a frozenset; each name must be a joint of the selection."""
    frozen = frozenset(frozen)
    for n in frozen:
        if n not in jindex:
            raise naming(UnknownJointError(n, [j.name for j in jdesc[1:]]), "frozen")
    return frozen


class MimicResolver:
    """Resolves mimic chains to their first free leader inside the selection (a leader outside
    the selection makes the joint free). Memoized: each chain is walked once.

    Calling it with a joint gives ``(leader, multiplier, offset)`` with the chain's multipliers
    and offsets composed, or None when the joint is free."""

    def __init__(self, by_name: dict[str, JointDesc], jindex: dict[str, int]):
        self._by_name = by_name  # every joint of the robot by name
        self._jindex = jindex    # the selection's joints -> link index
        self._resolved: dict[str, tuple | None] = {}

    def __call__(self, j: JointDesc):
        resolved = self._resolved
        path, cur = [], j
        while cur.mimic_joint is not None and cur.name not in resolved:
            path.append(cur)
            leader = self._by_name[cur.mimic_joint]
            if leader.name not in self._jindex:
                resolved[cur.name] = None  # leader outside the selection: free
                path.pop()
                break
            cur = leader
        if cur.name in resolved:
            res = resolved[cur.name]
        elif cur.mimic_joint is None:
            res = (cur, 1.0, 0.0)  # cur is a free leader
        else:
            res = None
        for p in reversed(path):
            if res is not None:
                leader, m, o = res
                res = (leader, p.mimic_multiplier * m, p.mimic_multiplier * o
                       + p.mimic_offset)
            resolved[p.name] = res
        return resolved.get(j.name, res)


def joint_arrays(jdesc: list[JointDesc | None], index: dict[str, int]) -> dict[str, np.ndarray]:
    """The per-link joint arrays (writable), keyed by their :class:`Model` field names:
    ``link_parent``, ``joint_type``, ``origin``, ``axis``, ``planar_e1``, ``planar_e2``."""
    L = len(jdesc)
    link_parent = np.full(L, -1, dtype=np.int64)
    jtype = np.zeros(L, dtype=np.int64)
    origin = np.tile(np.eye(4), (L, 1, 1))
    axis = np.zeros((L, 3))
    e1 = np.zeros((L, 3))
    e2 = np.zeros((L, 3))
    for l in range(1, L):
        j = jdesc[l]
        link_parent[l] = index[j.parent]
        t = BY_NAME[j.type]
        jtype[l] = t
        origin[l] = rpy_xyz_to_matrix(j.xyz, j.rpy)
        ax = np.asarray(j.axis, dtype=float)
        axis[l] = ax
        if t == JointType.PLANAR:
            e1[l], e2[l] = plane_basis(ax)
    return {"link_parent": link_parent, "joint_type": jtype, "origin": origin, "axis": axis,
            "planar_e1": e1, "planar_e2": e2}


@dataclass(eq=False)
class CoordinateLayout:
    """The generalized coordinates of a selection, filled joint by joint in link order: the
    per-link starts and mimic rows (arrays of ``L``), the per-coordinate lists (``nq`` or ``nv``
    long)."""

    q_start: np.ndarray
    v_start: np.ndarray
    mimic_q: np.ndarray
    mimic_multiplier: np.ndarray
    mimic_offset: np.ndarray
    q_names: list[str] = field(default_factory=list)
    v_names: list[str] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    velocity_limit: list[float] = field(default_factory=list)
    q_joint: list[int] = field(default_factory=list)
    v_joint: list[int] = field(default_factory=list)
    q_continuous: list[bool] = field(default_factory=list)
    q_to_v: list[int] = field(default_factory=list)

    @classmethod
    def empty(cls, num_links: int) -> "CoordinateLayout":
        return cls(q_start=np.full(num_links, -1, dtype=np.int64),
                   v_start=np.full(num_links, -1, dtype=np.int64),
                   mimic_q=np.full(num_links, -1, dtype=np.int64),
                   mimic_multiplier=np.ones(num_links), mimic_offset=np.zeros(num_links))

    def add_joint(self, l: int, j: JointDesc, t: JointType) -> None:
        """Append the coordinates of joint ``j`` (into link ``l``, of type ``t``); none for a
        fixed joint."""
        nq_j, nv_j = NQ[t], NV[t]
        if nq_j == 0:
            return
        self.q_start[l], self.v_start[l] = len(self.q_names), len(self.v_names)
        v0 = self.v_start[l]
        if t in (JointType.REVOLUTE, JointType.PRISMATIC, JointType.CONTINUOUS):
            lo, hi = (j.lower, j.upper) if t != JointType.CONTINUOUS else (-math.inf, math.inf)
            self._add_q(j.name, lo, hi, t == JointType.CONTINUOUS, v0)
            self._add_v(j.name, j.velocity)
        elif t == JointType.PLANAR:
            for k, s in enumerate(("x", "y", "theta")):
                self._add_q(f"{j.name}/{s}", -math.inf, math.inf, s == "theta", v0 + k)
                self._add_v(f"{j.name}/{s}", j.velocity)
        else:  # floating
            for k, s in enumerate(("x", "y", "z", "qx", "qy", "qz", "qw")):
                self._add_q(f"{j.name}/{s}", -math.inf, math.inf, False, v0 + k if k < 3 else -1)
            for s in ("vx", "vy", "vz", "wx", "wy", "wz"):
                self._add_v(f"{j.name}/{s}", j.velocity)
        self.q_joint.extend([l] * nq_j)
        self.v_joint.extend([l] * nv_j)

    def _add_q(self, name: str, lo: float, hi: float, continuous: bool, v: int) -> None:
        self.q_names.append(name)
        self.lower.append(lo)
        self.upper.append(hi)
        self.q_continuous.append(continuous)
        self.q_to_v.append(v)

    def _add_v(self, name: str, velocity: float) -> None:
        self.v_names.append(name)
        self.velocity_limit.append(velocity)

    def set_mimic(self, l: int, ll: int, leader: JointDesc, mult: float, off: float) -> None:
        """Make the joint into link ``l`` follow ``leader`` (the joint into link ``ll``)."""
        if self.q_start[ll] < 0:  # leader itself became fixed? cannot happen (1-DOF types)
            raise InvalidInputError(f"mimic leader {leader.name!r} has no coordinate")
        self.mimic_q[l] = self.q_start[ll]
        self.mimic_multiplier[l] = mult
        self.mimic_offset[l] = off

    def model_fields(self) -> dict[str, Any]:
        """The layout as :class:`Model` fields: read-only arrays, name tuples, ``nq``/``nv``."""
        return {
            "q_start": read_only(self.q_start), "v_start": read_only(self.v_start),
            "mimic_q": read_only(self.mimic_q),
            "mimic_multiplier": read_only(self.mimic_multiplier),
            "mimic_offset": read_only(self.mimic_offset),
            "nq": len(self.q_names), "nv": len(self.v_names),
            "q_names": tuple(self.q_names), "v_names": tuple(self.v_names),
            "lower": read_only(np.array(self.lower, dtype=float)),
            "upper": read_only(np.array(self.upper, dtype=float)),
            "velocity_limit": read_only(np.array(self.velocity_limit, dtype=float)),
            "q_joint": read_only(np.array(self.q_joint, dtype=np.int64)),
            "v_joint": read_only(np.array(self.v_joint, dtype=np.int64)),
            "q_continuous": read_only(np.array(self.q_continuous, dtype=bool)),
            "q_to_v": read_only(np.array(self.q_to_v, dtype=np.int64)),
        }


def coordinate_layout(jdesc: list[JointDesc | None], jindex: dict[str, int],
                       resolve: MimicResolver, frozen: frozenset) -> CoordinateLayout:
    """Lay out ``q`` and ``qd`` joint by joint in link order; a mimic joint with a leader in the
    selection gets no coordinates but a mimic row (set once all leaders have theirs). A mimic
    joint cannot be frozen on its own."""
    layout = CoordinateLayout.empty(len(jdesc))
    mimics: list[tuple[int, JointDesc, float, float]] = []
    for l in range(1, len(jdesc)):
        j = jdesc[l]
        if j.mimic_joint is not None:
            res = resolve(j)
            if res is not None:
                mimics.append((l, res[0], res[1], res[2]))
                if j.name in frozen:
                    raise InvalidInputError(
                        f"joint {j.name!r} is a mimic of {res[0].name!r} and cannot be locked "
                        f"on its own; lock {res[0].name!r} instead"
                    )
                continue
        layout.add_joint(l, j, BY_NAME[j.type])
    for l, leader, mult, off in mimics:
        layout.set_mimic(l, jindex[leader.name], leader, mult, off)
    return layout


def active_velocities(frozen: frozenset, jindex: dict[str, int], v_start: np.ndarray,
                       jtype: np.ndarray, nv: int) -> np.ndarray:
    """The velocity indices not owned by a frozen joint, in order (``Model.v_active``)."""
    frozen_v = set()
    for n in frozen:
        l = jindex[n]
        if v_start[l] >= 0:
            frozen_v.update(range(v_start[l], v_start[l] + NV[JointType(jtype[l])]))
    return np.array([i for i in range(nv) if i not in frozen_v], dtype=np.int64)


def read_only(a) -> np.ndarray:
    """``a`` as an array (itself when it is one) with writing switched off."""
    a = np.asarray(a)
    a.setflags(write=False)
    return a
