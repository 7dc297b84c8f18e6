"""URDF text -> a plain, validated description of the kinematic tree.

The document is parsed once, by ``defusedxml`` (no DTD entities: "billion laughs" and external
entities are refused) after a size limit, and its kinematic skeleton (links; joints with
parent, child, origin, axis, limit and mimic) is read from that tree as urdfdom reads it
(required attributes and elements, the first of a repeated one), in time linear in the
document's size. (``urdf_parser_py`` re-parsed the text and deep-copied every attribute: 3.7 s
of 5 for a 20,000-link document.) Everything that matters for kinematics is validated here
with messages that say what is wrong, where, and what to do.
Elements that do not matter for kinematics (visual, inertial, material, transmission, gazebo,
...) are ignored and never stop a robot from loading. ``<collision>`` geometry is read for the
collision model (:mod:`ros2_ik.model.collision`) into :attr:`RobotDesc.collisions`; an element
that cannot be read is a warning naming the link, never a refused robot, and is kept (with
:attr:`CollisionDesc.problem` saying why) so that the collision model lists its link as
missing geometry instead of leaving it out. A ``<mesh scale>`` with negative factors is a
mirrored mesh (how left/right-symmetric robots reuse one file), read as mirrored, as urdfdom,
Pinocchio and coal read it.
"""

from __future__ import annotations

import math
import warnings as _warnings
from dataclasses import dataclass, field

from ..errors import UrdfError

__all__ = ["JointDesc", "RobotDesc", "CollisionDesc", "parse_urdf", "MAX_URDF_BYTES",
           "JOINT_TYPES", "MAX_VALUE", "UrdfWarning", "COLLISION_SHAPES"]

#: Largest URDF text accepted [bytes]. Real robots (humanoids with meshes referenced by path)
#: are well under 2 MB; anything larger is refused before parsing.
MAX_URDF_BYTES = 8 * 1024 * 1024

#: Largest magnitude of a length [m] or angle [rad] in a URDF: origins, finite joint limits, mimic
#: multipliers and offsets (also after a chain of mimics is composed). Real robots are many orders
#: of magnitude below; the bound keeps every product and sum of the kinematics finite (FK of
#: 10^6 links at 10^6 m stays far from float64 overflow) and every random configuration drawable.
#: Joint limits may also be infinite only where URDF allows no limit (continuous joints).
MAX_VALUE = 1e6


class UrdfWarning(UserWarning):
    """Something in a URDF was ignored or reinterpreted so that the robot still loads (the
    message names the joint); also listed in :attr:`RobotDesc.warnings`."""


JOINT_TYPES = ("fixed", "revolute", "continuous", "prismatic", "planar", "floating")


@dataclass(frozen=True)
class JointDesc:
    """One URDF joint, with the fields kinematics needs (SI units)."""

    name: str
    type: str
    parent: str
    child: str
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = math.inf
    effort: float = math.inf
    mimic_joint: str | None = None
    mimic_multiplier: float = 1.0
    mimic_offset: float = 0.0


#: the ``<collision><geometry>`` shapes read (``capsule`` is not URDF 1.0, but written by
#: several tools; its axis is z, as a cylinder's)
COLLISION_SHAPES = ("box", "cylinder", "sphere", "capsule", "mesh")


@dataclass(frozen=True)
class CollisionDesc:
    """One ``<collision>`` element of a link, as written (SI units, origin in the link frame).

    ``size``: box (x, y, z) full lengths; cylinder / capsule (radius, length); sphere (radius,);
    mesh () with ``filename`` (``package://``, ``file://`` or a path) and ``scale`` (non-zero
    factors; a negative one mirrors the mesh). ``shape`` "unreadable": an element that could
    not be read, ``problem`` says why (its link's geometry is missing, not absent)."""

    link: str
    shape: str
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    size: tuple[float, ...] = ()
    filename: str = ""
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    problem: str = ""


@dataclass(frozen=True)
class RobotDesc:
    """A validated robot: link names, joints, the root link, parser warnings and the links'
    collision geometry."""

    name: str
    links: tuple[str, ...]
    joints: tuple[JointDesc, ...]
    root: str
    warnings: tuple[str, ...] = field(default=())
    collisions: tuple[CollisionDesc, ...] = field(default=())
    #: the links' ``<visual>`` geometry, read as the collision geometry is (the collision
    #: model's fallback for a link whose collision mesh cannot be found)
    visuals: tuple[CollisionDesc, ...] = field(default=())


