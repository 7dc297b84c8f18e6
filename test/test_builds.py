"""Kernel builds: waited for by the library, in the background for a node.

- the library's default: a solver waits for its build, so its first answer is the compiled one;
- a thread that builds in the background (the node's) gets the reference at once, every answer
  verified and naming its backend, and the compiled solver once the build is done;
- one build per source, however many threads ask; a failed build is not retried; the process
  default is untouched by a thread's choice;
- sources that would take g++ minutes (long chains) are not generated: the reference answers.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from ros2_ik import IKConfig, fk_frames, solve_pose
from ros2_ik.api.solver import MAX_PATH_JOINTS, prepared_solver
from ros2_ik.backends import build, host
from ros2_ik.model import Model

pytestmark = pytest.mark.skipif(host.available() is None, reason="no C++ compiler here")


def _arm(tag: float) -> Model:
    """A 3-joint arm whose geometry (``tag``) is new to every kernel cache."""
    joints = []
    for i, (axis, xyz) in enumerate((("0 0 1", "0 0 0.1"), ("0 1 0", f"0 0 {0.3 + tag:.9f}"),
                                     ("0 1 0", "0.25 0 0"))):
        joints.append(f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child '
                      f'link="l{i + 1}"/><origin xyz="{xyz}"/><axis xyz="{axis}"/><limit '
                      'lower="-2" upper="2" effort="1" velocity="1"/></joint>')
    links = "".join(f'<link name="l{i}"/>' for i in range(4))
    return Model.from_urdf(f'<robot name="arm">{links}{"".join(joints)}'
                           '<link name="tcp"/><joint name="t" type="fixed"><parent link="l3"/>'
                           '<child link="tcp"/><origin xyz="0.1 0 0"/></joint></robot>')


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS2_IK_KERNEL_CACHE", str(tmp_path))
    return tmp_path


def _goals(m: Model, n: int = 5):
    return np.asarray(fk_frames(m, m.random_q(np.random.default_rng(1), n), ["tcp"]))[:, 0]


def _wait_built(timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while host.builds_under_way() and time.monotonic() < end:
        time.sleep(0.02)
    assert not host.builds_under_way(), "the background build did not end"


def test_the_library_waits_for_its_build(cache):
    m = _arm(0.001)
    r = solve_pose(m, _goals(m), tips=["tcp"], config=IKConfig(num_seeds=8))
    assert r.backend == "host" and r.success.all()
    assert not host.in_background()


def test_a_background_thread_gets_the_reference_until_the_build_is_done(cache, monkeypatch):
    m = _arm(0.002)
    T = _goals(m)
    keys = []
    real = build._BUILDER.submit
    monkeypatch.setattr(build._BUILDER, "submit", lambda key, job: (keys.append(key),
                                                                    real(key, job)))
    out = {}

    def node_thread():
        with host.waiting_for_builds(False):
            out["first"] = solve_pose(m, T, tips=["tcp"], config=IKConfig(num_seeds=8))
            out["again"] = solve_pose(m, T, tips=["tcp"], config=IKConfig(num_seeds=8))
            out["solver"] = prepared_solver(m, ["tcp"], IKConfig(num_seeds=8))
    t = threading.Thread(target=node_thread)
    t.start()
    t.join(60)
    first = out["first"]
    assert first.backend == "reference" and first.success.all()  # verified all the same
    assert out["solver"].backend == "reference" and out["solver"].building
    assert not host.in_background()  # (the thread's choice only)
    _wait_built()
    with host.waiting_for_builds(False):
        then = solve_pose(m, T, tips=["tcp"], config=IKConfig(num_seeds=8))
    assert then.backend == "host" and then.success.all()
    # each source was given to the builder once, however often it was asked for meanwhile
    assert keys and len(keys) == len(set(keys)), keys
    assert out["again"].backend in ("reference", "host")
    assert np.array_equal(out["again"].q, first.q) or out["again"].backend == "host"


def test_a_waiting_thread_waits_for_a_build_started_in_the_background(cache):
    m = _arm(0.003)
    with host.waiting_for_builds(False):
        s = prepared_solver(m, ["tcp"], IKConfig(num_seeds=4))
    assert s.backend == "reference"
    s2 = prepared_solver(m, ["tcp"], IKConfig(num_seeds=4))  # this thread waits
    assert s2.backend == "host" and not s2.building


def test_a_failed_build_is_not_retried(cache, monkeypatch):
    m = _arm(0.004)
    calls = []

    def broken(cmd):
        calls.append(cmd)
        raise RuntimeError("g++ on a generated source failed:\nsimulated")
    monkeypatch.setattr(build, "run_compiler", broken)
    from ros2_ik.api import IKSolver

    a = IKSolver(m, ["tcp"], IKConfig(num_seeds=4))
    b = IKSolver(m, ["tcp"], IKConfig(num_seeds=4))
    assert a.backend == b.backend == "reference" and "could not be built" in a.reason
    assert len([c for c in calls if "k.cpp" in " ".join(c)]) == 1


def test_long_chains_are_not_compiled():
    n = MAX_PATH_JOINTS + 1
    out = ['<robot name="long"><link name="l0"/>']
    for i in range(1, n + 1):
        out.append(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link='
                   f'"l{i - 1}"/><child link="l{i}"/><origin xyz="0 0 0.01"/><axis xyz="0 1 0"/>'
                   '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    m = Model.from_urdf("".join(out) + "</robot>")
    from ros2_ik.api import IKSolver

    s = IKSolver(m, [f"l{n}"], IKConfig(num_seeds=1))
    assert s.backend == "reference" and str(MAX_PATH_JOINTS) in s.reason
