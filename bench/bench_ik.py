"""IK benchmark of the solver issue: success, single-problem latency, success within a time
budget and batched throughput of ros2_ik on the bundled robots, next to peer IK libraries.

    python bench/bench_ik.py [--quick] [--robots panda,ur,dual_arm] [--peers rtb,ikpy,pin|none]
                             [--problems 500] [--batch 10000] [--seeds 8] [--threads N]
                             [--json FILE]
    make bench-ik ARGS="--quick"      (the peers, optional: make bench-peers-setup)

Protocol. Targets are reachable: FK of joint vectors drawn uniformly within the limits (fixed
RNG seed). Seeds: (a) mid-range ``model.neutral_q()``, (b) uniform random within limits; the
multi-seed rows add K-1 random seeds (ros2_ik's own, shared by every problem; the peers loop
over the same rows and stop at their own first success). Success = position error <= 1e-4 m,
orientation error <= 1e-3 rad and q within the limits, judged for every solver by ros2_ik's FK
(``fk_frames`` + ``pose_error``), not by the solver's flag; the flag is reported too ("flag")
and, for ros2_ik, must agree with the FK check (a WARNING is printed otherwise). "strict" is
the success of a re-solve with 1e-5 m / 1e-4 rad.

Solvers: "ros2_ik" = ``solve_pose`` (default backend: the host backend, compiled C++, where it
covers the robot); "ros2_ik Chain" = the prepared ``ChainSolver`` (built once per configuration,
untimed; one tip only); the "ros2_ik" rows labelled "reference" are ``solve_pose(...,
backend="reference")``, the NumPy reference; peers (see peers.py): "rtb" (Robotics Toolbox
ik_LM, C++), "ikpy" (SciPy least_squares), "pin" (a DLS loop in Python on Pinocchio's C++
kinematics). dual_arm has two-tip goals, which the peers skip.

Rows: "single" = one call per problem (wall clock of each call: median, p90, mean; solves/s =
problems / total time); "budget" = one call per problem with a per-problem budget (ros2_ik:
IKConfig(timeout, num_seeds=64), speed mode; peers: seeds tried in order until their own
success or the budget is spent), "succ" counts answers that are right AND came within the
budget; "batch" = one solve_pose call for all problems (peers have no batch API: their batch
rows are the sequential loops of their single rows, on one core, while ros2_ik's batch on the
host backend is cut into slices solved on a pool of ROS2_IK_THREADS worker threads, default
every CPU this process may use). A robot's compiled kernels are built with g++ on its first use
(afterwards loaded from the on-disk cache) and each configuration's solver is prepared on its
first call: every configuration is warmed up first. A peer loop stops after --peer-time
seconds; n says how many problems it got.
The ratio table compares ros2_ik with each peer on the peer's problems (the first n).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np

import peers as peerlib
from common import banner
from ros2_ik import load_robot, robots
from ros2_ik.api import ChainSolver, solve_pose
from ros2_ik.backends import host
from ros2_ik.kinematics import fk_frames, pose_error
from ros2_ik.ik import IKConfig
from ros2_ik.ik.seeds import expand_seeds, movable_coordinates

POS_TOL, ORI_TOL = 1e-4, 1e-3
STRICT_POS, STRICT_ORI = 1e-5, 1e-4
LIMIT_SLACK = 1e-12  # the same slack as the solver's own limit check
TIPS = {"dual_arm": ("left_tool", "right_tool")}
WARNINGS: list[str] = []


@dataclasses.dataclass
class Row:
    robot: str
    solver: str
    config: str
    n: int
    succ: float = math.nan
    flag: float = math.nan
    strict: float = math.nan
    med_ms: float = math.nan
    p90_ms: float = math.nan
    mean_ms: float = math.nan
    rate: float = math.nan
    note: str = ""
    ok: object = dataclasses.field(default=None, repr=False)     # (n,) verified, per problem
    times: object = dataclasses.field(default=None, repr=False)  # (n,) [s] single-call rows

    def table(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("ok", "times")}


# ----------------------------------------------------------------------------- verification
def verify(model, tips, targets, q, pos_tol=POS_TOL, ori_tol=ORI_TOL):
    """Independent check of answers q (n, nq) against targets (n, F, 4, 4): (ok, pe, re)."""
    q = np.asarray(q, dtype=float)
    finite = np.all(np.isfinite(q), axis=1)
    qs = np.where(finite[:, None], q, model.neutral_q())
    T = fk_frames(model, qs, list(tips))                      # (n, F, 4, 4)
    pe, re = pose_error(targets, T)                          # (n, F)
    pe, re = pe.max(axis=1), re.max(axis=1)
    inside = np.all((qs >= model.lower - LIMIT_SLACK) & (qs <= model.upper + LIMIT_SLACK), axis=1)
    ok = finite & inside & (pe <= pos_tol) & (re <= ori_tol)
    return ok, pe, re, inside


def check_agreement(tag, model, tips, targets, q, flag, pos_tol, ori_tol):
    """Verified success; warns (with the first cases) when ros2_ik's flag disagrees."""
    ok, pe, re, inside = verify(model, tips, targets, q, pos_tol, ori_tol)
    bad = np.nonzero(ok != flag)[0]
    if bad.size:
        ex = "; ".join(f"#{p}: flag={bool(flag[p])} FK={bool(ok[p])} pe={pe[p]:.3g} m "
                       f"re={re[p]:.3g} rad in_limits={bool(inside[p])}" for p in bad[:3])
        msg = (f"WARNING {tag}: solver flag and FK check disagree on {bad.size}/{len(ok)} "
               f"problems (tol {pos_tol:g} m / {ori_tol:g} rad): {ex}")
        WARNINGS.append(msg)
        print(msg, flush=True)
    return ok


