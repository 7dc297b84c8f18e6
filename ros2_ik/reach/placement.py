"""Base placement: where should the robot stand so that its tool reaches the task poses?

Given task poses of a tool (in a task frame: the floor, the cell, the map) and the world in the
same frame, every candidate base pose ``(x, y, z, yaw)`` of a search :class:`Region` (a box on
the floor, a yaw range, heights) is scored by IK: the **fraction of the task poses solved**
(verified answers only: ``IKResult.success``, within the tolerances and the limits by FK and
clear of the robot itself and of the world by the margin on the exact distances), then the
**manipulability at the worst solved pose**, then the **mean manipulability** (Yoshikawa's
``sqrt(det(J J^T))`` of the tool's Jacobian at the answer). Manipulability, not clearance, is
the room to spare: every answer is already clear by the margin, and the solver stops at the
first answer that is, so how much clearer an answer is says which seed converged first rather
than where the base stands; the distance from singular, stretched-out configurations is a
property of the pose the base gives the arm (every answer's clearance is reported too).

**How** (:func:`run_placement`): the robot is put on a frozen planar mount
(:func:`ros2_ik.model.mount.mounted`), so one batched collision-aware solve in the task frame,
against one world, scores many candidates at once (each problem's seed carries its base).

1. The coarse pass: every candidate of a grid over the region (``resolution`` on x and y,
   ``yaw_step``, each height), cut into shards of ``shard_size`` candidates (written as they
   finish, resumable, and shardable over Ray like a reach study: a candidate's score does not
   depend on its shard), with the ``coarse`` solver options (few seeds). A (candidate, pose)
   pair beyond the arm's proven reach (:func:`ros2_ik.reach.study.reach_bound`) is not solved
   (never reached); a candidate whose base (the links rigidly attached to it) stands in an
   obstacle other than a half-space (the floor it stands on) reaches nothing.
2. The refinement: the ``refine`` best distinct coarse candidates, scored again with the
   ``fine`` options, then, level by level, the 26 neighbours of the best ``refine`` scored so
   far on a grid of half the step (x, y, yaw), until the steps are below ``xy_tolerance`` and
   ``yaw_tolerance``.
3. The answer: the ``top`` best candidates scored with the fine options, at least a coarse
   step apart (alternatives, not neighbours), each with its answers (per task pose: reached,
   q, manipulability, clearance).

Determinism: the grid, the shards and the solver's restarts (``rng_seed``) fix every number; a
resumed, re-sharded or Ray run gives the same coarse scores, hence the same refinement.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import InputTypeError, InvalidInputError
from ..ik import SOLVERS, IKConfig
from ..model import Model, check_model
from ..model.mount import MOUNT_LIMITS, mount_coordinates, mounted
from ..validate import (as_float_array, check_callable, check_choice, check_flag, check_int,
                        check_number, describe, link_index)
from ..world import World
from .placement_scoring import (ANSWER_COLUMNS, CANDIDATE_COLUMNS, TWO_PI, PlacementSpec,
                                base_poses, base_spheres, concat_rows, rank, refine,
                                score_bases, top_candidates)

__all__ = ["Region", "PlacementConfig", "Placement", "PlacementSpec", "PlacementResult",
           "run_placement", "score_bases", "rank", "base_poses", "CANDIDATE_COLUMNS",
           "load_placement",
           "ANSWER_COLUMNS", "MAX_CANDIDATES", "MAX_TASK_POSES"]

#: most candidates of a coarse grid, task poses, and pairs of both, one search takes
MAX_CANDIDATES = 5_000_000
MAX_TASK_POSES = 100_000
MAX_PAIRS = 500_000_000


# ---------------------------------------------------------------------- the question
@dataclass(frozen=True)
class Region:
    """Where the base may stand, in the task frame: ``x`` and ``y`` [m] as (low, high) (equal
    bounds: that value), ``yaw`` [rad] (low, high) (default: the whole circle), the base
    ``heights`` [m] to try."""

    x: tuple
    y: tuple
    yaw: tuple = (-math.pi, math.pi)
    heights: tuple = (0.0,)

    def __post_init__(self):
        xy, zl = MOUNT_LIMITS
        for name, lim in (("x", xy), ("y", xy), ("yaw", 2 * TWO_PI)):
            v = as_float_array(getattr(self, name), f"region {name}", "(low, high)", np)
            if v.shape != (2,):
                raise InvalidInputError(f"region {name} must be (low, high), got "
                                        f"{np.asarray(getattr(self, name)).tolist()}")
            lo, hi = float(v[0]), float(v[1])
            unit = "rad" if name == "yaw" else "m"
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise InvalidInputError(f"region {name} = ({lo}, {hi}) is not finite; give "
                                        f"finite bounds [{unit}]")
            if lo > hi:
                raise InvalidInputError(f"region {name} = ({lo:g}, {hi:g}) is upside down "
                                        f"(low > high); give (low, high) [{unit}]")
            if max(abs(lo), abs(hi)) > lim:
                raise InvalidInputError(f"region {name} = ({lo:g}, {hi:g}) reaches beyond "
                                        f"+-{lim:g} {unit}")
            object.__setattr__(self, name, (lo, hi))
        if self.yaw[1] - self.yaw[0] > TWO_PI + 1e-9:
            raise InvalidInputError(f"region yaw = {self.yaw} spans more than a full circle "
                                    "(2 pi rad)")
        h = as_float_array(self.heights, "region heights", "a list of heights [m]", np)
        h = np.atleast_1d(h)
        if h.ndim != 1 or h.size == 0:
            raise InvalidInputError("region heights must be a non-empty list of heights [m]")
        if not np.all(np.isfinite(h)) or np.any(np.abs(h) > zl):
            raise InvalidInputError(f"region heights {h.tolist()} must be finite and within "
                                    f"+-{zl:g} m")
        object.__setattr__(self, "heights", tuple(float(v) for v in h))

    @property
    def full_circle(self) -> bool:
        return self.yaw[1] - self.yaw[0] >= TWO_PI - 1e-9

    def axes(self, resolution: float, yaw_step: float) -> tuple:
        """The coarse grid's values: (xs, ys, yaws, heights), each from the low bound in steps
        (a whole circle without its end, which is its start)."""
        def steps(lo, hi, step):
            n = int(math.floor((hi - lo) / step + 1e-9)) + 1
            return lo + step * np.arange(n)
        yl, yh = self.yaw
        if self.full_circle:
            n = max(1, int(round(TWO_PI / yaw_step)))
            yaws = yl + (TWO_PI / n) * np.arange(n)
        else:
            yaws = steps(yl, yh, yaw_step)
        return (steps(*self.x, resolution), steps(*self.y, resolution), yaws,
                np.asarray(self.heights))

    def grid(self, resolution: float, yaw_step: float) -> np.ndarray:
        """(C, 4) candidates ``x y z yaw``, ordered by height, x, y, yaw."""
        xs, ys, yaws, hs = self.axes(resolution, yaw_step)
        H, X, Y, A = np.meshgrid(hs, xs, ys, yaws, indexing="ij")
        return np.stack([X.ravel(), Y.ravel(), H.ravel(), A.ravel()], axis=1)

    def clip(self, bases: np.ndarray) -> np.ndarray:
        """``bases`` (n, 4) moved into the region (yaw wrapped on a whole circle)."""
        out = bases.copy()
        out[:, 0] = np.clip(out[:, 0], *self.x)
        out[:, 1] = np.clip(out[:, 1], *self.y)
        if self.full_circle:
            out[:, 3] = self.yaw[0] + np.mod(out[:, 3] - self.yaw[0], TWO_PI)
        else:
            out[:, 3] = np.clip(out[:, 3], *self.yaw)
        return out

    def identity(self) -> dict:
        return {"x": list(self.x), "y": list(self.y), "yaw": list(self.yaw),
                "heights": list(self.heights)}


def _coarse_ik() -> IKConfig:
    return IKConfig(num_seeds=4, stall_iterations=3, max_iterations=60, avoid_collisions=True,
                    rng_seed=0)


def _fine_ik() -> IKConfig:
    return IKConfig(num_seeds=16, stall_iterations=5, max_iterations=100, avoid_collisions=True,
                    rng_seed=0)


@dataclass(frozen=True)
class PlacementConfig:
    """Options of a search (validated on construction; see the module docstring).

    ``resolution`` [m] and ``yaw_step`` [rad]: the coarse grid. ``top``: candidates returned.
    ``refine``: coarse candidates refined, and candidates kept per refinement level.
    ``xy_tolerance`` [m], ``yaw_tolerance`` [rad]: the refinement's finest steps. ``coarse``,
    ``fine``: the solver options of the two passes (collision avoidance on, no time limit:
    the results must not depend on the machine's load). ``shard_size``: candidates per solve
    call and per shard file. ``prune``: skip pairs beyond the arm's proven reach.
    """

    resolution: float = 0.1
    yaw_step: float = math.pi / 8
    top: int = 10
    refine: int = 4
    xy_tolerance: float = 0.005
    yaw_tolerance: float = math.radians(1.0)
    coarse: IKConfig = field(default_factory=_coarse_ik)
    fine: IKConfig = field(default_factory=_fine_ik)
    solver: str = "dls"
    shard_size: int = 100
    prune: bool = True

    def __post_init__(self):
        for name, lo, hi in (("resolution", 1e-4, 100.0), ("yaw_step", 1e-4, TWO_PI),
                             ("xy_tolerance", 1e-5, 10.0), ("yaw_tolerance", 1e-5, math.pi)):
            object.__setattr__(self, name, check_number(getattr(self, name), name, low=lo,
                                                        high=hi))
        for name, hi in (("top", 10_000), ("refine", 1000), ("shard_size", 1_000_000)):
            object.__setattr__(self, name, check_int(getattr(self, name), name, low=1, high=hi))
        for name in ("coarse", "fine"):
            cfg = getattr(self, name)
            if not isinstance(cfg, IKConfig):
                raise InputTypeError(f"{name} must be an IKConfig, got {describe(cfg)}")
            if not cfg.avoid_collisions:
                raise InvalidInputError(f"{name}: a placement's answers are collision-free: "
                                        "give IKConfig(avoid_collisions=True, ...)")
            if cfg.timeout is not None:
                raise InvalidInputError(f"{name}: a placement's IKConfig must have timeout="
                                        "None (a time limit would make results depend on the "
                                        "machine's load; stop a search with should_stop or "
                                        "run_placement's timeout)")
        check_choice(self.solver, "solver", SOLVERS)
        if self.solver == "ccd":
            raise InvalidInputError("solver 'ccd' cannot avoid collisions; use 'dls' or "
                                    "'ccd+dls'")
        object.__setattr__(self, "prune", check_flag(self.prune, "prune"))

    def identity(self) -> dict:
        def ik(c):
            return {k: (v.value if hasattr(v, "value") else v)
                    for k, v in dataclasses.asdict(c).items()}
        return {"resolution": self.resolution, "yaw_step": self.yaw_step,
                "coarse": ik(self.coarse), "solver": self.solver,
                "shard_size": self.shard_size, "prune": self.prune}


@dataclass(frozen=True)
class Placement:
    """The question: ``model``, its ``tip`` (default: the model's default tip), the task
    ``poses`` (P, 7) ``[x y z qx qy qz qw]`` or (P, 4, 4) in the task frame, the search
    ``region`` and the ``world`` in the same frame, the ``config`` and the robot's
    ``collision`` model (default: :func:`ros2_ik.ik.collision.default_collision_model`)."""

    model: Model
    poses: np.ndarray
    region: Region
    tip: str | None = None
    world: World | None = None
    config: PlacementConfig = field(default_factory=PlacementConfig)
    collision: object = None

    def __post_init__(self):
        check_model(self.model)
        from .targets import from_poses  # noqa: PLC0415

        p = as_float_array(self.poses, "poses", "shape (P, 7) or (P, 4, 4)", np)
        if p.shape[0:1] == (0,):
            raise InvalidInputError("poses is empty: give at least one task pose")
        if p.shape[0] > MAX_TASK_POSES:
            raise InvalidInputError(f"{p.shape[0]} task poses exceed {MAX_TASK_POSES}; give "
                                    "fewer (a representative subset scores a base as well)")
        object.__setattr__(self, "poses", from_poses(p, 1.0).poses)
        if not isinstance(self.region, Region):
            raise InputTypeError(f"region must be a Region(x=(lo, hi), y=(lo, hi), ...), got "
                                 f"{describe(self.region)}")
        if self.world is not None and not isinstance(self.world, World):
            raise InputTypeError(f"world must be a ros2_ik.world.World, got "
                                 f"{describe(self.world)}")
        if not isinstance(self.config, PlacementConfig):
            raise InputTypeError(f"config must be a PlacementConfig, got "
                                 f"{describe(self.config)}")
        tip = self.tip if self.tip is not None else self.model.default_tip()
        link_index(self.model, tip, "tip")
        object.__setattr__(self, "tip", tip)
        c = self.config
        n = math.prod(len(a) for a in self.region.axes(c.resolution, c.yaw_step))
        if n > MAX_CANDIDATES or n * len(self.poses) > MAX_PAIRS:
            raise InvalidInputError(f"the coarse grid has {n} candidates ({n} x "
                                    f"{len(self.poses)} task poses = {n * len(self.poses)} "
                                    f"pairs), more than {MAX_CANDIDATES} (or {MAX_PAIRS} "
                                    "pairs); give a coarser resolution or yaw_step, a smaller "
                                    "region, or fewer task poses")
        self._check_reach()

    def _check_reach(self) -> None:
        """InvalidInputError naming the task poses that no base of the region can reach: their
        position lies farther from every place the arm's first joint can take in the region
        (the region's box, widened by the joint's distance from the base's z axis, at each
        height) than the arm's proven reach (:func:`ros2_ik.reach.study.reach_bound`)."""
        from .study import reach_bound  # noqa: PLC0415

        b = reach_bound(self.model, self.tip)
        if b is None:
            return
        r = self.region
        a = np.asarray(b.anchor, dtype=np.float64)
        wide = float(np.hypot(a[0], a[1]))
        p = self.poses[:, :3]
        dx = np.maximum(np.maximum(r.x[0] - p[:, 0], p[:, 0] - r.x[1]), 0.0)
        dy = np.maximum(np.maximum(r.y[0] - p[:, 1], p[:, 1] - r.y[1]), 0.0)
        dxy = np.maximum(np.hypot(dx, dy) - wide, 0.0)
        dz = np.min(np.abs(p[:, 2][:, None] - (np.asarray(r.heights)[None, :] + a[2])), axis=1)
        far = np.hypot(dxy, dz) > b.radius + self.config.fine.position_tolerance + 1e-9
        if far.any():
            idx = np.nonzero(far)[0]
            show = ", ".join(str(int(i)) for i in idx[:10]) + (" ..." if idx.size > 10 else "")
            raise InvalidInputError(
                f"task poses {show} ({idx.size} of {len(p)}) lie beyond the arm's reach "
                f"({b.radius:.3f} m from its first joint, link {self.tip!r}) from every base "
                f"of the region (x {r.x}, y {r.y}, heights {list(r.heights)}); move the "
                "region nearer, or leave those poses out")

    def candidates(self) -> np.ndarray:
        """(C, 4) the coarse grid (see :meth:`Region.grid`)."""
        c = self.config
        return self.region.grid(c.resolution, c.yaw_step)

    def spec(self) -> "PlacementSpec":
        from ..ik.collision import default_collision_model  # noqa: PLC0415
        from .study import reach_bound  # noqa: PLC0415

        m, cfg = self.model, self.config
        cm = self.collision
        if cm is None:
            cm = default_collision_model(m, within=cfg.fine.collision_margin)
        cm.check_complete()  # links whose geometry has no spheres: refused, naming them
        mm = mounted(m)
        mount, arm = mount_coordinates(mm, m)
        cm_m = dataclasses.replace(cm, links=np.array(
            [mm.link_index(m.link_names[int(l)]) for l in cm.links], dtype=np.int64))
        return PlacementSpec(
            model=m, mounted=mm, tip=self.tip, poses=self.poses, world=self.world,
            collision=cm_m, base_collision=base_spheres(m, cm, self.world),
            coarse=cfg.coarse, fine=cfg.fine, solver=cfg.solver,
            bound=reach_bound(m, self.tip) if cfg.prune else None, mount=mount, arm=arm,
            seed=mm.neutral_q(), margin=cfg.fine.collision_margin)


@dataclass
class PlacementResult:
    """What :func:`run_placement` returns. ``status``: "complete", "cancelled" or
    "timed_out" (then only the finished coarse shards are kept, in ``out_dir``).
    ``candidates``: the ``top`` best (best first) with their answers (columns of
    :data:`CANDIDATE_COLUMNS` and :data:`ANSWER_COLUMNS`); ``best`` the first of them;
    ``coarse``: every coarse candidate's scores; ``refined``: every candidate scored with the
    fine options (the refinement's path)."""

    status: str
    summary: dict
    coarse: dict | None = None
    refined: dict | None = None
    candidates: dict | None = None
    out_dir: Path | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def best(self) -> dict | None:
        if self.candidates is None or not len(self.candidates["fraction"]):
            return None
        return {k: v[0] for k, v in self.candidates.items()}


#: (stage "coarse" | "refine", candidates done, candidates total, best fraction so far)
Progress = Callable[[str, int, int, float], None]


def run_placement(placement: Placement, out_dir=None, *, executor=None,
                  progress: Progress | None = None, should_stop: Callable[[], bool] | None = None,
                  timeout: float | None = None, overwrite: bool = False) -> PlacementResult:
    """Run (or resume) a search (see the module docstring); with ``out_dir`` the coarse shards
    and the results are files there. ``should_stop`` is polled between shards and inside the
    solver; ``timeout`` [s] ends the search too (status "timed_out")."""
    from ..validate import check_path  # noqa: PLC0415
    from .runner import LocalExecutor  # noqa: PLC0415
    from .store import StudyStore, model_digest, write_npz  # noqa: PLC0415

    t0 = time.perf_counter()
    if not isinstance(placement, Placement):
        raise InputTypeError(f"placement must be a ros2_ik.reach.placement.Placement, got "
                             f"{describe(placement)}")
    check_path(out_dir, "out_dir")
    check_callable(progress, "progress")
    check_callable(should_stop, "should_stop", "a callable returning bool")
    timeout = check_number(timeout, "timeout", low=0.0, high=1e7, allow_none=True)
    overwrite = check_flag(overwrite, "overwrite")
    if executor is None:
        executor = LocalExecutor()
    deadline = None if timeout is None else time.monotonic() + timeout
    stopped = ["complete"]

    def stop() -> bool:
        if should_stop is not None and should_stop():
            stopped[0] = "cancelled"
            return True
        if deadline is not None and time.monotonic() >= deadline:
            stopped[0] = "timed_out"
            return True
        return False

    cfg = placement.config
    spec = placement.spec()
    grid = placement.candidates()
    C = grid.shape[0]
    S = cfg.shard_size
    n_shards = -(-C // S)
    store = None
    done: dict[int, dict] = {}
    manifest = {
        "kind": "ros2_ik base placement v1", "model": placement.model.name,
        "model_digest": model_digest(placement.model), "tip": placement.tip,
        "poses": placement.poses.shape[0],
        "poses_digest": _digest(placement.poses),
        "world": None if placement.world is None else _digest(placement.world.packed()),
        "region": placement.region.identity(), "config": cfg.identity(),
        "collision": _digest(np.concatenate([spec.collision.center.ravel(),
                                             spec.collision.radius,
                                             spec.collision.pairs.ravel().astype(float),
                                             spec.collision.pair_allowances()])),
        "reach_bound": None if spec.bound is None else spec.bound.identity(),
        "candidates": C, "shards": n_shards,
    }
    if out_dir is not None:
        store = StudyStore(out_dir, manifest)
        store.open(overwrite=overwrite)
        for i in sorted(store.finished()):
            if i < n_shards:
                done[i] = store.read_shard(i)
    best = [max((float(np.max(c["fraction"])) for c in done.values()), default=0.0)]

    def report(stage, k, total):
        if progress is not None:
            progress(stage, k, total, best[0])

    def count():
        return sum(min(C, (i + 1) * S) - i * S for i in done)

    resumed = len(done)
    report("coarse", count(), C)
    todo = [(i, i * S, min(C, (i + 1) * S)) for i in range(n_shards) if i not in done]
    if todo and not stop():
        try:
            for i, cols in executor.run(spec, grid, todo, stop,
                                        task="ros2_ik.reach.placement:_coarse_task"):
                if i in done:
                    continue
                if not cols.get("complete", True):
                    break
                cols = {k: cols[k] for k in COARSE_COLUMNS} | {
                    "solve_seconds": np.float64(cols["solve_seconds"])}
                if store is not None:
                    store.write_shard(i, cols)
                done[i] = cols
                best[0] = max(best[0], float(np.max(cols["fraction"])))
                report("coarse", count(), C)
        finally:
            executor.close()
    t_coarse = time.perf_counter() - t0
    summary = {"robot": placement.model.name, "tip": placement.tip,
               "task_poses": int(placement.poses.shape[0]), "candidates": C,
               "shards": n_shards, "shards_done": len(done), "shards_resumed": resumed,
               "executor": executor.name, "coarse_seconds": round(t_coarse, 3)}
    if len(done) < n_shards:
        summary["status"] = stopped[0] if stopped[0] != "complete" else "cancelled"
        return PlacementResult(summary["status"], summary,
                               out_dir=Path(out_dir) if out_dir else None)
    coarse = concat_rows([done[i] for i in range(n_shards)])
    coarse_summary = {k: coarse[k] for k in COARSE_COLUMNS}
    summary.update({"pairs": int(C * placement.poses.shape[0]),
                    "pruned": int(coarse["pruned"].sum()),
                    "solves_coarse": int(coarse["solved"].sum()),
                    "bases_in_collision": int((~coarse["base_clear"]).sum())})

    # ---- refinement (fine options) around the best distinct coarse candidates
    t1 = time.perf_counter()
    refined = refine(placement, spec, coarse, stop, report, best)
    cands = None if refined is None else top_candidates(placement, spec, coarse, refined, stop)
    if cands is None:
        summary["status"] = stopped[0] if stopped[0] != "complete" else "cancelled"
        return PlacementResult(summary["status"], summary, coarse_summary,
                               out_dir=Path(out_dir) if out_dir else None)
    refined_summary = {k: refined[k] for k in CANDIDATE_COLUMNS}
    summary.update({
        "status": "complete", "refine_seconds": round(time.perf_counter() - t1, 3),
        "refined_candidates": int(len(refined["fraction"])),
        "solves_fine": int(refined["solved"].sum()),
        "wall_seconds": round(time.perf_counter() - t0, 3),
        "best": {"base": [round(float(v), 6) for v in cands["base"][0]],
                 "fraction": float(cands["fraction"][0]),
                 "worst_manipulability": _num(cands["worst_manipulability"][0]),
                 "mean_manipulability": _num(cands["mean_manipulability"][0])},
        "best_coarse_fraction": float(np.max(coarse["fraction"])),
    })
    if store is not None:
        root = Path(out_dir)
        tmp = root / "placement.json.tmp"
        tmp.write_text(json.dumps(_question(placement), indent=1) + "\n")
        tmp.replace(root / "placement.json")
        if placement.world is not None:
            (root / "world.yaml").write_text(placement.world.to_yaml())
        write_npz(root / "coarse.npz", coarse_summary)
        write_npz(root / "refined.npz", refined_summary)
        write_npz(root / "candidates.npz", {k: v for k, v in cands.items()} | {
            "q_names": np.array(placement.model.q_names),
            "poses": placement.poses})
        tmp = root / "summary.json.tmp"
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
        tmp.replace(root / "summary.json")
    return PlacementResult("complete", summary, coarse_summary, refined_summary, cands,
                           Path(out_dir) if out_dir else None)


def _question(placement: Placement) -> dict:
    """What :func:`load_placement` needs to make the question again (the model and the
    collision model aside)."""
    def ik(c):
        return {k: (v.value if hasattr(v, "value") else v)
                for k, v in dataclasses.asdict(c).items()}
    c = placement.config
    return {"tip": placement.tip, "region": placement.region.identity(),
            "config": {"resolution": c.resolution, "yaw_step": c.yaw_step, "top": c.top,
                       "refine": c.refine, "xy_tolerance": c.xy_tolerance,
                       "yaw_tolerance": c.yaw_tolerance, "coarse": ik(c.coarse),
                       "fine": ik(c.fine), "solver": c.solver, "shard_size": c.shard_size,
                       "prune": c.prune}}


def load_placement(out_dir, model: Model, collision=None) -> tuple:
    """``(Placement, PlacementResult)`` of a finished search's folder (written by
    :func:`run_placement`), on ``model`` (the robot it was run for; a different one is refused
    by its digest) and its ``collision`` model (default: the model's own)."""
    from ..world import world_from_yaml  # noqa: PLC0415
    from .store import model_digest, read_npz  # noqa: PLC0415

    root = Path(out_dir)
    need = ["manifest.json", "placement.json", "summary.json", "coarse.npz", "refined.npz",
            "candidates.npz"]
    missing = [n for n in need if not (root / n).exists()]
    if missing:
        raise InvalidInputError(f"{str(root)!r} holds no finished base placement (missing "
                                f"{', '.join(missing)}); give the --out folder of a finished "
                                "ros2_ik_base_placement run")
    manifest = json.loads((root / "manifest.json").read_text())
    if manifest.get("model_digest") != model_digest(model):
        raise InvalidInputError(f"{str(root)!r} was made for another robot model "
                                f"({manifest.get('model')!r}); give the robot it was run for")
    q = json.loads((root / "placement.json").read_text())
    c = dict(q["config"])
    c["coarse"], c["fine"] = IKConfig(**c["coarse"]), IKConfig(**c["fine"])
    r = q["region"]
    world = None
    if (root / "world.yaml").exists():
        world = world_from_yaml((root / "world.yaml").read_text())
    cands = read_npz(root / "candidates.npz")
    pl = Placement(model, cands["poses"], Region(tuple(r["x"]), tuple(r["y"]), tuple(r["yaw"]),
                                                 tuple(r["heights"])),
                   q["tip"], world, PlacementConfig(**c), collision)
    cols = CANDIDATE_COLUMNS + ANSWER_COLUMNS
    res = PlacementResult("complete", json.loads((root / "summary.json").read_text()),
                          read_npz(root / "coarse.npz"), read_npz(root / "refined.npz"),
                          {k: cands[k] for k in cols if k in cands}, root)
    return pl, res


def _num(v):
    v = float(v)
    return None if not math.isfinite(v) else round(v, 6)


def _digest(a: np.ndarray) -> str:
    import hashlib  # noqa: PLC0415

    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float64).tobytes()).hexdigest()[:16]


#: what a coarse shard keeps: the scores and which task poses were reached
COARSE_COLUMNS = CANDIDATE_COLUMNS + ("success",)


def _coarse_task(spec: PlacementSpec, bases: np.ndarray, should_stop=None) -> dict:
    """One coarse shard (the executors' task): :data:`COARSE_COLUMNS`."""
    cols = score_bases(spec, bases, fine=False, should_stop=should_stop)
    return {k: cols[k] for k in COARSE_COLUMNS + ("complete", "solve_seconds")}


