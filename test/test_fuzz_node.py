"""Property-based fuzz tier for the node's requests (issue 11): malformed ComputeIK, ComputeFK,
ComputeJacobian and MoveIt GetPositionIK / GetPositionFK requests, through the request handlers
the node runs (``ros2_ik.ros.services`` and ``moveit_compat``: the node's code path without
DDS, which the DDS tests cover).

Requests are real rosidl messages (typed, as they arrive over DDS; the MoveIt ones are stand-ins
with moveit_msgs' fields), filled with hostile content: NaN / inf / huge / non-unit poses, lengths
that do not match, unknown tips, frames, joints and groups, duplicated tips, negative or huge
timeouts and tolerances, huge seed counts, empty batches, unknown solvers and modes. Every case
must end in a :class:`RequestError` (or a core :class:`IKError`) with a known code and a message,
or in a response whose arrays are consistent, whose codes are known, whose failures carry a
message, and whose every SUCCESS is re-checked by the independent FK of ``test_fuzz.py``. Anything
else (another exception: the node would answer FAILURE "internal error") fails the test.

CI runs a bounded number of cases; ``make fuzz`` runs ``FUZZ_EXAMPLES`` per test and writes the
counts to ``build/fuzz-node-report.json``.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="hypothesis is not installed")
pytest.importorskip("rclpy", reason="rclpy is not installed; run make setup")
pytest.importorskip("ros2_ik_interfaces", reason="ROS 2 interfaces not built; run make setup")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moveit_standin import GetPositionFK, GetPositionIK, MoveItState
from ros2_ik_interfaces.srv import ComputeFK, ComputeIK, ComputeJacobian
from test_fuzz import assert_reached, independent_pose

from ros2_ik import robots
from ros2_ik.errors import IKError
from ros2_ik.kinematics import fk_frames, pose_to_pq
from ros2_ik.model import parse_srdf
from ros2_ik.ros import codes, moveit_compat, request
from ros2_ik.ros.handlers import compute_fk, compute_ik, compute_jacobian
from ros2_ik.ros.conversions import as_f64, f64_array, pq_to_pose_stamped
from ros2_ik.ros.params import Settings
from ros2_ik.ros.robot import build_robot
from ros_testing import joint_state

LONG = int(os.environ.get("FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=LONG or 60, deadline=None, database=None, derandomize=not LONG,
                suppress_health_check=list(HealthCheck), print_blob=True)
COUNTS: Counter = Counter()
ROBOTS = {}
for _name in robots.names():
    _r = build_robot(robots.urdf_string(_name), source=_name)
    _srdf = robots.srdf_string(_name)
    ROBOTS[_name] = _r.with_srdf(parse_srdf(_srdf), "bundled") if _srdf else _r
# small budgets: a case must stay cheap (the node's own defaults are larger)
SETTINGS = Settings.from_values({"timeout": 0.2, "max_batch": 300, "num_seeds": 4,
                                 "max_iterations": 60})
KNOWN = set(codes.NAMES)


def teardown_module(module):
    if not LONG:
        return
    out = Path(__file__).resolve().parents[1] / "build" / "fuzz-node-report.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(dict(COUNTS), indent=2, sort_keys=True) + "\n")
    print("\nnode fuzz report:", json.dumps(dict(COUNTS), sort_keys=True))


# ------------------------------------------------------------------ strategies
NUMBERS = st.one_of(st.floats(-2, 2), st.sampled_from([math.nan, math.inf, -math.inf, 1e308,
                                                        -1e308, 0.0, 1e-300]))


def names(robot):
    m = robot.model
    return st.sampled_from(list(m.q_names) + list(m.mimic_joint_names) +
                           ["", "nope", "base_joint/trans_x", m.link_names[0]])


def links(robot):
    return st.sampled_from(list(robot.model.link_names) + ["", "nope", "world", "map"])


@st.composite
def poses(draw, robot, tip, n, spoil=True):
    """n poses (n, 7): reachable ones, one of them spoiled when ``spoil``."""
    m = robot.model
    q = m.random_q(draw(st.integers(0, 2**31)), n)
    pq = np.asarray(pose_to_pq(fk_frames(m, q, [tip])[:, 0])).reshape(n, 7)
    how = draw(st.sampled_from(["ok", "nan", "inf", "scaled_quat", "zero_quat", "far",
                                "huge"])) if spoil else "ok"
    if how != "ok" and n:
        i = draw(st.integers(0, n - 1))
        pq[i] = {"nan": lambda v: np.where(np.arange(7) == 2, np.nan, v),
                 "inf": lambda v: np.where(np.arange(7) == 0, np.inf, v),
                 "scaled_quat": lambda v: np.r_[v[:3], 2 * v[3:]],
                 "zero_quat": lambda v: np.r_[v[:3], 0, 0, 0, 0],
                 "far": lambda v: np.r_[v[:3] + 50.0, v[3:]],
                 "huge": lambda v: np.r_[1e308, v[1:]]}[how](pq[i])
    return pq


def seed_msg(draw, robot):
    kind = draw(st.sampled_from(["none", "good", "partial", "junk", "mismatch"]))
    m = robot.model
    if kind == "none":
        return joint_state([], [])
    if kind == "good":
        return joint_state(m.q_names, m.neutral_q())
    if kind == "partial":
        k = draw(st.integers(0, m.nq))
        return joint_state(m.q_names[:k], m.neutral_q()[:k])
    if kind == "mismatch":
        return joint_state(m.q_names, m.neutral_q()[:-1] if m.nq else [1.0])
    ns = draw(st.lists(names(robot), max_size=4))
    return joint_state(ns, [draw(NUMBERS) for _ in ns])


# ------------------------------------------------------------------ checks
def check_ik(robot, tips, pq_goals, resp, tol):
    """A served ComputeIK: consistent arrays, known codes, SUCCESS re-checked by FK."""
    m = robot.model
    status = np.asarray(resp.status)
    N = status.shape[0]
    assert int(resp.error_code.val) in KNOWN
    assert set(status.tolist()) <= KNOWN
    assert len(resp.position_errors) == len(resp.orientation_errors) == N
    J = len(resp.joint_names)
    assert len(resp.compact_solutions) == N * J or len(resp.solutions) == N
    if resp.error_code.val != codes.SUCCESS:
        assert resp.message
    Q = as_f64(resp.compact_solutions).reshape(N, J) if len(resp.compact_solutions) else \
        np.array([as_f64(js.position) for js in resp.solutions]).reshape(N, J)
    idx = [list(resp.joint_names).index(n) for n in m.q_names]
    from ros2_ik.kinematics import pq_to_pose

    goals = np.asarray(pq_to_pose(pq_goals.reshape(-1, 7))).reshape(N, len(tips), 4, 4)
    for p in np.nonzero(status == codes.SUCCESS)[0][:20]:
        q = Q[p, idx]
        assert np.all(np.isfinite(q))
        assert np.all(q >= m.lower - 1e-9) and np.all(q <= m.upper + 1e-9)
        for k, tip in enumerate(tips):
            assert_reached(m, q, tip, goals[p, k], tol[0], tol[1])
        COUNTS["successes_checked"] += 1


def serve(kind, call):
    """Run a handler as the node does: a RequestError (or an IKError from the core, which the
    node answers with ``code_of_exception`` and the error's text) must carry a known code and
    a message; any other exception is a crash (the node would answer "internal error")."""
    try:
        out = call()
    except (codes.RequestError, IKError) as exc:
        code = codes.code_of_exception(exc)
        assert code in KNOWN and str(exc), exc
        COUNTS[f"{kind}_refused_{codes.name_of(code)}"] += 1
        return None
    COUNTS[f"{kind}_served"] += 1
    return out


def _case(data):
    """A new case on a drawn robot: (robot, model, the request context a node would give)."""
    COUNTS["cases"] += 1
    robot = ROBOTS[data.draw(st.sampled_from(sorted(ROBOTS)))]
    return robot, robot.model, request.Context(robot=robot, settings=SETTINGS)


# ------------------------------------------------------------------ the tests
@FUZZ
@given(st.data())
def test_fuzz_compute_ik_requests(data):
    """One field (or, in a fifth of the cases, every field) drawn from hostile values, the
    others valid: the hostile ones must be refused clearly, the rest served and verified."""
    COUNTS["cases"] += 1
    name = data.draw(st.sampled_from(sorted(ROBOTS)))
    robot = ROBOTS[name]
    m = robot.model
    bad_field = data.draw(st.sampled_from(
        ["none", "all", "tips", "N", "form", "frame", "group", "seed", "solver", "tolerances",
         "timeout", "num_seeds", "solve_mode", "axis_weights", "rng_seed", "poses"]))

    def pick(field, good, bad):
        return data.draw(bad) if bad_field in (field, "all") else good

    tips = pick("tips", [], st.sampled_from([[robot.default_tip], list(m.tips[:2]),
                                              [m.tips[0], m.tips[0]], ["nope"]]))
    K = max(1, len(tips))
    true_tips = tips or [robot.default_tip]
    N = pick("N", data.draw(st.sampled_from([1, 1, 3, 8])), st.sampled_from([0, 301]))
    req = ComputeIK.Request()
    req.tip_links = tips
    good_tips = all(t in m.link_names for t in true_tips)
    spoil = bad_field in ("poses", "all")
    pq = (np.concatenate([data.draw(poses(robot, t, N, spoil)) for t in true_tips], axis=1)
          .reshape(N, K, 7) if good_tips and N else np.zeros((N, K, 7)))
    form = pick("form", data.draw(st.sampled_from(["compact", "friendly"])),
                st.sampled_from(["both", "ragged"]))
    frame = pick("frame", data.draw(st.sampled_from(["", m.base])), links(robot))
    if form in ("compact", "both", "ragged"):
        flat = pq.reshape(-1)
        req.compact_goals = f64_array(flat[:-3] if form == "ragged" and flat.size else flat)
        req.compact_frame_id = frame
    if form in ("friendly", "both"):
        req.goals = pq_to_pose_stamped(pq.reshape(-1, 7), frame)
    req.group_name = pick("group", "", st.sampled_from(["nope"] + robot.group_names))
    req.seed = seed_msg(data.draw, robot) if bad_field in ("seed", "all") else joint_state([], [])
    req.solver = pick("solver", data.draw(st.sampled_from(["", "dls"])),
                      st.sampled_from(["ccd", "ccd+dls", "magic"]))
    req.position_tolerance = pick("tolerances", 0.0, st.sampled_from([1e-3, -1.0, math.nan,
                                                                       math.inf, 1e300]))
    req.orientation_tolerance = pick("tolerances", 0.0, st.sampled_from([1e-2, -1.0,
                                                                          math.nan]))
    req.timeout.sec = pick("timeout", 0, st.sampled_from([-1, 1]))
    req.timeout.nanosec = pick("timeout", 0, st.sampled_from([0, 1000, 999_999_999,
                                                              4_000_000_000]))
    req.num_seeds = pick("num_seeds", 0, st.sampled_from([1, 3, 100_001, 2**32 - 1]))
    req.solve_mode = pick("solve_mode", "", st.sampled_from(["speed", "distance",
                                                             "manipulability", "fastest"]))
    req.position_only = data.draw(st.booleans()) if bad_field == "all" else False
    req.axis_weights = f64_array(pick("axis_weights", [], st.sampled_from(
        [[1] * 6, [0] * 6, [1, 1, 1, 0, 0, 0], [math.nan] * 6, [1, 2], [-1] * 6])))
    req.rng_seed = pick("rng_seed", -1, st.sampled_from([0, 7, -5, 2**62]))
    req.compact_response = data.draw(st.booleans())
    ctx = request.Context(robot=robot, settings=SETTINGS)
    resp = ComputeIK.Response()
    out = serve("ik", lambda: compute_ik.handle(ctx, req, resp))
    if out is None:
        return
    used = out.tips
    tol = (req.position_tolerance or SETTINGS.position_tolerance,
           req.orientation_tolerance or SETTINGS.orientation_tolerance)
    if req.position_only:  # only positions are solved: check those
        tol = (tol[0], math.inf)
    if len(req.axis_weights) and req.axis_weights.tolist() != [1.0] * 6:
        return  # freed axes: the node's verification is axis-weighted; not re-checked here
    if frame not in ("", m.base):  # the goals are relative to a link at the seed
        from ros2_ik.kinematics import pose_to_pq as to_pq, pq_to_pose

        seed = ctx.seed_q(robot, req.seed)
        T_frame = independent_pose(m, seed, m.link_index(frame))
        if T_frame is None:
            T_frame = np.asarray(fk_frames(m, seed, [frame]))[0, 0]
        pq = np.asarray(to_pq(T_frame @ np.asarray(pq_to_pose(pq.reshape(-1, 7))))).reshape(
            pq.shape)
    check_ik(robot, used, pq, resp, tol)


@FUZZ
@given(st.data())
def test_fuzz_fk_and_jacobian_requests(data):
    robot, m, ctx = _case(data)
    if data.draw(st.booleans()):
        req = ComputeFK.Request()
        form = data.draw(st.sampled_from(["friendly", "compact", "both", "none", "ragged"]))
        if form in ("friendly", "both"):
            req.states = [seed_msg(data.draw, robot) for _ in range(data.draw(
                st.integers(0, 3)))]
        if form in ("compact", "both", "ragged"):
            ns = data.draw(st.sampled_from([list(m.q_names), [], ["nope"],
                                            list(m.q_names[:2])]))
            M = data.draw(st.sampled_from([0, 1, 2, 400]))
            vals = [data.draw(NUMBERS) for _ in range(min(len(ns) * M, 30))]
            vals += [0.0] * (len(ns) * M - len(vals))
            req.joint_names = ns
            req.compact_positions = f64_array(vals[:-1] if form == "ragged" and vals else vals)
        req.link_names = data.draw(st.lists(links(robot), max_size=3))
        req.frame_id = data.draw(links(robot))
        resp = ComputeFK.Response()
        n = serve("fk", lambda: compute_fk.handle(ctx, req, resp))
        if n is not None:
            arr = (as_f64(resp.compact_poses) if len(resp.compact_poses) else
                   np.array([[p.pose.position.x] for p in resp.poses]))
            assert arr.size and np.all(np.isfinite(arr)) or not arr.size
    else:
        req = ComputeJacobian.Request()
        req.state = seed_msg(data.draw, robot)
        req.link_name = data.draw(links(robot))
        req.reference_link = data.draw(links(robot))
        req.expressed_in = data.draw(st.sampled_from(["", "world", "local", "nope"]))
        req.numerical = data.draw(st.booleans())
        resp = ComputeJacobian.Response()
        if serve("jacobian", lambda: compute_jacobian.handle(ctx, req, resp)) is not None \
                or resp.error_code.val == codes.SUCCESS:
            J = as_f64(resp.jacobian)
            assert J.size == resp.rows * resp.cols and np.all(np.isfinite(J))


@FUZZ
@given(st.data())
def test_fuzz_moveit_requests(data):
    robot, m, ctx = _case(data)
    state = MoveItState(m)
    rs = state.to_msg()
    spoil = data.draw(st.sampled_from(["none", "none", "none", "nan", "unknown", "mismatch",
                                       "mdof_mismatch", "mdof_unknown"]))
    if spoil == "nan" and rs.joint_state.name:
        rs.joint_state.position[0] = math.nan
    elif spoil == "unknown":
        rs.joint_state.name.append("other_robots_joint")
        rs.joint_state.position.append(0.5)
    elif spoil == "mismatch" and rs.joint_state.name:
        rs.joint_state.position = list(rs.joint_state.position)[:-1]
    elif spoil == "mdof_mismatch":
        rs.multi_dof_joint_state.joint_names.append("virtual_joint")
    elif spoil == "mdof_unknown":
        from geometry_msgs.msg import Transform

        rs.multi_dof_joint_state.joint_names.append("virtual_joint")
        rs.multi_dof_joint_state.transforms.append(Transform())
    if data.draw(st.booleans()):
        req = GetPositionIK.Request()
        ik = req.ik_request
        ik.robot_state = rs
        ik.group_name = data.draw(st.sampled_from(["", "nope"] + robot.group_names))
        tip = data.draw(st.sampled_from([robot.default_tip, robot.default_tip, "", "nope"]))
        n = data.draw(st.sampled_from([0, 1, 1, 2]))
        real_tip = tip or robot.default_tip
        pq = (data.draw(poses(robot, real_tip, 1, spoil == "none")) if real_tip in m.link_names
              else np.array([[0, 0, 0, 0, 0, 0, 1.0]]))
        ps = pq_to_pose_stamped(pq, data.draw(st.sampled_from(["", m.base, m.base, "nope"])))[0]
        if n <= 1:
            ik.pose_stamped = ps
            ik.ik_link_name = tip
            ik.pose_stamped_vector = [ps] * n
        else:
            ik.pose_stamped_vector = [ps] * n
            ik.ik_link_names = [tip] * data.draw(st.sampled_from([1, 2]))
        ik.avoid_collisions = data.draw(st.booleans())
        resp = GetPositionIK.Response()
        out = serve("moveit_ik", lambda: moveit_compat.serve_ik(ctx, req, resp,
                                                               compute_ik.handle))
        if out is not None and resp.error_code.val == codes.SUCCESS:
            names_ = list(resp.solution.joint_state.name)
            assert set(names_) <= set(state.var_names), set(names_) - set(state.var_names)
            COUNTS["moveit_success_names_checked"] += 1
    else:
        req = GetPositionFK.Request()
        req.robot_state = rs
        req.fk_link_names = data.draw(st.lists(links(robot), max_size=2))
        req.header.frame_id = data.draw(links(robot))
        resp = GetPositionFK.Response()
        serve("moveit_fk", lambda: moveit_compat.serve_fk(ctx, req, resp, compute_fk.handle))
