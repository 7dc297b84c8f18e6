"""Scoring candidate bases and refining the best (:mod:`ros2_ik.reach.placement`, which
documents the method and re-exports the public names here): the question prepared for the
solver (:class:`PlacementSpec`: the robot on its mount, the task, the world), a batch of
candidates scored by one collision-aware solve (:func:`score_bases`), their ranking, and the
refinement around the best distinct candidates."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ik import IKConfig
from ..model import Model
from ..world import World

__all__ = ["PlacementSpec", "score_bases", "rank", "base_poses", "CANDIDATE_COLUMNS",
           "ANSWER_COLUMNS", "refine", "top_candidates", "distinct_bases", "take_rows",
           "concat_rows", "prune_pairs", "base_clear", "base_spheres", "base_key",
           "refine_steps"]

TWO_PI = 2.0 * math.pi

#: per-candidate columns, in file order
CANDIDATE_COLUMNS = ("base", "fraction", "reached", "worst_manipulability",
                     "mean_manipulability", "min_clearance", "base_clear", "pruned", "solved")
#: per (candidate, task pose) columns
ANSWER_COLUMNS = ("success", "q", "manipulability", "clearance", "status")


@dataclass(frozen=True)
class PlacementSpec:
    """What a worker needs to score candidates (picklable)."""

    model: Model
    mounted: Model
    tip: str
    poses: np.ndarray            # (P, 7), task frame
    world: World | None
    collision: object            # the collision model on the mounted model
    base_collision: tuple        # (centres (S, 3) in the base frame, radii (S,), skip (S, O))
    coarse: IKConfig
    fine: IKConfig
    solver: str
    bound: object                # ReachBound, or None
    mount: np.ndarray            # (4,) the mount's coordinates in the mounted model
    arm: np.ndarray              # (nq,) the model's coordinates in the mounted model
    seed: np.ndarray             # the mounted model's mid-range configuration
    margin: float


def base_spheres(model: Model, cm, world) -> tuple:
    """The spheres of the links rigidly attached to the base, in the base frame, and which
    obstacles each may not be checked against (a half-space: the floor the robot stands on;
    an obstacle allowed to touch the link)."""
    from ..ik.collision import allowed_mask  # noqa: PLC0415
    from ..kinematics import fk  # noqa: PLC0415
    from ..world import SHAPE_CODES  # noqa: PLC0415

    idx = np.nonzero(cm.static[cm.sphere_link])[0]
    T = np.asarray(fk(model, model.neutral_q()[None], check=False))[0]
    Tl = T[cm.links[cm.sphere_link[idx]]]
    c = np.einsum("sij,sj->si", Tl[:, :3, :3], cm.center[idx]) + Tl[:, :3, 3]
    O = 0 if world is None else len(world)
    skip = np.zeros((idx.size, O), dtype=bool)
    if O:
        allowed = allowed_mask(cm, world).T[cm.sphere_link[idx]]  # (S, O)
        half = world.packed()[:, 0] == SHAPE_CODES["halfspace"]
        skip = allowed | half[None, :]
    return c, cm.radius[idx].copy(), skip


def base_poses(bases: np.ndarray) -> np.ndarray:
    """(n, 4, 4) the poses of bases ``x y z yaw`` (n, 4)."""
    b = np.asarray(bases, dtype=np.float64).reshape(-1, 4)
    T = np.zeros((b.shape[0], 4, 4))
    c, s = np.cos(b[:, 3]), np.sin(b[:, 3])
    T[:, 0, 0], T[:, 0, 1], T[:, 1, 0], T[:, 1, 1] = c, -s, s, c
    T[:, 2, 2] = T[:, 3, 3] = 1.0
    T[:, :3, 3] = b[:, :3]
    return T


def prune_pairs(spec: PlacementSpec, bases: np.ndarray, cfg: IKConfig) -> np.ndarray:
    """(n, P) True where the pose is beyond the arm's proven reach from the base."""
    n, P = bases.shape[0], spec.poses.shape[0]
    if spec.bound is None:
        return np.zeros((n, P), dtype=bool)
    from ..kinematics import quat_to_matrix  # noqa: PLC0415

    b = spec.bound
    Tb = base_poses(bases)
    R = Tb[:, :3, :3]
    p = np.einsum("nji,npj->npi", R, spec.poses[None, :, :3] - Tb[:, None, :3, 3])
    slack = cfg.position_tolerance + 1e-9
    out = np.linalg.norm(p - b.anchor, axis=-1) > b.radius + slack
    if b.wrist is not None:
        Rp = np.asarray(quat_to_matrix(spec.poses[:, 3:]))  # (P, 3, 3) task frame
        w_task = spec.poses[:, :3] - Rp @ b.wrist  # the wrist point, task frame
        w = np.einsum("nji,npj->npi", R, w_task[None] - Tb[:, None, :3, 3])
        anchor = b.anchor if b.wrist_anchor is None else b.wrist_anchor
        slack_w = slack + cfg.orientation_tolerance * float(np.linalg.norm(b.wrist))
        out |= np.linalg.norm(w - anchor, axis=-1) > b.wrist_radius + slack_w
    return out


