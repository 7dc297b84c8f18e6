"""Seeds, limits and the coordinates a solve moves: the reference's rules, on ``xp``.

The compiled kernels bake the same rules into their source (:mod:`ros2_ik.backends.codegen`
reads :func:`restart_seeds` and :func:`movable_coordinates` and spells :func:`clip_to_limits`
in C++); the tests compare the two.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import const, get_xp
from ..errors import InvalidInputError
from ..kinematics.fk import difference, wrap_angle
from ..model import Model
from ..model.joint_types import JointType

__all__ = ["movable_coordinates", "restart_seeds", "expand_seeds", "limited_revolute",
           "clip_to_limits", "finalize_q", "seed_distance", "branch_distance"]


def movable_coordinates(model: Model, links=None) -> np.ndarray:
    """(nq,) bool: the coordinates a solve for the tips ``links`` (link names or indices) may
    move: those of the joints on the paths from the base to each tip, and the leaders of the
    mimic joints on those paths. Every other coordinate stays at the problem's seed. ``None``
    (a goal without a link, e.g. a custom objective): every coordinate. Frozen joints are in
    the mask when on a path, but no solver moves them."""
    if links is None:
        return np.ones(model.nq, dtype=bool)
    ids = tuple(sorted({int(model.link_index(l)) if isinstance(l, str) else int(l)
                        for l in links}))
    return model.memo("ik.seeds.movable", ids, lambda: _movable(model, ids)).copy()


def _movable(model: Model, ids) -> np.ndarray:
    on_path = set()
    leaders = set()
    for l in ids:
        while l > 0:
            on_path.add(l)
            if model.mimic_q[l] >= 0:
                leaders.add(int(model.mimic_q[l]))
            l = int(model.link_parent[l])
    m = np.array([int(j) in on_path for j in model.q_joint], dtype=bool)
    for qi in leaders:
        m[qi] = True
    return m


def restart_seeds(model: Model, num_seeds: int, rng_seed: int, movable=None):
    """The K-1 random seeds (K-1, nq) drawn from ``rng_seed``, and the mask (nq,) of coordinates
    every seed keeps from the problem's own seed: frozen joints, floating bases, unbounded
    translations (continuous joints are drawn in (-pi, pi]), and every coordinate not in
    ``movable`` (:func:`movable_coordinates`; None: all movable). The random values of the kept
    coordinates are drawn all the same, so the other coordinates do not depend on ``movable``."""
    mov = None if movable is None else np.asarray(movable, dtype=bool)
    if mov is not None and mov.shape != (model.nq,):
        raise InvalidInputError(f"movable must have shape ({model.nq},), got {mov.shape}")
    rnd, keep = model.memo("ik.seeds.restart_seeds", (int(num_seeds), int(rng_seed)),
                           lambda: _restart_seeds(model, int(num_seeds), int(rng_seed)))
    rnd, keep = rnd.copy(), keep.copy()
    if mov is not None:
        keep |= ~mov
    return rnd, keep


def frozen_coordinates(model: Model) -> np.ndarray:
    """(nq,) bool: the coordinates of the model's frozen joints."""
    frozen_links = {model.joint_index(n) for n in model.frozen}
    return np.array([int(l) in frozen_links for l in model.q_joint], dtype=bool)


def _restart_seeds(model: Model, num_seeds: int, rng_seed: int):
    rnd = model.random_q(np.random.default_rng(rng_seed), max(num_seeds - 1, 0))
    keep = ~(np.isfinite(model.lower) & np.isfinite(model.upper)) & ~model.q_continuous
    keep |= frozen_coordinates(model)
    for s in model.floating_q_starts:
        keep[s:s + 7] = True
    return rnd, keep