# ----------------------------------------------------------------------------- ros2_ik runs
def _targets_arg(targets, tips):
    return targets[:, 0] if len(tips) == 1 else targets


def time_calls(n, call, nq):
    """Call ``call(i) -> (q (nq,), flag)`` for i < n, timing each: (q, flag, times)."""
    q = np.empty((n, nq))
    flag = np.zeros(n, dtype=bool)
    times = np.empty(n)
    gc.collect()
    for i in range(n):
        t0 = time.perf_counter()
        qi, fi = call(i)
        times[i] = time.perf_counter() - t0
        q[i], flag[i] = qi, fi
    return q, flag, times


def ours_single(model, tips, targets, seeds, cfg):
    """One solve_pose call per problem: (q, flag, times)."""
    tg = _targets_arg(targets, tips)
    tip_arg = tips[0] if len(tips) == 1 else list(tips)

    def call(i):
        r = solve_pose(model, tg[i:i + 1], tips=tip_arg, seeds=seeds[i], config=cfg)
        return r.q[0], bool(r.success[0])
    return time_calls(targets.shape[0], call, model.nq)


def chain_single(model, tips, targets, seeds, cfg):
    """One prepared ChainSolver.solve call per problem (the solver is built once, untimed)."""
    s = ChainSolver(model, tips[0], config=cfg)

    def call(i):
        r = s.solve(targets[i, 0], seed=seeds[i])
        return r.q[0], bool(r.success[0])
    for i in range(min(3, targets.shape[0])):  # warm-up (the first calls of this thread)
        call(i)
    return time_calls(targets.shape[0], call, model.nq)


def ours_batch(model, tips, targets, seeds, cfg, repeats=1, backend="auto"):
    tg = _targets_arg(targets, tips)
    tip_arg = tips[0] if len(tips) == 1 else list(tips)
    best = None
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        r = solve_pose(model, tg, tips=tip_arg, seeds=seeds, config=cfg, backend=backend)
        times.append(time.perf_counter() - t0)
        best = r
    return best.q, np.asarray(best.success, dtype=bool), float(np.median(times))


def warm(model, tips, targets, seeds, cfg, k=3):
    ours_single(model, tips, targets[:k], seeds[:k], cfg)
    ours_batch(model, tips, targets[:min(64, len(targets))], seeds[:min(64, len(targets))], cfg)


def strict_cfg(cfg):
    return dataclasses.replace(cfg, position_tolerance=STRICT_POS,
                               orientation_tolerance=STRICT_ORI)


def stats_row(robot, solver, config, ok, flag, times, strict=math.nan, note=""):
    t = np.asarray(times) * 1e3
    return Row(robot, solver, config, len(ok), float(np.mean(ok)),
               float(np.mean(flag)) if flag is not None else math.nan, strict,
               float(np.median(t)), float(np.percentile(t, 90)), float(np.mean(t)),
               len(ok) / (float(np.sum(t)) / 1e3), note, np.asarray(ok), np.asarray(times))


