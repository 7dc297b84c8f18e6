"""The immutable kinematic model: a tree of links as flat arrays.

Layout (``L`` links, index 0 is the model's root/base link, parents come before children):

- ``link_parent[l]``: parent link index (-1 for the root).
- The joint *into* link ``l`` (``l >= 1``) is stored at index ``l`` of every per-joint array:
  ``joint_type[l]``, ``origin[l]`` (4x4, parent link frame -> joint frame; URDF child frame == joint
  frame), ``axis[l]`` (unit, joint frame), ``q_start[l]``/``nq[l]``, ``v_start[l]``/``nv[l]``.
- Generalized coordinates ``q`` (size ``nq``) and velocities ``qd`` (size ``nv``): revolute,
  continuous, prismatic 1/1; planar 3/3 (x, y along ``planar_e1/e2``, angle about ``axis``);
  floating 7/6 (q = x y z qx qy qz qw, ROS quaternion order; qd = linear velocity of the child
  origin and angular velocity, both in the joint (parent-side) frame); fixed 0/0.
- Mimic joints have no coordinates of their own: value = ``mimic_multiplier * q[leader] +
  mimic_offset``, where ``mimic_q[l]`` is the leader's q index (chains of mimics are resolved to
  the first free leader).
- Frozen (locked) joints keep their coordinates in ``q`` but are excluded from Jacobian columns:
  ``v_active`` lists the velocity indices that remain, in order.

Units: metres, radians. Continuous joints are unbounded (limits +-inf); use
:func:`ros2_ik.kinematics.wrap_q` to bring them to (-pi, pi].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..backend import get_xp
from ..errors import (InputTypeError, InvalidInputError, ShapeError, UnknownJointError,
                      UnknownLinkError)
from ..validate import check_int, check_memory, check_name, check_names, describe, naming
from .joint_types import JointType
from .tables import ModelTables, build_tables
from .urdf import MAX_VALUE, JointDesc, RobotDesc, parse_urdf

__all__ = ["JointType", "Model", "check_model"]


_NQ = {JointType.FIXED: 0, JointType.REVOLUTE: 1, JointType.CONTINUOUS: 1,
       JointType.PRISMATIC: 1, JointType.PLANAR: 3, JointType.FLOATING: 7}
_NV = {JointType.FIXED: 0, JointType.REVOLUTE: 1, JointType.CONTINUOUS: 1,
       JointType.PRISMATIC: 1, JointType.PLANAR: 3, JointType.FLOATING: 6}
_BY_NAME = {"fixed": JointType.FIXED, "revolute": JointType.REVOLUTE,
            "continuous": JointType.CONTINUOUS, "prismatic": JointType.PRISMATIC,
            "planar": JointType.PLANAR, "floating": JointType.FLOATING}

#: Largest batch any core entry point accepts in one call.
MAX_BATCH = 50_000_000

_MISSING = object()  # Model.memo: no value kept for a key (None is a value)


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


def _plane_basis(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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

def _check_build_args(desc: RobotDesc, base, tips, frozen):
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


def _children_by_parent(desc: RobotDesc) -> dict[str, list[JointDesc]]:
    """Parent link name -> the joints out of it, in URDF order."""
    children: dict[str, list[JointDesc]] = {}
    for j in desc.joints:
        children.setdefault(j.parent, []).append(j)
    return children


def _path_to_base(desc: RobotDesc, by_child: dict[str, JointDesc], base: str,
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


def _subtree_links(children: dict[str, list[JointDesc]], base: str) -> set[str]:
    """``base`` and every link below it."""
    keep, stack = {base}, [base]
    while stack:
        for j in children.get(stack.pop(), ()):
            keep.add(j.child)
            stack.append(j.child)
    return keep


def _kept_links(desc: RobotDesc, by_child: dict[str, JointDesc],
                children: dict[str, list[JointDesc]], base: str, tips):
    """The links to keep and the tips: the union of the ``base`` -> tip paths and the tips as a
    tuple, or (no tips or an empty list) the whole sub-tree under ``base`` and None."""
    if tips:
        keep = {base}
        for tip in tips:
            keep.update(_path_to_base(desc, by_child, base, tip))
        return keep, tuple(tips)
    return _subtree_links(children, base), None


def _topological_order(children: dict[str, list[JointDesc]], keep: set[str],
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


def _leaf_tips(order: list[str], by_child: dict[str, JointDesc], base: str) -> tuple[str, ...]:
    """The default tips of a sub-tree: its leaf links in ``order`` (the base alone if none)."""
    has_child = {by_child[n].parent for n in order[1:]}
    return tuple(n for n in order if n not in has_child) or (base,)


def _check_frozen(frozen: list[str], jindex: dict[str, int],
                  jdesc: list[JointDesc | None]) -> frozenset:
    """``frozen`` as a frozenset; each name must be a joint of the selection."""
    frozen = frozenset(frozen)
    for n in frozen:
        if n not in jindex:
            raise naming(UnknownJointError(n, [j.name for j in jdesc[1:]]), "frozen")
    return frozen


class _MimicResolver:
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


def _joint_arrays(jdesc: list[JointDesc | None], index: dict[str, int]) -> dict[str, np.ndarray]:
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
        t = _BY_NAME[j.type]
        jtype[l] = t
        origin[l] = rpy_xyz_to_matrix(j.xyz, j.rpy)
        ax = np.asarray(j.axis, dtype=float)
        axis[l] = ax
        if t == JointType.PLANAR:
            e1[l], e2[l] = _plane_basis(ax)
    return {"link_parent": link_parent, "joint_type": jtype, "origin": origin, "axis": axis,
            "planar_e1": e1, "planar_e2": e2}


@dataclass(eq=False)
class _CoordinateLayout:
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
    def empty(cls, num_links: int) -> "_CoordinateLayout":
        return cls(q_start=np.full(num_links, -1, dtype=np.int64),
                   v_start=np.full(num_links, -1, dtype=np.int64),
                   mimic_q=np.full(num_links, -1, dtype=np.int64),
                   mimic_multiplier=np.ones(num_links), mimic_offset=np.zeros(num_links))

    def add_joint(self, l: int, j: JointDesc, t: JointType) -> None:
        """Append the coordinates of joint ``j`` (into link ``l``, of type ``t``); none for a
        fixed joint."""
        nq_j, nv_j = _NQ[t], _NV[t]
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
            "q_start": _read_only(self.q_start), "v_start": _read_only(self.v_start),
            "mimic_q": _read_only(self.mimic_q),
            "mimic_multiplier": _read_only(self.mimic_multiplier),
            "mimic_offset": _read_only(self.mimic_offset),
            "nq": len(self.q_names), "nv": len(self.v_names),
            "q_names": tuple(self.q_names), "v_names": tuple(self.v_names),
            "lower": _read_only(np.array(self.lower, dtype=float)),
            "upper": _read_only(np.array(self.upper, dtype=float)),
            "velocity_limit": _read_only(np.array(self.velocity_limit, dtype=float)),
            "q_joint": _read_only(np.array(self.q_joint, dtype=np.int64)),
            "v_joint": _read_only(np.array(self.v_joint, dtype=np.int64)),
            "q_continuous": _read_only(np.array(self.q_continuous, dtype=bool)),
            "q_to_v": _read_only(np.array(self.q_to_v, dtype=np.int64)),
        }


def _coordinate_layout(jdesc: list[JointDesc | None], jindex: dict[str, int],
                       resolve: _MimicResolver, frozen: frozenset) -> _CoordinateLayout:
    """Lay out ``q`` and ``qd`` joint by joint in link order; a mimic joint with a leader in the
    selection gets no coordinates but a mimic row (set once all leaders have theirs). A mimic
    joint cannot be frozen on its own."""
    layout = _CoordinateLayout.empty(len(jdesc))
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
        layout.add_joint(l, j, _BY_NAME[j.type])
    for l, leader, mult, off in mimics:
        layout.set_mimic(l, jindex[leader.name], leader, mult, off)
    return layout


def _active_velocities(frozen: frozenset, jindex: dict[str, int], v_start: np.ndarray,
                       jtype: np.ndarray, nv: int) -> np.ndarray:
    """The velocity indices not owned by a frozen joint, in order (``Model.v_active``)."""
    frozen_v = set()
    for n in frozen:
        l = jindex[n]
        if v_start[l] >= 0:
            frozen_v.update(range(v_start[l], v_start[l] + _NV[JointType(jtype[l])]))
    return np.array([i for i in range(nv) if i not in frozen_v], dtype=np.int64)


def _read_only(a) -> np.ndarray:
    """``a`` as an array (itself when it is one) with writing switched off."""
    a = np.asarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Model:
    """An immutable kinematic tree (see the module docstring for the array layout).

    Build one with :meth:`from_urdf`; select a chain or a sub-tree with :meth:`chain` /
    :meth:`subtree`; freeze joints with :meth:`lock`. All arrays are NumPy, read-only.
    """

    name: str
    desc: RobotDesc = field(repr=False)
    link_names: tuple[str, ...]
    link_parent: np.ndarray = field(repr=False)       # (L,) int
    joint_names: tuple[str, ...] = field(repr=False)  # (L,) name of the joint into link l ('' root)
    joint_type: np.ndarray = field(repr=False)        # (L,) int (JointType)
    origin: np.ndarray = field(repr=False)            # (L, 4, 4)
    axis: np.ndarray = field(repr=False)              # (L, 3)
    planar_e1: np.ndarray = field(repr=False)         # (L, 3)
    planar_e2: np.ndarray = field(repr=False)         # (L, 3)
    q_start: np.ndarray = field(repr=False)           # (L,) int, -1 if none
    v_start: np.ndarray = field(repr=False)           # (L,) int, -1 if none
    mimic_q: np.ndarray = field(repr=False)           # (L,) int leader q index, -1 if not mimic
    mimic_multiplier: np.ndarray = field(repr=False)  # (L,)
    mimic_offset: np.ndarray = field(repr=False)      # (L,)
    nq: int
    nv: int
    q_names: tuple[str, ...] = field(repr=False)      # (nq,) coordinate names
    v_names: tuple[str, ...] = field(repr=False)      # (nv,)
    lower: np.ndarray = field(repr=False)             # (nq,) [m or rad], -inf where unbounded
    upper: np.ndarray = field(repr=False)             # (nq,)
    velocity_limit: np.ndarray = field(repr=False)    # (nv,)
    q_joint: np.ndarray = field(repr=False)           # (nq,) link index of the joint owning q_i
    v_joint: np.ndarray = field(repr=False)           # (nv,)
    q_continuous: np.ndarray = field(repr=False)      # (nq,) bool: wraps modulo 2 pi
    q_to_v: np.ndarray = field(repr=False)            # (nq,) v index for 1-DOF-like coords, -1 else
    frozen: frozenset = field(default=frozenset())    # joint names excluded from the Jacobian
    v_active: np.ndarray = field(repr=False, default=None)  # (nv_active,) int
    tips: tuple[str, ...] = ()
    # what this module keeps per model: the tables, link names -> index, arrays per backend
    # and the memos (Model.memo); no other module writes into it
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self):
        """Pickled (and copied) without what it keeps: the receiver rebuilds that on use, and
        some of it (the C call path's records) is tied to this process."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_urdf(cls, urdf: str, *, base: str | None = None,
                  tips: Sequence[str] | str | None = None,
                  frozen: Iterable[str] = ()) -> "Model":
        """Parse URDF text into a model (whole robot, or the sub-tree ``base`` -> ``tips``)."""
        desc = parse_urdf(urdf)
        return cls._build(desc, base=base, tips=tips, frozen=frozen)

    @classmethod
    def from_file(cls, path, **kwargs) -> "Model":
        with open(path, encoding="utf-8") as f:
            return cls.from_urdf(f.read(), **kwargs)

    @classmethod
    def _build(cls, desc: RobotDesc, *, base: str | None, tips, frozen) -> "Model":
        """The model of ``desc`` from ``base`` (its root when None) down to ``tips`` (all leaves
        when None or empty) with the joints ``frozen`` locked; the steps are the module's
        ``_check_build_args`` ... ``_active_velocities``, in this order."""
        base, tips, frozen = _check_build_args(desc, base, tips, frozen)
        by_child = {j.child: j for j in desc.joints}
        children = _children_by_parent(desc)
        keep, tips = _kept_links(desc, by_child, children, base, tips)
        order = _topological_order(children, keep, base)
        if tips is None:
            tips = _leaf_tips(order, by_child, base)

        # the joint into link l is jdesc[l] (None for the base)
        jdesc: list[JointDesc | None] = [None] + [by_child[n] for n in order[1:]]
        jindex = {j.name: l for l, j in enumerate(jdesc) if j is not None}
        frozen = _check_frozen(frozen, jindex, jdesc)
        joints = _joint_arrays(jdesc, {n: i for i, n in enumerate(order)})
        resolve = _MimicResolver({j.name: j for j in desc.joints}, jindex)
        layout = _coordinate_layout(jdesc, jindex, resolve, frozen)
        v_active = _active_velocities(frozen, jindex, layout.v_start, joints["joint_type"],
                                      len(layout.v_names))
        return cls(
            name=desc.name, desc=desc, link_names=tuple(order),
            joint_names=tuple("" if j is None else j.name for j in jdesc),
            **{k: _read_only(a) for k, a in joints.items()}, **layout.model_fields(),
            frozen=frozen, v_active=_read_only(v_active), tips=tips,
        )

    # ------------------------------------------------------------------ selection
    def subtree(self, base: str, tips: Sequence[str] | str | None = None, *,
                frozen: Iterable[str] | None = None) -> "Model":
        """The model from ``base`` down to ``tips`` (all leaves when ``tips`` is None).

        FK of the result is expressed in the ``base`` frame.
        """
        if frozen is None:
            frozen = self.frozen
        kept = self._build(self.desc, base=base, tips=tips, frozen=())
        return self._build(self.desc, base=base, tips=tips,
                           frozen=[n for n in frozen if n in kept.joint_names])

    def chain(self, base: str, tip: str, **kwargs) -> "Model":
        """The serial chain from ``base`` to ``tip`` (same kind of model as :meth:`subtree`)."""
        return self.subtree(base, [tip], **kwargs)

    def lock(self, joints: Iterable[str]) -> "Model":
        """A copy of this model with the given joints frozen (added to those already frozen).

        Frozen joints keep their coordinates in ``q`` (so each problem may hold them at its own
        value) but drop out of the Jacobian's columns and are never moved by the solvers.
        """
        joints = set(check_names(joints, "joints", allow_empty=True, kind="joint"))
        for n in joints:
            if n not in self.joint_names[1:]:
                raise UnknownJointError(n, self.joint_names[1:])
        return self._build(self.desc, base=self.link_names[0], tips=self.tips,
                           frozen=self.frozen | joints)

    # ------------------------------------------------------------------ derived data
    @property
    def tables(self) -> ModelTables:
        """The model-wide derived tables (:class:`ros2_ik.model.tables.ModelTables`: read-only
        arrays for FK, the Jacobians, the compiled kernels and the solvers), built on first
        access and the same object ever after."""
        t = self._cache.get("tables")
        if t is None:  # (two threads may both build them; one object is kept and returned)
            t = self._cache.setdefault("tables", build_tables(self))
        return t

    def memo(self, owner: str, key, build: Callable[[], Any], *, max_keys: int = 10_000,
             stale: Callable[[Any], bool] | None = None):
        """A value derived from this model and ``key`` (a tip set, a seed count, a selection of
        frames), computed by ``build()`` the first time and kept with the model (it goes when
        the model goes; a model never changes, so the value stays right).

        ``owner`` names the caller's memo (by convention its module and what it keeps, e.g.
        ``"model.chain"``): keys of different owners never meet. Once an owner holds
        ``max_keys`` keys for this model, new keys are computed on each call and not kept. An
        unhashable key is not kept either (``build()`` decides what such a key means). Model-wide
        tables are :attr:`tables`, not memos. Thread safe: two threads that build the same key
        at once both get the value kept first. ``stale(value)`` True: the kept value is built
        again and replaced (a solver answering with the reference while its kernels were built
        in the background, once they are)."""
        memos = self._cache.get("memos")
        if memos is None:
            memos = self._cache.setdefault("memos", {})
        per = memos.get(owner)
        if per is None:
            per = memos.setdefault(owner, {})
        try:
            hit = per.get(key, _MISSING)
        except TypeError:  # unhashable key
            return build()
        if hit is not _MISSING:
            if stale is None or not stale(hit):
                return hit
            value = build()
            per[key] = value
            return value
        value = build()
        if len(per) < max_keys:
            value = per.setdefault(key, value)
        return value

    def memo_peek(self, owner: str, key):
        """The value :meth:`memo` keeps for ``owner`` and ``key``, or None when none is kept
        (nothing is built; an unhashable key is never kept): for a hot path that takes a
        shorter way only when the value is already there."""
        try:
            return self._cache["memos"][owner].get(key)
        except (KeyError, TypeError):  # nothing kept for the owner yet; an unhashable key
            return None

    # ------------------------------------------------------------------ look-ups
    @property
    def num_links(self) -> int:
        return len(self.link_names)

    @property
    def base(self) -> str:
        return self.link_names[0]

    @property
    def nv_active(self) -> int:
        return int(self.v_active.shape[0])

    @property
    def actuated_joint_names(self) -> tuple[str, ...]:
        """Names of joints that own coordinates (not fixed, not mimic), in q order."""
        out = []
        for l in range(1, self.num_links):
            if self.q_start[l] >= 0:
                out.append(self.joint_names[l])
        return tuple(out)

    @property
    def floating_q_starts(self) -> tuple[int, ...]:
        """First q index of each floating joint (its quaternion is ``q[s + 3 : s + 7]``)."""
        return tuple(int(self.q_start[l]) for l in np.nonzero(self.joint_type ==
                                                              JointType.FLOATING)[0]
                     if self.q_start[l] >= 0)

    def zero_quaternion_rows(self, q, starts=None):
        """(B,) bool: the rows of ``q`` (B, nq) where the quaternion of a floating joint (those
        starting at ``starts``; default all) is zero or NaN: no rotation can be read from it."""
        xp = get_xp(q)
        bad = xp.zeros(q.shape[0], dtype=bool)
        for s in self.floating_q_starts if starts is None else starts:
            bad |= ~(xp.sum(q[:, s + 3:s + 7] ** 2, axis=1) > 1e-12)
        return bad

    @property
    def mimic_joint_names(self) -> tuple[str, ...]:
        return tuple(self.joint_names[l] for l in range(1, self.num_links) if self.mimic_q[l] >= 0)

    def link_index(self, name: str) -> int:
        """Index of a link; raises :class:`UnknownLinkError` listing the valid names."""
        idx = self._cache.get("link_index")
        if idx is None:
            idx = self._cache["link_index"] = {n: i for i, n in enumerate(self.link_names)}
        if not isinstance(name, str):
            check_name(name, "link")
        try:
            return idx[name]
        except KeyError:
            raise UnknownLinkError(name, self.link_names) from None

    def link_indices(self, names: Sequence[str] | str, *, what: str = "frames") -> np.ndarray:
        """Indices of one link name or a list of them (:class:`InputTypeError` otherwise)."""
        names = check_names(names, what)
        return np.array([self.link_index(n) for n in names], dtype=np.int64)

    def joint_index(self, name: str) -> int:
        """Link index of the joint named ``name`` (the joint's child link)."""
        if not isinstance(name, str):
            raise InputTypeError(f"joint must be a joint name (str), got {describe(name)}")
        try:
            return self.joint_names.index(name, 1)
        except ValueError:
            raise UnknownJointError(name, self.joint_names[1:]) from None

    def default_tip(self) -> str:
        """The leaf link with the most moving joints above it (first in the model's order on
        ties): the end of the longest kinematic chain, e.g. the flange or TCP of an arm."""
        best, best_n = self.tips[0] if self.tips else self.base, -1
        for tip in self.tips:
            n = sum(1 for l in self.ancestors(self.link_index(tip))
                    if self.joint_type[l] != JointType.FIXED)
            if n > best_n:
                best, best_n = tip, n
        return best

    def ancestors(self, link: int) -> np.ndarray:
        """Link indices from ``link`` up to (excluding) the root, child first."""
        out = []
        while link > 0:
            out.append(link)
            link = int(self.link_parent[link])
        return np.array(out, dtype=np.int64)

    def support_mask(self) -> np.ndarray:
        """``S[f, l]`` is True when the joint into link ``l`` moves link ``f`` (l is an ancestor
        of f or f itself); shape (L, L), computed on each call (quadratic in the links: refused
        over the memory budget)."""
        L = self.num_links
        check_memory(L * L, "the support mask", f"{L} x {L} links",
                     "use Model.ancestors(link) for the links you need")
        S = np.zeros((L, L), dtype=bool)
        for f in range(L):
            S[f, self.ancestors(f)] = True
        return S

    # ------------------------------------------------------------------ configurations
    def neutral_q(self) -> np.ndarray:
        """Mid-range configuration (nq,): bounded joints at the middle of their limits, others 0,
        floating quaternions identity."""
        return self.tables.neutral_q.copy()

    def random_q(self, rng: np.random.Generator | int | None, batch: int = 1) -> np.ndarray:
        """Uniform random configurations within limits, shape (batch, nq).

        Unbounded coordinates: angles uniform in (-pi, pi], translations uniform in [-1, 1] m,
        floating orientations uniform on SO(3).
        """
        batch = check_int(batch, "batch", low=0, high=MAX_BATCH)
        if rng is not None and not isinstance(rng, np.random.Generator):
            rng = check_int(rng, "rng", low=0)
        rng = np.random.default_rng(rng)
        span = np.where(self.q_continuous, math.pi, 1.0)
        fl, fu = np.isfinite(self.lower), np.isfinite(self.upper)
        # unbounded: (-pi, pi] for angles, [-1, 1] m otherwise; bounded on one side only: a
        # range of twice that from the limit
        lo = np.where(fl, self.lower, np.where(fu, self.upper - 2 * span, -span))
        hi = np.where(fu, self.upper, np.where(fl, self.lower + 2 * span, span))
        q = rng.uniform(lo, hi, size=(batch, self.nq))
        for s in self.floating_q_starts:
            quat = rng.normal(size=(batch, 4))
            quat /= np.linalg.norm(quat, axis=1, keepdims=True)
            q[:, s + 3:s + 7] = quat
        return q

    def check_q(self, q, *, name: str = "q"):
        """Validate a configuration batch; returns it as a 2-D array (B, nq) of its own backend.

        Raises :class:`ShapeError` for a wrong shape, :class:`InvalidInputError` for NaN/inf,
        an empty or too large batch, :class:`InputTypeError` for what is not numbers. Integer
        and float16 input is promoted to float64; float32/float64 keep their dtype.
        """
        from ..validate import as_float_array  # noqa: PLC0415

        q = as_float_array(q, name, f"shape (B, {self.nq}) or ({self.nq},)")
        xp = get_xp(q)
        if q.ndim == 1:
            q = q[None, :]
        if q.ndim != 2 or q.shape[1] != self.nq:
            raise ShapeError(
                f"{name} must have shape (B, {self.nq}) or ({self.nq},) for model "
                f"{self.name!r} (coordinates {list(self.q_names)}), got {tuple(q.shape)}"
            )
        if q.shape[0] == 0:
            raise InvalidInputError(f"{name} is an empty batch (0 rows); pass at least one row")
        if q.shape[0] > MAX_BATCH:
            raise InvalidInputError(
                f"{name} has {q.shape[0]} rows, more than the limit {MAX_BATCH}; split the batch"
            )
        if not bool(xp.all(xp.isfinite(q))):
            bad = xp.argwhere(~xp.isfinite(q))[0]
            raise InvalidInputError(
                f"{name} contains NaN or infinity (first at row {int(bad[0])}, coordinate "
                f"{self.q_names[int(bad[1])]!r}); give finite joint values"
            )
        if not bool(xp.all(xp.abs(q) <= MAX_VALUE)):
            bad = xp.argwhere(xp.abs(q) > MAX_VALUE)[0]
            raise InvalidInputError(
                f"{name} has a value beyond +-{MAX_VALUE:g} (first at row {int(bad[0])}, "
                f"coordinate {self.q_names[int(bad[1])]!r}); joint values are metres or radians"
            )
        for s in self.floating_q_starts:
            if bool(xp.any(self.zero_quaternion_rows(q, (s,)))):
                raise InvalidInputError(
                    f"{name}: the quaternion (qx qy qz qw) of floating joint "
                    f"{self.joint_names[int(self.q_joint[s])]!r} is zero in some row; give a "
                    "rotation (e.g. 0 0 0 1)"
                )
        return q

    def xp_arrays(self, xp, dtype=None) -> dict:
        """The model's numeric arrays on backend ``xp`` (cached per backend and dtype)."""
        key = ("xp", xp.__name__, str(dtype))
        cached = self._cache.get(key)
        if cached is None:
            fdt = dtype or xp.float64
            cached = {
                "origin": xp.asarray(self.origin, dtype=fdt),
                "axis": xp.asarray(self.axis, dtype=fdt),
                "e1": xp.asarray(self.planar_e1, dtype=fdt),
                "e2": xp.asarray(self.planar_e2, dtype=fdt),
            }
            self._cache[key] = cached
        return cached

    def __repr__(self) -> str:
        return (f"Model({self.name!r}, base={self.base!r}, tips={list(self.tips)}, "
                f"links={self.num_links}, nq={self.nq}, nv={self.nv}, "
                f"frozen={sorted(self.frozen)})")


def check_model(value, name: str = "model") -> Model:
    """``value``, a :class:`Model` (:class:`InputTypeError` naming the argument otherwise)."""
    if not isinstance(value, Model):
        raise InputTypeError(f"{name} must be a ros2_ik Model (ros2_ik.load_robot(name) or "
                             f"Model.from_urdf(text)), got {describe(value)}")
    return value
