"""Cells of a regular grid as ros2_ik's worlds hold them (an octomap's occupied leaves, the
cells a mesh passes through): joined into as few axis-aligned boxes as cover exactly those
cells, and given to the solvers as box obstacles, so every answer is checked against the cells'
cubes themselves, on every backend.

- :func:`boxes`: the cells are laid on a grid of the finest cells over their bounding box,
  runs along x are joined across y, then across z: each box is a union of cells and every cell
  lies in one box. The grid is bounded: at most :data:`MAX_CELLS` cells (larger extents at that
  resolution are refused, naming the sizes and what to do), and at most
  :data:`ros2_ik.world.MAX_OBSTACLES` boxes.
- :func:`mesh_cells`: the cells a triangle mesh passes through, exactly (a triangle-box overlap
  test on the separating axes of each triangle and cell; touching counts): their union holds
  every point of the mesh and reaches at most a cell's diagonal past it, so an answer clear of
  the cells is clear of the mesh, and an open shelf stays open at a resolution finer than its
  openings.
- :func:`cloud_cells`: the cells a point cloud's points fall in (a sensed surface, each point
  a sample of it).
- :func:`obstacles`: box obstacles ``prefix/k``, placed by a pose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from . import MAX_OBSTACLES, MAX_SIZE, Obstacle

__all__ = ["Leaves", "boxes", "obstacles", "mesh_cells", "cloud_cells", "box_mesh",
           "MAX_CELLS", "HALF", "DRAWN_ONE_BY_ONE"]

#: the key of the coordinate 0 (OctoMap's: keys are ``floor(x / resolution) + HALF``)
HALF = 32768
#: finest cells over a set's bounding box at most (one byte each while joining)
MAX_CELLS = 64_000_000
#: (triangle, cell) pairs a mesh's cells are looked for among, at most
MAX_PAIRS = 64_000_000
#: triangles the large slanted ones of a mesh are split into, at most
MAX_SPLIT = 2_000_000
#: box obstacles the viewer and rviz draw one by one at most; past it, as one mesh
DRAWN_ONE_BY_ONE = 100
_CORNERS = np.array([[i, j, k] for i in (-0.5, 0.5) for j in (-0.5, 0.5) for k in (-0.5, 0.5)])
_FACES = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                   [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])


@dataclass(frozen=True)
class Leaves:
    """Cubes on a grid: ``key`` (N, 3) int64 the finest key of each cube's lower corner (the
    cell ``floor(x / resolution) + HALF``), ``cells`` (N,) int64 its edge in finest cells, and
    the grid's ``resolution`` [m]."""

    key: np.ndarray
    cells: np.ndarray
    resolution: float

    def __len__(self) -> int:
        return int(self.key.shape[0])

    def centers(self) -> np.ndarray:
        """(N, 3) the cubes' centres [m] in the grid's frame."""
        return (self.key - HALF + 0.5 * self.cells[:, None]) * self.resolution

    def sizes(self) -> np.ndarray:
        """(N,) the cubes' edges [m]."""
        return self.cells * self.resolution


