"""The robot's collision model: spheres on its links, and the pairs of links checked against
each other.

The solvers evaluate a signed distance per sphere at every iteration (against the world's
primitives and the other links' spheres), which costs a few instructions per pair: cuRobo's
choice. What makes the spheres right, and what they cover:

- **Tight, covering spheres** (:mod:`ros2_ik.model.spheres`): fitted to each link's URDF
  ``<collision>`` geometry (boxes, cylinders, spheres, capsules, meshes) so that every vertex and
  surface sample lies inside them and they reach at most ``overshoot`` (5 mm by default) past the
  geometry in any direction; as many as that bound asks for. A link's spheres can also be given:
  an SRDF's ``<link_sphere_approximation>`` (srdfdom's form; :meth:`CollisionModel.to_srdf`
  writes it), or a YAML file (:meth:`CollisionModel.to_yaml`, :func:`spheres_from_yaml`).
- **The whole robot**: every link of the URDF with geometry whose pose depends on a solved joint
  or that sits on the solved chain, also when the model was cut to a chain (``Model.from_urdf(...,
  tips=[tcp])`` leaves a hand's fingers out of the kinematic model, not out of the collision
  model). Such a link rides on its nearest link in the model (:attr:`CollisionModel.links`); the
  joints between them are not solved: a side branch of a tip's body (fingers, a tool) is covered
  over its joints' whole range (the spheres of the swept geometry: right whatever the gripper
  does), any other is held at ``held`` values, or 0 clamped into its limits.
- **Missing geometry is never silent**: a mesh that cannot be found or read is tried as the
  link's visual mesh (a warning says so); when neither can be used the link is listed in
  :attr:`CollisionModel.missing` and a solve with collision avoidance refuses the model
  (:meth:`CollisionModel.check_complete`) naming the links, the files and the search path to set,
  unless the model was built with ``accept_missing=True``.

World checks: every link that some joint moves; a link rigidly attached to the base
(:attr:`CollisionModel.static`) is not checked against the world, as no configuration can move
it clear.

Self-collision pairs (:attr:`CollisionModel.pairs`): every pair of links with spheres, less
adjacent links (a link and the nearest link with geometry above it) and links rigidly attached
to each other (no solved joint between them): "Adjacent"; the SRDF's ``<disable_collisions>``;
pairs given by the caller. :func:`ros2_ik.ik.collision.default_collision_model` also leaves out
pairs whose spheres touch in nearly every configuration, with a warning naming them.

The spheres of a link are kept in groups of at most :data:`GROUP` (contiguous, with a bounding
sphere each): the solvers test a link, then a group, then its spheres, so a robot of a thousand
spheres costs little more than one of a hundred away from contact.

Scene changes (MoveIt's attached objects, padding, allowed collisions) give new models:
:meth:`CollisionModel.with_attached`, :meth:`~CollisionModel.with_padding`,
:meth:`~CollisionModel.with_disabled`.
"""

from __future__ import annotations

import os
import warnings as _warnings
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import IKError, InputTypeError, InvalidInputError, UnknownJointError, UnknownLinkError
from ..validate import check_flag, describe, naming
from .joint_types import JointType
from .meshes import element_shape, resolve_mesh, search_path as _search_path
from .spheres import OVERSHOOT, Shape, fit_link
from .tree import Model, check_model
from .urdf import UrdfWarning

__all__ = ["CollisionModel", "collision_model", "spheres_from_yaml", "MAX_SPHERES", "GROUP",
           "CollisionWarning", "CollisionGeometryError", "resolve_mesh", "OVERSHOOT"]

#: spheres a robot's collision model may hold
MAX_SPHERES = 16384
#: spheres per group at most (the middle level of the solvers' link / group / sphere tests)
GROUP = 16
#: values each swept joint of a side branch is sampled at (its limits and between)
SWEEP_SAMPLES = 5


class CollisionWarning(UrdfWarning):
    """Collision geometry that could not be used as written (a missing or unreadable mesh, a
    visual mesh used instead, pairs left out); also in :attr:`CollisionModel.warnings`."""


class CollisionGeometryError(IKError):
    """A collision-aware solve on a collision model with links whose declared geometry has no
    spheres (:attr:`CollisionModel.missing`): the answer could not keep its promise."""


