"""What collision avoidance costs (issue 33's figures; not a test, not the product).

    python bench/bench_collision.py [--problems 1000] [--batch 10000] [--reach 1000000]
                                    [--real 400] [--placement 20] [--json FILE]

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
exists).

4. ``--real`` goals per robot on **real robots beside the bundled ones** (example-robot-data's
   Panda, UR5 and xArm7 from their URDFs, SRDFs and meshes, tight fits of about a thousand or
   two spheres; the bundled panda and ur): a table (the robot stands on it), a box and a post,
   goals whose known answer is 1.5 cm clear on the robot's own model (the Panda's also on the
   bundled one, so both solve the same goals), the node's options (32 seeds, stall 5): a batch
   (solves/s) and one goal per call (median and p90), with the first pass on the cover
   (:mod:`ros2_ik.ik.cover`, the default) and without it (``collision_cover = 0``: every
   iteration on the fine spheres); the ratios to the bundled robot, and the phases (the first
   pass, and the goals left to the second);
5. ``--placement`` task poses: a base placement of the UR5 (bundled, and example-robot-data's
   on its meshes) on the floor beside a table, with and without the cover: wall time.

Prints the hardware, versions and load average.
"""

from __future__ import annotations

import argparse
import json
import math
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


REAL = {  # name: (URDF, SRDF, base, tip, the bundled robot beside it)
    "panda": ("panda_description/urdf/panda.urdf", "panda_description/srdf/panda.srdf",
              "panda_link0", "panda_hand_tcp", "panda"),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "ur_description/srdf/ur5.srdf", "base_link",
            "tool0", "ur"),
    "xarm7": ("xarm_description/urdf/xarm7.urdf", "xarm_description/srdf/xarm7.srdf",
              "link_base", "link_eef", None),
}


def real_world() -> World:
    """The real-robot tier's world: the robot stands on a table, a box and a post beside it."""
    return World().add(
        Obstacle.make("table", "halfspace", (), [0, 0, 0, 0, 0, 0, 1]),
        Obstacle.make("box", "box", (0.2, 0.3, 0.3), [0.55, 0.3, 0.15, 0, 0, 0, 1]),
        Obstacle.make("post", "cylinder", (0.04, 0.9), [-0.4, 0.35, 0.45, 0, 0, 0, 1]))


def erd_share():
    """example-robot-data's share directory (None: not installed)."""
    from importlib import metadata
    from pathlib import Path

    try:
        return Path(metadata.distribution("example-robot-data").locate_file("")) / \
            "cmeel.prefix/share"
    except metadata.PackageNotFoundError:
        return None


def load_real(name: str):
    """(model, collision model, tip) of example-robot-data's robot ``name`` on its meshes."""
    import warnings

    from ros2_ik.ik.collision import default_collision_model
    from ros2_ik.model import Model

    share = erd_share()
    urdf, srdf, base, tip, _ = REAL[name]
    robots = share / "example-robot-data" / "robots"
    m = Model.from_urdf((robots / urdf).read_text(), base=base, tips=[tip])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = default_collision_model(m, (robots / srdf).read_text(), within=0.01,
                                     search_path=[str(share)])
    return m, cm, tip


def clear_goals(cases, n: int, world, seed: int = 3):
    """Goals whose known answer is 1.5 cm clear on every model of ``cases`` [(model, cm, tip)]
    (the same kinematics), at most ``n``."""
    m, _, tip = cases[0]
    q = m.random_q(np.random.default_rng(seed), 8 * n)
    ok = np.ones(len(q), dtype=bool)
    for mm, cm, _ in cases:
        # (a pair checked for contact only need not be 1.5 cm apart: its allowance made 1.5 cm)
        c = cm.with_allowances([(a, b, 0.015) for a, b, _ in cm.allowances]) \
            if cm.allowances else cm
        ok &= clearance(mm, c, q, world, reach=0.02)[0] >= 0.015
    return np.asarray(fk_frames(m, q[ok][:n], [tip]))[:, 0]


def time_solver(s: IKSolver, T, world, one: int = 100):
    """(batch solves/s, success, one goal median and p90 [ms]) of a warm solver (the batch
    solved once first: every pass's kernels built and loaded)."""
    s.solve(T, world=world)
    t = time.perf_counter()
    r = s.solve(T, world=world)
    batch = len(T) / (time.perf_counter() - t)
    times = []
    for i in range(min(one, len(T))):
        t = time.perf_counter()
        s.solve(T[i:i + 1], world=world)
        times.append(time.perf_counter() - t)
    return batch, float(r.success.mean()), 1e3 * float(np.median(times)), \
        1e3 * float(np.percentile(times, 90))


def phases(m, cm, tip, cfg, T, world):
    """The first pass's model and the goals it leaves to the second (host)."""
    from dataclasses import replace

    from ros2_ik.ik.cover import first_pass

    fp = first_pass(m, cm, world, cfg.collision_cover, cfg.collision_margin)
    if fp is None:
        return "one pass (no cover pays)"
    s = IKSolver(m, [tip], replace(cfg, collision_cover=0.0), collision=fp)
    s.solve(T, world=world)
    t = time.perf_counter()
    r = s.solve(T, world=world)
    dt = time.perf_counter() - t
    return (f"first pass on {fp.num_spheres} of {cm.num_spheres} spheres: {len(T) / dt:,.0f} "
            f"solves/s, {int((~r.success).sum())} of {len(T)} goals left to the second")


