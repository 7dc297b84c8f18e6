"""``reach_study``: run a reach study from the command line.

    ros2 run ros2_ik reach_study --robot panda --sphere 0 0 0.333 1.0 --resolution 0.05 \\
        --directions 30 --rolls 4 --out panda_reach
    python -m ros2_ik.reach --urdf my_robot.urdf --tip tool0 --targets poses.csv --out study
    reach_study ... --ray                 # shards over a local Ray cluster (every core)
    reach_study ... --ray auto            # ... or over the running cluster ("host:6379" too)

Progress bar with ETA on stderr; Ctrl-C stops after the shards in flight (finished shards stay
in ``--out``; the same command resumes); a second Ctrl-C stops at once. Exit status: 0 done,
2 bad input (the message says what and what to do), 130 stopped by Ctrl-C, 1 anything else.
"""

from __future__ import annotations

import argparse
import sys

from .. import robots
from ..errors import IKError, InvalidInputError
from .cli_common import CtrlC, collision_from_args, model_from_args, ray_from_args
from .study import StudyConfig

__all__ = ["main", "build_parser"]

PROG = "reach_study"
EXIT_BAD_INPUT = 2
EXIT_STOPPED = 130


def build_parser() -> argparse.ArgumentParser:
    d = StudyConfig()
    p = argparse.ArgumentParser(
        prog=PROG, description="Reach study: IK at every target pose (verified by FK), "
        "reachability index per voxel, results as NPZ shards, heat maps as PNG.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("robot")
    src = m.add_mutually_exclusive_group()
    src.add_argument("--robot", default=None, help=f"bundled robot ({', '.join(robots.ROBOTS)}); "
                     "the default when no --urdf is given is panda")
    src.add_argument("--urdf", default=None, metavar="FILE", help="URDF file of the robot")
    m.add_argument("--base", default=None, metavar="LINK", help="base link (default: the root)")
    m.add_argument("--tip", default=None, metavar="LINK", help="tip link (default: the end "
                   "of the longest chain, as the node)")

    t = p.add_argument_group("targets (one of --box, --sphere, --targets)")
    where = t.add_mutually_exclusive_group()
    where.add_argument("--box", nargs=6, type=float, metavar=("XMIN", "YMIN", "ZMIN", "XMAX",
                                                              "YMAX", "ZMAX"),
                       help="voxel grid over this box [m] in the base frame")
    where.add_argument("--sphere", nargs=4, type=float, metavar=("CX", "CY", "CZ", "R"),
                       help="voxel grid over this ball [m]")
    where.add_argument("--targets", metavar="FILE", help="poses from a .csv / .npz / .yaml file "
                       "(x y z qx qy qz qw, base frame)")
    t.add_argument("--resolution", type=float, default=0.05, metavar="M",
                   help="voxel edge [m] (file targets are binned on it)")
    t.add_argument("--directions", type=int, default=30, metavar="N", help="approach "
                   "directions per voxel (Fibonacci lattice on the sphere)")
    t.add_argument("--rolls", type=int, default=4, metavar="N",
                   help="rotations about the tool axis per direction")

    s = p.add_argument_group("solver (defaults: the node's parameters)")
    s.add_argument("--num-seeds", type=int, default=d.ik.num_seeds, metavar="N")
    s.add_argument("--stall-iterations", type=int, default=d.ik.stall_iterations, metavar="N")
    s.add_argument("--max-iterations", type=int, default=d.ik.max_iterations, metavar="N")
    s.add_argument("--position-tolerance", type=float, default=d.ik.position_tolerance,
                   metavar="M")
    s.add_argument("--orientation-tolerance", type=float, default=d.ik.orientation_tolerance,
                   metavar="RAD")
    s.add_argument("--seed", type=int, default=d.ik.rng_seed, metavar="N",
                   help="random seed of the solver's restarts (same seed, same results)")
    s.add_argument("--solver", default=d.solver, help="dls, ccd or ccd+dls")
    s.add_argument("--no-prune", action="store_true", help="also solve targets beyond the "
                   "chain's reach bound (they are never reached)")
    c = p.add_argument_group("collisions (on by default: a target counts as reached only by an "
                             "answer clear of the robot itself and of the world)")
    c.add_argument("--world", metavar="FILE", help="obstacles: YAML (as ros2_ik.world writes "
                   "them, e.g. the table the robot stands on), an octomap (.bt, .ot), a point "
                   "cloud (.pcd, .ply, .npz, .xyz; 2 cm cells) or a mesh (.stl, .obj, ...; 5 mm "
                   "cells): ros2_ik.world.files")
    c.add_argument("--no-collisions", action="store_true", help="reach without any collision "
                                                                "check")
    c.add_argument("--mesh-path", default="", metavar="DIRS",
                   help="':'-separated directories where package:// and relative collision "
                        "meshes are looked for (also the URDF's folder and $ROS2_IK_MESH_PATH)")
    c.add_argument("--srdf", default=None, metavar="FILE",
                   help="the robot's SRDF: its disabled pairs and sphere approximations")
    c.add_argument("--margin", type=float, default=d.ik.collision_margin, metavar="M",
                   help="clearance an answer keeps [m] (default %(default)g)")
    s.add_argument("--backend", default="numpy", choices=("numpy", "cupy", "auto"),
                   help="CPU path, GPU path, or the GPU when one is usable")

    o = p.add_argument_group("output and execution")
    o.add_argument("--out", default="reach_study", metavar="DIR", help="study folder (shards, "
                   "results.npz, voxels.npz, summary.json, plots/); an unfinished study of the "
                   "same inputs there is resumed")
    o.add_argument("--overwrite", action="store_true", help="start over in --out")
    o.add_argument("--shard-size", type=int, default=d.shard_size, metavar="N",
                   help="targets per shard (per file, per Ray task)")
    o.add_argument("--no-plots", action="store_true", help="no PNG heat maps")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    o.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="shard over Ray: a local cluster (no ADDRESS) or the cluster at "
                   "ADDRESS ('auto', 'host:6379', 'ray://host:10001')")
    o.add_argument("--workers", type=int, default=None, metavar="N",
                   help="CPUs of the local Ray cluster (default: every core)")
    o.add_argument("--threads", type=int, default=1, metavar="N",
                   help="solver threads per Ray task")
    o.add_argument("--gpus-per-task", type=float, default=0.0, metavar="F",
                   help="GPUs each Ray task asks for; with --backend auto a task solves on "
                   "its GPU")
    return p


