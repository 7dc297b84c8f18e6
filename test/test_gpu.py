"""The GPU path without a GPU: generated CUDA compiled for sm_90, the same text run on the CPU
(g++ host shim) against the host backend (the other rendering of the one source) and the
references, and the CuPy runtime run against a CPU stand-in of CuPy's host/device rules. With a
GPU, the runtime cases also run on CuPy itself."""

from __future__ import annotations

import concurrent.futures as cf
import time

import numpy as np
import pytest

import cupy_standin
from conftest import ENDLESS
from ros2_ik import Model, load_robot
from ros2_ik.backends import codegen, cubin as gcompile, interface
from ros2_ik.backends.terms import emitters
from ros2_ik.backends import host as hostrun
from ros2_ik.kinematics.fk import fk_frames
from ros2_ik.kinematics.jacobian import jacobians_all
from ros2_ik.kinematics.se3 import pose_error
from ros2_ik.ik import IKConfig, PoseObjective, Status
from ros2_ik.api import solve_pose
from ros2_ik.api import IKSolver
from ros2_ik.ik.ccd import ccd_solve_rows
from ros2_ik.ik.seeds import movable_coordinates, restart_seeds

# every 1-DOF joint case the generator resolves: revolute about +z / -z / x / y / an oblique
# axis, continuous, prismatic, fixed with rotation, a mimic joint, a frozen joint (locked
# below), a +-2 pi ("wide") revolute joint
ALLTYPES_URDF = """<?xml version="1.0"?>
<robot name="alltypes">
  <link name="base"/><link name="a"/><link name="b"/><link name="c"/><link name="d"/>
  <link name="e"/><link name="f"/><link name="g"/><link name="h"/><link name="tool"/>
  <joint name="j_z" type="revolute"><parent link="base"/><child link="a"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-2.8" upper="2.8" effort="1" velocity="1"/></joint>
  <joint name="j_obl" type="revolute"><parent link="a"/><child link="b"/>
    <origin xyz="0.05 0 0.2" rpy="0.3 -0.2 0.1"/><axis xyz="0.3 0.5 0.8"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="j_pri" type="prismatic"><parent link="b"/><child link="c"/>
    <origin xyz="0 0.02 0.15"/><axis xyz="1 0 0"/>
    <limit lower="-0.1" upper="0.2" effort="1" velocity="1"/></joint>
  <joint name="j_cont" type="continuous"><parent link="c"/><child link="d"/>
    <origin xyz="0 0 0.1" rpy="1.5707963 0 0"/><axis xyz="0 0 -1"/></joint>
  <joint name="j_mim" type="revolute"><parent link="d"/><child link="e"/>
    <origin xyz="0.1 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/>
    <mimic joint="j_z" multiplier="-0.5" offset="0.1"/></joint>
  <joint name="j_frz" type="revolute"><parent link="e"/><child link="f"/>
    <origin xyz="0 0.1 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j_y" type="revolute"><parent link="f"/><child link="g"/>
    <origin xyz="0 0 0.12"/><axis xyz="0 1 0"/>
    <limit lower="-2.5" upper="2.5" effort="1" velocity="1"/></joint>
  <joint name="j_wide" type="revolute"><parent link="g"/><child link="h"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-6.3" upper="6.3" effort="1" velocity="1"/></joint>
  <joint name="j_tool" type="fixed"><parent link="h"/><child link="tool"/>
    <origin xyz="0.02 0 0.08" rpy="0 0.4 0"/></joint>
</robot>
"""


def _alltypes():
    return Model.from_urdf(ALLTYPES_URDF, tips=["tool"]).lock(["j_frz"])


CASES = {  # name -> (model factory, tips)
    "panda": (lambda: load_robot("panda"), None),
    "ur": (lambda: load_robot("ur"), None),
    "dual_arm": (lambda: load_robot("dual_arm"), ("left_tool", "right_tool")),
    "alltypes": (_alltypes, None),
}


@pytest.fixture(scope="module")
def case_models():
    return {n: (f(), t) for n, (f, t) in CASES.items()}


def _tips(model, tips):
    return list(model.tips if tips is None else tips)


