"""Spheres fitted to a link's collision geometry with a bounded overshoot.

The solvers see a robot as spheres (a signed distance per sphere costs a few instructions; see
:mod:`ros2_ik.model.collision`). A sphere model is right when it *covers* the geometry (a
configuration clear on the spheres is clear on the meshes) and useful when it is *tight* (a
robot standing on a table, a hand near a shelf, is not refused because its spheres bulge).
:func:`fit_link` makes both measurable:

- **coverage**: every vertex of the link's geometry and every point of a dense, seeded sample
  of its surface lies inside some sphere (points inside another of the link's shapes excepted);
  the radii carry :data:`SLACK` more for the surface between the samples;
- **overshoot**: for every direction ``d``, ``max_s (c_s . d + r_s) - max_v (v . d) <= delta``
  (the support functions of the spheres and of the geometry: how far the spheres reach past the
  geometry in that direction). This holds by construction: a sphere whose centre lies inside the
  geometry's convex hull at distance ``D(c)`` from its boundary reaches at most ``r - D(c)``
  past the hull in any direction, and every radius is kept ``<= D(c) + delta``.

The fit (cuRobo's voxel idea, with the overshoot bound as the radius rule): candidate centres on
a grid inside the convex hull, each with its largest admissible radius ``D(c) + delta -
SLACK``; a greedy set cover of the surface points (the candidate covering most uncovered points
first; points no candidate reaches get candidates along the inward normal); then each sphere
shrunk to the points it owns and spheres that others make redundant dropped. The number of
spheres is what the bound asks for: a capsule needs a handful, a flat plate or a sharp edge many
small ones. :func:`report` measures both properties on an independent sample.

**Bounded memory and time**, whatever the mesh's size or a sweep's placements: the hull is
taken over each piece's own hull vertices; the candidate grid holds at most :data:`MAX_GRID`
centres (a coarser step on a large link); the candidates' point lists are built in blocks and
thinned evenly past :data:`MAX_ENTRIES` entries; depths are computed in blocks; the vertices a
fit samples are thinned to one per cell of a third of the spacing past :data:`MANY_VERTICES` (every
vertex is still checked at the end, and one left outside gets a sphere). The fit of any link
stays within :data:`MEMORY_BUDGET` (measured by the real-robot tier on the largest meshes and
sweeps of example-robot-data).

Fits are kept on disk (:func:`cache_dir`), keyed by a hash of the geometry and the bound, so a
robot's meshes are fitted once per machine.
"""

from __future__ import annotations

import hashlib
import heapq
import io
import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["fit_link", "overshoot", "coverage", "report", "cache_dir", "OVERSHOOT", "SLACK",
           "Shape", "FIT_VERSION", "MAX_GRID", "MAX_ENTRIES", "MEMORY_BUDGET"]

#: default bound on a link's overshoot [m]
OVERSHOOT = 0.005
#: what every radius carries beyond the sampled surface [m] (the surface between samples)
SLACK = 0.001
#: surface sample spacing of a fit [m] (capped by :data:`MAX_POINTS` per link)
SPACING = 0.003
MAX_POINTS = 300_000
#: a link's vertices past this many are thinned to one per cell of a third of the spacing
#: (every vertex is checked after the fit)
MANY_VERTICES = 24_000
#: how far past its farthest own sample a sphere reaches at least (<= the largest radius the
#: bound allows): the surface between two samples owned by different spheres
GAP = 0.6 * SPACING
#: what every radius gets at the end, kept out of the bound while fitting [m]: the surface
#: between the validation samples (a point a micrometre outside would be uncovered)
RESERVE = 0.0006
#: changes whenever the fit's rules change (part of the cache key)
FIT_VERSION = 10
#: a link fitted to its mesh (``to_mesh``) body by body when it has at most this many
MAX_BODIES = 32
#: [m] a hull's facets this close merged (a finely tessellated mesh's thousands of facets: the
#: planes are then moved out to the vertices and the radii kept within the bound of the hull
#: itself, less what the merged polytope reaches past it)
HULL_MERGE = 3e-5
#: most candidate centres of one fit (a larger link gets a coarser grid)
MAX_GRID = 120_000
#: most (candidate, point) entries of one covering round (candidates thinned evenly past it)
MAX_ENTRIES = 8_000_000
#: elements of one block of a depth or distance computation
BLOCK = 2_000_000
#: what one link's fit may use [bytes] (documented; the real-robot tier measures it)
MEMORY_BUDGET = 1 << 30