def _study_from_args(args):
    from ..ik import IKConfig  # noqa: PLC0415
    from .study import Study  # noqa: PLC0415
    from .targets import Box, Sphere, grid_targets, load_targets  # noqa: PLC0415

    model = model_from_args(args)
    if args.targets:
        targets = load_targets(args.targets, args.resolution)
    elif args.box:
        targets = grid_targets(Box(tuple(args.box[:3]), tuple(args.box[3:])), args.resolution,
                               args.directions, args.rolls)
    elif args.sphere:
        targets = grid_targets(Sphere(tuple(args.sphere[:3]), args.sphere[3]), args.resolution,
                               args.directions, args.rolls)
    else:
        raise InvalidInputError("no targets: give --box XMIN YMIN ZMIN XMAX YMAX ZMAX, --sphere "
                           "CX CY CZ R or --targets FILE")
    world = None
    if args.world:
        from ..world.files import load_world  # noqa: PLC0415

        if args.no_collisions:
            raise InvalidInputError("--world and --no-collisions: a world needs collisions on")
        world = load_world(args.world, label="--world")
    ik = IKConfig(num_seeds=args.num_seeds, stall_iterations=args.stall_iterations,
                  max_iterations=args.max_iterations, position_tolerance=args.position_tolerance,
                  orientation_tolerance=args.orientation_tolerance, rng_seed=args.seed,
                  avoid_collisions=not args.no_collisions, collision_margin=args.margin)
    config = StudyConfig(ik=ik, solver=args.solver, shard_size=args.shard_size,
                         prune=not args.no_prune, backend=args.backend, world=world)
    collision = None
    if not args.no_collisions:  # meshes found as every entry point finds them
        collision = collision_from_args(args, model, PROG)
    return Study(model, targets, args.tip, config, collision)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        study = _study_from_args(args)
        executor = ray_from_args(args, gpus_per_task=args.gpus_per_task)
    except IKError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    t = study.targets
    if not args.quiet:
        print(f"{PROG}: {study.model.name}, tip {study.tip}: {len(t)} targets in "
              f"{t.num_voxels} voxels ({t.description}), {study.num_shards} shards -> "
              f"{args.out}", file=sys.stderr)
    bar = None
    try:
        with CtrlC(PROG) as stop:
            progress = None
            if not args.quiet:
                from tqdm import tqdm  # noqa: PLC0415

                bar = tqdm(total=len(t), unit="target", unit_scale=True, dynamic_ncols=True,
                           mininterval=0.5, file=sys.stderr)

                def progress(done, total, reached):
                    bar.set_postfix_str(f"reached {reached / max(done, 1):.1%}", refresh=False)
                    bar.update(done - bar.n)
                    if done == total:
                        bar.close()  # before merging and drawing
            from .runner import run_study  # noqa: PLC0415

            result = run_study(study, args.out, executor=executor, progress=progress,
                               should_stop=stop, overwrite=args.overwrite,
                               plots=not args.no_plots)
    except IKError as exc:
        if bar is not None:
            bar.close()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"{PROG}: stopped; the finished shards are in {args.out}/shards: run the same "
              "command again to resume", file=sys.stderr)
        return EXIT_STOPPED
    except OSError as exc:
        if bar is not None:
            bar.close()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if bar is not None:
        bar.close()
    s = result.summary
    if not result.complete:
        print(f"{PROG}: stopped with {s['shards_done']} of {s['shards']} shards finished (in "
              f"{args.out}/shards); run the same command again to resume", file=sys.stderr)
        return EXIT_STOPPED
    print(f"targets {s['targets']}, reached {s['reached']} ({s['reached_fraction']:.1%}), "
          f"beyond the reach bound {s['out_of_reach']}; voxels {s['voxels']} "
          f"({s['voxels_reached']} reached, mean index {s['mean_reachability']:.3f})")
    rate = s["solves_per_second"]
    print(f"time {s['solve_wall_seconds']:.1f} s for {s['targets_solved_this_run']} targets "
          f"this run ({rate if rate is not None else 0:.0f} solves/s, {s['executor']}"
          f"{', ' + str(s['shards_resumed']) + ' shards resumed' if s['shards_resumed'] else ''})"
          f"; total {s['wall_seconds']:.1f} s")
    print(f"results: {args.out}/results.npz, {args.out}/voxels.npz, {args.out}/summary.json"
          + "".join(f", {p}" for p in result.plots))
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