def _where(joint_name: str) -> str:
    return f"joint {joint_name!r}"


def _finite_vec(values, what: str, where: str, n: int = 3,
                bound: float | None = MAX_VALUE) -> tuple[float, ...]:
    try:
        vals = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise UrdfError(f"{where}: {what} must be {n} numbers, got {values!r}") from None
    if len(vals) != n:
        raise UrdfError(f"{where}: {what} must have {n} numbers, got {len(vals)}: {values!r}")
    if not all(math.isfinite(v) for v in vals):
        raise UrdfError(f"{where}: {what} contains NaN or infinity: {vals}; give finite numbers")
    if bound is not None and any(abs(v) > bound for v in vals):
        raise UrdfError(f"{where}: {what} = {vals} is out of range: each value must be within "
                        f"+-{bound:g} (metres / radians)")
    return vals


_KINEMATIC_JOINT_TAGS = ("parent", "child", "origin", "axis", "limit", "mimic")


def _collisions(root, warnings: list[str] | None,
                tag: str = "collision") -> tuple[CollisionDesc, ...]:
    """The ``<collision>`` (or ``<visual>``) elements of every ``<link>`` that can be read; each
    one that cannot (unknown shape, a size that is not a positive finite number, a mesh without
    a file name) is a warning naming its link, kept as an "unreadable" element (``warnings``
    None: left out quietly)."""
    out = []
    for link in root.findall("link"):
        name = link.get("name", "")
        for k, col in enumerate(link.findall(tag)):
            where = f"link {name!r} <{tag}> #{k + 1}"
            try:
                out.append(_collision(name, col, where))
            except UrdfError as exc:
                if warnings is not None:
                    _warn(warnings, f"{exc}; this {tag} element cannot be used (its link's "
                                    "geometry is missing: fix the element)")
                    out.append(CollisionDesc(name, "unreadable", problem=str(exc)))
    return tuple(out)


def _collision(link: str, col, where: str) -> CollisionDesc:
    xyz = rpy = (0.0, 0.0, 0.0)
    org = col.find("origin")
    if org is not None:
        if org.get("xyz") is not None:
            xyz = _finite_vec(org.get("xyz").split(), "<origin xyz>", where)
        if org.get("rpy") is not None:
            rpy = _finite_vec(org.get("rpy").split(), "<origin rpy>", where)
    geom = col.find("geometry")
    shapes = [] if geom is None else list(geom)
    if len(shapes) != 1 or shapes[0].tag not in COLLISION_SHAPES:
        raise UrdfError(f"{where}: <geometry> must hold one of {list(COLLISION_SHAPES)}, got "
                        f"{[c.tag for c in shapes]}")
    g = shapes[0]

    def positive(attr: str) -> float:
        raw = g.get(attr)
        try:
            v = float(raw)
        except (TypeError, ValueError):
            raise UrdfError(f"{where}: <{g.tag} {attr}={raw!r}> must be a number") from None
        if not (math.isfinite(v) and 0.0 < v <= MAX_VALUE):
            raise UrdfError(f"{where}: <{g.tag} {attr}={raw!r}> must be positive and finite")
        return v

    if g.tag == "box":
        size = _finite_vec((g.get("size") or "").split(), "<box size>", where)
        if not all(v > 0 for v in size):
            raise UrdfError(f"{where}: <box size> must be three positive lengths, got {size}")
        return CollisionDesc(link, "box", xyz, rpy, size)
    if g.tag in ("cylinder", "capsule"):
        return CollisionDesc(link, g.tag, xyz, rpy, (positive("radius"), positive("length")))
    if g.tag == "sphere":
        return CollisionDesc(link, "sphere", xyz, rpy, (positive("radius"),))
    filename = (g.get("filename") or "").strip()
    if not filename:
        raise UrdfError(f"{where}: <mesh> has no filename")
    scale = (1.0, 1.0, 1.0)
    if g.get("scale") is not None:
        scale = _finite_vec(g.get("scale").split(), "<mesh scale>", where)
        if not all(abs(v) > 0 for v in scale):
            raise UrdfError(f"{where}: <mesh scale> must be three non-zero factors (a negative "
                            f"one mirrors the mesh), got {scale}")
    return CollisionDesc(link, "mesh", xyz, rpy, (), filename, scale)


