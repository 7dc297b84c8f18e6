"""GPU benchmark: the fused generated kernels (GpuSolver) vs the CuPy xp reference path vs the
CPU (solve_pose on the host backend, compiled C++), on the 6-DOF (ur) and 7-DOF (panda)
arms and a two-tip dual_arm problem; batch-1 latency; FK throughput; kernel resources.

    python bench/bench_gpu.py [--sizes 1,1000,100000,1000000,10000000] [--robots ur,panda,dual_arm]
                              [--seeds 1,8] [--dtype float32] [--out bench/results/gpu.txt]
    python bench/bench_gpu.py --report      (no GPU needed: registers/stack/spills per kernel,
                                             from an sm_90 build through NVRTC or nvcc)

Protocol. Targets are reachable: FK (float64, on the device) of joint vectors drawn uniformly
within the limits (fixed RNG seed); every problem starts from the mid-range seed, restarts use
ros2_ik's shared random seeds with stall_iterations=5, max 100 iterations. Success = position
error <= 1e-4 m and orientation error <= 1e-3 rad within the limits: the solver's own flag is a
float64 FK check on the device, and a sample of up to 20,000 problems per row is re-checked on
the CPU with fk_frames + pose_error ("indep" column; a mismatch is printed as a WARNING).
Times are end to end per call (targets already on the device; results copied to the host),
median over repeats after a warm-up call (which also compiles the kernels). Rows too slow for a
path (xp reference beyond 10k, CPU beyond 100k) are skipped and say so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import banner

from ros2_ik import load_robot
from ros2_ik.kinematics.fk import fk_frames
from ros2_ik.kinematics.se3 import pose_error
from ros2_ik.model import MAX_BATCH
from ros2_ik.ik import IKConfig
from ros2_ik.api import solve_pose

TIPS = {"ur": None, "panda": None, "dual_arm": ("left_tool", "right_tool")}


def out(line=""):
    print(line, flush=True)
    if OUT:
        with open(OUT, "a") as f:
            f.write(line + "\n")


OUT = None
_cp = None


def report():
    from ros2_ik.backends import codegen
    from ros2_ik.backends import cubin as gc

    out(f"== generated kernels: sm_90 resources ({gc.tools()})")
    out(f"{'robot':10s} {'dtype':8s} {'kernel':12s} {'regs':>5s} {'stack B':>8s} "
        f"{'spill st/ld B':>14s}")
    for name, tips in TIPS.items():
        m = load_robot(name)
        ch = codegen.chain_of(m, list(tips or m.tips))
        for dt in ("float32", "float64"):
            for src in (codegen.solve_source(ch, dt), codegen.frames_source(ch, dt)):
                reports, tool = gc.kernel_report(src)
                for r in reports:
                    out(f"{name:10s} {dt:8s} {r.name:12s} {r.registers:5d} {r.stack:8d} "
                        f"{r.spill_stores:6d}/{r.spill_loads:<6d} ({tool})")


def targets_on_device(cp, m, tips, P, seed=1):
    from ros2_ik.backends.cuda import GpuKinematics

    rng = np.random.default_rng(seed)
    kin = GpuKinematics(m, tips, dtype="float64", xp=cp)
    chunks = []
    for s in range(0, P, 2_000_000):
        q = m.random_q(rng, min(P, s + 2_000_000) - s)
        chunks.append(kin.fk(cp.asarray(q)))
    return cp.concatenate(chunks) if len(chunks) > 1 else chunks[0]


def independent_check(m, tips, T_dev, res, cap=20_000):
    idx = np.linspace(0, len(res) - 1, min(cap, len(res))).astype(np.int64)
    T = T_dev[_cp.asarray(idx)].get()
    q = res.q[idx]
    pe, re = pose_error(T, fk_frames(m, q, tips))
    inl = np.all((q >= m.lower - 1e-12) & (q <= m.upper + 1e-12), axis=1)
    ok = (pe.max(axis=1) <= 1e-4) & (re.max(axis=1) <= 1e-3) & inl
    if np.any(ok != res.success[idx]):
        out(f"WARNING: solver flag disagrees with the independent FK check on "
            f"{int(np.sum(ok != res.success[idx]))} of {len(idx)} sampled problems")
    return float(ok.mean())


def timed(fn, sync, repeats):
    fn()
    sync()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), r


class _Chunked:
    """IKResult-like concatenation of several solve calls (batches above MAX_BATCH rows)."""

    def __init__(self, parts):
        self.q = np.concatenate([p.q for p in parts])
        self.success = np.concatenate([p.success for p in parts])

    def __len__(self):
        return len(self.success)


def bench_solve(cp, sizes, robots, seeds_list, dtype):
    from ros2_ik.backends import host
    from ros2_ik.backends.cuda import GpuSolver

    global _cp
    _cp = cp
    rows = []
    out(f"\n== IK: fused (GpuSolver, {dtype}) vs xp reference on CuPy vs CPU (host backend, "
        f"{host.threads()} threads), end to end per call")
    out(f"{'robot':9s} {'K':>2s} {'batch':>9s} {'path':7s} {'time':>10s} {'solves/s':>11s} "
        f"{'success':>8s} {'indep':>7s}  note")
    for name in robots:
        m = load_robot(name)
        tips = list(TIPS[name] or m.tips)
        for K in seeds_list:
            cfg = IKConfig(num_seeds=K, stall_iterations=5 if K > 1 else 0)
            gs = GpuSolver(m, tips, cfg, dtype=dtype, xp=cp)
            per_call = max(1, MAX_BATCH // K)
            for P in sizes:
                try:
                    T = targets_on_device(cp, m, tips, P)
                except Exception as exc:  # noqa: BLE001 - out of memory at the largest sizes
                    out(f"{name:9s} {K:2d} {P:9d} targets failed: {type(exc).__name__}: {exc}")
                    continue
                Tin = T[:, 0] if len(tips) == 1 else T

                def fused():
                    if P <= per_call:
                        return gs.solve(Tin)
                    return _Chunked([gs.solve(Tin[s:s + per_call])
                                     for s in range(0, P, per_call)])

                reps = 2 if P >= 1_000_000 else (7 if P >= 1000 else 31)
                try:
                    t, r = timed(fused, cp.cuda.Device().synchronize, reps)
                except Exception as exc:  # noqa: BLE001
                    out(f"{name:9s} {K:2d} {P:9d} fused failed: {type(exc).__name__}: {exc}")
                    continue
                ind = independent_check(m, tips, T, r)
                rows.append((name, K, P, "fused", t, r.success.mean()))
                dev = gs.last_device_time if P <= per_call else None
                out(f"{name:9s} {K:2d} {P:9d} {'fused':7s} {t * 1e3:8.3f}ms {P / t:11.4g} "
                    f"{100 * r.success.mean():7.3f}% {100 * ind:6.2f}%  " + (
                        f"device {dev * 1e3:.3f} ms = {P / dev:.4g}/s" if dev else ""))
                if P <= 10_000:
                    try:
                        tx, rx = timed(lambda: solve_pose(m, Tin, tips=tips, config=cfg,
                                                          backend="reference"),
                                       cp.cuda.Device().synchronize, 1 if P > 100 else 3)
                        rows.append((name, K, P, "xp", tx, rx.success.mean()))
                        out(f"{name:9s} {K:2d} {P:9d} {'xp':7s} {tx * 1e3:8.3f}ms "
                            f"{P / tx:11.4g} {100 * rx.success.mean():7.3f}%          "
                            f"fused {tx / t:.1f}x faster")
                    except Exception as exc:  # noqa: BLE001
                        out(f"{name:9s} {K:2d} {P:9d} xp failed: {type(exc).__name__}: {exc}")
                if P <= 100_000:
                    Th = Tin.get()
                    tc, rc = timed(lambda: solve_pose(m, Th, tips=tips, config=cfg),
                                   lambda: None, 1 if P > 1000 else 5)
                    rows.append((name, K, P, "cpu", tc, rc.success.mean()))
                    out(f"{name:9s} {K:2d} {P:9d} {'cpu':7s} {tc * 1e3:8.3f}ms {P / tc:11.4g} "
                        f"{100 * rc.success.mean():7.3f}%          fused {tc / t:.1f}x faster")
                T = Tin = None  # free the device memory before the next size
                cp.get_default_memory_pool().free_all_blocks()
    return rows


def bench_latency(cp, dtype):
    from ros2_ik.backends.cuda import GpuSolver
    from ros2_ik.api import ChainSolver

    out(f"\n== batch 1: latency of one goal (node settings: 32 seeds, stall 5), {dtype}; "
        "with and without the captured CUDA graph, interleaved")
    for name in ("ur", "panda"):
        m = load_robot(name)
        cfg = IKConfig(num_seeds=32, stall_iterations=5)
        solvers = {g: GpuSolver(m, None, cfg, dtype=dtype, xp=cp, graphs=g)
                   for g in (True, False)}
        T = fk_frames(m, m.random_q(np.random.default_rng(4), 300), m.tips)[:, 0]
        times = {True: [], False: []}
        ok = {True: 0, False: 0}
        for gs in solvers.values():
            gs.solve(T[:1])
        for i in range(300):
            for g, gs in solvers.items():  # interleaved: the same load for both
                t0 = time.perf_counter()
                r = gs.solve(T[i:i + 1])
                times[g].append(time.perf_counter() - t0)
                ok[g] += int(r.success[0])
        ts = times[True]
        out(f"{name:6s} GPU without graph: median {np.median(times[False]) * 1e3:.3f} ms, p90 "
            f"{np.percentile(times[False], 90) * 1e3:.3f} ms, success {ok[False]}/300")
        ok = ok[True]
        cs = ChainSolver(m, config=cfg)
        cs.solve(T[0])
        tc = []
        for i in range(300):
            t0 = time.perf_counter()
            cs.solve(T[i])
            tc.append(time.perf_counter() - t0)
        out(f"{name:6s} GPU with graph:    median {np.median(ts) * 1e3:.3f} ms  p90 "
            f"{np.percentile(ts, 90) * 1e3:.3f} ms  success {ok}/300   CPU ChainSolver median "
            f"{np.median(tc) * 1e3:.3f} ms")


def bench_fk(cp):
    from ros2_ik.backends.cuda import GpuKinematics

    out("\n== FK / Jacobian throughput (device time, CUDA events; q on the device)")
    for name in ("panda", "dual_arm"):
        m = load_robot(name)
        tips = list(TIPS[name] or m.tips)
        for dtype in ("float32", "float64"):
            k = GpuKinematics(m, tips, dtype=dtype, xp=cp)
            for B in (1_000_000, 10_000_000):
                q = cp.asarray(m.random_q(np.random.default_rng(0), B), dtype=dtype)
                for what, fn in (("fk", k.fk), ("jacobian", k.jacobian)):
                    fn(q)
                    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                    e0.record()
                    n = 5
                    for _ in range(n):
                        o = fn(q)
                    e1.record()
                    e1.synchronize()
                    dt = cp.cuda.get_elapsed_time(e0, e1) / 1e3 / n
                    out(f"{name:9s} {dtype:8s} {what:9s} batch {B:9d}: {dt * 1e3:8.3f} ms  "
                        f"{B * len(tips) / dt:10.4g} tip frames/s")
                    del o
                del q
                cp.get_default_memory_pool().free_all_blocks()


def bench_tuning(cp, dtype):
    """Launch shapes and register caps of the LM kernel on panda, batch 1M."""
    from ros2_ik.backends.cuda import GpuSolver

    out(f"\n== LM kernel variants: panda, batch 1,000,000, {dtype} (block, register cap)")
    m = load_robot("panda")
    T = targets_on_device(cp, m, list(m.tips), 1_000_000)[:, 0]
    for K, variants in ((1, ((128, 128), (256, 128), (128, 160))),
                        (8, ((128, 128), (256, 128), (128, 160))),
                        (32, ((128, 128), (256, 128)))):
        cfg = IKConfig(num_seeds=K, stall_iterations=5 if K > 1 else 0)
        for block, regs in variants:
            try:
                g = GpuSolver(m, None, cfg, dtype=dtype, xp=cp, block=block, max_registers=regs)
                t, r = timed(lambda: g.solve(T), cp.cuda.Device().synchronize, 3)
                out(f"K={K} block {block:3d} maxreg {str(regs):4s} regs {g._lm.num_regs:3d} "
                    f"local {g._lm.local_size_bytes:4d} B: {t * 1e3:8.2f} ms "
                    f"{1e6 / t:10.4g} solves/s (device {g.last_device_time * 1e3:.2f} ms = "
                    f"{1e6 / g.last_device_time:.4g}/s), success {100 * r.success.mean():.3f}%")
            except Exception as exc:  # noqa: BLE001
                out(f"K={K} block {block} maxreg {regs}: {type(exc).__name__}: {exc}")
    T = None
    cp.get_default_memory_pool().free_all_blocks()


def kernel_resources(cp, dtype):
    from ros2_ik.backends.cuda import GpuSolver

    out(f"\n== kernel resources on this device ({dtype})")
    dev = cp.cuda.runtime.getDeviceProperties(0)
    out(f"SMs {dev['multiProcessorCount']}, regs/SM {dev['regsPerMultiprocessor']}, "
        f"max threads/SM {dev['maxThreadsPerMultiProcessor']}")
    for name in ("ur", "panda", "dual_arm"):
        m = load_robot(name)
        g = GpuSolver(m, list(TIPS[name] or m.tips), IKConfig(), dtype=dtype, xp=cp)
        for kn, kern in (("lm", g._lm), ("select", g._select)):
            regs = getattr(kern, "num_regs", "?")
            local = getattr(kern, "local_size_bytes", "?")
            occ = "?"
            try:
                from cupy.cuda import driver

                from ros2_ik.backends.cuda import BLOCK

                blocks = driver.occupancyMaxActiveBlocksPerMultiprocessor(kern.kernel.ptr, BLOCK,
                                                                          0)
                occ = f"{blocks * BLOCK / dev['maxThreadsPerMultiProcessor']:.3f}"
            except Exception as exc:  # noqa: BLE001
                occ = f"? ({type(exc).__name__})"
            out(f"{name:9s} {kn:7s} registers {regs}, local {local} B, occupancy {occ}")


def main(argv=None):
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,1000,100000,1000000,10000000")
    ap.add_argument("--robots", default="ur,panda,dual_arm")
    ap.add_argument("--seeds", default="1,8")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--out", default=None)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--only", default="resources,latency,fk,tuning,solve")
    a = ap.parse_args(argv)
    OUT = a.out
    if OUT:
        open(OUT, "w").close()
    out(banner("bench_gpu"))
    out(f"load average {os.getloadavg()}")
    if a.report:
        report()
        return 0
    from ros2_ik.backends.cuda import get_cupy

    cp = get_cupy()
    out(f"cupy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, driver "
        f"{cp.cuda.runtime.driverGetVersion()}")
    only = a.only.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    if "resources" in only:
        kernel_resources(cp, a.dtype)
    if "tuning" in only:
        bench_tuning(cp, a.dtype)
    if "latency" in only:
        bench_latency(cp, a.dtype)
    if "fk" in only:
        bench_fk(cp)
    if "solve" in only:
        bench_solve(cp, sizes, a.robots.split(","), [int(k) for k in a.seeds.split(",")],
                    a.dtype)
    out(f"\nload average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