def real_robots(n: int) -> dict:
    from dataclasses import replace

    from ros2_ik.model.collision import collision_model

    print(f"\n4. real robots beside the bundled ones ({n} goals each; {load_average()})")
    if erd_share() is None:
        print("   example-robot-data is not installed (make setup): skipped")
        return {}
    world = real_world()
    cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True,
                   collision_margin=0.01)
    out = {}
    for name, (_, _, _, tip, bundled) in REAL.items():
        t = time.perf_counter()
        real = load_real(name)
        fit = time.perf_counter() - t
        cases = [real]
        if bundled is not None:
            mb = load_robot(bundled)
            tb = tip if tip in mb.link_names else mb.default_tip()
            cases.append((mb, collision_model(mb), tb))
        rows = {}
        for label, (m, cm, tp) in (("real", cases[0]),) + (
                (("bundled", cases[1]),) if len(cases) > 1 else ()):
            goals_from = cases if (label == "real" and name == "panda") else [(m, cm, tp)]
            T = clear_goals(goals_from, n, world)
            for cover in (cfg.collision_cover, 0.0):
                if label == "bundled" and cover == 0.0:
                    continue  # (a bundled model takes one pass either way)
                c = replace(cfg, collision_cover=cover)
                rows[(label, cover)] = time_solver(IKSolver(m, [tp], c, collision=cm), T, world)
            if label == "real":
                ph = phases(m, cm, tp, cfg, T, world)
        out[name] = {f"{k[0]} cover={k[1]}": v for k, v in rows.items()}
        beside = "" if len(cases) == 1 else \
            f"; bundled {bundled}, {cases[1][1].num_spheres} spheres"
        print(f"   {name}: example-robot-data's, {real[1].num_spheres} spheres (model ready in "
              f"{fit:.1f} s){beside}")
        for k, (b, sr, p50, p90) in rows.items():
            how = f"cover {k[1]:g} m" if k[1] else "one pass"
            print(f"     {k[0]:8s} {how:14s} batch {b:9,.0f} solves/s (success {sr:.3f}); "
                  f"one goal median {p50:6.3f} ms, p90 {p90:6.3f} ms")
        print(f"     phases: {ph}")
        if ("bundled", cfg.collision_cover) in rows:
            bb = rows[("bundled", cfg.collision_cover)]
            for cover in (cfg.collision_cover, 0.0):
                rr = rows[("real", cover)]
                print(f"     real / bundled, {'with the cover' if cover else 'one pass':14s}: "
                      f"batch {bb[0] / rr[0]:.2f}x, one goal median {rr[2] / bb[2]:.2f}x, "
                      f"p90 {rr[3] / bb[3]:.2f}x (goal <= 1.5x)")
    print(f"   {load_average()}")
    return out


def placement(poses: int) -> dict:
    from dataclasses import replace

    from ros2_ik.model.collision import collision_model
    from ros2_ik.reach.placement import Placement, PlacementConfig, Region, run_placement

    print(f"\n5. base placement of a UR5 ({poses} task poses; {load_average()})")
    if erd_share() is None:
        print("   example-robot-data is not installed (make setup): skipped")
        return {}
    world = World().add(
        Obstacle.make("floor", "halfspace", (), [0, 0, 0, 0, 0, 0, 1]),
        Obstacle.make("table", "box", (0.4, 0.6, 0.5), [0.75, 0.0, 0.25, 0, 0, 0, 1]))
    rng = np.random.default_rng(2)
    P = np.zeros((poses, 4, 4))
    P[:, 3, 3] = 1
    P[:, :3, :3] = np.diag([1.0, -1.0, -1.0])  # the tool pointing down
    P[:, 0, 3] = rng.uniform(0.6, 0.9, poses)
    P[:, 1, 3] = rng.uniform(-0.25, 0.25, poses)
    P[:, 2, 3] = rng.uniform(0.6, 0.75, poses)  # 10-25 cm above the table
    region = Region((-0.1, 0.3), (-0.3, 0.3))
    out = {}
    for label, (m, cm, tip) in (("bundled ur", (load_robot("ur"), None, None)),
                                ("example-robot-data's UR5", load_real("ur5"))):
        cm = collision_model(m) if cm is None else cm
        tip = tip or m.default_tip()
        for cover in (0.02, 0.0):
            pc = PlacementConfig(resolution=0.1, yaw_step=math.pi / 4, top=5, refine=2)
            pc = replace(pc, coarse=replace(pc.coarse, collision_cover=cover),
                         fine=replace(pc.fine, collision_cover=cover))
            p = Placement(m, P, region, tip=tip, world=world, config=pc, collision=cm)
            # (the kernels of both passes' options built and loaded first: not timed)
            run_placement(Placement(m, P[:2], Region((0.3, 0.3), (0, 0)), tip=tip, world=world,
                                    config=replace(pc, top=1, refine=1), collision=cm))
            t = time.perf_counter()
            r = run_placement(p)
            wall = time.perf_counter() - t
            b = r.best or {}
            base = np.asarray(b.get("base", [np.nan] * 4), dtype=float)
            best = (f"{float(b.get('fraction', np.nan)):.2f} of the poses reached at x "
                    f"{base[0]:.3f} y {base[1]:.3f} yaw {base[3]:.2f}")
            out[f"{label} cover={cover}"] = wall
            how = f"cover {cover:g} m" if cover else "one pass"
            print(f"   {label} ({cm.num_spheres} spheres), {how}: {wall:.1f} s wall; best {best}")
    print(f"   {load_average()}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--reach", type=int, default=1_000_000)
    ap.add_argument("--real", type=int, default=400)
    ap.add_argument("--placement", type=int, default=20)
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
    if args.real:
        row["real"] = real_robots(args.real)
    if args.placement:
        row["placement"] = placement(args.placement)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(row, f, indent=1)
    print(f"\n{load_average()} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
