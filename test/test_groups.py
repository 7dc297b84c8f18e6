"""Issue 10, point 2 (core): planning groups from an SRDF, and solves restricted to a group.

A solve for a group moves only the group's joints: with ``left_arm`` = torso_link -> left_tool
on dual_arm, the waist and the right arm stay at the seed in every returned solution, for every
solver and path, with many random restarts winning (num_seeds=32, stall_iterations=5). Every
success is re-checked by FK here.
"""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik import load_robot
from ros2_ik.errors import SrdfError
from ros2_ik.backends import host as hostrun
from ros2_ik.kinematics.fk import fk_frames
from ros2_ik.kinematics.se3 import pose_error
from ros2_ik.model import Group, parse_srdf
from ros2_ik.ik import IKConfig
from ros2_ik.api import solve_pose
from ros2_ik.api import ChainSolver
from ros2_ik.api import trajectory_seed

SRDF = """<?xml version="1.0"?>
<robot name="dual_arm">
  <virtual_joint name="world_joint" type="fixed" parent_frame="world" child_link="base_link"/>
  <group name="left_arm">
    <chain base_link="torso_link" tip_link="left_tool"/>
  </group>
  <group name="right_arm">
    <joint name="right_joint1"/><joint name="right_joint2"/><joint name="right_joint3"/>
    <joint name="right_joint4"/><joint name="right_joint5"/><joint name="right_joint6"/>
    <joint name="right_joint7"/>
  </group>
  <group name="torso_left">
    <link name="torso_link"/>
    <group name="left_arm"/>
  </group>
  <group name="arms">
    <group name="left_arm"/>
    <group name="right_arm"/>
  </group>
  <group_state name="home" group="left_arm"><joint name="left_joint1" value="0"/></group_state>
  <end_effector name="left_hand" parent_link="left_tool" group="left_arm"/>
</robot>
"""

K = 32
LEFT = [f"left_joint{i}" for i in range(1, 8)]
RIGHT = [f"right_joint{i}" for i in range(1, 8)]


@pytest.fixture(scope="module")
def dual():
    return load_robot("dual_arm")


@pytest.fixture(scope="module")
def srdf():
    return parse_srdf(SRDF)


def _movable(model, group: Group):
    names = set(group.joints)
    return np.array([n in names for n in model.q_names], dtype=bool)


def test_groups_resolve_like_moveit(dual, srdf):
    assert srdf.robot_name == "dual_arm"
    assert sorted(srdf.group_names) == ["arms", "left_arm", "right_arm", "torso_left"]
    g = srdf.group(dual, "left_arm")
    assert set(g.joints) - {"left_tool_joint"} == set(LEFT)  # the chain's fixed joint too
    assert (g.base, g.tip) == ("torso_link", "left_tool")
    r = srdf.group(dual, "right_arm")
    assert set(r.joints) == set(RIGHT) and r.tip is None
    t = srdf.group(dual, "torso_left")  # a link (the joint into it) and a subgroup
    assert set(t.joints) - {"left_tool_joint"} == set(LEFT) | {"waist_joint"}
    assert t.tip == "left_tool"
    a = srdf.group(dual, "arms")
    assert set(a.joints) - {"left_tool_joint"} == set(LEFT) | set(RIGHT) and a.tip is None
    m = srdf.group(dual, "left_arm").restrict(dual)
    assert set(m.frozen) == set(RIGHT) | {"waist_joint"}
    assert m.q_names == dual.q_names


@pytest.mark.parametrize("text,match", [
    ("<robot><group name='g'><chain base_link='left_tool' tip_link='torso_link'/></group>"
     "</robot>", "not above"),
    ("<robot><group name='g'><joint name='nope'/></group></robot>", "not in the model"),
    ("<robot><group name='g'><group name='h'/></group><group name='h'><group name='g'/>"
     "</group></robot>", "contains itself"),
    ("<robot><group name='g'><group name='x'/></group></robot>", "does not define"),
])
def test_bad_groups_are_refused(dual, text, match):
    with pytest.raises(SrdfError, match=match):
        parse_srdf(text).group(dual, "g")


def test_bad_documents_and_names(dual, srdf):
    with pytest.raises(SrdfError, match="unknown group 'legs'"):
        srdf.group(dual, "legs")
    with pytest.raises(SrdfError, match="entities"):
        parse_srdf('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "x">]><robot>&a;</robot>')
    for bad in ("", "<robot>", "<urdf/>"):
        with pytest.raises(SrdfError):
            parse_srdf(bad)


def _problems(model, P, seed=3):
    """Targets the left arm reaches with each problem's seed waist (targets from FK of
    configurations that share the seed's waist)."""
    rng = np.random.default_rng(seed)
    seeds = model.random_q(rng, P)
    q = model.random_q(rng, P)
    w = list(model.q_names).index("waist_joint")
    q[:, w] = seeds[:, w]
    return np.ascontiguousarray(fk_frames(model, q, ["left_tool"])[:, 0]), seeds


