"""The main job on an embedded default robot: load it, print FK and a Jacobian.

Run ``ros2_ik_demo [--robot panda]`` (installed console script) or ``python -m ros2_ik.demo``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from . import load_robot, robots
from .kinematics import fk_frames, jacobian, pose_to_pq


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="panda", choices=sorted(robots.ROBOTS),
                    help="bundled robot model (default: panda)")
    args = ap.parse_args(argv)
    info = robots.ROBOTS[args.robot]
    model = load_robot(args.robot)
    tip = info["tips"][0]
    print(f"robot {model.name!r}: {model.num_links} links, nq={model.nq}, nv={model.nv}, "
          f"base {model.base!r}, tip {tip!r}")
    q = model.neutral_q()
    print("q (mid-range):")
    for n, v in zip(model.q_names, q):
        print(f"  {n:24s} {v:+.4f}")
    T = fk_frames(model, q, [tip])[0, 0]
    pq = pose_to_pq(T)
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    print(f"FK {model.base} -> {tip}:\n{T}")
    print(f"  position [m] {pq[:3]}  quaternion (x y z w) {pq[3:]}")
    J = jacobian(model, q, tip)[0]
    print(f"geometric Jacobian of {tip} (rows vx vy vz wx wy wz, world axes, reference point "
          f"at the {tip} origin), shape {J.shape}:\n{J}")
    print(f"  manipulability sqrt(det(J J^T)) = {np.sqrt(max(np.linalg.det(J @ J.T), 0.0)):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