def _problems(model, tips, P, seed=3):
    rng = np.random.default_rng(seed)
    T = fk_frames(model, model.random_q(rng, P), tips)
    return np.ascontiguousarray(T), np.ones((P, len(tips), 6))


need_cxx = pytest.mark.skipif(hostrun.available() is None, reason="no g++ to run kernels on "
                              "the host")


# ---------------------------------------------------------------- sm_90 builds

@pytest.mark.skipif(not any(gcompile.tools().values()),
                    reason="neither NVRTC (libnvrtc) nor nvcc is installed here")
def test_every_generated_kernel_compiles_for_sm90(case_models):
    jobs = []
    for name, (m, tips) in case_models.items():
        ch = codegen.chain_of(m, _tips(m, tips))
        for dt in ("float32", "float64"):
            jobs.append((name, dt, "solve", codegen.solve_source(ch, dt)))
            jobs.append((name, dt, "frames", codegen.frames_source(ch, dt)))
    with cf.ThreadPoolExecutor(2) as ex:
        done = list(ex.map(lambda j: (j, gcompile.compile_cubin(j[3])), jobs))

    def want(name, kind):
        if kind == "frames":
            return {"r2ik_fk", "r2ik_jac"}
        return {"r2ik_lm", "r2ik_select", "r2ik_stamp", "r2ik_prep"} | (
            {"r2ik_ccd"} if name != "dual_arm" else set())

    for (name, dt, kind, _), (cubin, _log, tool) in done:
        assert cubin[:4] == b"\x7fELF", (name, dt, kind, tool)
        missing = {k for k in want(name, kind) if k.encode() not in cubin}
        assert not missing, (name, dt, kind, missing)
    # the ptxas report (registers, spills) that bench_gpu --report prints
    name, dt, kind, src = jobs[0]
    found, tool = gcompile.kernel_report(src)
    reports = {r.name: r for r in found}
    assert want(name, kind) <= set(reports), (name, dt, kind, tool, set(reports))
    assert all(0 < r.registers <= 255 for r in reports.values())


def test_generator_refuses_what_it_does_not_cover():
    m = load_robot("misc")  # floating and planar joints on the way to its tips
    assert codegen.chain_of(m, ["platform_marker"]) is None
    from ros2_ik.errors import IKError

    with pytest.raises(IKError, match="float32 or float64"):
        codegen.solve_source(codegen.chain_of(load_robot("ur"), ["tool0"]), "float16")


# ---------------------------------------------------------------- the same text on the CPU

def cuda_text_on_the_host(m, tips, T, W, K, cfg, dtype):
    """The CUDA kernels of a solve (stamp aside: prep, lm, select), the very text NVRTC builds,
    run on the host row by row as a GPU would run them one thread a row: the answers
    (P, nq + OUT_FIELDS) of problems T (P, T, 4, 4) from mid-range seeds."""
    ch = codegen.chain_of(m, tips)
    src = codegen.solve_source(ch, dtype, host=True)
    mod = hostrun.compile_host(src)
    prep, lm, select = (mod.get_function(k) for k in ("r2ik_prep", "r2ik_lm", "r2ik_select"))
    S = np.dtype(dtype)
    P, nq = T.shape[0], m.nq
    N = P * K
    rnd, _ = restart_seeds(m, K, cfg.rng_seed, movable_coordinates(m, tips))
    rnd = np.ascontiguousarray(rnd.reshape(-1, nq)) if K > 1 else np.zeros((1, nq))
    seeds = np.ascontiguousarray(np.tile(m.neutral_q(), (P, 1)))
    dat = term_data(ch, P, pose_target=T.reshape(P, -1), pose_weight=W.reshape(P, -1))
    active, flags, done = np.zeros(P, np.uint8), np.zeros(P, np.uint8), np.zeros(P, np.int32)
    opt = interface.options_record(cfg).view(np.uint8)
    prep(P, P, 0, dat, seeds, nq, active, flags, done)
    qo = np.zeros((N, nq), S)
    conv, it = np.zeros(N, np.uint8), np.zeros(N, np.int32)
    pe, re, to = np.zeros(N, S), np.zeros(N, S), np.zeros(N, np.uint8)
    clock0, params, stop = np.zeros(1, np.uint64), np.array([-1, 0]), np.zeros(1, np.int32)
    lm(N, P, K, seeds, nq, rnd, 0, dat, active, opt, clock0, params, stop, done,
       qo, conv, it, pe, re, to)
    out = np.zeros((P, nq + len(interface.out_fields(emitters(ch)))))
    select(P, P, 0, K, qo, conv, it, pe, re, to, 0, flags, seeds, nq, dat, opt, stop, out)
    return out


