"""What the reach commands share (``reach_study``, ``ros2_ik_base_placement``): the robot and
its collision model from the arguments, files read with a clear error, the Ray executor, and
Ctrl-C that stops after the shards in flight."""

from __future__ import annotations

import os
import signal
import sys

from ..errors import InvalidInputError

__all__ = ["CtrlC", "read_text", "model_from_args", "collision_from_args", "ray_from_args"]


class CtrlC:
    """First Ctrl-C: stop after the shards in flight (calling the object says whether one came).
    Second: KeyboardInterrupt."""

    def __init__(self, prog: str):
        self.prog = prog
        self.requested = False
        self._old = None

    def __enter__(self):
        self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._old)

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{self.prog}: stopping after the shards in flight (Ctrl-C again to stop at "
              "once); finished shards are kept", file=sys.stderr)

    def __call__(self) -> bool:
        return self.requested


def read_text(path: str, flag: str, hint: str = "give the path of a readable file") -> str:
    """The text of the file ``path`` given as ``flag`` (InvalidInputError naming both)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise InvalidInputError(f"{flag} {path!r}: {exc.strerror}; {hint}") from None


def model_from_args(args):
    """The robot of ``--urdf`` / ``--robot`` (default panda), from ``--base`` if given."""
    from ..model import Model, load_robot  # noqa: PLC0415

    if args.urdf:
        if not os.path.isfile(args.urdf):
            raise InvalidInputError(f"--urdf {args.urdf!r}: no such file; give the path of a URDF")
        return Model.from_file(args.urdf, base=args.base)
    model = load_robot(args.robot or "panda")
    return model.subtree(args.base) if args.base else model


def collision_from_args(args, model, prog: str):
    """The collision model of ``model`` as every entry point finds it: meshes in
    ``--mesh-path``, the URDF's folder and $ROS2_IK_MESH_PATH, the ``--srdf``, pairs within
    ``--margin`` in nearly every configuration left out. A link whose geometry has no spheres
    is an InvalidInputError; the model's warnings are printed on stderr."""
    import warnings  # noqa: PLC0415

    from ..ik.collision import default_collision_model  # noqa: PLC0415
    from ..model.collision import missing_message  # noqa: PLC0415

    dirs = [p for p in args.mesh_path.split(":") if p]
    if args.urdf:
        dirs.append(os.path.dirname(os.path.abspath(args.urdf)))
    srdf = read_text(args.srdf, "--srdf") if args.srdf else None
    with warnings.catch_warnings():  # (its warnings are printed below)
        warnings.simplefilter("ignore")
        collision = default_collision_model(model, srdf, within=args.margin,
                                            search_path=tuple(dirs))
    if collision.missing:
        raise InvalidInputError(missing_message(collision.missing).replace(
            "search_path= in the library, the node's collision.mesh_path parameter, ", ""))
    for w in collision.warnings:
        print(f"{prog}: warning: {w}", file=sys.stderr)
    return collision


def ray_from_args(args, **options):
    """The Ray executor ``--ray [ADDRESS]`` asks for (None without it)."""
    if args.ray is None:
        return None
    from .ray_executor import RayExecutor  # noqa: PLC0415

    return RayExecutor(None if args.ray == "local" else args.ray, num_workers=args.workers,
                       threads=args.threads, **options)
