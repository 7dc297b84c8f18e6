"""Request statistics and their diagnostic_msgs/DiagnosticStatus.

The node counts every request (service, topic goal, action) in :class:`Stats` (thread safe)
and publishes one DiagnosticStatus per period on ``/diagnostics``: backend, model (name, dof,
source), request count and rate, problems solved / success rate, the last error.
Also the planning scene (version, obstacles, attached objects, the last message that could not
be applied) and the collision model's warnings and links without spheres.
Level: OK while a model is loaded and the last request succeeded, WARN without a model, when
the last request failed or the collision model has warnings, ERROR when the last
robot_description could not be parsed, a planning scene message was not applied (until one is),
the scene holds what cannot be checked, or links with collision geometry have no spheres.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from . import codes

__all__ = ["Stats", "diagnostic_status"]


@dataclass
class _Snapshot:
    requests: int
    problems: int
    solved: int
    errors: int
    last_error: str
    last_code: int
    rate: float
    model_error: str
    collision_warnings: tuple
    collision_missing: str
    scene: object
    scene_error: str
    scene_errors: int
    scene_warnings: tuple


class Stats:
    """Counters shared by the node's callback threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = 0
        self.problems = 0
        self.solved = 0
        self.errors = 0
        self.last_error = ""
        self.last_code = codes.SUCCESS
        self.model_error = ""
        self.collision_warnings: tuple = ()
        self.collision_missing = ""
        self.scene = None
        self.scene_error = ""
        self.scene_errors = 0
        self.scene_warnings: tuple = ()
        self._rate_t = time.monotonic()
        self._rate_n = 0

    def record(self, kind: str, code: int, problems: int = 0, solved: int = 0,
               message: str = "") -> None:
        with self._lock:
            self.requests += 1
            self.problems += int(problems)
            self.solved += int(solved)
            self.last_code = int(code)
            if code != codes.SUCCESS:
                self.errors += 1
                self.last_error = f"{kind}: {codes.name_of(code)}: {message}"[:500]

    def set_model_error(self, message: str) -> None:
        with self._lock:
            self.model_error = message[:500]

    def set_collision(self, warnings, missing: str) -> None:
        """The collision model in use: its warnings, and the links without spheres (words)."""
        with self._lock:
            self.collision_warnings = tuple(w[:300] for w in warnings)[:20]
            self.collision_missing = missing[:4000]

    def set_scene(self, scene, error: str, warnings=None) -> None:
        """The planning scene in use, the last message that could not be applied ('' once one
        was applied since), and what the scene makes unsolvable (``warnings``; None: as
        before)."""
        with self._lock:
            self.scene = scene
            if error:
                self.scene_errors += 1
            self.scene_error = error[:1000]
            if warnings is not None:
                self.scene_warnings = tuple(w[:300] for w in warnings)[:10]

    def snapshot(self) -> _Snapshot:
        with self._lock:
            now = time.monotonic()
            dt = max(now - self._rate_t, 1e-9)
            rate = (self.requests - self._rate_n) / dt
            self._rate_t, self._rate_n = now, self.requests
            return _Snapshot(self.requests, self.problems, self.solved, self.errors,
                             self.last_error, self.last_code, rate, self.model_error,
                             self.collision_warnings, self.collision_missing, self.scene,
                             self.scene_error, self.scene_errors, self.scene_warnings)


