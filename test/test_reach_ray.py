"""The Ray executor of reach studies on a local 2-worker cluster: byte-identical results to a
single-process run, also when a worker process is killed while it solves a shard."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (it is an optional extra: "
                          "pip install 'ray==2.60.0'; scripts/setup.sh installs it)")

from ros2_ik import load_robot  # noqa: E402
from ros2_ik.reach import Sphere, Study, StudyConfig, grid_targets, run_study  # noqa: E402
from ros2_ik.reach.ray_executor import RayExecutor  # noqa: E402

TASK_TITLE = b"ray::_solve_shard_task"


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster (2 CPUs: 2 worker processes at one thread each) for the module."""
    ex = RayExecutor(num_workers=2, threads=1, keep=True)
    try:
        yield ex
    finally:
        ray.shutdown()


def _study():
    t = grid_targets(Sphere((0, 0, 0.333), 1.0), 0.2, 4, 2)
    return Study(load_robot("panda"), t, config=StudyConfig(shard_size=300))


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    res = run_study(_study(), out, plots=False)
    assert res.complete
    return out


def _task_pids() -> list[int]:
    """Ray worker processes that are running a shard now (Ray sets their process title)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(TASK_TITLE):
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def test_ray_two_workers_equal_single_process(cluster, single, tmp_path):
    res = run_study(_study(), tmp_path, executor=cluster, plots=False)
    assert res.complete and res.summary["executor"].startswith("ray (2 CPUs")
    for name in ("results.npz", "voxels.npz"):
        assert (tmp_path / name).read_bytes() == (single / name).read_bytes()


def test_ray_killed_worker_costs_a_retry_only(cluster, single, tmp_path):
    killed = []

    def progress(done, total, reached):
        if done and not killed and done < total:
            for pid in _task_pids():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break

    study = _study()
    res = run_study(study, tmp_path, executor=cluster, progress=progress, plots=False)
    assert killed, "no worker was busy with a shard when the first shards finished"
    assert res.complete
    shards = sorted((tmp_path / "shards").glob("shard-*.npz"))
    assert len(shards) == study.num_shards  # none lost, none twice
    for name in ("results.npz", "voxels.npz"):
        assert (tmp_path / name).read_bytes() == (single / name).read_bytes()
