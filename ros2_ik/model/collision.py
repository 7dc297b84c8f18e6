"""The robot's collision model: spheres on its links, and the pairs of links checked against
each other.

The solvers evaluate a signed distance per sphere at every iteration (against the world's
primitives and the other links' spheres), which costs a few instructions per pair and keeps in
registers on a GPU: cuRobo's choice. The spheres are fitted here to each link's URDF
``<collision>`` geometry (boxes, cylinders, spheres, capsules, meshes) so that they *cover* it:
a configuration clear on the spheres is clear on the geometry. A YAML file (:meth:`to_yaml`,
:func:`spheres_from_yaml`) gives them by hand, link by link.

Fitting (:func:`fit_spheres`): points on the geometry's surface (its vertices and an even
sample of its faces, :mod:`trimesh`), split along their principal axis into as many segments as
the geometry is long over thick (at most :data:`MAX_SPHERES_PER_SHAPE`); per segment, the sphere
around the points' bounding box, grown by the sample spacing. A sphere stays one sphere.

World checks: every link that some joint moves; a link rigidly attached to the base
(:attr:`CollisionModel.static`: no moving joint between it and the base, e.g. the base link on
its mounting table) is not checked against the world, as no configuration can move it clear.

Self-collision pairs (:attr:`CollisionModel.pairs`): every pair of links with spheres, less

- adjacent links (a link and the nearest link with spheres above it in the tree), and links
  rigidly attached to each other (no moving joint between them): "Adjacent";
- the SRDF's ``<disable_collisions>`` entries (MoveIt's setup assistant writes them);
- pairs given as never colliding (:func:`ros2_ik.ik.collision.sample_disabled_pairs` samples
  them, as the setup assistant does, and writes SRDF entries).

Meshes: ``package://pkg/path`` is looked up in the ament index (when ``ament_index_python`` is
importable) and under each directory of ``search_path`` (``dir/pkg/path`` and ``dir/path``);
``file://`` and plain paths as given, or under ``search_path``. A mesh that cannot be found or
read is a warning naming the link and the file (:attr:`CollisionModel.warnings`), never a refused
robot: that link gets no spheres from it.
"""

from __future__ import annotations

import math
import os
import warnings as _warnings
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ..errors import InputTypeError, InvalidInputError, UnknownLinkError
from .joint_types import JointType
from .tree import Model, _rpy_xyz_to_matrix
from .urdf import CollisionDesc, UrdfWarning

__all__ = ["CollisionModel", "collision_model", "fit_spheres", "spheres_from_yaml",
           "MAX_SPHERES", "MAX_SPHERES_PER_SHAPE", "CollisionWarning", "resolve_mesh"]

#: spheres one collision shape gets at most (a long thin link)
MAX_SPHERES_PER_SHAPE = 8
#: spheres a robot's collision model may hold (each is evaluated at every solver iteration)
MAX_SPHERES = 1024
#: points sampled on a shape's surface for the fit
SURFACE_SAMPLES = 3000
#: largest mesh file read [bytes]
MAX_MESH_BYTES = 64 * 1024 * 1024


class CollisionWarning(UrdfWarning):
    """Collision geometry that could not be used (a missing or unreadable mesh); the robot
    loads without spheres from it."""


