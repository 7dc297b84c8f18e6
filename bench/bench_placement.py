"""What a base placement search costs, and how close its refinement comes to a dense search
(the base-placement issue's figures; not a test, not the product).

    python bench/bench_placement.py [--poses 100] [--candidates 10000] [--dense 3]
                                    [--no-prune-run] [--out FILE]

The cell: the bundled panda standing on the floor (a half-space) beside a table (a box) with
five boxes (four on the table, a bin on the floor), its self pairs checked; task poses of the
tool over the table top, pointing down (tilted up to 0.3 rad), 6 cm clear of every obstacle.

1. ``--poses`` task poses x ``--candidates`` base candidates (a grid over a 0.96 m square on
   the floor beside the table x 16 yaws): the coarse pass and the refinement on 2 threads,
   the pairs the reach bound proves out of reach, the solves run, wall time (goal: <= 30 s for
   100 x 10,000); with ``--no-prune-run`` again without the reach bound (every pair solved).
2. ``--dense`` cases (fewer poses, a smaller region): the refinement's best base against the
   best of a dense search at 1 cm / 2 degrees over the same region with the same (fine)
   scoring: their distance in x-y and yaw, and their scores (goal: within 1 cm / 2 degrees).

Prints the hardware, versions and load average.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))


def cell(n_poses: int, seed: int = 1):
    """(world, task poses (P, 4, 4)) of the bench's cell (see the module docstring)."""
    from ros2_ik.ik.collision import sdf
    from ros2_ik.world import Obstacle, World

    world = World().add(
        Obstacle.make("floor", "halfspace", pose=[0, 0, 0, 0, 0, 0, 1]),
        Obstacle.make("table", "box", (0.8, 1.2, 0.4), [0.75, 0, 0.2, 0, 0, 0, 1]),
        Obstacle.make("box1", "box", (0.1, 0.1, 0.15), [0.6, 0.3, 0.475, 0, 0, 0, 1]),
        Obstacle.make("box2", "box", (0.12, 0.08, 0.1), [0.8, -0.25, 0.45, 0, 0, 0, 1]),
        Obstacle.make("box3", "box", (0.1, 0.2, 0.2), [1.0, 0.1, 0.5, 0, 0, 0, 1]),
        Obstacle.make("box4", "box", (0.06, 0.06, 0.25), [0.55, -0.45, 0.525, 0, 0, 0, 1]),
        Obstacle.make("bin", "box", (0.4, 0.3, 0.5), [-0.3, 0.7, 0.25, 0, 0, 0, 1]))
    rng = np.random.default_rng(seed)
    cand = np.stack([rng.uniform(0.45, 0.85, 40 * n_poses), rng.uniform(-0.4, 0.4, 40 * n_poses),
                     rng.uniform(0.47, 0.65, 40 * n_poses)], axis=1)
    d, _ = sdf(world.packed(), cand)
    pos = cand[d.min(axis=1) > 0.06][:n_poses]
    T = np.zeros((len(pos), 4, 4))
    T[:, 3, 3] = 1.0
    for i, p in enumerate(pos):
        a, b = rng.uniform(-math.pi, math.pi), math.pi + rng.uniform(-0.3, 0.3)
        Rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
        Ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
        T[i, :3, :3] = Rz @ Ry
        T[i, :3, 3] = p
    return world, T


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--poses", type=int, default=100)
    ap.add_argument("--candidates", type=int, default=10_000)
    ap.add_argument("--dense", type=int, default=3, help="cases against a dense search")
    ap.add_argument("--no-prune-run", action="store_true")
    ap.add_argument("--out", default=None, help="append the report to this file")
    args = ap.parse_args()
    os.environ["ROS2_IK_THREADS"] = "2"

    from common import Report, banner, load_average
    from ros2_ik import load_robot
    from ros2_ik.reach.placement import (Placement, PlacementConfig, Region, rank, run_placement,
                                         score_bases)

    report = Report()
    say = report.say
    say(banner("bench_placement: base placement (base-placement issue)"))
    say(f"{load_average()} at start")
    m = load_robot("panda")
    world, T = cell(args.poses)
    # a grid of about --candidates: n x n positions x 16 yaws over a 0.96 m square beside the
    # table (25 x 25 x 16 = 10,000 at 4 cm)
    n = max(2, round(math.sqrt(args.candidates / 16)))
    region = Region(x=(-0.6, 0.36), y=(-0.48, 0.48))
    res = 0.96 / (n - 1) * (1 + 1e-12)
    cfg = PlacementConfig(resolution=res, yaw_step=math.pi / 8, top=10, refine=4)
    pl = Placement(m, T, region, world=world, config=cfg)
    warm = Placement(m, T[:2], Region((0, 0), (0, 0)), world=world,
                     config=PlacementConfig(top=1, refine=1))
    run_placement(warm)  # build and load the kernels (not timed)
    C = len(pl.candidates())
    say(f"robot panda on a planar mount; world: floor, table, 5 boxes ({len(world)} obstacles); "
        f"{len(T)} task poses x {C:,} candidates ({len(region.axes(res, cfg.yaw_step)[0])} x "
        f"{len(region.axes(res, cfg.yaw_step)[1])} positions at {res:.4f} m x 16 yaws) = "
        f"{C * len(T):,} pairs; coarse {cfg.coarse.num_seeds} seeds, fine "
        f"{cfg.fine.num_seeds} seeds, 2 threads")

    def one(p, label):
        t = time.perf_counter()
        r = run_placement(p)
        dt = time.perf_counter() - t
        s = r.summary
        solves = s["solves_coarse"] + s["solves_fine"]
        say(f"{label}: {dt:.1f} s end to end (coarse {s['coarse_seconds']:.1f} s, refinement "
            f"{s['refine_seconds']:.1f} s); pairs {s['pairs']:,}: {s['pruned']:,} proven out of "
            f"reach, {s['solves_coarse']:,} coarse solves + {s['solves_fine']:,} fine ones "
            f"({solves / dt:,.0f} solves/s); {s['bases_in_collision']:,} bases standing in an "
            f"obstacle; best {s['best']['base']} reaches {s['best']['fraction']:.2f} "
            f"(worst manipulability {s['best']['worst_manipulability']}); {load_average()}")
        return r, dt

    r, dt = one(pl, "1. coarse to fine")
    if args.no_prune_run:
        import dataclasses

        one(dataclasses.replace(pl, config=dataclasses.replace(cfg, prune=False)),
            "1b. the same without the reach bound (every pair solved)")

    # 2. refinement against a dense search
    rng = np.random.default_rng(5)
    spec_cache = {}
    for k in range(args.dense):
        world_k, Tk = cell(10, seed=20 + k)
        cx, cy = rng.uniform(-0.05, 0.15), rng.uniform(-0.2, 0.2)
        reg = Region(x=(cx - 0.15, cx + 0.15), y=(cy - 0.15, cy + 0.15),
                     yaw=(-math.pi, math.pi))
        cfg_k = PlacementConfig(resolution=0.05, yaw_step=math.pi / 8, top=3, refine=4,
                                xy_tolerance=0.005, yaw_tolerance=math.radians(1))
        pk = Placement(m, Tk, reg, world=world_k, config=cfg_k)
        t = time.perf_counter()
        rk = run_placement(pk)
        t_ref = time.perf_counter() - t
        spec = spec_cache.setdefault(k, pk.spec())
        dense = reg.grid(0.01, math.radians(2))
        t = time.perf_counter()
        parts = [score_bases(spec, dense[a:a + 2000], fine=True)
                 for a in range(0, len(dense), 2000)]
        t_dense = time.perf_counter() - t
        cols = {c: np.concatenate([p[c] for p in parts]) for c in
                ("base", "fraction", "worst_manipulability", "mean_manipulability")}
        best = cols["base"][rank(cols)[0]]
        got = rk.candidates["base"][0]
        dyaw = abs((got[3] - best[3] + math.pi) % (2 * math.pi) - math.pi)
        dxy = float(np.hypot(got[0] - best[0], got[1] - best[1]))
        b = rank(cols)[0]
        # the dense candidates as good as the best (the same fraction, the worst pose's
        # manipulability within 1 %): the nearest of them to the refined answer
        f_best, w_best = cols["fraction"][b], cols["worst_manipulability"][b]
        good = (cols["fraction"] == f_best) & (cols["worst_manipulability"] >= 0.99 * w_best)
        gb = cols["base"][good]
        gy = np.abs((gb[:, 3] - got[3] + math.pi) % (2 * math.pi) - math.pi)
        gd = np.hypot(gb[:, 0] - got[0], gb[:, 1] - got[1])
        j = int(np.argmin(gd / 0.01 + gy / math.radians(2)))
        say(f"2.{k + 1} refinement vs dense search ({len(Tk)} poses, region 0.3 m x 0.3 m x "
            f"360 deg; dense: {len(dense):,} candidates at 1 cm / 2 deg in {t_dense:.0f} s; "
            f"refinement {t_ref:.1f} s): refined {np.round(got, 4).tolist()} fraction "
            f"{rk.candidates['fraction'][0]:.2f} worst manip "
            f"{rk.candidates['worst_manipulability'][0]:.4f}; dense best "
            f"{np.round(best, 4).tolist()} fraction {f_best:.2f} worst manip {w_best:.4f}; "
            f"apart {100 * dxy:.2f} cm, {math.degrees(dyaw):.2f} deg (goal <= 1 cm, 2 deg); "
            f"{int(good.sum())} dense candidates as good (same fraction, within 1 % of the "
            f"worst-pose manipulability), the nearest {100 * gd[j]:.2f} cm, "
            f"{math.degrees(gy[j]):.2f} deg away")
    say(f"{load_average()} at the end")
    report.write(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
