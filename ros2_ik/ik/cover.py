"""The first pass of a collision-aware solve: on the cover of the collision model
(:mod:`ros2_ik.model.cover`), then the problems it leaves on the fine spheres.

A real robot's tight sphere model (a thousand or two spheres fitted to its meshes) costs many
times a hand-made one of a hundred in every iteration near contact. Most goals are nowhere near
contact, so :meth:`ros2_ik.IKSolver.solve` answers in two passes:

1. every problem is solved with the **cover** (a few spheres per link, each containing whole
   fine spheres; :func:`ros2_ik.model.cover.cover_model`). The cover contains the fine model,
   so an answer clear by the margin on it (checked exactly, as every answer is) is clear by the
   margin on the fine spheres and on the meshes: it is the answer;
2. the problems the first pass did not solve (no answer within the tolerances, or every answer
   within the cover's margin) are solved again, from the start, on the **fine** spheres, with
   what is left of the timeout. Their answers are exactly those of a one-pass solve. Those
   without an answer within the tolerances are screened first by a collision-free solve of
   the same seeds: one that no seed reaches even without collision avoidance (a pose out of
   reach) is not solved again.

So a success keeps the fine model's promise, and no reachable problem the fine model solves is
lost to the cover. The answers' ``clearance`` is that of the model the answer was checked on:
the cover's on the first pass (never more than the fine spheres' own), the fine spheres' on the
second.

**Where the cover would only cost**, links keep their fine spheres in it (:func:`first_pass`):

- the links of pairs checked for contact only (:attr:`~ros2_ik.model.collision.CollisionModel.
  allowances`: parts that never part by the margin, such as a UR5's wrist and the box on its
  flange);
- the links of a pair whose covers come within the margin while their fine spheres do not in
  at least half of :data:`SAMPLES` random configurations, and links whose cover comes within
  the margin of an obstacle of the world while their fine spheres do not in at least half of
  them (a UR5's shoulder standing on a table): there the first pass would fail for most goals
  that the fine spheres solve. Where a cover sphere of a link, not the whole link, comes within
  the margin of an obstacle while its fine spheres do not in :data:`OFTEN` of them, that sphere
  alone gives way to its fine spheres (the foot of a UR5's upper arm, above the table).

No first pass where it cannot pay: a model of fewer than :data:`MIN_SPHERES` spheres (a
hand-made model is its own cover), a cover of more than half the fine model's spheres, or
``IKConfig.collision_cover = 0``.
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from ..backend import to_numpy
from ..model import Model
from ..model.collision import CollisionModel
from ..model.cover import cover_model
from ..world import World
from .seeds import frozen_coordinates

__all__ = ["first_pass", "MIN_SPHERES", "SAMPLES", "OFTEN"]

#: a collision model of fewer spheres is solved in one pass
MIN_SPHERES = 256
#: random configurations at which a cover's near pairs and obstacles are measured
SAMPLES = 200
#: the fraction of them past which a pair's or an obstacle's links keep their fine spheres
OFTEN = 0.1
_lock = threading.Lock()
#: (link, obstacle) measurements kept per collision model and model
_KEPT_OBSTACLES = 4096
#: worlds whose first-pass model is kept per collision model and model
_KEPT_WORLDS = 8


class _Kept:
    """What :func:`first_pass` keeps for one collision model and model: per (reach, margin)
    the links kept fine for their pairs; per (reach, margin, frozen values, world) the
    first-pass model (the last :data:`_KEPT_WORLDS`); per (reach, margin, link, obstacle,
    frozen values) the cover spheres it opens; per (reach, margin) the last call's world,
    frozen values and answer."""

    def __init__(self):
        self.fine: dict = {}
        self.worlds: dict = {}
        self.obstacles: dict = {}
        self.last: dict = {}


def _cover_only_pairs(model: Model, cm: CollisionModel, cover: CollisionModel,
                      margin: float) -> set:
    """Links of the checked pairs whose covers come within ``margin`` while their fine spheres
    do not in :data:`OFTEN` of the samples."""
    from .collision import link_pair_distances  # noqa: PLC0415

    if not len(cover.pairs):
        return set()
    q = model.random_q(np.random.default_rng(3), SAMPLES)
    near = link_pair_distances(model, cover, q, margin) < margin
    often = np.nonzero(np.mean(near, axis=0) >= OFTEN)[0]  # only these measured on cm
    out = set()
    if not often.size:
        return out
    fine = link_pair_distances(model, cm._replace(pairs=cm.pairs[often]), q, margin) < margin
    for k, f in zip(often.tolist(), np.mean(near[:, often] & ~fine, axis=0)):
        if f >= OFTEN:
            a, b = cover.pairs[k].tolist()
            out |= {cover.link_names[a], cover.link_names[b]}
    return out


def _cover_only_obstacles(model: Model, cm: CollisionModel, fine: frozenset, reach: float,
                          world: World, margin: float, kept: dict, mount) -> set:
    """``{(link, cover sphere)}``: the cover spheres that come within ``margin`` of an obstacle
    while the fine spheres they hold do not in :data:`OFTEN` of the samples (a UR5's shoulder
    and the foot of its upper arm on a table); ``mount`` (frozen coordinates mask, their values
    or None, their digest): the samples' frozen coordinates. Kept per link, obstacle and
    frozen values in ``kept`` (a new world measures only its new obstacles)."""
    from ..kinematics.fk import fk  # noqa: PLC0415
    from ..model.cover import link_cover  # noqa: PLC0415
    from .collision import allowed_mask  # noqa: PLC0415
    from ..world import bounding_radius  # noqa: PLC0415
    from .collision_geometry import place_points, sdf_rows  # noqa: PLC0415

    packed, skip = world.packed(), allowed_mask(cm, world)
    orad = bounding_radius(packed)
    q = model.random_q(np.random.default_rng(4), SAMPLES)
    if mount[1] is not None:
        q[:, mount[0]] = mount[1][np.arange(SAMPLES) % len(mount[1])]
    T = fk(model, q, check=False)
    out = set()
    for c, name in enumerate(cm.link_names):
        s = cm.spheres_of(c)
        if cm.static[c] or name in fine or s.stop <= s.start:
            continue
        cc, rr, holder = link_cover(cm.center[s], cm.radius[s], reach)
        Tl = T[:, int(cm.links[c])][:, None]
        # an obstacle whose bounding sphere is rarely within the margin of the cover's bound
        # opens nothing (a lower bound of every cover sphere's distance): not measured
        mid = 0.5 * ((cc - rr[:, None]).min(axis=0) + (cc + rr[:, None]).max(axis=0))
        rad = float(np.max(np.linalg.norm(cc - mid, axis=1) + rr))
        far = np.linalg.norm(place_points(np, Tl, mid[None]) - packed[None, :, 10:13],
                             axis=-1) - (orad + rad)  # (N, O)
        cand = (orad < 0) | (np.mean(far < margin, axis=0) >= OFTEN)
        for o in np.nonzero(cand & ~skip[:, c])[0]:
            key = (reach, margin, c, packed[o].tobytes(), mount[2])
            hit = kept.get(key)
            if hit is None:
                near = sdf_rows(packed[o], place_points(np, Tl, cc))[0] - rr < margin  # (N, k)
                hit = set()
                for k in np.nonzero(np.mean(near, axis=0) >= OFTEN)[0]:
                    rows = np.nonzero(near[:, k])[0]  # its fine spheres, where it is near
                    own = np.nonzero(holder == k)[0]
                    pf = place_points(np, T[rows, int(cm.links[c])][:, None],
                                      cm.center[s][own])
                    held = (sdf_rows(packed[o], pf)[0] - cm.radius[s][own]).min(axis=1)
                    if np.sum(held >= margin) >= OFTEN * SAMPLES:
                        hit.add((name, int(k)))
                if len(kept) > _KEPT_OBSTACLES:
                    for old in list(kept)[:_KEPT_OBSTACLES // 2]:
                        del kept[old]
                kept[key] = hit
            out |= hit
    return out


def _world_key(world: World) -> bytes:
    h = hashlib.sha256(np.ascontiguousarray(world.packed()).tobytes())
    for ob in world:
        h.update(repr((ob.id, tuple(sorted(ob.touch or ())))).encode())
    return h.digest()


def first_pass(model: Model, cm: CollisionModel, world: World | None, reach: float,
               margin: float, seeds=None) -> CollisionModel | None:
    """The collision model of a solve's first pass with ``world`` (see the module docstring),
    or None where the solve takes one pass on ``cm``. The frozen coordinates (a mount's, which
    place the robot in the world) are measured at the values ``seeds`` (P, nq) give them (a
    few distinct ones, to the centimetre), not at random. Kept with ``cm`` (per world and
    frozen values, the last few)."""
    if reach <= 0.0 or cm.num_spheres < MIN_SPHERES:
        return None
    frozen = frozen_coordinates(model)
    held = None
    if frozen.any() and seeds is not None:
        try:  # (seeds the solve will refuse are its to name: measured at random here)
            a = np.asarray(to_numpy(seeds), dtype=np.float64)
        except (TypeError, ValueError):
            a = None
        if a is not None and a.ndim == 2 and a.shape[1] == model.nq and \
                np.all(np.isfinite(a[:, frozen])):
            held = np.unique(np.round(a[:, frozen], 2), axis=0)[:16]
    with _lock:
        return _first_pass(model, cm, world, reach, margin, frozen, held)


def _first_pass(model, cm, world, reach, margin, frozen, held):
    # kept with the collision model per model (a group's restricted model samples other
    # coordinates): the last few models
    models = cm.__dict__.setdefault("_first_pass", {})
    hit = models.get(id(model))
    if hit is None or hit[0] is not model:
        while len(models) >= 8:
            models.pop(next(iter(models)))
        hit = models[id(model)] = (model, _Kept())
    kept = hit[1]
    base = (float(reach), float(margin))
    digest = b"" if held is None else hashlib.sha256(held.tobytes()).digest()
    last = kept.last.get(base)
    if last is not None and last[0] is world and last[1] == digest:  # (immutable worlds)
        return last[2]
    fine = kept.fine.get(base)
    if fine is None:  # the links of contact-only pairs, then of pairs only their covers near
        fine = frozenset(x for a in cm.allowances for x in a[:2])
        fine = kept.fine[base] = fine | _cover_only_pairs(
            model, cm, cover_model(cm, reach, fine), margin)
    w = world if world is not None else World()
    key = base + (digest, _world_key(w))
    if key not in kept.worlds:
        split = _cover_only_obstacles(model, cm, fine, reach, w, margin, kept.obstacles,
                                      (frozen, held, digest)) if len(w) else set()
        out = cover_model(cm, reach, fine, split)
        while len(kept.worlds) >= _KEPT_WORLDS:
            kept.worlds.pop(next(iter(kept.worlds)))
        kept.worlds[key] = None if out.num_spheres > cm.num_spheres // 2 else out
    kept.last[base] = (world, digest, kept.worlds[key])
    return kept.worlds[key]