def term_data(ch, P, **values):
    """The terms' data struct of chain ``ch`` (``<term>_<field>`` arrays) as the bytes a
    kernel's ``const r2ik_data*`` argument takes (kept alive by the returned array's base)."""
    packed = hostrun.TermData(emitters(ch), values, P)
    view = packed.record.view(np.uint8)
    term_data.keep.append(packed)  # (the record points into its arrays)
    return view


term_data.keep = []


def _agreement(name, case_models, dtype, K=1, P=150, **kw):
    """The CUDA text on the host (``dtype``) against the host backend (float64): the share of
    problems with the same status and iterations, and the largest difference of q."""
    m, tips = case_models[name]
    tips = _tips(m, tips)
    T, W = _problems(m, tips, P)
    cfg = IKConfig(num_seeds=K, stall_iterations=5 if K > 1 else 0, **kw)
    a = IKSolver(m, tips, cfg).solve(T, weights=W[:, 0] if len(tips) == 1 else W)
    b = cuda_text_on_the_host(m, tips, T, W, K, cfg, dtype)
    nq = m.nq
    status, iters = b[:, nq].astype(np.int64), b[:, nq + 3].astype(np.int64)
    return {"same_conv": float(np.mean(a.success == (status == Status.CONVERGED))),
            "same_iters": float(np.mean(a.iterations == iters)),
            "max_dq": float(np.max(np.abs(a.q - b[:, :nq]))), "conv": float(a.success.mean()),
            "conv_other": float(np.mean(status == Status.CONVERGED)), "a": a, "b": b}


@need_cxx
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("K", [1, 4])
def test_cuda_text_float64_equals_the_host_backend(case_models, name, K):
    """One source: the CUDA text run on the host in float64 (one row per "thread", in row
    order) and the host backend (the same text's host rendering, rows one at a time or side by
    side) give the same answers bit for bit (on the host both take the recipe's sine and
    cosine; a GPU takes CUDA's, checked on a GPU by test_fused_on_a_gpu)."""
    r = _agreement(name, case_models, "float64", K=K)
    assert r["conv"] > 0.1, r  # the comparison says something: many rows converge
    np.testing.assert_array_equal(r["a"].q, r["b"][:, :r["a"].q.shape[1]])
    assert r["same_conv"] == 1.0 and r["same_iters"] == 1.0, r


@need_cxx
@pytest.mark.parametrize("name", list(CASES))
def test_lm_kernel_float32_converges_like_float64(case_models, name):
    """float32 rows against float64 ones. Classic LM: the same rows converge (99 %). With the
    non-monotone phase (the default) a hard row's path depends on roundings (a step that
    raises the cost is taken, then the next from there), so float32 and float64 may end
    apart on some rows: the share that converges stays the same."""
    r = _agreement(name, case_models, "float32", K=1, nonmonotone_iterations=0)
    assert r["same_conv"] >= 0.99, r["same_conv"]
    r = _agreement(name, case_models, "float32", K=1)
    assert abs(r["conv"] - r["conv_other"]) <= 0.08, (r["conv"], r["conv_other"])
    assert r["same_conv"] >= 0.8, r["same_conv"]


