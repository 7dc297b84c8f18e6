"""Shard a study over a Ray cluster (optional: ``pip install ray``; nothing else imports it).

One Ray task per shard (:func:`_solve_shard_task`): the model, the options and all targets go
into Ray's object store once, each task reads its slice and returns its result columns (a
worker unpickles the model once per study and keeps it for its later shards); the
driver (:func:`ros2_ik.reach.runner.run_study`) writes each shard as its task finishes, then
merges in shard order, so the results equal a single-process run's byte for byte. A worker
process that dies mid-task (killed, out of memory, its node lost) makes Ray run that task again
(``max_retries``); the driver keeps the first answer per shard, so no shard is lost or counted
twice. Each task uses its worker's GPU when the cluster gave it one (``gpus_per_task``) and
CuPy sees it and the study's backend is "auto", and otherwise the compiled host kernel with
``threads`` threads.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections import OrderedDict
from typing import Callable, Iterator

import numpy as np

from ..errors import BackendUnavailableError
from .runner import STUDY_TASK
from .study import ShardSpec

__all__ = ["RayExecutor", "ray_available"]

#: Times Ray re-runs a shard whose worker died before it answered.
MAX_RETRIES = 4

#: Studies' specs a worker process keeps (by content digest): a worker's later shards of the
#: same study reuse the model it unpickled for the first one, and with it what the solver
#: prepared and cached on that model (the compiled chain, the restart seeds).
_SPECS: OrderedDict = OrderedDict()
_SPECS_KEPT = 4


def ray_available() -> bool:
    try:
        import ray  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _import_ray():
    try:
        import ray  # noqa: PLC0415
    except ImportError:
        raise BackendUnavailableError(
            "--ray needs the Ray package, which is not installed: pip install 'ray==2.60.0' "
            "(an optional extra of ros2_ik: pip install ros2_ik[ray]); or run without --ray"
        ) from None
    return ray


def _worker_spec(key: str, boxed_ref: list) -> ShardSpec:
    """The study's spec in this worker process: fetched from the object store (``boxed_ref``
    holds the reference to its pickle, in a list so that Ray does not fetch it for every task)
    and unpickled the first time, then kept under its digest ``key``."""
    spec = _SPECS.get(key)
    if spec is None:
        spec = pickle.loads(_import_ray().get(boxed_ref[0]))
        _SPECS[key] = spec
        while len(_SPECS) > _SPECS_KEPT:
            _SPECS.popitem(last=False)
    else:
        _SPECS.move_to_end(key)
    return spec


def _solve_shard_task(spec_key: str, boxed_spec: list, poses: np.ndarray, start: int,
                      stop: int, threads: int, task: str = STUDY_TASK) -> dict:
    """The body of one Ray task: solve rows ``start:stop`` with ``task`` (see
    :func:`study.solve_shard`, a base placement's coarse shard).

    With the study's backend "auto" the task solves on the GPU when Ray gave it one (Ray hides
    the GPUs from a task that asked for none) and on the CPU path otherwise."""
    from .runner import shard_task  # noqa: PLC0415

    spec = _worker_spec(spec_key, boxed_spec)

    if threads > 0:  # the host backend's batch threads (read per call)
        os.environ["ROS2_IK_THREADS"] = str(int(threads))
    cols = shard_task(task)(spec, poses[start:stop])
    cols["worker_pid"] = os.getpid()
    return cols


class RayExecutor:
    """Runs a study's shards as Ray tasks.

    Args:
        address: a running cluster (``"ray://host:10001"``, ``"host:6379"`` or ``"auto"``), or
            None for a local one started here (``num_workers`` CPUs, stopped again by
            :meth:`close`).
        num_workers: CPUs of the local cluster (None: every core); ignored with an address.
        threads: compiled-kernel threads per task (each task reserves ``threads`` CPUs).
        gpus_per_task: GPUs a task asks for (0: CPU path; a fraction shares a GPU); a task
            solves on it when the study's backend is "auto" (or "cupy").
        keep: leave a local cluster started here running after :meth:`close` (several studies
            on one cluster; ``ray.shutdown()`` ends it).
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, num_workers: int | None = None,
                 threads: int = 1, gpus_per_task: float = 0.0, max_retries: int = MAX_RETRIES,
                 keep: bool = False, init_kwargs: dict | None = None):
        ray = _import_ray()
        self._ray = ray
        self.threads = int(threads)
        self.gpus = float(gpus_per_task)
        self.max_retries = int(max_retries)
        self._started = False
        self._keep = bool(keep)
        if not ray.is_initialized():
            kw = dict(init_kwargs or {})
            kw.setdefault("include_dashboard", False)
            kw.setdefault("log_to_driver", False)
            kw.setdefault("configure_logging", False)
            if address is None:
                kw.setdefault("num_cpus", num_workers or os.cpu_count() or 1)
                self._started = True
            try:
                ray.init(address=address, **kw)
            except Exception as exc:  # noqa: BLE001 (ConnectionError, RuntimeError, ...)
                what = (f"connect to the Ray cluster at {address!r}" if address
                        else "start a local Ray cluster")
                raise BackendUnavailableError(
                    f"cannot {what}: "
                    f"{exc}; check the address (ray status on the head node) or run without "
                    "--ray") from None
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.name = f"ray ({cpus} CPUs, {self.threads} thread(s) per task)"
        self._task = ray.remote(_solve_shard_task).options(
            num_cpus=self.threads, num_gpus=self.gpus, max_retries=self.max_retries,
            retry_exceptions=False)

    def run(self, spec: ShardSpec, poses: np.ndarray, todo: list[tuple[int, int, int]],
            should_stop: Callable[[], bool] | None, task: str = STUDY_TASK
            ) -> Iterator[tuple[int, dict]]:
        ray = self._ray
        blob = pickle.dumps(spec)  # pickled once: its digest is the workers' key
        key = hashlib.sha256(blob).hexdigest()
        boxed_spec = [ray.put(blob)]
        poses_ref = ray.put(np.ascontiguousarray(poses))
        pending = {}
        for i, a, b in todo:
            ref = self._task.remote(key, boxed_spec, poses_ref, a, b, self.threads, task)
            pending[ref] = i
        try:
            while pending:
                if should_stop is not None and should_stop():
                    return
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                for ref in ready:
                    i = pending.pop(ref)
                    cols = ray.get(ref)
                    yield i, cols
        finally:
            for ref in pending:  # stopped: the unfinished shards are dropped, not written
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass

    def close(self) -> None:
        if self._started and not self._keep and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False