@dataclass(frozen=True, eq=False)
class CollisionModel:
    """Spheres on a model's links and the link pairs checked for self-collision; every array
    read-only.

    ``link_names`` (C,) the collision links (robot links, and attached objects); their spheres
    ride on model link ``links[c]`` (the link itself, or its nearest link in the model; see the
    module docstring): sphere ``s`` belongs to collision link ``sphere_link[s]``, at ``center[s]``
    in the frame of model link ``links[sphere_link[s]]``, with ``radius[s]``; spheres of one link
    are contiguous, in groups (``group_start`` (G + 1,) offsets; a group never spans two links).
    ``pairs`` (Pp, 2) indices into ``link_names`` (a < b) of the pairs checked; ``disabled``
    ``((name, name, reason), ...)`` those not checked. ``offset`` (C, 4, 4): the collision link's
    own frame in the frame its spheres are given in (identity for links of the model).
    ``missing`` ``((link, why), ...)``: declared geometry without spheres; ``notes``: what the
    model assumed (swept or held joints); ``warnings``: what the log must show."""

    model_name: str
    link_names: tuple
    links: np.ndarray
    sphere_link: np.ndarray
    center: np.ndarray
    radius: np.ndarray
    pairs: np.ndarray
    disabled: tuple = ()
    warnings: tuple = ()
    static: np.ndarray = None
    group_start: np.ndarray = None
    offset: np.ndarray = None
    missing: tuple = ()
    notes: tuple = ()
    overshoot: float = OVERSHOOT
    accept_missing: bool = False
    attached: tuple = ()  # ((object name, link, touch links), ...)

    @property
    def num_spheres(self) -> int:
        return int(self.radius.shape[0])

    @property
    def num_groups(self) -> int:
        return int(self.group_start.shape[0] - 1)

    def index(self, name: str) -> int:
        """The collision link ``name``'s index (:class:`UnknownLinkError` listing them)."""
        try:
            return self.link_names.index(name)
        except ValueError:
            raise UnknownLinkError(name, self.link_names, "collision link") from None

    def spheres_of(self, c: int) -> slice:
        """The spheres of collision link ``c`` (an index into :attr:`link_names`)."""
        idx = np.nonzero(self.sphere_link == c)[0]
        return slice(int(idx[0]), int(idx[-1]) + 1) if idx.size else slice(0, 0)

    def _kept(self, key, build):
        hit = self.__dict__.get(key)
        if hit is None:
            hit = build()
            for a in hit if isinstance(hit, tuple) else (hit,):
                if isinstance(a, np.ndarray):
                    a.setflags(write=False)
            self.__dict__[key] = hit
        return hit

    def link_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per collision link, a sphere around all its spheres: centres (C, 3) in the frame the
        spheres are given in, and radii (C,) (0 for a link without spheres)."""
        return self._kept("_link_bounds", lambda: _bounds(
            self.center, self.radius, [self.spheres_of(c) for c in range(len(self.link_names))]))

    def groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group: its collision link (G,), a sphere around its spheres: centre (G, 3) and
        radius (G,)."""
        def build():
            gs = self.group_start
            sl = [slice(int(gs[g]), int(gs[g + 1])) for g in range(len(gs) - 1)]
            c, r = _bounds(self.center, self.radius, sl)
            link = self.sphere_link[gs[:-1]] if len(sl) else np.zeros(0, np.int64)
            return np.asarray(link, dtype=np.int64), c, r
        return self._kept("_groups", build)

    def sphere_pairs(self) -> np.ndarray:
        """(N, 2) sphere index pairs of the checked link pairs (kept, read-only): every pair the
        exact check looks at."""
        def build():
            out = []
            for a, b in self.pairs:
                sa, sb = self.spheres_of(int(a)), self.spheres_of(int(b))
                ia, ib = np.meshgrid(np.arange(sa.start, sa.stop), np.arange(sb.start, sb.stop),
                                     indexing="ij")
                out.append(np.stack([ia.ravel(), ib.ravel()], axis=1))
            return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), np.int64)
        return self._kept("_sphere_pairs", build)

    def check_complete(self) -> None:
        """Raise :class:`CollisionGeometryError` when links with declared geometry have no
        spheres (and the model was not built with ``accept_missing=True``): a collision-aware
        answer on it could collide with what is not modelled."""
        if self.missing and not self.accept_missing:
            raise CollisionGeometryError(missing_message(self.missing))

    # ------------------------------------------------------------------ writing
    def own_frame_spheres(self) -> dict:
        """``{link: (k, 4) [x, y, z, r]}`` in each collision link's own frame (robot links
        only; attached objects left out)."""
        out = {}
        names = {a[0] for a in self.attached}
        for c, name in enumerate(self.link_names):
            if name in names:
                continue
            sl = self.spheres_of(c)
            inv = np.linalg.inv(self.offset[c])
            cen = self.center[sl] @ inv[:3, :3].T + inv[:3, 3]
            out[name] = np.concatenate([cen, self.radius[sl, None]], axis=1)
        return out

    def to_yaml(self) -> str:
        """The spheres as a YAML document :func:`spheres_from_yaml` reads (each link in its own
        frame; edit it to tune a link's spheres, then pass it as ``spheres``)."""
        lines = [f"# ros2_ik collision spheres of {self.model_name!r}: per link, [x, y, z, "
                 "radius] in the link's frame (m)", "spheres:"]
        for name, rows in self.own_frame_spheres().items():
            lines.append(f"  {name}:")
            for x, y, z, r in rows:
                lines.append(f"    - [{x:.6f}, {y:.6f}, {z:.6f}, {r:.6f}]")
        return "\n".join(lines) + "\n"

    def to_srdf(self) -> str:
        """The spheres as SRDF ``<link_sphere_approximation>`` elements (srdfdom's form), to
        put into the robot's SRDF so that tuned spheres travel with it."""
        from .srdf import sphere_elements  # noqa: PLC0415

        return sphere_elements(self.own_frame_spheres())

    # ------------------------------------------------------------------ changes
    def with_disabled(self, pairs, reason: str = "User") -> "CollisionModel":
        """This model with the link ``pairs`` ((name, name), ...) no longer checked (names the
        model lacks are refused)."""
        index = {n: c for c, n in enumerate(self.link_names)}
        drop = set()
        disabled = list(self.disabled)
        for a, b in pairs:
            for n in (a, b):
                if n not in index:
                    raise UnknownLinkError(n, self.link_names, "collision link")
            if a == b:
                continue
            key = tuple(sorted((index[a], index[b])))
            if key not in drop:
                drop.add(key)
                disabled.append((a, b, reason))
        keep = [p for p in self.pairs.tolist() if tuple(p) not in drop]
        return self._replace(pairs=np.asarray(keep, dtype=np.int64).reshape(-1, 2),
                             disabled=tuple(disabled))

    def with_padding(self, padding=0.0, scale=None) -> "CollisionModel":
        """Each link's spheres grown by ``padding`` [m] (a number for every link, or
        ``{link: m}``) after their radii are multiplied by ``scale`` (``{link: factor}``):
        MoveIt's link padding and scale, on the spheres."""
        pad = np.zeros(len(self.link_names))
        fac = np.ones(len(self.link_names))
        for values, out, what in ((padding, pad, "padding"), (scale or {}, fac, "scale")):
            if isinstance(values, dict):
                for name, v in values.items():
                    out[self.index(name)] = _number(v, f"{what} of link {name!r}")
            else:
                out[:] = _number(values, what)
        if np.any(pad < 0) or np.any(pad > 1.0) or np.any(fac <= 0) or np.any(fac > 100):
            raise InvalidInputError("link padding must be in [0, 1] m and scale in (0, 100]")
        if not np.any(pad) and np.all(fac == 1):
            return self
        r = self.radius * fac[self.sphere_link] + pad[self.sphere_link]
        return self._replace(radius=r)

    def with_attached(self, name: str, link: str, *, shapes=None, spheres=None,
                      touch_links=(), model: Model | None = None) -> "CollisionModel":
        """This model with an object attached to ``link`` (MoveIt's attached collision object):
        its geometry (``shapes``: :class:`~ros2_ik.model.spheres.Shape` in the link's frame,
        fitted as a link's; or ``spheres`` (k, 4) in the link's frame) moves with the link and is
        checked against the world and against every other link but ``link`` and
        ``touch_links``. ``link`` is a collision link, or (with ``model``) any link of the
        model. Attaching a name already attached replaces it."""
        if not isinstance(name, str) or not name:
            raise InvalidInputError("an attached object needs a non-empty name")
        base = self.without_attached(name)
        if name in base.link_names:
            raise InvalidInputError(f"attached object {name!r} has the name of a link; give "
                                    "another id")
        if link in base.link_names:
            c_link = base.index(link)
            T, anchor, static = base.offset[c_link], base.links[c_link], base.static[c_link]
        elif model is not None:
            anchor = model.link_index(link)  # UnknownLinkError naming the model's links
            T = np.eye(4)
            k, static = anchor, True
            while k > 0:
                static = static and model.joint_type[k] == JointType.FIXED
                k = int(model.link_parent[k])
        else:
            raise UnknownLinkError(link, base.link_names, "link to attach to (a link with "
                                   "geometry, or give the model)")
        if spheres is None:
            if not shapes:
                raise InvalidInputError(f"attached object {name!r} has no geometry")
            cen, rad = fit_link(list(shapes), self.overshoot)
        else:
            a = np.asarray(spheres, dtype=np.float64).reshape(-1, 4)
            cen, rad = a[:, :3], a[:, 3]
        if not len(rad) or not np.all(np.isfinite(cen)) or not np.all(rad > 0):
            raise InvalidInputError(f"attached object {name!r}: its geometry gives no spheres")
        cen = cen @ T[:3, :3].T + T[:3, 3]
        C = len(base.link_names)
        names = base.link_names + (name,)
        sphere_link = np.concatenate([base.sphere_link, np.full(len(rad), C)])
        pairs = [tuple(p) for p in base.pairs.tolist()]
        disabled = list(base.disabled)
        touch = set(touch_links) | {link}
        for c, other in enumerate(base.link_names):
            if other in touch:
                disabled.append((other, name, "touch link"))
            else:
                pairs.append((c, C))
        out = _make(base.model_name, names, np.append(base.links, anchor),
                    sphere_link, np.concatenate([base.center, cen]),
                    np.concatenate([base.radius, rad]), pairs, disabled, base.warnings,
                    np.append(base.static, static),
                    np.concatenate([base.offset, T[None]]), base.missing, base.notes,
                    base.overshoot, base.accept_missing,
                    base.attached + ((name, link, tuple(sorted(touch_links))),))
        return out

    def without_attached(self, name: str) -> "CollisionModel":
        """This model without attached object ``name`` (itself when it has none)."""
        if name not in {a[0] for a in self.attached}:
            return self
        c = self.index(name)
        keep_s = self.sphere_link != c
        remap = np.arange(len(self.link_names))
        remap[c + 1:] -= 1
        pairs = [(remap[a], remap[b]) for a, b in self.pairs.tolist() if c not in (a, b)]
        names = self.link_names[:c] + self.link_names[c + 1:]
        return _make(self.model_name, names, np.delete(self.links, c),
                     remap[self.sphere_link[keep_s]], self.center[keep_s],
                     self.radius[keep_s], pairs,
                     [d for d in self.disabled if name not in d[:2]], self.warnings,
                     np.delete(self.static, c), np.delete(self.offset, c, axis=0),
                     self.missing, self.notes, self.overshoot, self.accept_missing,
                     tuple(a for a in self.attached if a[0] != name))

    def _replace(self, **changes) -> "CollisionModel":
        out = replace(self, **changes)
        for f in fields(out):
            a = getattr(out, f.name)
            if isinstance(a, np.ndarray):
                a.setflags(write=False)
        return out