def run_ours(robot, model, tips, P, args, solver="ros2_ik"):
    """All ros2_ik rows of one robot: solve_pose, or (solver="ros2_ik Chain") the prepared
    ChainSolver's single-call rows."""
    chain = solver != "ros2_ik"
    rows = []
    n, B, K = args.problems, args.batch, args.seeds
    mid = np.tile(model.neutral_q(), (max(n, B), 1))
    cfg1 = IKConfig(max_iterations=args.max_iterations)
    cfgK = IKConfig(max_iterations=args.max_iterations, num_seeds=K)
    cfgB = IKConfig(timeout=args.budget, num_seeds=args.budget_seeds,
                    max_iterations=args.max_iterations)
    tg, rnd = P["targets"], P["rand_seeds"]

    def single(label, seeds, cfg, with_strict=True):
        tag = f"{solver}/{robot}/{label}"
        if chain:
            q, flag, times = chain_single(model, tips, tg[:n], seeds[:n], cfg)
            ok = check_agreement(tag, model, tips, tg[:n], q, flag, POS_TOL, ORI_TOL)
            strict = math.nan
            if with_strict:
                qs, fs, _ = chain_single(model, tips, tg[:n], seeds[:n], strict_cfg(cfg))
                strict = float(np.mean(check_agreement(tag + " strict", model, tips, tg[:n], qs,
                                                       fs, STRICT_POS, STRICT_ORI)))
            return q, flag, times, ok, strict
        warm(model, tips, tg, seeds, cfg)
        q, flag, times = ours_single(model, tips, tg[:n], seeds[:n], cfg)
        ok = check_agreement(tag, model, tips, tg[:n], q, flag, POS_TOL, ORI_TOL)
        strict = math.nan
        if with_strict:
            sc = strict_cfg(cfg)
            warm(model, tips, tg, seeds, sc, k=1)
            qs, fs, _ = ours_single(model, tips, tg[:n], seeds[:n], sc)
            strict = float(np.mean(check_agreement(tag + " strict", model, tips, tg[:n], qs, fs,
                                                   STRICT_POS, STRICT_ORI)))
        return q, flag, times, ok, strict

    # single-problem latency
    for label, seeds, cfg in (("single, 1 seed mid", mid, cfg1),
                              ("single, 1 seed random", rnd, cfg1),
                              (f"single, {K} seeds", mid, cfgK)):
        _, flag, times, ok, strict = single(label, seeds, cfg)
        rows.append(stats_row(robot, solver, label, ok, flag, times, strict))
        print(fmt_row(rows[-1]), flush=True)

    # success within a per-problem budget
    label = f"budget {args.budget * 1e3:g} ms, {args.budget_seeds} seeds"
    _, flag, times, ok, _ = single(label, mid, cfgB, with_strict=False)
    inb = ok & (times <= args.budget)
    rows.append(stats_row(robot, solver, label, inb, flag, times,
                          note=f"any-time succ {np.mean(ok):.1%}, over budget "
                               f"{np.mean(times > args.budget):.1%}"))
    print(fmt_row(rows[-1]), flush=True)
    if chain:
        return rows

    # batched throughput
    cfgS = IKConfig(max_iterations=args.max_iterations, num_seeds=args.budget_seeds,
                    stall_iterations=5)  # random restarts, the node's way
    cfgI = IKConfig(max_iterations=min(30, args.max_iterations))  # a tighter iteration cap
    for label, cfg in ((f"batch {B}, 1 seed mid", cfg1),
                       (f"batch {B}, 1 seed mid, {cfgI.max_iterations} it", cfgI),
                       (f"batch {B}, {K} seeds", cfgK),
                       (f"batch {B}, {args.budget_seeds} seeds, stall 5", cfgS)):
        tag = f"ours/{robot}/{label}"
        warm(model, tips, tg, mid, cfg, k=1)
        q, flag, el = ours_batch(model, tips, tg[:B], mid[:B], cfg, args.repeats)
        ok = check_agreement(tag, model, tips, tg[:B], q, flag, POS_TOL, ORI_TOL)
        qs, fs, _ = ours_batch(model, tips, tg[:B], mid[:B], strict_cfg(cfg))
        strict = float(np.mean(check_agreement(tag + " strict", model, tips, tg[:B], qs, fs,
                                               STRICT_POS, STRICT_ORI)))
        rows.append(Row(robot, "ros2_ik", label, B, float(np.mean(ok)), float(np.mean(flag)),
                        strict, rate=B / el, note=f"{el:.3g} s per call", ok=ok))
        print(fmt_row(rows[-1]), flush=True)

    # the NumPy reference backend, small batch only
    nb = min(args.ref_batch, B)
    if nb > 0:
        label = f"reference, batch {nb}, 1 seed mid"
        ours_batch(model, tips, tg[:2], mid[:2], cfg1, backend="reference")
        q, flag, el = ours_batch(model, tips, tg[:nb], mid[:nb], cfg1, backend="reference")
        ok = check_agreement(f"ours/{robot}/{label}", model, tips, tg[:nb], q, flag,
                             POS_TOL, ORI_TOL)
        rows.append(Row(robot, "ros2_ik", label, nb, float(np.mean(ok)), float(np.mean(flag)),
                        rate=nb / el, note=f"backend reference, {el:.3g} s per call"))
        print(fmt_row(rows[-1]), flush=True)

    return rows


