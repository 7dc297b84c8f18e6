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

import numpy as np

from ..errors import InputTypeError, InvalidInputError, UnknownJointError
from ..validate import check_flag, describe, naming
from .joint_types import JointType
from .meshes import element_shape, resolve_mesh, search_path as _search_path
from .spheres import OVERSHOOT, Shape, fit_link
from .tree import Model, check_model
from .collision_spheres import (GROUP, MAX_PLACED_VERTICES, MAX_PLACEMENTS, MAX_SPHERES,
                                SWEEP_SAMPLES, CollisionGeometryError,
                                CollisionModel, CollisionWarning, check_spheres,
                                make_collision_model, missing_message, number, spheres_from_yaml)

__all__ = ["CollisionModel", "collision_model", "spheres_from_yaml", "MAX_SPHERES", "GROUP",
           "CollisionWarning", "CollisionGeometryError", "resolve_mesh", "OVERSHOOT",
           "missing_message", "full_tree", "sphere_placements", "link_shapes"]

def collision_model(model: Model, *, srdf=None, spheres=None, search_path=(), disabled=(),
                    overshoot: float = OVERSHOOT, held=None,
                    accept_missing: bool = False, fit_to_mesh: bool = False) -> CollisionModel:
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
        fit_to_mesh: keep the overshoot bound against each link's own mesh, not only its
            convex hull (a concave link's slot or jaw gap is not filled:
            :mod:`ros2_ik.model.concavity`); concave links then take many more spheres.
    The default (no arguments; a bundled robot's SRDF, :func:`ros2_ik.model.load_robot`) is
    kept with the model."""
    check_model(model)
    if isinstance(overshoot, bool) or not (isinstance(overshoot, (int, float))
                                           and 0.0015 < overshoot <= 0.5):
        raise InvalidInputError(f"overshoot must be in (0.0015, 0.5] m, got "
                                f"{describe(overshoot)}")
    search_path, disabled, held = _check_args(search_path, disabled, held)
    args = (srdf, spheres, tuple(_search_path(search_path)), disabled, float(overshoot),
            held, check_flag(accept_missing, "accept_missing"),
            check_flag(fit_to_mesh, "fit_to_mesh"))
    if srdf is None and spheres is None and not search_path and not disabled and \
            overshoot == OVERSHOOT and held is None and not accept_missing and not fit_to_mesh:
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


def bounded_combos(combos: np.ndarray, grids, most: int) -> np.ndarray:
    """At most ``most`` rows of a sweep's ``combos``: all of them when few enough, else every
    joint at its lowest, middle and highest value together and a seeded sample of the rest."""
    if len(combos) <= most:
        return combos
    fixed = [np.array([g[k] for g in grids]) for k in (0, len(grids[0]) // 2, -1)]
    rng = np.random.default_rng(0)
    pick = rng.choice(len(combos), size=most - len(fixed), replace=False)
    return np.concatenate([np.stack(fixed), combos[np.sort(pick)]])


def link_shapes(model: Model, link: str, search_path=(), full: Model | None = None) -> list:
    """The URDF collision geometry of ``link`` as :class:`~ros2_ik.model.spheres.Shape` in the
    frame its spheres are given in (every placement of a swept link; the elements that cannot
    be read left out: [] when none can)."""
    full = full_tree(model) if full is None else full
    _, Ts = sphere_placements(model, full, link, {}, [])
    out = []
    for d in getattr(model.desc, "collisions", ()):
        if d.link != link:
            continue
        sh, _ = element_shape(d, search_path)
        if sh is not None:
            out.append(sh)
    return placed_shapes(out, Ts)


def placed_shapes(shapes, Ts) -> list:
    """Each of ``shapes`` at each placement ``Ts`` (4x4 transforms), placement by placement."""
    return [Shape(s.vertices @ T[:3, :3].T + T[:3, 3], s.faces,
                  None if s.primitive is None else
                  (s.primitive[0], T @ s.primitive[1], s.primitive[2]))
            for T in Ts for s in shapes]


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
    combos = bounded_combos(combos, grids, MAX_PLACEMENTS)
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
           accept_missing, fit_to_mesh=False) -> CollisionModel:
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
        given = check_spheres(spheres, model)
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
        number(v, f"held value of joint {j!r}")

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
            nv = sum(len(s.vertices) for s in shapes)
            if nv > MAX_PLACED_VERTICES:
                missing.append((link, f"its geometry has {nv} vertices, more than the limit "
                                      f"{MAX_PLACED_VERTICES}: give a lighter collision mesh "
                                      "(decimated, or primitives) or its spheres in the SRDF"))
                warn(f"link {link!r}: {missing[-1][1]}", keep=False)
                continue
            if len(Ts) * nv > MAX_PLACED_VERTICES:  # a heavy mesh swept: fewer placements
                most = max(3, MAX_PLACED_VERTICES // nv)
                Ts = [Ts[i] for i in np.unique(np.linspace(0, len(Ts) - 1, most).round()
                                               .astype(int))]
                notes.append(f"link {link!r}: {len(Ts)} of its swept placements fitted (its "
                             f"mesh has {nv} vertices)")
            placed = placed_shapes(shapes, Ts)
            cen, rad = fit_link(placed, overshoot, to_mesh=fit_to_mesh)
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
    return make_collision_model(model.name, names, links, sphere_link, center, radius, pairs,
                                named, warns, static,
                                offsets if offsets else np.zeros((0, 4, 4)), missing, notes,
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
