"""``ros2_ik_base_placement``: where should the robot stand? (see :mod:`.placement`)

    ros2_ik_base_placement --robot panda --poses shelf.yaml --world cell.yaml \\
        --x -1 0.5 --y -0.8 0.8 --out placement
    ros2 run ros2_ik ros2_ik_base_placement --urdf my_robot.urdf --tip tool0 --poses picks.npz \\
        --x 0 2 --y -1 1 --yaw -90 90 --heights 0 0.2 --ray

Task poses (``--poses``: YAML, NPZ or CSV as ``reach_study --targets`` reads them) and the
world (``--world``) are in the task frame (``--task-frame`` names it in the output); the search
region is a box on its floor (``--x``, ``--y`` [m]), a yaw range (``--yaw`` [deg]) and heights.
Progress bar on stderr; Ctrl-C stops after the shards in flight (finished ones stay in
``--out``: the same command resumes); a second Ctrl-C stops at once. Exit status: 0 done, 2 bad
input (the message says what and what to do), 130 stopped by Ctrl-C, 124 past ``--timeout``,
1 anything else.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from .. import robots
from ..errors import IKError
from .cli_common import CtrlC, collision_from_args, model_from_args, ray_from_args
from .placement import PlacementConfig

__all__ = ["main", "build_parser", "run"]

PROG = "ros2_ik_base_placement"
EXIT_BAD_INPUT = 2
EXIT_STOPPED = 130
EXIT_TIMED_OUT = 124


def build_parser() -> argparse.ArgumentParser:
    d = PlacementConfig()
    p = argparse.ArgumentParser(
        prog=PROG, description="Base placement: the base poses from which the tool reaches "
        "the most task poses clear of the world (then with the most manipulability), by "
        "collision-aware IK on a coarse grid refined around its best candidates.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("robot")
    src = m.add_mutually_exclusive_group()
    src.add_argument("--robot", default=None, help=f"bundled robot ({', '.join(robots.ROBOTS)}); "
                     "the default when no --urdf is given is panda")
    src.add_argument("--urdf", default=None, metavar="FILE", help="URDF file of the robot")
    m.add_argument("--base", default=None, metavar="LINK", help="base link (default: the root); "
                   "the link placed at each candidate")
    m.add_argument("--tip", default=None, metavar="LINK", help="tool link (default: the end "
                   "of the longest chain, as the node)")
    m.add_argument("--srdf", default=None, metavar="FILE",
                   help="the robot's SRDF: its disabled pairs and sphere approximations")
    m.add_argument("--mesh-path", default="", metavar="DIRS",
                   help="':'-separated directories where package:// and relative collision "
                        "meshes are looked for (also the URDF's folder and $ROS2_IK_MESH_PATH)")

    t = p.add_argument_group("the task and the cell (task frame)")
    t.add_argument("--poses", required=True, metavar="FILE", help="task poses of the tool: "
                   ".yaml (a list of {position: [x y z], orientation: [qx qy qz qw]} or of 7 "
                   "numbers, optionally under poses:), .npz (an array poses (N, 7) or "
                   "(N, 4, 4)) or .csv (x y z qx qy qz qw per line)")
    t.add_argument("--task-frame", default="task", metavar="NAME", help="the frame the poses, "
                   "the world and the region are in (a name for the output)")
    t.add_argument("--world", metavar="FILE", help="obstacles: YAML (as ros2_ik.world writes "
                   "them: the floor, a half-space where the base stands, tables, shelves), an "
                   "octomap (.bt, .ot), a point cloud (.pcd, .ply, .npz, .xyz) or a mesh (.stl, "
                   ".obj, ...): ros2_ik.world.files")
    t.add_argument("--margin", type=float, default=d.fine.collision_margin, metavar="M",
                   help="clearance every answer (and the base) keeps [m]")

    r = p.add_argument_group("the search region")
    r.add_argument("--x", nargs=2, type=float, required=True, metavar=("LO", "HI"),
                   help="x range of the base [m]")
    r.add_argument("--y", nargs=2, type=float, required=True, metavar=("LO", "HI"),
                   help="y range of the base [m]")
    r.add_argument("--yaw", nargs=2, type=float, default=(-180.0, 180.0), metavar=("LO", "HI"),
                   help="yaw range of the base [deg]")
    r.add_argument("--heights", nargs="+", type=float, default=[0.0], metavar="Z",
                   help="heights of the base to try [m]")
    r.add_argument("--resolution", type=float, default=d.resolution, metavar="M",
                   help="coarse grid step on x and y [m]")
    r.add_argument("--yaw-step", type=float, default=math.degrees(d.yaw_step), metavar="DEG",
                   help="coarse grid step in yaw [deg]")

    s = p.add_argument_group("scoring")
    s.add_argument("--top", type=int, default=d.top, metavar="N", help="candidates returned")
    s.add_argument("--refine", type=int, default=d.refine, metavar="N",
                   help="coarse candidates refined (and kept per refinement level)")
    s.add_argument("--xy-tolerance", type=float, default=d.xy_tolerance, metavar="M",
                   help="the refinement's finest step on x and y [m]")
    s.add_argument("--yaw-tolerance", type=float, default=math.degrees(d.yaw_tolerance),
                   metavar="DEG", help="the refinement's finest step in yaw [deg]")
    s.add_argument("--seeds", type=int, default=d.fine.num_seeds, metavar="N",
                   help="seeds per task pose in the refinement")
    s.add_argument("--coarse-seeds", type=int, default=d.coarse.num_seeds, metavar="N",
                   help="seeds per task pose in the coarse pass")
    s.add_argument("--seed", type=int, default=d.fine.rng_seed, metavar="N",
                   help="random seed of the solver's restarts (same seed, same results)")
    s.add_argument("--solver", default=d.solver, help="dls or ccd+dls")
    s.add_argument("--no-prune", action="store_true", help="also solve the pairs beyond the "
                   "arm's proven reach (they are never reached)")

    o = p.add_argument_group("output and execution")
    o.add_argument("--out", default="base_placement", metavar="DIR", help="folder (coarse "
                   "shards, coarse.npz, refined.npz, candidates.npz, summary.json); an "
                   "unfinished search of the same inputs there is resumed")
    o.add_argument("--overwrite", action="store_true", help="start over in --out")
    o.add_argument("--shard-size", type=int, default=d.shard_size, metavar="N",
                   help="candidates per shard (per file, per Ray task)")
    o.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop after this many seconds (finished shards are kept)")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    o.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="shard the coarse pass over Ray: a local cluster (no ADDRESS) or the "
                   "cluster at ADDRESS ('auto', 'host:6379', 'ray://host:10001')")
    o.add_argument("--workers", type=int, default=None, metavar="N",
                   help="CPUs of the local Ray cluster (default: every core)")
    o.add_argument("--threads", type=int, default=1, metavar="N",
                   help="solver threads per Ray task")
    return p


def placement_from_args(args):
    """The :class:`~.placement.Placement` the arguments ask for (IKError for bad ones)."""
    import dataclasses  # noqa: PLC0415

    from ..world.files import load_world  # noqa: PLC0415
    from .placement import Placement, Region  # noqa: PLC0415
    from .targets import load_targets  # noqa: PLC0415

    model = model_from_args(args)
    poses = load_targets(args.poses, 1.0).poses
    world = load_world(args.world, label="--world") if args.world else None
    region = Region(tuple(args.x), tuple(args.y), tuple(math.radians(v) for v in args.yaw),
                    tuple(args.heights))
    d = PlacementConfig()
    common = dict(rng_seed=args.seed, collision_margin=args.margin)
    config = PlacementConfig(
        resolution=args.resolution, yaw_step=math.radians(args.yaw_step), top=args.top,
        refine=args.refine, xy_tolerance=args.xy_tolerance,
        yaw_tolerance=math.radians(args.yaw_tolerance),
        coarse=dataclasses.replace(d.coarse, num_seeds=args.coarse_seeds, **common),
        fine=dataclasses.replace(d.fine, num_seeds=args.seeds, **common),
        solver=args.solver, shard_size=args.shard_size, prune=not args.no_prune)
    collision = collision_from_args(args, model, PROG)
    return Placement(model, poses, region, args.tip, world, config, collision)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        pl = placement_from_args(args)
        executor = ray_from_args(args)
    except IKError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    C, P = len(pl.candidates()), len(pl.poses)
    if not args.quiet:
        print(f"{PROG}: {pl.model.name}, tool {pl.tip}: {P} task poses x {C} candidates "
              f"(frame {args.task_frame!r}) -> {args.out}", file=sys.stderr)
    bars: dict = {}
    try:
        with CtrlC(PROG) as stop:
            progress = None
            if not args.quiet:
                from tqdm import tqdm  # noqa: PLC0415

                def progress(stage, done, total, best):
                    bar = bars.get(stage)
                    if bar is None:
                        for b in bars.values():
                            b.close()
                        bar = bars[stage] = tqdm(total=total, unit="base", desc=stage,
                                                 dynamic_ncols=True, mininterval=0.5,
                                                 file=sys.stderr)
                    bar.set_postfix_str(f"best {best:.0%}", refresh=False)
                    bar.update(done - bar.n)
            from .placement import run_placement  # noqa: PLC0415

            result = run_placement(pl, args.out, executor=executor, progress=progress,
                                   should_stop=stop, timeout=args.timeout,
                                   overwrite=args.overwrite)
    except IKError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{PROG}: stopped; the finished shards are in {args.out}/shards: run the same "
              "command again to resume", file=sys.stderr)
        return EXIT_STOPPED
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for b in bars.values():
            b.close()
    s = result.summary
    if not result.complete:
        print(f"{PROG}: {'timed out' if result.status == 'timed_out' else 'stopped'} with "
              f"{s['shards_done']} of {s['shards']} coarse shards finished (in "
              f"{args.out}/shards); run the same command again to resume", file=sys.stderr)
        return EXIT_TIMED_OUT if result.status == "timed_out" else EXIT_STOPPED
    print(f"{P} task poses x {C} candidates ({s['pairs']} pairs): {s['pruned']} beyond the "
          f"arm's reach, {s['solves_coarse']} coarse solves, {s['solves_fine']} in the "
          f"refinement ({s['refined_candidates']} candidates); {s['bases_in_collision']} bases "
          f"stand in an obstacle; {s['wall_seconds']:.1f} s")
    print(f"best bases in frame {args.task_frame!r} (fraction of the task poses reached, "
          "manipulability at the worst reached pose and on average, smallest clearance):")
    print("  rank        x        y        z   yaw[deg]  reached      worst       mean   "
          "clearance")
    c = result.candidates
    for k in range(len(c["fraction"])):
        x, y, z, yaw = c["base"][k]
        print(f"  {k + 1:4d} {x:8.4f} {y:8.4f} {z:8.4f} {math.degrees(yaw):10.2f} "
              f"{int(c['reached'][k]):4d}/{P:<4d} {_f(c['worst_manipulability'][k])} "
              f"{_f(c['mean_manipulability'][k])} {_f(c['min_clearance'][k])}")
    print(f"results: {args.out}/candidates.npz (with the answers), {args.out}/coarse.npz, "
          f"{args.out}/refined.npz, {args.out}/summary.json")
    return 0


def _f(v) -> str:
    v = float(v)
    return f"{v:10.4f}" if np.isfinite(v) else "         -"


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
