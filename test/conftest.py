"""Shared fixtures: the bundled robots, seeded RNGs, and a 2-link planar arm."""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik import load_robot, robots

ROBOT_NAMES = tuple(robots.ROBOTS)

#: IKConfig options under which an unreachable goal's solve never ends by itself before
#: max_iterations: the damping grows by only a factor 1 + 1e-6 per rejected step (float32 still
#: sees it) up to 1e300, so a rejected step is never "the same step again" (a row rejected with
#: its lambda unchanged stops: see ros2_ik.ik.lm). Timeout and cancel tests use it for a
#: solve that only they end.
ENDLESS = dict(lambda_up=1.0 + 1e-6, lambda_max=1e300)

PLANAR_2LINK = """<?xml version="1.0"?>
<robot name="planar2">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="{a1} 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="l2"/><child link="tip"/>
    <origin xyz="{a2} 0 0"/></joint>
</robot>
"""


@pytest.fixture(scope="session")
def models():
    return {name: load_robot(name) for name in ROBOT_NAMES}


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def cupy_or_skip():
    from ros2_ik.backend import cupy_available

    if not cupy_available():
        pytest.skip("CuPy with a usable CUDA GPU is not available on this machine")
    import cupy

    return cupy


#: the backend of a "compiled" / "reference" test parameter
BACKEND = {True: "host", False: "reference"}
