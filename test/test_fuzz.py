"""Property-based fuzz tier (issue 11): mutated URDFs and careless or hostile calls of the core API.

Every case must end in one of two ways: a clear :class:`IKError` subclass, or an answer that is
checked here: a loaded model has finite arrays, unit axes and limits within bounds, and its FK
is finite with orthonormal rotations; every IK success is re-checked by an FK written in this
file (independent of ``ros2_ik.kinematics``); every call with a timeout returns within
``timeout + SLACK``. Anything else (another exception, a wrong answer, an overrun) fails.

CI runs a bounded number of cases per test (fast, derandomized). The long run::

    make fuzz                                  # 5,000 cases per test, about 15,000 in all
    FUZZ_EXAMPLES=20000 make fuzz              # more

sets ``FUZZ_EXAMPLES`` and writes the counts (cases, IKErrors, successes checked, largest
timeout overrun, peak memory) to ``build/fuzz-report.json``.
"""

from __future__ import annotations

import json
import math
import os
import resource
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed "
                                 "(scripts/requirements-python.txt)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ros2_ik import Model, load_robot, robots  # noqa: E402
from ros2_ik.errors import IKError  # noqa: E402
from ros2_ik.api import fk, fk_frames, jacobian  # noqa: E402
from ros2_ik.kinematics import maximal_to_generalized  # noqa: E402
from ros2_ik.model import MAX_VALUE, JointType  # noqa: E402
from ros2_ik.ik import IKConfig, Status  # noqa: E402
from ros2_ik.api import ChainSolver, solve_pose, trajectory_seed  # noqa: E402

LONG = int(os.environ.get("FUZZ_EXAMPLES", "0"))
EXAMPLES = LONG or 60
SLACK = 0.5  # [s] allowed timeout overrun on a shared machine; the measured one is reported
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not LONG,
                suppress_health_check=list(HealthCheck), print_blob=True)

COUNTS: Counter = Counter()
OVERRUN = {"max_s": 0.0, "call": ""}


