"""The checks every IK entry point runs on its arguments: the call's options (config, solver
name, ``should_stop``), the seeds (shape, then values per problem) and a planning group."""

from __future__ import annotations

import math

import numpy as np

from ..backend import to_numpy
from ..errors import InputTypeError, InvalidInputError, ShapeError
from ..model import MAX_VALUE, Group, Model
from ..validate import as_float_array, check_choice, check_number, describe
from .config import IKConfig

__all__ = ["SOLVERS", "SEED_LIMIT_SLACK", "check_call_options", "check_seed_shape",
           "check_seeds", "apply_group", "check_collision", "check_start_time"]

SOLVERS = ("dls", "ccd", "ccd+dls")
SEED_LIMIT_SLACK = 1e-6  # a seed this far outside a limit is clipped; further out is invalid


def check_call_options(config, solver, should_stop, backend=None) -> IKConfig:
    """The options every solve takes, checked at the top of the call; returns the config.
    ``backend`` (where the call takes one) must be one of ``api.solver.BACKENDS``."""
    if config is None:
        config = IKConfig()
    elif not isinstance(config, IKConfig):
        raise InputTypeError(f"config must be an IKConfig or None, got {describe(config)}")
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise InvalidInputError(f"unknown solver {describe(solver)}: solver must be one of "
                                f"{SOLVERS}")
    if should_stop is not None and not callable(should_stop):
        raise InputTypeError(f"should_stop must be a callable returning bool, or None, got "
                             f"{describe(should_stop)}")
    if backend is not None and backend not in _BACKENDS:  # (an unhashable one is not in it)
        check_choice(backend, "backend", _BACKENDS)
    return config


_BACKENDS = ("auto", "host", "cuda", "reference")  # api.solver.BACKENDS (a test keeps them)


def check_collision(collision) -> None:
    """``collision``: None or a :class:`~ros2_ik.model.collision.CollisionModel` (checked
    whether or not collision avoidance is on: a wrong one is a mistake either way)."""
    if collision is None:
        return
    from ..model.collision import CollisionModel  # noqa: PLC0415

    if not isinstance(collision, CollisionModel):
        raise InputTypeError(f"collision must be a CollisionModel (ros2_ik.model.collision."
                             f"collision_model(model, ...)) or None, got {describe(collision)}")


def check_start_time(start_time) -> float | None:
    """``start_time``: None or a ``time.perf_counter()`` reading [s] (a finite number)."""
    if start_time is None or (type(start_time) is float and math.isfinite(start_time)):
        return start_time
    return check_number(start_time, "start_time")


def check_seed_shape(model: Model, seeds, P: int, xp):
    """``seeds`` as an array of shape (nq,) or (P, nq) (values are checked per problem later)."""
    seeds = as_float_array(seeds, "seeds", f"shape ({model.nq},) or ({P}, {model.nq})", xp)
    if seeds.shape not in ((model.nq,), (P, model.nq)):
        raise ShapeError(f"seeds must have shape ({model.nq},) or ({P}, {model.nq}) "
                         f"(coordinates {list(model.q_names)}), got {tuple(seeds.shape)}")
    return seeds


def check_seeds(model: Model, seeds, P: int, xp):
    """The problems' seeds (P, nq) on ``xp``, a (P,) mask of the invalid ones (NaN/inf, more
    than :data:`SEED_LIMIT_SLACK` outside a limit, a zero floating quaternion: they are replaced
    by the neutral configuration) and their messages {problem: text}; None: neutral seeds."""
    if seeds is None:
        return xp.asarray(np.tile(model.neutral_q(), (P, 1))), np.zeros(P, dtype=bool), {}
    s = as_float_array(seeds, "seeds", f"shape ({model.nq},) or ({P}, {model.nq})",
                       xp).astype(xp.float64, copy=False)
    if s.ndim == 1:
        s = xp.broadcast_to(s, (P, s.shape[0]))
    if s.ndim != 2 or s.shape != (P, model.nq):
        raise ShapeError(f"seeds must have shape ({model.nq},) or ({P}, {model.nq}) "
                         f"(coordinates {list(model.q_names)}), "
                         f"got {tuple(s.shape)}")
    s = s.copy()
    sn = to_numpy(s)
    finite = np.all(np.isfinite(sn), axis=1)
    # a coordinate without limits (continuous, planar, floating) still has the model's value
    # bound (+-MAX_VALUE, as every q the kinematics take)
    lo, hi = np.maximum(model.lower, -MAX_VALUE), np.minimum(model.upper, MAX_VALUE)
    with np.errstate(invalid="ignore"):
        outside = (sn < lo - SEED_LIMIT_SLACK) | (sn > hi + SEED_LIMIT_SLACK)
    bad = ~finite | np.any(outside, axis=1)
    with np.errstate(invalid="ignore"):  # (NaN rows are bad already)
        zero_quat = model.zero_quaternion_rows(sn)  # no rotation can be read from it
    bad |= zero_quat
    msgs = {}
    for p in np.nonzero(bad)[0][:1000]:
        if not finite[p]:
            msgs[int(p)] = "seed contains NaN or infinity"
        elif zero_quat[p]:
            msgs[int(p)] = ("seed has a zero quaternion for a floating joint; give a unit "
                            "quaternion (qx qy qz qw)")
        else:
            i = int(np.nonzero(outside[p])[0][0])
            msgs[int(p)] = (f"seed {model.q_names[i]}={sn[p, i]:.6g} is outside its limits "
                            f"[{lo[i]:.6g}, {hi[i]:.6g}]; give a seed within limits")
    s[xp.asarray(bad)] = xp.asarray(model.neutral_q())
    return s, bad, msgs


def apply_group(model: Model, group, tips):
    """The model a solve for ``group`` runs on (every joint outside it frozen) and the tips
    (the group's chain tip when ``tips`` is None)."""
    if not isinstance(group, Group):
        raise InputTypeError(f"group must be a ros2_ik.model.Group (Srdf.group(model, name)) "
                             f"or None, got {describe(group)}")
    if tips is None:
        if group.tip is None:
            raise InvalidInputError(f"group {group.name!r} has no single chain tip; give tips")
        tips = group.tip
    return group.restrict(model), tips
