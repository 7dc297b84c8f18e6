"""Issue 10, point 1: a solve moves only the joints on the way to its tips.

Every coordinate that is not on a base->tip path of the requested tips (nor the leader of a mimic
joint on such a path) must equal the problem's seed in every returned solution, for every
solver, seed count, solve mode and backend: the host backend, the NumPy reference,
CCD, ChainSolver, trajectory seeds and the generated GPU kernels run on the host. The cases use
many random restarts that are given up early (num_seeds=32, stall_iterations=5) so that restart
seeds win often; each case checks that they did, and every success is re-checked by FK here.
"""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik import load_robot
from ros2_ik.backends import codegen
from ros2_ik.backends.terms import emitters
from ros2_ik.backends import host as hostrun
from ros2_ik.kinematics.fk import fk_frames
from ros2_ik.kinematics.se3 import pose_error
from ros2_ik.ik import IKConfig, PoseObjective
from ros2_ik.api import solve_ik, solve_pose
from ros2_ik.backends import interface
from ros2_ik.ik.seeds import movable_coordinates, restart_seeds
from ros2_ik.api import ChainSolver
from ros2_ik.ik.objectives import Objective
from ros2_ik.api import trajectory_seed

K = 32
STALL = 5


def _cfg(**kw):
    return IKConfig(num_seeds=K, stall_iterations=STALL, **kw)


@pytest.fixture(scope="module")
def dual():
    return load_robot("dual_arm")


@pytest.fixture(scope="module")
def misc():
    return load_robot("misc")


def _off_by_name(model, tip):
    """The coordinates a solve for ``tip`` must not move, written out by name per robot (an
    oracle independent of the code under test)."""
    names = list(model.q_names)
    if model.name == "dual_arm":
        other = {"left_tool": ("right_",), "right_tool": ("left_",),
                 "head_link": ("left_", "right_")}[tip]
        off = [n.startswith(other) for n in names]
    elif model.name == "misc":
        # planar side branch off both paths; finger_left_joint is off the tool's path but is
        # the leader of finger_right_joint (mimic), so a finger_right solve may move it
        off = [n.startswith("planar_joint/") or (tip == "tool" and n == "finger_left_joint")
               for n in names]
    else:
        raise AssertionError(model.name)
    off = np.array(off, dtype=bool)
    assert off.any()
    return off


def _problems(model, tip, P, seed=7):
    rng = np.random.default_rng(seed)
    T = fk_frames(model, model.random_q(rng, P), [tip])[:, 0]
    seeds = model.random_q(np.random.default_rng(seed + 100), P)  # every problem its own seed
    return np.ascontiguousarray(T), np.ascontiguousarray(seeds)


def _check(model, tip, T, seeds, q, success, *, min_success=0.5, seed_index=None):
    """Off-path coordinates equal the seed exactly; every success holds up by FK."""
    off = _off_by_name(model, tip)
    q = np.asarray(q)
    assert np.array_equal(q[:, off], seeds[:, off]), (
        f"{np.count_nonzero(np.any(q[:, off] != seeds[:, off], axis=1))} of {len(q)} "
        f"solutions moved {[n for n, o in zip(model.q_names, off) if o]}, up to "
        f"{np.max(np.abs(q[:, off] - seeds[:, off])):.3g}")
    assert np.mean(success) >= min_success, np.mean(success)
    pe, re = pose_error(T[:, None], fk_frames(model, q, [tip]))
    cfg = IKConfig()
    assert np.all(pe[success, 0] <= cfg.position_tolerance)
    assert np.all(re[success, 0] <= cfg.orientation_tolerance)
    assert np.all((q >= model.lower - 1e-12) & (q <= model.upper + 1e-12))
    if seed_index is not None:  # the case says something: random restarts won
        assert np.any(np.asarray(seed_index)[success] > 0)


def test_movable_coordinates_follow_the_paths(dual, misc):
    for m, tip in ((dual, "left_tool"), (dual, "right_tool"), (dual, "head_link"),
                   (misc, "tool"), (misc, "finger_right")):
        assert np.array_equal(movable_coordinates(m, [tip]), ~_off_by_name(m, tip)), tip
    both = movable_coordinates(dual, ["left_tool", "right_tool"])
    assert both.all()
    assert movable_coordinates(dual, None).all()
    _, keep = restart_seeds(dual, K, 0, movable_coordinates(dual, ["left_tool"]))
    assert keep[_off_by_name(dual, "left_tool")].all()