def teardown_module(module):
    if not LONG:
        return
    report = dict(COUNTS)
    report["max_timeout_overrun_s"] = round(OVERRUN["max_s"], 4)
    report["max_overrun_call"] = OVERRUN["call"]
    report["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out = Path(__file__).resolve().parents[1] / "build" / "fuzz-report.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print("\nfuzz report:", json.dumps(report, sort_keys=True))


# ------------------------------------------------------------------ an independent FK
def _rot(axis, a):
    x, y, z = axis
    c, s, C = math.cos(a), math.sin(a), 1 - math.cos(a)
    return np.array([[c + x * x * C, x * y * C - z * s, x * z * C + y * s],
                     [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
                     [z * x * C - y * s, z * y * C + x * s, c + z * z * C]])


def independent_pose(m: Model, q, link: int):
    """Pose of ``link`` by walking the tree link by link (1-DOF, fixed and mimic joints only;
    None for planar/floating on the path)."""
    path = []
    l = link
    while l > 0:
        path.append(l)
        l = int(m.link_parent[l])
    T = np.eye(4)
    for l in reversed(path):
        t = int(m.joint_type[l])
        M = np.eye(4)
        if t in (JointType.REVOLUTE, JointType.CONTINUOUS, JointType.PRISMATIC):
            if m.mimic_q[l] >= 0:
                v = m.mimic_multiplier[l] * q[m.mimic_q[l]] + m.mimic_offset[l]
            else:
                v = q[m.q_start[l]]
            if t == JointType.PRISMATIC:
                M[:3, 3] = m.axis[l] * v
            else:
                M[:3, :3] = _rot(m.axis[l], v)
        elif t != JointType.FIXED:
            return None
        T = T @ m.origin[l] @ M
    return T


def check_ik_result(m: Model, tips, T, r, cfg: IKConfig):
    """Every success re-checked by the independent FK; statuses consistent."""
    assert r.q.shape[0] == T.shape[0] and np.all(np.isfinite(r.q))
    assert np.all(r.success == (r.status == Status.CONVERGED))
    assert np.all(r.q >= m.lower - 1e-9) and np.all(r.q <= m.upper + 1e-9)
    for p in np.nonzero(r.success)[0][:50]:
        for k, tip in enumerate(tips):
            assert_reached(m, r.q[p], tip, T[p, k] if T.ndim == 4 else T[p],
                           cfg.position_tolerance, cfg.orientation_tolerance)
        COUNTS["ik_successes_checked"] += 1


def assert_reached(m: Model, q, tip: str, T_goal, pos_tol: float, rot_tol: float) -> None:
    """The pose of ``tip`` at ``q`` (the independent FK; ``fk_frames`` past planar/floating
    joints) is within the tolerances of ``T_goal`` (4, 4)."""
    got = independent_pose(m, q, m.link_index(tip))
    if got is None:
        got = fk_frames(m, q, [tip])[0, 0]
    pe = np.linalg.norm(got[:3, 3] - T_goal[:3, 3])
    assert pe <= pos_tol * (1 + 1e-6) + 1e-12, (tip, pe)
    cosang = (np.trace(T_goal[:3, :3].T @ got[:3, :3]) - 1) / 2
    ang = math.acos(min(1.0, max(-1.0, cosang)))
    assert ang <= rot_tol * 1.01 + 1e-7, (tip, ang)


def timed(call, timeout, what):
    t0 = time.perf_counter()
    try:
        return call()
    finally:
        dt = time.perf_counter() - t0
        if timeout is not None:
            over = dt - timeout
            if over > OVERRUN["max_s"]:
                OVERRUN["max_s"], OVERRUN["call"] = over, what
            assert over <= SLACK, f"{what}: timeout {timeout} s, returned after {dt:.3f} s"
        else:
            assert dt <= 30.0, f"{what} took {dt:.1f} s"


# ------------------------------------------------------------------ the loader
BASE_URDFS = {n: robots.urdf_string(n) for n in robots.names()}
EDGE_NUMBERS = ["nan", "inf", "-inf", "1e308", "-1e308", "1e200", "1e6", "1000001", "-0",
                "0", "1e-320", "", "abc", "1 2", "0x10", "1e", "3.14159", "-7", "2e5"]


@st.composite
def mutated_urdf(draw):
    import re

    text = BASE_URDFS[draw(st.sampled_from(sorted(BASE_URDFS)))]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["number", "attr_vector", "delete", "truncate", "mimic",
                                     "type", "nest", "unicode", "duplicate", "rename"]))
        if kind == "number":
            nums = list(re.finditer(r'(?<=")-?[0-9.eE+-]+(?=")', text))
            if nums:
                mt = nums[draw(st.integers(0, len(nums) - 1))]
                text = text[:mt.start()] + draw(st.sampled_from(EDGE_NUMBERS)) + text[mt.end():]
        elif kind == "attr_vector":
            vec = list(re.finditer(r'(xyz|rpy)="[^"]*"', text))
            if vec:
                mt = vec[draw(st.integers(0, len(vec) - 1))]
                vals = " ".join(draw(st.lists(st.sampled_from(EDGE_NUMBERS), min_size=0,
                                              max_size=4)))
                text = text[:mt.start()] + f'{mt.group(1)}="{vals}"' + text[mt.end():]
        elif kind == "delete":
            tags = list(re.finditer(r"<(joint|link|origin|axis|limit|parent|child|mimic)\b"
                                    r"[^>]*/>", text))
            if tags:
                mt = tags[draw(st.integers(0, len(tags) - 1))]
                text = text[:mt.start()] + text[mt.end():]
        elif kind == "truncate":
            text = text[:draw(st.integers(0, len(text)))]
        elif kind == "mimic":
            names = re.findall(r'<joint name="([^"]+)"', text)
            ends = [mt.start() for mt in re.finditer(r"</joint>", text)]
            if names and ends:
                at = ends[draw(st.integers(0, len(ends) - 1))]
                leader = draw(st.sampled_from(names + ["ghost"]))
                mult = draw(st.sampled_from(["1", "-1", "1e308", "nan", "1e5", "0"]))
                text = (text[:at] + f'<mimic joint="{leader}" multiplier="{mult}" '
                        f'offset="{draw(st.sampled_from(["0", "1e308", "0.5"]))}"/>' + text[at:])
        elif kind == "type":
            types = list(re.finditer(r'type="([a-z]+)"', text))
            if types:
                mt = types[draw(st.integers(0, len(types) - 1))]
                new = draw(st.sampled_from(["fixed", "revolute", "continuous", "prismatic",
                                            "planar", "floating", "spherical", ""]))
                text = text[:mt.start()] + f'type="{new}"' + text[mt.end():]
        elif kind == "nest":
            at = text.find("</joint>")
            if at > 0:
                d = draw(st.integers(1, 3000))
                text = text[:at] + "<origin>" * d + "</origin>" * d + text[at:]
        elif kind == "unicode":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.text(min_size=1, max_size=5)) + text[at:]
        elif kind == "duplicate":
            joints = list(re.finditer(r"<joint\b.*?</joint>", text, re.S))
            if joints:
                mt = joints[draw(st.integers(0, len(joints) - 1))]
                text = text[:mt.end()] + mt.group(0) + text[mt.end():]
        elif kind == "rename":
            names = re.findall(r'link="([^"]+)"', text)
            if names:
                old = draw(st.sampled_from(names))
                text = text.replace(f'link="{old}"', f'link="{old}_x"', 1)
    return text


