"""The one exception hierarchy of ros2_ik.

Every error raised on purpose by the core derives from :class:`IKError`, so a caller (and the ROS
layer, which turns them into error codes) can catch them all at once. Non-convergence of a solver
is *not* an exception: it is a result with ``success=False``.
"""

from __future__ import annotations

from typing import Iterable

__all__ = [
    "IKError",
    "UrdfError",
    "SrdfError",
    "UnknownLinkError",
    "UnknownJointError",
    "UnknownRobotError",
    "ShapeError",
    "InvalidInputError",
    "InputTypeError",
    "BackendUnavailableError",
    "KernelsBuildingError",
]


class IKError(Exception):
    """Root of every error ros2_ik raises on purpose."""


class UrdfError(IKError, ValueError):
    """The robot description cannot be turned into a kinematic model.

    The message names what is wrong and where (element and name), and what to do.
    """


class SrdfError(IKError, ValueError):
    """A semantic robot description (SRDF) that cannot be read, or a group in it that does not
    fit the model (unknown joint or link, a chain whose base is not above its tip, a cycle of
    subgroups), or a group name it does not define. The message says which and what to do."""


def _name_list(names: Iterable[str], limit: int = 40) -> str:
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names) - limit} more)"
    return shown


class UnknownLinkError(IKError, KeyError):
    """A link (frame) name that the model does not have; the message lists the valid ones."""

    def __init__(self, name: str, valid: Iterable[str], what: str = "link"):
        self.name = name
        self.valid = tuple(valid)
        super().__init__(
            f"unknown {what} {name!r}; valid {what} names are: {_name_list(self.valid)}"
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class UnknownJointError(UnknownLinkError):
    """A joint name that the model does not have; the message lists the valid ones."""

    def __init__(self, name: str, valid: Iterable[str]):
        super().__init__(name, valid, what="joint")


class UnknownRobotError(UnknownLinkError, ValueError):
    """A bundled robot name that does not exist; the message lists the valid ones."""

    def __init__(self, name: str, valid: Iterable[str]):
        super().__init__(name, valid, what="robot")


class ShapeError(IKError, ValueError):
    """An array has the wrong shape; the message gives the expected and the actual shape."""


class InvalidInputError(IKError, ValueError):
    """A value is not usable (NaN, infinite, out of range, empty, too large)."""


class InputTypeError(InvalidInputError, TypeError):
    """An argument of the wrong kind (None, a string, a dict, an object or complex array where
    numbers or names were expected); the message names the argument, what was expected and
    what came."""


class BackendUnavailableError(IKError, RuntimeError):
    """The requested array backend (e.g. CuPy) cannot be used on this machine."""


class KernelsBuildingError(BackendUnavailableError):
    """The compiled kernels asked for are being built in the background (a thread that does not
    wait for builds: :func:`ros2_ik.backends.host.set_background_builds`); the reference answers
    meanwhile. ``key`` names the build (:func:`ros2_ik.backends.host.building`)."""

    def __init__(self, message: str, key: str = ""):
        super().__init__(message)
        self.key = key
