"""Cold start of the compiled fast path: a solve never exceeds its timeout because of Numba
compiling, and ``warm_up()`` makes the kernels ready explicitly.

Each case runs in a fresh interpreter (the kernels are per process); the cold case gets an
empty NUMBA_CACHE_DIR, so nothing can be loaded from disk and everything would have to compile
(tens of seconds to minutes on this machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba", reason="the compiled fast path needs Numba")

COLD = textwrap.dedent("""
    import json, os, time
    import numpy as np
    from ros2_ik import load_robot
    from ros2_ik.kinematics import fk_frames, pose_error
    from ros2_ik.solvers import IKConfig, fast, solve_pose

    model = load_robot("panda")
    tip = "panda_hand_tcp"
    q = model.random_q(np.random.default_rng(3), 4)
    T = np.asarray(fk_frames(model, q, [tip]))[:, 0]
    out = {}
    for timeout in (0.05, 0.5):
        t0 = time.perf_counter()
        r = solve_pose(model, T, tips=[tip], config=IKConfig(timeout=timeout, num_seeds=8))
        out[str(timeout)] = {
            "elapsed": time.perf_counter() - t0, "warm_after": fast.is_warm(),
            "status": [int(s) for s in r.status], "success": [bool(s) for s in r.success],
            "fk_errors": [list(map(float, e)) for e in zip(*pose_error(
                T, np.asarray(fk_frames(model, r.q, [tip]))[:, 0]))]}
    print(json.dumps(out), flush=True)
    os._exit(0)  # the background compilation is not waited for
""")

WARM = textwrap.dedent("""
    import json
    from ros2_ik.solvers import fast, warm_up

    before = fast.is_warm()
    spent = warm_up()
    print(json.dumps({"before": before, "spent": spent, "after": fast.is_warm(),
                      "again": warm_up()}), flush=True)
""")


def _run(code: str, env_extra=None, timeout=600) -> dict:
    env = dict(os.environ)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_cold_solve_honours_its_timeout_and_stays_honest(tmp_path):
    out = _run(COLD, {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")})
    for timeout, r in out.items():
        t = float(timeout)
        # a compilation would take tens of seconds; the margin covers interpreter start-up
        # costs of NumPy on a loaded machine, not a compile
        assert r["elapsed"] < t + 3.0, (timeout, r)
        assert not r["warm_after"], "the timed call compiled the kernels itself"
        for st, ok, (pe, re) in zip(r["status"], r["success"], r["fk_errors"]):
            assert st in (1, -6), r         # CONVERGED or TIMED_OUT, nothing else
            if ok:                          # every success verified by our own FK
                assert pe <= 1e-4 * 1.0001 and re <= 1e-3 * 1.0001


def test_warm_up_is_explicit_and_idempotent():
    out = _run(WARM)
    assert out["before"] is False
    assert out["spent"] > 0 and out["after"] is True
    assert out["again"] == 0.0