def check_model(m: Model):
    assert np.all(np.isfinite(m.origin)) and np.all(np.isfinite(m.axis))
    moving = [l for l in range(1, m.num_links) if m.joint_type[l] != JointType.FIXED]
    for l in moving:
        assert abs(np.linalg.norm(m.axis[l]) - 1.0) < 1e-9
    fin = np.isfinite(m.lower)
    assert np.all(np.abs(m.lower[fin]) <= MAX_VALUE) and np.all(m.lower <= m.upper)
    assert np.all(np.isfinite(m.mimic_multiplier)) and np.all(np.isfinite(m.mimic_offset))
    q0 = m.neutral_q()
    q = np.vstack([q0[None], m.random_q(0, 8)]) if m.nq else np.zeros((1, 0))
    assert np.all(np.isfinite(q)) and np.all(q >= m.lower) and np.all(q <= m.upper)
    T = fk(m, q)
    assert np.all(np.isfinite(T))
    R = T[..., :3, :3]
    assert np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max() < 1e-6
    for l in range(m.num_links):
        got = independent_pose(m, q[0], l)
        if got is not None:
            np.testing.assert_allclose(got, T[0, l], atol=1e-6 * (1 + np.abs(got).max()))


@FUZZ
@given(mutated_urdf())
def test_fuzz_loader(text):
    COUNTS["urdf_cases"] += 1
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = Model.from_urdf(text)
    except IKError:
        COUNTS["urdf_refused"] += 1
        return
    finally:
        assert time.perf_counter() - t0 < 10.0, "a URDF took over 10 s to load"
    COUNTS["urdf_loaded"] += 1
    check_model(m)


# ------------------------------------------------------------------ the core API
MODELS = {n: load_robot(n) for n in ("panda", "ur", "misc")}


def setup_module(module):
    from ros2_ik.api import prebuild

    prebuild(sorted(MODELS))  # a one-time kernel build is not a timeout overrun


def junk():
    return st.sampled_from([None, "abc", {"a": 1}, [[1.0, 2.0], [3.0]], 5, -1, True,
                            np.array([object()] * 3), np.zeros(3, dtype=complex), [],
                            np.array(["x"] * 7), float("nan")])


@st.composite
def q_like(draw, m: Model):
    kind = draw(st.sampled_from(["good", "good", "good", "f16", "nan", "shape", "junk", "int",
                                 "huge", "empty"]))
    B = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = m.random_q(rng, B)
    if kind == "f16":
        return q.astype(np.float16)
    if kind == "nan":
        q[rng.integers(B), rng.integers(m.nq)] = draw(st.sampled_from([np.nan, np.inf]))
        return q
    if kind == "shape":
        return np.zeros((B, m.nq + draw(st.sampled_from([-1, 1, 5]))))
    if kind == "junk":
        return draw(junk())
    if kind == "int":
        return np.zeros((B, m.nq), dtype=np.int16)
    if kind == "huge":
        return q * 1e300
    return np.zeros((0, m.nq))