@need_cxx
def test_a_broken_generator_fails_the_comparison(case_models, monkeypatch):
    """The comparison has teeth: a CUDA text that bakes one constant slightly wrong (fixed
    transforms' literals off by 1e-7 relative) no longer matches the host backend's rows."""
    m, tips = case_models["panda"]
    tips = _tips(m, tips)
    T, W = _problems(m, tips, 60)
    cfg = IKConfig()
    a = IKSolver(m, tips, cfg).solve(T)  # built before the breakage
    b = cuda_text_on_the_host(m, tips, T, W, 1, cfg, "float64")
    np.testing.assert_array_equal(a.q, b[:, :m.nq])
    import importlib
    import pkgutil

    from ros2_ik.backends import emit
    from ros2_ik.backends.emit import text

    real_lit = text.lit
    broken = lambda x: real_lit(float(x) * (1 + 1e-7))  # noqa: E731
    for info in pkgutil.iter_modules(emit.__path__):  # every generator module that bakes one
        mod = importlib.import_module(f"{emit.__name__}.{info.name}")
        if getattr(mod, "lit", None) is real_lit:
            monkeypatch.setattr(mod, "lit", broken)
    b = cuda_text_on_the_host(m, tips, T, W, 1, cfg, "float64")
    assert not np.array_equal(a.q, b[:, :m.nq])


@need_cxx
@pytest.mark.parametrize("name", ["panda", "ur", "alltypes"])
def test_ccd_kernel_equals_numpy_ccd(case_models, name):
    m, tips = case_models[name]
    tips = _tips(m, tips)
    P = 80
    T, W = _problems(m, tips, P, seed=5)
    cfg = IKConfig(max_iterations=30)
    obj = PoseObjective(m, tips[0], T[:, 0])
    q0 = np.tile(m.neutral_q(), (P, 1))
    ref = ccd_solve_rows(m, [obj], q0.copy(), q0, np.arange(P), cfg, deadline=None)
    ch = codegen.chain_of(m, tips)
    ccd = hostrun.compile_host(codegen.solve_source(ch, "float64",
                                                    host=True)).get_function("r2ik_ccd")
    q = np.zeros((P, m.nq))
    conv, sw = np.zeros(P, np.uint8), np.zeros(P, np.int32)
    pe, re, to = np.zeros(P), np.zeros(P), np.zeros(P, np.uint8)
    opt = interface.options_record(cfg).view(np.uint8)
    dat = term_data(ch, P, pose_target=T.reshape(P, -1), pose_weight=W.reshape(P, -1))
    ccd(P, P, 1, q0, m.nq, np.zeros((1, m.nq)), dat, np.ones(P, np.uint8), opt, 30,
        np.zeros(1, np.uint64), np.array([-1, 0]), np.zeros(1, np.int32), q, conv, sw, pe, re,
        to)
    assert np.mean(ref[0] != q0) > 0.3  # CCD moved the joints
    assert np.array_equal(ref[1], conv.astype(bool))
    assert np.mean(ref[2] == sw) >= 0.97
    same = ref[2] == sw
    assert np.abs(ref[0][same] - q[same]).max() <= 1e-9
    assert np.allclose(ref[3], pe, atol=1e-9) and np.allclose(ref[4], re, atol=1e-9)


@need_cxx
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 2e-5)])
def test_fk_and_jacobian_kernels_equal_reference(case_models, name, dtype, tol):
    m, tips = case_models[name]
    frames = _tips(m, tips)
    mod = hostrun.compile_host(codegen.frames_source(codegen.chain_of(m, frames), dtype,
                                                     host=True))
    q = m.random_q(np.random.default_rng(7), 40)
    S = np.dtype(dtype)
    qS = np.ascontiguousarray(q, S)
    F = np.zeros((40, len(frames), 4, 4), S)
    mod.get_function("r2ik_fk")(40, qS, 40, F)
    J = np.zeros((40, len(frames), 6, m.nv_active), S)
    mod.get_function("r2ik_jac")(40, qS, 40, J)
    Jr, _ = jacobians_all(m, qS.astype(np.float64), frames)
    assert np.abs(F - fk_frames(m, qS.astype(np.float64), frames)).max() <= tol
    assert np.abs(J - Jr).max() <= tol


# ---------------------------------------------------------------- the CuPy runtime

def _xp_params():
    from ros2_ik.backend import cupy_available

    marks = [] if cupy_available() else [pytest.mark.skip(reason="no usable CuPy / GPU here")]
    return [pytest.param("standin", marks=[need_cxx]), pytest.param("cupy", marks=marks)]


@pytest.fixture(params=_xp_params())
def cpx(request, monkeypatch):
    if request.param == "standin":
        return cupy_standin.install(monkeypatch)
    import cupy

    return cupy


