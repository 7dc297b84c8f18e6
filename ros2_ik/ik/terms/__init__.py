"""Terms: the unit of an IK solve, on both sides (the readable reference here, the compiled
emitter in :mod:`ros2_ik.backends.terms`, joined by the term's :attr:`Term.name`).

A term says what it adds to a solve: its rows and their Jacobian (an
:class:`~ros2_ik.ik.objectives.Objective`, the reference: :meth:`Term.objective`), its data
per problem (what the kernels read: :meth:`Term.data`, laid out as the compiled term's fields
declare), whether it is a goal (judged against the tolerances), a constraint (kept by every
success) or a cost (a secondary objective, lowered after the answer is found within the goals'
tolerances and the constraints: :mod:`ros2_ik.ik.refine`), and which arguments of
:meth:`ros2_ik.IKSolver.solve` it reads (:attr:`Term.arguments`, with their defaults).

The pose goal and the collision constraint are the prepared solver's own (its tips and
``IKConfig.avoid_collisions``); :class:`ros2_ik.IKSolver` takes more terms with ``terms=``:
:class:`Posture` (a rest configuration, a cost), :class:`StepBound` (how far each joint may
move from where it stands, a constraint), :class:`GoalSet` (several goals a problem, any of
which will do: a goal, in the place of the pose goal). A term whose :attr:`name` has no
compiled emitter is answered by the reference, with the same contract.
"""

from __future__ import annotations

from .base import Term
from .goalset import GoalSet
from .posture import Posture
from .step import StepBound

__all__ = ["Term", "Posture", "StepBound", "GoalSet"]
