"""The ROS layer's pieces without DDS: conversions (compact form), handlers called in-process,
parameters and the YAML, codes, MoveIt translation with stand-in objects, markers, diagnostics."""

from __future__ import annotations

import array
import math
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from ros2_ik import load_robot, robots
from ros2_ik.kinematics import fk_frames, pose_error, pose_to_pq
from ros2_ik.model import MAX_VALUE
from ros2_ik.ros import codes
from ros2_ik.ros.codes import RequestError
from ros2_ik.ros.conversions import (QUAT_NORM_TOL, as_f64, check_poses, f64_array, i32_array,
                                     u32_array)
from ros2_ik.ros.params import PARAMS, SPECS, Settings, ik_config, validate
from ros2_ik.ros.robot import build_robot, default_tip_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def panda():
    return build_robot(robots.urdf_string("panda"), source="test")


def ctx_for(robot, **settings):
    from ros2_ik.ros.request import Context

    return Context(robot=robot, settings=Settings.from_values(settings))


# ---------------------------------------------------------------------- rclpy-free modules
def test_request_logic_imports_without_rclpy():
    code = textwrap.dedent("""
        import sys
        sys.modules['rclpy'] = None
        from ros2_ik.ros import codes, conversions, params, robot, request, moveit_compat
        from ros2_ik.ros.handlers import compute_fk, compute_ik, compute_jacobian
        from ros2_ik.ros.handlers import trajectory_seed
        bad = [k for k in sys.modules if k.startswith('rclpy') and sys.modules[k]]
        assert not bad, bad
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---------------------------------------------------------------------- compact conversions
def test_compact_round_trip_is_exact():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1000, 2, 7))
    field = f64_array(a)
    assert isinstance(field, array.array) and field.typecode == "d" and len(field) == a.size
    np.testing.assert_array_equal(as_f64(field).reshape(a.shape), a)
    assert list(i32_array([1, -31, -6])) == [1, -31, -6]
    assert list(u32_array([0, 7, 2**32 - 1])) == [0, 7, 2**32 - 1]
    assert as_f64(array.array("d")).shape == (0,)
    np.testing.assert_array_equal(as_f64([1.0, 2.0]), [1.0, 2.0])


def test_compact_goals_through_a_real_message():
    pytest.importorskip("ros2_ik_interfaces", reason="interface package not built")
    from ros2_ik_interfaces.srv import ComputeIK

    rng = np.random.default_rng(1)
    pq = rng.normal(size=(100_000, 7))
    req = ComputeIK.Request()
    req.compact_goals = f64_array(pq)   # accepted by the generated setter as array.array('d')
    back = as_f64(req.compact_goals).reshape(-1, 7)
    np.testing.assert_array_equal(back, pq)
    assert np.shares_memory(back, as_f64(req.compact_goals))  # a view, not a copy


def test_check_poses():
    pq = np.array([[0.1, 0.2, 0.3, 0, 0, 0, 1],
                   [np.nan, 0, 0, 0, 0, 0, 1],
                   [0, 0, 0, 0, 0, 0, 2],
                   [0, 0, 0, 0, 0, 0, 1 + 0.5 * QUAT_NORM_TOL],
                   [0, 0, 0, 0, 0, 0, 0]])
    clean, ok, reason = check_poses(pq)
    assert ok.tolist() == [True, False, False, True, False]
    assert reason.tolist() == [0, 1, 2, 0, 2]
    assert np.allclose(np.linalg.norm(clean[:, 3:], axis=1), 1.0)
    assert np.all(np.isfinite(clean))
    clean, ok, _ = check_poses(pq, position_only=True)
    assert ok.tolist() == [True, False, True, True, True]
    assert np.all(clean[:, 3:] == [0, 0, 0, 1])



def test_an_int_sent_as_a_float_is_named():
    """rclpy (Jazzy and Kilted, ROS_PYTHON_CHECK_FIELDS unset) sends ``w = 1`` (a Python int in
    a float64 field) as the double with the int's bits, 5e-324: the rejection of that quaternion
    says so."""
    from ros2_ik.ros.conversions import describe_bad_pose

    one_as_float = np.frombuffer(np.int64(1).tobytes(), dtype=np.float64)[0]
    assert one_as_float == 5e-324
    pq = np.array([[0.3, 0, 0.4, 0, 0, 0, one_as_float]])
    _, ok, reason = check_poses(pq)
    assert not ok[0]
    text = describe_bad_pose(pq[0], int(reason[0]))
    assert "norm 0" in text and "Python int" in text and "ROS_PYTHON_CHECK_FIELDS" in text
    assert "Python int" not in describe_bad_pose(np.array([0.3, 0, 0.4, 0, 0, 0, 0.5]), 2)


# ---------------------------------------------------------------------- handlers in-process
def test_compute_ik_handler_compact(panda):
    from ros2_ik_interfaces.srv import ComputeIK

    from ros2_ik.ros.handlers.compute_ik import handle as compute_ik

    model = panda.model
    q = model.random_q(np.random.default_rng(2), 300)
    T = np.asarray(fk_frames(model, q, [panda.default_tip]))[:, 0]
    req = ComputeIK.Request()
    req.compact_goals = f64_array(pose_to_pq(T))
    req.compact_response = True
    req.num_seeds = 8
    resp = ComputeIK.Response()
    out = compute_ik(ctx_for(panda), req, resp)
    status = np.asarray(resp.status)
    assert out.problems == 300 and out.solved == int(np.sum(status == codes.SUCCESS))
    assert out.solved >= 240, resp.message
    Q = as_f64(resp.compact_solutions).reshape(300, model.nq)
    ok = status == codes.SUCCESS
    pe, re = pose_error(T[ok], np.asarray(fk_frames(model, Q[ok], [panda.default_tip]))[:, 0])
    assert pe.max() <= 1e-4 * 1.0001 and re.max() <= 1e-3 * 1.0001


@pytest.mark.parametrize("field, value, needle", [
    ("position_tolerance", 1e300, "at most 1"),
    ("position_tolerance", 1.5, "at most 1"),
    ("orientation_tolerance", 4.0, "at most 3.14159"),
    ("orientation_tolerance", -1e-3, "orientation_tolerance"),
    ("timeout.nanosec", 4_000_000_000, "not a valid Duration"),
    ("timeout.nanosec", 1_000_000_000, "not a valid Duration"),
])
def test_request_options_out_of_range_are_rejected(panda, field, value, needle):
    """A tolerance above the parameter's range (every pose would count as reached) or a
    timeout that is no valid Duration is INVALID_REQUEST naming it; the bounds themselves
    are accepted."""
    from ros2_ik_interfaces.srv import ComputeIK

    from ros2_ik.ros.handlers.compute_ik import handle as compute_ik

    def request(value):
        req = ComputeIK.Request()
        req.compact_goals = f64_array(pose_to_pq(np.asarray(fk_frames(
            panda.model, panda.model.neutral_q()[None], [panda.default_tip]))[:, 0]))
        if field == "timeout.nanosec":
            req.timeout.nanosec = value
        else:
            setattr(req, field, value)
        return req

    with pytest.raises(RequestError) as e:
        compute_ik(ctx_for(panda), request(value), ComputeIK.Response())
    assert e.value.code == codes.INVALID_REQUEST and needle in e.value.message, e.value.message
    assert field.split(".")[0] in e.value.message
    edge = {"position_tolerance": 1.0, "orientation_tolerance": math.pi,
            "timeout.nanosec": 999_999_999}[field]
    resp = ComputeIK.Response()
    compute_ik(ctx_for(panda), request(edge), resp)
    assert resp.error_code.val == codes.SUCCESS, resp.message

def _ik_answer(ctx, req, one_goal_path: bool, monkeypatch):
    """compute_ik's response fields (or its RequestError) with the one-goal path on or off."""
    from ros2_ik_interfaces.srv import ComputeIK

    from ros2_ik.ros.handlers import compute_ik

    monkeypatch.setattr(compute_ik, "ONE_GOAL_PATH", one_goal_path)
    resp = ComputeIK.Response()
    try:
        out = compute_ik.handle(ctx, req, resp)
    except RequestError as exc:
        return ("error", exc.code, exc.message)
    sols = [(list(js.name), np.asarray(js.position).tolist()) for js in resp.solutions]
    return (list(resp.joint_names), np.asarray(resp.compact_solutions).tobytes(), sols,
            list(resp.status), np.asarray(resp.position_errors).tobytes(),
            np.asarray(resp.orientation_errors).tobytes(), list(resp.iterations),
            int(resp.error_code.val), resp.message, out.problems, out.solved,
            np.asarray(out.targets).tobytes(), np.asarray(out.q).tobytes(), out.code)


def test_one_goal_path_answers_as_the_batch_path(panda, monkeypatch):
    """A one-goal, one-tip request takes its own short path: every response field, the
    outcome and every rejection equal the batch code's, over reachable, unreachable, invalid
    (NaN, bad quaternion), position-only, other-frame, unknown-frame, seeded, friendly-form and
    timed-out requests."""
    from geometry_msgs.msg import PoseStamped

    from ros2_ik.ros.conversions import pq_to_pose_stamped
    from ros2_ik_interfaces.srv import ComputeIK

    # (both calls on the compiled kernels: conftest's _compiled_kernels_loaded)
    model = panda.model
    tip = panda.default_tip
    rng = np.random.default_rng(11)
    q = model.random_q(rng, 6)
    pqs = list(pose_to_pq(np.asarray(fk_frames(model, q, [tip]))[:, 0]))
    pqs += [np.array([3.0, 0, 0, 0, 0, 0, 1]),                      # out of reach
            np.array([np.nan, 0, 0.4, 0, 0, 0, 1]),                  # not finite
            np.array([0.4, 0, 0.4, 0, 0, 0, 0.5])]                   # not a unit quaternion
    link = model.link_names[3]
    variants = [dict(), dict(position_only=True), dict(compact_frame_id=panda.base),
                dict(compact_frame_id=link), dict(compact_frame_id="no_such_frame"),
                dict(friendly=True), dict(seed=True), dict(num_seeds=2, timeout=1e-6),
                dict(compact_response=True)]
    cases = 0
    for i, pq in enumerate(pqs):
        for v in variants:
            req = ComputeIK.Request()
            if v.get("friendly"):
                req.goals = [pq_to_pose_stamped(pq[None], panda.base)[0]]
                assert isinstance(req.goals[0], PoseStamped)
            else:
                req.compact_goals = f64_array(pq)
                req.compact_frame_id = v.get("compact_frame_id", "")
            req.position_only = v.get("position_only", False)
            req.compact_response = v.get("compact_response", False)
            req.num_seeds = v.get("num_seeds", 4)
            if "timeout" in v:
                req.timeout.nanosec = 1
            if v.get("seed"):
                req.seed.name = list(model.q_names[:3])
                req.seed.position = f64_array(q[i % len(q), :3])
            ctx = ctx_for(panda)
            one = _ik_answer(ctx, req, True, monkeypatch)
            batch = _ik_answer(ctx, req, False, monkeypatch)
            assert one == batch, (i, v)
            cases += 1
    assert cases == len(pqs) * len(variants)


def test_mimic_joints_are_filled_from_their_leader():
    from ros2_ik_interfaces.srv import ComputeIK

    from ros2_ik.ros.handlers.compute_ik import handle as compute_ik

    misc = build_robot(robots.urdf_string("misc"), source="test", tip_link="tool")
    assert misc.out_names[-1] == "finger_right_joint"
    model = misc.model
    q = model.random_q(np.random.default_rng(3), 4)
    full = misc.full_q(q)
    lead = model.q_names.index("finger_left_joint")
    l = model.joint_index("finger_right_joint")
    np.testing.assert_allclose(full[:, -1], q[:, lead] * model.mimic_multiplier[l]
                               + model.mimic_offset[l])
    T = np.asarray(fk_frames(model, q, ["tool"]))[:, 0]
    req = ComputeIK.Request()
    req.compact_goals = f64_array(pose_to_pq(T))
    req.num_seeds = 8
    resp = ComputeIK.Response()
    compute_ik(ctx_for(misc), req, resp)   # friendly response: JointState per problem
    assert len(resp.solutions) == 4
    ok = np.asarray(resp.status) == codes.SUCCESS
    assert ok.any(), resp.message
    Q = np.array([list(js.position)[:model.nq] for js in resp.solutions])
    pe, re = pose_error(T[ok], np.asarray(fk_frames(model, Q[ok], ["tool"]))[:, 0])
    assert pe.max() <= 1e-4 * 1.0001 and re.max() <= 1e-3 * 1.0001
    for js in resp.solutions:
        assert list(js.name) == list(misc.out_names)
        pos = np.asarray(js.position)
        assert pos[-1] == pytest.approx(pos[lead] * model.mimic_multiplier[l]
                                        + model.mimic_offset[l])


def test_joint_state_entries_apply_as_apply_joint_values():
    """The node reads each kept joint_states message once (``joint_state_entries``) and
    applies the entries to later seeds; that must be what ``apply_joint_values`` (not strict,
    no clip) does with the message, for any names and values a topic may carry."""
    misc = build_robot(robots.urdf_string("misc"), source="test", tip_link="tool")
    rng = np.random.default_rng(11)
    pool = list(misc.model.q_names) + ["finger_right_joint", "other_a", "other_b", ""]
    values = [0.3, -1.2, np.nan, np.inf, -np.inf, 1.5 * MAX_VALUE, -MAX_VALUE, 0.0, 5.0]
    for case in range(300):
        names = list(rng.choice(pool, size=rng.integers(0, 12)))  # duplicates too
        pos = list(rng.choice(values, size=max(0, len(names) + int(rng.integers(-2, 3)))))
        base = misc.model.random_q(rng, 1)[0]
        want = misc.apply_joint_values(base, names, pos, what="joint_states", strict=False,
                                       clip=False)
        idx, vals = misc.joint_state_entries(names, array.array("d", pos))
        got = base.copy()
        got[idx] = vals
        np.testing.assert_array_equal(got, want, err_msg=f"case {case}: {names} {pos}")


def test_joint_state_fields_read_what_rclpy_reads():
    """The node reads joint_states from their bytes (names and positions only); over messages
    of every shape (frame ids and names of every length for the alignment, empty and unicode
    names, more or fewer positions than names, velocities and efforts) it must read what
    rclpy's deserialization gives, and give up (None) on bytes it does not know."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    from ros2_ik.ros.conversions import joint_state_fields

    rng = np.random.default_rng(5)
    alphabet = list("abcdefghij_/0123456789") + ["\u00e9", "\u4e2d"]
    for case in range(400):
        m = JointState()
        m.header.stamp.sec = int(rng.integers(0, 2**31 - 1))
        m.header.frame_id = "".join(rng.choice(alphabet, size=rng.integers(0, 10)))
        m.name = ["".join(rng.choice(alphabet, size=rng.integers(0, 14)))
                  for _ in range(rng.integers(0, 12))]
        m.position = list(rng.normal(size=rng.integers(0, 14)) * 10.0 ** rng.integers(-3, 7))
        m.velocity = list(rng.normal(size=rng.integers(0, 3)))
        m.effort = list(rng.normal(size=rng.integers(0, 3)))
        raw = serialize_message(m)
        got = joint_state_fields(raw)
        assert got is not None, case
        names, pos = got
        assert names == tuple(m.name), case
        np.testing.assert_array_equal(pos, np.asarray(m.position, dtype=np.float64))
        assert pos.flags.writeable and pos.dtype == np.float64
        for cut in range(0, len(raw), 3):  # ends early: None, or (past the positions) right
            short = joint_state_fields(raw[:cut])
            assert short is None or (short[0] == names and np.array_equal(short[1], pos)), case
    raw = serialize_message(m)
    assert joint_state_fields(b"\x00\x00" + raw[2:]) is None  # big-endian: rclpy's to read
    assert joint_state_fields(b"") is None and joint_state_fields(b"\x00\x01\x00\x00") is None


def test_no_model_and_max_batch(panda):
    from ros2_ik_interfaces.srv import ComputeIK

    from ros2_ik.ros.handlers.compute_ik import handle as compute_ik

    req = ComputeIK.Request()
    req.compact_goals = f64_array(np.tile([0.3, 0, 0.5, 0, 0, 0, 1.0], (11, 1)))
    with pytest.raises(RequestError) as e:
        compute_ik(ctx_for(None), req, ComputeIK.Response())
    assert e.value.code == codes.NO_ROBOT_MODEL and "robot_description" in e.value.message
    with pytest.raises(RequestError) as e:
        compute_ik(ctx_for(panda, max_batch=10), req, ComputeIK.Response())
    assert e.value.code == codes.INVALID_REQUEST and "max_batch = 10" in e.value.message


def test_seed_matching(panda):
    q = panda.apply_joint_values(panda.model.neutral_q(), ["panda_joint2", "not_mine"],
                                 [0.5, 3.0], what="joint_states", strict=False, clip=True)
    assert q[1] == 0.5
    with pytest.raises(RequestError) as e:
        panda.apply_joint_values(panda.model.neutral_q(), ["panda_joint2"], [0.5, 1.0],
                                 what="seed", strict=True, clip=True)
    assert e.value.code == codes.INVALID_ROBOT_STATE and "1 names but 2 positions" in str(e.value)
    with pytest.raises(RequestError) as e:
        panda.apply_joint_values(panda.model.neutral_q(), ["panda_joint2"], [math.nan],
                                 what="seed", strict=True, clip=True)
    assert "non-finite" in e.value.message


def test_default_tips():
    assert default_tip_of(load_robot("panda")) == "panda_hand_tcp"
    assert default_tip_of(load_robot("ur")) == "tool0"
    assert default_tip_of(load_robot("dual_arm")) == "left_tool"
    logs = []
    r = build_robot(robots.urdf_string("ur"), source="t", base_link="panda_link0",
                    tip_link="panda_link8", log=logs.append)
    assert r.base == "base_link" and r.default_tip == "tool0"
    assert any("base_link 'panda_link0'" in m for m in logs)
    assert any("tip_link 'panda_link8'" in m for m in logs)
    # the substitution stays visible while this model is in use: a WARN in the diagnostics
    from diagnostic_msgs.msg import DiagnosticStatus

    from ros2_ik.ros.diagnostics import Stats, diagnostic_status

    assert r.notes == tuple(logs) and len(logs) == 2
    st = diagnostic_status("ik", Stats(), r, "numpy")
    values = {kv.key: kv.value for kv in st.values}
    assert st.level == DiagnosticStatus.WARN and "tip_link" in st.message, st.message
    assert "tip_link 'panda_link8'" in values["model_warning"] and "tool0" in values[
        "model_warning"]
    ok = build_robot(robots.urdf_string("ur"), source="t", tip_link="tool0")
    assert ok.notes == () and diagnostic_status("ik", Stats(), ok, "numpy").level == \
        DiagnosticStatus.OK
    # strict (a parameter set at runtime): an error naming the value and the valid links
    from ros2_ik.errors import UnknownLinkError

    for kw, name in (({"base_link": "panda_link0"}, "base_link"),
                     ({"tip_link": "panda_link8"}, "tip_link")):
        with pytest.raises(UnknownLinkError) as exc:
            build_robot(robots.urdf_string("ur"), source="t", strict=True, **kw)
        msg = str(exc.value)
        assert name in msg and repr(kw[name]) in msg and "tool0" in msg and "base_link" in msg


# ---------------------------------------------------------------------- codes
def test_codes_equal_the_interface_and_the_core():
    from ros2_ik_interfaces.msg import IKErrorCode

    from ros2_ik.ik import Status

    for name in ("SUCCESS", "FAILURE", "TIMED_OUT", "PREEMPTED", "INVALID_GOAL",
                 "INVALID_ROBOT_STATE", "INVALID_LINK_NAME", "FRAME_TRANSFORM_FAILURE",
                 "NO_IK_SOLUTION", "NO_ROBOT_MODEL", "INVALID_REQUEST"):
        assert getattr(codes, name) == getattr(IKErrorCode, name), name
    assert Status.CONVERGED == codes.SUCCESS and Status.NOT_CONVERGED == codes.NO_IK_SOLUTION
    assert Status.TIMED_OUT == codes.TIMED_OUT and Status.INVALID_INPUT == codes.INVALID_GOAL
    from ros2_ik.errors import InvalidInputError, UnknownJointError, UnknownLinkError

    assert codes.code_of_exception(UnknownJointError("j", ["a"])) == codes.INVALID_ROBOT_STATE
    assert codes.code_of_exception(UnknownLinkError("l", ["a"])) == codes.INVALID_LINK_NAME
    assert codes.code_of_exception(InvalidInputError("x")) == codes.INVALID_REQUEST
    assert codes.code_of_exception(ZeroDivisionError()) == codes.FAILURE


# ---------------------------------------------------------------------- parameters
def _yaml_params():
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed")
    data = yaml.safe_load((ROOT / "config" / "ros2_ik.yaml").read_text())
    flat = {}

    def walk(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[prefix + k] = v

    walk(data["/**"]["ros__parameters"])
    return flat


def test_yaml_equals_declared_defaults():
    flat = _yaml_params()
    assert set(flat) == set(SPECS)
    for name, v in flat.items():
        default = SPECS[name].default
        assert type(v) is type(default) and v == default, (name, v, default)


def test_the_node_reference_is_generated_from_the_declarations():
    """One source of truth: the documentation's node reference (docs/conf.py writes it at every
    build) holds the declared parameters, the surface and the codes, and every interface."""
    import importlib.util

    from ros2_ik.ros.params import markdown_table
    from ros2_ik.ros.surface import markdown_codes, markdown_surface

    spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    text = conf._node_reference()
    for part in (markdown_table(), markdown_surface(), markdown_codes()):
        assert part in text
    for f in (ROOT / "ros2_ik_interfaces").glob("*/*.*"):
        if f.suffix in (".msg", ".srv", ".action"):
            assert f"### {f.stem} (" in text
    # the committed copy (linked from the README) is the generated one
    assert (ROOT / "docs" / "reference" / "node.md").read_text() == text, (
        "docs/reference/node.md is stale: run `make docs` and commit it")


def test_bundled_robot_lists_name_every_bundled_robot():
    """The bundled-robot list: the launch files' argument descriptions and the parameter's are
    built from ``ros2_ik.robots``; the copies that cannot be (the parameter YAML's comment, the
    documentation's robots page) say the same."""
    import re

    from ros2_ik import robots

    names = robots.names()
    yaml_line = next(l for l in (ROOT / "config" / "ros2_ik.yaml").read_text().splitlines()
                     if l.strip().startswith("robot:"))
    for launch in ("ros2_ik.launch.py", "demo.launch.py"):
        line = next(l for l in (ROOT / "launch" / launch).read_text().splitlines()
                    if "description=" in l and "bundled robot" in l)
        assert "robots.names()" in line and not re.search(r"\bpanda\b", line), (launch, line)
    readme_rows = re.findall(r"^\| `(\w+)` \| .* \|$", (ROOT / "docs" / "robots.md").read_text(),
                             re.M)
    for text in (yaml_line, SPECS["robot"].description):
        assert sorted(re.findall(r"\b(" + "|".join(names) + r")\b", text)) == names, text
    assert sorted(n for n in readme_rows if n in names) == names


def test_parameter_validation_reasons():
    assert validate("position_tolerance", 1e-4) is None
    assert "outside" in validate("position_tolerance", -1.0)
    assert "outside" in validate("num_seeds", 0)
    assert "type int" in validate("num_seeds", "8")
    assert "one of" in validate("backend", "tpu")
    assert "dls" in validate("solver", "magic")
    assert "panda" in validate("robot", "r2d2")
    assert "sequential" in validate("trajectory.mode", "zigzag")
    assert validate("use_sim_time", True) is None  # not ours
    for spec in PARAMS:
        assert validate(spec.name, spec.default) is None, spec.name
        assert spec.description
        if isinstance(spec.default, (int, float)) and not isinstance(spec.default, bool):
            assert spec.range is not None, spec.name


def test_descriptors_carry_type_range_and_description():
    pytest.importorskip("rcl_interfaces", reason="ROS 2 messages not installed")
    from rcl_interfaces.msg import ParameterType

    from ros2_ik.ros.params import descriptor

    d = descriptor(SPECS["timeout"])
    assert d.type == ParameterType.PARAMETER_DOUBLE and "[s]" in d.description
    assert d.floating_point_range[0].from_value == 0.0
    d = descriptor(SPECS["num_seeds"])
    assert d.integer_range[0].from_value == 1
    assert "auto" in descriptor(SPECS["backend"]).additional_constraints


def test_ik_config_mapping():
    s = Settings.from_values({"timeout": 0.0, "num_seeds": 3})
    cfg = ik_config(s)
    assert cfg.timeout is None and cfg.num_seeds == 3
    assert cfg.position_tolerance == SPECS["position_tolerance"].default
    cfg = ik_config(s, timeout=0.25, num_seeds=5, position_tolerance=1e-3, rng_seed=4,
                    solve_mode="distance")
    assert (cfg.timeout, cfg.num_seeds, cfg.position_tolerance, cfg.rng_seed) == (
        0.25, 5, 1e-3, 4)
    assert cfg.solve_mode.value == "distance"


# ---------------------------------------------------------------------- MoveIt translation
def _pose_stamped(pq, frame=""):
    p = types.SimpleNamespace(x=pq[0], y=pq[1], z=pq[2])
    o = types.SimpleNamespace(x=pq[3], y=pq[4], z=pq[5], w=pq[6])
    return types.SimpleNamespace(header=types.SimpleNamespace(frame_id=frame),
                                 pose=types.SimpleNamespace(position=p, orientation=o))


def _moveit_ik_request(poses, links, seed_names=(), seed_pos=(), avoid=False):
    vec = poses if len(poses) > 1 else []
    return types.SimpleNamespace(
        group_name="", robot_state=types.SimpleNamespace(joint_state=types.SimpleNamespace(
            name=list(seed_names), position=array.array("d", seed_pos))),
        constraints=types.SimpleNamespace(joint_constraints=[], position_constraints=[],
                                          orientation_constraints=[],
                                          visibility_constraints=[]),
        avoid_collisions=avoid, ik_link_name=links[0] if len(poses) == 1 else "",
        pose_stamped=poses[0] if len(poses) == 1 else _pose_stamped([0] * 6 + [1]),
        ik_link_names=list(links) if len(poses) > 1 else [], pose_stamped_vector=vec,
        timeout=types.SimpleNamespace(sec=1, nanosec=500_000_000))


def _moveit_ik_response():
    return types.SimpleNamespace(
        solution=types.SimpleNamespace(joint_state=types.SimpleNamespace(name=[], position=[])),
        error_code=types.SimpleNamespace(val=0))


def test_moveit_ik_translation(panda):
    from ros2_ik.ros import moveit_compat as mc
    from ros2_ik.ros.handlers.compute_ik import handle as compute_ik

    model = panda.model
    seed = model.neutral_q()
    T = np.asarray(fk_frames(model, seed + 0.2, ["panda_link8"]))[:, 0]
    req, constrained = mc.ik_request_as_compute_ik(
        _moveit_ik_request([_pose_stamped(pose_to_pq(T)[0], "panda_link0")], ["panda_link8"],
                           model.q_names, seed, avoid=True), panda)
    # avoid_collisions is honoured (collisions on), not an unsupported option
    assert not constrained and req.collisions == 1
    assert req.tip_links == ["panda_link8"] and req.timeout.nanosec == 5e8
    ik_resp = mc.compute_ik_response()
    compute_ik(ctx_for(panda), req, ik_resp)
    resp = _moveit_ik_response()
    mc.fill_ik_response(resp, ik_resp, panda)
    assert resp.error_code.val == codes.SUCCESS
    q = np.asarray(resp.solution.joint_state.position)
    assert list(resp.solution.joint_state.name) == list(model.q_names)
    pe, re = pose_error(T, np.asarray(fk_frames(model, q, ["panda_link8"]))[:, 0])
    assert pe[0] <= 1e-4 and re[0] <= 1e-3
    # several poses but fewer link names: INVALID_LINK_NAME (as move_group)
    with pytest.raises(RequestError) as e:
        mc.ik_request_as_compute_ik(_moveit_ik_request(
            [_pose_stamped(pose_to_pq(T)[0])] * 2, ["panda_link8"]), panda)
    assert e.value.code == codes.INVALID_LINK_NAME
    # codes MoveIt does not have become FAILURE
    assert mc.moveit_code(codes.NO_ROBOT_MODEL) == codes.FAILURE
    assert mc.moveit_code(codes.INVALID_REQUEST) == codes.FAILURE
    assert mc.moveit_code(codes.NO_IK_SOLUTION) == codes.NO_IK_SOLUTION


def test_moveit_fk_translation(panda):
    from ros2_ik.ros import moveit_compat as mc
    from ros2_ik.ros.handlers.compute_fk import handle as compute_fk

    model = panda.model
    q = model.neutral_q() + 0.1
    js = types.SimpleNamespace(name=list(model.q_names), position=array.array("d", q))
    mreq = types.SimpleNamespace(header=types.SimpleNamespace(frame_id=""),
                                 fk_link_names=["panda_link8"],
                                 robot_state=types.SimpleNamespace(joint_state=js))
    pytest.importorskip("geometry_msgs", reason="ROS 2 messages not installed")
    req = mc.fk_request_as_compute_fk(mreq, panda)
    fk_resp = mc.compute_fk_response()
    compute_fk(ctx_for(panda), req, fk_resp)
    resp = types.SimpleNamespace(pose_stamped=[], fk_link_names=[],
                                 error_code=types.SimpleNamespace(val=0))
    mc.fill_fk_response(resp, fk_resp, req.link_names)
    assert resp.error_code.val == codes.SUCCESS and resp.fk_link_names == ["panda_link8"]
    p = resp.pose_stamped[0].pose.position
    want = np.asarray(fk_frames(model, q, ["panda_link8"]))[0, 0, :3, 3]
    np.testing.assert_allclose([p.x, p.y, p.z], want, atol=1e-12)
    mreq.fk_link_names = []
    with pytest.raises(RequestError) as e:
        mc.fk_request_as_compute_fk(mreq, panda)
    assert e.value.code == codes.INVALID_LINK_NAME



def test_fk_states_outside_the_limits_are_computed_as_given(panda):
    """An FK state is any configuration (as MoveIt's GetPositionFK): values outside the limits
    are neither clamped nor rejected (README, errors table); only beyond +-1e6 or non-finite is
    INVALID_ROBOT_STATE naming the joint. (A seed outside its limits is rejected: other test.)"""
    pytest.importorskip("geometry_msgs", reason="ROS 2 messages not installed")
    from ros2_ik_interfaces.srv import ComputeFK

    from ros2_ik.ros.handlers.compute_fk import handle as compute_fk

    model = panda.model
    q = model.upper + np.linspace(0.5, 3.0, model.nq)  # every joint past its upper limit
    for values, ok in ((q, True), (np.where(np.arange(model.nq) == 2, 2e6, q), False),
                       (np.where(np.arange(model.nq) == 4, np.nan, q), False)):
        req = ComputeFK.Request()
        req.joint_names = list(model.q_names)
        req.compact_positions = array.array("d", values)
        req.link_names = ["panda_link8"]
        if not ok:
            with pytest.raises(RequestError) as e:
                compute_fk(ctx_for(panda), req, ComputeFK.Response())
            assert e.value.code == codes.INVALID_ROBOT_STATE, e.value.message
            continue
        resp = ComputeFK.Response()
        compute_fk(ctx_for(panda), req, resp)
        pq = np.asarray(resp.compact_poses).reshape(1, 7)
        want = pose_to_pq(np.asarray(fk_frames(model, q[None], ["panda_link8"]))[:, 0])
        np.testing.assert_allclose(pq[:, :3], want[:, :3], atol=1e-12)
        assert abs(abs(float(np.dot(pq[0, 3:], want[0, 3:]))) - 1.0) < 1e-12

# ---------------------------------------------------------------------- markers, diagnostics
def test_markers_and_diagnostics(panda):
    pytest.importorskip("visualization_msgs", reason="ROS 2 messages not installed")
    from diagnostic_msgs.msg import DiagnosticStatus
    from visualization_msgs.msg import Marker

    from ros2_ik.ros.diagnostics import Stats, diagnostic_status
    from ros2_ik.ros.markers import ik_markers
    from ros2_ik.ros.request import IKOutcome

    model = panda.model
    q = np.stack([model.neutral_q(), model.neutral_q() + 0.3])
    T = np.asarray(fk_frames(model, q, [panda.default_tip]))[:, 0]
    goals = pose_to_pq(T)[:, None]
    out = IKOutcome(robot=panda, tips=[panda.default_tip], targets=goals,
                    q=np.stack([q[0], q[0]]), status=np.array([codes.SUCCESS,
                                                               codes.NO_IK_SOLUTION]),
                    code=codes.NO_IK_SOLUTION)
    arr = ik_markers(out, max_goals=10)
    kinds = [(m.type, m.action) for m in arr.markers]
    assert kinds[0][1] == Marker.DELETEALL
    assert kinds.count((Marker.ARROW, Marker.ADD)) == 2
    assert kinds.count((Marker.LINE_STRIP, Marker.ADD)) == 1  # only the failed one is off
    assert len(ik_markers(out, max_goals=1).markers) == 3

    stats = Stats()
    st = diagnostic_status("ros2_ik", stats, None, "numpy")
    assert st.level == DiagnosticStatus.WARN and "no robot model" in st.message
    stats.record("compute_ik", codes.NO_IK_SOLUTION, 10, 7, message="3 failed")
    st = diagnostic_status("ros2_ik", stats, panda, "numpy")
    values = {kv.key: kv.value for kv in st.values}
    assert values["success_rate"] == "0.7000" and values["model"] == "panda"
    assert "NO_IK_SOLUTION" in values["last_error"] and st.level == DiagnosticStatus.WARN
    stats.set_model_error("robot_description rejected: bad XML")
    assert diagnostic_status("ros2_ik", stats, panda, "numpy").level == DiagnosticStatus.ERROR


# ---------------------------------------------------------------------- start-up errors
@pytest.mark.parametrize("arg, needle", [
    ("num_seeds:=0", "num_seeds out of range"),
    ("backend:=tpu", "'backend' = 'tpu' is not one of"),
    ("timeout:=5", "decimal point"),
    ("robot:=r2d2", "not a bundled robot"),
])
def test_node_refuses_bad_start_up_parameters(arg, needle):
    pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed")
    import os

    from ros_testing import find_node_executable, random_domain_id

    env = dict(os.environ, ROS_DOMAIN_ID=str(random_domain_id()))
    out = subprocess.run([find_node_executable(), "--ros-args", "-p", arg], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 1
    assert "cannot start" in out.stderr and needle in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def test_the_node_has_exactly_the_documented_surface():
    """Every topic, service and action of ros2_ik.ros.surface.SURFACE (the docs' node reference
    is generated from it) exists on the node, and the node has no other (rclpy's own parameter
    and type-description services aside; MoveIt's only with moveit_msgs)."""
    rclpy = pytest.importorskip("rclpy")
    from ros2_ik.ros.node import KinematicsNode
    from ros2_ik.ros.surface import SURFACE
    from ros_testing import random_domain_id

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=random_domain_id())
    node = None
    try:
        node = KinematicsNode(context=ctx)
        ns = node.get_fully_qualified_name()

        def full(name):
            return name.replace("~", ns) if name.startswith("~") else "/" + name.lstrip("/")
        from ros2_ik.ros.moveit_compat import moveit_available

        moveit = {"~/solve_ik", "~/solve_fk", "collision_object", "attached_collision_object",
                  "planning_scene", "monitored_planning_scene"}
        want = {(full(n), k) for n, k, _, _ in SURFACE  # ("(param)": only where it is set)
                if (n not in moveit or moveit_available()) and not n.startswith("(")}
        have = {(node.resolve_topic_name(s.topic_name), "sub") for s in node.subscriptions}
        have |= {(node.resolve_topic_name(p.topic_name), "pub") for p in node.publishers}
        have |= {(node.resolve_service_name(s.srv_name), "service") for s in node.services}
        from rclpy.action import get_action_server_names_and_types_by_node

        have |= {(n, "action") for n, _ in get_action_server_names_and_types_by_node(
            node, node.get_name(), node.get_namespace())}
        ignore = {"/rosout", "/parameter_events", f"{ns}/get_type_description"} | {
            f"{ns}/{p}" for p in ("describe_parameters", "get_parameters", "get_parameter_types",
                                  "list_parameters", "set_parameters",
                                  "set_parameters_atomically")}
        have = {(n, k) for n, k in have if n not in ignore}
        assert want == have, (sorted(want - have), sorted(have - want))
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=ctx)


