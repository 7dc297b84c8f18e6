"""The robot's surroundings: obstacles as primitives with poses in the model's base frame.

A :class:`World` is immutable: :meth:`World.add`, :meth:`World.move`, :meth:`World.remove` and
:meth:`World.clear` return a new world whose :attr:`World.version` is one more, so a solve keeps
the world it started with while another thread replaces it, and an answer can say which
version it was checked against. Shapes (``size`` in metres; the shape's frame is its pose):

- ``sphere`` (radius,)
- ``box`` (x, y, z) full lengths, centred
- ``cylinder`` (radius, length), axis z, centred
- ``capsule`` (radius, length), axis z, the length between the two half-spheres' centres
- ``halfspace`` (): everything below the pose's x-y plane (its z axis points out of it), e.g. a
  table top or the floor

Every obstacle is checked when it is made: a shape that is not one of :data:`SHAPES`, a size that
is not positive and finite (or beyond :data:`MAX_SIZE`), a pose that is not a finite rigid
transform, more than :data:`MAX_OBSTACLES` obstacles: an :class:`InvalidInputError` naming the
obstacle and what to do.

:meth:`World.packed` gives the array the solvers read, one row of :data:`PACKED` numbers per
obstacle: ``[shape code, R (9, row-major), p (3), a, b, c]`` with ``a, b, c`` the shape's
half-sizes (sphere r; box hx hy hz; cylinder and capsule r, half-length).

:meth:`World.tree` holds a large world's obstacles (the boxes of an octomap, a cloud or a
mesh) in a tree of axis-aligned bounding boxes, split at the median of the longest extent of
their centres down to leaves of at most :data:`LEAF` neighbours: the collision checks walk it
per link and look only into the nodes within reach (a broad phase over the obstacles, as the
robot's sphere groups are one over its spheres).

An obstacle's :attr:`Obstacle.touch` names the robot links (collision link names, or ``"*"``
for all) that may touch it: it is not checked against them (MoveIt's allowed collision matrix
between a link and an object: a part a gripper holds against, a table a mobile base stands on).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputTypeError, InvalidInputError, ShapeError
from ..kinematics.se3 import matrix_to_quat, pq_to_pose
from ..validate import as_float_array, check_int, check_transforms, describe

__all__ = ["World", "Obstacle", "SHAPES", "SHAPE_CODES", "MAX_OBSTACLES", "MAX_SIZE", "PACKED",
           "world_from_yaml", "bounding_radius", "obstacle_boxes", "ObstacleTree", "LEAF",
           "TREE_FROM", "TREE_DEPTH"]

SHAPES = ("sphere", "box", "cylinder", "capsule", "halfspace")
#: the shape codes of :meth:`World.packed` (and of the generated kernels)
SHAPE_CODES = {s: i for i, s in enumerate(SHAPES)}
_SIZES = {"sphere": 1, "box": 3, "cylinder": 2, "capsule": 2, "halfspace": 0}
_SIZE_NAMES = {"sphere": "(radius,)", "box": "(x, y, z)", "cylinder": "(radius, length)",
               "capsule": "(radius, length)", "halfspace": "()"}
#: most obstacles one world holds (each is checked against every link at every iteration)
MAX_OBSTACLES = 10_000
#: largest obstacle size and position [m]
MAX_SIZE = 1e4
#: numbers per obstacle in :meth:`World.packed`
PACKED = 16
#: most obstacles in a leaf of :meth:`World.tree`
LEAF = 8
#: worlds of fewer bounded obstacles than this keep every obstacle on its own (no tree)
TREE_FROM = 32
#: deepest a tree may be (the kernels' traversal stack)
TREE_DEPTH = 48


def bounding_radius(packed) -> np.ndarray:
    """(O,) each obstacle's bounding sphere radius about its origin (-1: a half-space) from
    :meth:`World.packed` rows."""
    ob = np.asarray(packed)
    k, a, b, c = ob[:, 0], ob[:, 13], ob[:, 14], ob[:, 15]
    return np.where(k == SHAPE_CODES["sphere"], a, np.where(
        k == SHAPE_CODES["box"], np.sqrt(a * a + b * b + c * c), np.where(
            k == SHAPE_CODES["cylinder"], np.sqrt(a * a + b * b), np.where(
                k == SHAPE_CODES["capsule"], a + b, -1.0))))


@dataclass(frozen=True)
class ObstacleTree:
    """A world's obstacles as the checks take them (:meth:`World.tree`): ``order`` (indices
    into :meth:`World.packed`) holds first the ``alone`` obstacles checked one by one (the
    half-spaces; every obstacle of a small world), in the world's order, then the tree's.
    Node ``k`` of the tree holds obstacles ``order[first[k]:end[k]]`` within the axis-aligned
    box ``lo[k]``, ``hi[k]`` (base frame); its children are ``left[k]`` and ``right[k]`` (-1: a
    leaf of at most :data:`LEAF` obstacles). Node 0 is the root; a parent comes before its
    children."""

    order: np.ndarray
    alone: int
    first: np.ndarray
    end: np.ndarray
    left: np.ndarray
    right: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def __len__(self) -> int:
        return len(self.first)

    def holds(self, mask) -> np.ndarray:
        """(K, ...) bool per node: does it hold an obstacle where ``mask`` (O, ...), indexed
        as :meth:`World.packed`, is true."""
        m = np.asarray(mask, dtype=bool)[self.order]
        n = np.concatenate([np.zeros((1,) + m.shape[1:], dtype=np.int64),
                            np.cumsum(m, axis=0)])
        return n[self.end] > n[self.first]

    @property
    def depth(self) -> int:
        """Nodes on the longest path from the root to a leaf (0: no tree)."""
        if not len(self):
            return 0
        d = np.ones(len(self), dtype=np.int64)
        for k in range(len(self)):  # parents first
            for ch in (self.left[k], self.right[k]):
                if ch >= 0:
                    d[ch] = d[k] + 1
        return int(d.max())


def obstacle_boxes(packed) -> tuple[np.ndarray, np.ndarray]:
    """(lo (O, 3), hi (O, 3)): an axis-aligned box holding each obstacle of :meth:`World.packed`
    rows (a box's, a cylinder's and a capsule's own extent, a sphere's; a half-space's is
    everything)."""
    ob = np.asarray(packed)
    c = ob[:, 10:13]
    R = ob[:, 1:10].reshape(-1, 3, 3)
    ext = np.repeat(bounding_radius(ob)[:, None], 3, axis=1)
    box = ob[:, 0] == SHAPE_CODES["box"]
    ext[box] = np.einsum("oij,oj->oi", np.abs(R[box]), ob[box, 13:16])
    # a cylinder's and a capsule's own extent about their axis (R's third column)
    for shape in ("cylinder", "capsule"):
        k = ob[:, 0] == SHAPE_CODES[shape]
        a, r, h = R[k][:, :, 2], ob[k, 13:14], ob[k, 14:15]
        disc = r * np.sqrt(np.clip(1.0 - a * a, 0.0, 1.0)) if shape == "cylinder" else r
        ext[k] = h * np.abs(a) + disc
    half = ob[:, 0] == SHAPE_CODES["halfspace"]
    ext[half] = np.inf
    return c - ext, c + ext


def _tree(packed: np.ndarray) -> ObstacleTree:
    """The tree (see :class:`ObstacleTree`): the bounded obstacles split at the median of
    their centres' longest extent (whole leaves on the left) down to leaves of at most
    :data:`LEAF`, each node's box the union of its obstacles'."""
    orad = bounding_radius(packed)
    bounded = np.nonzero(orad >= 0)[0]
    if bounded.size < TREE_FROM:
        bounded = bounded[:0]
    alone = np.setdiff1d(np.arange(len(packed)), bounded)
    A = int(alone.size)
    cen = packed[:, 10:13]
    first: list = []
    end: list = []
    left: list = []
    right: list = []
    placed: list = []

    def build(ids: np.ndarray) -> int:
        k = len(first)
        first.append(A + len(placed))
        end.append(-1)
        left.append(-1)
        right.append(-1)
        if ids.size <= LEAF:
            placed.extend(ids.tolist())
        else:
            c = cen[ids]
            ax = int(np.argmax(c.max(axis=0) - c.min(axis=0)))  # split the longest extent
            ids = ids[np.argsort(c[:, ax], kind="stable")]
            m = LEAF * ((-(-ids.size // LEAF) + 1) // 2)  # whole leaves on the left
            left[k] = build(ids[:m])
            right[k] = build(ids[m:])
        end[k] = A + len(placed)
        return k

    if bounded.size:
        build(bounded)
    ids = np.array(placed, dtype=np.int64)
    order = np.concatenate([alone, ids]).astype(np.int64)
    first_a, end_a = np.array(first, dtype=np.int64), np.array(end, dtype=np.int64)
    left_a, right_a = np.array(left, dtype=np.int64), np.array(right, dtype=np.int64)
    K = len(first)
    lo, hi = np.zeros((K, 3)), np.zeros((K, 3))
    if K:
        olo, ohi = obstacle_boxes(packed[order[A:]])
        leaf = np.nonzero(left_a < 0)[0]  # (in the order of their obstacles)
        lo[leaf] = np.minimum.reduceat(olo, first_a[leaf] - A, axis=0)
        hi[leaf] = np.maximum.reduceat(ohi, first_a[leaf] - A, axis=0)
        for k in np.nonzero(left_a >= 0)[0][::-1].tolist():  # children first
            lo[k] = np.minimum(lo[left_a[k]], lo[right_a[k]])
            hi[k] = np.maximum(hi[left_a[k]], hi[right_a[k]])
    tree = ObstacleTree(order, A, first_a, end_a, left_a, right_a, lo, hi)
    if tree.depth > TREE_DEPTH:  # (median splits: about log2(10,000 / LEAF) + 1 = 12)
        raise InvalidInputError(f"obstacle tree {tree.depth} deep (at most {TREE_DEPTH})")
    for arr in (tree.order, tree.first, tree.end, tree.left, tree.right, tree.lo, tree.hi):
        arr.setflags(write=False)
    return tree


@dataclass(frozen=True)
class Obstacle:
    """One obstacle: ``id`` (a name), ``shape`` (one of :data:`SHAPES`), ``size`` (see the
    module docstring) and ``pose`` (4, 4) in the model's base frame."""

    id: str
    shape: str
    size: tuple
    pose: np.ndarray = field(repr=False, compare=False)
    touch: tuple = ()

    @staticmethod
    def make(id, shape, size=(), pose=None, touch=()) -> "Obstacle":
        """A checked obstacle; ``pose`` (4, 4) or (7,) [x y z qx qy qz qw] (default: the
        identity); ``touch``: the link names allowed to touch it (``"*"``: every link)."""
        if not isinstance(id, str) or not id:
            raise InvalidInputError(f"an obstacle id must be a non-empty string, got "
                                    f"{describe(id)}")
        if shape not in SHAPES:
            raise InvalidInputError(f"obstacle {id!r}: unknown shape {describe(shape)}; use one "
                                    f"of {list(SHAPES)}")
        sz = () if size is None else tuple(np.ravel(as_float_array(
            size, f"obstacle {id!r}: size", f"shape {_SIZE_NAMES[shape]}", np)).tolist())
        n = _SIZES[shape]
        names = _SIZE_NAMES[shape]
        if len(sz) != n:
            raise InvalidInputError(f"obstacle {id!r}: a {shape} takes {n} sizes {names}, got "
                                    f"{len(sz)}: {list(sz)}")
        if not all(math.isfinite(v) and 0.0 < v <= MAX_SIZE for v in sz):
            raise InvalidInputError(f"obstacle {id!r}: {shape} size {list(sz)} {names} must be "
                                    f"positive and finite (at most {MAX_SIZE:g} m); a "
                                    "degenerate primitive cannot be checked against")
        return Obstacle(id, shape, sz, _pose(pose, id), _touch(touch, id))

    def with_touch(self, touch) -> "Obstacle":
        """This obstacle with ``touch`` (see the module docstring)."""
        return Obstacle(self.id, self.shape, self.size, self.pose, _touch(touch, self.id))

    def packed(self) -> np.ndarray:
        """This obstacle's row of :meth:`World.packed`."""
        row = np.zeros(PACKED)
        row[0] = SHAPE_CODES[self.shape]
        row[1:10] = self.pose[:3, :3].ravel()
        row[10:13] = self.pose[:3, 3]
        s = self.size
        if self.shape == "sphere":
            row[13] = s[0]
        elif self.shape == "box":
            row[13:16] = 0.5 * np.asarray(s)
        elif self.shape in ("cylinder", "capsule"):
            row[13], row[14] = s[0], 0.5 * s[1]
        return row

    def as_dict(self) -> dict:
        q = matrix_to_quat(self.pose[:3, :3])
        out = {"id": self.id, "shape": self.shape, "size": list(self.size),
               "position": self.pose[:3, 3].tolist(), "orientation": q.tolist()}
        if self.touch:
            out["touch"] = list(self.touch)
        return out


