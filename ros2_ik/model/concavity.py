"""How deep a point lies in a link's own solid: what keeps spheres out of its concavities.

A sphere fit bounded only by the convex hull (:mod:`ros2_ik.model.spheres`) fills a bracket's
slot, a jaw's gap or the inside of a U: a hand near a shelf, a finger at a handle, is refused
where the mesh is centimetres clear. A sphere centred at ``c`` whose radius is at most
``s(c) + delta``, with ``s`` the signed distance to the link's solid (positive inside), reaches
at most ``delta`` past the solid in any direction: the same rule as the hull's, with the solid
in the place of its hull. :class:`SolidDepth` gives a lower bound of ``s``:

- **distance**: to a lattice on every triangle (steps of at most :data:`LATTICE` metres, more
  for a very large link: at most :data:`MAX_LATTICE` points), so the true distance is at least
  the lattice's less ``step / sqrt(3)`` (:attr:`SolidDepth.error`);
- **inside or outside**: the lattice marked on a voxel grid, grown by a voxel and filled
  (:func:`scipy.ndimage.binary_fill_holes`): the solid with closed cavities and holes smaller
  than about two voxels filled. A point within two voxels of the surface counts as outside
  (its signed distance is then at least minus its distance), so a voxel's error never makes a
  sphere larger.

Only a link whose solid leaves part of its hull empty (deeper than :data:`SHALLOW`) is bounded
by it (:func:`solid_depth` returns None for the others): a convex link's fit is unchanged, and
the bound holds against its mesh within :data:`SHALLOW`.
:func:`mesh_overshoot` measures the result against the mesh itself (trimesh's exact signed
distance), independently of the lattice and the voxels.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["solid_depth", "solid", "SolidDepth", "mesh_overshoot", "lattice_points", "lattice_step",
           "LATTICE", "MAX_LATTICE", "MAX_VOXELS", "SHALLOW"]

#: lattice step on the triangles [m] (the distance's error is step / sqrt(3))
LATTICE = 0.001
#: most lattice points of one link
MAX_LATTICE = 2_000_000
#: most voxels of one link's inside-outside grid
MAX_VOXELS = 4_000_000
#: [m] a link whose hull exceeds its solid by no more than this (and the lattice's error) is
#: fitted against its hull alone (its fit is a convex link's)
SHALLOW = 0.002


class SolidDepth:
    """A lower bound of the signed distance to a link's solid (see the module docstring)."""

    def __init__(self, points, step, origin, pitch, inside):
        from scipy.spatial import cKDTree  # noqa: PLC0415

        self.tree = cKDTree(points)
        self.error = float(step) / math.sqrt(3.0)
        self.origin, self.pitch, self.inside = origin, float(pitch), inside

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        out = np.empty(len(X))
        for a in range(0, len(X), 65536):
            Q = X[a:a + 65536]
            d, _ = self.tree.query(Q)
            idx = np.floor((Q - self.origin) / self.pitch).astype(np.int64)
            ok = np.all((idx >= 0) & (idx < np.array(self.inside.shape)), axis=1)
            ins = np.zeros(len(Q), dtype=bool)
            ins[ok] = self.inside[tuple(idx[ok].T)]
            # inside and clear of the voxels' uncertainty: at least d less the lattice's error;
            # otherwise at least -d
            ins &= d > 2.0 * math.sqrt(3.0) * self.pitch
            out[a:a + 65536] = np.where(ins, d - self.error, -d)
        return out


def _lattice(n: int) -> np.ndarray:
    """Barycentric weights (k, 3) of a triangle's lattice with ``n`` steps a side."""
    i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = i + j <= n
    a, b = i[keep] / n, j[keep] / n
    return np.stack([1.0 - a - b, a, b], axis=1)


def lattice_points(shapes, step: float) -> np.ndarray:
    """Points on every triangle of ``shapes``, no surface point farther than ``step / sqrt(3)``
    from one (each triangle cut into triangles of edges <= ``step``)."""
    parts = []
    for s in shapes:
        tri = np.asarray(s.vertices, dtype=np.float64)[np.asarray(s.faces)]  # (m, 3, 3)
        edge = np.max(np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2), axis=1)
        steps = np.maximum(1, np.ceil(edge / step)).astype(np.int64)
        for n in np.unique(steps):
            W = _lattice(int(n))
            parts.append(np.einsum("kj,tjd->tkd", W, tri[steps == n]).reshape(-1, 3))
    return np.concatenate(parts)


def _edges(shapes) -> list:
    """Each shape's longest triangle edge per triangle [m]."""
    out = []
    for s in shapes:
        tri = np.asarray(s.vertices, dtype=np.float64)[np.asarray(s.faces)]
        out.append(np.max(np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2), axis=1))
    return out


def _lattice_size(edges, step: float, corners: bool = True) -> float:
    n = 0.0
    for edge in edges:
        k = np.maximum(1, np.ceil(edge / step))
        n += float(np.sum((k + 1) * (k + 2) / 2)) - (0 if corners else 3 * len(edge))
    return n


