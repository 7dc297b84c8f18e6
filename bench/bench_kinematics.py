"""FK and Jacobian throughput (configurations per second) on the bundled robots.

    python bench/bench_kinematics.py [--batches 1,1000,100000] [--backend numpy|cupy]

FK = poses of every link (the tip's pose needs the whole chain); Jacobian = the 6 x n world
Jacobian of the default tip (includes its FK). Numbers are median rates over repeated runs, of
the public calls (``ros2_ik.api.fk`` / ``jacobian``: the host backend's compiled C++ kernels on
NumPy float64 input where they cover the robot, else the reference) and, beside them, of the
NumPy reference (``ros2_ik.kinematics.fk`` / ``jacobian``). Peers side by side:
bench/bench_cpu.py.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from common import banner, timeit
from ros2_ik import get_backend, load_robot, robots
from ros2_ik import api
from ros2_ik import kinematics as reference


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,1000,100000")
    ap.add_argument("--robots", default="panda,ur")
    ap.add_argument("--backend", default="numpy")
    args = ap.parse_args(argv)
    xp = get_backend(args.backend)
    sync = None
    if xp.__name__ == "cupy":
        sync = xp.cuda.Device().synchronize
    print(banner(f"bench_kinematics backend={xp.__name__}"))
    print("load average %.2f %.2f %.2f" % os.getloadavg())
    # (no warm-up here: timeit's untimed first call builds the prepared kinematics, loading
    # their compiled kernels from the on-disk cache or building them with g++)
    print(f"{'robot':10s} {'batch':>8s} {'FK configs/s':>14s} {'Jacobian/s':>14s} "
          f"{'ref FK/s':>14s} {'ref J/s':>14s}")
    for name in args.robots.split(","):
        m = load_robot(name)
        tip = robots.ROBOTS[name]["tips"][0]
        for B in [int(b) for b in args.batches.split(",")]:
            q = xp.asarray(m.random_q(0, B))
            row = f"{name:10s} {B:8d}"
            for mod in (api, reference):
                t_fk = timeit(lambda: mod.fk(m, q), sync=sync)
                t_j = timeit(lambda: mod.jacobian(m, q, tip), sync=sync)
                row += f" {B / t_fk:14.3e} {B / t_j:14.3e}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
