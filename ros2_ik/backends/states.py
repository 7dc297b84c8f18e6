"""The host state checks: the exact check of many configurations by the generated kernel
(:func:`ros2_ik.backends.terms.collision.emit_state_checks`), run in slices on a pool of
worker threads (ctypes lets go of the GIL for the call), as :class:`.host.HostSolver` runs its
problems.

A :class:`HostStateChecker` is built for one model and the structure of its collision model
(the joints that move collision links): the spheres, pairs and world are data (the packed
scene, :func:`.terms.collision_scene.pack_scene`), so one build serves every collision model
of that structure (attached objects, padding, allowed pairs). A stop (``should_stop()``) and
a deadline are looked at before every slice starts: a slice is :data:`SLICE` configurations
(a few milliseconds of one core).
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from ..model import Model
from .host import WorkerPool, compile_host, threads
from .terms.collision import STATE_OUT, states_source
from .terms.collision_scene import collision_chain, pack_scene

__all__ = ["HostStateChecker", "SLICE", "covered"]

#: configurations per call of the kernel (a stop or a deadline is seen between two)
SLICE = 2048

_pool = WorkerPool("ros2_ik-states")


def covered(model: Model, cm) -> str | None:
    """Why the compiled state check cannot carry this model and collision model (None: it
    can)."""
    if cm.num_spheres == 0:
        return "the collision model has no spheres"
    if collision_chain(model, cm, ()) is None:
        return ("a joint on a collision link's path is not revolute, continuous, prismatic or "
                "fixed")
    return None


class HostStateChecker:
    """The compiled state check of ``model`` with collision models shaped like ``cm`` (see the
    module docstring); :meth:`check` runs it."""

    def __init__(self, model: Model, cm):
        self.model = model
        self.cc = collision_chain(model, cm, ())
        self.module = compile_host(states_source(model, self.cc))
        fn = self.module.lib.host_r2ik_check_states
        fn.argtypes = [ctypes.c_longlong, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_longlong, ctypes.c_int, ctypes.c_double, ctypes.c_void_p]
        fn.restype = None
        self._fn = fn
        self._kept = None

    def key(self) -> tuple:
        """What the compiled source depends on (the collision model's structure)."""
        return structure_key(self.cc)

    def scene(self, cm, world):
        """The packed scene of a collision model and a world (the last one kept)."""
        kept = self._kept
        if kept is not None and kept[0] is cm and kept[1] is world:
            return kept[2]
        sc = pack_scene(self.cc, cm, world)
        self._kept = (cm, world, sc)
        return sc

    def check(self, q: np.ndarray, cm, world, *, self_collisions: bool = True,
              reach: float = np.inf, should_stop=None, deadline: float | None = None):
        """(out (B, 4), done (B,) bool): per configuration of ``q`` (B, nq; float64, finite)
        the self pairs' smallest distance and pair, the world's and its pair (1e30 and -1:
        nothing checked); ``done`` False for the slices a stop or the ``deadline``
        (``time.monotonic()``) left unchecked (their rows undefined: a large batch's memory is
        touched only where it is checked)."""
        q = np.ascontiguousarray(q, dtype=np.float64)
        B = q.shape[0]
        sc = self.scene(cm, world)
        out = np.empty((B, STATE_OUT))
        done = np.zeros(B, dtype=bool)
        nq = self.model.nq
        qa, oa, da = q.ctypes.data, out.ctypes.data, sc.data.ctypes.data
        so = int(bool(self_collisions))
        fn = self._fn
        stop = [False]

        def run(a: int, b: int) -> None:
            if stop[0]:
                return
            if (should_stop is not None and should_stop()) or \
                    (deadline is not None and time.monotonic() >= deadline):
                stop[0] = True
                return
            fn(b - a, b - a, qa + 8 * nq * a, da, sc.n_obs, so, float(reach),
               oa + 8 * STATE_OUT * a)
            done[a:b] = True

        cuts = list(range(0, B, SLICE)) + [B]
        pairs = list(zip(cuts[:-1], cuts[1:]))
        n = threads()
        if n <= 1 or len(pairs) == 1:
            for a, b in pairs:
                run(a, b)
        else:
            try:
                futures = [_pool.get(n).submit(run, a, b) for a, b in pairs]
            except RuntimeError:  # the interpreter is shutting down: no more threads
                futures = None
                for a, b in pairs:
                    run(a, b)
            for f in futures or ():
                f.result()
        return out, done


def structure_key(cc) -> tuple:
    """The compiled state check's identity: the nodes and anchors of a collision chain."""
    return (tuple((n.link, n.parent, n.qi, n.prismatic, n.mult, n.off, n.axis,
                   np.asarray(n.pre).tobytes()) for n in cc.nodes),
            tuple(sorted((int(k), int(v[0])) for k, v in cc.anchors.items())))
