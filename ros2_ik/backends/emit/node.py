"""A joint of the trees the generated FK walks (:class:`Node`): its own module, below the
chains (:mod:`.chain`) and the collision structure (:mod:`ros2_ik.backends.terms.
collision_scene`) that both build them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Node"]


@dataclass(frozen=True)
class Node:
    """A moving joint of the tree the generated FK walks (:func:`ros2_ik.backends.emit.
    kinematics.emit_node_frames`): the joints on a tip's path, or those above the collision
    links (its child link ``link``)."""

    link: int
    parent: int          # node index, -1: the base
    pre: np.ndarray      # (4, 4) parent node frame -> this joint's frame
    axis: tuple
    prismatic: bool
    qi: int
    mult: float
    off: float
    col: int             # column of the solve (index into colq), -1: not moved by it
