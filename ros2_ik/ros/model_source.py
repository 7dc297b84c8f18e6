"""Where the node's robot model and planning groups come from, and how they are replaced.

The URDF comes from the parameters (``robot_description`` text, ``urdf_file``, a bundled
``robot``) and, at any time, the ``robot_description`` topic; the SRDF (planning groups) from
the ``robot_description_semantic`` parameter or topic, or a bundled robot's file.

A new model (or new groups) is parsed and its groups attached in a background thread, then
swapped in on the executor thread by one reference assignment (:class:`LoadedRobot` is
immutable, its groups part of it): a request keeps the model it started with, and a model is
never seen with another model's groups. From the moment a description (or an SRDF, or a
parameter that changes the model) is received until the model it asks for serves, the model
is *pending*: a request taken meanwhile waits for it (:meth:`ModelSource.wait_model`, at most
the ``model_wait`` parameter) and is answered by the new model, never the old one; every
answer names its model (digest and version). Its compiled kernels (:func:`prepare`: the
default tip's, the groups' tips', the frames'; seconds of g++ for a robot this machine has not
seen, milliseconds afterwards) are built after the swap, in the background; until they are,
requests are answered with the reference backend, and each answer says which backend answered.
A newer description supersedes one still being prepared. A bad description is logged and
reported to diagnostics, the previous model (or groups) stays, and the requests that waited
are answered by it. A change of the model's source (the ``robot``, ``urdf_file`` or
``robot_description`` parameters) brings the groups that source has (a bundled robot's SRDF,
the ``robot_description_semantic`` parameter) or none.

No rclpy here: the node hands in its logger, statistics, its hand-off to the executor thread
(``post``) and what to do after a swap.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from .. import robots
from ..api import (IKSolver, build_scope, cancel_background_builds, fk_frames, jacobian,
                   prepared_solver)
from ..errors import IKError
from ..model import Srdf, parse_srdf
from .diagnostics import Stats
from .logs import AT
from .params import MODEL_PARAMS, Settings, ik_config
from .robot import LoadedRobot, build_robot

__all__ = ["ModelSource", "SOURCE_PARAMS", "describe", "prepare"]

SOURCE_PARAMS = ("robot", "urdf_file", "robot_description")
_KEEP = object()  # "the groups in use" (no change)


def describe(robot: LoadedRobot) -> str:
    """One line naming a model, its frames, its source and its groups (for the log)."""
    groups = (f", groups {robot.group_names} from {robot.srdf_source}" if robot.srdf
              else ", no SRDF")
    return (f"{robot.name!r} ({robot.nq} coordinates, base {robot.base!r}, default tip "
            f"{robot.default_tip!r}, from {robot.source}{groups}; model {robot.version}, URDF "
            f"digest {robot.digest})")


def prepare(robot: LoadedRobot, settings: Settings, xp) -> IKSolver:
    """Build what requests on ``robot`` will use, before it serves them: the prepared solvers
    of its default tip and of its planning groups' tips, and its FK / Jacobian kinematics.
    Returns the default tip's solver (its ``backend`` and ``reason`` say what answers)."""
    cfg = ik_config(settings)
    model = robot.model
    solver = prepared_solver(model, [robot.default_tip], cfg, settings.solver, "auto", xp)
    for name in robot.group_names:
        try:
            g = robot.group(name)
        except Exception:  # noqa: BLE001 - a group that does not fit: answered when asked
            continue
        if g.tip is not None:
            prepared_solver(g.restrict(model), [g.tip], cfg, settings.solver, "auto", xp)
    q = model.neutral_q()
    fk_frames(model, q, [robot.default_tip])
    jacobian(model, q, robot.default_tip)
    return solver


