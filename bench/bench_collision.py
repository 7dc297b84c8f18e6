"""What collision avoidance costs (issue 33's figures; not a test, not the product).

    python bench/bench_collision.py [--problems 1000] [--batch 10000] [--reach 1000000]
                                    [--json FILE]

On the bundled panda with its self-collision pairs (bundled SRDF) and a world of 20 primitives
(a table top, a box, a shelf post and 17 small spheres and cylinders around the arm), the
node's options (32 seeds, stall 5, 100 iterations):

1. one goal per call through a prepared ``IKSolver``, collision-aware against collision-free,
   interleaved in blocks of 25 calls (the machine's drift hits both alike): medians and ratio;
2. a batch of ``--batch`` goals through ``solve_pose``, 2 threads (``ROS2_IK_THREADS``): solves/s
   with and without, success, and every success checked on the collision model;
3. a reach study of ``--reach`` targets (a box of voxels with 10 directions x 2 rolls each,
   pruned by the reach bound) with the table as a half-space and self-collision: wall time and
   solves/s, as ``reach_study --world`` runs it.

Goals come from configurations clear of the world and the robot by 3 cm (so a clear answer
exists). Prints the hardware, versions and load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from common import banner, load_average
from ros2_ik import IKConfig, IKSolver, fk_frames, load_robot, solve_pose
from ros2_ik.ik.collision import clearance
from ros2_ik.model.collision import collision_model
from ros2_ik.world import Obstacle, World

TIP = "panda_hand_tcp"
BLOCK = 25


def world20() -> World:
    obs = [Obstacle.make("table", "box", (1.2, 1.4, 0.04), [0.45, 0, -0.02, 0, 0, 0, 1]),
           Obstacle.make("bin", "box", (0.25, 0.3, 0.2), [0.55, -0.35, 0.1, 0, 0, 0, 1]),
           Obstacle.make("post", "cylinder", (0.04, 1.0), [-0.35, 0.35, 0.5, 0, 0, 0, 1])]
    rng = np.random.default_rng(7)
    for i in range(17):
        r = rng.uniform(0.55, 0.95)
        a = rng.uniform(-np.pi, np.pi)
        p = [r * np.cos(a), r * np.sin(a), rng.uniform(0.1, 1.1)]
        if i % 2:
            obs.append(Obstacle.make(f"s{i}", "sphere", (rng.uniform(0.03, 0.06),),
                                     p + [0, 0, 0, 1]))
        else:
            obs.append(Obstacle.make(f"c{i}", "cylinder", (0.03, 0.15), p + [0, 0, 0, 1]))
    return World().add(*obs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--reach", type=int, default=1_000_000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.environ["ROS2_IK_THREADS"] = "2"
    print(banner("bench_collision (issue 33)"))
    print(load_average(), "at start")
    m = load_robot("panda")
    cm = collision_model(m)
    world = world20()
    print(f"robot panda: {cm.num_spheres} spheres on {len(cm.link_names)} links, "
          f"{len(cm.pairs)} self pairs checked; world {len(world)} primitives")
    rng = np.random.default_rng(0)
    q = m.random_q(rng, 3 * max(args.batch, args.problems))
    d = clearance(m, cm, q, world)[0]
    q = q[d > 0.03]
    T = np.asarray(fk_frames(m, q, [TIP]))[:, 0]
    print(f"goals: {len(T)} from configurations 3 cm clear of the robot and the world")
    row = {}

    # 1. one goal per call, prepared solvers, blocks alternating
    cfg0 = IKConfig(num_seeds=32, stall_iterations=5)
    cfg1 = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True)
    s0, s1 = IKSolver(m, [TIP], cfg0), IKSolver(m, [TIP], cfg1, collision=cm)
    print(f"backends: collision-free {s0.backend}, collision-aware {s1.backend}")
    s0.solve(T[:1])
    s1.solve(T[:1], world=world)
    n = min(args.problems, len(T))
    t0s, t1s, ok1 = [], [], []
    for a in range(0, n, BLOCK):
        for i in range(a, min(n, a + BLOCK)):
            t = time.perf_counter()
            s0.solve(T[i:i + 1])
            t0s.append(time.perf_counter() - t)
        for i in range(a, min(n, a + BLOCK)):
            t = time.perf_counter()
            r = s1.solve(T[i:i + 1], world=world)
            t1s.append(time.perf_counter() - t)
            ok1.append(bool(r.success[0]))
    m0, m1 = statistics.median(t0s), statistics.median(t1s)
    row["one_goal_us"] = (1e6 * m0, 1e6 * m1, m1 / m0)
    print(f"\n1. one goal per call ({n} goals, 32 seeds): median collision-free {1e6 * m0:.1f} us,"
          f" collision-aware {1e6 * m1:.1f} us, ratio {m1 / m0:.2f} (goal <= 2); success "
          f"{np.mean(ok1):.3f}")

    # 2. batch, 2 threads
    B = min(args.batch, len(T))
    Tb = T[:B]
    solve_pose(m, Tb[:50], tips=TIP, config=cfg0)
    solve_pose(m, Tb[:50], tips=TIP, config=cfg1, world=world, collision=cm)
    best0 = best1 = 1e9
    for _ in range(3):
        t = time.perf_counter()
        r0 = solve_pose(m, Tb, tips=TIP, config=cfg0)
        best0 = min(best0, time.perf_counter() - t)
        t = time.perf_counter()
        r1 = solve_pose(m, Tb, tips=TIP, config=cfg1, world=world, collision=cm)
        best1 = min(best1, time.perf_counter() - t)
    dd = clearance(m, cm, r1.q[r1.success], world)[0]
    row["batch_solves_per_s"] = (B / best0, B / best1)
    print(f"\n2. batch {B}, 2 threads: collision-free {B / best0:,.0f} solves/s (success "
          f"{r0.success.mean():.3f}), collision-aware {B / best1:,.0f} solves/s (success "
          f"{r1.success.mean():.3f}; goal >= 100,000); every success clear by the margin: "
          f"{bool(np.all(dd >= cfg1.collision_margin - 1e-9))}")
    print(f"   {load_average()}")

    # 3. reach study with the table and self-collision
    if args.reach:
        from ros2_ik.reach.runner import run_study
        from ros2_ik.reach.study import Study, StudyConfig
        from ros2_ik.reach.targets import Box, grid_targets

        # a box of voxels around the arm sized to about --reach targets (20 orientations each)
        res = (2.0 * 2.0 * 1.7 * 20 / args.reach) ** (1 / 3)
        targets = grid_targets(Box((-1.0, -1.0, -0.4), (1.0, 1.0, 1.3)), res, 10, 2)
        while len(targets) < args.reach:
            res *= 0.98
            targets = grid_targets(Box((-1.0, -1.0, -0.4), (1.0, 1.0, 1.3)), res, 10, 2)
        table = World().add(Obstacle.make("table", "halfspace", (), [0, 0, 0, 0, 0, 0, 1]))
        study = Study(m, targets, TIP, StudyConfig(
            ik=IKConfig(num_seeds=32, stall_iterations=5, max_iterations=100,
                        avoid_collisions=True), shard_size=20_000, world=table))
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            out = run_study(study, tmp, plots=False)
            wall = time.perf_counter() - t
        s = out.summary
        row["reach"] = (len(targets), wall)
        print(f"\n3. reach study: {len(targets):,} targets (resolution {res:.3f} m, 10 x 2 "
              f"orientations), table + self-collision: {wall:.1f} s end to end (goal <= 60 s), "
              f"{s.get('reached', '?')} reached; {load_average()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(row, f, indent=1)
    print(f"\n{load_average()} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