def missing_message(missing) -> str:
    """The words of a collision model's :attr:`~CollisionModel.missing` links: what is wrong,
    which links and what to do first (a diagnostics value cut short keeps them), then each
    link's reason (where the meshes were looked for said once)."""
    import re  # noqa: PLC0415

    links = ", ".join(link for link, _ in missing[:20]) + (
        f" and {len(missing) - 20} more" if len(missing) > 20 else "")
    whys = [why for _, why in missing[:8]]
    looked = {m.group(0) for why in whys for m in [re.search(r" \(looked in .*\)$", why)] if m}
    tail = ""
    if len(looked) == 1:
        tail = looked.pop()
        whys = [why.removesuffix(tail) for why in whys]
    shown = "; ".join(f"link {link!r}: {why}" for (link, _), why in zip(missing[:8], whys))
    more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
    return (f"{len(missing)} link(s) with collision geometry have no spheres ({links}), so "
            "collision avoidance cannot keep its promise. Give the directory that holds the "
            "meshes (search_path= in the library, the node's collision.mesh_path parameter, "
            "--mesh-path on the command line, or $ROS2_IK_MESH_PATH), or the links' spheres in "
            f"the SRDF (<link_sphere_approximation>) or a spheres YAML file. {shown}{more}{tail}")


def _number(v, what: str) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what} must be a number, got {v!r}") from None
    if not np.isfinite(f):
        raise InvalidInputError(f"{what} must be finite, got {v!r}")
    return f