def _gpu_solver(*a, **k):
    from ros2_ik.backends.cuda import GpuSolver

    return GpuSolver(*a, **k)


def test_standin_enforces_cupys_host_device_rules(monkeypatch):
    cp = cupy_standin.install(monkeypatch)
    d = cp.asarray(np.ones(3))
    for bad in (lambda: np.asarray(d), lambda: bool(d.any()), lambda: float(d[0]),
                lambda: d + np.ones(3), lambda: list(d)):
        with pytest.raises(TypeError):
            bad()
    assert cp.stats["to_device"] == 1 and cp.stats["to_host"] == 0
    assert np.array_equal(d.get(), np.ones(3)) and cp.stats["to_host"] == 1


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_solver_matches_solve_pose_and_is_verified(cpx, case_models, name, dtype):
    m, tips = case_models[name]
    tips = _tips(m, tips)
    P = 120
    T, _ = _problems(m, tips, P, seed=11)
    cfg = IKConfig(num_seeds=8, stall_iterations=5)
    g = _gpu_solver(m, tips, cfg, dtype=dtype, xp=cpx)
    r = g.solve(T)
    ref = solve_pose(m, T, tips=tips, config=cfg)
    assert r.success.mean() >= ref.success.mean() - 0.03, (r.success.mean(), ref.success.mean())
    assert r.success.mean() >= 0.6
    # independent check of every success: FK at the returned q, within limits
    pe, re = pose_error(T, fk_frames(m, r.q, tips))
    assert np.all(pe.max(axis=1)[r.success] <= cfg.position_tolerance)
    assert np.all(re.max(axis=1)[r.success] <= cfg.orientation_tolerance)
    assert np.all((r.q >= m.lower - 1e-12) & (r.q <= m.upper + 1e-12))
    assert np.all(r.status[r.success] == Status.CONVERGED)
    assert np.all(r.status[~r.success] == Status.NOT_CONVERGED)
    if dtype == "float64" and cpx is cupy_standin:  # the host rendering of the same text
        h = IKSolver(m, tips, cfg).solve(T)
        np.testing.assert_array_equal(r.q, h.q)
        np.testing.assert_array_equal(r.status, h.status)
    assert np.allclose(r.position_error, pe.max(axis=1), atol=1e-9)


def test_gpu_solver_bad_goals_seeds_timeout_cancel(cpx, case_models):
    m, _ = case_models["panda"]
    T, _ = _problems(m, list(m.tips), 6)
    T = T[:, 0].copy()
    T[1, 0, 0] = np.nan          # invalid goal
    T[2, :3, :3] *= 2.0          # not a rotation
    seeds = np.tile(m.neutral_q(), (6, 1))
    seeds[3, 0] = 10.0           # outside the limits
    g = _gpu_solver(m, None, IKConfig(num_seeds=4), xp=cpx)
    r = g.solve(T, seeds=seeds)
    assert list(r.status[[1, 2, 3]]) == [Status.INVALID_INPUT] * 3
    assert "NaN" in r.messages[1] and "outside its limits" in r.messages[3]
    assert np.all(np.isnan(r.position_error[[1, 2, 3]]))
    assert r.success[[0, 4, 5]].all()
    # an unreachable goal with no time: TIMED_OUT, not "no solution"
    far = T[[0]].copy()
    far[0, :3, 3] = [5.0, 0, 0]
    g2 = _gpu_solver(m, None, IKConfig(num_seeds=4, max_iterations=100000, **ENDLESS), xp=cpx)
    t0 = time.perf_counter()
    r2 = g2.solve(far, timeout=0.02)
    assert r2.status[0] == Status.TIMED_OUT and "timed out" in r2.messages[0]
    assert time.perf_counter() - t0 < 5.0
    # cancelled before it started: PREEMPTED
    r3 = g2.solve(far, should_stop=lambda: True)
    assert r3.status[0] == Status.PREEMPTED and not r3.success[0]


