"""Hardened core API (issue 11): every bad argument is an IKError subclass whose message names
the argument, what was expected and what came."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ros2_ik import load_robot
from ros2_ik.errors import (IKError, InputTypeError, InvalidInputError, ShapeError,
                            UnknownRobotError)
from ros2_ik.kinematics import fk, fk_frames, jacobian, maximal_to_generalized
from ros2_ik.kinematics.jacobian import jacobians_all
from ros2_ik.ik import IKConfig
from ros2_ik.api import solve_pose, trajectory_seed


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda")


BAD_CONFIGS = {
    "solve_mode unknown": (dict(solve_mode="fastest"), "solve_mode"),
    "max_iterations nan": (dict(max_iterations=math.nan), "max_iterations"),
    "max_iterations str": (dict(max_iterations="10"), "max_iterations"),
    "max_iterations float": (dict(max_iterations=10.0), "max_iterations"),
    "max_iterations bool": (dict(max_iterations=True), "max_iterations"),
    "max_iterations negative": (dict(max_iterations=-3), "max_iterations"),
    "timeout str": (dict(timeout="1"), "timeout"),
    "timeout negative": (dict(timeout=-1.0), "timeout"),
    "timeout nan": (dict(timeout=math.nan), "timeout"),
    "timeout overflow": (dict(timeout=1e10), "timeout"),
    "timeout bool": (dict(timeout=True), "timeout"),
    "rng_seed None": (dict(rng_seed=None), "rng_seed"),
    "rng_seed negative": (dict(rng_seed=-1), "rng_seed"),
    "num_seeds zero": (dict(num_seeds=0), "num_seeds"),
    "num_seeds None": (dict(num_seeds=None), "num_seeds"),
    "tolerance str": (dict(position_tolerance="1e-4"), "position_tolerance"),
    "tolerance inf": (dict(orientation_tolerance=math.inf), "orientation_tolerance"),
    "lambda zero": (dict(lambda_min=0.0), "lambda_min"),
    "stall_ratio 1": (dict(stall_ratio=1.0), "stall_ratio"),
    "nonmonotone_iterations negative": (dict(nonmonotone_iterations=-1), "nonmonotone_iterations"),
    "nonmonotone_iterations float": (dict(nonmonotone_iterations=2.5), "nonmonotone_iterations"),
    "excursion_iterations negative": (dict(excursion_iterations=-1), "excursion_iterations"),
    "excursion_stall zero": (dict(excursion_stall=0), "excursion_stall"),
    "excursion_stall float": (dict(excursion_stall=1.5), "excursion_stall"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_an_ikerror_at_construction(case):
    kwargs, name = BAD_CONFIGS[case]
    with pytest.raises(IKError, match=name) as e:
        IKConfig(**kwargs)
    assert "got" in str(e.value) or "must" in str(e.value)


def test_good_config_values_are_normalised():
    c = IKConfig(max_iterations=np.int64(5), timeout=np.float32(0.5), solve_mode="distance",
                 rng_seed=2**40)
    assert c.max_iterations == 5 and isinstance(c.max_iterations, int)
    assert c.timeout == pytest.approx(0.5) and c.rng_seed == 2**40


def test_load_robot_unknown_name_lists_valid_names():
    with pytest.raises(UnknownRobotError, match="unknown robot 'pandaa'.*'panda'"):
        load_robot("pandaa")
    with pytest.raises(UnknownRobotError):
        load_robot(None)


BAD_ARRAYS = [
    ("ragged", [[0.0] * 7, [0.0] * 6], ShapeError),
    ("string", "0 0 0 0 0 0 0", InputTypeError),
    ("dict", {"a": 1}, InputTypeError),
    ("None", None, InputTypeError),
    ("object", np.array([object()] * 7), InputTypeError),
    ("complex", np.zeros(7, dtype=complex), InputTypeError),
    ("strings", np.array(["1"] * 7), InputTypeError),
]


@pytest.mark.parametrize("label,value,err", BAD_ARRAYS, ids=[b[0] for b in BAD_ARRAYS])
def test_bad_q_everywhere(panda, label, value, err):
    calls = {
        "fk": lambda: fk(panda, value),
        "fk_frames": lambda: fk_frames(panda, value, "panda_link8"),
        "jacobian": lambda: jacobian(panda, value, "panda_link8"),
        "jacobians_all": lambda: jacobians_all(panda, value),
    }
    for where, call in calls.items():
        with pytest.raises(err, match=r"^q ") as e:
            call()
        assert "expected" in str(e.value) or "must" in str(e.value), where


@pytest.mark.parametrize("label,value,err", BAD_ARRAYS, ids=[b[0] for b in BAD_ARRAYS])
def test_bad_targets_and_seeds(panda, label, value, err):
    with pytest.raises(err, match=r"^targets "):
        solve_pose(panda, value, tips="panda_link8")
    if value is not None:  # seeds=None is the default (mid-range)
        with pytest.raises(err, match=r"^seeds "):
            solve_pose(panda, np.eye(4)[None], tips="panda_link8", seeds=value)
    with pytest.raises(err, match=r"^keyframes "):
        trajectory_seed(panda, value, [0, 3])


def test_bad_names(panda):
    q = panda.neutral_q()
    with pytest.raises(InputTypeError, match="tips must be a link name.*int 5"):
        solve_pose(panda, np.eye(4)[None], tips=5)
    with pytest.raises(InputTypeError, match="frames must be a link name.*None"):
        fk_frames(panda, q, None)
    with pytest.raises(InputTypeError, match="link"):
        jacobian(panda, q, 5)
    with pytest.raises(InputTypeError, match="config must be an IKConfig.*dict"):
        solve_pose(panda, np.eye(4)[None], tips="panda_link8", config={"timeout": 1})
    with pytest.raises(InputTypeError, match="should_stop must be a callable"):
        solve_pose(panda, np.eye(4)[None], tips="panda_link8", should_stop=True)
    with pytest.raises(InputTypeError, match="tip must be a link name"):
        trajectory_seed(panda, np.eye(4)[None], [0], tip=["panda_link8"])


def test_jacobian_accepts_a_list_like_fk_frames(panda, rng):
    q = panda.random_q(rng, 3)
    J = jacobian(panda, q, ["panda_link8", "panda_link4"])
    assert J.shape == (3, 2, 6, 7)
    np.testing.assert_array_equal(J[:, 0], jacobian(panda, q, "panda_link8"))
    np.testing.assert_array_equal(J[:, 1], jacobian(panda, q, "panda_link4"))


def test_float16_is_promoted_to_float64(panda, rng):
    q = panda.random_q(rng, 4)
    q16 = q.astype(np.float16)
    T = fk(panda, q16)
    assert T.dtype == np.float64
    np.testing.assert_allclose(T, fk(panda, q16.astype(np.float64)), atol=1e-12)
    # integer input is promoted too
    assert fk(panda, np.zeros(7, dtype=np.int32)).dtype == np.float64


def test_trajectory_bad_node_indices(panda):
    K = np.eye(4)[None].repeat(2, 0)
    for bad, err, pat in (([0, 2**63 - 1], InvalidInputError, "node_indices must be in"),
                          (np.array([0, 2**64 - 1], dtype=np.uint64), InvalidInputError,
                           "node_indices must be in"),
                          ([0, -3], InvalidInputError, "node_indices"),
                          ([0, 1.5], InvalidInputError, "integers"),
                          ("0 1", InputTypeError, "node_indices"),
                          ([0], ShapeError, "one entry per keyframe")):
        with pytest.raises(err, match=pat):
            trajectory_seed(panda, K, bad)
    with pytest.raises(InvalidInputError, match="keyframes is empty"):
        trajectory_seed(panda, np.zeros((0, 7)), [])
    ok = trajectory_seed(panda, K, np.array([0, 2], dtype=np.uint64))
    assert ok.q.shape == (3, 7)


def test_maximal_to_generalized_bad_q_ref(panda, rng):
    q = panda.random_q(rng, 2)
    T = fk(panda, q)
    with pytest.raises(ShapeError, match=r"q_ref must have shape \(2, 7\)"):
        maximal_to_generalized(panda, T, q_ref=np.zeros((3, 7)))
    with pytest.raises(InvalidInputError, match="q_ref contains NaN"):
        maximal_to_generalized(panda, T, q_ref=np.full(7, np.nan))
    np.testing.assert_allclose(maximal_to_generalized(panda, T, q_ref=q), q, atol=1e-9)


def test_seeds_a_solve_cannot_start_from_are_invalid_problems():
    """Found by the node-request fuzz tier: a seed with a zero floating-joint quaternion
    crashed the solve (division by zero in FK), and one with 1e308 in an unbounded coordinate
    was solved from and returned. Both are now that problem's INVALID_INPUT, with a message;
    the other problems are solved."""
    from ros2_ik.ik import Status

    m = load_robot("misc")
    q = m.neutral_q()
    T = np.asarray(fk_frames(m, q, ["tool"]))[:, 0]
    zero_quat, huge = q.copy(), q.copy()
    i = m.q_names.index("base_joint/qx")
    zero_quat[i:i + 4] = 0.0
    huge[m.q_names.index("planar_joint/x")] = 1e308
    r = solve_pose(m, np.repeat(T, 3, axis=0), tips="tool",
                   seeds=np.stack([zero_quat, huge, q]), config=IKConfig(num_seeds=2))
    assert list(r.status[:2]) == [Status.INVALID_INPUT] * 2
    assert "zero quaternion" in r.messages[0] and "planar_joint/x" in r.messages[1]
    assert r.status[2] == Status.CONVERGED