def boxes(leaves: Leaves, what: str = "the cells") -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned boxes whose union is exactly the cubes of ``leaves``: centres (M, 3) and
    full sizes (M, 3) [m] in the grid's frame (see the module docstring)."""
    if not len(leaves):
        return np.zeros((0, 3)), np.zeros((0, 3))
    lo = leaves.key.min(axis=0)
    hi = (leaves.key + leaves.cells[:, None]).max(axis=0)
    ext = hi - lo
    cells = int(np.prod(ext))
    if cells > MAX_CELLS:
        span = ext * leaves.resolution
        raise InvalidInputError(
            f"{what}: its occupied cells span {span[0]:.2f} x {span[1]:.2f} x {span[2]:.2f} m "
            f"at {leaves.resolution:g} m, {cells:,} cells, past the limit of {MAX_CELLS:,}; "
            "crop the map to the robot's workspace or give a coarser resolution")
    grid = np.zeros(tuple(int(e) for e in ext), dtype=bool)
    k = leaves.key - lo
    for c in np.unique(leaves.cells):  # every cube of one size at once
        sel = np.nonzero(leaves.cells == c)[0]
        c = int(c)
        if c == 1:
            grid[k[sel, 0], k[sel, 1], k[sel, 2]] = True
        elif c >= 8:  # large cubes (few): each a block of the grid
            for x, y, z in k[sel].tolist():
                grid[x:x + c, y:y + c, z:z + c] = True
        else:
            off = np.stack(np.meshgrid(*(np.arange(c),) * 3, indexing="ij"), -1).reshape(-1, 3)
            for part in np.array_split(sel, max(1, len(sel) * len(off) // 4_000_000 + 1)):
                p = (k[part][:, None, :] + off[None]).reshape(-1, 3)
                grid[p[:, 0], p[:, 1], p[:, 2]] = True
    b_lo, b_hi = _merge(grid)
    if len(b_lo) > MAX_OBSTACLES:
        raise InvalidInputError(
            f"{what}: its {len(leaves):,} occupied cells make {len(b_lo):,} boxes, past the "
            f"limit of {MAX_OBSTACLES:,} obstacles; give a coarser resolution or crop the map")
    res = leaves.resolution
    centre = (lo + 0.5 * (b_lo + b_hi) - HALF) * res
    return centre, (b_hi - b_lo).astype(np.float64) * res


def _merge(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes [lo, hi) (M, 3) in cells covering exactly the True cells of ``grid``: runs along
    x, joined across y where equal, then across z."""
    X, Y, Z = grid.shape
    g = np.zeros((X + 2, Y, Z), dtype=np.int8)
    g[1:-1] = grid
    d = np.diff(g, axis=0)  # +1 where a run starts (at x), -1 where it ended (at x)
    sx, sy, sz = np.nonzero(d == 1)
    ex, ey, ez = np.nonzero(d == -1)
    # both are sorted by (x, y, z); order them by (y, z, x) to pair each start with its end
    o1, o2 = np.lexsort((sx, sz, sy)), np.lexsort((ex, ez, ey))
    y, z, x0, x1 = sy[o1], sz[o1], sx[o1], ex[o2]
    y0, y1, z, x0, x1 = _join(y, z, x0, x1)  # rectangles: the same x run on consecutive y
    z0, z1, y0, y1, x0, x1 = _join(z, y0, y1, x0, x1)
    return np.stack([x0, y0, z0], axis=1), np.stack([x1, y1, z1], axis=1)


def _join(t, *same):
    """Join items equal in every array of ``same`` and consecutive in ``t`` (each item
    covers [t, t + 1)): (t0, t1, *same) of the joined items."""
    o = np.lexsort((t,) + tuple(reversed(same)))
    t = t[o]
    same = [s[o] for s in same]
    new = np.ones(len(t), dtype=bool)
    if len(t) > 1:
        eq = np.ones(len(t) - 1, dtype=bool)
        for s in same:
            eq &= s[1:] == s[:-1]
        new[1:] = ~(eq & (t[1:] == t[:-1] + 1))
    start = np.nonzero(new)[0]
    end = np.append(start[1:], len(t)) - 1
    return (t[start], t[end] + 1) + tuple(s[start] for s in same)


def obstacles(centre: np.ndarray, size: np.ndarray, pose=None, touch=(),
              prefix: str = "cells") -> list:
    """Box obstacles ``prefix/k`` of :func:`boxes`, placed by ``pose`` (4, 4) (the grid's frame
    in the world's; default: the identity)."""
    T = np.eye(4) if pose is None else np.asarray(pose, dtype=np.float64)
    first = Obstacle.make(f"{prefix}/0", "box", (1.0, 1.0, 1.0), T, touch)  # checks T, touch
    if not len(centre):
        return []
    size = np.asarray(size, dtype=np.float64)
    if not (np.all(np.isfinite(size)) and np.all(size > 0) and size.max() <= MAX_SIZE):
        raise InvalidInputError(f"{prefix}: box sizes must be positive and finite")
    P = np.broadcast_to(T, (len(centre), 4, 4)).copy()
    P[:, :3, 3] = np.asarray(centre, dtype=np.float64) @ T[:3, :3].T + T[:3, 3]
    if not np.all(np.abs(P[:, :3, 3]) <= MAX_SIZE):
        raise InvalidInputError(f"{prefix}: boxes lie beyond {MAX_SIZE:g} m")
    P.setflags(write=False)
    # (built directly: the pose is the checked T moved, the sizes checked above at once)
    return [Obstacle(f"{prefix}/{k}", "box", tuple(s), P[k], first.touch)
            for k, s in enumerate(size.tolist())]


def mesh_cells(vertices, faces, resolution: float, what: str = "mesh") -> Leaves:
    """The cells of edge ``resolution`` [m] that the triangles ``faces`` (F, 3) of
    ``vertices`` (V, 3) pass through or touch (see the module docstring), in the mesh's
    frame."""
    resolution = _edge(resolution, what)
    V = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    F = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if not len(F):
        return Leaves(np.zeros((0, 3), np.int64), np.zeros(0, np.int64), resolution)
    if F.min() < 0 or F.max() >= len(V):
        raise InvalidInputError(f"{what}: a triangle names vertex {int(F.max())} of {len(V)}")
    if not np.all(np.isfinite(V[F])) or np.abs(V[F]).max() > MAX_SIZE:
        raise InvalidInputError(f"{what}: its vertices must be finite and within "
                                f"{MAX_SIZE:g} m")
    V, F = _split_slanted(V, F, resolution, what)
    tri = V[F] / resolution  # (F, 3, 3) in cells
    lo = np.floor(tri.min(axis=1))
    hi = np.floor(tri.max(axis=1))  # a vertex on a face: both cells
    total = float(np.prod(hi - lo + 1, axis=1).sum())  # (in floats: no overflow)
    if total > MAX_PAIRS:
        raise InvalidInputError(f"{what}: its triangles span {total:,.0f} cells at "
                                f"{resolution:g} m, past the limit of {MAX_PAIRS:,}; give a "
                                "coarser resolution")
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    n = np.prod(hi - lo + 1, axis=1)
    found = []
    order = np.argsort(n)
    start = 0
    while start < len(order):  # triangles in chunks of about 2 million candidate cells
        stop = start + 1
        total = int(n[order[start]])
        while stop < len(order) and total + int(n[order[stop]]) <= 2_000_000:
            total += int(n[order[stop]])
            stop += 1
        found.append(_overlapping(tri[order[start:stop]], lo[order[start:stop]],
                                  hi[order[start:stop]]))
        start = stop
    keys = np.unique(np.concatenate(found), axis=0) + HALF
    return Leaves(keys, np.ones(len(keys), np.int64), float(resolution))


def _edge(resolution, what: str) -> float:
    resolution = float(resolution)
    if not (np.isfinite(resolution) and resolution > 0):
        raise InvalidInputError(f"{what}: the cells' edge must be positive and finite, got "
                                f"{resolution!r}")
    return resolution


def _split_slanted(V, F, res, what):
    """The mesh with each triangle whose bounding cells outnumber the cells it can pass
    through many times over (large and slanted) split into triangles of edges under 2 cells:
    the same surface, far fewer candidate cells (at most :data:`MAX_SPLIT` triangles)."""
    tri = V[F] / res
    n = np.prod(np.floor(tri.max(axis=1)) - np.floor(tri.min(axis=1)) + 1, axis=1)
    e = np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2)
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    slanted = n > 8.0 * (area + e.sum(axis=1) + 8.0)
    if not slanted.any():
        return V, F
    # each halving of the longest edge makes four triangles of one
    halvings = np.ceil(np.log2(np.maximum(e[slanted].max(axis=1) / 2.0, 1.0)))
    made = float(np.sum(4.0 ** halvings))
    if made > MAX_SPLIT:
        raise InvalidInputError(f"{what}: its large slanted triangles would split into "
                                f"{made:,.0f} at {res:g} m, past {MAX_SPLIT:,}; give a coarser "
                                "resolution or a finer mesh")
    import trimesh.remesh  # noqa: PLC0415

    try:
        Vs, Fs = trimesh.remesh.subdivide_to_size(V, F[slanted], 2.0 * res, max_iter=12)
    except ValueError:  # (still larger: looked at whole, exactly as well)
        return V, F
    return np.concatenate([V, Vs]), np.concatenate([F[~slanted], Fs + len(V)])


def _overlapping(tri, lo, hi) -> np.ndarray:
    """(M, 3) the cells (integer lower corners, in cells) among each triangle's bounding cells
    that it overlaps (Akenine-Moeller's separating axes; a shared face or edge counts)."""
    ext = hi - lo + 1
    n = np.prod(ext, axis=1)
    t = np.repeat(np.arange(len(tri)), n)
    first = np.concatenate([[0], np.cumsum(n)[:-1]])
    j = np.arange(int(n.sum())) - np.repeat(first, n)  # index within the triangle's cells
    ex = ext[t]
    cell = lo[t] + np.stack([j // (ex[:, 1] * ex[:, 2]), (j // ex[:, 2]) % ex[:, 1],
                             j % ex[:, 2]], axis=1)
    v = tri[t] - (cell + 0.5)[:, None, :]  # (K, 3, 3) about the cell's centre; half edge 0.5
    h = 0.5 + 1e-9  # (touching counts, rounding included)
    ok = np.ones(len(t), dtype=bool)
    e = np.stack([v[:, 1] - v[:, 0], v[:, 2] - v[:, 1], v[:, 0] - v[:, 2]], axis=1)
    for i in range(3):  # the 9 axes: a cell axis x a triangle edge
        for a in range(3):
            axis = np.zeros((len(t), 3))
            axis[:, (a + 1) % 3] = -e[:, i, (a + 2) % 3]
            axis[:, (a + 2) % 3] = e[:, i, (a + 1) % 3]
            p = np.einsum("kvx,kx->kv", v, axis)
            r = h * np.abs(axis).sum(axis=1)
            ok &= ~((p.min(axis=1) > r) | (p.max(axis=1) < -r))
    ok &= np.all((v.min(axis=1) <= h) & (v.max(axis=1) >= -h), axis=1)  # the cell's faces
    nrm = np.cross(e[:, 0], e[:, 1])  # the triangle's plane
    ok &= np.abs(np.einsum("kx,kx->k", nrm, v[:, 0])) <= h * np.abs(nrm).sum(axis=1)
    return cell[ok]


def cloud_cells(points, resolution: float, what: str = "point cloud") -> Leaves:
    """The cells of edge ``resolution`` [m] that the finite points (N, 3) fall in."""
    resolution = _edge(resolution, what)
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    P = P[np.all(np.isfinite(P), axis=1)]
    if P.size and np.abs(P).max() > MAX_SIZE:
        raise InvalidInputError(f"{what}: points lie beyond {MAX_SIZE:g} m")
    keys = np.unique(np.floor(P / resolution).astype(np.int64), axis=0) + HALF
    return Leaves(keys, np.ones(len(keys), np.int64), float(resolution))


def box_mesh(poses, sizes) -> tuple[np.ndarray, np.ndarray]:
    """One triangle mesh of n boxes at ``poses`` (n, 4, 4) with full ``sizes`` (n, 3): its
    vertices (8 n, 3) and faces (12 n, 3), wound outwards (to draw many cells at once)."""
    T = np.asarray(poses, dtype=np.float64).reshape(-1, 4, 4)
    local = _CORNERS[None] * np.asarray(sizes, dtype=np.float64).reshape(-1, 1, 3)
    V = np.einsum("nij,nkj->nki", T[:, :3, :3], local) + T[:, None, :3, 3]
    F = _FACES[None] + 8 * np.arange(len(T))[:, None, None]
    return V.reshape(-1, 3), F.reshape(-1, 3)
