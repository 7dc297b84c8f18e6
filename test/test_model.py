"""The kinematic model: joint types, selection, locking, and every bad-URDF error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros2_ik import Model, load_robot, robots
from ros2_ik.errors import (InvalidInputError, ShapeError, UnknownJointError, UnknownLinkError,
                            UrdfError)
from ros2_ik.model import MAX_URDF_BYTES, JointType


def _robot(body: str, name: str = "r") -> str:
    return f'<?xml version="1.0"?>\n<robot name="{name}">{body}</robot>'


def _joint(name, parent, child, jtype="revolute", extra="", limit=True):
    lim = '<limit lower="-1" upper="1" effort="1" velocity="1"/>' if limit else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/>'
            f'<child link="{child}"/>{extra}{lim if jtype in ("revolute", "prismatic") else ""}'
            "</joint>")


GOOD = _robot('<link name="a"/><link name="b"/>' + _joint("j", "a", "b"))


def test_good_minimal_robot_loads():
    m = Model.from_urdf(GOOD)
    assert m.link_names == ("a", "b") and m.nq == 1 and m.q_names == ("j",)


def test_every_joint_type_sizes(models):
    m = models["misc"]
    sizes = {}
    for l in range(1, m.num_links):
        t = JointType(m.joint_type[l])
        nq = 0 if m.q_start[l] < 0 else sum(1 for i in m.q_joint if i == l)
        nv = sum(1 for i in m.v_joint if i == l)
        sizes.setdefault(t, set()).add((nq, nv))
    assert sizes[JointType.FLOATING] == {(7, 6)}
    assert sizes[JointType.PLANAR] == {(3, 3)}
    assert sizes[JointType.FIXED] == {(0, 0)}
    assert (1, 1) in sizes[JointType.REVOLUTE]
    assert sizes[JointType.CONTINUOUS] == {(1, 1)}
    assert (1, 1) in sizes[JointType.PRISMATIC]
    # the mimic joint has no coordinates of its own
    assert "finger_right_joint" in m.mimic_joint_names
    assert "finger_right_joint" not in m.q_names
    assert m.nq == m.nv + 1  # one floating joint: 7 vs 6


def test_limits_and_continuous(models):
    m = models["panda"]
    assert m.lower[3] == pytest.approx(-3.0718) and m.upper[3] == pytest.approx(-0.0698)
    misc = models["misc"]
    i = misc.q_names.index("turret_joint")
    assert misc.q_continuous[i] and math.isinf(misc.lower[i]) and math.isinf(misc.upper[i])


def test_mimic_multiplier_and_offset(models):
    from ros2_ik.kinematics import fk

    m = models["misc"]
    q = m.neutral_q()
    q[m.q_names.index("finger_left_joint")] = 0.03
    T = fk(m, q)[0]
    l = m.link_index("finger_right")
    T_parent = T[m.link_parent[l]] @ m.origin[l]
    d = (np.linalg.inv(T_parent) @ T[l])[:3, 3] @ m.axis[l]
    assert d == pytest.approx(-1.0 * 0.03 + 0.01)


def test_chain_and_subtree_selection(models):
    full = models["dual_arm"]
    left = full.chain("base_link", "left_tool")
    assert left.tips == ("left_tool",)
    assert all(not n.startswith("right") for n in left.q_names)
    assert left.nq == 8
    both = full.subtree("base_link", ["left_tool", "right_tool"])
    assert both.nq == 15 and set(both.tips) == {"left_tool", "right_tool"}
    # a chain that starts mid-tree is expressed in its own base frame
    arm = full.chain("left_link1", "left_tool")
    assert arm.base == "left_link1" and arm.nq == 6


def test_selection_errors_name_the_problem(models):
    m = models["dual_arm"]
    with pytest.raises(UnknownLinkError) as e:
        m.chain("base_link", "left_toool")
    assert "left_toool" in str(e.value) and "left_tool" in str(e.value)
    with pytest.raises(InvalidInputError, match="not below base link"):
        m.chain("left_tool", "right_tool")


def test_lock_drops_jacobian_columns(models):
    from ros2_ik.kinematics import jacobian

    m = models["panda"].lock(["panda_joint3"])
    assert m.nq == 7 and m.nv_active == 6
    J = jacobian(m, m.neutral_q(), "panda_hand_tcp")
    assert J.shape == (1, 6, 6)
    full = jacobian(models["panda"], m.neutral_q(), "panda_hand_tcp")
    np.testing.assert_allclose(J, np.delete(full, 2, axis=2))
    with pytest.raises(UnknownJointError, match="panda_joint1"):
        models["panda"].lock(["nope"])
    with pytest.raises(InvalidInputError, match="lock 'finger_left_joint' instead"):
        models["misc"].lock(["finger_right_joint"])


def test_unknown_link_lists_valid_names(models):
    with pytest.raises(UnknownLinkError) as e:
        models["panda"].link_index("panda_link99")
    msg = str(e.value)
    assert "panda_link99" in msg and "panda_link0" in msg and "panda_hand_tcp" in msg


def test_bundled_robot_unknown_name():
    with pytest.raises(ValueError, match="panda"):
        load_robot("pandaa")


def test_check_q_errors(models):
    m = models["panda"]
    with pytest.raises(ShapeError, match=r"\(B, 7\).*got \(2, 6\)"):
        m.check_q(np.zeros((2, 6)))
    with pytest.raises(InvalidInputError, match="empty batch"):
        m.check_q(np.zeros((0, 7)))
    bad = np.zeros((3, 7))
    bad[2, 4] = np.nan
    with pytest.raises(InvalidInputError, match="row 2.*panda_joint5"):
        m.check_q(bad)


def test_non_kinematic_elements_never_stop_loading():
    body = ('<material name="blue"><color rgba="0 0 1 1"/></material>'
            '<link name="a"><visual><geometry><mesh filename="package://x/y.dae"/></geometry>'
            '<material name="blue"/></visual><collision><geometry><box size="1 1 1"/></geometry>'
            '</collision><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" '
            'iyz="0" izz="1"/></inertial></link><link name="b"/>'
            + _joint("j", "a", "b", extra='<dynamics damping="0.1"/>')
            + '<transmission name="t"><type>x</type><joint name="j"/></transmission>'
            '<gazebo reference="a"><material>Gazebo/Blue</material></gazebo>'
            '<ros2_control name="c" type="system"/>')
    m = Model.from_urdf(_robot(body))
    assert m.nq == 1


BAD_URDFS = {
    "not_xml": ("this is not <xml", "not well-formed XML"),
    "empty": ("   ", "empty"),
    "wrong_root": ("<model><link name='a'/></model>", "expected <robot>"),
    "no_links": (_robot(""), "no <link>"),
    "two_roots": (_robot('<link name="a"/><link name="b"/>'), "2 root links"),
    "cycle": (_robot('<link name="r"/><link name="a"/><link name="b"/>'
                     + _joint("r1", "r", "a") + _joint("j1", "a", "b") + _joint("j2", "b", "a")),
              "child of two joints"),
    "pure_cycle": (_robot('<link name="a"/><link name="b"/>'
                          + _joint("j1", "a", "b") + _joint("j2", "b", "a")),
                   "no root link"),
    "missing_link": (_robot('<link name="a"/>' + _joint("j", "a", "ghost")),
                     "child link 'ghost' does not exist"),
    "unknown_type": (_robot('<link name="a"/><link name="b"/>'
                            + _joint("j", "a", "b", jtype="spherical")),
                     "joint type"),
    "nan_origin": (_robot('<link name="a"/><link name="b"/>'
                          + _joint("j", "a", "b", extra='<origin xyz="0 nan 0"/>')),
                   "joint 'j'.*origin xyz.*NaN"),
    "text_origin": (_robot('<link name="a"/><link name="b"/>'
                           + _joint("j", "a", "b", extra='<origin xyz="0 zero 0"/>')),
                    "joint 'j'.*origin xyz.*numbers"),
    "inf_rpy": (_robot('<link name="a"/><link name="b"/>'
                       + _joint("j", "a", "b", extra='<origin rpy="0 0 inf"/>')),
                "joint 'j'.*origin rpy"),
    "lower_gt_upper": (_robot('<link name="a"/><link name="b"/>'
                              '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
                              '<limit lower="1" upper="-1" effort="1" velocity="1"/></joint>'),
                       "joint 'j'.*lower=1.0.*greater than upper"),
    "nonnumeric_limit": (_robot('<link name="a"/><link name="b"/>'
                                '<joint name="j" type="revolute"><parent link="a"/>'
                                '<child link="b"/><limit lower="low" upper="1" effort="1" '
                                'velocity="1"/></joint>'),
                         "joint 'j'.*limit lower='low'.*not a number"),
    "mimic_loop": (_robot('<link name="a"/><link name="b"/><link name="c"/>'
                          + _joint("j1", "a", "b", extra='<mimic joint="j2"/>')
                          + _joint("j2", "b", "c", extra='<mimic joint="j1"/>')),
                   "mimic joints form a loop: j1 -> j2 -> j1"),
    "zero_axis": (_robot('<link name="a"/><link name="b"/>'
                         + _joint("j", "a", "b", extra='<axis xyz="0 0 0"/>')),
                  "zero vector"),
    "duplicate_link": (_robot('<link name="a"/><link name="a"/>'), "defined twice"),
    "billion_laughs": ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                       '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
                       '<robot name="r"><link name="&lol2;"/></robot>', "entities"),
    "external_entity": ('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM '
                        '"file:///etc/passwd">]><robot name="r"><link name="&x;"/></robot>',
                        "entities"),
    "too_large": (_robot('<link name="a"/>' + "<!--" + "x" * (MAX_URDF_BYTES + 10) + "-->"),
                  "too large"),
}


@pytest.mark.parametrize("case", sorted(BAD_URDFS))
def test_bad_urdf_raises_clear_error(case):
    text, pattern = BAD_URDFS[case]
    with pytest.raises(UrdfError, match=pattern) as e:
        Model.from_urdf(text)
    assert len(str(e.value)) > 20  # a sentence, not a bare token


def test_planar_basis_is_orthonormal(models):
    m = models["misc"]
    l = m.joint_index("planar_joint")
    e1, e2, n = m.planar_e1[l], m.planar_e2[l], m.axis[l]
    np.testing.assert_allclose(np.cross(e1, e2), n, atol=1e-12)


def test_random_q_within_limits(models, rng):
    for m in models.values():
        q = m.random_q(rng, 500)
        assert np.all(q >= m.lower - 1e-12) and np.all(q <= m.upper + 1e-12)


def test_default_tips_from_catalog():
    for name, info in robots.ROBOTS.items():
        m = load_robot(name)
        for tip in info["tips"]:
            m.link_index(tip)