def test_gpu_solver_host_syncs_do_not_grow_with_batch_or_iterations(monkeypatch, case_models):
    cp = cupy_standin.install(monkeypatch)
    m, _ = case_models["ur"]
    counts = []
    for P, iters in ((5, 10), (300, 200)):
        T, _ = _problems(m, list(m.tips), P)
        g = _gpu_solver(m, None, IKConfig(num_seeds=4, max_iterations=iters), xp=cp,
                        graphs=False)
        cp.reset_stats()
        g.solve(T[:, 0])
        counts.append(dict(cp.stats))
    assert counts[0] == counts[1], counts
    assert counts[0]["to_host"] <= 3 and counts[0]["launches"] == 4, counts  # stamp prep lm select


def test_gpu_kinematics(cpx, case_models):
    from ros2_ik.backends.cuda import GpuKinematics

    m, tips = case_models["dual_arm"]
    q = m.random_q(np.random.default_rng(2), 25)
    k = GpuKinematics(m, list(tips), dtype="float64", xp=cpx)
    F = k.fk(cpx.asarray(q)).get()
    J = k.jacobian(cpx.asarray(q)).get()
    Jr, _ = jacobians_all(m, q, list(tips))
    assert np.abs(F - fk_frames(m, q, list(tips))).max() < 1e-12
    assert np.abs(J - Jr).max() < 1e-12


@pytest.mark.parametrize("name", ["panda", "ur", "dual_arm", "misc"])
def test_fused_on_a_gpu(models, name):
    """On a GPU: the fused float64 kernels against the host backend (one seed: the same rule
    on both; CUDA's sine and cosine and FMA contraction may move a row onto another path), and
    solve_pose on CuPy (the fused path where it covers the robot, else the xp reference)
    against solve_pose on NumPy; every success is FK-verified."""
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    m = models[name]
    tips = list(m.tips[:1]) if name != "dual_arm" else ["left_tool", "right_tool"]
    T, _ = _problems(m, tips, 200, seed=21)
    Tin = T[:, 0] if len(tips) == 1 else T
    cfg = IKConfig()
    cpu = solve_pose(m, Tin, tips=tips, config=cfg)
    if codegen.chain_of(m, tips) is not None:
        g = _gpu_solver(m, tips, cfg, dtype="float64", xp=cp).solve(cp.asarray(Tin))
        # FMA contraction and CUDA's sin/cos (within 2 ulp) may move a row onto another path
        assert np.mean(g.success == cpu.success) >= 0.98
        assert np.mean(g.iterations == cpu.iterations) >= 0.95
        same = g.success & cpu.success & (g.iterations == cpu.iterations)
        np.testing.assert_allclose(g.q[same], cpu.q[same], atol=1e-6)
    gx = solve_pose(m, cp.asarray(Tin), tips=tips, config=cfg)
    assert abs(gx.success.mean() - cpu.success.mean()) <= 0.03
    pe, re = pose_error(T, fk_frames(m, gx.q, tips))
    assert np.all(pe.max(axis=1)[gx.success] <= cfg.position_tolerance)
    assert np.all(re.max(axis=1)[gx.success] <= cfg.orientation_tolerance)


def test_cancel_and_deadline_while_the_kernel_runs():
    """On a GPU: should_stop turning true mid-solve, and a deadline, end a long kernel."""
    from conftest import cupy_or_skip

    cp = cupy_or_skip()
    m = load_robot("panda")
    far = np.tile(np.eye(4), (20000, 1, 1))
    far[:, 0, 3] = 5.0  # unreachable: every row iterates to its cap
    g = _gpu_solver(m, None, IKConfig(num_seeds=8, max_iterations=1_000_000), xp=cp)
    t0 = time.perf_counter()
    r = g.solve(far, should_stop=lambda: time.perf_counter() - t0 > 0.05)
    took = time.perf_counter() - t0
    assert np.all(r.status == Status.PREEMPTED) and took < 2.0, took
    t0 = time.perf_counter()
    r = g.solve(far, timeout=0.05)
    took = time.perf_counter() - t0
    assert np.all(r.status == Status.TIMED_OUT) and took < 2.0, took


