"""What a state check costs (the state-check issue's figures; not a test, not the product).

    python bench/bench_states.py [--states 1000000] [--threads 2] [--out FILE]

On the bundled panda (its default collision model: the bundled SRDF's self pairs) and the
world of 20 primitives of ``bench_collision`` (a table top, a bin, a post, 17 small spheres and
cylinders around the arm): ``check_states`` of ``--states`` random configurations within the
limits on ``--threads`` host threads (best of 3), the same for configurations 3 cm clear of
everything (a planner's typical state), a dense path (``check_path`` at 0.005 rad), the
reference's rate on a slice, and the compiled answers against the reference's exact distances
on 20,000 states (largest difference, pairs equal). Prints the hardware, versions and load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="append the report to this file")
    args = ap.parse_args()
    os.environ["ROS2_IK_THREADS"] = str(args.threads)

    from bench_collision import world20
    from common import Report, banner, load_average
    from ros2_ik import load_robot
    from ros2_ik.api.states import check_path, check_states
    from ros2_ik.ik.collision import clearance, default_collision_model

    report = Report()
    say = report.say
    say(banner("bench_states: check_states (state-check issue)"))
    say(f"{load_average()} at start")
    m = load_robot("panda")
    cm = default_collision_model(m)
    world = world20()
    say(f"robot panda: {cm.num_spheres} spheres on {len(cm.link_names)} links, "
        f"{len(cm.pairs)} self pairs; world {len(world)} primitives; {args.threads} threads")
    rng = np.random.default_rng(0)
    q = m.random_q(rng, args.states)
    check_states(m, q[:1000], world, collision=cm)  # build and load the kernel

    def rate(states, label):
        best = 0.0
        for _ in range(3):
            t = time.perf_counter()
            r = check_states(m, states, world, collision=cm)
            best = max(best, len(states) / (time.perf_counter() - t))
        say(f"{label}: {best:,.0f} states/s (backend {r.backend}, {len(states):,} states, "
            f"{100 * r.valid.mean():.1f} % valid; goal >= 500,000); {load_average()}")
        return best, r

    best, r = rate(q, "1. random configurations within the limits")
    clear = q[r.clearance > 0.03]
    rate(clear, "2. configurations 3 cm clear of everything")

    a = m.neutral_q()
    wp = np.stack([a + rng.uniform(-1, 1, m.nq) * 0.8 for _ in range(200)])
    wp = np.clip(wp, m.lower, m.upper)
    t = time.perf_counter()
    p = check_path(m, wp, 0.005, world, collision=cm)
    dt = time.perf_counter() - t
    say(f"3. a path through 200 waypoints at 0.005 rad: {len(p.q):,} states in {dt:.3f} s "
        f"({len(p.q) / dt:,.0f} states/s end to end, interpolation included); first invalid "
        f"state {p.first_invalid}")

    n = 2000
    t = time.perf_counter()
    check_states(m, q[:n], world, collision=cm, backend="reference")
    ref_rate = n / (time.perf_counter() - t)
    say(f"4. the reference (NumPy): {ref_rate:,.0f} states/s; compiled / reference "
        f"{best / ref_rate:,.0f}x")

    k = 20_000
    ds, ps, _ = clearance(m, cm, q[:k], None)
    dw, pw, _ = clearance(m, cm, q[:k], world, self_collisions=False)
    diff = max(np.abs(r.self_clearance[:k] - ds).max(), np.abs(r.world_clearance[:k] - dw).max())
    same = np.mean(np.concatenate([r.self_pair[:k] == ps, r.world_pair[:k] == pw]))
    say(f"5. compiled vs the reference's exact distances on {k:,} states: largest difference "
        f"{diff:.2e} m, nearest pairs equal {100 * same:.3f} %")
    say(f"{load_average()} at the end")
    report.write(args.out)
    return 0 if best >= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