@dataclass(frozen=True)
class Shape:
    """One piece of a link's geometry in the link's frame: a triangle mesh (``vertices`` (n, 3),
    ``faces`` (m, 3)) and, for a primitive, its kind and parameters (used to tell whether a
    point lies inside it): ``("box", T (4, 4), half sizes)``, ``("cylinder", T, (r, half
    length))``, ``("sphere", T, (r,))``, ``("capsule", T, (r, half length))``, or None."""

    vertices: np.ndarray
    faces: np.ndarray
    primitive: tuple | None = None

    def contains(self, P: np.ndarray, tol: float = 1e-6) -> np.ndarray:
        """(n,) bool: which points lie strictly inside (primitives only; a mesh says False)."""
        if self.primitive is None:
            return np.zeros(len(P), dtype=bool)
        kind, T, a = self.primitive
        loc = (P - T[:3, 3]) @ T[:3, :3]
        if kind == "box":
            return np.all(np.abs(loc) < np.asarray(a) - tol, axis=1)
        if kind == "sphere":
            return np.linalg.norm(loc, axis=1) < a[0] - tol
        rho = np.linalg.norm(loc[:, :2], axis=1)
        if kind == "cylinder":
            return (rho < a[0] - tol) & (np.abs(loc[:, 2]) < a[1] - tol)
        z = np.clip(loc[:, 2], -a[1], a[1])  # capsule
        return np.linalg.norm(loc - np.stack([0 * z, 0 * z, z], 1), axis=1) < a[0] - tol


