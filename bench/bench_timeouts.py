"""How far past its timeout a call returns (the hardened core's promise: any call returns
within timeout + 50 ms, the unfinished problems TIMED_OUT, the finished ones kept; a call whose
up-front work cannot fit the budget is refused at once, saying how to split it).

    python bench/bench_timeouts.py [--sizes 1000,10000,100000,1000000] [--repeats 3]
    python bench/bench_timeouts.py --matrix-only [--solvers dls,ccd,ccd+dls]
        [--seeds 1,32,1000] [--problems 1,1000,100000] [--matrix-timeouts 0,0.01,0.05]

Two parts:

- by batch size: for each robot, path ("compiled": the default backend, the host backend's
  compiled C++ where it covers the robot; "reference": ``backend="reference"``), batch size and
  timeout, the median and largest overrun (return time - timeout) over the repeats, and the
  share of problems solved. A batch whose result rows alone (one per problem, written before
  solving) would take longer than the timeout + 20 ms is refused up front with an
  InvalidInputError that says so ("refused"); the floor column is the time of a call with a
  timeout of 1 ms (that cost, where not refused).
- the matrix (the Panda): solve_pose, solve_ik and trajectory_seed x backend ("host",
  "reference") x solver x seeds per problem x problems (trajectory nodes) x collision avoidance
  (off; on with a box in the world), half the goals out of reach (their seeds run until the
  deadline), each row timed at every timeout of ``--matrix-timeouts``: the worst overrun of the
  row, the timeout it came at, and what the calls answered (statuses, or "refused" and why).
  Rows past the 50 ms goal are counted at the end; ``--strict`` makes that the exit status.

Timings are reported (the load average is printed with them), not asserted unless --strict.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np

from bench.common import banner
from ros2_ik import load_robot
from ros2_ik.errors import InvalidInputError
from ros2_ik.ik import IKConfig
from ros2_ik.api import fk_frames, prebuild, solve_pose, trajectory_seed


def overrun(call, timeout):
    """(return time - timeout, the result or None where the call was refused up front)."""
    t0 = time.perf_counter()
    try:
        r = call()
    except InvalidInputError:  # the timeout is too short for the batch's result rows
        r = None
    return time.perf_counter() - t0 - timeout, r


#: the promise the matrix measures against [s]
GOAL = 0.05


def _status_text(r) -> str:
    """The statuses of a result, e.g. ``1:12,-6:988`` (value: count)."""
    vals, counts = np.unique(np.asarray(r.status), return_counts=True)
    return ",".join(f"{int(v)}:{int(c)}" for v, c in zip(vals, counts))


def matrix(args) -> tuple[float, int]:
    """The solvers x seeds x problems matrix; returns (worst overrun, rows past GOAL)."""
    from ros2_ik.api import solve_ik
    from ros2_ik.ik.objectives import PoseObjective
    from ros2_ik.world import Obstacle, World

    m = load_robot("panda")
    tip = "panda_link8"
    sizes = [int(x) for x in args.problems.split(",")]
    q = m.random_q(np.random.default_rng(7), max(sizes))
    T = np.asarray(fk_frames(m, q, [tip]))[:, 0].copy()
    T[1::2, 0, 3] += 3.0  # every other goal out of reach
    world = World([Obstacle.make("box", "box", (0.2, 0.2, 0.2), (0.6, 0.0, 0.3, 0, 0, 0, 1))])
    timeouts = [float(t) for t in args.matrix_timeouts.split(",")]

    def call(kind, backend, solver, K, n, coll, timeout):
        cfg = IKConfig(num_seeds=K, timeout=timeout, max_iterations=10**6,
                       avoid_collisions=coll,
                       solve_mode="distance" if kind == "trajectory_seed" else "speed")
        kw = dict(world=world) if coll else {}
        if kind == "solve_pose":
            return lambda: solve_pose(m, T[:n], tips=tip, config=cfg, solver=solver,
                                      backend=backend, **kw)
        if kind == "solve_ik":
            obj = PoseObjective(m, tip, T[:n])
            return lambda: solve_ik(m, [obj], config=cfg, solver=solver, backend=backend)
        return lambda: trajectory_seed(m, T[[0, 2]], [0, n - 1], tip=tip, config=cfg,
                                       solver=solver, backend=backend, **kw)

    print(f"\nmatrix: the Panda, half the goals out of reach, max_iterations 1e6, timeouts "
          f"{timeouts} s, goal {1e3 * GOAL:.0f} ms past the timeout")
    print(f"{'call':15} {'backend':9} {'solver':7} {'seeds':>5} {'problems':>8} {'coll':>4} "
          f"{'worst':>8} {'at':>6}  answers")
    worst, over = -1.0, 0
    for kind in args.calls.split(","):
        for backend in ("host", "reference"):
            for solver in args.solvers.split(","):
                for K in (int(x) for x in args.seeds.split(",")):
                    for n in sizes:
                        for coll in (False, True):
                            if (coll and (solver == "ccd" or kind == "solve_ik")) or (
                                    kind == "trajectory_seed" and n < 2):
                                continue
                            try:  # prepares the row's solver (not timed)
                                call(kind, backend, solver, K, min(n, 2), coll, 0.5)()
                            except InvalidInputError:
                                pass
                            row, at, text = -1.0, 0.0, ""
                            for t in timeouts:
                                for _ in range(args.repeats):
                                    o, r = overrun(call(kind, backend, solver, K, n, coll, t), t)
                                    if o >= row:
                                        row, at = o, t
                                        text = _status_text(r) if r is not None else "refused"
                            worst = max(worst, row)
                            over += row > GOAL
                            flag = "  <-- past the goal" if row > GOAL else ""
                            print(f"{kind:15} {backend:9} {solver:7} {K:>5} {n:>8} "
                                  f"{'yes' if coll else 'no':>4} {1e3 * row:>+6.0f}ms "
                                  f"{t_text(at):>6}  {text[:60]}{flag}", flush=True)
    return worst, over


def t_text(t: float) -> str:
    return f"{1e3 * t:.0f}ms"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--timeouts", default="0.05,0.3,1.0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--robots", default="ur,panda")
    ap.add_argument("--matrix-only", action="store_true", help="only the solver matrix")
    ap.add_argument("--no-matrix", action="store_true", help="only the batch-size part")
    ap.add_argument("--calls", default="solve_pose,solve_ik,trajectory_seed")
    ap.add_argument("--solvers", default="dls,ccd,ccd+dls")
    ap.add_argument("--seeds", default="1,32,1000")
    ap.add_argument("--problems", default="1,1000,100000")
    ap.add_argument("--matrix-timeouts", default="0,0.01,0.05")
    ap.add_argument("--strict", action="store_true",
                    help=f"exit status 1 when a matrix row is past the {1e3 * GOAL:.0f} ms goal")
    args = ap.parse_args(argv)
    print(banner("bench_timeouts: return time past the timeout"))
    print(f"load average before: {os.getloadavg()}")
    robots = args.robots.split(",")
    prebuild(robots if not args.matrix_only else ["panda"])  # kernels built before any timing
    if args.matrix_only:
        worst, over = matrix(args)
        print(f"\nworst overrun of the matrix: {1e3 * worst:+.0f} ms; rows past the "
              f"{1e3 * GOAL:.0f} ms goal: {over}")
        print(f"load average after: {os.getloadavg()}")
        return 1 if args.strict and over else 0
    sizes = [int(s) for s in args.sizes.split(",")]
    timeouts = [float(t) for t in args.timeouts.split(",")]
    print(f"\n{'robot':6} {'path':9} {'problems':>9} {'floor':>8} {'timeout':>8} "
          f"{'overrun p50':>12} {'max':>8} {'solved':>7}")
    worst = 0.0
    for name in robots:
        m = load_robot(name)
        tip = m.tips[0]
        q = m.random_q(np.random.default_rng(0), max(sizes))
        T_all = np.asarray(fk_frames(m, q, [tip]))[:, 0]
        for backend in ("auto", "reference"):
            fast = backend == "auto"
            # untimed: prepares this path's solver (and the host backend's worker threads)
            solve_pose(m, T_all[:64], tips=tip, config=IKConfig(), backend=backend)
            for n in sizes:
                if not fast and n > 100_000:
                    continue  # the reference path: 1e5 shows the same
                T = T_all[:n]
                floor, r = overrun(lambda: solve_pose(
                    m, T, tips=tip, config=IKConfig(timeout=1e-3), backend=backend), 0.0)
                floor_s = f"{1e3 * floor:>6.0f}ms" if r is not None else "refused"
                for t in timeouts:
                    runs = [overrun(lambda: solve_pose(
                        m, T, tips=tip, config=IKConfig(timeout=t), backend=backend), t)
                        for _ in range(args.repeats)]
                    over = [o for o, _ in runs]
                    done = [r.success.mean() for _, r in runs if r is not None]
                    solved = (f"{np.mean(done):>7.3f}" if done else "")
                    if len(done) < len(runs):
                        solved += f" ({len(runs) - len(done)} of {len(runs)} refused)"
                    worst = max(worst, max(over))
                    print(f"{name:6} {'compiled' if fast else 'reference':9} {n:>9} "
                          f"{floor_s:>8} {t:>7.2f}s "
                          f"{1e3 * statistics.median(over):>+10.0f}ms"
                          f" {1e3 * max(over):>+6.0f}ms {solved}", flush=True)
        # a long trajectory
        n = min(max(sizes), 1_000_000)
        T = T_all[:n]
        for t in (0.05, 0.3):
            o, r = overrun(lambda: trajectory_seed(m, T[[0, -1]], [0, n - 1], tip=tip,
                                                   config=IKConfig(timeout=t,
                                                                   solve_mode="distance")), t)
            worst = max(worst, o)
            print(f"{name:6} trajectory {n:>9} nodes, timeout {t} s: overrun {1e3 * o:+.0f} ms, "
                  + (f"{r.success.mean():.3f} solved" if r is not None else "refused"))
    print(f"\nlargest overrun of any call (a refused one included): {1e3 * worst:+.0f} ms "
          f"(goal: {1e3 * GOAL:.0f} ms)")
    over = 0
    if not args.no_matrix:
        mworst, over = matrix(args)
        print(f"\nworst overrun of the matrix: {1e3 * mworst:+.0f} ms; rows past the "
              f"{1e3 * GOAL:.0f} ms goal: {over}")
    print(f"load average after: {os.getloadavg()}")
    return 1 if args.strict and over else 0


if __name__ == "__main__":
    sys.exit(main())
