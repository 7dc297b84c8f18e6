"""The robot model as the node holds it: one immutable :class:`LoadedRobot`, built completely
before it replaces the previous one (a single reference assignment), so a request that started
with a model finishes with it even if a new ``robot_description`` arrives meanwhile.

No rclpy here: building, name matching and frame look-ups are plain NumPy and testable alone.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from ..errors import IKError, SrdfError, UnknownLinkError
from ..api import fk_frames
from ..model import MAX_VALUE, Group, JointType, Model, Srdf
from .codes import (FRAME_TRANSFORM_FAILURE, INVALID_GROUP_NAME, INVALID_LINK_NAME,
                    INVALID_REQUEST, INVALID_ROBOT_STATE, RequestError)

__all__ = ["LoadedRobot", "build_robot", "default_tip_of"]

#: [rad or m] a joint value from a message (a seed, a robot state: measured values that may sit
#: just past a limit) this far past a limit is clipped into it; further out is an error. Wider
#: than the core's ``solvers.checks.SEED_LIMIT_SLACK`` (1e-6, for seeds computed by a program).
STATE_LIMIT_SLACK = 1e-3
MULTI_DOF_KINDS = {int(JointType.FLOATING): "floating", int(JointType.PLANAR): "planar"}


def default_tip_of(model: Model) -> str:
    """:meth:`ros2_ik.model.Model.default_tip` (kept here for the ROS layer's callers)."""
    return model.default_tip()


@dataclass(frozen=True)
class LoadedRobot:
    """A model plus what the ROS layer needs around it, computed once per model.

    ``out_names`` are the joint names of every solution the node sends: the model's coordinates
    (``model.q_names``; multi-DOF joints as ``joint/x`` ...) followed by the mimic joints, whose
    values are filled from their leaders.
    """

    model: Model
    source: str                      # where it came from, for logs and diagnostics
    default_tip: str
    digest: str                      # sha256 prefix of the URDF text (same text -> same model)
    out_names: tuple[str, ...]
    mimic_leader: np.ndarray = field(repr=False)      # (n_mimic,) q index of each mimic's leader
    mimic_multiplier: np.ndarray = field(repr=False)  # (n_mimic,)
    mimic_offset: np.ndarray = field(repr=False)      # (n_mimic,)
    q_index: Mapping[str, int] = field(repr=False)    # coordinate name -> q index
    zero_q: np.ndarray = field(repr=False)            # (nq,) 0 clamped into limits (FK default)
    #: floating and planar joints: name -> ("floating" | "planar", first q index) (MoveIt
    #: carries them as transforms)
    multi_dof: Mapping[str, tuple[str, int]] = field(default_factory=dict, repr=False)
    srdf: Srdf | None = field(default=None, repr=False)  # planning groups, when an SRDF is known
    srdf_source: str = ""
    #: a configured base_link / tip_link this robot lacks, and what is used instead (shown in
    #: the log and, while this model is in use, in the diagnostics as a WARN)
    notes: tuple[str, ...] = ()
    _groups: dict = field(default_factory=dict, repr=False, compare=False)  # name -> Group
    _groups_lock: threading.Lock = field(default_factory=threading.Lock, repr=False,
                                         compare=False)
    _collision: dict = field(default_factory=dict, repr=False, compare=False)
    _scene_kept: dict = field(default_factory=dict, repr=False, compare=False)
    #: the number of this model among those the node has served (1, 2, ...; set when it is
    #: swapped in: :meth:`.model_source.ModelSource`), named in every answer with the digest
    version: int = field(default=0, compare=False)
    #: set once the compiled kernels of its default tip, groups and frames are built (until
    #: then the reference answers: :func:`.model_source.prepare`)
    _compiled: threading.Event = field(default_factory=threading.Event, repr=False,
                                       compare=False)
    #: called as ``reporter(robot, collision model, mesh_path)`` when a collision model is
    #: built (the node logs its warnings and puts them into the diagnostics)
    reporter: object = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def base(self) -> str:
        return self.model.base

    @property
    def jacobian_columns(self) -> tuple[str, ...]:
        """Names of the Jacobian's columns (active velocity coordinates)."""
        return tuple(self.model.v_names[int(i)] for i in self.model.v_active)

    # ------------------------------------------------------------------ planning groups
    def with_srdf(self, srdf: Srdf | None, source: str = "") -> "LoadedRobot":
        """The same model with these planning groups (a new object: the old one stays as it
        was for requests that hold it)."""
        return replace(self, srdf=srdf, srdf_source=source if srdf is not None else "",
                       _groups={}, _groups_lock=threading.Lock(), _collision={},
                       _scene_kept={}, _compiled=threading.Event())

    def numbered(self, version: int) -> "LoadedRobot":
        """The same robot (sharing what it has built) as model number ``version``."""
        return replace(self, version=int(version))

    @property
    def compiled_ready(self) -> bool:
        """Whether the compiled kernels of its default tip, planning groups and frames are
        built: a one-goal request then takes well under a millisecond on the executor thread.
        Until then requests are answered by workers, with the reference backend where the
        kernels they need are still being built (the answer names its backend)."""
        return self._compiled.is_set()

    def mark_compiled(self) -> None:
        self._compiled.set()

    # ------------------------------------------------------------------ collision model
    def collision_model(self, spheres_file: str = "", mesh_path: str = "",
                        margin: float = 0.0):
        """The robot's :class:`~ros2_ik.model.collision.CollisionModel`: spheres fitted to the
        URDF's collision geometry (the SRDF's ``<link_sphere_approximation>`` where it gives
        them, or ``spheres_file``), meshes looked up in the ament index, ``mesh_path``
        (':'-separated) and ``$ROS2_IK_MESH_PATH``, self pairs less the SRDF's
        ``disable_collisions`` and those whose spheres come within ``margin`` almost always;
        built once per robot, files and margin (RequestError when the spheres file cannot be
        used). Its ``warnings`` and ``missing`` links are reported through :attr:`reporter` when
        it is built."""
        key = (spheres_file, mesh_path, float(margin))
        with self._groups_lock:
            hit = self._collision.get(key)
        if hit is not None:
            return hit
        from ..ik.collision import default_collision_model  # noqa: PLC0415

        spheres = None
        if spheres_file:
            try:
                with open(spheres_file, encoding="utf-8") as f:
                    spheres = f.read()
            except OSError as exc:
                raise RequestError(INVALID_REQUEST, f"collision.spheres_file {spheres_file!r} "
                                                    f"cannot be read: {exc}") from None
        dirs = tuple(d for d in mesh_path.split(":") if d)
        srdf = self.srdf if self.srdf is not None else self.model.memo_peek("model.srdf",
                                                                           "bundled")
        import warnings  # noqa: PLC0415

        kwargs = {}
        if spheres is not None:
            kwargs["spheres"] = spheres
        if dirs:
            kwargs["search_path"] = dirs
        try:
            with warnings.catch_warnings():  # (kept in the model's warnings: reported below)
                warnings.simplefilter("ignore")
                cm = default_collision_model(self.model, srdf, within=margin, **kwargs)
        except IKError as exc:
            raise RequestError(INVALID_REQUEST, f"the collision model of {self.name!r} cannot "
                                                f"be built: {exc}") from None
        with self._groups_lock:
            fresh = key not in self._collision
            cm = self._collision.setdefault(key, cm)
        if fresh and self.reporter is not None:
            self.reporter(self, cm, mesh_path)
        return cm

    def mark_collision_prepared(self, spheres_file: str, mesh_path: str,
                                margin: float) -> None:
        """Its collision-aware solvers for these collision settings are built
        (:func:`.model_source.prepare_collisions`)."""
        with self._groups_lock:
            self._collision[("prepared", spheres_file, mesh_path, float(margin))] = True

    def collision_prepared(self, settings) -> bool:
        """Whether its collision-aware solvers for the node's collision settings (spheres
        file, mesh path, margin) are built: a collision-aware one-goal request then takes well
        under a millisecond (no sphere fit, no compiler run on the executor thread)."""
        return bool(self._collision.get(("prepared", settings.collision_spheres_file,
                                         settings.collision_mesh_path,
                                         float(settings.collision_margin))))

    def scene_collisions(self, cm, scene):
        """(collision model, world) of a solve: ``cm`` with the planning scene's attached
        objects, padding and allowed collisions, and the scene's obstacles (each allowed to
        touch the links the scene allows); kept for the last few scenes."""
        from .scene import collision_model_for, world_for  # noqa: PLC0415

        key = (id(cm), id(scene))
        with self._groups_lock:
            hit = self._scene_kept.get(key)
            if hit is not None and hit[0] is cm and hit[1] is scene:
                return hit[2], hit[3]
        cm2 = collision_model_for(cm, scene, self.model)
        world = world_for(scene, cm2)
        with self._groups_lock:
            if len(self._scene_kept) >= 8:
                self._scene_kept.pop(next(iter(self._scene_kept)))
            self._scene_kept[key] = (cm, scene, cm2, world)
        return cm2, world

    @property
    def group_names(self) -> list[str]:
        return self.srdf.group_names if self.srdf is not None else []

    def group(self, name: str) -> Group:
        """Planning group ``name`` resolved against the model (cached), or INVALID_GROUP_NAME
        saying why not (no SRDF loaded, a name it does not define, a group that does not fit
        the model)."""
        with self._groups_lock:
            hit = self._groups.get(name)
        if hit is not None:
            return hit
        if self.srdf is None:
            raise RequestError(
                INVALID_GROUP_NAME,
                f"group {name!r} requested but no SRDF is loaded for robot {self.name!r}: publish "
                "it on robot_description_semantic (std_msgs/String, transient local, as "
                "move_group does) or set the robot_description_semantic parameter; or leave "
                "group_name empty (then only the joints on the way to the tips move)")
        try:
            group = self.srdf.group(self.model, name)
        except SrdfError as exc:
            raise RequestError(INVALID_GROUP_NAME,
                               f"group {name!r} of robot {self.name!r}: {exc}") from None
        with self._groups_lock:
            if len(self._groups) < 1000:
                self._groups[name] = group
        return group

    # ------------------------------------------------------------------ links and frames
    def check_link(self, name: str, what: str = "link") -> str:
        """``name`` if it is a link of the model, else INVALID_LINK_NAME listing the valid ones."""
        try:
            self.model.link_index(name)
        except UnknownLinkError as exc:
            raise RequestError(INVALID_LINK_NAME,
                               f"{what} {name!r} is not a link of robot {self.name!r}: {exc}"
                               ) from None
        return name

    def frame_transforms(self, frame_ids: Sequence[str], q: np.ndarray,
                         what: str = "frame_id") -> dict[str, np.ndarray]:
        """``{frame_id: T_base_frame (4, 4)}`` at configuration ``q`` (nq,).

        '' and the base link are the identity; any other link of the model is placed by FK at
        ``q`` (the seed). Anything else: FRAME_TRANSFORM_FAILURE naming the valid frames.
        """
        out: dict[str, np.ndarray] = {}
        others = []
        for f in dict.fromkeys(frame_ids):
            if f in ("", self.base):
                out[f] = np.eye(4)
            else:
                try:
                    self.model.link_index(f)
                except UnknownLinkError as exc:
                    raise RequestError(
                        FRAME_TRANSFORM_FAILURE,
                        f"{what} {f!r} is not a frame of robot {self.name!r}; use '' or "
                        f"{self.base!r} (the base link) or another link of the model "
                        f"(a goal in a link frame is placed by FK at the seed). {exc}") from None
                others.append(f)
        if others:
            T = fk_frames(self.model, q, others)[0]
            for k, f in enumerate(others):
                out[f] = np.array(T[k])
        return out

    # ------------------------------------------------------------------ joint values
    def full_q(self, q: np.ndarray) -> np.ndarray:
        """(N, nq) -> (N, len(out_names)): coordinates followed by the mimic joints' values."""
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        if not self.mimic_leader.size:
            return q
        mim = q[:, self.mimic_leader] * self.mimic_multiplier + self.mimic_offset
        return np.concatenate([q, mim], axis=1)

    def joint_state_entries(self, names: Sequence[str], positions) -> tuple[np.ndarray,
                                                                          np.ndarray]:
        """(q indices, values) of the entries of a joint_states message that
        :meth:`apply_joint_values` (not ``strict``, no ``clip``) would apply, in order:
        ``q[idx] = values`` then does what it does. Names the model has no coordinate of
        (other robots' joints, mimic joints) and non-finite or out-of-range values are left
        out; with more names than positions (or fewer) the extra ones are."""
        pos = np.asarray(positions, dtype=np.float64).reshape(-1)
        n = min(len(names), pos.shape[0])
        get = self.q_index.get
        idx = [get(nm, -1) for nm in names[:n]]
        keep = np.array(idx, dtype=np.intp) if n else np.zeros(0, dtype=np.intp)
        vals = pos[:n]
        with np.errstate(invalid="ignore"):
            ok = (keep >= 0) & np.isfinite(vals) & (np.abs(vals) <= MAX_VALUE)
        keep, vals = keep[ok], vals[ok]
        if np.unique(keep).size != keep.size:  # a name given twice: the later value wins
            last = keep.size - 1 - np.unique(keep[::-1], return_index=True)[1]
            keep, vals = keep[last], vals[last]
        return keep, vals.copy()

    def apply_joint_values(self, base_q: np.ndarray, names: Sequence[str],
                           positions: Sequence[float], *, what: str, strict: bool,
                           clip: bool, ignore_unknown: bool = False) -> np.ndarray:
        """A copy of ``base_q`` (nq,) with the named coordinates replaced.

        Mimic joints are accepted and ignored (they follow their leader). With ``strict``,
        a name that is no coordinate of the model, a length mismatch or a non-finite value is an
        INVALID_ROBOT_STATE error naming it; without, such entries are skipped (a joint_states
        topic may carry other robots' joints). ``clip``: values past a limit by at most
        STATE_LIMIT_SLACK are clamped; further out is an error (strict) or clamped (not strict).
        ``ignore_unknown``: names the model lacks are skipped even when ``strict`` (MoveIt's
        ``robot_state`` holds every joint of the robot, also those outside this model).
        """
        names = list(names)
        pos = np.asarray(positions, dtype=np.float64).reshape(-1)
        if len(names) != pos.shape[0]:
            if strict:
                raise RequestError(INVALID_ROBOT_STATE,
                                   f"{what} has {len(names)} names but {pos.shape[0]} positions; "
                                   "give one position per name")
            n = min(len(names), pos.shape[0])
            names, pos = names[:n], pos[:n]
        q = np.array(base_q, dtype=np.float64)
        mimic = set(self.model.mimic_joint_names)
        unknown = []
        for n, v in zip(names, pos):
            i = self.q_index.get(n)
            if i is None:
                if n not in mimic:
                    unknown.append(n)
                continue
            if not (np.isfinite(v) and abs(v) <= MAX_VALUE):
                if strict:
                    raise RequestError(INVALID_ROBOT_STATE,
                                       f"{what}: joint {n!r} has a non-finite position or one "
                                       f"beyond +-{MAX_VALUE:g} ({v}); give joint values in "
                                       "metres or radians")
                continue
            q[i] = v
        if unknown and strict and not ignore_unknown:
            shown = ", ".join(repr(n) for n in unknown[:10])
            raise RequestError(
                INVALID_ROBOT_STATE,
                f"{what} names joints that robot {self.name!r} does not have: {shown}"
                f"{' ...' if len(unknown) > 10 else ''}; valid joint names are "
                f"{list(self.q_index)}" + (f" (mimic joints {sorted(mimic)} are accepted and "
                                          "ignored)" if mimic else ""))
        if clip:
            lo, hi = self.model.lower, self.model.upper
            with np.errstate(invalid="ignore"):
                far = (q < lo - STATE_LIMIT_SLACK) | (q > hi + STATE_LIMIT_SLACK)
            if strict and far.any():
                i = int(np.nonzero(far)[0][0])
                raise RequestError(
                    INVALID_ROBOT_STATE,
                    f"{what}: joint {self.model.q_names[i]!r} = {q[i]:.6g} is outside its limits "
                    f"[{lo[i]:.6g}, {hi[i]:.6g}]; give a value within the limits")
            q = np.clip(q, lo, hi)
        return q


def build_robot(urdf: str, *, source: str, base_link: str = "", tip_link: str = "",
                log=None, strict: bool = False, reporter=None) -> LoadedRobot:
    """Parse ``urdf`` into a :class:`LoadedRobot` (raises :class:`ros2_ik.errors.UrdfError`).

    ``base_link``: root of the kinematic model ('' = the URDF's root link); ``tip_link``: the
    default tip ('' = :func:`default_tip_of`). A ``base_link`` or ``tip_link`` the URDF does not
    have is reported through ``log(msg)`` and replaced by the default, so that swapping in a
    different robot on ``robot_description`` works with the same parameters. With ``strict``
    they raise :class:`UnknownLinkError` instead (a parameter set to a link that is not there).
    """
    notes = []

    def warn(msg):
        notes.append(msg)
        if log is not None:
            log(msg)

    try:
        model = Model.from_urdf(urdf, base=base_link or None)
    except UnknownLinkError as exc:
        if strict:
            raise UnknownLinkError(base_link, exc.valid, "base_link") from None
        warn(f"base_link {base_link!r} is not a link of the new robot description ({exc}); "
             "using the URDF's root link instead")
        model = Model.from_urdf(urdf)
    tip = tip_link
    if tip:
        try:
            model.link_index(tip)
        except UnknownLinkError:
            if strict:
                raise UnknownLinkError(tip_link, model.link_names, "tip_link") from None
            tip = default_tip_of(model)
            warn(f"tip_link {tip_link!r} is not a link of robot {model.name!r}; using {tip!r}")
    else:
        tip = default_tip_of(model)
    mim_links = [l for l in range(1, model.num_links) if model.mimic_q[l] >= 0]
    zero = np.clip(np.zeros(model.nq), model.lower, model.upper)
    for s in model.floating_q_starts:
        zero[s + 3:s + 7] = (0.0, 0.0, 0.0, 1.0)
    zero.setflags(write=False)
    return LoadedRobot(
        model=model, source=source, default_tip=tip,
        digest=hashlib.sha256(urdf.encode("utf-8", "replace")).hexdigest()[:16],
        out_names=tuple(model.q_names) + tuple(model.joint_names[l] for l in mim_links),
        mimic_leader=np.array([model.mimic_q[l] for l in mim_links], dtype=np.int64),
        mimic_multiplier=np.array([model.mimic_multiplier[l] for l in mim_links], dtype=float),
        mimic_offset=np.array([model.mimic_offset[l] for l in mim_links], dtype=float),
        q_index={n: i for i, n in enumerate(model.q_names)},
        zero_q=zero,
        multi_dof={model.joint_names[l]: (MULTI_DOF_KINDS[int(model.joint_type[l])],
                                          int(model.q_start[l]))
                   for l in range(1, model.num_links)
                   if int(model.joint_type[l]) in MULTI_DOF_KINDS and model.q_start[l] >= 0},
        notes=tuple(notes), reporter=reporter,
    )
