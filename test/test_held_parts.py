"""Joints off the goal's path are held at the seed in every answer (ros2_ik.ik.held): the
solver names them (IKSolver.held_joints), and when a part they hold is within the margin of an
obstacle or of a part that does not move relative to it, the failed answers' messages say so,
naming the pair and the held joints, and what to do (once a two-armed robot whose other arm's
seed lay in the table failed every goal with a plain "not converged")."""

from __future__ import annotations

import numpy as np

from ros2_ik import IKConfig, IKSolver, Model, check_states, fk_frames, load_robot
from ros2_ik.ik import Status
from ros2_ik.ik.collision import default_collision_model
from ros2_ik.ik.held import held_collisions, held_joints, held_links, still_pairs
from ros2_ik.world import Obstacle, World

TWO_ARMS = """<?xml version="1.0"?>
<robot name="two_arms">
  <link name="base"><collision><geometry><box size="0.2 0.2 0.1"/></geometry></collision></link>
  <link name="a1"><collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.05 0.05"/>
    </geometry></collision></link>
  <link name="a2"><collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.05 0.05"/>
    </geometry></collision></link>
  <link name="tool_a"/>
  <link name="b1"><collision><origin xyz="0.15 0 0"/><geometry><box size="0.3 0.05 0.05"/>
    </geometry></collision></link>
  <joint name="ja1" type="revolute"><parent link="base"/><child link="a1"/>
    <origin xyz="0 0.3 0.2"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="ja2" type="revolute"><parent link="a1"/><child link="a2"/>
    <origin xyz="0.3 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="ja3" type="fixed"><parent link="a2"/><child link="tool_a"/>
    <origin xyz="0.3 0 0"/></joint>
  <joint name="jb1" type="revolute"><parent link="base"/><child link="b1"/>
    <origin xyz="0 -0.3 0.2"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>
"""


def _goals(m, tip, n, seed, cm=None, world=None, held=None):
    """Goals of known answers (``held`` {coordinate: value} set in them; with ``cm``, 3 cm
    clear)."""
    q = m.random_q(np.random.default_rng(seed), 40 * n)
    for name, v in (held or {}).items():
        q[:, m.q_names.index(name)] = v
    if cm is not None:
        q = q[check_states(m, q, world, collision=cm, margin=0.03).valid]
    return q[:n], np.asarray(fk_frames(m, q[:n], [tip]))[:, 0]


def test_the_held_part_in_an_obstacle_is_named():
    m = Model.from_urdf(TWO_ARMS)
    cm = default_collision_model(m, within=0.01)
    assert held_joints(m, ["tool_a"]) == ("jb1",)
    assert [n for n, h in zip(cm.link_names, held_links(m, cm, ["tool_a"])) if h] == ["b1"]
    crate = World().add(Obstacle.make("crate", "box", (0.2, 0.2, 0.2),
                                      [0.2, -0.3, 0.2, 0, 0, 0, 1]))
    cfg = IKConfig(avoid_collisions=True, collision_margin=0.01, num_seeds=8)
    s = IKSolver(m, ["tool_a"], cfg)
    assert s.held_joints == ("jb1",)
    seed = np.zeros(m.nq)  # b1 along +x: inside the crate
    seed[m.q_names.index("jb1")] = 0.0
    _, T = _goals(m, "tool_a", 10, seed=3, cm=cm, world=crate, held={"jb1": 2.5})
    assert len(T) == 10
    r = s.solve(T, seeds=seed, world=crate)
    assert not r.success.any()
    for msg in r.messages:
        assert "link 'b1' and obstacle 'crate'" in msg and "jb1 = 0" in msg, msg
        assert "give a seed where they are clear" in msg
    # the held arm turned away from the crate: solved, nothing said of held parts
    seed[m.q_names.index("jb1")] = 2.5
    r = s.solve(T, seeds=seed, world=crate)
    assert r.success.mean() >= 0.8, r.messages
    assert not any("holds at the seed" in msg for msg in r.messages)


def test_the_other_arm_folded_into_the_torso_is_named():
    """A two-armed robot with a waist: the other arm moves with the waist, but its pose on the
    torso is held: an arm folded into the torso at the seed fails every goal, and says so."""
    m = load_robot("dual_arm")
    cm = default_collision_model(m, within=0.01)
    tip = "left_tool"
    still = still_pairs(m, cm, [tip])
    assert still.any()
    # a right arm in the torso (found among random states by the check itself)
    q = m.random_q(np.random.default_rng(7), 4000)
    texts = held_collisions(m, cm, q, None, 0.01, [tip])
    bad = [k for k, t in enumerate(texts) if t]
    assert bad, "no state with the right arm within the margin of the torso"
    seed = q[bad[0]]
    cfg = IKConfig(avoid_collisions=True, collision_margin=0.01, num_seeds=8)
    s = IKSolver(m, [tip], cfg, collision=cm)
    assert set(s.held_joints) == {f"right_joint{i}" for i in range(1, 8)}
    _, T = _goals(m, tip, 6, seed=11)
    r = s.solve(T, seeds=seed)
    assert not r.success.any()
    st = np.asarray(r.status)
    assert np.all((st == Status.IN_COLLISION) | (st == Status.NOT_CONVERGED)), st
    for msg in r.messages:
        assert "holds at the seed" in msg and "right_joint1 = " in msg, msg