def base_clear(spec: PlacementSpec, bases: np.ndarray) -> np.ndarray:
    """(n,) whether the base's own spheres keep the margin from the world (half-spaces and
    allowed obstacles aside)."""
    c, r, skip = spec.base_collision
    n = bases.shape[0]
    if spec.world is None or not len(spec.world) or not c.shape[0] or skip.all():
        return np.ones(n, dtype=bool)
    from ..ik.collision import sdf  # noqa: PLC0415

    Tb = base_poses(bases)
    pts = np.einsum("nij,sj->nsi", Tb[:, :3, :3], c) + Tb[:, None, :3, 3]
    d, _ = sdf(spec.world.packed(), pts)  # (n, S, O)
    d = np.where(skip[None], np.inf, d - r[None, :, None])
    return d.min(axis=(1, 2)) >= spec.margin


def score_bases(spec: PlacementSpec, bases: np.ndarray, fine: bool = False,
                should_stop: Callable[[], bool] | None = None) -> dict:
    """Score candidate ``bases`` (n, 4) with the coarse (or ``fine``) options: the columns of
    :data:`CANDIDATE_COLUMNS` (n,) and :data:`ANSWER_COLUMNS` (n, P[, nq]), ``complete``
    (False when ``should_stop`` ended the solve: not to be kept) and ``solve_seconds``."""
    from ..api import jacobian, prepared_solver  # noqa: PLC0415
    from ..ik import Status  # noqa: PLC0415
    from .study import OUT_OF_REACH, manipulability  # noqa: PLC0415

    t0 = time.perf_counter()
    cfg = spec.fine if fine else spec.coarse
    bases = np.asarray(bases, dtype=np.float64).reshape(-1, 4)
    n, P, nq = bases.shape[0], spec.poses.shape[0], spec.model.nq
    clear = base_clear(spec, bases)
    out_of_reach = prune_pairs(spec, bases, cfg)
    todo = np.nonzero((~out_of_reach & clear[:, None]).ravel())[0]
    success = np.zeros(n * P, dtype=bool)
    q = np.tile(spec.seed[spec.arm], (n * P, 1))
    manip = np.full(n * P, np.nan)
    clr = np.full(n * P, np.nan)
    status = np.full(n * P, OUT_OF_REACH, dtype=np.int16)
    status[np.repeat(~clear, P)] = int(Status.IN_COLLISION)
    complete = True
    if todo.size:
        solver = prepared_solver(spec.mounted, [spec.tip], cfg, spec.solver,
                                 collision=spec.collision)
        seeds = np.tile(spec.seed, (todo.size, 1))
        seeds[:, spec.mount] = bases[todo // P]
        res = solver.solve(spec.poses[todo % P], seeds=seeds, world=spec.world,
                           should_stop=should_stop)
        st = np.asarray(res.status)
        complete = not bool(np.any(st == Status.PREEMPTED))
        ok = np.asarray(res.success, dtype=bool)
        success[todo] = ok
        q[todo] = np.asarray(res.q)[:, spec.arm]
        status[todo] = st
        if res.clearance is not None:
            clr[todo] = np.asarray(res.clearance)
        if ok.any():
            rows = todo[ok]
            manip[rows] = manipulability(np.asarray(jacobian(spec.model, q[rows], spec.tip)))
    success = success.reshape(n, P)
    manip = manip.reshape(n, P)
    clr2 = clr.reshape(n, P)
    reached = success.sum(axis=1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (all-NaN rows: NaN, as meant)
        worst = np.where(reached > 0, np.nanmin(np.where(success, manip, np.inf), axis=1),
                         np.nan)
        mean = np.where(reached > 0, np.nansum(np.where(success, manip, 0.0), axis=1)
                        / np.maximum(reached, 1), np.nan)
        mclr = np.where(reached > 0, np.min(np.where(success, clr2, np.inf), axis=1), np.nan)
    return {
        "base": bases, "fraction": reached / P, "reached": reached.astype(np.int32),
        "worst_manipulability": worst, "mean_manipulability": mean, "min_clearance": mclr,
        "base_clear": clear, "pruned": out_of_reach.sum(axis=1).astype(np.int32),
        "solved": np.bincount(todo // P, minlength=n).astype(np.int32),
        "success": success, "q": q.reshape(n, P, nq), "manipulability": manip,
        "clearance": clr2, "status": status.reshape(n, P),
        "complete": complete, "solve_seconds": time.perf_counter() - t0,
    }


def rank(cols: dict) -> np.ndarray:
    """Candidate indices best first: by fraction reached, then manipulability at the worst
    reached pose, then mean manipulability (none reached: below every reached one), then
    index (deterministic)."""
    f = np.asarray(cols["fraction"], dtype=np.float64)
    w = np.nan_to_num(np.asarray(cols["worst_manipulability"], dtype=np.float64), nan=-1.0)
    m = np.nan_to_num(np.asarray(cols["mean_manipulability"], dtype=np.float64), nan=-1.0)
    return np.lexsort((np.arange(f.size), -m, -w, -f))


def take_rows(cols: dict, idx) -> dict:
    idx = np.asarray(idx, dtype=np.int64)
    return {k: cols[k][idx] for k in CANDIDATE_COLUMNS + ANSWER_COLUMNS if k in cols}


def concat_rows(parts: list) -> dict:
    keys = [k for k in CANDIDATE_COLUMNS + ANSWER_COLUMNS if k in parts[0]]
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


# ---------------------------------------------------------------------- the search


def distinct_bases(bases: np.ndarray, order: np.ndarray, k: int, dxy: float, dyaw: float,
              full_circle: bool) -> list:
    """The first ``k`` of ``order`` no two of which lie within ``dxy`` on both x and y, the
    same height and ``dyaw`` in yaw."""
    picked: list = []
    for i in order.tolist():
        b = bases[i]
        near = False
        for j in picked:
            c = bases[j]
            dy = abs(b[3] - c[3])
            if full_circle:
                dy = min(dy, TWO_PI - dy)
            if (abs(b[0] - c[0]) < dxy - 1e-9 and abs(b[1] - c[1]) < dxy - 1e-9
                    and abs(b[2] - c[2]) < 1e-9 and dy < dyaw - 1e-9):
                near = True
                break
        if not near:
            picked.append(i)
            if len(picked) == k:
                break
    return picked


def refine_steps(cfg) -> list:
    """The refinement's steps (dx = dy, dyaw), one per level: each axis halved until it is
    within its tolerance."""
    xy, yaw, out = cfg.resolution, cfg.yaw_step, []
    while xy > cfg.xy_tolerance or yaw > cfg.yaw_tolerance:
        xy = xy / 2.0 if xy > cfg.xy_tolerance else xy
        yaw = yaw / 2.0 if yaw > cfg.yaw_tolerance else yaw
        out.append((xy, yaw))
    return out


def refine(placement, spec, coarse, stop, report, best):
    """The refinement (see the module docstring): every candidate scored with the fine
    options, or None when stopped."""
    cfg, region = placement.config, placement.region
    order = rank(coarse)
    seeds = distinct_bases(coarse["base"], order, cfg.refine, cfg.resolution * 1.5,
                      cfg.yaw_step * 1.5, region.full_circle)
    pool: list = []
    keys: set = set()

    def score(bases):
        new = [b for b in bases if base_key(b) not in keys]
        if not new:
            return True
        arr = np.array(new)
        for b in arr:
            keys.add(base_key(b))
        cols = score_bases(spec, arr, fine=True, should_stop=stop)
        if not cols["complete"]:
            return False
        pool.append(cols)
        best[0] = max(best[0], float(np.max(cols["fraction"])))
        return True

    levels = refine_steps(cfg)
    total = len(seeds) + len(levels) * cfg.refine * 26
    done = 0
    report("refine", done, total)
    if stop() or not score(coarse["base"][seeds]):
        return None
    done += len(seeds)
    report("refine", done, total)
    offsets = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)
                        if (i, j, k) != (0, 0, 0)], dtype=np.float64)
    for dxy, dyaw in levels:
        step = np.array([dxy, dxy, dyaw])
        allc = concat_rows(pool)
        centres = allc["base"][rank(allc)[:cfg.refine]]
        new = []
        for c in centres:
            nb = np.tile(c, (len(offsets), 1))
            nb[:, [0, 1, 3]] += offsets * step
            new.append(region.clip(nb))
        if stop() or not score(np.concatenate(new)):
            return None
        done += cfg.refine * 26
        report("refine", done, total)
    return concat_rows(pool)


