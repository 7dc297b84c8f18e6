"""What differs between the ROS 2 distributions ros2_ik runs on (Jazzy, the LTS release and the
default, supported to 2029; Kilted, tested until its end of life on 2026-12-31), in one place.

- The executor's task order: Jazzy's rclpy runs queued tasks newest first (``executors.py``
  iterates ``reversed(tasks)``), Kilted's oldest first. The node never relies on either: work
  for the executor thread goes through :meth:`ros2_ik.ros.wiring.Wiring.post`, a queue the node
  owns and drains in order (solutions are published in goal order on both; the ROS tier tests
  it on both).
- The private executor hooks the node's :class:`~ros2_ik.ros.executor.NodeExecutor` overrides
  (``_make_handler``, ``_take_service``, ``_guard``) have the same signatures in rclpy 7.1
  (Jazzy) and 9.1 (Kilted); the ROS tier runs on both, so a change there fails a test.
- Building ``ros2_ik_interfaces`` from the PyPI wheels: Kilted has ``ament-cmake-ros-core``,
  Jazzy ``ament-cmake-ros`` with the gmock / gtest / pytest CMake packages and
  ``python-cmake-module`` (``scripts/requirements-jazzy.txt``). The interface package itself
  builds unchanged on both.

:func:`distribution` says which one this process runs on (logged by the node at start-up).
"""

from __future__ import annotations

import os

__all__ = ["distribution", "rclpy_distribution", "SUPPORTED"]

#: rclpy's major version -> the distribution it ships with
RCLPY_MAJOR = {7: "jazzy", 8: "kilted", 9: "kilted"}
SUPPORTED = ("jazzy", "kilted")


def rclpy_distribution() -> str | None:
    """The distribution of the installed rclpy wheel (``ros-rclpy``'s version), or None when
    rclpy does not come from a wheel (a ROS install from apt or source)."""
    from importlib import metadata  # noqa: PLC0415

    try:
        version = metadata.version("ros-rclpy")
    except metadata.PackageNotFoundError:
        return None
    try:
        return RCLPY_MAJOR.get(int(version.split(".")[0]))
    except ValueError:
        return None


def distribution() -> str:
    """The ROS 2 distribution of this process: the rclpy wheel's, else ``$ROS_DISTRO`` (set by a
    ROS install's setup script), else 'unknown'."""
    return rclpy_distribution() or os.environ.get("ROS_DISTRO") or "unknown"
