"""The Ray executor's GPU branch without a GPU: a local cluster that declares one GPU, and in its
workers CuPy's CPU stand-in (test/cupy_standin.py, which runs the generated CUDA text on the
host), importable only in a task Ray gave a GPU (Ray sets CUDA_VISIBLE_DEVICES for such a
task). With the study's backend "auto", tasks that ask for a GPU must solve on the (stand-in)
GPU path, byte for byte what the same study gives on the stand-in in one process, and tasks
that ask for none on the CPU path, byte for byte a single-process CPU run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (it is an optional extra: "
                          "pip install 'ray==2.60.0'; scripts/setup.sh installs it)")

import cupy_standin  # noqa: E402
from ros2_ik import load_robot  # noqa: E402
from ros2_ik.reach import Sphere, Study, StudyConfig, grid_targets, run_study  # noqa: E402
from ros2_ik.reach.ray_executor import RayExecutor  # noqa: E402

TEST_DIR = Path(__file__).resolve().parent

#: ``cupy`` for the cluster's workers (found first on their PYTHONPATH): the stand-in, but only
#: where Ray gave the task a GPU; it notes each import (process, CUDA_VISIBLE_DEVICES)
FAKE_CUPY = '''"""CuPy in this test's Ray workers: the CPU stand-in where Ray gave a task a GPU."""
import os
import sys

if not os.environ.get("CUDA_VISIBLE_DEVICES"):
    raise ImportError("no GPU was given to this task")
with open(os.environ["R2IK_TEST_GPU_LOG"], "a") as f:
    f.write(f"{os.getpid()} {os.environ['CUDA_VISIBLE_DEVICES']}\\n")
import cupy_standin  # noqa: E402

sys.modules[__name__] = cupy_standin
'''


def _study(backend="auto"):
    t = grid_targets(Sphere((0.3, 0.0, 0.5), 0.4), 0.2, 4, 2)
    return Study(load_robot("panda"), t, config=StudyConfig(shard_size=200, backend=backend))


@pytest.fixture
def gpu_cluster(tmp_path):
    """A local Ray cluster of 2 CPUs and 1 (declared) GPU whose workers import the stand-in as
    ``cupy`` (a new cluster per test: a worker keeps the CuPy it imported)."""
    d = tmp_path / "fake_cupy"
    d.mkdir()
    (d / "cupy.py").write_text(FAKE_CUPY)
    log = d / "imports.log"
    path = os.pathsep.join([str(d), str(TEST_DIR), str(TEST_DIR.parent)]
                           + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env = {"env_vars": {"PYTHONPATH": path, "R2IK_TEST_GPU_LOG": str(log)}}
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False,
             configure_logging=False, runtime_env=env)
    try:
        yield log
    finally:
        ray.shutdown()


def test_tasks_given_a_gpu_solve_on_it(gpu_cluster, tmp_path, monkeypatch):
    log = gpu_cluster
    ex = RayExecutor(threads=1, gpus_per_task=0.5)  # two tasks share the GPU
    res = run_study(_study(), tmp_path / "ray", executor=ex, plots=False)
    assert res.complete
    seen = log.read_text().split("\n") if log.exists() else []
    assert [s for s in seen if s], "no task imported CuPy with a GPU given to it"
    cupy_standin.install(monkeypatch)  # the same study on the stand-in, in this process
    local = run_study(_study(), tmp_path / "local", plots=False)
    assert local.complete
    cpu = run_study(_study("numpy"), tmp_path / "cpu", plots=False)
    assert cpu.complete
    ray_bytes = (tmp_path / "ray" / "results.npz").read_bytes()
    assert ray_bytes == (tmp_path / "local" / "results.npz").read_bytes()
    assert ray_bytes != (tmp_path / "cpu" / "results.npz").read_bytes()  # float32 kernels ran
    assert res.summary["reached"] > 0


def test_tasks_that_ask_for_no_gpu_take_the_cpu_path(gpu_cluster, tmp_path, monkeypatch):
    from ros2_ik import backend

    log = gpu_cluster
    monkeypatch.setitem(backend._cupy_state, "module", None)  # this process: the CPU path
    ex = RayExecutor(threads=1, gpus_per_task=0.0)
    res = run_study(_study(), tmp_path / "ray", executor=ex, plots=False)
    assert res.complete
    assert not log.exists() or not log.read_text().strip()  # CuPy never imported with a GPU
    single = run_study(_study(), tmp_path / "single", plots=False)
    assert single.complete
    for name in ("results.npz", "voxels.npz"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "single" / name).read_bytes()
