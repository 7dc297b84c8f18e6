"""The model source without a node (no rclpy objects): models and groups are prepared in the
background and swapped in together on the executor thread, never a model with another's
groups, never a superseded model after a newer one."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from ros2_ik.ros.diagnostics import Stats
from ros2_ik.ros.model_source import ModelSource
from ros2_ik.ros.params import Settings


class _Log:
    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        return lambda text: self.lines.append((level, text))


class _Executor:
    """Posted work waits here until the test runs it (as the executor thread would)."""

    def __init__(self):
        self.queue = []

    def post(self, fn, *args):
        self.queue.append((fn, args))

    def run(self, src: ModelSource):
        src.wait(120)  # the background preparations (bounded)
        while self.queue:
            fn, args = self.queue.pop(0)
            fn(*args)


def _source(settings):
    ex = _Executor()
    swaps = []  # (robot, None) per model swapped in
    compiled = []  # (robot, its default tip's solver) once its kernels are built
    src = ModelSource(_Log(), Stats(), ex.post, lambda: settings[0], lambda: np,
                      lambda robot, dt: swaps.append((robot, None)),
                      lambda robot, solver, dt: compiled.append((robot, solver)))
    src.compiled = compiled
    return src, ex, swaps


def test_a_model_change_brings_its_groups_with_it_and_never_early():
    """dual_arm (groups from its SRDF) -> misc (no SRDF): until the swap the old model keeps
    its own groups; after it, the new model has none. (Defect: misc kept dual_arm's groups,
    and for a moment the new groups were applied to the old model.)"""
    settings = [Settings.from_values({"robot": "dual_arm"})]
    src, ex, swaps = _source(settings)
    src.load_from_settings(settings[0], startup=True)
    ex.run(src)
    dual = src.robot
    assert dual.name == "dual_arm" and "left_arm" in dual.group_names
    new = settings[0].replace(robot="misc")
    assert src.prepare_change({"robot": "misc"}, new) is None
    settings[0] = new
    src.apply_change()
    assert src.robot is dual and "left_arm" in src.robot.group_names  # not yet, and unchanged
    ex.run(src)
    assert src.robot.name == "misc" and src.robot.group_names == [] and src.robot.srdf is None
    assert [r.name for r, _ in swaps] == ["dual_arm", "misc"]
    assert src.compiled[-1][0].name == "misc"
    assert src.compiled[-1][1].backend in ("host", "reference")


def test_a_newer_model_supersedes_one_being_prepared():
    settings = [Settings.from_values({"robot": "panda"})]
    src, ex, swaps = _source(settings)
    src.load_from_settings(settings[0], startup=True)
    from ros2_ik import robots

    src.on_robot_description(robots.urdf_string("ur"), settings[0])
    src.on_robot_description(robots.urdf_string("dual_arm"), settings[0])
    ex.run(src)
    assert src.robot.name == "dual_arm"
    assert [r.name for r, _ in swaps] == ["dual_arm"]  # panda and ur were superseded


def test_closing_ends_the_preparations_and_swaps_nothing_more():
    settings = [Settings.from_values({"robot": "ur"})]
    src, ex, swaps = _source(settings)
    src.load_from_settings(settings[0], startup=True)
    src.close(60)
    ex.run(src)
    assert swaps == [] and src.robot is None and not src.preparing