# ----------------------------------------------------------------------------- peers
def peer_loop(peer, targets, seed_rows, args, *, budget=None, pos_tol=POS_TOL, ori_tol=ORI_TOL,
              seeds_per_problem=None):
    """Solve problems in order, each from its seed rows (stop at the peer's own success or the
    budget), until --peer-time is spent. Returns (q, flag, times) of the problems done."""
    n = targets.shape[0]
    q, flag, times = [], [], []
    t_row = time.perf_counter()
    for i in range(n):
        rows_i = seed_rows if seeds_per_problem is None else seeds_per_problem[i][None]
        T = targets[i, 0]
        t0 = time.perf_counter()
        qi, fi = None, False
        for s in rows_i:
            qi, fi = peer.solve(T, s, args.max_iterations, pos_tol, ori_tol)
            if fi or (budget is not None and time.perf_counter() - t0 >= budget):
                break
        times.append(time.perf_counter() - t0)
        q.append(qi)
        flag.append(fi)
        if time.perf_counter() - t_row > args.peer_time:
            break
    return np.array(q), np.array(flag, dtype=bool), np.array(times)


def run_peer(robot, peer, model, tips, P, args, ours_rows):
    rows = []
    n, K = min(args.peer_problems, args.problems), args.seeds
    tg, rnd = P["targets"][:n], P["rand_seeds"][:n]
    mid1 = model.neutral_q()[None]
    mov = movable_coordinates(model, tips)
    seedsK = expand_seeds(model, mid1, K, 0, np, mov)        # the rows ros2_ik uses
    seedsB = expand_seeds(model, mid1, args.budget_seeds, 0, np, mov)
    name = f"{peer.name} {peer.version}"
    peer.solve(tg[0, 0], mid1[0], args.max_iterations, POS_TOL, ORI_TOL)   # warm-up
    single = {}
    for label, rows_k, per_problem in (("single, 1 seed mid", mid1, None),
                                       ("single, 1 seed random", None, rnd),
                                       (f"single, {K} seeds", seedsK, None)):
        q, flag, times = peer_loop(peer, tg, rows_k, args, seeds_per_problem=per_problem)
        m = len(q)
        ok, *_ = verify(model, tips, tg[:m], q)
        qs, _, _ = peer_loop(peer, tg[:m], rows_k, args, pos_tol=STRICT_POS, ori_tol=STRICT_ORI,
                             seeds_per_problem=None if per_problem is None else per_problem[:m])
        ms = len(qs)
        strict = float(np.mean(verify(model, tips, tg[:ms], qs, STRICT_POS, STRICT_ORI)[0]))
        note = "" if ms == m else f"strict on {ms}"
        rows.append(stats_row(robot, name, label, ok, flag, times, strict, note))
        single[label] = rows[-1]
        print(fmt_row(rows[-1]), flush=True)

    label = f"budget {args.budget * 1e3:g} ms, {args.budget_seeds} seeds"
    q, flag, times = peer_loop(peer, tg, seedsB, args, budget=args.budget)
    ok, *_ = verify(model, tips, tg[:len(q)], q)
    rows.append(stats_row(robot, name, label, ok & (times <= args.budget), flag, times,
                          note=f"any-time succ {np.mean(ok):.1%}, over budget "
                               f"{np.mean(times > args.budget):.1%}"))
    print(fmt_row(rows[-1]), flush=True)

    B = args.batch
    for label, src in ((f"batch {B}, 1 seed mid", "single, 1 seed mid"),
                       (f"batch {B}, {K} seeds", f"single, {K} seeds")):
        s = single[src]
        rows.append(dataclasses.replace(s, config=label, med_ms=math.nan, p90_ms=math.nan,
                                        mean_ms=math.nan,
                                        note=f"no batch API: loop of {s.n}, 1 core"))
        print(fmt_row(rows[-1]), flush=True)
    return rows


