"""State checks: is each of these configurations (or each state along this path) safe, and by
how much.

:func:`check_states` takes N configurations and answers, for every one: whether it is within
the joint limits, its clearance to the world and between the robot's own links (each the
smallest signed distance on the collision model, exact: the spheres of
:mod:`ros2_ik.model.collision` and the world's primitives), the nearest pair of each, and the
world version it was judged against. :func:`check_path` interpolates a joint path densely at
a given resolution first (:func:`interpolate_path`) and also says where the first invalid
state lies. Unlike a check that stops at the first invalid state, every state gets its
numbers: a planner, a teleoperation filter or a dataset cleaner reads how close the others
are.

The distances are the reference's (:func:`ros2_ik.ik.collision.clearance`, exact everywhere);
the compiled check (``"host"``: the generated kernel :func:`ros2_ik.backends.terms.collision.
emit_state_checks`, a branch and bound over the same link / group / sphere bounds, run on the
host's threads) gives the same numbers and pairs (tested). A state is *valid* when it is
within the limits and both clearances are at least ``margin``.

Pair numbers (``pair``, ``self_pair``, ``world_pair``; :meth:`StateCheck.describe` names
them) are the reference's: ``a * S + b`` for spheres ``a`` and ``b`` of a self pair (``S``
spheres), ``S * S + s * O + o`` for sphere ``s`` and obstacle ``o`` (``O`` obstacles), -1 where
nothing was checked (no pair, no obstacle: clearance inf).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import BackendUnavailableError, InputTypeError, InvalidInputError
from ..model import Model, check_model
from ..ik.checks import check_start_time
from ..validate import (MAX_TIMEOUT, check_callable, check_choice, check_flag, check_number,
                        describe)

__all__ = ["check_states", "check_path", "interpolate_path", "StateCheck", "MAX_STATES",
           "STATE_BACKENDS"]

_log = logging.getLogger("ros2_ik.api")

#: most configurations one check takes (an interpolated path included)
MAX_STATES = 10_000_000
STATE_BACKENDS = ("auto", "host", "reference")
#: [s] what assembling the answer takes per state, kept out of a timeout's checking time
ASSEMBLY_S_PER_STATE = 1.2e-7
#: configurations per block of the reference (a stop or a deadline is seen between two)
REFERENCE_BLOCK = 512


@dataclass
class StateCheck:
    """The check of N configurations (see the module docstring); per state (N,) arrays.

    ``status``: "complete", "cancelled" or "timed_out" (then ``checked`` is False for the
    states not looked at: their clearances NaN, ``valid`` False). ``first_invalid``: the index
    of the first state that is not valid, -1 when there is none (for a check that did not
    complete: none among the first states up to the first one not checked).
    ``limit_violation`` [m or rad]: how far the state's worst coordinate lies beyond its limits
    (0 within; NaN, and ``within_limits`` False, for a state not checked). ``waypoints``: for
    a path, the index of each waypoint among the states."""

    q: np.ndarray
    valid: np.ndarray
    within_limits: np.ndarray
    limit_violation: np.ndarray
    clearance: np.ndarray
    pair: np.ndarray
    self_clearance: np.ndarray
    self_pair: np.ndarray
    world_clearance: np.ndarray
    world_pair: np.ndarray
    checked: np.ndarray
    first_invalid: int
    margin: float
    world_version: int | None
    status: str = "complete"
    backend: str = ""
    check_time: float = 0.0
    waypoints: np.ndarray | None = None
    _describe: Callable[[int], str] | None = field(default=None, repr=False)
    _names: tuple = field(default=(), repr=False)  # (link names per sphere, obstacle ids)

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def describe(self, pair: int) -> str:
        """The pair numbered ``pair`` in words ("links 'a' and 'b'", "link 'a' and obstacle
        'box'", "nothing within reach" for -1)."""
        return self._describe(int(pair)) if self._describe is not None else "?"

    def pair_names(self, pair: int) -> tuple[str, str]:
        """The pair numbered ``pair`` as (robot link, other link or obstacle id); ("", "") for
        -1."""
        pair = int(pair)
        if pair < 0 or not self._names:
            return "", ""
        sphere_links, ids = self._names
        S = len(sphere_links)
        if pair < S * S:
            a, b = divmod(pair, S)
            return sphere_links[a], sphere_links[b]
        s, o = divmod(pair - S * S, max(len(ids), 1))
        return sphere_links[s], ids[o]

    def why(self, i: int) -> str:
        """Why state ``i`` is not valid, in words ('' when it is)."""
        i = int(i)
        if not self.checked[i]:
            return f"state {i} was not checked ({self.status})"
        parts = []
        if not self.within_limits[i]:
            parts.append(f"beyond its joint limits by {self.limit_violation[i]:.4g}")
        if self.self_clearance[i] < self.margin:
            parts.append(f"{self.describe(self.self_pair[i])} {self.self_clearance[i]:.4g} m "
                         f"apart (margin {self.margin:g} m)")
        if self.world_clearance[i] < self.margin:
            parts.append(f"{self.describe(self.world_pair[i])} {self.world_clearance[i]:.4g} m "
                         f"apart (margin {self.margin:g} m)")
        return "; ".join(parts)


# ---------------------------------------------------------------------- paths

def interpolate_path(model: Model, waypoints, resolution: float) -> tuple[np.ndarray, np.ndarray]:
    """The states of a joint path through ``waypoints`` (W, nq), no coordinate moving more
    than ``resolution`` [rad or m] between two states (linear in joint space; a continuous
    joint the short way round, wrapped to (-pi, pi]; a floating joint's quaternion the short
    way, normalised): ``(states (N, nq), index (W,))`` with
    ``index[k]`` the state of waypoint ``k``. One waypoint is a path of one state."""
    model = check_model(model)
    w = model.check_q(waypoints, name="waypoints")
    res = check_number(resolution, "resolution", low=0.0, low_open=True, high=10.0)
    w = np.array(w, dtype=np.float64)
    quats = [slice(s + 3, s + 7) for s in model.floating_q_starts]
    for qs in quats:  # a floating joint's rotation the short way: q and -q are one rotation
        for k in range(1, w.shape[0]):
            if np.dot(w[k, qs], w[k - 1, qs]) < 0:
                w[k, qs] = -w[k, qs]
    d = np.diff(w, axis=0)
    cont = np.asarray(model.q_continuous, dtype=bool)
    if cont.any():
        d[:, cont] = (d[:, cont] + math.pi) % (2 * math.pi) - math.pi
    steps = np.maximum(1, np.ceil(np.max(np.abs(d), axis=1, initial=0.0) / res)).astype(np.int64)
    total = int(steps.sum()) + 1
    if total > MAX_STATES:
        raise InvalidInputError(
            f"the path through {w.shape[0]} waypoints at resolution {res:g} has {total} states, "
            f"more than the limit {MAX_STATES}; give a coarser resolution or check it in parts")
    index = np.concatenate([[0], np.cumsum(steps)])
    seg = np.repeat(np.arange(len(steps)), steps)
    frac = (np.arange(total - 1) - index[seg]) / steps[seg]
    out = np.empty((total, model.nq))
    out[:-1] = w[seg] + frac[:, None] * d[seg]
    out[-1] = w[-1]
    for qs in quats:  # (normalised: the rotation between two waypoints' by nlerp)
        out[:, qs] /= np.linalg.norm(out[:, qs], axis=1, keepdims=True)
    if cont.any():
        wrap = out[:, cont]
        out[:, cont] = np.where(np.abs(wrap) <= math.pi, wrap,
                                math.pi - (math.pi - wrap) % (2 * math.pi))
    return out, index


def check_path(model: Model, waypoints, resolution: float = 0.01, world=None, **options
               ) -> StateCheck:
    """:func:`check_states` of the path through ``waypoints`` (W, nq) interpolated at
    ``resolution`` [rad or m] (:func:`interpolate_path`); ``waypoints`` of the result says
    where each waypoint lies, ``first_invalid`` where the path first fails."""
    q, index = interpolate_path(model, waypoints, resolution)
    out = check_states(model, q, world, **options)
    out.waypoints = index
    return out


# ---------------------------------------------------------------------- states

def check_states(model: Model, q, world=None, *, collision=None, margin: float = 0.0,
                 self_collisions: bool = True, backend: str = "auto",
                 should_stop: Callable[[], bool] | None = None,
                 timeout: float | None = None,
                 start_time: float | None = None) -> StateCheck:
    """Check configurations ``q`` (N, nq) or (nq,) against the joint limits, the robot itself
    and ``world`` (a :class:`~ros2_ik.world.World`, or None: self only).

    Args:
        collision: the robot's :class:`~ros2_ik.model.collision.CollisionModel` (default:
            :func:`ros2_ik.ik.collision.default_collision_model` of the model, less the pairs
            within ``margin`` in nearly every configuration, as the solvers use it).
        margin: [m] the clearance a valid state keeps (0: not touching).
        self_collisions: check the collision model's self pairs (else self_clearance inf).
        backend: "auto" (the compiled check where it covers the model, else the reference),
            "host" or "reference".
        should_stop: polled between blocks of states; True stops the check (status
            "cancelled").
        timeout: [s] the call returns by then (status "timed_out", the states not reached
            ``checked`` False), counted from the call: validation and the answer's assembly
            included, at any size; None: no limit.
        start_time: when the timeout starts (``time.perf_counter``'s clock; default: the call),
            e.g. when a request arrived.
    Returns:
        :class:`StateCheck`.
    """
    t0 = time.perf_counter()
    # the deadline counts from the call: validation, the collision model and the packing of a
    # large batch are inside it, and what is left unchecked when it passes is said so
    t_call = time.monotonic()
    if start_time is not None:
        t_call -= max(0.0, t0 - float(check_start_time(start_time)))
    timeout = check_number(timeout, "timeout", low=0.0, high=MAX_TIMEOUT, allow_none=True)
    deadline = None if timeout is None else t_call + timeout
    model = check_model(model)
    q = model.check_q(q, name="q")
    if q.shape[0] > MAX_STATES:
        raise InvalidInputError(f"q has {q.shape[0]} states, more than the limit {MAX_STATES}; "
                                "check them in parts")
    q = np.ascontiguousarray(np.asarray(q, dtype=np.float64))
    margin = check_number(margin, "margin", low=0.0, high=1.0)
    self_collisions = check_flag(self_collisions, "self_collisions")
    check_choice(backend, "backend", STATE_BACKENDS)
    check_callable(should_stop, "should_stop", "a callable returning True to stop")
    world = _check_world(world)
    cm = _collision(model, collision, margin)
    if deadline is not None:  # time kept for the answer's assembly after the last block
        deadline -= min(0.8 * timeout, ASSEMBLY_S_PER_STATE * q.shape[0])

    used, reason = "reference", "asked for"
    out = None
    if backend != "reference":
        checker, reason = _host_checker(model, cm)
        if checker is not None:
            out, done = checker.check(q, cm, world, self_collisions=self_collisions,
                                      should_stop=should_stop, deadline=deadline)
            used = "host"
        elif backend == "host":
            raise BackendUnavailableError(f"backend 'host' cannot check these states: {reason}")
    if out is None:
        out, done = _reference(model, cm, q, world, self_collisions, should_stop, deadline)
    # the answer's arrays: computed over the states up to the last one checked (a timed-out
    # check of many states costs what it checked), the rest filled as not checked
    B = q.shape[0]
    last = B - int(done[::-1].argmax()) if done.any() else 0
    sc, wc = np.full(B, np.nan), np.full(B, np.nan)
    sp, wp = np.full(B, -1, dtype=np.int64), np.full(B, -1, dtype=np.int64)
    head = np.ascontiguousarray(out[:last].T)
    sc[:last], wc[:last] = head[0], head[2]
    if used == "host":  # the kernel's "nothing checked" is 1e30
        for a in (sc, wc):
            a[:last][a[:last] >= 1e29] = np.inf
    sp[:last] = np.where(np.isnan(head[1]), -1, head[1])
    wp[:last] = np.where(np.isnan(head[3]), -1, head[3])
    del head
    if last and not done[:last].all():  # slices a deadline or a stop left out: not checked
        skip = ~done[:last]
        sc[:last][skip], wc[:last][skip], sp[:last][skip], wp[:last][skip] = np.nan, np.nan, -1, -1
    violation, within = _limits(model, q, done, last)
    clear = np.minimum(sc, wc)
    pair = np.where(wc < sc, wp, sp)
    valid = np.zeros(B, dtype=bool)
    valid[:last] = done[:last] & within[:last] & (sc[:last] >= margin) & (wc[:last] >= margin)
    status = "complete"
    if last < B or not done.all():
        stopped = should_stop is not None and bool(should_stop())
        status = "cancelled" if stopped or deadline is None else "timed_out"
    bad = ~valid | ~done
    at = int(bad.argmax())
    first = at if bad[at] and done[at] else -1

    from ..ik.collision import CollisionObjective  # noqa: PLC0415

    describe_pair = CollisionObjective(model, cm, world).describe
    return StateCheck(q=q, valid=valid, within_limits=within, limit_violation=violation,
                      clearance=clear, pair=pair, self_clearance=sc, self_pair=sp,
                      world_clearance=wc, world_pair=wp, checked=done, first_invalid=first,
                      margin=margin, world_version=None if world is None else world.version,
                      status=status, backend=used, check_time=time.perf_counter() - t0,
                      _describe=describe_pair,
                      _names=(tuple(cm.link_names[c] for c in cm.sphere_link.tolist()),
                              tuple(world.ids) if world is not None else ()))


def _limits(model: Model, q: np.ndarray, done: np.ndarray, last: int):
    """(violation (N,), within (N,)): how far each checked state is beyond its limits (NaN
    and False for a state not checked), in blocks over the states up to ``last``."""
    B = q.shape[0]
    violation = np.full(B, np.nan)
    lo, hi = np.asarray(model.lower, float), np.asarray(model.upper, float)
    for a in range(0, last, 1 << 18):
        b = min(last, a + (1 << 18))
        Q = q[a:b]
        with np.errstate(invalid="ignore"):
            over = np.maximum(np.maximum(lo - Q, Q - hi), 0.0)
        violation[a:b] = over.max(axis=1) if q.shape[1] else 0.0
    violation[:last][~done[:last]] = np.nan
    return violation, violation <= 0.0


def _check_world(world):
    if world is None:
        return None
    from ..world import World  # noqa: PLC0415

    if not isinstance(world, World):
        raise InputTypeError(f"world must be a ros2_ik.world.World, got {describe(world)}")
    return world


def _collision(model: Model, collision, margin: float):
    from ..model.collision import CollisionModel  # noqa: PLC0415

    if collision is None:
        from ..ik.collision import default_collision_model  # noqa: PLC0415

        collision = default_collision_model(model, within=margin)
    elif not isinstance(collision, CollisionModel):
        raise InputTypeError(f"collision must be a CollisionModel (collision_model(model, ...)), "
                             f"got {describe(collision)}")
    if collision.model_name != model.name or (len(collision.links) and int(np.max(
            collision.links)) >= model.num_links):
        raise InvalidInputError(f"collision is the collision model of {collision.model_name!r}, "
                                f"not of {model.name!r}")
    collision.check_complete()  # links whose geometry has no spheres: refused, naming them
    return collision


def _host_checker(model: Model, cm):
    """(the compiled checker, '') or (None, why not)."""
    from ..backends import host  # noqa: PLC0415
    from ..backends.states import HostStateChecker, covered, structure_key  # noqa: PLC0415
    from ..backends.terms.collision_scene import collision_chain  # noqa: PLC0415

    why = covered(model, cm)
    if why is not None:
        return None, why
    if host.available() is None:
        return None, "no C++ compiler (g++) found to build the compiled check"
    key = structure_key(collision_chain(model, cm, ()))
    try:
        return model.memo("api.states.host", key, lambda: HostStateChecker(model, cm),
                          max_keys=16), ""
    except BackendUnavailableError as exc:  # (being built in the background: the reference)
        return None, str(exc)
    except RuntimeError as exc:
        why = f"the compiled check could not be built: {str(exc).splitlines()[0]}"
        _log.warning("%s (model %r)", why, model.name)
        return None, why


def _reference(model, cm, q, world, self_collisions, should_stop, deadline):
    """The reference's exact distances, block by block (a stop or the deadline between)."""
    from ..ik.collision import clearance  # noqa: PLC0415

    B = q.shape[0]
    out = np.full((B, 4), np.nan)
    done = np.zeros(B, dtype=bool)
    has_world = world is not None and len(world) > 0
    for a in range(0, B, REFERENCE_BLOCK):
        if (should_stop is not None and should_stop()) or \
                (deadline is not None and time.monotonic() >= deadline):
            break
        b = min(B, a + REFERENCE_BLOCK)
        if self_collisions and len(cm.pairs):
            d, k, _ = clearance(model, cm, q[a:b], None)
            out[a:b, 0], out[a:b, 1] = d, k
        else:
            out[a:b, 0], out[a:b, 1] = np.inf, -1
        if has_world:
            d, k, _ = clearance(model, cm, q[a:b], world, self_collisions=False)
            out[a:b, 2], out[a:b, 3] = d, k
        else:
            out[a:b, 2], out[a:b, 3] = np.inf, -1
        done[a:b] = True
    return out, done
