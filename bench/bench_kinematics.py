"""FK and Jacobian throughput (configurations per second) on the bundled robots.

    python bench/bench_kinematics.py [--batches 1,1000,100000] [--backend numpy|cupy]

FK = poses of every link (the tip's pose needs the whole chain); Jacobian = the 6 x n world
Jacobian of the default tip (includes its FK). Numbers are median rates over repeated runs.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from common import banner, timeit  # noqa: E402
from ros2_ik import get_backend, load_robot, robots  # noqa: E402
from ros2_ik.kinematics import fk, jacobian  # noqa: E402


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
    print(f"{'robot':10s} {'batch':>8s} {'FK configs/s':>14s} {'Jacobian/s':>14s} "
          f"{'fast FK/s':>14s} {'fast J/s':>14s}")
    for name in args.robots.split(","):
        m = load_robot(name)
        tip = robots.ROBOTS[name]["tips"][0]
        fast = None
        try:
            from ros2_ik.kinematics import fast as fastmod

            if fastmod.supported(m) and xp.__name__ == "numpy":
                fast = fastmod.FastChain(m, tip)
        except ImportError:
            pass
        for B in [int(b) for b in args.batches.split(",")]:
            q = xp.asarray(m.random_q(0, B))
            t_fk = timeit(lambda: fk(m, q, check=False), sync=sync)
            t_j = timeit(lambda: jacobian(m, q, tip), sync=sync)
            row = f"{name:10s} {B:8d} {B / t_fk:14.3e} {B / t_j:14.3e}"
            if fast is not None:
                qn = np.ascontiguousarray(q)
                t_ffk = timeit(lambda: fast.fk(qn))
                t_fj = timeit(lambda: fast.jacobian(qn))
                row += f" {B / t_ffk:14.3e} {B / t_fj:14.3e}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