def _bounds(center, radius, slices):
    """A sphere around each slice's spheres: centres (n, 3), radii (n,)."""
    c, r = np.zeros((len(slices), 3)), np.zeros(len(slices))
    for k, sl in enumerate(slices):
        cen, rad = center[sl], radius[sl]
        if not len(rad):
            continue
        mid = 0.5 * (cen.min(axis=0) + cen.max(axis=0))
        c[k] = mid
        r[k] = float(np.max(np.linalg.norm(cen - mid, axis=1) + rad))
    return c, r


def _split(cen: np.ndarray, idx: np.ndarray) -> list:
    """Sphere indices ``idx`` in groups of at most :data:`GROUP`: halved at the median along
    the principal axis of their centres, recursively (deterministic)."""
    if len(idx) <= GROUP:
        return [idx]
    P = cen[idx] - cen[idx].mean(axis=0)
    _, _, vt = np.linalg.svd(P, full_matrices=False)
    t = P @ vt[0]
    order = idx[np.argsort(t, kind="stable")]
    half = len(order) // 2
    return _split(cen, order[:half]) + _split(cen, order[half:])


def _make(name, link_names, links, sphere_link, center, radius, pairs, disabled, warnings,
          static, offset, missing=(), notes=(), overshoot=OVERSHOOT, accept_missing=False,
          attached=()):
    """A CollisionModel with its spheres ordered link by link and grouped."""
    sphere_link = np.asarray(sphere_link, dtype=np.int64).reshape(-1)
    center = np.asarray(center, dtype=np.float64).reshape(-1, 3)
    radius = np.asarray(radius, dtype=np.float64).reshape(-1)
    order, starts = [], [0]
    for c in range(len(link_names)):
        idx = np.nonzero(sphere_link == c)[0]
        if not idx.size:
            continue
        idx = idx[np.lexsort((radius[idx], center[idx, 2], center[idx, 1], center[idx, 0]))]
        for g in _split(center, idx):
            order.extend(g.tolist())
            starts.append(len(order))
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    if n > MAX_SPHERES:
        raise InvalidInputError(f"the collision model of {name!r} has {n} spheres, more than "
                                f"{MAX_SPHERES}; give a larger overshoot bound or fewer spheres "
                                "in the SRDF or a spheres YAML file")
    cm = CollisionModel(
        model_name=name, link_names=tuple(link_names),
        links=np.asarray(links, dtype=np.int64).reshape(-1),
        sphere_link=sphere_link[order], center=center[order], radius=radius[order],
        pairs=np.asarray(sorted({(min(a, b), max(a, b)) for a, b in pairs}),
                         dtype=np.int64).reshape(-1, 2),
        disabled=tuple(disabled), warnings=tuple(warnings),
        static=np.asarray(static, dtype=bool).reshape(-1),
        group_start=np.asarray(starts, dtype=np.int64),
        offset=np.asarray(offset, dtype=np.float64).reshape(-1, 4, 4),
        missing=tuple(missing), notes=tuple(notes), overshoot=float(overshoot),
        accept_missing=bool(accept_missing), attached=tuple(attached))
    for f in fields(cm):
        a = getattr(cm, f.name)
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return cm


