"""``ros2_ik_viewer``: the browser viewer on a bundled robot or a URDF file (the core alone, no
ROS install), or attached to a running ros2_ik node (``--node``).

    ros2_ik_viewer                                   # the panda, http://127.0.0.1:8080
    ros2_ik_viewer --robot dual_arm --tips left_tool,right_tool
    ros2_ik_viewer --urdf my_robot.urdf --mesh-path ~/ws/src --world scene.yaml
    ros2_ik_viewer --reach study_out                 # + a reach study's map
    ros2_ik_viewer --placement placement_out         # a base placement's map: click a cell
    ros2_ik_viewer --node ros2_ik                    # goals sent to the running node
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
import sys
import threading

__all__ = ["main", "build_parser", "make_viewer"]


def build_parser() -> argparse.ArgumentParser:
    from .. import robots  # noqa: PLC0415

    p = argparse.ArgumentParser(
        prog="ros2_ik_viewer", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[2:]))
    src = p.add_mutually_exclusive_group()
    src.add_argument("--robot", default=None,
                     help=f"bundled robot ({', '.join(robots.names())}; default panda)")
    src.add_argument("--urdf", default=None, metavar="FILE", help="a URDF file")
    src.add_argument("--node", default=None, metavar="NAME",
                     help="attach to a running ros2_ik node (its robot_description; goals sent "
                          "to its compute_ik and trajectory_seed)")
    p.add_argument("--description-topic", default="/robot_description", metavar="TOPIC",
                   help="with --node: the topic of the URDF the node serves (default "
                        "/robot_description)")
    p.add_argument("--tips", default="", help="comma-separated links with a goal gizmo "
                                              "(default: the model's default tip)")
    p.add_argument("--mesh-path", default="", metavar="DIRS",
                   help="':'-separated directories for package:// and relative meshes")
    p.add_argument("--world", default=None, metavar="FILE", help="obstacles: YAML (as "
                   "ros2_ik.world.World.to_yaml writes them), an octomap (.bt, .ot), a point "
                   "cloud (.pcd, .ply, .npz, .xyz) or a mesh (.stl, .obj, ...) as its cells "
                   "(ros2_ik.world.files); shown and avoided")
    p.add_argument("--collisions", action="store_true",
                   help="start with collision avoidance on (a checkbox on the page)")
    p.add_argument("--reach", default=None, metavar="DIR",
                   help="a reach study's output folder: its map as a point cloud")
    p.add_argument("--placement", default=None, metavar="DIR",
                   help="a base placement's output folder (ros2_ik_base_placement --out): its "
                   "map on the floor; click a cell to stand the robot there")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (0.0.0.0: other machines too)")
    p.add_argument("--port", type=int, default=8080)
    return p


def make_viewer(args):
    """The :class:`~.app.Viewer` of parsed ``args``."""
    from .. import load_robot, robots  # noqa: PLC0415
    from ..model import Model  # noqa: PLC0415
    from .app import Viewer  # noqa: PLC0415
    from .solvers import CoreSolver, NodeSolver  # noqa: PLC0415

    world = None
    if args.world:
        from ..world.files import load_world  # noqa: PLC0415

        world = load_world(args.world, label="--world")
    solver = None
    if args.node:
        solver = NodeSolver(args.node, description_topic=args.description_topic)
        try:
            urdf = solver.wait_for_model()
            model = Model.from_urdf(urdf)
        except BaseException:
            solver.close()
            raise
        solver.model = model
    elif args.urdf:
        with open(args.urdf, encoding="utf-8") as f:
            urdf = f.read()
        model = Model.from_urdf(urdf)
        args.mesh_path = ":".join(p for p in (args.mesh_path, str(Path(args.urdf).parent)) if p)
    else:
        name = args.robot or "panda"
        urdf = robots.urdf_string(name)
        model = load_robot(name)
    tips = [t.strip() for t in args.tips.split(",") if t.strip()] or None
    mesh_path = [p for p in args.mesh_path.split(":") if p]
    if solver is None:  # (the collision model finds its meshes where the visuals are found)
        solver = CoreSolver(model, world=world, mesh_path=mesh_path)
    else:
        solver.mesh_path = tuple(mesh_path)
    return Viewer(model, urdf, solver=solver, tips=tips, world=world, reach_dir=args.reach,
                  placement_dir=args.placement, mesh_path=mesh_path, host=args.host,
                  port=args.port, avoid_collisions=args.collisions)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import viser  # noqa: F401, PLC0415
        import yourdfpy  # noqa: F401, PLC0415
    except ImportError as exc:
        print(f"ros2_ik_viewer: error: {exc.name} is not installed; install the viewer extra: "
              "pip install 'ros2_ik[viewer]' (viser, yourdfpy)", file=sys.stderr)
        return 2
    from ..errors import IKError  # noqa: PLC0415

    try:
        viewer = make_viewer(args)
    except (OSError, ValueError, TimeoutError, IKError) as exc:
        print(f"ros2_ik_viewer: error: {exc}", file=sys.stderr)
        return 2
    print(f"ros2_ik_viewer: open {viewer.url} in a browser (Ctrl-C to stop)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        viewer.close()
    return 0