def lattice_step(shapes, step: float = LATTICE, most: int = MAX_LATTICE,
                 corners: bool = True) -> float:
    """The lattice step of a link: ``step`` (:data:`LATTICE`), or more for a link whose
    lattice would hold more than ``most`` (:data:`MAX_LATTICE`) points (with ``corners``
    false, more than ``most`` besides the triangles' corners, which a mesh of many small
    triangles cannot do without); at most the longest triangle edge (each triangle's corners
    alone: their number is bounded by the mesh's own size, :data:`~ros2_ik.model.
    collision_spheres.MAX_PLACED_VERTICES`)."""
    edges = _edges(shapes)
    longest = max((float(e.max()) for e in edges if len(e)), default=step)
    while step < longest and _lattice_size(edges, step, corners) > most:
        step *= 1.25
    return step


def solid(shapes, P=None, step=None) -> SolidDepth:
    """:class:`SolidDepth` of the link made of ``shapes`` (:class:`~ros2_ik.model.spheres.
    Shape`): positive only inside its solid (closed cavities and small holes filled; an open
    mesh has no inside). ``P``, ``step``: the link's :func:`lattice_points` and their step,
    when already made."""
    from scipy import ndimage  # noqa: PLC0415

    if P is None:
        step = lattice_step(shapes)
        P = lattice_points(shapes, step)
    lo, hi = P.min(axis=0), P.max(axis=0)
    pitch = step
    while np.prod(np.ceil((hi - lo) / pitch) + 5) > MAX_VOXELS:
        pitch *= 1.2
    dims = tuple(int(v) for v in np.ceil((hi - lo) / pitch) + 5)
    origin = lo - 2.0 * pitch
    surf = np.zeros(dims, dtype=bool)
    surf[tuple(np.floor((P - origin) / pitch).astype(np.int64).T)] = True
    grown = ndimage.binary_dilation(surf, structure=np.ones((3, 3, 3), dtype=bool))
    inside = ndimage.binary_fill_holes(grown) & ~grown
    del surf, grown
    return SolidDepth(P, step, origin, pitch, inside)


def solid_depth(shapes, hull_depth, P=None, step=None) -> SolidDepth | None:
    """:func:`solid` of the link made of ``shapes``, or None when the link fills its convex
    hull (``hull_depth(X)``: depth in the hull, >= 0 inside) but for the voxels' and the
    lattice's error. ``P``, ``step``: the link's :func:`lattice_points` and their step, when
    already made."""
    depth = solid(shapes, P, step)
    origin, pitch, inside = depth.origin, depth.pitch, depth.inside
    # does the solid leave the hull empty anywhere? (voxel centres in the hull, far outside)
    idx = np.argwhere(~inside)
    idx = idx[::max(1, len(idx) // 200_000)]  # (a sample is enough to tell)
    C = origin + (idx + 0.5) * pitch
    C = C[hull_depth(C) > 0.0]
    if not len(C):
        return None
    gap = depth.tree.query(C)[0]
    if not np.any(gap > SHALLOW + depth.error):
        return None
    return depth


def mesh_overshoot(centers, radii, shapes, directions: int = 48,
                   consider: float = 0.0035) -> float:
    """[m] how far the spheres reach past the link's own mesh: the largest distance outside
    the mesh of a point on a sphere (``directions`` a sphere), by trimesh's exact signed
    distance (for the points farther than ``consider`` from a dense surface sample; the rest
    count as their distance to the sample, an upper bound). The meshes should be closed.
    Independent of :class:`SolidDepth`."""
    import trimesh  # noqa: PLC0415
    from scipy.spatial import cKDTree  # noqa: PLC0415

    centers, radii = np.asarray(centers, dtype=np.float64), np.asarray(radii, dtype=np.float64)
    if not len(radii):
        return 0.0
    # each closed body on its own (a mesh of overlapping shells is their union)
    meshes = [b for s in shapes for b in trimesh.Trimesh(
        vertices=s.vertices, faces=s.faces, process=True).split(only_watertight=False)]
    samples = np.concatenate([np.asarray(trimesh.sample.sample_surface(
        m, max(1000, int(m.area / 0.0004 ** 2)), seed=3)[0]) for m in meshes]
        + [np.asarray(m.vertices) for m in meshes])
    tree = cKDTree(samples)
    k = np.arange(directions) + 0.5
    phi, th = np.arccos(1 - 2 * k / directions), math.pi * (1 + 5 ** 0.5) * k
    D = np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], axis=1)
    P = (centers[:, None, :] + radii[:, None, None] * D[None]).reshape(-1, 3)
    d, _ = tree.query(P)
    worst = float(d[d <= consider].max()) if np.any(d <= consider) else 0.0
    far = P[d > consider]
    if len(far):
        sd = np.full(len(far), -np.inf)
        for m in meshes:  # positive inside one of the pieces
            sd = np.maximum(sd, trimesh.proximity.signed_distance(m, far))
        worst = max(worst, float(np.max(-sd)))
    return worst
