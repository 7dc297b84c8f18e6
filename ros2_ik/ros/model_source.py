"""Where the node's robot model and planning groups come from, and how they are replaced.

The URDF comes from the parameters (``robot_description`` text, ``urdf_file``, a bundled
``robot``) and, at any time, the ``robot_description`` topic; the SRDF (planning groups) from
the ``robot_description_semantic`` parameter or topic, or a bundled robot's file. A new model
is built completely and then swapped in by one reference assignment (:class:`LoadedRobot` is
immutable), so a request keeps the model it started with. A bad description is logged and
reported to diagnostics, and the previous model (or groups) stays.

No rclpy here: the node hands in its logger, its statistics and what to do after a swap (its
warm-up); the topic callbacks take the message text.
"""

from __future__ import annotations

import threading
from typing import Callable

from .. import robots
from ..errors import IKError
from ..model import Srdf, parse_srdf
from .diagnostics import Stats
from .params import MODEL_PARAMS, Settings
from .robot import LoadedRobot, build_robot

__all__ = ["ModelSource", "SOURCE_PARAMS", "describe"]

SOURCE_PARAMS = ("robot", "urdf_file", "robot_description")


def describe(robot: LoadedRobot) -> str:
    """One line naming a model, its frames, its source and its groups (for the log)."""
    groups = (f", groups {robot.group_names} from {robot.srdf_source}" if robot.srdf
              else ", no SRDF")
    return (f"{robot.name!r} ({robot.nq} coordinates, base {robot.base!r}, default tip "
            f"{robot.default_tip!r}, from {robot.source}{groups})")


