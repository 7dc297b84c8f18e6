"""``ros2_ik_collision_pairs``: the link pairs a robot's self-collision check can skip, as SRDF
``<disable_collisions>`` entries (what MoveIt's setup assistant computes).

    ros2_ik_collision_pairs --robot panda                 # a bundled robot
    ros2_ik_collision_pairs --urdf robot.urdf [--srdf robot.srdf] [--samples 10000]
                            [--mesh-path DIR ...] [--spheres spheres.yaml] [--margin 0.01]
                            [--write OUT.srdf]

Samples random configurations within the joint limits on the robot's collision model
(:mod:`ros2_ik.model.collision`) and prints one entry per pair: "Adjacent" (a link and the
nearest link with geometry above it, or rigidly attached links), "Always" (closer than
``--margin`` in at least 95 % of the samples, spheres and meshes both: in contact by
construction, or never apart by the clearance a collision-aware answer must keep, so checking
them would fail every answer) and "Never" (no overlap in any sample). A pair whose spheres are
always that near but whose meshes are not is not disabled: the library checks it for contact.
With ``--write`` the entries are added to the SRDF given (or to an empty one) and written out;
the node and the library then skip those pairs. Exit 2 with a message on bad input.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import IKError

__all__ = ["main"]


def main(argv=None) -> int:
    from .. import robots  # noqa: PLC0415
    from ..ik.collision import sample_disabled_pairs, srdf_entries  # noqa: PLC0415
    from ..model import Model, load_robot, parse_srdf  # noqa: PLC0415
    from ..model.collision import collision_model  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="ros2_ik_collision_pairs", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--robot", help=f"a bundled robot: {', '.join(robots.names())}")
    src.add_argument("--urdf", help="a URDF file")
    ap.add_argument("--srdf", help="an SRDF file whose entries are kept (and extended with "
                                   "--write)")
    ap.add_argument("--samples", type=int, default=10_000, help="random configurations "
                                                                "(default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--mesh-path", action="append", default=[], metavar="DIR",
                    help="where package:// and relative mesh files are looked for")
    ap.add_argument("--spheres", help="a spheres YAML file (the collision model's spheres)")
    ap.add_argument("--margin", type=float, default=0.01,
                    help="a pair closer than this [m] in 95 %% of the samples is 'Always' (the "
                         "node's collision.margin; default 0.01; 0: only overlapping pairs)")
    ap.add_argument("--write", metavar="OUT", help="write the SRDF with the entries added here")
    args = ap.parse_args(argv)
    try:
        if args.robot:
            model = load_robot(args.robot)
            srdf_text = robots.srdf_string(args.robot) or None
        else:
            model = Model.from_file(args.urdf)
            srdf_text = None
        if args.srdf:
            with open(args.srdf, encoding="utf-8") as f:
                srdf_text = f.read()
        spheres = None
        if args.spheres:
            with open(args.spheres, encoding="utf-8") as f:
                spheres = f.read()
        cm = collision_model(model, spheres=spheres, search_path=args.mesh_path,
                             srdf=srdf_text if srdf_text else None, accept_missing=True)
        if cm.missing:
            from ..model.collision import missing_message  # noqa: PLC0415

            raise IKError(missing_message(cm.missing).replace("search_path= in the library",
                                                              "--mesh-path"))
        pairs = sample_disabled_pairs(model, cm, args.samples, args.seed, within=args.margin,
                                      search_path=args.mesh_path)
        known = set()
        if srdf_text:
            for a, b, _ in parse_srdf(srdf_text).disabled_collisions:
                known.add(tuple(sorted((a, b))))
        new = [p for p in pairs if tuple(sorted(p[:2])) not in known]
        text = srdf_entries(new) if new else ""
        if args.write:
            base = srdf_text or f'<?xml version="1.0"?>\n<robot name="{model.name}">\n</robot>\n'
            end = base.rindex("</robot>")
            with open(args.write, "w", encoding="utf-8") as f:
                f.write(base[:end] + text + base[end:])
            print(f"{len(new)} entries added, written to {args.write}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        checked = len(cm.pairs) - sum(1 for p in pairs if p[2] != "Adjacent")
        print(f"{model.name}: {cm.num_spheres} spheres on {len(cm.link_names)} links; "
              f"{len(pairs)} pairs disabled, {checked} checked ({args.samples} samples)",
              file=sys.stderr)
        return 0
    except (IKError, OSError, ValueError) as exc:
        print(f"ros2_ik_collision_pairs: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