def test_the_tier_runs_on_the_distribution_it_was_set_up_for():
    """make test runs the whole suite on Jazzy (the default) and the ROS tier on Kilted
    (ROS_DISTRO exported by make): the rclpy in use is that distribution's, and the node says
    which at start-up."""
    pytest.importorskip("rclpy")
    import os

    from ros2_ik.ros.compat import SUPPORTED, distribution, rclpy_distribution

    got = rclpy_distribution()
    assert got in SUPPORTED
    want = os.environ.get("ROS_DISTRO")
    if want:
        assert got == want
    assert distribution() == got


@pytest.mark.parametrize("one_goal, inline", [(True, True), (True, False), (False, False)])
def test_a_timeout_counts_from_the_requests_arrival(panda, one_goal, inline):
    """A request that waited in the node's queues longer than its timeout: TIMED_OUT, nothing
    solved, and the answer says how long it waited (the ComputeIK batch path, the one-goal path
    MoveIt's GetPositionIK takes, and check_states); the same request arriving now solves."""
    import time
    from dataclasses import replace

    from ros2_ik_interfaces.srv import CheckStates, ComputeIK

    from ros2_ik.ros.handlers.check_states import handle as check_states
    from ros2_ik.ros.handlers.compute_ik import handle as compute_ik

    model = panda.model
    n = 1 if one_goal else 20
    q = model.random_q(np.random.default_rng(4), n)
    T = np.asarray(fk_frames(model, q, [panda.default_tip]))[:, 0]

    def ask(arrived):
        req = ComputeIK.Request()
        req.compact_goals = f64_array(pose_to_pq(T))
        req.compact_response = True
        req.timeout.nanosec = 50_000_000  # 50 ms
        resp = ComputeIK.Response()
        out = compute_ik(replace(ctx_for(panda), arrived=arrived, inline=inline), req, resp)
        return out, resp

    out, resp = ask(time.perf_counter() - 0.5)
    assert out.code == codes.TIMED_OUT and out.solved == 0, resp.message
    assert "waited 5" in resp.message and "counts from its arrival" in resp.message, resp.message
    out, resp = ask(time.perf_counter())
    assert out.code == codes.SUCCESS, resp.message
    # check_states: none checked
    req = CheckStates.Request()
    req.joint_names = list(model.q_names)
    req.compact_positions = f64_array(model.random_q(np.random.default_rng(5), 1000))
    req.timeout.nanosec = 50_000_000
    resp = CheckStates.Response()
    check_states(replace(ctx_for(panda), arrived=time.perf_counter() - 0.5), req, resp)
    assert resp.error_code.val == codes.TIMED_OUT and not any(resp.checked), resp.message


def test_arrival_reads_the_middlewares_timestamp_and_falls_back_to_the_take():
    import time

    pytest.importorskip("rclpy")
    from ros2_ik.ros.executor import MAX_QUEUE_AGE, arrival

    def header(age):
        return types.SimpleNamespace(received_timestamp=time.time_ns() - int(age * 1e9))

    now = time.perf_counter()
    assert abs((now - arrival(header(0.3))) - 0.3) < 0.25
    for bad in (types.SimpleNamespace(received_timestamp=0), header(-5.0),
                header(MAX_QUEUE_AGE + 5), object()):
        t = time.perf_counter()
        assert t <= arrival(bad) <= time.perf_counter()
