"""A base placement's coarse pass on a local 2-worker Ray cluster: the same scores and answer as
a single process (the coarse shards are the reach studies' Ray tasks)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (it is an optional extra: "
                          "pip install 'ray==2.60.0'; scripts/setup.sh installs it)")

import numpy as np  # noqa: E402

from ros2_ik.reach.placement import run_placement  # noqa: E402
from ros2_ik.reach.ray_executor import RayExecutor  # noqa: E402
from test_placement import _placement, cell  # noqa: E402, F401

pytestmark = pytest.mark.timeout(600)


def test_ray_coarse_pass_equals_a_single_process(cell, tmp_path):  # noqa: F811
    one = run_placement(_placement(cell))
    ex = RayExecutor(num_workers=2, threads=1)
    try:
        res = run_placement(_placement(cell), tmp_path, executor=ex)
    finally:
        ray.shutdown()
    assert res.complete and res.summary["executor"].startswith("ray (2 CPUs")
    for k in ("fraction", "worst_manipulability", "success", "solved", "pruned"):
        np.testing.assert_array_equal(res.coarse[k], one.coarse[k])
    np.testing.assert_array_equal(res.candidates["base"], one.candidates["base"])
    np.testing.assert_array_equal(res.candidates["q"], one.candidates["q"])
    assert len(list((tmp_path / "shards").glob("shard-*.npz"))) == res.summary["shards"]