# ---------------------------------------------------------------------- YAML

def spheres_from_yaml(text: str, model: Model) -> dict:
    """``{link name: (k, 4) array [x, y, z, r]}`` of a YAML document (:meth:`to_yaml`'s form);
    an unknown link, a radius that is not positive and finite, or a centre that is not finite
    is an :class:`InvalidInputError` naming it."""
    import yaml  # noqa: PLC0415

    if not isinstance(text, str):
        raise InputTypeError(f"spheres must be YAML text, got {type(text).__name__}")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"the spheres YAML cannot be read: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("spheres"), dict):
        raise InvalidInputError("the spheres YAML needs a mapping 'spheres: {link: [[x, y, z, "
                                "r], ...]}'")
    return _check_spheres(doc["spheres"], model)


def _check_spheres(spheres: dict, model: Model) -> dict:
    out = {}
    links = set(model.desc.links)
    for link, rows in spheres.items():
        if link not in links:
            raise UnknownLinkError(str(link), model.desc.links, "link (in the spheres)")
        try:
            a = np.asarray(rows if len(rows) else np.zeros((0, 4)),
                           dtype=np.float64).reshape(-1, 4)
        except (TypeError, ValueError):
            raise InvalidInputError(f"spheres of link {link!r} must be a list of [x, y, z, r], "
                                    f"got {rows!r}") from None
        if not np.all(np.isfinite(a)):
            raise InvalidInputError(f"a sphere of link {link!r} has a value that is not finite")
        if np.any(a[:, 3] <= 0) or np.any(np.abs(a) > 1e3):
            raise InvalidInputError(f"a sphere of link {link!r} has a radius that is not "
                                    "positive, or a value beyond 1 km: give radius > 0 (m)")
        out[str(link)] = a
    return out


# ---------------------------------------------------------------------- the model

def collision_model(model: Model, *, srdf=None, spheres=None, search_path=(), disabled=(),
                    overshoot: float = OVERSHOOT, held=None,
                    accept_missing: bool = False) -> CollisionModel:
    """The collision model of ``model`` from its URDF geometry (see the module docstring).

    Args:
        srdf: an :class:`ros2_ik.model.Srdf` (or its text): its ``<disable_collisions>`` pairs
            are not checked, its ``<link_sphere_approximation>`` spheres are used.
        spheres: the spheres of some links, replacing the fitted ones (and the SRDF's): YAML
            text (:func:`spheres_from_yaml`) or ``{link: [[x, y, z, r], ...]}`` (link frame).
        search_path: directories where meshes are looked for (and ``$ROS2_IK_MESH_PATH``'s;
            :func:`ros2_ik.model.meshes.resolve_mesh`).
        disabled: more ``(link, link)`` pairs not to check.
        overshoot: [m] how far the fitted spheres may reach past the geometry.
        held: ``{joint: value}`` for joints outside the model (side branches), instead of the
            sweep or the value 0 clamped into the limits.
        accept_missing: solve with collision avoidance even if some links' declared geometry
            could not be used (they are then not checked; see :meth:`~CollisionModel.
            check_complete`).
    The default (no arguments; a bundled robot's SRDF, :func:`ros2_ik.model.load_robot`) is
    kept with the model."""
    check_model(model)
    if isinstance(overshoot, bool) or not (isinstance(overshoot, (int, float))
                                           and 0.0015 < overshoot <= 0.5):
        raise InvalidInputError(f"overshoot must be in (0.0015, 0.5] m, got "
                                f"{describe(overshoot)}")
    search_path, disabled, held = _check_args(search_path, disabled, held)
    args = (srdf, spheres, tuple(_search_path(search_path)), disabled, float(overshoot),
            held, check_flag(accept_missing, "accept_missing"))
    if srdf is None and spheres is None and not search_path and not disabled and \
            overshoot == OVERSHOOT and held is None and not accept_missing:
        bundled = model.memo_peek("model.srdf", "bundled")
        return model.memo("model.collision", ("default",) + args[2:],
                          lambda: _build(model, bundled, *args[1:]))
    return _build(model, *args)