# ----------------------------------------------------------------------------- output
HEAD = (f"{'robot':9s} {'solver':16s} {'config':34s} {'n':>6s} {'succ':>7s} {'flag':>7s} "
        f"{'strict':>7s} {'med ms':>8s} {'p90 ms':>8s} {'mean ms':>8s} {'solves/s':>10s}  note")


def _pct(x):
    return f"{x:7.1%}" if x == x else f"{'-':>7s}"


def _num(x, w, f):
    return f"{x:{w}{f}}" if x == x else f"{'-':>{w}s}"


def fmt_row(r: Row) -> str:
    return (f"{r.robot:9s} {r.solver:16s} {r.config:34s} {r.n:6d} {_pct(r.succ)} "
            f"{_pct(r.flag)} {_pct(r.strict)} {_num(r.med_ms, 8, '.3f')} "
            f"{_num(r.p90_ms, 8, '.3f')} {_num(r.mean_ms, 8, '.3f')} "
            f"{_num(r.rate, 10, '.4g')}  {r.note}")


def _ratio(a, b):
    return a / b if (a == a and b == b and b != 0) else math.nan


def ratio_table(rows):
    ours = {(r.solver, r.robot, r.config): r for r in rows if r.solver.startswith("ros2_ik")}
    solvers = sorted({k[0] for k in ours})
    out = [f"{'robot':9s} {'ours':14s} {'peer':16s} {'config':34s} {'succ o/p':>9s} "
           f"{'median o/p':>11s} {'solves/s o/p':>13s}"]
    for r in rows:
        if r.solver.startswith("ros2_ik"):
            continue
        for so in solvers:
            o = ours.get((so, r.robot, r.config))
            if o is None:
                continue
            # success and median latency on the same problems (the peer's may be fewer)
            succ = float(np.mean(o.ok[:r.n])) if o.ok is not None else o.succ
            med = float(np.median(o.times[:r.n])) * 1e3 if o.times is not None else o.med_ms
            out.append(f"{r.robot:9s} {so:14s} {r.solver:16s} {r.config:34s} "
                       f"{_num(_ratio(succ, r.succ), 9, '.3f')} "
                       f"{_num(_ratio(med, r.med_ms), 11, '.3f')} "
                       f"{_num(_ratio(o.rate, r.rate), 13, '.3g')}")
    return "\n".join(out)


