"""Octomaps as ros2_ik's worlds hold them: the occupied cells of an OctoMap tree, decoded in
NumPy from the streams ``octomap_msgs/Octomap`` carries (no C++ OctoMap at run time), merged
into as few axis-aligned boxes as cover exactly those cells, and given to the solvers as box
obstacles.

**The streams** (OctoMap 1.10; a message's ``data`` is the stream without the text header of a
``.bt`` / ``.ot`` file; :func:`read_file` reads the files and their header):

- *binary* (``binary: true``, ``octomap_binary``): a pre-order walk of the inner nodes, 2 bytes
  each (children 0-3, then 4-7); child ``i`` takes bits ``2i`` and ``2i + 1`` of its byte:
  ``01`` (bit ``2i + 1`` set) an occupied leaf, ``10`` a free leaf, ``11`` a node with children
  (its 2 bytes follow, depth first, in child order), ``00`` unknown;
- *full* (``binary: false``, as move_group republishes its map): per node its log-odds value
  (float32, little-endian; ``ColorOcTree`` adds 3 bytes of colour), one byte whose bit ``i``
  says child ``i`` exists, then those children. A leaf is occupied when its log-odds is at
  least 0 (probability 0.5, OctoMap's default threshold).

**Geometry**: depth 16; a cell's key is ``floor(x / resolution) + 32768`` per axis; child ``i``
adds ``+x`` for bit 0, ``+y`` for bit 1 and ``+z`` for bit 2 of ``i``; a leaf at depth ``d`` is a
cube of edge ``resolution * 2**(16 - d)`` (a pruned leaf is a coarse cube).

**The boxes** (:func:`boxes`, :mod:`ros2_ik.world.voxels`): runs of occupied cells joined
into boxes whose union is exactly those cells, so a distance to the boxes is the exact distance
to the voxels' cubes (the check of every answer, on every backend, is exact); bounded by
:data:`MAX_CELLS` cells of extent and :data:`ros2_ik.world.MAX_OBSTACLES` boxes.

Malformed input (a truncated or overlong stream, another tree type, a resolution that is not
positive and finite, a tree deeper than 16) is an :class:`~ros2_ik.errors.InvalidInputError`
naming what was wrong.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError
from . import voxels
from .voxels import MAX_CELLS, Leaves

__all__ = ["Leaves", "decode", "encode_binary", "read_file", "boxes", "obstacles", "MAX_CELLS",
           "TREE_IDS",
           "DEPTH", "MIN_RESOLUTION", "MAX_RESOLUTION", "PREFIX"]

#: OctoMap's tree depth
DEPTH = 16
#: the tree types whose streams are read (a ColorOcTree's full stream carries colours)
TREE_IDS = ("OcTree", "ColorOcTree")
#: resolutions taken [m]
MIN_RESOLUTION, MAX_RESOLUTION = 1e-3, 10.0
#: occupied leaves one map may hold (decoding stops past it)
MAX_LEAVES = 4_000_000
#: the obstacle ids of a map's boxes: ``<octomap>/k`` (MoveIt's name for the map's object)
PREFIX = "<octomap>"


# per byte value: (children with children, occupied leaves), the child index within the 4
_CODES = [(tuple(i for i in range(4) if (b >> 2 * i) & 3 == 3),
           tuple(i for i in range(4) if (b >> 2 * i) & 3 == 2)) for b in range(256)]


def _check_resolution(resolution, what: str) -> float:
    try:
        res = float(resolution)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what}: resolution {resolution!r} is not a number") from None
    if not (math.isfinite(res) and MIN_RESOLUTION <= res <= MAX_RESOLUTION):
        raise InvalidInputError(f"{what}: resolution {res!r} m must be finite and in "
                                f"[{MIN_RESOLUTION:g}, {MAX_RESOLUTION:g}] m")
    return res


def decode(data, *, binary: bool, resolution, id: str = "OcTree",
           what: str = "octomap") -> Leaves:
    """The occupied leaves of an octomap stream (a message's ``data``: bytes, or int8 / uint8
    values); ``what`` names it in errors."""
    if id not in TREE_IDS:
        raise InvalidInputError(f"{what}: tree type id {id!r} is not read; give one of "
                                f"{list(TREE_IDS)}")
    res = _check_resolution(resolution, what)
    buf = _bytes(data, what)
    if buf.startswith(_MAGIC):  # a stream written with its file header (some map servers)
        fields, buf = _header(buf, what)
        binary = fields["binary"]
    if not len(buf):
        return Leaves(np.zeros((0, 3), np.int64), np.zeros(0, np.int64), res)
    if binary:
        key, depth = _binary(buf, what)
    else:
        key, depth = _full(buf, 7 if id == "ColorOcTree" else 4, what)
    return Leaves(key, np.left_shift(1, DEPTH - depth).astype(np.int64), res)


def _bytes(data, what: str) -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    try:
        a = np.asarray(data)
        if a.dtype == object or a.ndim != 1 or (a.size and a.dtype.kind not in "iub"):
            raise TypeError
        if a.size and (a.min() < -128 or a.max() > 255):
            raise ValueError
        return a.astype(np.int64).astype(np.uint8).tobytes()
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what}: data must be bytes or int8 / uint8 values") from None


def encode_binary(points, resolution: float) -> bytes:
    """The binary stream (as ``octomap_msgs/Octomap.data`` carries it, ``binary: true``) of a
    map whose occupied cells are those of edge ``resolution`` holding ``points`` (N, 3) [m]:
    leaves at depth 16, nothing free, nothing pruned (what :func:`decode` and OctoMap read)."""
    res = _check_resolution(resolution, "encode_binary")
    keys = voxels.cloud_cells(points, res, "encode_binary").key
    if keys.size and (keys.min() < 0 or keys.max() >= 2 * voxels.HALF):
        raise InvalidInputError(f"encode_binary: points beyond the tree's "
                                f"{voxels.HALF * res:g} m at {res:g} m")
    out = bytearray()
    stack = [(keys, 0)] if len(keys) else []
    while stack:  # pre-order: a node's two bytes, then its children's subtrees in order
        k, depth = stack.pop()
        shift = DEPTH - 1 - depth
        child = ((k[:, 0] >> shift) & 1) | (((k[:, 1] >> shift) & 1) << 1) | \
            (((k[:, 2] >> shift) & 1) << 2)
        code = 2 if depth == DEPTH - 1 else 3  # an occupied leaf, or a node with children
        b = [0, 0]
        subs = []
        for c in range(8):
            sub = k[child == c]
            if len(sub):
                b[c // 4] |= code << (2 * (c % 4))
                if code == 3:
                    subs.append((sub, depth + 1))
        out += bytes(b)
        stack.extend(reversed(subs))
    return bytes(out)


def _binary(buf: bytes, what: str):
    n = len(buf)
    if n % 2:
        raise InvalidInputError(f"{what}: a binary stream holds 2 bytes per inner node; "
                                f"{n} bytes is truncated or not a binary octomap")
    keys, depths = [], []
    stack = [(0, 0, 0, 0)]  # (depth, kx, ky, kz) of inner nodes still to read, in order
    pos = 0
    codes = _CODES
    while stack:
        d, kx, ky, kz = stack.pop()
        if pos + 2 > n:
            raise InvalidInputError(f"{what}: the binary stream ends at byte {n} inside the "
                                    "tree (truncated)")
        if d >= DEPTH:
            raise InvalidInputError(f"{what}: the tree is deeper than {DEPTH} levels at byte "
                                    f"{pos}; not an OctoMap stream")
        step = 1 << (DEPTH - d - 1)
        inner = []
        for half in (0, 1):
            deeper, occupied = codes[buf[pos + half]]
            for i in occupied:
                c = i + 4 * half
                keys.append((kx + (c & 1) * step, ky + ((c >> 1) & 1) * step,
                             kz + ((c >> 2) & 1) * step))
                depths.append(d + 1)
            for i in deeper:
                c = i + 4 * half
                inner.append((d + 1, kx + (c & 1) * step, ky + ((c >> 1) & 1) * step,
                              kz + ((c >> 2) & 1) * step))
        pos += 2
        stack.extend(reversed(inner))
        if len(keys) > MAX_LEAVES:
            raise _too_many(what)
    if pos != n:
        raise InvalidInputError(f"{what}: {n - pos} bytes follow the tree's last node "
                                f"(byte {pos} of {n}); not one binary octomap")
    return _arrays(keys, depths)


def _full(buf: bytes, value_bytes: int, what: str):
    n = len(buf)
    vals = np.frombuffer(buf, dtype=np.uint8)
    keys, depths = [], []
    stack = [(0, 0, 0, 0)]
    pos = 0
    rec = value_bytes + 1
    while stack:
        d, kx, ky, kz = stack.pop()
        if pos + rec > n:
            raise InvalidInputError(f"{what}: the full stream ends at byte {n} inside the tree "
                                    "(truncated)")
        if d > DEPTH:
            raise InvalidInputError(f"{what}: the tree is deeper than {DEPTH} levels at byte "
                                    f"{pos}; not an OctoMap stream")
        children = buf[pos + value_bytes]
        if not children:
            v = float(vals[pos:pos + 4].view("<f4")[0])
            if not math.isfinite(v):
                raise InvalidInputError(f"{what}: a leaf's log-odds at byte {pos} is {v}; "
                                        "not an OctoMap stream")
            if v >= 0.0:
                keys.append((kx, ky, kz))
                depths.append(d)
                if len(keys) > MAX_LEAVES:
                    raise _too_many(what)
        elif d == DEPTH:
            raise InvalidInputError(f"{what}: a node at depth {DEPTH} (byte {pos}) has "
                                    "children; not an OctoMap stream")
        else:
            step = 1 << (DEPTH - d - 1)
            stack.extend((d + 1, kx + (c & 1) * step, ky + ((c >> 1) & 1) * step,
                          kz + ((c >> 2) & 1) * step)
                         for c in range(7, -1, -1) if (children >> c) & 1)
        pos += rec
    if pos != n:
        raise InvalidInputError(f"{what}: {n - pos} bytes follow the tree's last node "
                                f"(byte {pos} of {n}); not one full octomap")
    if depths and min(depths) == 0:  # the root itself a leaf: the whole cube of the tree
        raise InvalidInputError(f"{what}: the root is an occupied leaf (a cube "
                                f"{2 ** DEPTH} cells wide); not a map of a workcell")
    return _arrays(keys, depths)


def _too_many(what: str) -> InvalidInputError:
    return InvalidInputError(f"{what}: more than {MAX_LEAVES:,} occupied leaves; crop the map "
                             "to the robot's workspace or give a coarser resolution")


def _arrays(keys, depths):
    return (np.asarray(keys, dtype=np.int64).reshape(-1, 3),
            np.asarray(depths, dtype=np.int64).reshape(-1))


def read_file(path) -> tuple[Leaves, str]:
    """The occupied leaves of an OctoMap file (``.bt`` binary, ``.ot`` full, with their text
    header: ``id``, ``size``, ``res``, ``data``), and its tree id."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"octomap file {str(p)!r} cannot be read: {exc}") from None
    what = f"octomap file {p.name!r}"
    fields, body = _header(raw, what)
    return decode(body, binary=fields["binary"], resolution=fields["res"], id=fields["id"],
                  what=what), fields["id"]