def _check_args(search_path, disabled, held):
    """:func:`collision_model`'s ``search_path`` (a path, a ':'-separated string or a list of
    them), ``disabled`` (pairs of link names) and ``held`` (None or ``{joint: value}``), the
    last two as tuples."""
    if not isinstance(search_path, (str, os.PathLike)):
        if not isinstance(search_path, (list, tuple)) or not all(
                isinstance(d, (str, os.PathLike)) for d in search_path):
            raise InputTypeError(f"search_path must be a directory, a ':'-separated string of "
                                 f"them or a list of them, got {describe(search_path)}")
    if isinstance(disabled, (str, bytes)) or not isinstance(disabled, Iterable):
        raise InputTypeError(f"disabled must be a list of (link, link) pairs, got "
                             f"{describe(disabled)}")
    disabled = tuple(tuple(p) if isinstance(p, (list, tuple)) else p for p in disabled)
    for p in disabled:
        if not (isinstance(p, tuple) and len(p) == 2 and all(isinstance(n, str) for n in p)):
            raise InputTypeError(f"disabled must hold (link, link) pairs of link names, got "
                                 f"an element {describe(p)}")
    if held is not None:
        if not isinstance(held, dict) or not all(isinstance(j, str) for j in held):
            raise InputTypeError(f"held must be a dict {{joint name: value [m or rad]}} or None, "
                                 f"got {describe(held)}")
        held = tuple(sorted(held.items()))
    return search_path, disabled, held


def full_tree(model: Model) -> Model:
    """The whole robot of ``model``'s URDF (every link, nothing frozen), kept with it."""
    desc = model.desc
    if model.base == desc.root and model.num_links == len(desc.links):
        return model
    return model.memo("model.collision.full", "", lambda: Model._build(
        desc, base=desc.root, tips=None, frozen=()))


def _tip_bodies(model: Model) -> set:
    """Names of the model links rigidly attached to a tip (from the tip up to and including the
    link of the last moving joint above it): a side branch hanging off them is the tool's."""
    out = set()
    for tip in model.tips:
        l = model.link_index(tip)
        while True:
            out.add(model.link_names[l])
            if l == 0 or model.joint_type[l] != JointType.FIXED:
                break
            l = int(model.link_parent[l])
    return out


def _joint_motion(full: Model, k: int, q: np.ndarray) -> np.ndarray:
    """The motion (4, 4) of the joint into link ``k`` of ``full`` at ``q`` (1-DOF joints and
    mimics; a planar or floating joint at its zero)."""
    t = int(full.joint_type[k])
    if full.mimic_q[k] >= 0:
        v = float(q[full.mimic_q[k]]) * float(full.mimic_multiplier[k]) + float(
            full.mimic_offset[k])
    elif full.q_start[k] >= 0 and t in (JointType.REVOLUTE, JointType.CONTINUOUS,
                                        JointType.PRISMATIC):
        v = float(q[full.q_start[k]])
    else:
        return np.eye(4)
    M = np.eye(4)
    ax = np.asarray(full.axis[k], dtype=np.float64)
    if t == JointType.PRISMATIC:
        M[:3, 3] = ax * v
        return M
    K = np.array([[0, -ax[2], ax[1]], [ax[2], 0, -ax[0]], [-ax[1], ax[0], 0]])
    M[:3, :3] = np.eye(3) + np.sin(v) * K + (1 - np.cos(v)) * (K @ K)
    return M


def _pose_in_root(full: Model, l: int, q: np.ndarray) -> np.ndarray:
    """T root <- link ``l`` of the whole robot at ``q``."""
    path = []
    while l > 0:
        path.append(l)
        l = int(full.link_parent[l])
    T = np.eye(4)
    for k in reversed(path):
        T = T @ full.origin[k] @ _joint_motion(full, k, q)
    return T