def _check_xml(text: str) -> tuple[bytes, tuple, list[str], tuple]:
    """Size limit, well-formedness and entity refusal, before any real parser runs.

    Returns the kinematic skeleton of the document (links by name, joints with their kinematic
    children only), so that what does not matter for kinematics (visuals, materials,
    transmissions, gazebo or ros2_control tags, incomplete or not) cannot stop a robot loading;
    the links' collision elements that can be read, warnings about those that cannot, and the
    visual elements that can be read.
    """
    import defusedxml.ElementTree as DET  # noqa: N814, PLC0415 - DET beside the stdlib ET
    from defusedxml import DefusedXmlException  # noqa: PLC0415
    from xml.etree.ElementTree import ParseError  # noqa: PLC0415

    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UrdfError(
            f"URDF text is not valid Unicode: {exc.reason} at character {exc.start} "
            f"({text[exc.start:exc.end]!r}); decode the document properly (UTF-8)"
        ) from None
    if size > MAX_URDF_BYTES:
        raise UrdfError(
            f"URDF document is too large ({size} bytes > limit {MAX_URDF_BYTES}); "
            "a robot description should be far smaller: check what is being published"
        )
    if not text.strip():
        raise UrdfError("URDF document is empty; expected a <robot> XML document")
    try:
        root = DET.fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise UrdfError(
            f"URDF document declares XML entities ({type(exc).__name__}: {exc}); entity "
            "declarations are refused (they allow 'billion laughs' expansion attacks): "
            "expand them (e.g. with xacro) before publishing"
        ) from None
    except ParseError as exc:
        raise UrdfError(f"URDF document is not well-formed XML: {exc}") from None
    if root.tag != "robot":
        raise UrdfError(f"URDF root element is <{root.tag}>, expected <robot>")
    if not root.findall("link"):
        raise UrdfError("URDF document has no <link> elements; a robot needs at least one link")
    # Check numeric attributes here, where the element can be named precisely.
    for j in root.findall("joint"):
        name = j.get("name", "<unnamed>")
        for tag, attrs in (("origin", ("xyz", "rpy")), ("axis", ("xyz",))):
            el = j.find(tag)
            if el is None:
                continue
            for attr in attrs:
                raw = el.get(attr)
                if raw is not None:
                    # an axis is a direction: any finite size, normalised later
                    _finite_vec(raw.split(), f"<{tag} {attr}>", _where(name),
                                bound=None if tag == "axis" else MAX_VALUE)
        lim = j.find("limit")
        if lim is not None:
            for attr in ("lower", "upper", "velocity", "effort"):
                raw = lim.get(attr)
                if raw is None:
                    continue
                try:
                    v = float(raw)
                except ValueError:
                    raise UrdfError(
                        f"{_where(name)}: <limit {attr}={raw!r}> is not a number"
                    ) from None
                if math.isnan(v):
                    raise UrdfError(f"{_where(name)}: <limit {attr}> is NaN; give a number")
                # beyond the bound on its own side a limit means "none" (Gazebo's +-1e16);
                # a lower limit above it, or an upper limit below its negative, is no robot
                if (attr == "lower" and v > MAX_VALUE) or (attr == "upper" and v < -MAX_VALUE):
                    raise UrdfError(
                        f"{_where(name)}: <limit {attr}={raw!r}> is out of range: a joint's "
                        f"{attr} limit must be {'<=' if attr == 'lower' else '>='} "
                        f"{MAX_VALUE if attr == 'lower' else -MAX_VALUE:g} (m or rad)")
        mim = j.find("mimic")
        if mim is not None:
            for attr in ("multiplier", "offset"):
                raw = mim.get(attr)
                if raw is None:
                    continue
                try:
                    v = float(raw)
                except ValueError:
                    raise UrdfError(
                        f"{_where(name)}: <mimic {attr}={raw!r}> is not a number"
                    ) from None
                if not math.isfinite(v) or abs(v) > MAX_VALUE:
                    raise UrdfError(f"{_where(name)}: <mimic {attr}> must be finite and within "
                                    f"+-{MAX_VALUE:g}, got {raw}")
    col_warnings: list[str] = []
    collisions = _collisions(root, col_warnings)
    visuals = _collisions(root, None, "visual")
    return _skeleton(root, col_warnings), collisions, col_warnings, visuals


