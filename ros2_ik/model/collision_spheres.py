"""The collision model's type (:class:`CollisionModel`: spheres on links, their groups, the
pairs checked; its scene variants) and its plain helpers; :mod:`ros2_ik.model.collision` builds
it from a URDF (and documents it) and re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import IKError, InputTypeError, InvalidInputError, UnknownLinkError
from .joint_types import JointType
from .spheres import OVERSHOOT, fit_link
from .tree import Model
from .urdf import UrdfWarning

__all__ = ["CollisionModel", "spheres_from_yaml", "missing_message", "MAX_SPHERES", "GROUP",
           "SWEEP_SAMPLES", "MAX_PLACEMENTS", "MAX_PLACED_VERTICES", "CollisionWarning",
           "CollisionGeometryError", "make_collision_model", "link_bounds_of", "number",
           "check_spheres"]

#: spheres a robot's collision model may hold
MAX_SPHERES = 16384
#: spheres per group at most (the middle level of the solvers' link / group / sphere tests)
GROUP = 16
#: values each swept joint of a side branch is sampled at (its limits and between)
SWEEP_SAMPLES = 5
#: placements of one swept link at most (a hand's many joints: the lowest, middle and highest
#: values of all, and a seeded sample of the other combinations)
MAX_PLACEMENTS = 256
#: vertices of one link's placed geometry at most (placements x the link's vertices): past it,
#: fewer placements, and a link that cannot be placed once within it is missing geometry
MAX_PLACED_VERTICES = 4_000_000


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
    model assumed (swept or held joints); ``warnings``: what the log must show.
    ``allowances`` ``((link, link, metres), ...)``: checked pairs whose spheres may come that
    much nearer than the margin (a pair whose spheres are within the margin in nearly every
    configuration, though its meshes are not: checked for contact instead of left out; see
    :func:`ros2_ik.ik.collision.default_collision_model`). Every check, bound and penalty row
    of such a pair takes its distance plus its allowance, and its penalty has no activation
    band (pushed only below the margin)."""

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
    allowances: tuple = ()  # ((link, link, metres), ...)

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
        return self._kept("_link_bounds", lambda: link_bounds_of(
            self.center, self.radius, [self.spheres_of(c) for c in range(len(self.link_names))]))

    def groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group: its collision link (G,), a sphere around its spheres: centre (G, 3) and
        radius (G,)."""
        def build():
            gs = self.group_start
            sl = [slice(int(gs[g]), int(gs[g + 1])) for g in range(len(gs) - 1)]
            c, r = link_bounds_of(self.center, self.radius, sl)
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

    def pair_allowances(self) -> np.ndarray:
        """(Pp,) each checked pair's allowance [m] (:attr:`allowances`; 0 for most; kept,
        read-only)."""
        def build():
            out = np.zeros(len(self.pairs))
            if self.allowances:
                given = {}
                for a, b, m in self.allowances:
                    if a in self.link_names and b in self.link_names:
                        ia, ib = self.link_names.index(a), self.link_names.index(b)
                        given[(min(ia, ib), max(ia, ib))] = float(m)
                for k, (a, b) in enumerate(self.pairs.tolist()):
                    out[k] = given.get((a, b), 0.0)
            return out
        return self._kept("_pair_allowances", build)

    def sphere_pair_allowances(self) -> np.ndarray:
        """(N,) the allowance of each of :meth:`sphere_pairs` (its link pair's; kept)."""
        def build():
            counts = [(sa.stop - sa.start) * (sb.stop - sb.start) for sa, sb in
                      ((self.spheres_of(int(a)), self.spheres_of(int(b))) for a, b in self.pairs)]
            return np.repeat(self.pair_allowances(), np.asarray(counts, dtype=np.int64)) \
                if counts else np.zeros(0)
        return self._kept("_sphere_pair_allowances", build)

    def allowance_of(self, a: int, b: int) -> float:
        """The allowance [m] of the pair of collision links ``a`` and ``b`` (indices)."""
        if not self.allowances:
            return 0.0
        given = self._kept("_allowance_map", lambda: {
            tuple(p): float(m) for p, m in zip(self.pairs.tolist(), self.pair_allowances())})
        return given.get((min(a, b), max(a, b)), 0.0)

    def with_allowances(self, allowances) -> "CollisionModel":
        """This model with the pairs ``((link, link, metres), ...)`` given that allowance (see
        :attr:`allowances`; names the model lacks are refused, an allowance must be in
        [0, 1] m)."""
        out = {tuple(sorted((a, b))): m for a, b, m in self.allowances}
        for a, b, m in allowances:
            for n in (a, b):
                if n not in self.link_names:
                    raise UnknownLinkError(n, self.link_names, "collision link")
            m = number(m, f"the allowance of pair {a!r}-{b!r}")
            if not 0.0 <= m <= 1.0:
                raise InvalidInputError(f"the allowance of pair {a!r}-{b!r} must be in "
                                        f"[0, 1] m, got {m}")
            out[tuple(sorted((a, b)))] = m
        return self._replace(allowances=tuple((a, b, m) for (a, b), m in sorted(out.items())
                                              if m > 0.0))

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
                    out[self.index(name)] = number(v, f"{what} of link {name!r}")
            else:
                out[:] = number(values, what)
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
        out = make_collision_model(base.model_name, names, np.append(base.links, anchor),
                    sphere_link, np.concatenate([base.center, cen]),
                    np.concatenate([base.radius, rad]), pairs, disabled, base.warnings,
                    np.append(base.static, static),
                    np.concatenate([base.offset, T[None]]), base.missing, base.notes,
                    base.overshoot, base.accept_missing,
                    base.attached + ((name, link, tuple(sorted(touch_links))),),
                    base.allowances)
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
        return make_collision_model(self.model_name, names, np.delete(self.links, c),
                     remap[self.sphere_link[keep_s]], self.center[keep_s],
                     self.radius[keep_s], pairs,
                     [d for d in self.disabled if name not in d[:2]], self.warnings,
                     np.delete(self.static, c), np.delete(self.offset, c, axis=0),
                     self.missing, self.notes, self.overshoot, self.accept_missing,
                     tuple(a for a in self.attached if a[0] != name),
                     tuple(x for x in self.allowances if name not in x[:2]))

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


def number(v, what: str) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{what} must be a number, got {v!r}") from None
    if not np.isfinite(f):
        raise InvalidInputError(f"{what} must be finite, got {v!r}")
    return f


def link_bounds_of(center, radius, slices):
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


def make_collision_model(name, link_names, links, sphere_link, center, radius, pairs, disabled,
                         warnings, static, offset, missing=(), notes=(), overshoot=OVERSHOOT,
                         accept_missing=False, attached=(), allowances=()):
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
        accept_missing=bool(accept_missing), attached=tuple(attached),
        allowances=tuple(allowances))
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
    return check_spheres(doc["spheres"], model)


def check_spheres(spheres: dict, model: Model) -> dict:
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
