"""A coarse cover of a collision model's spheres: what a collision-aware solve's first pass
looks at (:mod:`ros2_ik.ik.cover`).

A tight sphere model fitted to a real robot's meshes (:mod:`ros2_ik.model.spheres`, 5 mm
overshoot) holds one to two thousand spheres where a hand-made one holds a hundred; every
penalty row and bound of the solvers costs in proportion to the spheres near contact. The
cover holds a few spheres per link, each containing whole spheres of the fine model:

- **it contains the fine model**: every fine sphere lies inside a cover sphere of its own link
  (``|c - c_s| + r_s <= r``, checked in float64 and kept with a micrometre to spare), so a
  configuration clear by the margin on the cover is clear by it on the fine spheres (and so on
  the meshes). Distances between two links, or between a link and an obstacle, are never
  larger on the cover than on the fine spheres;
- **it reaches at most ``reach`` past them**: a cover sphere's centre lies inside the convex
  hull of its link's fine spheres at depth ``D``, and its radius is at most ``D + reach``, so
  in every direction it reaches at most ``reach`` past that hull (the fit's rule,
  :mod:`ros2_ik.model.spheres`, applied to the fine spheres instead of the mesh);
- **few spheres**: a greedy set cover over candidate centres (a grid inside the hull and the
  fine centres themselves, each with its largest admissible radius): the candidate holding the
  most fine spheres not yet held first, then each sphere shrunk to those it holds. Deterministic.

On example-robot-data's Panda (2,154 fine spheres) a 20 mm cover holds about 130 spheres and is
built in a quarter of a second; each link's cover is kept per process (by its spheres' bytes),
so a scene's variants (attached objects, padding) rebuild only the links that changed.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

from .collision_spheres import CollisionModel, make_collision_model

__all__ = ["cover_spheres", "link_cover", "cover_model", "CONTAIN_SLACK", "MAX_CANDIDATES"]

#: [m] what every cover radius carries beyond the fine spheres it holds (rounding)
CONTAIN_SLACK = 1e-6
#: candidate centres of one link's cover at most (a grid inside its hull, coarser on a large
#: link), besides the fine centres
MAX_CANDIDATES = 3000
#: directions each fine sphere is sampled at for its link's hull
_HULL_DIRECTIONS = 32
#: candidates whose containment is computed at once (bounded memory on a link of thousands)
_BLOCK = 512
#: links' covers kept per process
_KEPT = 4096
_kept: OrderedDict = OrderedDict()
_lock = threading.Lock()


def _directions(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    phi = np.arccos(1.0 - 2.0 * i / n)
    th = np.pi * (1.0 + 5.0 ** 0.5) * i
    return np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], axis=1)


def _depth_of(points: np.ndarray):
    """``depth(X)``: how deep points lie inside the convex hull of ``points`` (negative
    outside); None where the points span no volume."""
    from scipy.spatial import ConvexHull  # noqa: PLC0415
    from scipy.spatial import QhullError  # noqa: PLC0415

    try:
        eq = ConvexHull(points).equations
    except (QhullError, ValueError):
        return None
    N, off = eq[:, :3], eq[:, 3]
    return lambda X: -(X @ N.T + off).max(axis=1)


def cover_spheres(center, radius, reach: float):
    """Spheres ``(centres (k, 3), radii (k,), holder (n,))`` each holding whole spheres of
    ``center`` (n, 3), ``radius`` (n,) (one link's; ``holder[s]`` the one holding sphere
    ``s``), together holding all of them, reaching at most ``reach`` [m] past their convex hull
    (see the module docstring). The spheres themselves where they span no volume."""
    C = np.ascontiguousarray(center, dtype=np.float64).reshape(-1, 3)
    R = np.ascontiguousarray(radius, dtype=np.float64).reshape(-1)
    if len(R) <= 2:
        return C.copy(), R.copy(), np.arange(len(R))
    P = (C[:, None, :] + R[:, None, None] * _directions(_HULL_DIRECTIONS)[None]).reshape(-1, 3)
    depth = _depth_of(P)
    if depth is None:
        return C.copy(), R.copy(), np.arange(len(R))
    lo, hi = P.min(axis=0), P.max(axis=0)
    ext = np.maximum(hi - lo, 1e-9)
    step = max(0.5 * reach, float(np.prod(ext) / MAX_CANDIDATES) ** (1.0 / 3.0))
    axes = [np.arange(lo[i] + 0.5 * (ext[i] % step or step), hi[i], step) if ext[i] > step
            else np.array([0.5 * (lo[i] + hi[i])]) for i in range(3)]
    G = np.concatenate([np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3), C])
    D = depth(G)
    keep = D >= 0.0
    G, D = G[keep], D[keep]
    limit = D + reach
    inside = np.zeros((len(G), len(R)), dtype=bool)
    for a in range(0, len(G), _BLOCK):
        g = G[a:a + _BLOCK]
        inside[a:a + _BLOCK] = (np.linalg.norm(g[:, None] - C[None], axis=2) + R[None]
                                <= limit[a:a + _BLOCK, None])
    free = np.ones(len(R), dtype=bool)
    holder = np.zeros(len(R), dtype=np.int64)
    out_c, out_r = [], []
    while free.any():
        counts = inside[:, free].sum(axis=1)
        k = int(np.argmax(counts))
        if counts[k] == 0:
            break
        held = inside[k] & free
        holder[held] = len(out_r)
        out_c.append(G[k])
        out_r.append(float(np.max(np.linalg.norm(C[held] - G[k], axis=1) + R[held]))
                     + CONTAIN_SLACK)
        free &= ~held
    for s in np.nonzero(free)[0]:  # (none in practice: a fine centre holds its own sphere)
        holder[s] = len(out_r)
        out_c.append(C[s])
        out_r.append(float(R[s]))
    return np.asarray(out_c).reshape(-1, 3), np.asarray(out_r), holder


def link_cover(center, radius, reach: float):
    """:func:`cover_spheres` of one link's spheres, kept per process (read-only arrays)."""
    key = hashlib.sha256(np.ascontiguousarray(center).tobytes()
                         + np.ascontiguousarray(radius).tobytes()
                         + repr(float(reach)).encode()).digest()
    with _lock:
        hit = _kept.get(key)
        if hit is not None:
            _kept.move_to_end(key)
            return hit
    hit = cover_spheres(center, radius, reach)
    for a in hit:
        a.setflags(write=False)
    with _lock:
        _kept[key] = hit
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)
    return hit


