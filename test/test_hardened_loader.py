"""Hardened loader (issue 11): hostile or odd URDFs get a clear UrdfError, real-robot quirks load
with a warning, and chained mimics load in linear time."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

from ros2_ik import Model
from ros2_ik.errors import UrdfError
from ros2_ik.kinematics import fk
from ros2_ik.model import MAX_VALUE
from ros2_ik.model.urdf import UrdfWarning


def _robot(body: str) -> str:
    return f'<?xml version="1.0"?>\n<robot name="r">{body}</robot>'


def _joint(name, parent, child, jtype="revolute", extra="", lower="-1", upper="1"):
    lim = (f'<limit lower="{lower}" upper="{upper}" effort="1" velocity="1"/>'
           if jtype in ("revolute", "prismatic") else "")
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/>'
            f'<child link="{child}"/>{extra}{lim}</joint>')


AB = '<link name="a"/><link name="b"/>'


def test_deeply_nested_origin_is_a_urdf_error_or_loads():
    # 1,000 levels of <origin> inside a joint (7 KB): never a RecursionError
    nest = "<origin>" * 1000 + "</origin>" * 1000
    text = _robot(AB + _joint("j", "a", "b", extra=nest))
    m = Model.from_urdf(text)  # the outer <origin> has no attributes: identity
    assert m.nq == 1
    # deep nesting anywhere else (a link's visual) loads too: it is not kinematics
    deep = "<visual>" + "<x>" * 5000 + "</x>" * 5000 + "</visual>"
    text = _robot('<link name="a">' + deep + '</link><link name="b"/>' + _joint("j", "a", "b"))
    assert Model.from_urdf(text).nq == 1


def test_lone_surrogate_is_a_urdf_error():
    text = _robot('<link name="a\ud800"/>')
    with pytest.raises(UrdfError, match="not valid Unicode.*character"):
        Model.from_urdf(text)


OVERFLOW = {
    "limits_equal_huge": (_joint("j", "a", "b", lower="1e308", upper="1e308"), "limit lower"),
    "limits_inf": (_joint("j", "a", "b", lower="inf", upper="inf"), "limit lower"),
    "limits_minus_inf": (_joint("j", "a", "b", lower="-inf", upper="-inf"), "limit upper"),
    "origin_huge": (_joint("j", "a", "b", extra='<origin xyz="1e308 0 0"/>'), "origin xyz"),
    "rpy_huge": (_joint("j", "a", "b", extra='<origin rpy="0 1e300 0"/>'), "origin rpy"),
    "mimic_multiplier": (None, "mimic multiplier"),
    "mimic_chain_overflow": (None, "composes to multiplier"),
}


def _overflow_text(case):
    body, _ = OVERFLOW[case]
    if case == "mimic_multiplier":
        return _robot(AB + '<link name="c"/>' + _joint("j1", "a", "b") + _joint(
            "j2", "b", "c", extra='<mimic joint="j1" multiplier="1e308" offset="1e308"/>'))
    if case == "mimic_chain_overflow":  # 1e5 ** 3 = 1e15 > bound, each factor within it
        links = "".join(f'<link name="l{i}"/>' for i in range(5))
        joints = _joint("j0", "l0", "l1") + "".join(
            _joint(f"j{i}", f"l{i}", f"l{i + 1}", extra=f'<mimic joint="j{i - 1}" '
                   'multiplier="1e5"/>') for i in range(1, 4))
        return _robot(links + joints)
    return _robot(AB + body)


@pytest.mark.parametrize("case", sorted(OVERFLOW))
def test_overflowing_values_are_refused(case):
    with pytest.raises(UrdfError, match=OVERFLOW[case][1]) as e:
        Model.from_urdf(_overflow_text(case))
    msg = str(e.value)
    assert "joint 'j" in msg and ("1e+06" in msg or "out of range" in msg or "beyond" in msg)


@pytest.mark.parametrize("lower,upper,lo,hi", [("-1e308", "1e308", -np.inf, np.inf),
                                               ("-1e16", "1e16", -np.inf, np.inf),
                                               ("-inf", "inf", -np.inf, np.inf),
                                               ("0", "2e6", 0.0, np.inf),
                                               ("5", "1e7", 5.0, np.inf),
                                               ("-1e9", "-5", -np.inf, -5.0)])
def test_huge_limits_mean_no_limit_with_a_warning(lower, upper, lo, hi):
    # Gazebo-made URDFs (example-robot-data's iris) write +-1e16 for "no limit"
    text = _robot(AB + _joint("j", "a", "b", jtype="prismatic", lower=lower, upper=upper))
    with pytest.warns(UrdfWarning, match="joint 'j'.*read as no limit"):
        m = Model.from_urdf(text)
    assert (m.lower[0], m.upper[0]) == (lo, hi)
    q = m.random_q(0, 50)
    assert np.all(np.isfinite(q)) and np.all(q >= lo) and np.all(q <= hi)
    n = m.neutral_q()
    assert np.all(np.isfinite(n)) and lo <= n[0] <= hi
    assert np.all(np.isfinite(fk(m, q)))


def test_negative_zero_limit_is_zero():
    # found by the fuzz tier: lower=0, upper=-0 made random_q raise numpy's ValueError
    m = Model.from_urdf(_robot(AB + _joint("j", "a", "b", jtype="prismatic", lower="0.0",
                                           upper="-0")))
    assert not np.signbit(m.upper[0]) and np.all(m.random_q(0, 5) == 0.0)


def test_values_at_the_bound_load_and_stay_finite():
    text = _robot('<link name="a"/><link name="b"/><link name="c"/>'
                  + _joint("j1", "a", "b", jtype="prismatic", lower=str(-MAX_VALUE),
                           upper=str(MAX_VALUE), extra=f'<origin xyz="{MAX_VALUE} 0 0"/>')
                  + _joint("j2", "b", "c", extra='<origin xyz="1e6 1e6 1e6"/>'
                           '<mimic joint="j1" multiplier="1e6" offset="1e6"/>'))
    m = Model.from_urdf(text)
    q = m.random_q(0, 100)
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(m.neutral_q()))
    assert np.all(np.isfinite(fk(m, q)))


def test_huge_axis_normalises_to_a_unit_axis():
    text = _robot(AB + _joint("j", "a", "b", extra='<axis xyz="1e200 0 0"/>'))
    m = Model.from_urdf(text)
    np.testing.assert_allclose(m.axis[1], [1.0, 0.0, 0.0])
    T = fk(m, np.array([[0.5]]))[0, 1]
    np.testing.assert_allclose(T[:3, :3] @ T[:3, :3].T, np.eye(3), atol=1e-12)
    odd = _robot(AB + _joint("j", "a", "b", extra='<axis xyz="0 3e150 4e150"/>'))
    np.testing.assert_allclose(Model.from_urdf(odd).axis[1], [0.0, 0.6, 0.8])
    tiny = _robot(AB + _joint("j", "a", "b", extra='<axis xyz="0 3e-300 4e-300"/>'))
    with pytest.raises(UrdfError, match="joint 'j'.*zero vector"):  # below 1e-9: no direction
        Model.from_urdf(tiny)


def test_fixed_joint_with_mimic_loads_with_a_warning():
    text = _robot(AB + '<link name="c"/>' + _joint("j1", "a", "b")
                  + _joint("grip", "b", "c", jtype="fixed", extra='<mimic joint="j1"/>'))
    with pytest.warns(UrdfWarning, match="joint 'grip'.*fixed.*ignored"):
        m = Model.from_urdf(text)
    assert m.q_names == ("j1",) and m.mimic_joint_names == ()
    assert any("grip" in w for w in m.desc.warnings)


def test_mimic_of_missing_joint_is_an_ordinary_joint_with_a_warning():
    text = _robot(AB + _joint("j1", "a", "b", extra='<mimic joint="zz"/>'))
    with pytest.warns(UrdfWarning, match="joint 'j1'.*'zz'.*does not exist.*ordinary"):
        m = Model.from_urdf(text)
    assert m.q_names == ("j1",) and m.mimic_joint_names == ()


def test_mimic_of_fixed_leader_is_an_ordinary_joint_with_a_warning():
    text = _robot(AB + '<link name="c"/>' + _joint("f", "a", "b", jtype="fixed")
                  + _joint("j1", "b", "c", extra='<mimic joint="f"/>'))
    with pytest.warns(UrdfWarning, match="joint 'j1'.*fixed joint"):
        m = Model.from_urdf(text)
    assert m.q_names == ("j1",)


def _mimic_chain(n: int) -> str:
    links = "".join(f'<link name="l{i}"/>' for i in range(n + 1))
    joints = _joint("j0", "l0", "l1") + "".join(
        _joint(f"j{i}", f"l{i}", f"l{i + 1}",
               extra=f'<mimic joint="j{i - 1}" multiplier="1.0" offset="0.001"/>')
        for i in range(1, n))
    return _robot(links + joints)


def test_chained_mimics_compose_and_load_in_linear_time():
    m = Model.from_urdf(_mimic_chain(50))
    assert m.nq == 1 and len(m.mimic_joint_names) == 49
    l = m.joint_index("j49")
    assert m.mimic_q[l] == 0 and m.mimic_offset[l] == pytest.approx(0.049)
    # 1,500 chained mimics (the node's 25 s case): quadratic or worse would take many seconds;
    # the bound is generous for a shared machine, the point is the growth
    text = _mimic_chain(1500)
    t0 = time.perf_counter()
    m = Model.from_urdf(text)
    dt = time.perf_counter() - t0
    assert m.nq == 1 and len(m.mimic_joint_names) == 1499
    assert dt < 5.0, f"1,500 chained mimics took {dt:.2f} s"


def test_no_warning_for_a_clean_robot():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Model.from_urdf(_robot(AB + _joint("j", "a", "b")))


def test_a_robot_of_twenty_thousand_links_loads_and_answers():
    """Defect: a URDF of 20,000 links (4 MB, under the 8 MB limit) raised MemoryError while
    building a dense (joints x velocities) table. Every table is linear in the model's size
    now: it loads, FK and Jacobians answer, and a solve on a long chain is the reference's
    (the compiled source is generated for at most MAX_COLUMNS moving joints and
    MAX_COORDINATES coordinates)."""
    from ros2_ik import api
    from ros2_ik.api.solver import MAX_COLUMNS
    from ros2_ik.ik import IKConfig
    from ros2_ik.model import MAX_URDF_BYTES, Model

    n = 20_000
    parts = ['<robot name="long">', '<link name="l0"/>']
    for i in range(1, n):
        parts.append(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent '
                     f'link="l{i - 1}"/><child link="l{i}"/><origin xyz="0 0 0.001"/><axis '
                     'xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    urdf = "\n".join(parts + ["</robot>"])
    assert len(urdf) < MAX_URDF_BYTES
    m = Model.from_urdf(urdf)
    assert m.nq == n - 1 and m.tables.screws.col.shape == (n - 1,)
    T = api.fk_frames(m, m.neutral_q(), ["l10", f"l{n - 1}"])
    np.testing.assert_allclose(T[0, 1, :3, 3], [0, 0, 0.001 * (n - 1)], atol=1e-9)
    J = api.jacobian(m, m.neutral_q(), "l10")
    assert J.shape == (1, 6, n - 1) and np.all(J[0, :, 10:] == 0)
    s = api.IKSolver(m, ["l60"], IKConfig())
    assert s.backend == "reference" and str(MAX_COLUMNS) in s.reason
    s = api.IKSolver(m, ["l8"], IKConfig())
    assert s.backend == "reference" and "coordinates" in s.reason
    q = m.neutral_q()
    q[:8] = 0.3
    from ros2_ik.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="memory budget"):  # up front, saying so
        s.solve(api.fk_frames(m, q, ["l8"])[:, 0], seeds=m.neutral_q())