def sphere_placements(model: Model, full: Model, link: str, held: dict, notes: list):
    """(anchor model link index, [T anchor <- link, ...]) for a URDF link: one transform for a
    link of the model (the identity) or a held side branch, several for a swept one."""
    if link in model.link_names:
        return model.link_index(link), [np.eye(4)]
    li = full.link_index(link)
    in_model = set(model.link_names)
    chain = [li]
    while chain[-1] > 0 and full.link_names[chain[-1]] not in in_model:
        chain.append(int(full.link_parent[chain[-1]]))
    top = full.link_names[chain[-1]]
    below = top in in_model
    anchor = model.link_index(top) if below else 0
    # the joints of the whole robot held at a value: 0 clamped, or the caller's
    q = np.clip(np.zeros(full.nq), full.lower, full.upper)
    for j, v in held.items():
        q[full.q_start[full.joint_index(j)]] = v
    sweep = []
    if below and top in _tip_bodies(model):  # a tool's side branch: its free joints swept
        for k in chain[:-1]:
            qi = int(full.mimic_q[k]) if full.mimic_q[k] >= 0 else int(full.q_start[k])
            if qi < 0 or int(full.joint_type[k]) in (JointType.PLANAR, JointType.FLOATING):
                continue
            jname = full.joint_names[int(full.q_joint[qi])]
            lo, hi = float(full.lower[qi]), float(full.upper[qi])
            if jname in held or qi in [s[0] for s in sweep]:
                continue
            if np.isfinite(lo) and np.isfinite(hi) and hi > lo:
                sweep.append((qi, jname, lo, hi))
    per = SWEEP_SAMPLES if len(sweep) <= 2 else 3
    grids = [np.linspace(lo, hi, per) for _, _, lo, hi in sweep]
    combos = (np.stack(np.meshgrid(*grids, indexing="ij"), -1).reshape(-1, len(sweep))
              if sweep else np.zeros((1, 0)))
    base_i = full.link_index(model.link_names[anchor])
    Ts = []
    for row in combos:
        qs = q.copy()
        for k, (qi, _, _, _) in enumerate(sweep):
            qs[qi] = row[k]
        Ts.append(np.linalg.inv(_pose_in_root(full, base_i, qs)) @ _pose_in_root(full, li, qs))
    swept = {s[1] for s in sweep}
    held_here = [full.joint_names[k] for k in chain[:-1] if full.q_start[k] >= 0
                 and full.joint_names[k] not in swept]
    if sweep:
        notes.append(f"link {link!r} (outside the solved model, on {top!r}): covered over the "
                     f"whole range of joints {sorted(swept)}")
    if held_here or not below:
        vals = {j: float(q[full.q_start[full.joint_index(j)]]) for j in held_here}
        notes.append(f"link {link!r} (outside the solved model): "
                     + (f"joints held at {vals}" if vals else "rigid with the base"))
    return anchor, Ts


