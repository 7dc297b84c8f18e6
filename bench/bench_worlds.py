"""Sensed and modelled worlds (issue 49): what an octomap, a point cloud and a mesh cost.

A cell of 20 primitives (a table, two walls, a shelf of boards and things on the table) is
written by OctoMap itself (the ``octomap-python`` wheel) as a 2 cm map twice: its solid cells
(a map made from CAD: >= 100,000 occupied cells) and the cells of points sampled on its
surfaces with 5 mm of noise (a map made by a depth camera: ragged and hollow); then, for each:

- **ready**: the binary and full streams decoded, joined into boxes and made obstacles in
  a tree of bounding boxes (``ros2_ik.world.octomap``, ``World.tree``), as the node does
  when a map arrives;
- **solves**: the same goals (a known answer 1.5 cm clear of both worlds on every robot's
  model), collision-aware, against the 20 primitives and against the map: batch rate and one
  goal at a time (median, p90), on the bundled panda and on example-robot-data's Panda fitted
  from its meshes;
- **scene worker**: what the node does after a map arrives, beside requests: the links that
  are within the margin of an obstacle in nearly every configuration, and the first pass's
  cover of the world (a model of 256 spheres or more);
- **meshes**: an open shelf given as one mesh, held in 5 mm cells (``voxels.mesh_cells``).

    python bench/bench_worlds.py [--goals 200] [--out bench/results/worlds.txt]

Prints the hardware, versions and load average; appends the report to ``--out``.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RES = 0.02


def cell():
    """The cell's 20 primitives (in the panda's base frame)."""
    from ros2_ik.world import Obstacle, World

    q = [0, 0, 0, 1]
    obs = [Obstacle.make("table", "box", (1.6, 1.2, 0.05), [0.3, 0, -0.045] + q),
           Obstacle.make("back_wall", "box", (0.1, 2.0, 1.5), [1.05, 0, 0.7] + q),
           Obstacle.make("side_wall", "box", (2.0, 0.1, 1.5), [0.2, -0.85, 0.7] + q)]
    for k, z in enumerate((0.3, 0.6, 0.9)):
        obs.append(Obstacle.make(f"board{k}", "box", (0.35, 0.6, 0.02), [0.75, 0.4, z] + q))
    for k, y in enumerate((0.1, 0.7)):
        obs.append(Obstacle.make(f"side{k}", "box", (0.35, 0.02, 0.9), [0.75, y, 0.45] + q))
    rng = np.random.default_rng(0)
    while len(obs) < 20:
        x, y = rng.uniform([-0.3, -0.6], [0.7, 0.5])
        if np.hypot(x, y) < 0.3:
            continue
        k = len(obs)
        if k % 2:
            obs.append(Obstacle.make(f"thing{k}", "box", tuple(rng.uniform(0.05, 0.15, 3)),
                                     [x, y, 0.08] + q))
        else:
            obs.append(Obstacle.make(f"thing{k}", "cylinder", (0.04, 0.2), [x, y, 0.1] + q))
    return World(obs)


def octomap_of(world, sensed: bool):
    """OctoMap's own binary and full streams of the world at RES: its solid cells (a map made
    from CAD), or the cells of points sampled on its surfaces with 5 mm of noise (a map made
    by a depth camera: ragged, hollow)."""
    import octomap
    import trimesh

    from ros2_ik.ik.collision_geometry import sdf

    t = octomap.OcTree(RES)
    if sensed:
        rng = np.random.default_rng(5)
        pts = []
        for ob in world:
            if ob.shape == "box":
                mesh = trimesh.creation.box(extents=ob.size, transform=ob.pose)
            else:
                mesh = trimesh.creation.cylinder(radius=ob.size[0], height=ob.size[1],
                                                 transform=ob.pose)
            pts.append(mesh.sample(int(mesh.area * 20_000), seed=len(pts)))
        P = np.concatenate(pts)
        P = P + rng.normal(0.0, 0.005, P.shape)
    else:
        lo, hi = np.array([-0.6, -1.0, -0.08]), np.array([1.2, 1.0, 1.46])
        g = [np.arange(a, b, RES) + 0.5 * RES for a, b in zip(lo, hi)]
        P = np.stack(np.meshgrid(*g, indexing="ij"), -1).reshape(-1, 3)
        P = P[sdf(world.packed(), P)[0].min(axis=1) <= 0.5 * RES * 3 ** 0.5]  # touching cells
    for p in P:
        t.updateNode(p, True)
    t.updateInnerOccupancy()
    binary = t.writeBinary().partition(b"\ndata\n")[2]  # (prunes the tree)
    full = t.write().partition(b"\ndata\n")[2]
    n = sum(1 for it in t.begin_leafs() if t.isNodeOccupied(it))
    return binary, full, n


def solves(rep, robots, prims, mapped, n_goals):
    """The same goals against the primitives and the map, per robot: batch, one goal."""
    from ros2_ik import IKConfig, IKSolver, fk_frames
    from ros2_ik.api.solver import world_warnings
    from ros2_ik.ik.collision import clearance, default_collision_model
    from ros2_ik.ik.cover import first_pass

    m0, tip0 = robots[0][1], robots[0][3]
    rng = np.random.default_rng(1)
    Q = m0.random_q(rng, 20 * n_goals)
    ok = np.ones(len(Q), dtype=bool)
    for _, m, cm, _ in robots:  # (the same kinematics: one known answer for every model)
        c = cm if cm is not None else default_collision_model(m)
        c = c.with_allowances([(a, b, 0.015) for a, b, _ in c.allowances]) \
            if c.allowances else c
        for world in (mapped, prims):
            ok &= clearance(m, c, Q, world, reach=0.03)[0] > 0.015
    G = np.asarray(fk_frames(m0, Q[ok][:n_goals], [tip0]))[:, 0]
    rep.say(f"  solves: {len(G)} goals with a known answer 1.5 cm clear of both worlds on "
            "every model; 32 seeds, stall 5, 1 cm margin, host backend")
    for label, m, cm, tip in robots:
        cfg = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True,
                       collision_margin=0.01, timeout=None)
        # what the node's scene worker does when a map arrives (not in a request's time)
        cmx = cm if cm is not None else default_collision_model(m)
        t0 = time.perf_counter()
        world_warnings(m, cmx, mapped, 0.01)
        t1 = time.perf_counter()
        first_pass(m, cmx, mapped, cfg.collision_cover, 0.01)
        t2 = time.perf_counter()
        rep.say(f"    {label}: after a map, the scene worker's checks: links always near an "
                f"obstacle {t1 - t0:.2f} s, the first pass's cover {t2 - t1:.2f} s")
        s = IKSolver(m, [tip], cfg, collision=cm)
        row = {}
        for wname, world in (("20 primitives", prims), ("the map", mapped)):
            s.solve(G[:2], world=world)
            t0 = time.perf_counter()
            r = s.solve(G, world=world)
            rate = len(G) / (time.perf_counter() - t0)
            one = []
            for g in G[:60]:
                t0 = time.perf_counter()
                s.solve(g[None], world=world)
                one.append(time.perf_counter() - t0)
            row[wname] = (rate, np.median(one) * 1e3, np.percentile(one, 90) * 1e3,
                          100 * np.mean(r.success))
            rep.say(f"    {label}, {wname}: {rate:,.0f} solves/s ({row[wname][3]:.1f} % "
                    f"solved); one goal {row[wname][1]:.2f} / {row[wname][2]:.2f} ms "
                    "(median / p90)")
        a, b = row["20 primitives"], row["the map"]
        rep.say(f"    {label}: the map costs {a[0] / b[0]:.1f}x the batch time, "
                f"{b[1] / a[1]:.1f}x / {b[2] / a[2]:.1f}x one goal (median / p90) of the 20 "
                "primitives")


def main(argv=None) -> int:
    import argparse

    from common import Report, banner, load_average

    from ros2_ik import load_robot
    from ros2_ik.world import World, octomap, voxels

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--goals", type=int, default=200)
    ap.add_argument("--out", help="append the report to this file")
    args = ap.parse_args(argv)
    rep = Report()
    rep.say(banner("sensed and modelled worlds: octomaps, meshes"))
    rep.say(load_average())

    prims = cell()
    robots = [("bundled panda", load_robot("panda"), None, "panda_hand_tcp")]
    try:
        sys.path.insert(0, str(HERE))
        from bench_collision import load_real

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m, cm, tip = load_real("panda")
        robots.append(("example-robot-data's Panda", m, cm, tip))
    except Exception as exc:  # noqa: BLE001 - the report says what could not be loaded
        rep.say(f"(example-robot-data's Panda not run: {type(exc).__name__}: {exc})")
    for label_map, sensed in (("CAD map (solid cells)", False),
                              ("sensed map (surface points, 5 mm noise)", True)):
        binary, full, n_cells = octomap_of(prims, sensed)
        rep.say(f"{label_map}: the cell of {len(prims)} primitives as OctoMap's 2 cm map: "
                f"{n_cells:,} occupied leaves, {len(binary):,} bytes binary, {len(full):,} "
                "bytes full")
        for name, data, is_binary in (("binary", binary, True), ("full", full, False)):
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                L = octomap.decode(data, binary=is_binary, resolution=RES)
                t1 = time.perf_counter()
                centre, size = octomap.boxes(L)
                t2 = time.perf_counter()
                mapped = World(octomap.obstacles(centre, size))
                mapped.packed()
                mapped.tree()
                t3 = time.perf_counter()
                times.append((t1 - t0, t2 - t1, t3 - t2, t3 - t0))
            dec, box, obs, tot = np.median(np.array(times), axis=0) * 1e3
            cells = int((L.cells ** 3).sum())
            rep.say(f"  ready ({name}): {cells:,} cells -> {len(mapped):,} boxes: decode "
                    f"{dec:.0f} ms, boxes {box:.0f} ms, obstacles and their tree {obs:.0f} ms; "
                    f"{tot:.0f} ms in "
                    "all (median of 5)")
        solves(rep, robots, prims, mapped, args.goals)

    import trimesh

    T = trimesh.transformations.translation_matrix
    parts = [trimesh.creation.box(extents=(0.35, 0.8, 0.02), transform=T([0.625, 0, z]))
             for z in (0.01, 0.30, 0.59, 0.85)]
    parts += [trimesh.creation.box(extents=(0.35, 0.02, 0.86), transform=T([0.625, y, 0.43]))
              for y in (-0.39, 0.39)]
    parts.append(trimesh.creation.box(extents=(0.02, 0.8, 0.86), transform=T([0.79, 0, 0.43])))
    shelf = trimesh.util.concatenate(parts)
    t0 = time.perf_counter()
    L = voxels.mesh_cells(shelf.vertices, shelf.faces, 0.005)
    centre, size = voxels.boxes(L)
    rep.say(f"meshes: an open shelf as one mesh ({len(shelf.faces)} triangles) in 5 mm cells: "
            f"{len(L):,} cells -> {len(centre)} boxes in {time.perf_counter() - t0:.2f} s")
    rep.say(load_average())
    rep.write(args.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    warnings.simplefilter("ignore")
    sys.exit(main())
