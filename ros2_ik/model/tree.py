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
from ..validate import check_int, check_memory, check_name, check_names, describe
from .joint_types import JointType
from .tables import ModelTables, build_tables
from .tree_build import (MimicResolver, active_velocities, check_build_args, check_frozen,
                         children_by_parent, coordinate_layout, joint_arrays, kept_links,
                         leaf_tips, read_only, topological_order)
from .urdf import MAX_VALUE, JointDesc, RobotDesc, parse_urdf

__all__ = ["JointType", "Model", "check_model"]


#: Largest batch any core entry point accepts in one call.
MAX_BATCH = 50_000_000

_MISSING = object()  # Model.memo: no value kept for a key (None is a value)


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
        ``check_build_args`` ... ``active_velocities``, in this order."""
        base, tips, frozen = check_build_args(desc, base, tips, frozen)
        by_child = {j.child: j for j in desc.joints}
        children = children_by_parent(desc)
        keep, tips = kept_links(desc, by_child, children, base, tips)
        order = topological_order(children, keep, base)
        if tips is None:
            tips = leaf_tips(order, by_child, base)

        # the joint into link l is jdesc[l] (None for the base)
        jdesc: list[JointDesc | None] = [None] + [by_child[n] for n in order[1:]]
        jindex = {j.name: l for l, j in enumerate(jdesc) if j is not None}
        frozen = check_frozen(frozen, jindex, jdesc)
        joints = joint_arrays(jdesc, {n: i for i, n in enumerate(order)})
        resolve = MimicResolver({j.name: j for j in desc.joints}, jindex)
        layout = coordinate_layout(jdesc, jindex, resolve, frozen)
        v_active = active_velocities(frozen, jindex, layout.v_start, joints["joint_type"],
                                      len(layout.v_names))
        return cls(
            name=desc.name, desc=desc, link_names=tuple(order),
            joint_names=tuple("" if j is None else j.name for j in jdesc),
            **{k: read_only(a) for k, a in joints.items()}, **layout.model_fields(),
            frozen=frozen, v_active=read_only(v_active), tips=tips,
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
        # two passes with no temporaries (a NaN makes both NaN); the exact place only on error
        top, low = (float(q.max()), float(q.min())) if q.size else (0.0, 0.0)
        if math.isfinite(top) and math.isfinite(low) and max(top, -low) <= MAX_VALUE:
            pass
        elif not bool(xp.all(xp.isfinite(q))):
            bad = xp.argwhere(~xp.isfinite(q))[0]
            raise InvalidInputError(
                f"{name} contains NaN or infinity (first at row {int(bad[0])}, coordinate "
                f"{self.q_names[int(bad[1])]!r}); give finite joint values"
            )
        elif not bool(xp.all(xp.abs(q) <= MAX_VALUE)):
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