def _check(model, group, T, seeds, q, ok, min_success=0.5):
    off = ~_movable(model, group)
    assert np.array_equal(q[:, off], seeds[:, off]), np.max(np.abs(q[:, off] - seeds[:, off]))
    assert np.mean(ok) >= min_success, np.mean(ok)
    pe, re = pose_error(T[:, None], fk_frames(model, q, ["left_tool"]))
    assert np.all(pe[ok, 0] <= 1e-4) and np.all(re[ok, 0] <= 1e-3)
    assert np.all((q >= model.lower - 1e-12) & (q <= model.upper + 1e-12))


@pytest.mark.parametrize("solver,backend", [("dls", "host"), ("dls", "reference"),
                                            ("ccd", "host"), ("ccd+dls", "host")])
def test_a_group_solve_moves_only_the_groups_joints(dual, srdf, solver, backend):
    g = srdf.group(dual, "left_arm")
    T, seeds = _problems(dual, 24)
    cfg = IKConfig(num_seeds=K, stall_iterations=5)
    r = solve_pose(dual, T, group=g, seeds=seeds, solver=solver, config=cfg,
                   backend=backend)  # tip: the group's
    _check(dual, g, T, seeds, r.q, r.success, min_success=0.3 if solver == "ccd" else 0.5)
    # without the group the waist is free: the same problems move it (the case has teeth)
    if solver == "dls":
        free = solve_pose(dual, T, tips="left_tool", seeds=seeds, solver=solver, config=cfg)
        w = list(dual.q_names).index("waist_joint")
        assert np.any(free.q[:, w] != seeds[:, w])


def test_a_group_with_a_waist_moves_it(dual, srdf):
    g = srdf.group(dual, "torso_left")
    T, seeds = _problems(dual, 12, seed=8)
    r = solve_pose(dual, T, group=g, seeds=seeds, config=IKConfig(num_seeds=K,
                                                                    stall_iterations=5))
    _check(dual, g, T, seeds, r.q, r.success)
    w = list(dual.q_names).index("waist_joint")
    assert np.any(r.q[:, w] != seeds[:, w])


def test_group_without_a_single_tip_needs_tips(dual, srdf):
    from ros2_ik.errors import InvalidInputError

    g = srdf.group(dual, "arms")
    T, seeds = _problems(dual, 2)
    with pytest.raises(InvalidInputError, match="no single chain tip"):
        solve_pose(dual, T, group=g, seeds=seeds)
    r = solve_pose(dual, T, group=g, tips="left_tool", seeds=seeds,
                   config=IKConfig(num_seeds=8))
    _check(dual, g, T, seeds, r.q, r.success)


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_chain_solver_and_trajectory_take_a_group(dual, srdf, mode):
    g = srdf.group(dual, "left_arm")
    T, seeds = _problems(dual, 12, seed=5)
    cfg = IKConfig(num_seeds=K, stall_iterations=5)
    s = ChainSolver(dual, config=cfg, group=g)  # tip: the group's
    assert s.compiled and s.tip == "left_tool"
    rs = [s.solve(T[p], seed=seeds[p]) for p in range(len(T))]
    _check(dual, g, T, seeds, np.concatenate([r.q for r in rs]),
           np.concatenate([r.success for r in rs]))
    assert np.any(np.concatenate([r.seed_index for r in rs]) > 0)  # restarts won
    # trajectory between two keyframes the left arm reaches with the seed's waist
    q = dual.random_q(np.random.default_rng(2), 2)
    w = list(dual.q_names).index("waist_joint")
    q[:, w] = seeds[0, w]
    keys = fk_frames(dual, q, ["left_tool"])[:, 0]
    tr = trajectory_seed(dual, keys, [0, 5], mode=mode, seed=seeds[0], group=g,
                         config=IKConfig(num_seeds=K, stall_iterations=5,
                                         solve_mode="distance"))
    _check(dual, g, tr.targets, np.tile(seeds[0], (6, 1)), tr.q, tr.success)


@pytest.mark.skipif(hostrun.available() is None, reason="no g++ to run kernels on the host")
def test_gpu_solver_on_the_groups_model(dual, srdf, monkeypatch):
    import cupy_standin
    from ros2_ik.backends.cuda import GpuSolver

    cp = cupy_standin.install(monkeypatch)
    g = srdf.group(dual, "left_arm")
    T, seeds = _problems(dual, 24, seed=6)
    r = GpuSolver(g.restrict(dual), ["left_tool"], IKConfig(num_seeds=K, stall_iterations=5),
                  dtype="float64", xp=cp).solve(T, seeds=seeds)
    _check(dual, g, T, seeds, r.q, r.success)
