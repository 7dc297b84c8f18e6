"""``ros2_ik_spheres``: a robot's collision spheres, link by link: how many, how far they reach
past the link's geometry (the overshoot) and whether they cover it, measured afresh on a new
surface sample; written as SRDF ``<link_sphere_approximation>`` elements or a YAML file.

    ros2_ik_spheres --robot panda                         # a bundled robot
    ros2_ik_spheres --urdf robot.urdf --mesh-path DIR [--srdf robot.srdf] [--overshoot 0.005]
                    [--fit-to-mesh] [--tips LINK ...] [--write-srdf OUT.srdf] [--yaml OUT.yaml]

Every link with geometry whose pose the solve depends on is listed (side branches of a tip
the model leaves out, such as fingers, too; see :mod:`ros2_ik.model.collision`). Exit 0 when
every link's overshoot is within the bound and every sample is covered, 1 when not, 2 with a
message on bad input (a missing mesh included: it names the link, the file and where it was
looked for).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import IKError

__all__ = ["main", "sphere_report"]


def sphere_report(model, cm, search_path=(), mesh: bool = True) -> list:
    """``[(link, spheres, overshoot [m], uncovered [m], past the mesh [m])]`` of the collision
    model ``cm`` of ``model``: each link's spheres measured against its own geometry (the
    URDF's collision shapes in the frame the spheres are given in; links whose spheres were
    given, not fitted, against that geometry too when it can be read). ``overshoot``: past the
    geometry's convex hull in any direction (support functions); ``past the mesh``: past the
    geometry itself (:func:`ros2_ik.model.concavity.mesh_overshoot`: a concave link's slot or
    jaw gap counts; NaN for a swept link, or with ``mesh`` False)."""
    import numpy as np  # noqa: PLC0415

    from ..model.collision import full_tree, link_shapes, sphere_placements  # noqa: PLC0415
    from ..model.concavity import mesh_overshoot  # noqa: PLC0415
    from ..model.spheres import report  # noqa: PLC0415

    full = full_tree(model)
    rows = []
    attached = {a[0] for a in cm.attached}
    for c, link in enumerate(cm.link_names):
        sl = cm.spheres_of(c)
        if link in attached:
            continue
        _, Ts = sphere_placements(model, full, link, {}, [])
        shapes = link_shapes(model, link, search_path, full)
        if not shapes:
            rows.append((link, sl.stop - sl.start, float("nan"), float("nan"), float("nan")))
            continue
        cen, rad = np.asarray(cm.center[sl]), np.asarray(cm.radius[sl])
        rep = report(shapes, cen, rad)
        past = (mesh_overshoot(cen, rad, shapes) if mesh and len(Ts) == 1
                else float("nan"))
        rows.append((link, rep["spheres"], rep["overshoot"], rep["uncovered"], past))
    return rows


def main(argv=None) -> int:
    from .. import robots  # noqa: PLC0415
    from ..model import Model, load_robot  # noqa: PLC0415
    from ..model.collision import collision_model  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="ros2_ik_spheres", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--robot", help=f"a bundled robot: {', '.join(robots.names())}")
    src.add_argument("--urdf", help="a URDF file")
    ap.add_argument("--srdf", help="an SRDF file (its <link_sphere_approximation> spheres are "
                                   "used for their links, and kept with --write-srdf)")
    ap.add_argument("--mesh-path", action="append", default=[], metavar="DIR",
                    help="where package:// and relative mesh files are looked for")
    ap.add_argument("--tips", nargs="+", metavar="LINK", help="cut the model to these tips "
                    "(the side branches of a tip's body are still covered)")
    ap.add_argument("--overshoot", type=float, default=0.005,
                    help="how far [m] the spheres may reach past a link's geometry (default "
                         "0.005)")
    ap.add_argument("--fit-to-mesh", action="store_true",
                    help="keep the bound against each link's own mesh, not only its convex "
                         "hull (a concave link's slot or jaw gap left empty; more spheres)")
    ap.add_argument("--no-mesh-check", action="store_true",
                    help="skip measuring how far the spheres reach past the mesh itself "
                         "(exact signed distances: seconds a link)")
    ap.add_argument("--write-srdf", metavar="OUT", help="write the SRDF given (or an empty "
                    "one) with the links' <link_sphere_approximation> elements here")
    ap.add_argument("--yaml", metavar="OUT", help="write the spheres as a YAML file here")
    args = ap.parse_args(argv)
    try:
        if args.robot:
            model = load_robot(args.robot, tips=args.tips)
            srdf_text = robots.srdf_string(args.robot) or None
        else:
            model = Model.from_file(args.urdf, tips=args.tips)
            srdf_text = None
        if args.srdf:
            with open(args.srdf, encoding="utf-8") as f:
                srdf_text = f.read()
        if args.write_srdf and srdf_text:  # refit: the SRDF's own spheres are replaced
            import re  # noqa: PLC0415

            srdf_text = re.sub(r"\s*<link_sphere_approximation.*?</link_sphere_approximation>",
                               "", srdf_text, flags=re.S)
        cm = collision_model(model, srdf=srdf_text, search_path=args.mesh_path,
                             overshoot=args.overshoot, accept_missing=True,
                             fit_to_mesh=args.fit_to_mesh)
        if cm.missing:
            for link, why in cm.missing:
                print(f"ros2_ik_spheres: error: link {link!r}: {why}", file=sys.stderr)
            print("give the meshes' directory with --mesh-path (or $ROS2_IK_MESH_PATH)",
                  file=sys.stderr)
            return 2
        rows = sphere_report(model, cm, args.mesh_path, mesh=not args.no_mesh_check)
        print(f"{'link':28s} {'spheres':>7s} {'overshoot [mm]':>15s} {'past mesh [mm]':>15s} "
              f"{'uncovered [mm]':>15s}")
        bad = 0
        from ..model.concavity import SHALLOW  # noqa: PLC0415

        for link, n, over, unc, past in rows:
            flag = ""
            if over == over and (over > args.overshoot + 1e-9 or unc > 1e-9 or (
                    args.fit_to_mesh and past > args.overshoot + SHALLOW)):
                flag, bad = "  <- over the bound or not covered", bad + 1
            print(f"{link:28s} {n:7d} {1e3 * over:15.2f} {1e3 * past:15.2f} "
                  f"{1e3 * unc:15.3f}{flag}")
        where = (f"past the hull and the mesh (within {1e3 * SHALLOW:g} mm of the mesh for a "
                 "link with no deeper concavity)" if args.fit_to_mesh else
                 "past the hull (--fit-to-mesh: past the mesh too)")
        print(f"{model.name}: {cm.num_spheres} spheres on {len(cm.link_names)} links "
              f"(overshoot bound {1e3 * args.overshoot:g} mm {where}; 'past mesh' nan: a "
              "swept link; 'uncovered' <= 0: every vertex and a new surface sample inside)")
        for note in cm.notes:
            print(f"note: {note}")
        if args.write_srdf:
            base = srdf_text or f'<?xml version="1.0"?>\n<robot name="{model.name}">\n</robot>\n'
            end = base.rindex("</robot>")
            with open(args.write_srdf, "w", encoding="utf-8") as f:
                f.write(base[:end] + cm.to_srdf() + base[end:])
            print(f"written to {args.write_srdf}", file=sys.stderr)
        if args.yaml:
            with open(args.yaml, "w", encoding="utf-8") as f:
                f.write(cm.to_yaml())
            print(f"written to {args.yaml}", file=sys.stderr)
        return 1 if bad else 0
    except (IKError, OSError, ValueError) as exc:
        print(f"ros2_ik_spheres: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
