"""The browser viewer of ros2_ik (``ros2_ik_viewer``; the optional extra ``viewer``: viser and
yourdfpy). See :mod:`ros2_ik.viewer.app`; ``python -m ros2_ik.viewer --help``."""

from .cli import main

__all__ = ["main"]