def prepare_collisions(robot: LoadedRobot, settings: Settings, xp) -> None:
    """The collision-aware solvers of the default tip and of the planning groups' tips (what
    MoveIt's requests, which ask avoid_collisions for a group, use), built after the model
    serves: a robot new to this machine answers its first requests while g++ builds them.
    Once they are, collision-aware one-goal requests are answered on the executor thread
    (:meth:`LoadedRobot.collision_prepared`)."""
    cfg = ik_config(settings, avoid_collisions=True)
    cm = robot.collision_model(settings.collision_spheres_file, settings.collision_mesh_path,
                               settings.collision_margin)
    if cm.missing and not cm.accept_missing:
        return  # (requests asking for collision avoidance say why they cannot)
    model = robot.model
    prepared_solver(model, [robot.default_tip], cfg, settings.solver, "auto", xp, collision=cm)
    for name in robot.group_names:
        try:
            g = robot.group(name)
        except Exception:  # noqa: BLE001 - a group that does not fit: answered when asked
            continue
        if g.tip is not None:
            prepared_solver(g.restrict(model), [g.tip], cfg, settings.solver, "auto", xp,
                            collision=cm)
    robot.mark_collision_prepared(settings.collision_spheres_file,
                                  settings.collision_mesh_path, settings.collision_margin)