def cover_model(cm: CollisionModel, reach: float, fine=(), split=()) -> CollisionModel:
    """``cm`` with each link's spheres replaced by their cover (:func:`link_cover`) but the
    links named in ``fine``, which keep their own, and the cover spheres ``(link, index)`` of
    ``split``, replaced by the fine spheres they hold: the same links, pairs, allowances and
    everything else. Kept with ``cm`` per ``reach``, ``fine`` and ``split``."""
    fine, split = frozenset(fine), frozenset(split)

    def build():
        sl, ce, ra = [], [], []
        for c, name in enumerate(cm.link_names):
            s = cm.spheres_of(c)
            if s.stop <= s.start:
                continue
            if name in fine:
                cc, rr = cm.center[s], cm.radius[s]
            else:
                cc, rr, holder = link_cover(cm.center[s], cm.radius[s], reach)
                opened = [k for k in range(len(rr)) if (name, k) in split]
                if opened:
                    whole = np.isin(np.arange(len(rr)), opened, invert=True)
                    own = np.isin(holder, opened)
                    cc = np.concatenate([cc[whole], cm.center[s][own]])
                    rr = np.concatenate([rr[whole], cm.radius[s][own]])
            sl.extend([c] * len(rr))
            ce.append(cc)
            ra.append(rr)
        if not ra:
            return cm
        return make_collision_model(
            cm.model_name, cm.link_names, cm.links, sl, np.concatenate(ce), np.concatenate(ra),
            cm.pairs, cm.disabled, cm.warnings, cm.static, cm.offset, cm.missing, cm.notes,
            cm.overshoot, cm.accept_missing, cm.attached, cm.allowances)

    key = (float(reach), fine, split)
    with _lock:
        kept = cm.__dict__.setdefault("_covers", {})
        hit = kept.get(key)
    if hit is None:
        hit = build()
        with _lock:
            if len(kept) >= 16:
                kept.pop(next(iter(kept)))
            kept[key] = hit
    return hit