def _touch(touch, id: str) -> tuple:
    if isinstance(touch, str) or not isinstance(touch, Iterable) or not all(
            isinstance(t, str) and t for t in touch):
        raise InvalidInputError(f"obstacle {id!r}: touch must be a list of link names, got "
                                f"{describe(touch)}")
    return tuple(sorted(set(touch)))


def _pose(pose, id: str) -> np.ndarray:
    if pose is None:
        return _ro(np.eye(4))
    a = as_float_array(pose, f"obstacle {id!r}: pose", "shape (4, 4) or (7,)",
                       np).astype(np.float64, copy=False)
    if a.shape == (7,):
        if not np.all(np.isfinite(a)):
            raise InvalidInputError(f"obstacle {id!r}: pose has NaN or infinity; give finite "
                                    "values")
        n = float(np.linalg.norm(a[3:]))
        if not abs(n - 1.0) <= 1e-3:
            raise InvalidInputError(f"obstacle {id!r}: orientation quaternion (x y z w) has norm "
                                    f"{n:.6g}; give a unit quaternion")
        a = pq_to_pose(a)
    if a.shape != (4, 4):
        raise ShapeError(f"obstacle {id!r}: pose must have shape (4, 4) or (7,) [x y z qx qy qz "
                         f"qw], got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InvalidInputError(f"obstacle {id!r}: pose has NaN or infinity; give finite values")
    if np.any(np.abs(a[:3, 3]) > MAX_SIZE):
        raise InvalidInputError(f"obstacle {id!r}: position {a[:3, 3].tolist()} is beyond "
                                f"{MAX_SIZE:g} m")
    check_transforms(a[None], f"obstacle {id!r}")
    return _ro(a.copy())


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class World:
    """An immutable, versioned set of obstacles (see the module docstring)."""

    __slots__ = ("_obstacles", "version", "_packed", "_tree")

    def __init__(self, obstacles=(), version: int = 0):
        obs: dict = {}
        if isinstance(obstacles, (str, bytes, Obstacle)) or not isinstance(obstacles, Iterable):
            raise InputTypeError(f"obstacles must be a list of Obstacle objects "
                                 f"(Obstacle.make(...)), got {describe(obstacles)}")
        for o in obstacles:
            if not isinstance(o, Obstacle):
                raise InputTypeError(f"obstacles: a World holds Obstacle objects "
                                     f"(Obstacle.make(...)), got an element {describe(o)}")
            obs[o.id] = o
        if len(obs) > MAX_OBSTACLES:
            raise InvalidInputError(f"{len(obs)} obstacles exceed the limit of {MAX_OBSTACLES}; "
                                    "merge small ones into larger primitives")
        self._obstacles = obs
        self.version = check_int(version, "version", low=0)
        self._packed = None
        self._tree = None

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._obstacles)

    def __iter__(self):
        return iter(self._obstacles.values())

    def __contains__(self, id) -> bool:
        return id in self._obstacles

    def __getitem__(self, id) -> Obstacle:
        hit = self._obstacles.get(id) if isinstance(id, str) else None
        if hit is None:
            raise InvalidInputError(f"no obstacle {id!r} in the world: id must be one of its "
                                    f"obstacles' ids {sorted(self._obstacles)[:20]}")
        return hit

    @property
    def ids(self) -> list:
        return list(self._obstacles)

    def packed(self) -> np.ndarray:
        """(n, :data:`PACKED`) float64, read-only (kept)."""
        if self._packed is None:
            a = (np.stack([o.packed() for o in self._obstacles.values()])
                 if self._obstacles else np.zeros((0, PACKED)))
            self._packed = _ro(np.ascontiguousarray(a))
        return self._packed

    def tree(self) -> ObstacleTree:
        """This world's obstacles in a tree of bounding boxes (see the module docstring;
        kept): half-spaces, and every obstacle of a world of fewer than :data:`TREE_FROM`
        others, stay on their own."""
        if self._tree is None:
            self._tree = _tree(self.packed())
        return self._tree

    def __repr__(self) -> str:
        more = "..." if len(self) > 8 else ""
        return f"World(version={self.version}, obstacles={self.ids[:8]}{more})"

    # ------------------------------------------------------------------ changes
    def add(self, *obstacles: Obstacle) -> "World":
        """A world with ``obstacles`` added (an id already there is replaced)."""
        return World(list(self._obstacles.values()) + list(obstacles), self.version + 1)

    def move(self, id: str, pose) -> "World":
        """A world with obstacle ``id`` at ``pose``."""
        o = self[id]
        moved = Obstacle(o.id, o.shape, o.size, _pose(pose, id), o.touch)
        return World([moved if x.id == id else x for x in self._obstacles.values()],
                     self.version + 1)

    def remove(self, *ids: str) -> "World":
        """A world without obstacles ``ids`` (each must be there)."""
        for i in ids:
            self[i]
        return World([o for o in self._obstacles.values() if o.id not in ids], self.version + 1)

    def clear(self) -> "World":
        return World((), self.version + 1)

    # ------------------------------------------------------------------ files
    def to_yaml(self) -> str:
        """The world as :func:`world_from_yaml` reads it."""
        import yaml  # noqa: PLC0415

        return yaml.safe_dump({"obstacles": [o.as_dict() for o in self]}, sort_keys=False,
                              default_flow_style=None)


