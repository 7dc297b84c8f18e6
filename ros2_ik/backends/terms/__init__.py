"""The compiled side of the terms: one emitter per term, joined to its reference by a registry.

A term (:mod:`ros2_ik.ik.terms`: its rows, Jacobian, per-problem data, whether it is a goal, a
constraint or a secondary cost, how success is judged) has here an :class:`Emitter`: the C++
the kernels need of it, written against the names the LM rows, the checks and the selection
give it (:class:`RowsContext`). The LM step, the selection, the drivers and the interface are
written once over "some rows" and the terms' hooks, and never name a term. A term's
per-problem data reaches the kernels through the data struct generated from its
:attr:`Emitter.fields` (:func:`ros2_ik.backends.interface.data_declaration`), as the options do
from :class:`~ros2_ik.ik.config.IKConfig`.

:data:`REGISTRY` maps a term's name to its emitter class: a new compiled term is its reference
module, its emitter module, a test and one line here.
"""

from __future__ import annotations

from .base import Emitter, Field, RowsContext
from .collision import CollisionEmitter
from .goalset import GoalSetEmitter
from .pose import PoseEmitter
from .posture import PostureEmitter
from .step import StepEmitter

__all__ = ["Emitter", "Field", "RowsContext", "REGISTRY", "emitters"]

#: term name -> emitter class: one line per compiled term
REGISTRY = {
    "pose": PoseEmitter,
    "collision": CollisionEmitter,
    "goalset": GoalSetEmitter,
    "posture": PostureEmitter,
    "step": StepEmitter,
}


def emitters(ch) -> list:
    """The emitters of a chain's terms (``ch.terms``: a name, or ``name/argument`` for a term
    whose code depends on a number of its own, a goal set's size), in its order."""
    out = []
    for term in ch.terms:
        name, _, arg = term.partition("/")
        out.append(REGISTRY[name](ch, arg) if arg else REGISTRY[name](ch))
    return out