@pytest.mark.parametrize("tip", ["left_tool", "right_tool", "head_link"])
@pytest.mark.parametrize("solver,backend", [("dls", "host"), ("dls", "reference"),
                                            ("ccd", "host"), ("ccd", "reference"),
                                            ("ccd+dls", "host")])
def test_dual_arm_solves_move_only_the_tips_chain(dual, tip, solver, backend):
    P = 24
    T, seeds = _problems(dual, tip, P)
    r = solve_pose(dual, T, tips=tip, seeds=seeds, solver=solver, config=_cfg(),
                   backend=backend)
    if tip == "head_link" and solver == "dls":
        # one revolute joint (the waist, +-2.6 rad): LM's first seed reaches every goal, going
        # round the arc outside the limits where that is the way, so no restart need win
        _check(dual, tip, T, seeds, r.q, r.success, min_success=1.0)
        return
    _check(dual, tip, T, seeds, r.q, r.success, seed_index=r.seed_index,
           min_success=0.3 if solver == "ccd" else 0.5)


@pytest.mark.parametrize("mode", ["distance", "manipulability"])
def test_dual_arm_other_solve_modes(dual, mode):
    T, seeds = _problems(dual, "left_tool", 16, seed=9)
    r = solve_pose(dual, T, tips="left_tool", seeds=seeds, config=_cfg(solve_mode=mode))
    _check(dual, "left_tool", T, seeds, r.q, r.success, seed_index=r.seed_index)


class _PullOffPath(Objective):
    """A regularizer that pulls the off-path coordinates towards ``ref`` (and nothing else)."""

    def __init__(self, model, off, ref, weight=1.0):
        self.model, self.ref, self.weight = model, np.asarray(ref, dtype=float), weight
        self.qi = np.nonzero(off)[0]
        self.cols = np.array([int(np.nonzero(np.asarray(model.v_active) == model.q_to_v[i])[0][0])
                              for i in self.qi])
        self.dim = len(self.qi)

    def take(self, start, stop):
        return self

    def residual(self, ctx, problem_idx):
        N = ctx.q.shape[0]
        r = self.weight * (ctx.q[:, self.qi] - self.ref[self.qi])
        J = np.zeros((N, self.dim, self.model.nv_active))
        J[:, np.arange(self.dim), self.cols] = self.weight
        return r, J


@pytest.mark.parametrize("num_seeds", [1, K])
def test_a_regularizer_does_not_add_movable_joints(dual, num_seeds):
    """A regularizer that pulls the right arm does not move it in a solve for the left tool
    (with one seed, only the regularizer could move it)."""
    T, seeds = _problems(dual, "left_tool", 12, seed=5)
    off = _off_by_name(dual, "left_tool")
    ref = np.where(off, 0.3, 0.0)
    r = solve_ik(dual, [PoseObjective(dual, "left_tool", T)], seeds=seeds,
                 config=IKConfig(num_seeds=num_seeds, stall_iterations=STALL),
                 regularizers=[_PullOffPath(dual, off, ref)])
    _check(dual, "left_tool", T, seeds, r.q, r.success, min_success=0.3)


@pytest.mark.parametrize("tip", ["tool", "finger_right"])
@pytest.mark.parametrize("solver", ["dls", "ccd+dls"])
def test_misc_planar_branch_and_mimic_leader(misc, tip, solver):
    P = 12
    T, seeds = _problems(misc, tip, P, seed=4)
    r = solve_pose(misc, T, tips=tip, seeds=seeds, solver=solver, config=_cfg())
    _check(misc, tip, T, seeds, r.q, r.success, min_success=0.3)


