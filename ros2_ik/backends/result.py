"""A compiled solve's output as an :class:`IKResult`, for every compiled backend."""

from __future__ import annotations

import time

import numpy as np

from ..ik.batch import collision_message
from ..ik.checks import check_seeds
from ..ik.config import INVALID_GOAL_MESSAGE, IKConfig, IKResult, Status, unsolved_message
from ..model import Model
from . import interface

__all__ = ["result_of"]

_F_STATUS, _F_PE, _F_RE, _F_IT, _F_SEED, _F_FLAGS = (
    interface.OUT_FIELDS.index(n) for n in ("status", "position_error", "orientation_error",
                                            "iterations", "seed_index", "flags"))
_FLAG_GOAL, _FLAG_SEED, _FLAG_STARTED = (interface.FLAG_BITS[n] for n in ("goal_ok", "seed_ok",
                                                                          "started"))
_CONVERGED, _TIMED_OUT, _PREEMPTED, _IN_COLLISION = (
    int(s) for s in (Status.CONVERGED, Status.TIMED_OUT, Status.PREEMPTED, Status.IN_COLLISION))


def result_of(m: Model, cfg: IKConfig, out: np.ndarray, seeds, t0: float,
              fields=interface.OUT_FIELDS, collision=None) -> IKResult:
    """The :class:`IKResult` of a compiled solve's output ``out`` (P, nq + len(fields)),
    its messages included; ``fields`` the output's names after q
    (:func:`ros2_ik.backends.interface.out_fields` of its terms); ``seeds`` (nq,) or (P, nq)
    as the kernels took them (the messages of bad seeds are the seed check's own words); ``t0``
    when the call began; ``collision`` the solve's
    :class:`ros2_ik.ik.collision.CollisionObjective` (names the pairs)."""
    clear_at = fields.index("clearance") if "clearance" in fields else None
    pair_at = fields.index("pair") if "pair" in fields else None
    nq = m.nq
    P = out.shape[0]
    q = np.ascontiguousarray(out[:, :nq])
    f = out[:, nq:]
    status = f[:, _F_STATUS].astype(np.int64)
    success = status == _CONVERGED
    pe = np.ascontiguousarray(f[:, _F_PE])
    re = np.ascontiguousarray(f[:, _F_RE])
    messages = [""] * P
    if not success.all():
        flags = f[:, _F_FLAGS].astype(np.int64)
        bad_seed = np.nonzero((flags & _FLAG_SEED) == 0)[0]
        if bad_seed.size:  # the seed check's own words
            s = seeds if seeds.ndim == 2 else np.broadcast_to(seeds, (P, nq))
            _, _, msgs = check_seeds(m, s[bad_seed[:1000]], min(bad_seed.size, 1000), np)
            for j, p in enumerate(bad_seed[:1000]):
                messages[p] = msgs.get(j, "invalid seed")
        for p in np.nonzero(~success)[0][:1000]:
            if messages[p]:
                continue
            st, fl = int(status[p]), int(flags[p])
            if not fl & _FLAG_GOAL:
                messages[p] = INVALID_GOAL_MESSAGE
            elif st == _IN_COLLISION and collision is not None:
                messages[p] = collision_message(collision, f[p, clear_at], int(f[p, pair_at]))
            elif not fl & _FLAG_STARTED:
                messages[p] = ("cancelled before this problem was started"
                               if st == _PREEMPTED
                               else "timed out before this problem was started")
            else:
                messages[p] = unsolved_message(st == _TIMED_OUT, pe[p], re[p], cfg,
                                               cancelled=st == _PREEMPTED)
    return IKResult(q=q, success=success, position_error=pe, orientation_error=re,
                    iterations=f[:, _F_IT].astype(np.int64),
                    seed_index=f[:, _F_SEED].astype(np.int64), status=status,
                    messages=messages, solve_time=time.perf_counter() - t0,
                    clearance=(None if collision is None or clear_at is None
                               else np.ascontiguousarray(f[:, clear_at])),
                    world_version=None if collision is None else collision.world.version)


