"""The kernel cache and cold starts: a robot's kernels are built once per machine (or at set-up
by ``prebuild``) and loaded afterwards; a solve never spends its timeout on a build; a process
that finds them built answers as one that built them.

Each case runs in a fresh interpreter with its own kernel cache (``ROS2_IK_KERNEL_CACHE``), so
nothing is shared with the suite's warm process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ros2_ik.backends import host

pytestmark = pytest.mark.skipif(host.available() is None, reason="no C++ compiler (g++) here")

COLD = textwrap.dedent("""
    import json, os, sys, time
    t_start = time.perf_counter()
    import numpy as np
    from ros2_ik import IKConfig, load_robot, solve_pose
    from ros2_ik.api import IKSolver
    from ros2_ik.kinematics import fk_frames, pose_error

    model = load_robot("panda")
    tip = "panda_hand_tcp"
    q = model.random_q(np.random.default_rng(3), 4)
    T = np.asarray(fk_frames(model, q, [tip]))[:, 0]
    out = {"backend": IKSolver(model, [tip], IKConfig()).backend}
    for timeout in (0.05, 0.5):
        t0 = time.perf_counter()
        r = solve_pose(model, T, tips=[tip], config=IKConfig(timeout=timeout, num_seeds=8))
        out[str(timeout)] = {
            "status": [int(s) for s in r.status], "success": [bool(s) for s in r.success],
            "q": r.q.tolist(), "solve_time": r.solve_time,
            "fk_errors": [list(map(float, e)) for e in zip(*pose_error(
                T, np.asarray(fk_frames(model, r.q, [tip]))[:, 0]))]}
    out["first_answer_s"] = time.perf_counter() - t_start
    out["libraries"] = sorted(os.listdir(os.environ["ROS2_IK_KERNEL_CACHE"]))
    print(json.dumps(out), flush=True)
""")


def _run(code: str, env_extra=None, timeout=600) -> dict:
    env = dict(os.environ)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_cold_machine_builds_once_and_a_warm_one_only_loads(tmp_path):
    """An empty cache: the first call builds the robot's kernels (outside its timeout: the
    solves still end CONVERGED or TIMED_OUT within their budgets, every success FK-verified);
    a second process finds them built, builds nothing, and gives the same answers."""
    env = {"ROS2_IK_KERNEL_CACHE": str(tmp_path / "kernels")}
    cold = _run(COLD, env)
    warm = _run(COLD, env)
    assert cold["backend"] == warm["backend"] == "host"
    assert cold["libraries"] and cold["libraries"] == warm["libraries"]  # nothing new built
    for timeout in ("0.05", "0.5"):
        for out in (cold, warm):
            r = out[timeout]
            assert r["solve_time"] < float(timeout) + 1.0  # the build is not in the timeout
            for st, ok, (pe, re) in zip(r["status"], r["success"], r["fk_errors"]):
                assert st in (1, -6), r         # CONVERGED or TIMED_OUT, nothing else
                if ok:                          # every success verified by our own FK
                    assert pe <= 1e-4 * 1.0001 and re <= 1e-3 * 1.0001
    assert cold["0.5"]["q"] == warm["0.5"]["q"]  # warm or cold: the same answer
    print(f"first answer: cold {cold['first_answer_s']:.1f} s, warm "
          f"{warm['first_answer_s']:.1f} s")


def test_prebuild_fills_the_cache_for_the_bundled_robots(tmp_path):
    env = {"ROS2_IK_KERNEL_CACHE": str(tmp_path / "kernels")}
    out = _run(textwrap.dedent("""
        import json, os
        from ros2_ik.api import prebuild
        prebuild(["ur"])
        print(json.dumps(sorted(os.listdir(os.environ["ROS2_IK_KERNEL_CACHE"]))))
    """), env)
    kernels = [f for f in out if f.startswith("r2ik_") and f.endswith(".so")]
    # the kernels, and the small-call extension (ros2_ik.backends.pycall) where it builds
    assert len(kernels) >= 3 and all(f in kernels or f.startswith("ros2_ik_pycall_")
                                     for f in out)
    again = _run(textwrap.dedent("""
        import json, os
        from ros2_ik.api import prebuild
        prebuild(["ur"])
        print(json.dumps(sorted(os.listdir(os.environ["ROS2_IK_KERNEL_CACHE"]))))
    """), env)
    assert again == out