def world_from_yaml(text: str, version: int = 0) -> World:
    """A world from YAML: ``obstacles: [{id, shape, size: [...], position: [x, y, z],
    orientation: [qx, qy, qz, qw]}, ...]`` (position and orientation optional)."""
    import yaml  # noqa: PLC0415

    if not isinstance(text, str):
        raise InputTypeError(f"a world file is YAML text, got {describe(text)}")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"the world YAML cannot be read: {exc}") from None
    items = doc.get("obstacles") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise InvalidInputError("a world YAML needs a list 'obstacles: [{id, shape, size, "
                                "position, orientation}, ...]'")
    if len(items) > MAX_OBSTACLES:
        raise InvalidInputError(f"{len(items)} obstacles exceed the limit of {MAX_OBSTACLES}")
    obs = []
    for k, it in enumerate(items):
        if not isinstance(it, dict):
            raise InvalidInputError(f"obstacle #{k + 1} must be a mapping, got {describe(it)}")
        unknown = set(it) - {"id", "shape", "size", "position", "orientation", "touch"}
        if unknown:
            raise InvalidInputError(f"obstacle #{k + 1}: unknown keys {sorted(unknown)}; use id, "
                                    "shape, size, position, orientation, touch")
        pos = it.get("position", [0.0, 0.0, 0.0])
        quat = it.get("orientation", [0.0, 0.0, 0.0, 1.0])
        try:
            pose = np.concatenate([np.asarray(pos, float).reshape(3),
                                   np.asarray(quat, float).reshape(4)])
        except (TypeError, ValueError):
            raise InvalidInputError(f"obstacle #{k + 1}: position must be 3 numbers and "
                                    "orientation 4 (qx qy qz qw)") from None
        touch = it.get("touch", ())
        if not isinstance(touch, list) and touch != ():
            raise InvalidInputError(f"obstacle #{k + 1}: touch must be a list of link names")
        obs.append(Obstacle.make(str(it.get("id", f"obstacle_{k}")), it.get("shape"),
                                 it.get("size", ()), pose, touch))
    return World(obs, version)
