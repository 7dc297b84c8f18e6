"""A robot on a movable base: the model with a planar mount (x, y, z, yaw) above its root.

:func:`mounted` puts four frozen joints between a new root frame and the model's base link:
``<prefix>_x``, ``<prefix>_y``, ``<prefix>_z`` (prismatic) and ``<prefix>_yaw`` (continuous,
about z). Frozen joints keep their coordinates in ``q``, so each problem of one batch may put
the base somewhere else (its seed says where), and no solver moves them: the IK of many base
placements at once is one batched solve in the root ("task") frame, against one world.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InvalidInputError
from .tree import Model, check_model
from .urdf import JointDesc

__all__ = ["mounted", "MOUNT_JOINTS", "MOUNT_LIMITS", "mount_coordinates"]

#: the mount's joints after the prefix, in coordinate order
MOUNT_JOINTS = ("x", "y", "z", "yaw")
#: [m] the mount's translation limits (x and y, then z): the search regions it carries
MOUNT_LIMITS = (100.0, 10.0)


def mounted(model: Model, prefix: str = "placement") -> Model:
    """``model`` on a planar mount (see the module docstring), its root ``<prefix>_frame``;
    the model's tips, frozen joints and links kept (kept with the model: built once)."""
    model = check_model(model)
    if not isinstance(prefix, str) or not prefix.isidentifier():
        raise InvalidInputError(f"prefix must be a name (letters, digits, _), got {prefix!r}")

    def build() -> Model:
        desc = model.desc
        root = model.link_names[0]
        names = [f"{prefix}_{j}" for j in MOUNT_JOINTS]
        frames = [f"{prefix}_frame"] + [f"{prefix}_{j}_link" for j in MOUNT_JOINTS[:-1]]
        taken = (set(desc.links) | {j.name for j in desc.joints}) & set(names + frames)
        if taken:
            raise InvalidInputError(f"the robot already has links or joints named "
                                    f"{sorted(taken)}; give the mount another prefix")
        xy, z = MOUNT_LIMITS
        axes = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, 1.0))
        joints = []
        for k, (name, axis) in enumerate(zip(names, axes)):
            lim = xy if k < 2 else z
            kind = "continuous" if k == 3 else "prismatic"
            joints.append(JointDesc(
                name, kind, frames[k], frames[k + 1] if k < 3 else root, axis=axis,
                lower=-lim if k < 3 else -np.inf, upper=lim if k < 3 else np.inf,
                velocity=1.0, effort=1.0))
        kept = tuple(j for j in desc.joints if j.child != root)  # (a sub-tree's own root)
        new = dataclasses.replace(desc, links=tuple(frames) + tuple(desc.links),
                                  joints=tuple(joints) + kept, root=frames[0])
        return Model._build(new, base=frames[0], tips=model.tips,
                            frozen=set(model.frozen) | set(names))

    return model.memo("model.mount", prefix, build)


def mount_coordinates(m: Model, model: Model, prefix: str = "placement"):
    """(mount (4,), arm (model.nq,)): the indices in ``m`` (:func:`mounted` of ``model``) of the
    mount's coordinates x y z yaw and of ``model``'s coordinates, in ``model``'s order."""
    index = {n: i for i, n in enumerate(m.q_names)}
    mount = np.array([index[f"{prefix}_{j}"] for j in MOUNT_JOINTS], dtype=np.int64)
    arm = np.array([index[n] for n in model.q_names], dtype=np.int64)
    return mount, arm
