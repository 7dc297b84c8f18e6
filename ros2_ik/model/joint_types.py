"""The joint types of a model (``Model.joint_type`` holds their values)."""

import enum

__all__ = ["JointType"]


class JointType(enum.IntEnum):
    FIXED = 0
    REVOLUTE = 1
    CONTINUOUS = 2
    PRISMATIC = 3
    PLANAR = 4
    FLOATING = 5