@st.composite
def targets_like(draw, m: Model, tip: str):
    kind = draw(st.sampled_from(["reach", "reach", "reach", "far", "pq", "nan", "skew",
                                 "junk", "shape", "huge"]))
    P = draw(st.integers(1, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    T = fk_frames(m, m.random_q(rng, P), [tip])[:, 0].copy()
    if kind == "far":
        T[:, :3, 3] += 10.0
    elif kind == "pq":
        from ros2_ik.kinematics.se3 import pose_to_pq

        return pose_to_pq(T)
    elif kind == "nan":
        T[rng.integers(P), 0, 0] = np.nan
    elif kind == "skew":
        T[0, :3, :3] *= 2.0
    elif kind == "junk":
        return draw(junk())
    elif kind == "shape":
        return np.zeros((P, 3, 4))
    elif kind == "huge":
        T[:, :3, 3] = 1e300
    return T


def configs():
    return st.builds(
        lambda timeout, iters, seeds, mode, stall: IKConfig(
            timeout=timeout, max_iterations=iters, num_seeds=seeds, solve_mode=mode,
            stall_iterations=stall),
        st.sampled_from([None, None, 0.0, 1e-4, 0.005, 0.05]),
        st.integers(1, 300), st.integers(1, 12),
        st.sampled_from(["speed", "distance", "manipulability"]), st.sampled_from([0, 0, 5]))


@FUZZ
@given(st.data())
def test_fuzz_core_api(data):
    COUNTS["api_cases"] += 1
    name = data.draw(st.sampled_from(sorted(MODELS)))
    m = MODELS[name]
    tip = data.draw(st.sampled_from(list(m.tips) + [m.link_names[-1]]))
    what = data.draw(st.sampled_from(["fk", "fk_frames", "jacobian", "m2g", "solve", "solve",
                                      "solve", "chain", "trajectory", "config"]))
    try:
        if what == "config":
            kw = data.draw(st.dictionaries(
                st.sampled_from(["timeout", "max_iterations", "num_seeds", "rng_seed",
                                 "position_tolerance", "solve_mode", "stall_ratio",
                                 "lambda_min", "nonmonotone_iterations",
                                 "excursion_iterations", "excursion_stall"]),
                st.one_of(junk(), st.floats(allow_nan=True, allow_infinity=True),
                          st.integers(-2**70, 2**70), st.sampled_from(["speed", "fastest"])),
                max_size=3))
            IKConfig(**kw)
        elif what == "fk":
            T = fk(m, data.draw(q_like(m)))
            assert np.all(np.isfinite(T))
        elif what == "fk_frames":
            frames = data.draw(st.one_of(st.sampled_from(m.link_names), junk(),
                                         st.lists(st.sampled_from(m.link_names), max_size=3),
                                         st.just(["nope"])))
            T = fk_frames(m, data.draw(q_like(m)), frames)
            assert np.all(np.isfinite(T))
        elif what == "jacobian":
            link = data.draw(st.one_of(st.sampled_from(m.link_names), junk(),
                                       st.lists(st.sampled_from(m.link_names), min_size=1,
                                                max_size=3)))
            J = jacobian(m, data.draw(q_like(m)), link)
            assert np.all(np.isfinite(J))
        elif what == "m2g":
            q = m.random_q(data.draw(st.integers(0, 1000)), 3)
            ref = data.draw(st.sampled_from([None, "good", "bad", "junk"]))
            q_ref = {None: None, "good": q, "bad": np.zeros((5, m.nq)),
                     "junk": "x"}[ref]
            out = maximal_to_generalized(m, fk(m, q), q_ref=q_ref)
            np.testing.assert_allclose(fk(m, out), fk(m, q), atol=1e-7)
        elif what in ("solve", "chain"):
            cfg = data.draw(configs())
            backend = data.draw(st.sampled_from(["auto", "auto", "reference"]))
            T = data.draw(targets_like(m, tip))
            if what == "chain":
                target = T[0] if isinstance(T, np.ndarray) and T.ndim >= 2 else T
                seed = data.draw(st.sampled_from([None, "mid", "outside", "junk"]))
                s = {None: None, "mid": m.neutral_q(), "outside": m.neutral_q() + 100.0,
                     "junk": "x"}[seed]
                cs = ChainSolver(m, tip, cfg, backend=backend)  # prepared: not timed
                r = timed(lambda: cs.solve(target, seed=s), cfg.timeout, f"ChainSolver {name}")
                if seed == "outside" and m.nq and np.isfinite(m.upper).any():
                    assert r.status[0] == Status.INVALID_INPUT
                TT = np.asarray(target, dtype=float)
                if TT.shape == (7,):
                    from ros2_ik.kinematics.se3 import pq_to_pose

                    TT = pq_to_pose(TT)
                check_ik_result(m, [tip], TT[None], r, cfg)
            else:
                cancel = data.draw(st.sampled_from([None, None, 0.0, 0.002]))
                stop = None
                if cancel is not None:
                    t_c = time.perf_counter() + cancel
                    stop = lambda: time.perf_counter() >= t_c  # noqa: E731
                solver = data.draw(st.sampled_from(["dls", "dls", "ccd", "ccd+dls"]))
                r = timed(lambda: solve_pose(m, T, tips=tip, config=cfg, solver=solver,
                                             should_stop=stop, backend=backend),
                          cfg.timeout if cancel is None else cancel, f"solve_pose {name}")
                if isinstance(T, np.ndarray) and T.shape[-2:] == (4, 4):
                    check_ik_result(m, [tip], T, r, cfg)
                if cancel is not None:
                    assert not np.any(r.status == Status.NOT_CONVERGED) or cancel > 0
        elif what == "trajectory":
            K = data.draw(targets_like(m, tip))
            n = data.draw(st.sampled_from([[0, 3], [0, 50], [0], "x", [0, 2**63 - 1], []]))
            cfg = IKConfig(timeout=data.draw(st.sampled_from([None, 0.01, 0.1])),
                           max_iterations=50, solve_mode="distance")
            r = timed(lambda: trajectory_seed(m, K[:len(n)] if isinstance(K, np.ndarray)
                                              and isinstance(n, list) else K, n, tip=tip,
                                              config=cfg),
                      cfg.timeout, f"trajectory {name}")
            check_ik_result(m, [tip], r.targets, r, cfg)
        COUNTS[f"api_ok_{what}"] += 1
    except IKError:
        COUNTS[f"api_refused_{what}"] += 1
