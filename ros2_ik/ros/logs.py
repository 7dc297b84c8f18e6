"""Log calls that keep their message: one call site per severity.

rclpy remembers the severity of each call site (the function, file and line that called the
logger) and refuses, dropping the message, a later call from the same site with another
severity ("Logger severity cannot be changed between calls"). A hand-off that runs
``logger.warning`` one time and ``logger.info`` the next from one line of code (a queue of
posted calls, a ``getattr(logger, level)``) would lose messages; :data:`AT` gives a function per
severity instead: ``AT[level](logger, text)``. No rclpy here.
"""

from __future__ import annotations

__all__ = ["AT"]


def _debug(logger, text: str) -> None:
    logger.debug(text)


def _info(logger, text: str) -> None:
    logger.info(text)


def _warning(logger, text: str) -> None:
    logger.warning(text)


def _error(logger, text: str) -> None:
    logger.error(text)


def _fatal(logger, text: str) -> None:
    logger.fatal(text)


#: severity name -> its log call
AT = {"debug": _debug, "info": _info, "warning": _warning, "warn": _warning, "error": _error,
      "fatal": _fatal}
