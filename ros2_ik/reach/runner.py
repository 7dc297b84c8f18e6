"""Run a study: shards through an executor, written as they finish, merged in target order.

:func:`run_study` drives every run (command line, the node's action, Ray): it skips shards a
previous run finished (resume), hands the rest to an executor (:class:`LocalExecutor` in this
process, or :class:`ros2_ik.reach.ray_executor.RayExecutor`), writes each finished shard at
once, and when all are there merges them in shard order into the results. Which process
solved a shard, in which order they finished, and whether the study was stopped and resumed
in between do not change the results: each shard's columns are a function of its targets.
"""

from __future__ import annotations

import concurrent.futures as cf
import platform
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..errors import InputTypeError
from ..validate import check_callable, check_flag, check_path, describe
from .store import StudyStore, model_digest
from .study import COLUMNS, OUT_OF_REACH, ShardSpec, Study, voxel_table

__all__ = ["run_study", "StudyResult", "LocalExecutor", "merge_columns"]

#: Called after every finished shard: (targets done, targets total, targets reached).
Progress = Callable[[int, int, int], None]


@dataclass
class StudyResult:
    """What :func:`run_study` returns. ``results`` / ``voxels`` are None when the run was
    stopped before every shard was finished (the finished ones are kept in the folder)."""

    complete: bool
    summary: dict
    results: dict | None = None
    voxels: dict | None = None
    out_dir: Path | None = None
    plots: list = field(default_factory=list)


#: the shard task of a reach study (an executor's ``task``: "module:function")
STUDY_TASK = "ros2_ik.reach.study:solve_shard"


def shard_task(task: str) -> Callable:
    """The function a task name "module:function" names (a shard's work: ``fn(spec,
    rows, should_stop) -> columns``, e.g. :func:`ros2_ik.reach.study.solve_shard`)."""
    import importlib  # noqa: PLC0415

    module, _, name = task.partition(":")
    return getattr(importlib.import_module(module), name)


class LocalExecutor:
    """Solves shards in this process (the solver uses every core), two in flight: while one
    shard's Python work runs (checks, selection, manipulability, the caller writing it), the
    next one's kernels keep the cores busy. Shards are answered in order."""

    name = "local"
    IN_FLIGHT = 2

    def run(self, spec: ShardSpec, poses: np.ndarray, todo: list[tuple[int, int, int]],
            should_stop: Callable[[], bool] | None, task: str = STUDY_TASK
            ) -> Iterator[tuple[int, dict]]:
        fn = shard_task(task)
        pending: deque = deque()
        jobs = iter(todo)
        with cf.ThreadPoolExecutor(self.IN_FLIGHT, thread_name_prefix="ros2_ik-shard") as ex:
            try:
                while True:
                    while len(pending) < self.IN_FLIGHT:
                        job = next(jobs, None)
                        if job is None or (should_stop is not None and should_stop()):
                            break
                        i, a, b = job
                        pending.append((i, ex.submit(fn, spec, poses[a:b], should_stop)))
                    if not pending:
                        return
                    i, fut = pending.popleft()
                    cols = fut.result()
                    if not cols["complete"]:
                        return
                    yield i, cols
            finally:
                for _, fut in pending:  # stopped early: shards not started are dropped
                    fut.cancel()

    def close(self) -> None:
        pass


def manifest_of(study: Study, spec: ShardSpec | None = None) -> dict:
    t = study.targets
    spec = study.spec() if spec is None else spec
    return {
        "model": study.model.name,
        "model_digest": model_digest(study.model),
        "tip": study.tip,
        "targets": len(t),
        "targets_digest": t.digest(),
        "targets_description": t.description,
        "voxels": t.num_voxels,
        "config": study.config.identity(),
        # which targets are skipped as out of reach (a bound changed by a new version of
        # ros2_ik must not mix with shards written under the old one)
        "reach_bound": None if spec.bound is None else spec.bound.identity(),
        "shards": study.num_shards,
    }


def _shard_columns(cols: dict) -> dict:
    return {k: cols[k] for k in COLUMNS if k in cols} | {
        "solve_seconds": np.float64(cols["solve_seconds"])}


def merge_columns(study: Study, shards: list[dict]) -> dict:
    """Per-target results (``COLUMNS`` order) from the shards in shard order."""
    out = {"pose": study.targets.poses, "voxel": study.targets.voxel}
    for name in COLUMNS:
        if name in out:
            continue
        dtype = COLUMNS[name][0]
        out[name] = np.concatenate([np.asarray(s[name], dtype=dtype) for s in shards])
    out["q_names"] = np.array(study.model.q_names)
    return out