@pytest.mark.parametrize("tip", ["left_tool", "head_link"])
def test_chain_solver(dual, tip):
    P = 20
    T, seeds = _problems(dual, tip, P, seed=12)
    # classic LM (no non-monotone phase): its first seed misses some of these goals, so that
    # restart rows win and the case says something about them
    s = ChainSolver(dual, tip, config=_cfg(nonmonotone_iterations=0))
    assert s.compiled
    rs = [s.solve(T[p], seed=seeds[p]) for p in range(P)]
    q = np.concatenate([r.q for r in rs])
    ok = np.concatenate([r.success for r in rs])
    _check(dual, tip, T, seeds, q, ok, seed_index=np.concatenate([r.seed_index for r in rs]))


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_trajectory_seed(dual, mode):
    rng = np.random.default_rng(21)
    q0 = dual.random_q(rng, 2)
    keys = fk_frames(dual, q0, ["left_tool"])[:, 0]
    seed = dual.random_q(rng, 1)[0]
    tr = trajectory_seed(dual, keys, [0, 7], tip="left_tool", mode=mode, seed=seed,
                         config=_cfg(solve_mode="distance"))
    N = tr.q.shape[0]
    _check(dual, "left_tool", tr.targets, np.tile(seed, (N, 1)), tr.q, tr.success,
           min_success=0.5)


# ---------------------------------------------------------------- the generated GPU kernels

need_cxx = pytest.mark.skipif(hostrun.available() is None, reason="no g++ to run kernels on "
                              "the host")


@need_cxx
@pytest.mark.parametrize("tip", ["left_tool", "head_link"])
def test_gpu_lm_kernel_rows_keep_off_path_seed(dual, tip):
    """The CUDA text's LM kernel, run on the host row by row (as a GPU runs it, one thread a
    row): off-path coordinates of every row are the seed's, and restart rows converge."""
    m = dual
    P = 40
    T, seeds = _problems(m, tip, P, seed=31)
    cfg = _cfg(nonmonotone_iterations=0)  # classic LM: restart rows must win (see above)
    W = np.ones((P, 6))
    ch = codegen.chain_of(m, [tip])
    src = codegen.solve_source(ch, "float64", host=True)
    lm = hostrun.compile_host(src).get_function("r2ik_lm")
    packed = hostrun.TermData(emitters(ch), {"pose_target": T.reshape(P, -1),
                                             "pose_weight": W}, P)
    rnd, _ = restart_seeds(m, K, cfg.rng_seed, movable_coordinates(m, [tip]))
    nq, N = m.nq, P * K
    qo = np.zeros((N, nq))
    conv, iters = np.zeros(N, np.uint8), np.zeros(N, np.int32)
    pe, re, tout = np.zeros(N), np.zeros(N), np.zeros(N, np.uint8)
    opt = interface.options_record(cfg).view(np.uint8)
    # done: a problem's lowest converged seed index, none yet (R2IK_NO_ROW, as r2ik_prep writes)
    done = np.full(P, 0x7FFFFFFF, np.int32)
    lm(N, P, K, seeds, nq, np.ascontiguousarray(rnd.reshape(-1, nq)), 0,
       packed.record.view(np.uint8), np.ones(P, np.uint8), opt,
       np.zeros(1, np.uint64), np.array([-1, 0]), np.zeros(1, np.int32), done,
       qo, conv, iters, pe, re, tout)
    off = _off_by_name(m, tip)
    rows_seed = np.repeat(seeds, K, axis=0)
    assert np.array_equal(qo[:, off], rows_seed[:, off])
    conv = conv.astype(bool).reshape(P, K)
    assert conv.any(axis=1).mean() >= 0.5
    assert conv[:, 1:].any()  # restart rows converge: the case says something


@need_cxx
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_solver_keeps_off_path_seed(dual, monkeypatch, dtype):
    import cupy_standin
    from ros2_ik.backends.cuda import GpuSolver

    cp = cupy_standin.install(monkeypatch)
    tip = "left_tool"
    P = 40
    T, seeds = _problems(dual, tip, P, seed=17)
    g = GpuSolver(dual, [tip], _cfg(), dtype=dtype, xp=cp)
    r = g.solve(T, seeds=seeds)
    _check(dual, tip, T, seeds, r.q, r.success, seed_index=r.seed_index)


def test_goals_without_a_link_keep_every_coordinate_movable(dual):
    """A custom goal objective (no ``link``) leaves every coordinate to the restarts, as
    before; regularizers add nothing to the goals' coordinates."""
    from ros2_ik.ik.batch import goal_movable

    T, _ = _problems(dual, "left_tool", 2)
    pose = PoseObjective(dual, "left_tool", T)
    off = _off_by_name(dual, "left_tool")
    assert np.array_equal(goal_movable(dual, [pose]), ~off)
    assert goal_movable(dual, [pose, _PullOffPath(dual, off, np.zeros(dual.nq))]).all()