def base_key(b) -> tuple:
    return tuple(round(float(v), 9) for v in b)


def top_candidates(placement, spec, coarse, refined, stop):
    """The ``top`` best distinct candidates scored with the fine options (coarse ones scored
    again where too few refined ones are distinct), or None when stopped."""
    cfg, region = placement.config, placement.region
    order = rank(refined)
    picked = distinct_bases(refined["base"], order, cfg.top, cfg.resolution, cfg.yaw_step,
                       region.full_circle)
    parts = [take_rows(refined, picked)]
    if len(picked) < cfg.top:
        have = {base_key(b) for b in refined["base"]}
        extra = [i for i in rank(coarse).tolist() if base_key(coarse["base"][i]) not in have]
        allb = np.concatenate([refined["base"][picked], coarse["base"][extra]])
        sel = distinct_bases(allb, np.arange(len(allb)), cfg.top, cfg.resolution, cfg.yaw_step,
                        region.full_circle)
        more = [extra[i - len(picked)] for i in sel if i >= len(picked)]
        if more:
            if stop():
                return None
            cols = score_bases(spec, coarse["base"][more], fine=True, should_stop=stop)
            if not cols["complete"]:
                return None
            parts.append(cols)
    allc = concat_rows(parts)
    return take_rows(allc, rank(allc)[:cfg.top])