def cache_dir() -> Path:
    """Where fits are kept: ``$ROS2_IK_SPHERE_CACHE``, else ``~/.cache/ros2_ik/spheres``."""
    d = os.environ.get("ROS2_IK_SPHERE_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "ros2_ik" / "spheres"


def _key(shapes, delta: float) -> str:
    h = hashlib.sha256(f"ros2_ik spheres v{FIT_VERSION} {delta!r} {SLACK!r} {SPACING!r}".encode())
    for s in shapes:
        h.update(np.ascontiguousarray(s.vertices, dtype=np.float64).tobytes())
        h.update(np.ascontiguousarray(s.faces, dtype=np.int64).tobytes())
        h.update(repr(None if s.primitive is None else (s.primitive[0],
                                                        np.round(s.primitive[1], 12).tolist(),
                                                        tuple(s.primitive[2]))).encode())
    return h.hexdigest()[:32]


def _bodies(shapes) -> list:
    """The separate bodies of a link made of ``shapes``: each primitive, and each connected
    piece of each mesh (trimesh's split, its vertices merged); ``shapes`` themselves where
    that would be more than :data:`MAX_BODIES`."""
    import trimesh  # noqa: PLC0415 - the collision model only

    out = []
    for s in shapes:
        if s.primitive is not None:
            out.append(s)
        else:
            parts = trimesh.Trimesh(s.vertices, s.faces, process=True).split(
                only_watertight=False)
            out += [Shape(np.asarray(p.vertices, dtype=np.float64),
                          np.asarray(p.faces, dtype=np.int64)) for p in parts] or [s]
        if len(out) > MAX_BODIES:
            return list(shapes)
    return out


def fit_link(shapes, delta: float = OVERSHOOT, *, cache: bool = True, to_mesh: bool = False):
    """Spheres ``(centers (k, 3), radii (k,))`` covering the link made of ``shapes``
    (:class:`Shape`, in the link frame) with an overshoot of at most ``delta`` [m] past its
    convex hull (see the module docstring), and with ``to_mesh`` past its own mesh too (a
    concave link: :mod:`ros2_ik.model.concavity`; a link of several separate bodies, boxes
    or a mesh's disconnected pieces, is then fitted body by body, each within its own hull
    and solid, as long as there are at most :data:`MAX_BODIES`); kept in :func:`cache_dir`
    when ``cache``."""
    shapes = [s for s in shapes if len(s.vertices) and len(s.faces)]
    if not shapes:
        return np.zeros((0, 3)), np.zeros(0)
    if not (isinstance(delta, (int, float)) and SLACK < delta <= 1.0):
        raise ValueError(f"the overshoot bound must be in ({SLACK}, 1] m, got {delta!r}")
    # one sphere primitive alone is its own exact model
    if len(shapes) == 1 and shapes[0].primitive is not None and shapes[0].primitive[0] == "sphere":
        kind, T, a = shapes[0].primitive
        return T[None, :3, 3].copy(), np.array([float(a[0])])
    if to_mesh:  # body by body: no sphere reaches into the gap between two
        bodies = _bodies(shapes)
        if len(bodies) > 1:
            fits = [fit_link([b], delta, cache=cache, to_mesh=True) for b in bodies]
            return _ordered(np.concatenate([f[0] for f in fits]),
                            np.concatenate([f[1] for f in fits]))
    key = _key(shapes, float(delta)) + ("m" if to_mesh else "")
    path = cache_dir() / f"{key}.npy"
    if cache:
        try:
            a = np.load(path, allow_pickle=False)
            if a.ndim == 2 and a.shape[1] == 4:
                return a[:, :3].copy(), a[:, 3].copy()
        except (OSError, ValueError):
            pass
    c, r = _fit(shapes, float(delta), to_mesh)
    if cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            np.save(buf, np.concatenate([c, r[:, None]], axis=1))
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(buf.getvalue())
            os.replace(tmp, path)
        except OSError:  # a read-only home: fitted again next time
            pass
    return c, r


def surface_points(shapes, spacing: float = SPACING, seed: int = 0,
                   max_points: int = MAX_POINTS) -> np.ndarray:
    """The points a fit must cover: every vertex and an even, seeded sample of every shape's
    surface, less those strictly inside another primitive of the link."""
    import trimesh  # noqa: PLC0415 - the collision model only

    areas = []
    meshes = []
    for s in shapes:
        m = trimesh.Trimesh(vertices=s.vertices, faces=s.faces, process=False)
        meshes.append(m)
        areas.append(float(m.area))
    total = sum(areas) or 1.0
    n_all = int(min(max_points, max(2000, total / spacing ** 2)))
    # many pieces (a swept side branch): fewer samples each, the same number in all
    floor = 200 if len(shapes) <= 480 else max(8, 96_000 // len(shapes))
    many = sum(len(s.vertices) for s in shapes) > MANY_VERTICES
    prims = [o for o in shapes if o.primitive is not None]
    parts = []
    for i, (s, m, a) in enumerate(zip(shapes, meshes, areas)):
        n = max(floor, int(n_all * a / total))
        pts, _ = trimesh.sample.sample_surface(m, n, seed=seed + 7919 * i)
        V = np.asarray(s.vertices, dtype=np.float64)
        if many:  # one vertex per cell of spacing / 3 (all are checked after the fit)
            V = thin_points(V, spacing / 3.0)
        P = np.concatenate([V, np.asarray(pts, dtype=np.float64)])
        inside = np.zeros(len(P), dtype=bool)
        for o in prims:
            if o is not s:
                inside |= o.contains(P)
        parts.append(P[~inside])
    P = np.concatenate(parts)
    if many:
        P = thin_points(P, spacing / 3.0)
    return P


def thin_points(P: np.ndarray, cell: float) -> np.ndarray:
    """The first point of ``P`` in each cube of side ``cell`` (order kept)."""
    if len(P) == 0:
        return P
    key = np.floor(P / cell).astype(np.int64)
    _, first = np.unique(key, axis=0, return_index=True)
    return P[np.sort(first)]


def _hull(V: np.ndarray):
    """(outward unit normals (h, 3), offsets (h,), excess): n . x <= b inside, a polytope that
    holds the convex hull of V and reaches at most ``excess`` [m] past it (0 but for a finely
    tessellated mesh, whose hull's thousands of facets are merged within :data:`HULL_MERGE`
    and the planes moved out to the vertices; the excess measured exactly at the merged
    polytope's corners). A flat or degenerate set gets its bounding box's planes (thickened by
    a micrometre)."""
    from scipy.spatial import ConvexHull, HalfspaceIntersection, QhullError  # noqa: PLC0415

    try:
        h = ConvexHull(V)
        N = h.equations[:, :3]
        excess = 0.0
        if len(N) > 256:
            try:
                M = ConvexHull(V, qhull_options=f"Qt C-{HULL_MERGE}").equations[:, :3]
                M = M / np.linalg.norm(M, axis=1, keepdims=True)
                bm = (V @ M.T).max(axis=0)
                corners = HalfspaceIntersection(np.hstack([M, -bm[:, None]]),
                                                V.mean(axis=0)).intersections
                excess = _outside_distance(V[h.vertices], h, corners)
                N = M
            except (QhullError, ValueError):
                excess = 0.0
        N = N / np.linalg.norm(N, axis=1, keepdims=True)
        return N, (V @ N.T).max(axis=0), excess
    except (QhullError, ValueError):
        lo, hi = V.min(axis=0) - 1e-6, V.max(axis=0) + 1e-6
        N = np.concatenate([np.eye(3), -np.eye(3)])
        return N, np.concatenate([hi, -lo]), 0.0


def _outside_distance(V, hull, P) -> float:
    """[m] the largest distance of the points ``P`` outside the convex ``hull`` (scipy's, of
    V): trimesh's exact closest points on its triangles."""
    import trimesh  # noqa: PLC0415

    tri = trimesh.Trimesh(vertices=hull.points, faces=hull.simplices, process=False)
    out = P[(P @ hull.equations[:, :3].T + hull.equations[:, 3]).max(axis=1) > 0]
    if not len(out):
        return 0.0
    _, d, _ = trimesh.proximity.closest_point(tri, out)
    return float(np.max(d))


def _hull_vertices(V: np.ndarray) -> np.ndarray:
    """The vertices of V's convex hull (all of V when it is flat or degenerate)."""
    from scipy.spatial import ConvexHull, QhullError  # noqa: PLC0415

    if len(V) <= 64:
        return V
    try:
        return V[ConvexHull(V).vertices]
    except (QhullError, ValueError):
        return V


def _outside(c, r, Q) -> np.ndarray:
    """(len(Q),) bool: which points lie outside every sphere (in blocks)."""
    from scipy.spatial import cKDTree  # noqa: PLC0415

    return _nearest_gaps(cKDTree(c), r, Q) > 0


def _nearest_gaps(tree, r, Q, k: int = 16, block: int = 65536) -> np.ndarray:
    """(len(Q),) each point's distance outside the nearest of the ``k`` spheres whose centres
    (``tree``) are nearest it (<= 0: inside one of them), in blocks."""
    k = min(k, len(r))
    out = np.empty(len(Q))
    for a in range(0, len(Q), block):
        d, i = tree.query(Q[a:a + block], k=k)
        d, i = d.reshape(-1, k), i.reshape(-1, k)
        out[a:a + block] = (d - r[i]).min(axis=1)
    return out


def _fit(shapes, delta: float, to_mesh: bool = False):

    V = np.concatenate([_hull_vertices(s.vertices) for s in shapes]).astype(np.float64)
    N, b, excess = _hull(V)
    reach = delta - SLACK - RESERVE - excess

    def depth(X):
        out = np.empty(len(X))
        step = max(1, BLOCK // max(1, len(b)))
        for a in range(0, len(X), step):
            out[a:a + step] = (b[None, :] - X[a:a + step] @ N.T).min(axis=1)
        return out

    # to the mesh, a concave link: no radius past the solid's own depth either
    # (ros2_ik.model.concavity)
    from .concavity import lattice_points, lattice_step, solid_depth  # noqa: PLC0415

    step = lattice_step(shapes)
    lattice = lattice_points(shapes, step)
    for o in shapes:  # (points strictly inside another primitive of the link need no cover)
        if o.primitive is not None:
            lattice = lattice[~o.contains(lattice)]
    solid = solid_depth(shapes, depth, lattice, step) if to_mesh else None
    if solid is not None:
        hull_depth = depth

        def depth(X):
            return np.minimum(hull_depth(X), solid(X))

    lo, hi = V.min(axis=0), V.max(axis=0)
    ext = hi - lo
    thin = max(float(np.sort(ext)[0]), 1e-4)
    h = float(np.clip(min(ext.max() / 36.0, thin / 3.0), 0.0015, 0.01))
    # at most MAX_GRID candidates (a large link, a long sweep: a coarser grid)
    while np.prod([max(1.0, e / h) for e in ext]) > MAX_GRID:
        h *= 1.25
    axes = [np.arange(lo[i] + 0.5 * (ext[i] % h or h), hi[i], h) if ext[i] > h
            else np.array([0.5 * (lo[i] + hi[i])]) for i in range(3)]
    G = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    D = depth(G)
    grid = (G[D >= 0], D[D >= 0])
    P = surface_points(shapes)
    c, r = _cover(P, grid, depth, N, b, reach)
    c, r = _tighten(c, r, P)
    # a fresh sample of the surface, twice: what falls between the spheres gets more of them
    for seed in (1, 2, 3, 4, 5):  # (twice as dense as the fit's sample)
        if seed < 4:
            Q = surface_points(shapes, spacing=SPACING / 1.5, seed=seed,
                               max_points=2 * MAX_POINTS)
        elif seed == 4:  # every vertex, if they were thinned
            if sum(len(s.vertices) for s in shapes) <= MANY_VERTICES:
                continue
            Q = np.concatenate([s.vertices for s in shapes]).astype(np.float64)
        else:  # the lattice: no surface point farther than RESERVE from one (at its step)
            Q = lattice
        if len(r):
            Q = Q[_outside(c, r, Q)]
        if not len(Q):
            continue
        c2, r2 = _cover(Q, grid, depth, N, b, reach)
        c, r = np.concatenate([c, c2]), np.concatenate([r, r2 + SLACK])
    return _ordered(c, r + RESERVE)


def _ordered(c, r):
    """Spheres (centres, radii) in the order of their centres (x, then y, then z)."""
    order = np.lexsort((c[:, 2], c[:, 1], c[:, 0]))
    return np.ascontiguousarray(c[order]), np.ascontiguousarray(r[order])


def _cover(P, grid, depth, N, b, reach):
    """Spheres (centres, radii <= depth + reach) holding every point of ``P``: a greedy set
    cover over the ``grid`` candidates (centres, depths), then candidates along the inward
    normals of the points left, then spheres on the points themselves."""
    from scipy import sparse  # noqa: PLC0415
    from scipy.spatial import cKDTree  # noqa: PLC0415

    ptree = cKDTree(P)
    chosen_c, chosen_r = [], []
    uncovered = np.ones(len(P), dtype=bool)
    C, D = grid
    for _round in range(4):
        if len(C):
            R = D + reach
            idx_unc = np.nonzero(uncovered)[0]
            # the matrix's size, estimated on every 16th candidate: thinned evenly past the
            # bound (a bounded matrix), then the lists in blocks (Python ints are large)
            est = 16 * int(np.sum(ptree.query_ball_point(C[::16], R[::16], return_length=True)))
            if est > MAX_ENTRIES:
                keep = np.zeros(len(C), dtype=bool)
                keep[::int(math.ceil(est / MAX_ENTRIES))] = True
                C, R, D = C[keep], R[keep], D[keep]
            parts, counts = [], []
            for a in range(0, len(C), 2048):
                lists = ptree.query_ball_point(C[a:a + 2048], R[a:a + 2048])
                n = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
                parts.append(np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int32,
                                         count=int(n.sum())))
                counts.append(n)
                del lists
            cols = np.concatenate(parts) if parts else np.zeros(0, np.int32)
            counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
            del parts
            rows = np.repeat(np.arange(len(C), dtype=np.int32), counts)
            A = sparse.csr_matrix((np.ones(len(cols), dtype=np.int8), (rows, cols)),
                                  shape=(len(C), len(P)))
            del rows, cols
            A = A[:, idx_unc].tocsr()  # only the points still uncovered count
            gain = np.diff(A.indptr)
            live = np.ones(A.shape[1], dtype=bool)
            # the greedy cover, lazily: a candidate's gain only falls, so one popped whose
            # gain, counted again, still leads is the one the plain greedy would take
            heap = [(-int(g), int(k)) for k, g in enumerate(gain) if g > 0]
            heapq.heapify(heap)
            while heap:
                _, k = heapq.heappop(heap)
                pts = A.indices[A.indptr[k]:A.indptr[k + 1]]
                pts = pts[live[pts]]
                if not len(pts):
                    continue
                if heap and (-len(pts), k) > heap[0]:  # no longer the best: back in line
                    heapq.heappush(heap, (-len(pts), k))
                    continue
                live[pts] = False
                chosen_c.append(C[k])
                chosen_r.append(R[k])
            uncovered[idx_unc[~live]] = False
        if not uncovered.any():
            break
        # points no candidate reached (thin parts, sharp edges): candidates along the inward
        # normal of their nearest hull face, at a few depths
        U = P[uncovered]
        face = np.argmin(b[None, :] - U @ N.T, axis=1)
        steps = np.array([0.25, 0.5, 1.0, 2.0]) * reach
        C = (U[:, None, :] - steps[None, :, None] * N[face][:, None, :]).reshape(-1, 3)
        D = depth(C)
        C, D = C[D >= 0], D[D >= 0]
    if uncovered.any():  # last resort: a sphere of the bound's radius on each such point
        U = P[uncovered]
        tree_u = cKDTree(U)
        done = np.zeros(len(U), dtype=bool)
        for i in range(len(U)):
            if not done[i]:
                done[tree_u.query_ball_point(U[i], 0.5 * reach)] = True
                chosen_c.append(U[i])
                chosen_r.append(reach)
    return (np.asarray(chosen_c, dtype=np.float64).reshape(-1, 3),
            np.asarray(chosen_r, dtype=np.float64))


def _tighten(c, r, P):
    """Each point to one sphere that holds it; each sphere shrunk to its points (+ SLACK);
    spheres whose points others hold dropped (smallest first). Memory in the number of
    (sphere, point) memberships, built in blocks."""
    from scipy.spatial import cKDTree  # noqa: PLC0415

    k = len(r)
    if k == 0:
        return c, r
    ptree = cKDTree(P)
    sph_parts, pt_parts = [], []
    for a in range(0, k, 256):
        for s, lst in enumerate(ptree.query_ball_point(c[a:a + 256], r[a:a + 256] * (1 + 1e-9)),
                                start=a):
            idx = np.asarray(lst, dtype=np.int64)
            if len(idx):
                idx = idx[np.sum((P[idx] - c[s]) ** 2, axis=1) <= r[s] ** 2 * (1 + 1e-12)]
            sph_parts.append(np.full(len(idx), s, dtype=np.int64))
            pt_parts.append(idx)
    sph, pt = np.concatenate(sph_parts), np.concatenate(pt_parts)
    holders = np.bincount(sph, minlength=k)  # points per sphere
    order = np.argsort(sph, kind="stable")
    starts = np.concatenate([[0], np.cumsum(holders)])
    members = pt[order]
    count = np.bincount(pt, minlength=len(P))  # alive spheres per point
    alive = np.ones(k, dtype=bool)
    # drop spheres all of whose points another alive sphere holds, fewest points first
    for s in np.argsort(holders, kind="stable"):
        m = members[starts[s]:starts[s + 1]]
        if not len(m) or np.all(count[m] > 1):
            alive[s] = False
            count[m] -= 1
    # each point's owner: the largest alive sphere holding it (the lowest index among equals)
    live = alive[sph]
    sph, pt = sph[live], pt[live]
    o = np.lexsort((sph, -r[sph], pt))
    sph, pt = sph[o], pt[o]
    first = np.ones(len(pt), dtype=bool)
    first[1:] = pt[1:] != pt[:-1]
    owner = np.full(len(P), -1, dtype=np.int64)
    owner[pt[first]] = sph[first]
    newr = np.zeros(k)
    dist = np.linalg.norm(P - c[np.maximum(owner, 0)], axis=1)
    np.maximum.at(newr, owner[owner >= 0], dist[owner >= 0])
    keep = alive & (np.bincount(owner[owner >= 0], minlength=k) > 0)
    # a sphere keeps a margin of SLACK beyond its farthest point, and never less than the
    # spacing of the samples past its nearest unowned one (the surface between two samples that
    # different spheres own stays inside one of them)
    return c[keep], np.minimum(r[keep], newr[keep] + GAP) + SLACK


def _directions(n: int, seed: int = 1) -> np.ndarray:
    d = np.random.default_rng(seed).normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.concatenate([d, np.eye(3), -np.eye(3)])


def overshoot(centers, radii, vertices, directions: int = 4000) -> float:
    """[m] the largest ``max_s (c_s . d + r_s) - max_v (v . d)`` over ``directions`` sampled
    unit directions (and the six axes): how far the spheres reach past the geometry."""
    if len(radii) == 0 or len(vertices) == 0:
        return 0.0
    d = _directions(directions)
    s = (np.asarray(centers) @ d.T + np.asarray(radii)[:, None]).max(axis=0)
    V = np.asarray(vertices, dtype=np.float64)
    if len(V) > 64:  # only the hull's vertices bound a support function
        V = _hull_vertices(V)
    top = np.full(len(d), -np.inf)
    step = max(1, BLOCK // len(d))
    for a in range(0, len(V), step):
        top = np.maximum(top, (V[a:a + step] @ d.T).max(axis=0))
    return float((s - top).max())


def coverage(centers, radii, points) -> float:
    """[m] the largest distance of a point outside every sphere (<= 0: all covered)."""
    if len(points) == 0:
        return -math.inf
    if len(radii) == 0:
        return math.inf
    from scipy.spatial import cKDTree  # noqa: PLC0415

    centers, radii = np.asarray(centers, dtype=np.float64), np.asarray(radii, dtype=np.float64)
    tree = cKDTree(centers)
    worst = -math.inf
    P = np.asarray(points, dtype=np.float64)
    for lo in range(0, len(P), 4096):
        Q = P[lo:lo + 4096]
        gap = _nearest_gaps(tree, radii, Q)
        far = gap > 0
        if far.any():  # the nearest centres may miss a big sphere: check them all
            full = np.linalg.norm(Q[far][:, None] - centers[None], axis=2) - radii[None]
            gap[far] = full.min(axis=1)
        worst = max(worst, float(gap.max()))
    return worst


def report(shapes, centers, radii, seed: int = 12345) -> dict:
    """The fit's properties, measured afresh: ``{"spheres", "overshoot", "uncovered"}``
    (metres; ``uncovered`` <= 0 means every vertex and every point of a new surface sample,
    ``seed``, lies inside a sphere)."""
    shapes = [s for s in shapes if len(s.vertices) and len(s.faces)]
    if not shapes:
        return {"spheres": len(radii), "overshoot": 0.0, "uncovered": -math.inf}
    V = np.concatenate([s.vertices for s in shapes])
    P = surface_points(shapes, seed=seed)
    return {"spheres": int(len(radii)), "overshoot": overshoot(centers, radii, V),
            "uncovered": coverage(centers, radii, P)}
