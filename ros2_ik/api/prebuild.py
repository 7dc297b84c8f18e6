"""Build the compiled kernels of robots into the on-disk cache ahead of use.

``scripts/setup.sh`` runs ``python -m ros2_ik.api.prebuild`` once, for the bundled robots
(their default tips, their planning groups' tips and the frames the node draws), so that
the node and library calls on them start in milliseconds instead of seconds of g++.
"""

from __future__ import annotations

import sys
import time

from ..errors import UnknownRobotError
from ..ik.config import IKConfig
from ..model import parse_srdf
from ..validate import check_flag, check_names, naming
from .kinematics import Kinematics
from .solver import IKSolver, compiled_status

__all__ = ["prebuild", "build_scope", "waiting_for_builds", "cancel_background_builds"]

#: the node's default options with collision avoidance (its MoveIt service's solver)
_NODE_COLLISIONS = IKConfig(num_seeds=32, stall_iterations=5, avoid_collisions=True)


def build_scope():
    """A :class:`ros2_ik.backends.host.BuildScope`: the kernel builds started in a thread
    while it is entered can be ended from another (a node shutting down while it prepares a
    model; the prepared solvers being built then answer with the reference)."""
    from ..backends.host import BuildScope  # noqa: PLC0415

    return BuildScope()


def waiting_for_builds(wait: bool = True):
    """A context manager: in it, this thread's kernel builds wait for g++ (``wait``, the
    library's default) or run in the background while the reference answers
    (:func:`ros2_ik.backends.host.waiting_for_builds`)."""
    from ..backends.host import waiting_for_builds as scoped  # noqa: PLC0415

    return scoped(wait)


def cancel_background_builds() -> None:
    """End the kernel builds running in the background (a node shutting down)."""
    from ..backends.host import cancel_background_builds as cancel  # noqa: PLC0415

    cancel()


def prebuild(names=None, *, verbose: bool = False) -> float:
    """Build (or load from the cache) the kernels of the bundled robots ``names`` (default:
    all); returns the seconds it took."""
    from .. import robots  # noqa: PLC0415
    from ..model import load_robot  # noqa: PLC0415

    t0 = time.perf_counter()
    names = robots.names() if names is None else check_names(names, "names", kind="robot")
    for name in names:  # each checked before any build
        if name not in robots.ROBOTS:
            raise naming(UnknownRobotError(name, robots.names()), "names")
    check_flag(verbose, "verbose")
    for name in names:
        m = load_robot(name)
        jobs = {(m, tuple(m.tips))} | {(m, (t,)) for t in m.tips}
        srdf = robots.srdf_string(name)
        if srdf:
            doc = parse_srdf(srdf)
            for g in doc.group_names:
                try:
                    grp = doc.group(m, g)
                except Exception:  # noqa: BLE001 - a group the model does not resolve
                    continue
                if grp.tip is not None:
                    jobs.add((grp.restrict(m), (grp.tip,)))
        for model, tips in jobs:
            s = IKSolver(model, list(tips), IKConfig())
            if len(tips) == 1 and model is m:  # and the collision-aware solver of each tip
                IKSolver(model, list(tips), _NODE_COLLISIONS)
            if verbose:
                why = f" ({s.reason})" if s.reason else ""
                print(f"  {name} {list(tips)}: {s.backend}{why}")
        Kinematics(m, list(m.link_names))
        for t in m.tips:
            Kinematics(m, t)
            Kinematics(m, [t])
    return time.perf_counter() - t0


if __name__ == "__main__":
    print(compiled_status())
    print(f"kernels ready in {prebuild(sys.argv[1:] or None, verbose=True):.1f} s")
