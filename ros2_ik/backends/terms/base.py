"""The base of the compiled terms (:mod:`ros2_ik.backends.terms`): what a term's emitter may
declare and the hooks the LM rows, the checks and the selection call."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Emitter", "Field", "RowsContext"]


@dataclass(frozen=True)
class Field:
    """A term's data as the kernels read it: ``width`` float64 values per problem (a call may
    give one set for every problem: stride 0), or, with ``width`` None, one array of any length
    shared by the problems (its length given per call: the ``<name>_n`` member)."""

    name: str
    width: int | None


@dataclass
class RowsContext:
    """The names a term writes against in the LM rows (``r2ik_lm_rows``): the dialect ``d``,
    the value type ``V`` (``S`` in the one-row dialect), the coordinates' arguments ``qargs``,
    the joint frames' arguments ``frames``, this term's first residual row ``row0``, the trial
    rows ``r2`` and Jacobian ``J2``, and the Jacobian's width ``nc``."""

    d: object
    V: str
    qargs: str
    frames: str
    row0: int
    nc: int
    lane: object = None  # (name) -> a lane's element of a per-lane array (the vector dialect)


class Emitter:
    """The compiled side of one term (override what the term uses). ``kind``: "goal" (its
    errors, position and orientation, are judged against the tolerances), "constraint" (a value
    a solution keeps >= 0), "cost" (rows only)."""

    name = ""
    kind = "cost"

    def __init__(self, ch):
        self.ch = ch

    # ------------------------------------------------------------------ structure
    def rows(self) -> int:
        """Residual rows this term adds to ``r`` / ``J``."""
        return 0

    def structure(self) -> np.ndarray:
        """(rows, nc) bool: the Jacobian entries that are not zero by construction."""
        return np.zeros((self.rows(), self.ch.nc), dtype=bool)

    def fields(self) -> tuple:
        """The term's data (:class:`Field`), in the data struct's order."""
        return ()

    def outputs(self) -> tuple:
        """Per-problem numbers the selection writes after the common ones (names)."""
        return ()

    # ------------------------------------------------------------------ device functions
    def functions(self, e, check: bool) -> None:
        """Templates every rendering instantiates (emitted once per namespace); ``check``:
        also what the float64 check of the selection needs."""

    # ------------------------------------------------------------------ the LM rows
    def lm_args(self) -> str:
        """Extra C parameters of the LM rows (after the common ones), '' for none."""
        return ""

    def lm_call_args(self) -> str:
        """The names passed for :meth:`lm_args`, '' for none."""
        return ""

    def lm_declare(self, e, c: RowsContext) -> None:
        """Declarations at the top of the LM rows (constants, per-lane state)."""

    def lm_load(self, e, c: RowsContext) -> None:
        """A lane taking problem ``p`` (``l`` its lane): this term's data into its state."""

    def lm_evaluate(self, e, c: RowsContext) -> str | None:
        """Statements evaluating this term at the trial point (``r2`` rows from ``row0``);
        returns the expression of its cost (added to the trial's), or None."""
        return None

    def lm_jacobian(self, e, c: RowsContext) -> None:
        """Its rows of ``J2`` at the trial (accepted lanes take them)."""

    def lm_take(self, e, c: RowsContext) -> None:
        """Accepted lanes (mask ``acc``) take this term's trial state."""

    def lm_ok(self, c: RowsContext) -> list:
        """Mask expressions a converged lane must meet besides the goals' tolerances."""
        return []

    def lm_blocks(self) -> list:
        """(g, H) names of ``J^T r`` and ``J^T J`` blocks this term adds to the normal
        equations instead of rows (a penalty over many pairs), or []."""
        return []

    # ------------------------------------------------------------------ a cost term
    def secondary_rows(self) -> int:
        """A cost term's rows (lowered after the answer is found: :mod:`ros2_ik.ik.refine`)."""
        return 0

    def sec_evaluate(self, e, c: RowsContext) -> str:
        """A cost term's rows into ``rs`` from ``row0`` at the coordinates ``q<i>``; returns
        the expression of its cost."""
        raise NotImplementedError

    def sec_jacobian(self, e, c: RowsContext) -> None:
        """A cost term's Jacobian rows into ``Js`` (rows from ``row0``, ``nc`` columns)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ checks, selection
    def emit_check(self, e) -> None:
        """In ``r2ik_prep`` (float64; problem ``p``, the data ``dat``): set ``ok`` false when
        this term's data for the problem cannot be solved for (a goal with NaN, say)."""

    def emit_verify(self, e, qargs: str) -> str | None:
        """In ``r2ik_select`` (float64; the answer's coordinates ``qargs``, the outputs ``f``):
        a goal term sets ``pe64`` / ``re64``; a constraint term writes its outputs and returns
        the condition that fails a converged answer (:attr:`failed_status`), else None."""
        return None

    #: the status of an answer within the tolerances that fails this constraint
    failed_status = "R2IK_STATUS_NOT_CONVERGED"

    def emit_unsolved(self, e) -> None:
        """In ``r2ik_select``, a problem not solved: this term's outputs (``f``)."""

    def kernels(self, e) -> None:
        """Kernels of its own (a test's view of its terms), after the solve's."""