class _El:
    """An element's attributes as attributes (None where absent)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _skeleton(root, warnings: list[str]) -> _El:
    """The kinematic skeleton of a parsed ``<robot>``: its name, its links' names and its
    joints (name, type, parent, child, origin, axis, limit, mimic), read as URDF (urdfdom)
    reads them: required attributes and elements refused when missing, a scalar element given
    twice read from its first occurrence (with a warning), anything else under a joint
    ignored. Linear in the document's size."""
    links = [_El(name=el.get("name")) for el in root.findall("link")]
    joints = []
    for k, el in enumerate(root.findall("joint")):
        name = el.get("name")
        if not name:
            raise UrdfError(f"joint number {k + 1} has no name attribute; give every <joint> a "
                            "unique name")
        where = _where(name)
        jtype = el.get("type")
        if not jtype:
            raise UrdfError(f"{where}: has no type attribute; give one of {JOINT_TYPES}")
        if jtype not in JOINT_TYPES:
            raise UrdfError(f"{where}: unknown joint type {jtype!r}; valid: {JOINT_TYPES}")
        first: dict = {}
        for child in el:
            if child.tag in _KINEMATIC_JOINT_TAGS:
                if child.tag in first:
                    warnings.append(f"{where}: <{child.tag}> is given more than once; the "
                                    "first is used")
                else:
                    first[child.tag] = child
        ends = {}
        for role in ("parent", "child"):
            e = first.get(role)
            if e is None or not e.get("link"):
                raise UrdfError(f"{where}: has no <{role} link=...>; name its {role} link")
            ends[role] = e.get("link")
        origin = None
        if "origin" in first:
            o = first["origin"]
            origin = _El(xyz=_numbers(o.get("xyz"), where, "<origin xyz>"),
                         rpy=_numbers(o.get("rpy"), where, "<origin rpy>"))
        axis = None
        if "axis" in first:
            raw = first["axis"].get("xyz")
            if raw is None:
                raise UrdfError(f"{where}: <axis> has no xyz attribute; give the direction, "
                                "e.g. <axis xyz=\"0 0 1\"/>")
            axis = _numbers(raw, where, "<axis xyz>")
        limit = None
        if "limit" in first:
            lim = first["limit"]
            for attr in ("effort", "velocity"):
                if lim.get(attr) is None:
                    raise UrdfError(f"{where}: <limit> has no {attr} attribute; URDF requires "
                                    "effort and velocity in every <limit>")
            limit = _El(**{a: float(lim.get(a)) if lim.get(a) is not None else None
                           for a in ("lower", "upper", "effort", "velocity")})
        mimic = None
        if "mimic" in first:
            m = first["mimic"]
            if not m.get("joint"):
                raise UrdfError(f"{where}: <mimic> has no joint attribute; name the joint it "
                                "follows")
            mimic = _El(joint=m.get("joint"),
                        multiplier=float(m.get("multiplier")) if m.get("multiplier") else None,
                        offset=float(m.get("offset")) if m.get("offset") else None)
        joints.append(_El(name=name, type=jtype, parent=ends["parent"], child=ends["child"],
                          origin=origin, axis=axis, limit=limit, mimic=mimic))
    return _El(name=root.get("name"), links=links, joints=joints)


def _numbers(raw: str | None, where: str, what: str):
    """The numbers of an attribute (a list of float), or None when it is absent (the checks
    of :func:`_check_xml` have refused what is not numeric)."""
    if raw is None:
        return None
    try:
        return [float(v) for v in raw.split()]
    except ValueError:
        raise UrdfError(f"{where}: {what}={raw!r} is not a list of numbers") from None