_MAGIC = b"# Octomap OcTree"


def _header(raw: bytes, what: str) -> tuple[dict, bytes]:
    """The fields of an OctoMap file header (``binary``, ``id``, ``res``) and the stream after
    it."""
    head, sep, body = raw.partition(b"\ndata\n")
    if not sep or not head.startswith(_MAGIC) or len(head) > 4096:
        raise InvalidInputError(f"{what}: no OctoMap header ('# Octomap OcTree ... file' and "
                                "a 'data' line); write it with OctoMap's writeBinary or write")
    fields = {"binary": head.startswith(_MAGIC + b" binary file"), "id": "OcTree"}
    for line in head.decode("ascii", "replace").splitlines()[1:]:
        if line and not line.startswith("#"):
            k, _, v = line.partition(" ")
            fields[k] = v.strip()
    if "res" not in fields:
        raise InvalidInputError(f"{what}: its header has no 'res' line")
    return fields, body


def boxes(leaves: Leaves, what: str = "octomap") -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned boxes whose union is exactly the occupied leaves' cubes (centres (M, 3),
    full sizes (M, 3) [m] in the map's frame; :func:`ros2_ik.world.voxels.boxes`)."""
    return voxels.boxes(leaves, what)


def obstacles(centre, size, pose=None, touch=(), prefix: str = PREFIX) -> list:
    """Box obstacles ``<octomap>/k`` of :func:`boxes` at ``pose`` (the map's frame)."""
    return voxels.obstacles(centre, size, pose, touch, prefix)
