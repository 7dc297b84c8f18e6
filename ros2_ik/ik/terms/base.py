"""The base of the terms (:mod:`ros2_ik.ik.terms`)."""

from __future__ import annotations

from typing import ClassVar

__all__ = ["Term", "KINDS"]

#: what a term is to a solve: a goal (its errors judged against the tolerances), a constraint
#: (a value every success keeps >= 0), a cost (lowered once the answer is found)
KINDS = ("goal", "constraint", "cost")


class Term:
    """One term of a prepared solve (:class:`ros2_ik.IKSolver`, ``terms=``).

    Subclasses set :attr:`name` (its compiled emitter's, :data:`ros2_ik.backends.terms.REGISTRY`;
    "" for a term only the reference answers), :attr:`kind` and :attr:`arguments`, and give
    :meth:`objective` (the reference rows for a batch) and :meth:`data` (the compiled term's
    fields, float64). A term is immutable and hashable: what varies per call is an argument
    of ``solve``.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "cost"
    #: the keyword arguments of ``IKSolver.solve`` this term reads
    arguments: ClassVar[tuple] = ()

    def key(self) -> tuple:
        """What distinguishes two terms of this class for a prepared solver's cache."""
        return (type(self).__name__,)

    def __hash__(self):
        return hash(self.key())

    def __eq__(self, other):
        return type(other) is type(self) and other.key() == self.key()

    def check(self, model, P: int, seeds, args: dict) -> dict:
        """This term's arguments for a call of ``P`` problems from ``args`` (defaults filled
        in, shapes and values checked: an IKError naming the argument); ``seeds`` (P, nq) the
        problems' seeds as the solve takes them."""
        return {}

    def objective(self, model, call: dict):
        """The reference :class:`~ros2_ik.ik.objectives.Objective` of a call (``call``: what
        :meth:`check` returned)."""
        raise NotImplementedError

    def data(self, model, call: dict) -> dict:
        """The compiled term's fields for a call: {field name: float64 array, (P, width) or
        one set of width}."""
        raise NotImplementedError

    def arguments_of(self, call: dict) -> dict:
        """The arguments of ``solve`` that give back this checked ``call``, one value a problem
        (what a solve of several rows a problem repeats: :mod:`ros2_ik.api.kbest`)."""
        return {}

    @property
    def compiled_name(self) -> str:
        """The name its compiled emitter is built by (``name``, or ``name/argument`` where
        the code depends on a number of the term's: a goal set's size)."""
        return self.name

    def finish(self, model, call: dict, result) -> None:
        """What this term adds to a call's :class:`~ros2_ik.ik.IKResult` (both backends):
        the words of its failures, what its answers reached."""