def parse_urdf(text: str) -> RobotDesc:
    """Parse and validate URDF text.

    Raises:
        UrdfError: with a message naming the problem and the element it was found in.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise UrdfError(f"URDF must be a string, got {type(text).__name__}")
    try:
        skeleton, collisions, col_warnings, visuals = _check_xml(text)
    except RecursionError:
        raise UrdfError("URDF document is nested too deeply to process; a robot description "
                        "has a few levels of elements") from None

    warnings: list[str] = list(col_warnings)
    robot = skeleton

    link_names = [l.name for l in robot.links]
    if not link_names:
        raise UrdfError("URDF has no links")
    seen: set[str] = set()
    for n in link_names:
        if not n:
            raise UrdfError("a <link> has no name attribute")
        if n in seen:
            raise UrdfError(f"link {n!r} is defined twice; link names must be unique")
        seen.add(n)

    joints: list[JointDesc] = []
    jnames: set[str] = set()
    child_of: dict[str, str] = {}
    for j in robot.joints:
        where = _where(j.name)
        if not j.name:
            raise UrdfError("a <joint> has no name attribute")
        if j.name in jnames:
            raise UrdfError(f"joint {j.name!r} is defined twice; joint names must be unique")
        jnames.add(j.name)
        if j.type not in JOINT_TYPES:
            raise UrdfError(f"{where}: unknown joint type {j.type!r}; valid: {JOINT_TYPES}")
        for role, ln in (("parent", j.parent), ("child", j.child)):
            if ln is None:
                raise UrdfError(f"{where}: has no <{role} link=...>")
            if ln not in seen:
                raise UrdfError(
                    f"{where}: {role} link {ln!r} does not exist; add a <link name={ln!r}/> "
                    "or fix the name"
                )
        if j.parent == j.child:
            raise UrdfError(f"{where}: parent and child are the same link {j.child!r}")
        if j.child in child_of:
            raise UrdfError(
                f"link {j.child!r} is the child of two joints ({child_of[j.child]!r} and "
                f"{j.name!r}); URDF is a tree: every link has at most one parent joint"
            )
        child_of[j.child] = j.name
        xyz = (0.0, 0.0, 0.0)
        rpy = (0.0, 0.0, 0.0)
        if j.origin is not None:
            if j.origin.xyz is not None:
                xyz = _finite_vec(j.origin.xyz, "<origin xyz>", where)
            if j.origin.rpy is not None:
                rpy = _finite_vec(j.origin.rpy, "<origin rpy>", where)
        axis = (1.0, 0.0, 0.0)  # URDF default
        if j.axis is not None:
            axis = _finite_vec(j.axis, "<axis xyz>", where, bound=None)
        if j.type in ("revolute", "continuous", "prismatic", "planar"):
            # scaled first, so that huge (1e200) or tiny components normalise without overflow
            big = max(abs(a) for a in axis)
            scaled = tuple(a / big for a in axis) if big > 0 else axis
            norm = math.sqrt(sum(a * a for a in scaled))
            if big == 0 or big * norm < 1e-9:
                raise UrdfError(f"{where}: <axis xyz> is the zero vector; give a direction")
            axis = tuple(a / norm for a in scaled)
        lower, upper = -math.inf, math.inf
        velocity = effort = math.inf
        lim = j.limit
        if j.type in ("revolute", "prismatic"):
            if lim is None:
                raise UrdfError(
                    f"{where}: a {j.type} joint needs <limit lower upper effort velocity>; "
                    "use type 'continuous' for an unlimited revolute joint"
                )
            # + 0.0: a limit of -0 is 0 (lower=0, upper=-0 is a fixed range, not an empty one)
            lower = float(lim.lower if lim.lower is not None else 0.0) + 0.0
            upper = float(lim.upper if lim.upper is not None else 0.0) + 0.0
            if lower < -MAX_VALUE or upper > MAX_VALUE:
                _warn(warnings, f"{where}: <limit lower={lower:g} upper={upper:g}> beyond "
                                f"+-{MAX_VALUE:g} is read as no limit on that side")
                lower = -math.inf if lower < -MAX_VALUE else lower
                upper = math.inf if upper > MAX_VALUE else upper
            if lower > upper:
                raise UrdfError(
                    f"{where}: <limit lower={lower}> is greater than upper={upper}; swap them"
                )
        if lim is not None:
            if lim.velocity is not None:
                velocity = float(lim.velocity)
            if lim.effort is not None:
                effort = float(lim.effort)
        mimic_joint, mult, off = None, 1.0, 0.0
        if j.mimic is not None:
            mimic_joint = j.mimic.joint
            if not mimic_joint:
                raise UrdfError(f"{where}: <mimic> has no joint attribute")
            mult = float(j.mimic.multiplier) if j.mimic.multiplier is not None else 1.0
            off = float(j.mimic.offset) if j.mimic.offset is not None else 0.0
            if j.type == "fixed":
                _warn(warnings, f"{where}: a fixed joint has no motion to mimic; its <mimic "
                                f"joint={mimic_joint!r}> is ignored")
                mimic_joint, mult, off = None, 1.0, 0.0
            elif j.type not in ("revolute", "continuous", "prismatic"):
                raise UrdfError(
                    f"{where}: only revolute, continuous and prismatic joints can mimic, "
                    f"not {j.type!r}"
                )
        joints.append(
            JointDesc(j.name, j.type, j.parent, j.child, xyz, rpy, axis, lower, upper,
                      velocity, effort, mimic_joint, mult, off)
        )

    roots = [n for n in link_names if n not in child_of]
    if not roots:
        raise UrdfError(
            "URDF has no root link: every link is a child of some joint, so the joints form "
            "a cycle; remove one joint of the cycle"
        )
    if len(roots) > 1:
        raise UrdfError(
            f"URDF has {len(roots)} root links {roots}: they are not connected by joints; "
            "a robot must be one tree (add a joint connecting them, e.g. a fixed joint to a "
            "common base link)"
        )
    root = roots[0]
    # Cycle check: every link must be reachable from the root.
    children: dict[str, list[str]] = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j.child)
    reached, stack = {root}, [root]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in reached:
                reached.add(c)
                stack.append(c)
    unreached = [n for n in link_names if n not in reached]
    if unreached:
        cyc = [child_of[n] for n in unreached if n in child_of]
        raise UrdfError(
            f"URDF joints form a cycle: links {unreached} cannot be reached from the root "
            f"{root!r} (joints involved: {cyc}); URDF must be a tree"
        )

    joints = _check_mimics(joints, warnings)
    return RobotDesc(robot.name or "robot", tuple(link_names), tuple(joints), root,
                     tuple(warnings), collisions, visuals)


def _warn(warnings: list[str], msg: str) -> None:
    warnings.append(msg)
    _warnings.warn(msg, UrdfWarning, stacklevel=4)


def _check_mimics(joints: list[JointDesc], warnings: list[str]) -> list[JointDesc]:
    """Mimics whose leader is missing or cannot lead become ordinary joints (with a warning);
    loops are refused; the composed multiplier and offset of every chain must stay within
    :data:`MAX_VALUE`. Linear in the number of joints (each chain is walked once)."""
    import dataclasses  # noqa: PLC0415

    by_name = {j.name: j for j in joints}
    out = []
    for j in joints:
        if j.mimic_joint is not None:
            leader = by_name.get(j.mimic_joint)
            why = None
            if leader is None:
                why = "names a joint that does not exist"
            elif leader.type not in ("revolute", "continuous", "prismatic"):
                why = f"names a {leader.type} joint, which cannot lead a mimic"
            if why is not None:
                _warn(warnings, f"joint {j.name!r}: <mimic joint={j.mimic_joint!r}> {why}; "
                                f"{j.name!r} is loaded as an ordinary (independent) joint")
                j = dataclasses.replace(j, mimic_joint=None, mimic_multiplier=1.0,
                                        mimic_offset=0.0)
                by_name[j.name] = j
        out.append(j)
    # Compose each chain once (memoized): state 1 = being resolved (a loop), 2 = done.
    state: dict[str, int] = {}
    composed: dict[str, tuple[float, float]] = {}
    for start in out:
        if start.mimic_joint is None or state.get(start.name) == 2:
            continue
        path, cur = [], start
        while cur.mimic_joint is not None and state.get(cur.name) != 2:
            if state.get(cur.name) == 1:
                i = next(k for k, p in enumerate(path) if p.name == cur.name)
                loop = " -> ".join([p.name for p in path[i:]] + [cur.name])
                raise UrdfError(f"mimic joints form a loop: {loop}; one of them must be free")
            state[cur.name] = 1
            path.append(cur)
            cur = by_name[cur.mimic_joint]
        # multiplier/offset of cur relative to its free leader (1, 0 when cur is free)
        mult, off = (1.0, 0.0) if cur.mimic_joint is None else composed[cur.name]
        for p in reversed(path):
            mult, off = p.mimic_multiplier * mult, p.mimic_multiplier * off + p.mimic_offset
            if not (abs(mult) <= MAX_VALUE and abs(off) <= MAX_VALUE):
                raise UrdfError(
                    f"joint {p.name!r}: its chain of mimics composes to multiplier {mult:.6g}, "
                    f"offset {off:.6g}, beyond +-{MAX_VALUE:g}; use smaller multipliers")
            composed[p.name] = (mult, off)
            state[p.name] = 2
    return out