@dataclass(frozen=True, eq=False)
class CollisionModel:
    """Spheres on a model's links and the link pairs checked for self-collision; every array
    read-only.

    ``links`` (C,) model link indices that have spheres (ascending); sphere ``s`` lies on
    ``links[sphere_link[s]]`` at ``center[s]`` (its link's frame) with ``radius[s]``; spheres of
    one link are contiguous. ``pairs`` (Pp, 2) indices into ``links`` (a < b) of the pairs
    checked; ``disabled`` ``((link name, link name, reason), ...)`` those not checked."""

    model_name: str
    link_names: tuple
    links: np.ndarray
    sphere_link: np.ndarray
    center: np.ndarray
    radius: np.ndarray
    pairs: np.ndarray
    disabled: tuple = ()
    warnings: tuple = ()
    static: np.ndarray = None  # (C,) bool: rigidly attached to the base (no world check)

    @property
    def num_spheres(self) -> int:
        return int(self.radius.shape[0])

    def spheres_of(self, c: int) -> slice:
        """The spheres of collision link ``c`` (an index into :attr:`links`)."""
        idx = np.nonzero(self.sphere_link == c)[0]
        return slice(int(idx[0]), int(idx[-1]) + 1) if idx.size else slice(0, 0)

    def link_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per collision link, a sphere around all its spheres: centers (C, 3) in the link's
        frame and radii (C,)."""
        C = len(self.link_names)
        centers, radii = np.zeros((C, 3)), np.zeros(C)
        for c in range(C):
            sl = self.spheres_of(c)
            cen, rad = self.center[sl], self.radius[sl]
            mid = 0.5 * (cen.min(axis=0) + cen.max(axis=0))
            centers[c] = mid
            radii[c] = float(np.max(np.linalg.norm(cen - mid, axis=1) + rad))
        return centers, radii

    def sphere_pairs(self) -> np.ndarray:
        """(N, 2) sphere index pairs of the checked link pairs (kept, read-only)."""
        kept = self.__dict__.get("_sphere_pairs")
        if kept is None:
            kept = self.__dict__["_sphere_pairs"] = self._sphere_pairs()
            kept.setflags(write=False)
        return kept

    def _sphere_pairs(self) -> np.ndarray:
        out = []
        for a, b in self.pairs:
            sa, sb = self.spheres_of(int(a)), self.spheres_of(int(b))
            ia, ib = np.meshgrid(np.arange(sa.start, sa.stop), np.arange(sb.start, sb.stop),
                                 indexing="ij")
            out.append(np.stack([ia.ravel(), ib.ravel()], axis=1))
        return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), np.int64)

    def to_yaml(self) -> str:
        """The spheres as a YAML document :func:`spheres_from_yaml` reads (edit it to tune a
        link's spheres, then pass it as ``spheres``)."""
        lines = [f"# ros2_ik collision spheres of {self.model_name!r}: per link, [x, y, z, "
                 "radius] in the link's frame (m)", "spheres:"]
        for c, name in enumerate(self.link_names):
            lines.append(f"  {name}:")
            sl = self.spheres_of(c)
            for cen, r in zip(self.center[sl], self.radius[sl]):
                lines.append(f"    - [{cen[0]:.5f}, {cen[1]:.5f}, {cen[2]:.5f}, {r:.5f}]")
        return "\n".join(lines) + "\n"

    def with_disabled(self, pairs, reason: str = "User") -> "CollisionModel":
        """This model with the link ``pairs`` ((name, name), ...) no longer checked."""
        index = {n: c for c, n in enumerate(self.link_names)}
        drop = set()
        disabled = list(self.disabled)
        for a, b in pairs:
            for n in (a, b):
                if n not in index:
                    raise UnknownLinkError(n, self.link_names, "collision link")
            drop.add(tuple(sorted((index[a], index[b]))))
            disabled.append((a, b, reason))
        keep = [p for p in self.pairs.tolist() if tuple(p) not in drop]
        return _make(self.model_name, self.link_names, self.links, self.sphere_link,
                     self.center, self.radius, keep, disabled, self.warnings, self.static)


def _make(name, link_names, links, sphere_link, center, radius, pairs, disabled, warnings,
          static):
    cm = CollisionModel(
        model_name=name, link_names=tuple(link_names),
        links=np.asarray(links, dtype=np.int64).reshape(-1),
        sphere_link=np.asarray(sphere_link, dtype=np.int64).reshape(-1),
        center=np.asarray(center, dtype=np.float64).reshape(-1, 3),
        radius=np.asarray(radius, dtype=np.float64).reshape(-1),
        pairs=np.asarray(pairs, dtype=np.int64).reshape(-1, 2),
        disabled=tuple(disabled), warnings=tuple(warnings),
        static=np.asarray(static, dtype=bool).reshape(-1))
    for f in fields(cm):
        a = getattr(cm, f.name)
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return cm


# ---------------------------------------------------------------------- fitting

def _shape_mesh(desc: CollisionDesc, search_path, warn):
    """(vertices (n, 3), faces (m, 3)) of a shape in its own frame (mesh: scaled), or None."""
    import trimesh  # noqa: PLC0415 - the collision model only

    if desc.shape == "box":
        m = trimesh.creation.box(extents=desc.size)
    elif desc.shape == "cylinder":
        m = trimesh.creation.cylinder(radius=desc.size[0], height=desc.size[1], sections=32)
    elif desc.shape == "capsule":
        m = trimesh.creation.capsule(height=desc.size[1], radius=desc.size[0], count=[24, 24])
    elif desc.shape == "mesh":
        path = resolve_mesh(desc.filename, search_path)
        if path is None:
            warn(f"link {desc.link!r}: collision mesh {desc.filename!r} not found (looked in the "
                 f"ament index and {list(map(str, search_path)) or 'no search path'}); the link "
                 "gets no spheres from it: give its directory in the search path, or its "
                 "spheres in a YAML file")
            return None
        try:
            if os.path.getsize(path) > MAX_MESH_BYTES:
                raise ValueError(f"larger than {MAX_MESH_BYTES} bytes")
            with _warnings.catch_warnings():
                _warnings.simplefilter("ignore")
                m = trimesh.load(str(path), force="mesh", process=False)
            if not hasattr(m, "vertices") or len(m.vertices) == 0 or len(m.faces) == 0:
                raise ValueError("no triangles in it")
            v = np.asarray(m.vertices, dtype=np.float64) * np.asarray(desc.scale)
            if not np.all(np.isfinite(v)) or np.abs(v).max() > 1e3:
                raise ValueError("vertices that are not finite or beyond 1 km")
            m = trimesh.Trimesh(vertices=v, faces=np.asarray(m.faces), process=False)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a warning
            warn(f"link {desc.link!r}: collision mesh {desc.filename!r} ({path}) could not be "
                 f"read as a mesh ({type(exc).__name__}: {exc}); the link gets no spheres from "
                 "it")
            return None
    else:  # sphere: no mesh needed
        return None
    return np.asarray(m.vertices, dtype=np.float64), np.asarray(m.faces, dtype=np.int64)


def _surface_points(vertices, faces) -> tuple[np.ndarray, float]:
    """Points on a triangle mesh's surface (its vertices and an even, seeded sample of its
    faces) and the sample spacing."""
    import trimesh  # noqa: PLC0415

    m = trimesh.Trimesh(vertices=vertices, faces=faces, process=False)
    area = float(m.area)
    pts, _ = trimesh.sample.sample_surface(m, SURFACE_SAMPLES, seed=0)
    spacing = math.sqrt(area / SURFACE_SAMPLES) if area > 0 else 0.0
    return np.concatenate([vertices, np.asarray(pts, dtype=np.float64)]), spacing


def fit_spheres(points: np.ndarray, spacing: float = 0.0,
                max_spheres: int = MAX_SPHERES_PER_SHAPE) -> tuple[np.ndarray, np.ndarray]:
    """Spheres covering ``points`` (n, 3): (centers (k, 3), radii (k,)), k <= ``max_spheres``
    (see the module docstring); each radius grown by half the sample ``spacing``. Of the
    splits into 1 .. ``max_spheres`` segments along the principal axis, the one whose spheres
    hold the least volume (a squat shape keeps one sphere, a long one gets a row of them)."""
    P = np.asarray(points, dtype=np.float64)
    c0 = P.mean(axis=0)
    d = P - c0
    _, _, vt = np.linalg.svd(d, full_matrices=False)
    t = d @ vt[0]
    best = None
    for k in range(1, max_spheres + 1):
        edges = np.linspace(t.min(), t.max(), k + 1)
        centers, radii = [], []
        for i in range(k):
            sel = (t >= edges[i] - 1e-12) & (t <= edges[i + 1] + 1e-12)
            if not sel.any():
                continue
            q = P[sel]
            c = 0.5 * (q.min(axis=0) + q.max(axis=0))
            centers.append(c)
            radii.append(float(np.linalg.norm(q - c, axis=1).max()) + 0.5 * spacing)
        volume = float(np.sum(np.asarray(radii) ** 3)) * (1.0 + 0.02 * k)
        if best is None or volume < best[0]:
            best = (volume, np.array(centers), np.array(radii))
    return best[1], best[2]


def _fit_shape(desc: CollisionDesc, search_path, warn):
    """Spheres of one collision element in its link's frame, or None."""
    T = _rpy_xyz_to_matrix(desc.xyz, desc.rpy)
    if desc.shape == "sphere":
        return T[None, :3, 3].copy(), np.array([desc.size[0]])
    mesh = _shape_mesh(desc, search_path, warn)
    if mesh is None:
        return None
    pts, spacing = _surface_points(*mesh)
    centers, radii = fit_spheres(pts, spacing)
    return centers @ T[:3, :3].T + T[:3, 3], radii


def resolve_mesh(filename: str, search_path=()) -> Path | None:
    """The file a URDF mesh name refers to (see the module docstring), or None."""
    dirs = [Path(d) for d in search_path]
    candidates: list[Path] = []
    if filename.startswith("package://"):
        rest = filename[len("package://"):]
        pkg, _, rel = rest.partition("/")
        try:
            from ament_index_python.packages import (  # noqa: PLC0415
                get_package_share_directory)

            candidates.append(Path(get_package_share_directory(pkg)) / rel)
        except Exception:  # noqa: BLE001 - no ament index here, or the package is not in it
            pass
        for d in dirs:
            candidates += [d / pkg / rel, d / rel]
    else:
        rel = filename[len("file://"):] if filename.startswith("file://") else filename
        p = Path(rel)
        candidates.append(p)
        if not p.is_absolute():
            candidates += [d / rel for d in dirs]
    for c in candidates:
        if c.is_file():
            return c
    return None


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
    for link, rows in spheres.items():
        if link not in model.link_names:
            raise UnknownLinkError(str(link), model.link_names, "link (in the spheres)")
        try:
            a = np.asarray(rows if rows else np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4)
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

def collision_model(model: Model, *, srdf=None, spheres=None, search_path=(),
                    disabled=()) -> CollisionModel:
    """The collision model of ``model`` from its URDF ``<collision>`` geometry.

    Args:
        srdf: an :class:`ros2_ik.model.Srdf` (or its text) whose ``<disable_collisions>``
            pairs are not checked.
        spheres: the spheres of some links, replacing the fitted ones: YAML text
            (:func:`spheres_from_yaml`) or ``{link: [[x, y, z, r], ...]}``.
        search_path: directories where meshes are looked for.
        disabled: more ``(link, link)`` pairs not to check.
    The default (no arguments; a bundled robot's SRDF, :func:`ros2_ik.model.load_robot`) is
    kept with the model."""
    if srdf is None and spheres is None and not search_path and not disabled:
        bundled = model.memo_peek("model.srdf", "bundled")
        return model.memo("model.collision", "default", lambda: _build(model, bundled, None, (),
                                                                       ()))
    return _build(model, srdf, spheres, tuple(search_path), tuple(disabled))


def _build(model: Model, srdf, spheres, search_path, extra_disabled) -> CollisionModel:
    from .srdf import Srdf, parse_srdf  # noqa: PLC0415

    notes: list[str] = []

    def warn(text):
        notes.append(text)
        _warnings.warn(text, CollisionWarning, stacklevel=4)

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

    by_link: dict[str, list] = {}
    names = set(model.link_names)
    for desc in getattr(model.desc, "collisions", ()):
        if desc.link not in names or desc.link in given:
            continue
        fit = _fit_shape(desc, search_path, warn)
        if fit is not None:
            by_link.setdefault(desc.link, []).append(fit)
    link_ids, sphere_link, centers, radii = [], [], [], []
    for l, name in enumerate(model.link_names):
        if name in given:
            parts = [(given[name][:, :3], given[name][:, 3])] if len(given[name]) else []
        else:
            parts = by_link.get(name, [])
        if not parts:
            continue
        c = len(link_ids)
        link_ids.append(l)
        for cen, rad in parts:
            centers.append(cen)
            radii.append(rad)
            sphere_link += [c] * len(rad)
    n = sum(len(r) for r in radii)
    if n > MAX_SPHERES:
        raise InvalidInputError(f"the collision model of {model.name!r} has {n} spheres, more "
                                f"than {MAX_SPHERES}; give fewer in a spheres YAML file")
    center = np.concatenate(centers) if centers else np.zeros((0, 3))
    radius = np.concatenate(radii) if radii else np.zeros(0)
    link_names = tuple(model.link_names[l] for l in link_ids)

    # pairs: all, less adjacent / rigidly attached, the SRDF's and the caller's
    disabled = {}
    for a, b, why in _structural_pairs(model, link_ids):
        disabled[(a, b)] = why
    index = {n: c for c, n in enumerate(link_names)}
    user = list(srdf.disabled_collisions if srdf is not None else ())
    user += [(a, b, "User") for a, b in extra_disabled]
    for a, b, why in user:
        if a in index and b in index and a != b:
            disabled.setdefault(tuple(sorted((index[a], index[b]))), why or "User")
    pairs = [(a, b) for a in range(len(link_ids)) for b in range(a + 1, len(link_ids))
             if (a, b) not in disabled]
    named = tuple((link_names[a], link_names[b], why) for (a, b), why in sorted(disabled.items()))
    movable = model.joint_type != JointType.FIXED
    static = []
    for l in link_ids:
        k, moved = l, False
        while k > 0:
            moved = moved or bool(movable[k])
            k = int(model.link_parent[k])
        static.append(not moved)
    return _make(model.name, link_names, link_ids, sphere_link, center, radius, pairs, named,
                 notes, static)


def _structural_pairs(model: Model, link_ids):
    """(a, b, reason) over collision-link indices: each link and the nearest collision link
    above it ("Adjacent"), and links with no moving joint between them ("Adjacent")."""
    index = {l: c for c, l in enumerate(link_ids)}
    out = set()
    movable = model.joint_type != JointType.FIXED

    def up(l):
        """Ancestors of link l, nearest first, with whether a moving joint lies between."""
        moved = False
        chain = []
        while l > 0:
            moved = moved or bool(movable[l])
            l = int(model.link_parent[l])
            chain.append((l, moved))
        return chain

    for l in link_ids:
        for anc, moved in up(l):
            if anc in index:
                out.add((min(index[l], index[anc]), max(index[l], index[anc]), "Adjacent"))
                break
    # rigidly attached: the same rigid body (nearest moving joint above both is the same)
    body = {}
    for l in link_ids:
        k = l
        while k > 0 and not movable[k]:
            k = int(model.link_parent[k])
        body.setdefault(k, []).append(index[l])
    for members in body.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                out.add((min(a, b), max(a, b), "Adjacent"))
    best = {}
    for a, b, why in sorted(out):
        best.setdefault((a, b), why)
    return [(a, b, why) for (a, b), why in best.items()]
