"""Result codes of the ROS interfaces (``ros2_ik_interfaces/msg/IKErrorCode``) and the one
exception type request handlers raise to reject a request.

The values equal MoveIt's ``MoveItErrorCodes`` where MoveIt has the same meaning, and the core's
:class:`ros2_ik.ik.Status` values (1, -31, -6, -16, -12) are the per-problem codes, unchanged.
This module needs no rclpy, so the mapping is testable anywhere.
"""

from __future__ import annotations

from ..errors import (BackendUnavailableError, IKError, InvalidInputError, ShapeError,
                      SrdfError, UnknownJointError, UnknownLinkError, UrdfError)
from ..model.collision import CollisionGeometryError

__all__ = ["SUCCESS", "FAILURE", "TIMED_OUT", "PREEMPTED", "INVALID_GOAL", "INVALID_ROBOT_STATE",
           "INVALID_GROUP_NAME",
           "INVALID_LINK_NAME", "FRAME_TRANSFORM_FAILURE", "NO_IK_SOLUTION", "NO_ROBOT_MODEL",
           "INVALID_REQUEST", "GOAL_IN_COLLISION", "COLLISION_CHECKING_UNAVAILABLE", "NAMES",
           "RequestError", "code_of_exception", "name_of"]

SUCCESS = 1
FAILURE = 99999
TIMED_OUT = -6
PREEMPTED = -7
GOAL_IN_COLLISION = -12           # == the core's Status.IN_COLLISION
INVALID_GROUP_NAME = -15
INVALID_GOAL = -16                # == INVALID_GOAL_CONSTRAINTS
INVALID_ROBOT_STATE = -17
INVALID_LINK_NAME = -18
FRAME_TRANSFORM_FAILURE = -21
COLLISION_CHECKING_UNAVAILABLE = -22
NO_IK_SOLUTION = -31
NO_ROBOT_MODEL = -40              # ros2_ik-specific
INVALID_REQUEST = -41             # ros2_ik-specific

NAMES = {
    SUCCESS: "SUCCESS", FAILURE: "FAILURE", TIMED_OUT: "TIMED_OUT", PREEMPTED: "PREEMPTED",
    INVALID_GROUP_NAME: "INVALID_GROUP_NAME", INVALID_GOAL: "INVALID_GOAL",
    INVALID_ROBOT_STATE: "INVALID_ROBOT_STATE",
    INVALID_LINK_NAME: "INVALID_LINK_NAME", FRAME_TRANSFORM_FAILURE: "FRAME_TRANSFORM_FAILURE",
    NO_IK_SOLUTION: "NO_IK_SOLUTION", NO_ROBOT_MODEL: "NO_ROBOT_MODEL",
    INVALID_REQUEST: "INVALID_REQUEST", GOAL_IN_COLLISION: "GOAL_IN_COLLISION",
    COLLISION_CHECKING_UNAVAILABLE: "COLLISION_CHECKING_UNAVAILABLE",
}


def name_of(code: int) -> str:
    """Symbolic name of a code (``'UNKNOWN(<n>)'`` for values outside the table)."""
    return NAMES.get(int(code), f"UNKNOWN({int(code)})")


class RequestError(Exception):
    """A request that cannot be served as a whole: an IKErrorCode value and a message that
    says what was wrong and what to do. Handlers raise it; the node turns it into a response."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)
        self.message = message

    def __str__(self) -> str:
        return f"{name_of(self.code)}: {self.message}"


def code_of_exception(exc: BaseException) -> int:
    """The IKErrorCode for an exception escaping the core (the message is the exception's)."""
    if isinstance(exc, RequestError):
        return exc.code
    if isinstance(exc, UnknownJointError):
        return INVALID_ROBOT_STATE
    if isinstance(exc, UnknownLinkError):
        return INVALID_LINK_NAME
    if isinstance(exc, SrdfError):
        return INVALID_GROUP_NAME
    if isinstance(exc, UrdfError):
        return NO_ROBOT_MODEL
    if isinstance(exc, CollisionGeometryError):
        return COLLISION_CHECKING_UNAVAILABLE
    if isinstance(exc, (ShapeError, InvalidInputError, BackendUnavailableError)):
        return INVALID_REQUEST
    if isinstance(exc, IKError):
        return FAILURE
    return FAILURE
