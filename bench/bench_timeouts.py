"""How far past its timeout a call returns, by batch size (the hardened core's promise: any
call returns within timeout + about 20 ms, the unfinished problems TIMED_OUT, the finished
ones kept).

    python bench/bench_timeouts.py [--sizes 1000,10000,100000,1000000] [--repeats 3]

For each robot, path ("compiled": the default backend, the host backend's compiled C++ where
it covers the robot; "reference": ``backend="reference"``), batch size and timeout: the median
and largest overrun (return time - timeout) over the repeats, and the share of problems solved.
A batch whose result rows alone (one per problem, written before solving) would take longer than
the timeout + 20 ms is refused up front with an InvalidInputError that says so ("refused"); the
floor column is the time of a call with a timeout of 1 ms (that cost, where not refused).
Timings are only reported, never asserted; the load average is printed with them.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--timeouts", default="0.05,0.3,1.0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--robots", default="ur,panda")
    args = ap.parse_args(argv)
    print(banner("bench_timeouts: return time past the timeout"))
    print(f"load average before: {os.getloadavg()}")
    robots = args.robots.split(",")
    prebuild(robots)  # the compiled kernels of the robots, built or loaded before any timing
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
          "(goal: 20 ms)")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