def run_study(study: Study, out_dir=None, *, executor=None, progress: Progress | None = None,
              should_stop: Callable[[], bool] | None = None, overwrite: bool = False,
              plots: bool = True) -> StudyResult:
    """Run (or resume) ``study``; with ``out_dir`` the shards and results are files there.

    ``should_stop`` is polled between shards and inside the solver; when it fires, the shards
    finished so far stay (in ``out_dir``) and the result has ``complete=False``.
    """
    t0 = time.perf_counter()
    if not isinstance(study, Study):
        raise InputTypeError(f"study must be a ros2_ik.reach.Study, got {describe(study)}")
    check_path(out_dir, "out_dir")
    if executor is None:
        executor = LocalExecutor()
    elif not (callable(getattr(executor, "run", None)) and callable(getattr(executor, "close",
                                                                              None))):
        raise InputTypeError(f"executor must be an executor (LocalExecutor(), RayExecutor(...): "
                             f"with run() and close()) or None, got {describe(executor)}")
    check_callable(progress, "progress")
    check_callable(should_stop, "should_stop", "a callable returning bool")
    overwrite, plots = check_flag(overwrite, "overwrite"), check_flag(plots, "plots")
    n_shards = study.num_shards
    store = None
    done: dict[int, dict] = {}
    spec = study.spec()
    if out_dir is not None:
        store = StudyStore(out_dir, manifest_of(study, spec))
        store.open(overwrite=overwrite)
        for i in sorted(store.finished()):
            if i < n_shards:
                done[i] = store.read_shard(i)
    total = len(study.targets)

    def count(d):
        return sum(study.shard_range(i)[1] - study.shard_range(i)[0] for i in d)

    reached = sum(int(np.sum(c["reached"])) for c in done.values())
    resumed = len(done)
    if progress is not None:
        progress(count(done), total, reached)
    todo = [(i, *study.shard_range(i)) for i in range(n_shards) if i not in done]
    if plots and out_dir is not None and todo:  # import matplotlib (~1 s) while shards solve
        threading.Thread(target=lambda: _import_plots().warm(), daemon=True,
                         name="ros2_ik-reach-plots").start()
    solved_now = 0
    solve_seconds = 0.0
    t_solved = None  # when the last shard was written (before the executor is closed)
    if todo:
        try:
            for i, cols in executor.run(spec, study.targets.poses, todo, should_stop):
                if i in done:  # an executor that answers a shard twice: keep the first
                    continue
                cols = _shard_columns(cols)
                if store is not None:
                    store.write_shard(i, cols)
                done[i] = cols
                a, b = study.shard_range(i)
                solved_now += b - a
                solve_seconds += float(cols["solve_seconds"])
                reached += int(np.sum(cols["reached"]))
                if progress is not None:
                    progress(count(done), total, reached)
            t_solved = time.perf_counter()
        finally:
            executor.close()  # (stopping a local Ray cluster takes a second or two)
    wall = time.perf_counter() - t0
    # until every shard was solved and written, without closing the executor
    solve_wall = (t_solved if t_solved is not None else time.perf_counter()) - t0
    summary = {
        "robot": study.model.name,
        "tip": study.tip,
        "targets": total,
        "voxels": study.targets.num_voxels,
        "shards": n_shards,
        "shards_done": len(done),
        "shards_resumed": resumed,
        "targets_solved_this_run": solved_now,
        "wall_seconds": round(wall, 3),
        "solve_wall_seconds": round(solve_wall, 3),
        "solve_seconds": round(solve_seconds, 3),
        "solves_per_second": round(solved_now / solve_wall, 1) if solve_wall > 0 else None,
        "executor": executor.name,
        "backend": study.config.backend,
        "host": platform.node(),
        "targets_description": study.targets.description,
    }
    if len(done) < n_shards:
        summary["reached_so_far"] = reached
        return StudyResult(False, summary, out_dir=Path(out_dir) if out_dir else None)
    shards = [done[i] for i in range(n_shards)]
    results = merge_columns(study, shards)
    voxels = voxel_table(study.targets, results["reached"], results["manipulability"],
                         results["limit_margin"])
    summary.update({
        "reached": int(np.sum(results["reached"])),
        "reached_fraction": round(float(np.mean(results["reached"])), 6),
        "out_of_reach": int(np.sum(results["status"] == OUT_OF_REACH)),
        "voxels_reached": int(np.sum(voxels["reached"] > 0)),
        "mean_reachability": round(float(np.mean(voxels["reachability"])), 6),
    })
    made = []
    if store is not None:
        # the results files (I/O) are written while the plots are drawn (CPU)
        failed: list[BaseException] = []

        def write():
            try:
                store.write_results(results, voxels)
            except BaseException as e:  # noqa: BLE001 - raised again in this thread below
                failed.append(e)

        writer = threading.Thread(target=write, name="ros2_ik-reach-write")
        writer.start()
        try:
            if plots:
                made = _import_plots().save_plots(study.targets, voxels,
                                                  Path(out_dir) / "plots",
                                                  title=f"{study.model.name} / {study.tip}",
                                                  world=study.config.world)
        finally:
            writer.join()
        if failed:
            raise failed[0]
        summary["wall_seconds"] = round(time.perf_counter() - t0, 3)
        store.write_summary(summary)
    return StudyResult(True, summary, results, voxels, Path(out_dir) if out_dir else None, made)


def _import_plots():
    from . import plots  # noqa: PLC0415 (matplotlib only when drawing)

    return plots