# ----------------------------------------------------------------------------- main
def make_problems(model, tips, n, seed):
    rng = np.random.default_rng(seed)
    q_true = model.random_q(rng, n)
    targets = np.ascontiguousarray(fk_frames(model, q_true, list(tips)))   # (n, F, 4, 4)
    rand_seeds = model.random_q(rng, n)
    return dict(q_true=q_true, targets=targets, rand_seeds=rand_seeds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (about 2 minutes with the peers on 2 cores)")
    ap.add_argument("--robots", default="panda,ur,dual_arm")
    ap.add_argument("--peers", default="rtb,ikpy,pin",
                    help=f"comma list of {','.join(peerlib.NAMES)}, or 'none'")
    ap.add_argument("--problems", type=int, help="problems of the single-call rows (500)")
    ap.add_argument("--batch", type=int, help="problems of the batch rows (10000)")
    ap.add_argument("--seeds", type=int, default=8, help="seeds of the multi-seed rows")
    ap.add_argument("--budget", type=float, default=0.005, help="per-problem budget [s]")
    ap.add_argument("--budget-seeds", type=int, default=64)
    ap.add_argument("--max-iterations", type=int, default=100)
    ap.add_argument("--ref-batch", type=int, help="batch of the reference backend's row (100)")
    ap.add_argument("--peer-problems", type=int, help="problems per peer row (200)")
    ap.add_argument("--peer-time", type=float, help="seconds per peer loop at most (10)")
    ap.add_argument("--repeats", type=int, help="timed runs of each batch call (3)")
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--threads", type=int,
                    help="worker threads of ros2_ik's batches on the host backend (sets "
                         "ROS2_IK_THREADS; default: its value, else every CPU this process "
                         "may use)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    q = args.quick
    for k, full, quick in (("problems", 500, 200), ("batch", 10_000, 2000),
                           ("ref_batch", 100, 20), ("peer_problems", 200, 100),
                           ("peer_time", 10.0, 3.0), ("repeats", 3, 1)):
        if getattr(args, k) is None:
            setattr(args, k, quick if q else full)
    t_start = time.perf_counter()

    peer_names = [] if args.peers in ("", "none") else args.peers.split(",")
    for p in peer_names:
        if p not in peerlib.NAMES:
            ap.error(f"unknown peer {p!r}; choose from {', '.join(peerlib.NAMES)}")
    site_dir = peerlib.add_peer_site() if peer_names else None

    print(banner("bench_ik" + (" --quick" if q else "")))
    load = os.getloadavg()
    print("load average %.2f %.2f %.2f at start" % load + (
        "" if load[0] < 0.5 else f" -- BUSY machine ({os.cpu_count()} cores): other processes "
        f"skew the timings, most of all ros2_ik's multi-threaded kernels"))
    if args.threads:
        os.environ["ROS2_IK_THREADS"] = str(args.threads)  # read by the host backend per call
    print(f"host backend threads {host.threads()} (ros2_ik's batches; ROS2_IK_THREADS); peers "
          "run on 1 core")
    print(f"problems {args.problems}, batch {args.batch}, multi-seed K={args.seeds}, budget "
          f"{args.budget * 1e3:g} ms / {args.budget_seeds} seeds, max_iterations "
          f"{args.max_iterations}, rng seed {args.rng_seed}; success {POS_TOL:g} m / "
          f"{ORI_TOL:g} rad, strict {STRICT_POS:g} m / {STRICT_ORI:g} rad, by ros2_ik FK")
    if peer_names:
        print(f"peers from {site_dir}" if site_dir else
              "peers: build/venv-peers not found (make bench-peers-setup); trying sys.path")

    rows = []
    for robot in args.robots.split(","):
        model = load_robot(robot)
        tips = TIPS.get(robot, (robots.ROBOTS[robot]["tip"],))
        P = make_problems(model, tips, max(args.problems, args.batch), args.rng_seed)
        print(f"\n-- {robot}: {model.nq} DOF, tips {', '.join(tips)}")
        print(HEAD, flush=True)
        t0 = time.perf_counter()
        ours = run_ours(robot, model, tips, P, args)
        if len(tips) > 1:
            print(f"{robot:9s} {'ros2_ik Chain':16s} skipped: ChainSolver takes one tip",
                  flush=True)
        else:
            try:
                ours += run_ours(robot, model, tips, P, args, solver="ros2_ik Chain")
            except Exception as e:  # noqa: BLE001 - an API this bench does not know yet
                print(f"{robot:9s} {'ros2_ik Chain':16s} skipped: {type(e).__name__}: {e}",
                      flush=True)
        rows += ours
        print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)
        for pname in peer_names:
            t0 = time.perf_counter()
            try:
                def ref(qq, _m=model, _t=tips):
                    return fk_frames(_m, qq[None], [_t[0]])[0, 0]

                peer = peerlib.make(pname, model, robot, tips, str(robots.path(robot)), ref,
                                    np.random.default_rng(args.rng_seed + 1))
            except peerlib.Skip as e:
                print(f"{robot:9s} {pname:16s} skipped: {e}", flush=True)
                continue
            except Exception as e:  # noqa: BLE001 - a peer's own failure must not stop the bench
                print(f"{robot:9s} {pname:16s} skipped: {type(e).__name__}: {e}", flush=True)
                continue
            print(f"{robot:9s} {pname} {peer.version}: FK max deviation from ros2_ik "
                  f"{peer.fk_deviation:.2e}", flush=True)
            try:
                rows += run_peer(robot, peer, model, tips, P, args, ours)
            except Exception as e:  # noqa: BLE001
                print(f"{robot:9s} {pname:16s} failed: {type(e).__name__}: {e}", flush=True)
            print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)

    if any(not r.solver.startswith("ros2_ik") for r in rows):
        print("\n-- ratios ros2_ik / peer on the peer's problems (succ > 1: ros2_ik solves more; "
              "median < 1: ros2_ik is faster; solves/s > 1: ros2_ik has more throughput; batch "
              "rows: ros2_ik's batch call vs the peer's loop)")
        print(ratio_table(rows))
    print(f"\nflag/FK disagreements: {len(WARNINGS)}" + ("" if not WARNINGS else
          " -- see the WARNING lines above"))
    print(f"total {time.perf_counter() - t_start:.1f} s; load average %.2f %.2f %.2f at the end"
          % os.getloadavg())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": [r.table() for r in rows],
                       "warnings": WARNINGS}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