def _build(model: Model, srdf, spheres, search_path, extra_disabled, overshoot, held,
           accept_missing) -> CollisionModel:
    from .srdf import Srdf, parse_srdf  # noqa: PLC0415

    notes: list[str] = []
    warns: list[str] = []

    def warn(text, keep=True):
        # keep=False: said as a Python warning only (a missing mesh is in ``missing``, which
        # the node reports as an error, not also as a warning)
        if keep:
            warns.append(text)
        _warnings.warn(text, CollisionWarning, stacklevel=5)

    if isinstance(spheres, str):
        given = spheres_from_yaml(spheres, model)
    elif spheres is None:
        given = {}
    elif isinstance(spheres, dict):
        given = _check_spheres(spheres, model)
    else:
        raise InputTypeError(f"spheres must be YAML text or a dict, got {type(spheres).__name__}")
    if isinstance(srdf, str):
        srdf = parse_srdf(srdf)
    elif srdf is not None and not isinstance(srdf, Srdf):
        raise InputTypeError(f"srdf must be SRDF text or a parsed Srdf, got "
                             f"{type(srdf).__name__}")
    if srdf is not None:
        for link, rows in srdf.link_spheres.items():
            if link in model.desc.links and link not in given:
                given[link] = rows
    full = full_tree(model)
    held = dict(held or ())
    for j, v in held.items():
        try:
            full.joint_index(j)  # UnknownJointError naming the joints
        except UnknownJointError as exc:
            raise naming(exc, "held") from None
        if full.q_start[full.joint_index(j)] < 0:
            raise InvalidInputError(f"held joint {j!r} has no coordinate (fixed or mimic)")
        _number(v, f"held value of joint {j!r}")

    elements: dict[str, list] = {}
    for d in getattr(model.desc, "collisions", ()):
        elements.setdefault(d.link, []).append(d)
    visuals: dict[str, list] = {}
    for d in getattr(model.desc, "visuals", ()):
        visuals.setdefault(d.link, []).append(d)
    candidates = [n for n in full.link_names if n in elements or n in given]
    missing: list = []
    names, links, offsets, centers, radii, sphere_link = [], [], [], [], [], []
    for link in candidates:
        anchor, Ts = sphere_placements(model, full, link, held, notes)
        if link in given:
            rows = given[link]
            cen = np.concatenate([rows[:, :3] @ T[:3, :3].T + T[:3, 3] for T in Ts])
            rad = np.concatenate([rows[:, 3]] * len(Ts))
            if len(Ts) > 1:  # the given spheres at every sampled value: keep the distinct
                key = np.round(np.concatenate([cen, rad[:, None]], axis=1), 9)
                _, first = np.unique(key, axis=0, return_index=True)
                first = np.sort(first)
                cen, rad = cen[first], rad[first]
        else:
            shapes, problems = [], []
            for d in elements[link]:
                shape, why = element_shape(d, search_path)
                if shape is None:
                    problems.append(why)
                else:
                    shapes.append(shape)
            if problems:
                vshapes = []
                for d in visuals.get(link, ()):
                    shape, _ = element_shape(d, search_path)
                    if shape is not None:
                        vshapes.append(shape)
                if vshapes and not shapes:
                    shapes = vshapes
                    warn(f"link {link!r}: {'; '.join(problems)}; its <visual> geometry is used "
                         "instead (the spheres cover the visual mesh)")
                else:
                    missing.append((link, "; ".join(problems)))
                    warn(f"link {link!r}: {'; '.join(problems)}; the link has no spheres from "
                         "it: give the meshes' directory in the search path "
                         "(collision.mesh_path on the node) or its spheres in the SRDF",
                         keep=False)
                    if not shapes:
                        continue
            placed = [Shape(s.vertices @ T[:3, :3].T + T[:3, 3], s.faces,
                            None if s.primitive is None else
                            (s.primitive[0], T @ s.primitive[1], s.primitive[2]))
                      for T in Ts for s in shapes]
            cen, rad = fit_link(placed, overshoot)
        if not len(rad):
            continue
        c = len(names)
        names.append(link)
        links.append(anchor)
        offsets.append(Ts[len(Ts) // 2] if len(Ts) > 1 else Ts[0])
        centers.append(cen)
        radii.append(rad)
        sphere_link += [c] * len(rad)
    center = np.concatenate(centers) if centers else np.zeros((0, 3))
    radius = np.concatenate(radii) if radii else np.zeros(0)

    # pairs: all, less adjacent / rigidly attached, the SRDF's and the caller's
    dis = {}
    for a, b in _structural_pairs(model, full, names, links):
        dis[(a, b)] = "Adjacent"
    index = {n: c for c, n in enumerate(names)}
    user = list(srdf.disabled_collisions if srdf is not None else ())
    user += [(a, b, "User") for a, b in extra_disabled]
    for a, b, why in user:
        if a in index and b in index and a != b:
            dis.setdefault(tuple(sorted((index[a], index[b]))), why or "User")
    pairs = [(a, b) for a in range(len(names)) for b in range(a + 1, len(names))
             if (a, b) not in dis]
    named = tuple((names[a], names[b], why) for (a, b), why in sorted(dis.items()))
    movable = model.joint_type != JointType.FIXED
    static = []
    for l in links:
        k, moved = l, False
        while k > 0:
            moved = moved or bool(movable[k])
            k = int(model.link_parent[k])
        static.append(not moved)
    return _make(model.name, names, links, sphere_link, center, radius, pairs, named, warns,
                 static, offsets if offsets else np.zeros((0, 4, 4)), missing, notes,
                 overshoot, accept_missing)


def _structural_pairs(model: Model, full: Model, names, anchors):
    """(a, b) over collision links: each link and the nearest link with geometry above it in
    the URDF ("Adjacent"), and links with no solved joint between them (the same rigid body
    in the solve)."""
    index = {n: c for c, n in enumerate(names)}
    out = set()
    for c, n in enumerate(names):
        l = full.link_index(n)
        while l > 0:
            l = int(full.link_parent[l])
            up = full.link_names[l]
            if up in index:
                out.add((min(c, index[up]), max(c, index[up])))
                break
    movable = model.joint_type != JointType.FIXED
    body: dict[int, list] = {}
    for c, a in enumerate(anchors):
        k = int(a)
        while k > 0 and not movable[k]:
            k = int(model.link_parent[k])
        body.setdefault(k, []).append(c)
    for members in body.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                out.add((min(a, b), max(a, b)))
    return sorted(out)