def expand_seeds(model: Model, seeds, num_seeds: int, rng_seed: int, xp, movable=None):
    """Rows (P*K, nq): for each problem its own seed, then K-1 random seeds within limits.

    The K-1 random seeds (:func:`restart_seeds`) are drawn once from ``rng_seed`` and shared by
    every problem, so a problem's result does not depend on its position in the batch (batched
    == loop of singles). Coordinates outside ``movable`` (:func:`movable_coordinates`; None:
    all) and those :func:`restart_seeds` keeps are the problem's seed in every row.
    """
    P = seeds.shape[0]
    K = int(num_seeds)
    if K == 1:
        return seeds.copy()
    rnd, keep = restart_seeds(model, K, rng_seed, movable)
    rnd = xp.asarray(rnd[None].repeat(P, axis=0), dtype=seeds.dtype)
    keepx = xp.asarray(keep)
    rnd = xp.where(keepx, seeds[:, None, :], rnd)
    rows = xp.concatenate([seeds[:, None, :], rnd], axis=1)
    return rows.reshape(P * K, model.nq)


def limited_revolute(model: Model) -> np.ndarray:
    """(nq,) bool: revolute coordinates with finite limits. A value past one of their limits
    is moved by 2 pi (the same pose) when that lands inside the limits (:func:`clip_to_limits`):
    a joint with limits like +-2 pi is never pinned at a limit it could go around, and a step
    of a joint with a narrower range that crosses the arc outside its limits lands on the
    arc's far side instead of at the near limit. (Read-only: a kernel that needs a writable
    array takes a copy.)"""
    return model.tables.limited_revolute


def clip_to_limits(model: Model, q):
    """Back inside the limits: limited revolute joints by 2 pi first where that lands inside
    (:func:`limited_revolute`), then clipped. The generated C++/CUDA
    (``backends.emit.lm.emit_clip``) spells the same comparisons."""
    xp = get_xp(q)
    lo = const(xp, model.lower, q.dtype)
    hi = const(xp, model.upper, q.dtype)
    w = limited_revolute(model)
    if w.any():
        wx = const(xp, w)
        two_pi = 2 * math.pi
        q = xp.where(wx & (q > hi) & (q - two_pi >= lo), q - two_pi, q)
        q = xp.where(wx & (q < lo) & (q + two_pi <= hi), q + two_pi, q)
    return xp.clip(q, lo, hi)


def finalize_q(model: Model, q, seed):
    """Continuous joints wrapped to within pi of the seed (no 2 pi flips), then limits."""
    xp = get_xp(q)
    if model.q_continuous.any():
        c = xp.asarray(np.nonzero(model.q_continuous)[0])
        q = q.copy()
        q[:, c] = seed[:, c] + wrap_angle(q[:, c] - seed[:, c], xp)
    return clip_to_limits(model, q)


def seed_distance(model: Model, q, seed, *, every_angle: bool = False):
    """Wrap-aware L-infinity distance between rows of q and seed (N,); ``every_angle``: a
    limited revolute joint's angle modulo 2 pi too (:func:`branch_distance`)."""
    xp = get_xp(q)
    d = difference(model, seed, q)
    angles = _angle_velocities(model) if every_angle else ()
    if len(angles):
        cols = xp.asarray(angles)
        d[:, cols] = wrap_angle(d[:, cols], xp)
    return xp.max(xp.abs(d), axis=1) if d.shape[1] else xp.zeros(q.shape[0])


def _angle_velocities(model: Model) -> np.ndarray:
    """The velocity indices of the revolute and continuous coordinates (an angle each)."""
    def build():
        jt = np.asarray(model.joint_type)[np.asarray(model.q_joint)]
        qv = np.asarray(model.q_to_v)
        return qv[((jt == JointType.REVOLUTE) | (jt == JointType.CONTINUOUS)) & (qv >= 0)]
    return model.memo("ik.seeds.angles", "velocities", build)


def branch_distance(model: Model, q, other):
    """:func:`seed_distance` with every angle modulo 2 pi, a limited revolute joint's too:
    0 between configurations that differ only by whole turns of joints (one configuration
    branch: the same placement of every link), the L-infinity distance otherwise (N,)."""
    return seed_distance(model, q, other, every_angle=True)