def test_inputs_made_on_the_callers_stream_are_waited_for():
    """On a GPU: targets produced by kernels still running on the caller's stream (the legacy
    default stream here) must be complete before the solver's own stream reads them."""
    from conftest import cupy_or_skip
    from ros2_ik.backends.cuda import GpuKinematics

    cp = cupy_or_skip()
    m = load_robot("ur")
    q = cp.asarray(m.random_q(np.random.default_rng(9), 2_000_000))
    T = GpuKinematics(m, m.tips, dtype="float64", xp=cp).fk(q)[:, 0]  # queued, not finished
    T = T * cp.ones((1, 4, 4)) + cp.zeros((1, 4, 4))                   # and more work after it
    g = _gpu_solver(m, None, IKConfig(num_seeds=8, stall_iterations=5), xp=cp)
    r = g.solve(T)
    cp.cuda.Device().synchronize()
    r2 = g.solve(T)
    assert r.success.mean() >= 0.99 and np.array_equal(r.success, r2.success)


def test_xp_reference_path_on_a_device_uploads_once_and_syncs_rarely(monkeypatch):
    """The xp reference LM on a device array module: model constants are uploaded once (not
    per iteration); host syncs (explicit, and the implicit ones of the input checks at the top
    of a call) grow by at most one per 8 iterations (the "any row still active?" check)."""
    cp = cupy_standin.install(monkeypatch)
    monkeypatch.setattr(cupy_standin, "strict", False)
    m = load_robot("panda")
    T = fk_frames(m, m.random_q(np.random.default_rng(0), 20), m.tips)[:, 0]
    counts, results = [], []
    # classic LM (no non-monotone phase), whose rows do not amplify the roundings by which the
    # device's masked step differs from NumPy's: the answers are compared to 1e-12 below
    kw = dict(num_seeds=2, nonmonotone_iterations=0)
    for iters in (8, 40):
        cfg = IKConfig(max_iterations=iters, **kw)
        solve_pose(m, cp.asarray(T), config=cfg, backend="reference")  # uploads the tables
        cp.reset_stats()
        results.append(solve_pose(m, cp.asarray(T), config=cfg, backend="reference"))
        counts.append(dict(cp.stats))
    assert counts[0]["to_device"] == counts[1]["to_device"], counts
    syncs = [c["to_host"] + c["implicit"] for c in counts]
    assert syncs[1] - syncs[0] <= (40 - 8) // 8, counts
    ref = solve_pose(m, T, config=IKConfig(max_iterations=40, **kw), backend="reference")
    np.testing.assert_array_equal(results[1].success, ref.success)
    np.testing.assert_allclose(results[1].q, ref.q, atol=1e-12)


def test_small_batches_replay_a_captured_graph(cpx, case_models):
    """Small batches: a CUDA graph captured per shape gives the same answers as the four
    launches; a later call of the same shape with other goals, seeds and budget replays it."""
    m, _ = case_models["panda"]
    T, _ = _problems(m, list(m.tips), 20, seed=31)
    T = T[:, 0]
    cfg = IKConfig(num_seeds=8, stall_iterations=5)
    plain = _gpu_solver(m, None, cfg, xp=cpx, graphs=False)
    g = _gpu_solver(m, None, cfg, xp=cpx)
    seeds = np.tile(m.neutral_q(), (10, 1))
    seeds[3, 0] = 10.0  # outside the limits: INVALID_INPUT through the graph too
    for sl, sd in ((slice(0, 10), None), (slice(10, 20), None), (slice(10, 20), seeds)):
        a = plain.solve(T[sl], seeds=sd)
        if cpx is cupy_standin:
            cpx.reset_stats()
        b = g.solve(T[sl], seeds=sd, timeout=5.0)
        assert g.graph_error is None, g.graph_error
        np.testing.assert_array_equal(a.status, b.status)
        np.testing.assert_allclose(a.q, b.q, atol=1e-12)
    if cpx is cupy_standin:  # the last call: one graph launch, no kernel launched by itself
        assert cpx.stats["graph_launches"] == 1 and cpx.stats["launches"] == 0, cpx.stats
    assert b.status[3] == Status.INVALID_INPUT
    r = g.solve(T[:10], timeout=0.0)  # a new budget reaches the replayed kernels
    assert np.all(r.status == Status.TIMED_OUT), r.status