class ModelSource:
    """The model in use (``robot``) and its groups, loaded and replaced from parameters and
    topics. ``on_swap(robot)`` runs after each new model (the node's warm-up)."""

    def __init__(self, log, stats: Stats, on_swap: Callable[[LoadedRobot], None]):
        self._log = log
        self._stats = stats
        self._on_swap = on_swap
        self._lock = threading.Lock()
        self.robot: LoadedRobot | None = None
        self._urdf: str | None = None
        self._srdf: tuple[Srdf, str] | None = None  # planning groups and where they came from
        self._pending_robot: tuple[LoadedRobot, str] | None = None
        self._pending_srdf: tuple[Srdf, str] | None = None

    # ------------------------------------------------------------------ from the parameters
    @staticmethod
    def urdf_from_settings(s: Settings) -> tuple[str, str] | None:
        """(urdf text, source) from the model parameters, or None when they name none."""
        if s.robot_description:
            return s.robot_description, "parameter robot_description"
        if s.urdf_file:
            try:
                with open(s.urdf_file, encoding="utf-8") as f:
                    return f.read(), f"urdf_file {s.urdf_file}"
            except OSError as exc:
                raise IKError(f"cannot read urdf_file {s.urdf_file!r}: {exc}; give the path of "
                              "a readable URDF file") from None
        if s.robot:
            return robots.urdf_string(s.robot), f"bundled robot {s.robot!r}"
        return None

    @staticmethod
    def srdf_from_settings(s: Settings) -> tuple[Srdf, str] | None:
        """(groups, source) from the parameters: robot_description_semantic, else the bundled
        robot's SRDF when the model is a bundled robot; None when neither gives one."""
        if s.robot_description_semantic:
            return parse_srdf(s.robot_description_semantic), "parameter robot_description_semantic"
        if s.robot and not s.robot_description and not s.urdf_file:
            text = robots.srdf_string(s.robot)
            if text:
                return parse_srdf(text), f"bundled robot {s.robot!r}"
        return None

    def build(self, urdf: str, source: str, s: Settings, strict: bool = False) -> LoadedRobot:
        return build_robot(urdf, source=source, base_link=s.base_link, tip_link=s.tip_link,
                           log=self._log.warning, strict=strict)

    def load_from_settings(self, s: Settings, startup: bool = False) -> None:
        """The model and groups the parameters name (errors logged; the node keeps serving)."""
        try:
            self._srdf = self.srdf_from_settings(s)
        except Exception as exc:  # noqa: BLE001
            self._report(f"could not read the planning groups from the parameters: {exc}")
        try:
            src = self.urdf_from_settings(s)
            if src is not None:
                self.swap(self.build(src[0], src[1], s), src[0])
        except Exception as exc:  # noqa: BLE001  (never die on a bad description)
            self._report(f"could not load the robot model from the parameters: {exc}"
                         + ("; waiting for robot_description" if startup else ""))

    # ------------------------------------------------------------------ parameter changes
    def prepare_change(self, changes: dict, new: Settings) -> str | None:
        """Check a parameter change before it is accepted: build the model / groups it asks
        for (kept until :meth:`apply_change`); None, or the reason it is refused."""
        self._pending_robot = self._pending_srdf = None
        if changes.get("robot_description_semantic") or any(k in changes
                                                            for k in SOURCE_PARAMS):
            try:  # the SRDF parameter, or a newly chosen bundled robot's groups
                self._pending_srdf = self.srdf_from_settings(new)
            except Exception as exc:  # noqa: BLE001
                return f"planning groups not changed: {exc}"
        if any(k in changes for k in MODEL_PARAMS):
            try:
                # a new source (robot / urdf_file / robot_description) loads that; a new
                # base_link / tip_link alone rebuilds the model in use (wherever it came from)
                src = None
                if any(k in changes for k in SOURCE_PARAMS):
                    src = self.urdf_from_settings(new)
                if src is None and self._urdf is not None:
                    src = (self._urdf, self.robot.source if self.robot else "previous model")
                if src is not None:
                    # a base_link / tip_link set now must name a link of that robot
                    strict = "base_link" in changes or "tip_link" in changes
                    self._pending_robot = (self.build(src[0], src[1], new, strict), src[0])
            except Exception as exc:  # noqa: BLE001
                return f"robot model not changed: {exc}"
        return None

    def apply_change(self) -> None:
        """Swap in what :meth:`prepare_change` built (after the change was accepted)."""
        if self._pending_srdf is not None:
            srdf, source = self._pending_srdf
            self._pending_srdf = None
            self.set_srdf(srdf, source)
        if self._pending_robot is not None:
            robot, urdf = self._pending_robot
            self._pending_robot = None
            self.swap(robot, urdf)

    # ------------------------------------------------------------------ topics
    def on_robot_description(self, text: str, settings: Settings) -> None:
        current = self.robot
        try:
            if not text.strip():
                raise IKError("the message is empty")
            robot = self.build(text, "topic robot_description", settings)
        except Exception as exc:  # noqa: BLE001
            keep = (f"keeping the current model {current.name!r}" if current is not None
                    else "no model loaded yet")
            self._report(f"robot_description rejected: {exc}; {keep}. Fix the URDF and "
                         "publish it again.")
            return
        if current is not None and robot.digest == current.digest and \
                current.source == robot.source:
            self._log.debug("robot_description unchanged")
            return
        self.swap(robot, text)

    def on_robot_description_semantic(self, text: str) -> None:
        try:
            srdf = parse_srdf(text)
        except Exception as exc:  # noqa: BLE001  (never die on a bad description)
            keep = (f"keeping the groups from {self._srdf[1]}" if self._srdf
                    else "no planning groups loaded")
            self._report(f"robot_description_semantic rejected: {exc}; {keep}. Fix the SRDF "
                         "and publish it again.")
            return
        self.set_srdf(srdf, "topic robot_description_semantic")

    # ------------------------------------------------------------------ swapping
    def swap(self, robot: LoadedRobot, urdf: str) -> None:
        robot = self._with_srdf(robot)
        with self._lock:
            old = self.robot
            self.robot = robot  # one reference assignment: in-flight requests keep theirs
            self._urdf = urdf
        self._stats.set_model_error("")
        verb = "replaced" if old is not None else "loaded"
        self._log.info(f"{verb} robot model: {describe(robot)}"
                       + (f" (was {old.name!r})" if old is not None else ""))
        self._on_swap(robot)

    def set_srdf(self, srdf: Srdf, source: str) -> None:
        """New planning groups for the model in use (no rebuild, no warm-up)."""
        with self._lock:
            self._srdf = (srdf, source)
            current = self.robot
        if current is None:
            self._log.info(f"planning groups {srdf.group_names} from {source} kept until a "
                           "robot model is loaded")
            return
        robot = self._with_srdf(current)
        with self._lock:
            if self.robot is current:
                self.robot = robot  # one reference assignment, as a model swap
        self._log.info(f"planning groups {srdf.group_names} from {source} for robot "
                       f"{robot.name!r}")

    def _with_srdf(self, robot: LoadedRobot) -> LoadedRobot:
        """``robot`` with the current planning groups (a warning when the SRDF names another
        robot: its groups are still used as far as they fit the model)."""
        if self._srdf is None:
            return robot
        srdf, source = self._srdf
        if srdf.robot_name and srdf.robot_name != robot.name:
            self._log.warning(f"the SRDF ({source}) is for robot {srdf.robot_name!r} but the "
                              f"model is {robot.name!r}; a group that does not fit the model "
                              "is answered with INVALID_GROUP_NAME")
        return robot.with_srdf(srdf, source)

    def _report(self, text: str) -> None:
        self._stats.set_model_error(text)
        self._log.error(text)