class ModelSource:
    """The model in use (``robot``, with its groups), loaded and replaced from parameters and
    topics (see the module docstring).

    ``post(fn, *args)`` runs on the executor thread; ``settings()`` and ``xp()`` are the
    parameters and array module in use; ``on_swap(robot, solver, seconds)`` runs there after
    each swap."""

    def __init__(self, log, stats: Stats, post: Callable, settings: Callable, xp: Callable,
                 on_swap: Callable, on_compiled: Callable | None = None):
        self._log = log
        self._stats = stats
        self._post = post
        self._settings = settings
        self._xp = xp
        self._on_swap = on_swap
        self._on_compiled = on_compiled
        # set while no model change is pending (see the module docstring)
        self._settled = threading.Event()
        self._settled.set()
        self._asked_at = 0.0  # time.monotonic() of the change pending
        self._version = 0  # models served so far
        self.robot: LoadedRobot | None = None
        self._urdf: str | None = None
        # what the node was last asked to serve: a model (without groups) and its URDF, the
        # groups ((Srdf, source) or None); prepared in the background, then swapped in
        self._want: tuple | None = None
        # the latest planning groups known ((Srdf, source) or None): read by every preparation
        # when it attaches groups, so an SRDF that arrives while a URDF is parsed is not lost
        self._groups: tuple[Srdf, str] | None = None
        self._parsing: int | None = None  # generation of a topic URDF still being parsed
        self._reported: set = set()  # collision warnings already logged (robot digest, text)
        self._generation = 0
        self._pending_change: tuple | None = None
        self._threads: list[threading.Thread] = []
        self._scope = build_scope()  # the kernel builds of the preparations (ended by close)
        self._closed = False
        self._lock = threading.Lock()

    @property
    def preparing(self) -> bool:
        """A model or groups asked for are still being prepared."""
        return any(t.is_alive() for t in self._threads)

    @property
    def pending(self) -> bool:
        """A description (or SRDF, or model parameter) was received whose model does not
        serve yet: requests taken now wait for it (:meth:`wait_model`)."""
        return not self._settled.is_set()

    def wait_model(self, timeout: float) -> LoadedRobot | None:
        """(any thread but the executor's) Wait until the model asked for serves, or was
        refused (the previous one then serves); the model in use then. RequestError
        TIMED_OUT when it takes more than ``timeout`` [s]."""
        if not self._settled.wait(max(0.0, timeout)):
            from . import codes  # noqa: PLC0415
            from .codes import RequestError  # noqa: PLC0415

            raise RequestError(codes.TIMED_OUT,
                               "a new robot model, received "
                               f"{time.monotonic() - self._asked_at:.1f} s ago, is still being "
                               f"loaded (waited {timeout:g} s, the model_wait parameter); the "
                               "request was not answered by the previous model. Ask again, or "
                               "raise model_wait")
        return self.robot

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

    def build(self, urdf: str, source: str, s: Settings, strict: bool = False,
              log: Callable | None = None) -> LoadedRobot:
        return build_robot(urdf, source=source, base_link=s.base_link, tip_link=s.tip_link,
                           log=log or self._log.warning, strict=strict,
                           reporter=self._report_collision)

    def _report_collision(self, robot: LoadedRobot, cm, mesh_path: str) -> None:
        """A collision model was built (any thread): its warnings to the log (once per robot
        and text) and, with the links that have no spheres, to the diagnostics."""
        from ..model.collision import missing_message  # noqa: PLC0415

        missing = missing_message(cm.missing) if cm.missing else ""
        self._stats.set_collision(cm.warnings, missing)
        for level, texts in (("warning", cm.warnings), ("info", cm.notes),
                             ("error", [missing] if missing else [])):
            for text in texts:
                key = (robot.digest, text)
                if key in self._reported:
                    continue
                self._reported.add(key)
                self._say(level, f"collision model of {robot.name!r}: {text}")

    def load_from_settings(self, s: Settings, startup: bool = False) -> None:
        """The model and groups the parameters name (errors logged; the node keeps serving)."""
        try:
            self._groups = self.srdf_from_settings(s)
        except Exception as exc:  # noqa: BLE001
            self._report(f"could not read the planning groups from the parameters: {exc}")
        try:
            src = self.urdf_from_settings(s)
            if src is not None:
                self._ask(self.build(src[0], src[1], s), src[0])
        except Exception as exc:  # noqa: BLE001  (never die on a bad description)
            self._report(f"could not load the robot model from the parameters: {exc}"
                         + ("; waiting for robot_description" if startup else ""))

    # ------------------------------------------------------------------ parameter changes
    def prepare_change(self, changes: dict, new: Settings) -> str | None:
        """Check a parameter change before it is accepted: parse the model / groups it asks
        for (kept until :meth:`apply_change`); None, or the reason it is refused."""
        self._pending_change = None
        groups = _KEEP
        robot = None
        if "robot_description_semantic" in changes or any(k in changes for k in SOURCE_PARAMS):
            try:  # the SRDF parameter, or a newly chosen source's groups (or none)
                groups = self.srdf_from_settings(new)
            except Exception as exc:  # noqa: BLE001
                return f"planning groups not changed: {exc}"
        if any(k in changes for k in MODEL_PARAMS):
            try:
                # a new source (robot / urdf_file / robot_description) loads that; a new
                # base_link / tip_link alone rebuilds the model in use (wherever it came from)
                src = None
                if any(k in changes for k in SOURCE_PARAMS):
                    src = self.urdf_from_settings(new)
                want = self._want
                if src is None and want is not None:
                    src = (want[1], want[0].source)
                if src is not None:
                    # a base_link / tip_link set now must name a link of that robot
                    strict = "base_link" in changes or "tip_link" in changes
                    robot = (self.build(src[0], src[1], new, strict), src[0])
            except Exception as exc:  # noqa: BLE001
                return f"robot model not changed: {exc}"
        if robot is not None or groups is not _KEEP:
            self._pending_change = (robot, groups)
        return None

    def apply_change(self) -> None:
        """Start preparing what :meth:`prepare_change` parsed (after the change was accepted):
        the model and its groups together."""
        change, self._pending_change = self._pending_change, None
        if change is None:
            return
        robot, groups = change
        if groups is not _KEEP:
            self._groups = groups
        if robot is not None:
            self._ask(*robot)
        elif self._want is not None:
            self._ask(*self._want)
        elif groups is not _KEEP and groups is not None:
            self._log.info(f"planning groups {groups[0].group_names} from {groups[1]} kept "
                           "until a robot model is loaded")

    # ------------------------------------------------------------------ topics
    def on_robot_description(self, text: str, settings: Settings) -> None:
        """A URDF from the topic: parsed and prepared in the background; requests taken from
        now on wait for it."""
        want = self._want
        self._start(lambda: self._parse_topic(text, settings, want))
        self._parsing = self._generation
        self._log.info(f"robot_description received ({len(text)} bytes): requests from now on "
                       "are answered by its model")

    def _parse_topic(self, text: str, settings: Settings, want):
        """(robot, urdf) of a topic's URDF, or None: unchanged, or rejected (reported)."""
        try:
            if not text.strip():
                raise IKError("the message is empty")
            robot = self.build(text, "topic robot_description", settings,
                               log=lambda m: self._say("warning", m))
        except Exception as exc:  # noqa: BLE001
            keep = (f"keeping the current model {want[0].name!r}" if want is not None
                    else "no model loaded yet")
            self._post(self._report, f"robot_description rejected: {exc}; {keep}. Fix the URDF "
                       "and publish it again.")
            return None
        if want is not None and robot.digest == want[0].digest and \
                want[0].source == robot.source:
            self._say("debug", "robot_description unchanged")
            return None
        return robot, text

    def on_robot_description_semantic(self, text: str) -> None:
        try:
            srdf = parse_srdf(text)
        except Exception as exc:  # noqa: BLE001  (never die on a bad description)
            keep = (f"keeping the groups from {self._groups[1]}" if self._groups
                    else "no planning groups loaded")
            self._report(f"robot_description_semantic rejected: {exc}; {keep}. Fix the SRDF "
                         "and publish it again.")
            return
        self._groups = (srdf, "topic robot_description_semantic")
        if self._parsing is not None:  # the URDF being parsed is prepared with these groups
            self._log.info(f"planning groups {srdf.group_names} from the topic: applied to the "
                           "robot_description being loaded")
            return
        if self._want is None:
            self._log.info(f"planning groups {srdf.group_names} from the topic kept until a "
                           "robot model is loaded")
            return
        self._ask(*self._want)

    # ------------------------------------------------------------------ preparing, swapping
    def _ask(self, robot: LoadedRobot, urdf: str) -> None:
        """Serve ``robot`` (with the groups asked for) once it is prepared (executor thread)."""
        self._want = (robot, urdf)
        self._start(lambda: (robot, urdf))

    def _start(self, get) -> None:
        """Prepare, in a background thread, the model ``get()`` returns (None: nothing to do)
        with the groups asked for now; a later call supersedes it."""
        if self._closed:
            return
        self._generation += 1
        self._parsing = None
        gen = self._generation
        settings, xp = self._settings(), self._xp()
        if self._settled.is_set():
            self._asked_at = time.monotonic()
        self._settled.clear()  # (executor thread: before any later request is taken)

        def run():
            try:
                with self._scope:
                    self._prepare(gen, get, settings, xp)
            except Exception as exc:  # noqa: BLE001 - the model in use keeps serving
                self._post(self._report, f"could not prepare the robot model: {exc}")
                self._post(self._settle, gen)

        t = threading.Thread(target=run, daemon=True, name="ros2_ik-model")
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _prepare(self, gen, get, settings, xp) -> None:
        """The background half of :meth:`_start`: the model, then the latest groups known
        (read now, after the parse: an SRDF that came meanwhile is not lost); swapped in, then
        its compiled kernels built (the reference answers until they are)."""
        t0 = time.perf_counter()
        got = get()
        self._post(self._parsed, gen)
        if got is None or self._closed:
            self._post(self._settle, gen)
            return
        robot, urdf = got
        self._post(self._wanted, gen, robot, urdf)
        groups = self._groups
        robot = self._with_groups(robot, groups)
        self._post(self._swap, gen, robot, urdf, time.perf_counter() - t0)
        t1 = time.perf_counter()
        solver = prepare(robot, settings, xp)  # (this thread waits for the builds)
        robot.mark_compiled()
        if self._on_compiled is not None:
            self._post(self._on_compiled, robot, solver, time.perf_counter() - t1)
        if self._closed or gen != self._generation:
            return
        try:
            prepare_collisions(robot, settings, xp)
        except Exception as exc:  # noqa: BLE001 - a request asking for collisions says why
            self._say("warning",
                      f"collision-aware solver of {robot.name!r} not prepared: {exc}")

    def refresh_collisions(self) -> None:
        """The collision settings changed (spheres file, mesh path, margin): the collision
        model and solvers of the model in use built for them in the background (a sphere fit
        and a compiler run are not for the executor thread); requests meanwhile are answered
        by workers."""
        robot = self.robot
        if robot is None or self._closed:
            return
        settings, xp = self._settings(), self._xp()

        def run():
            try:
                with self._scope:
                    prepare_collisions(robot, settings, xp)
            except Exception as exc:  # noqa: BLE001 - a request asking for collisions says why
                self._say("warning",
                          f"collision-aware solver of {robot.name!r} not prepared: {exc}")

        t = threading.Thread(target=run, daemon=True, name="ros2_ik-collision")
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()

    def _parsed(self, gen: int) -> None:
        if self._parsing == gen:
            self._parsing = None

    def _wanted(self, gen: int, robot: LoadedRobot, urdf: str) -> None:
        if gen == self._generation:
            self._want = (robot, urdf)

    def _settle(self, gen: int) -> None:
        """(executor thread) The change of generation ``gen`` ended without a swap (the
        description was unchanged or refused): if it is the latest, the model in use serves
        the requests that waited."""
        if gen == self._generation:
            self._settled.set()

    def _swap(self, gen: int, robot: LoadedRobot, urdf: str, seconds: float) -> None:
        """Swap in a parsed model (executor thread), unless a newer one was asked for."""
        if self._closed or gen != self._generation:
            return
        old = self.robot
        self._version += 1
        robot = robot.numbered(self._version)
        self.robot = robot  # one reference assignment: in-flight requests keep theirs
        latest = self._groups[0] if self._groups is not None else None
        if latest is not robot.srdf and self._want is not None and self._parsing is None:
            # groups that came while this one was prepared: prepare it again with them (the
            # requests waiting go on waiting: they came after those groups)
            self._ask(*self._want)
        else:
            self._settled.set()
        self._urdf = urdf
        self._stats.set_model_error("")
        if old is not None and (old.digest, old.source, old.base, old.default_tip) == (
                robot.digest, robot.source, robot.base, robot.default_tip):
            if robot.srdf is not None:
                self._log.info(f"planning groups {robot.group_names} from {robot.srdf_source} "
                               f"for robot {robot.name!r}")
            else:
                self._log.info(f"no planning groups (no SRDF) for robot {robot.name!r}")
        else:
            verb = "replaced" if old is not None else "loaded"
            self._log.info(f"{verb} robot model: {describe(robot)}"
                           + (f" (was {old.name!r})" if old is not None else ""))
        self._on_swap(robot, seconds)

    def _with_groups(self, robot: LoadedRobot, groups) -> LoadedRobot:
        """``robot`` with the planning groups ``groups`` (a warning when the SRDF names another
        robot: its groups are still used as far as they fit the model)."""
        if groups is None:
            return robot.with_srdf(None)
        srdf, source = groups
        if srdf.robot_name and srdf.robot_name != robot.name:
            self._say("warning", f"the SRDF ({source}) is for robot {srdf.robot_name!r} "
                       f"but the model is {robot.name!r}; a group that does not fit the model "
                       "is answered with INVALID_GROUP_NAME")
        return robot.with_srdf(srdf, source)

    def _say(self, level: str, text: str) -> None:
        """Log from any thread, on the executor thread (one call site per severity)."""
        self._post(AT[level], self._log, text)

    def _report(self, text: str) -> None:
        self._stats.set_model_error(text)
        self._log.error(text)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout``) for the models being prepared; True when none is."""
        end = None if timeout is None else time.monotonic() + timeout
        for t in list(self._threads):
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        return not self.preparing

    def close(self, timeout: float = 10.0) -> None:
        """Nothing more is prepared or swapped in; the builds under way are stopped (their
        compiler processes ended) and waited for (at most ``timeout``)."""
        self._closed = True
        self._scope.cancel()
        cancel_background_builds()
        self._settled.set()  # (requests waiting for a model: answered by the one in use)
        self.wait(timeout)