def diagnostic_status(node_name: str, stats: Stats, robot, backend: str,
                      solver_backend: str = "", preparing: bool = False,
                      extra: dict | None = None):
    """One ``diagnostic_msgs/DiagnosticStatus`` describing the node now: ``backend`` the array
    backend, ``solver_backend`` what answers the model's default tip ("host", or "reference"
    with the reason, e.g. no C++ compiler on this machine), ``preparing`` whether a model
    asked for is still being prepared, ``extra`` more key-value pairs."""
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue  # noqa: PLC0415

    snap = stats.snapshot()
    st = DiagnosticStatus()
    st.name = f"{node_name}: kinematics"
    st.hardware_id = node_name
    values = {
        "backend": backend,
        "solver_backend": solver_backend or "n/a",
        "model_loaded": str(robot is not None).lower(),
        "model_preparing": str(bool(preparing)).lower(),
        "requests": str(snap.requests),
        "request_rate_hz": f"{snap.rate:.3f}",
        "problems": str(snap.problems),
        "problems_solved": str(snap.solved),
        "success_rate": f"{snap.solved / snap.problems:.4f}" if snap.problems else "n/a",
        "failed_requests": str(snap.errors),
        "last_error": snap.last_error or "none",
    }
    if robot is not None:
        values.update({"model_digest": robot.digest, "model_version": str(robot.version),
                       "model_compiled": str(robot.compiled_ready).lower()})
        values.update({"model": robot.name, "dof": str(robot.nq), "base_link": robot.base,
                       "default_tip": robot.default_tip, "model_source": robot.source})
    if snap.model_error:
        values["robot_description_error"] = snap.model_error
    notes = getattr(robot, "notes", ())
    if notes:
        values["model_warning"] = "; ".join(notes)
    sc = snap.scene
    if sc is not None:
        values.update({"scene_version": str(sc.version), "scene_obstacles": str(len(sc.world)),
                       "scene_attached_objects": ", ".join(a.id for a in sc.attached) or
                       "none"})
        if sc.unsupported:
            values["scene_unsupported"] = "; ".join(why for _, why in sc.unsupported)
    if snap.scene_error:
        values["scene_error"] = snap.scene_error
    values["scene_errors"] = str(snap.scene_errors)
    for k, text in enumerate(snap.collision_warnings):
        values[f"collision_warning_{k}"] = text
    for k, text in enumerate(snap.scene_warnings):
        values[f"scene_warning_{k}"] = text
    if snap.collision_missing:
        values["collision_missing"] = snap.collision_missing
    values.update({k: str(v) for k, v in (extra or {}).items()})
    st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
    if snap.model_error:
        st.level = DiagnosticStatus.ERROR
        st.message = "last robot_description rejected" + (
            "; still serving the previous model" if robot is not None else "; no model")
    elif snap.collision_missing:
        st.level = DiagnosticStatus.ERROR
        st.message = ("collision geometry without spheres: collision-aware requests are "
                      "COLLISION_CHECKING_UNAVAILABLE (see collision_missing)")
    elif snap.scene_error:
        st.level = DiagnosticStatus.ERROR
        st.message = "a planning scene message was not applied (see scene_error)"
    elif sc is not None and sc.unsupported:
        st.level = DiagnosticStatus.ERROR
        st.message = ("the last octomap or point cloud could not be used: collision-aware "
                      "requests are COLLISION_CHECKING_UNAVAILABLE (see scene_unsupported)")
    elif snap.scene_warnings:
        st.level = DiagnosticStatus.WARN
        st.message = ("the planning scene leaves some links no clear configuration (see "
                      "scene_warning_*)")
    elif snap.collision_warnings:
        st.level = DiagnosticStatus.WARN
        st.message = (f"serving {robot.name if robot is not None else 'no model'}; the "
                      "collision model has warnings (see collision_warning_*)")
    elif robot is None:
        st.level = DiagnosticStatus.WARN
        st.message = "no robot model (waiting for robot_description)"
    elif notes:
        st.level = DiagnosticStatus.WARN
        st.message = (f"serving {robot.name} with the default tip / root link in place of a "
                      "base_link / tip_link parameter this robot lacks (see model_warning)")
    elif snap.last_code != codes.SUCCESS and snap.requests:
        st.level = DiagnosticStatus.WARN
        st.message = f"serving {robot.name}; last request: {codes.name_of(snap.last_code)}"
    else:
        st.level = DiagnosticStatus.OK
        st.message = f"serving {robot.name} ({robot.nq} dof)"
    return st
