"""URDF text -> a plain, validated description of the kinematic tree.

Parsing is done by ``urdf_parser_py`` (ROS's own URDF parser, PyPI ``urdfdom-py``). Before it sees
the text, the document is checked with ``defusedxml`` (no DTD entities: "billion laughs" and
external entities are refused) and a size limit. After parsing, everything that matters for
kinematics is validated here with messages that say what is wrong, where, and what to do.
Elements that do not matter for kinematics (visual, collision, inertial, material, transmission,
gazebo, ...) are ignored and never stop a robot from loading.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from ..errors import UrdfError

__all__ = ["JointDesc", "RobotDesc", "parse_urdf", "MAX_URDF_BYTES", "JOINT_TYPES"]

#: Largest URDF text accepted [bytes]. Real robots (humanoids with meshes referenced by path)
#: are well under 2 MB; anything larger is refused before parsing.
MAX_URDF_BYTES = 8 * 1024 * 1024

JOINT_TYPES = ("fixed", "revolute", "continuous", "prismatic", "planar", "floating")

_parser_lock = threading.Lock()  # urdf_parser_py reports through a module-global hook


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


@dataclass(frozen=True)
class RobotDesc:
    """A validated robot: link names, joints, the root link, and parser warnings."""

    name: str
    links: tuple[str, ...]
    joints: tuple[JointDesc, ...]
    root: str
    warnings: tuple[str, ...] = field(default=())


def _where(joint_name: str) -> str:
    return f"joint {joint_name!r}"


def _finite_vec(values, what: str, where: str, n: int = 3) -> tuple[float, ...]:
    try:
        vals = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise UrdfError(f"{where}: {what} must be {n} numbers, got {values!r}") from None
    if len(vals) != n:
        raise UrdfError(f"{where}: {what} must have {n} numbers, got {len(vals)}: {values!r}")
    if not all(math.isfinite(v) for v in vals):
        raise UrdfError(f"{where}: {what} contains NaN or infinity: {vals}; give finite numbers")
    return vals


_KINEMATIC_JOINT_TAGS = ("parent", "child", "origin", "axis", "limit", "mimic")


def _check_xml(text: str) -> bytes:
    """Size limit, well-formedness and entity refusal, before any real parser runs.

    Returns the kinematic skeleton of the document (links by name, joints with their kinematic
    children only), so that what does not matter for kinematics (visuals, collisions, materials,
    transmissions, gazebo or ros2_control tags, incomplete or not) cannot stop a robot loading.
    """
    import defusedxml.ElementTree as DET  # noqa: PLC0415
    from defusedxml import DefusedXmlException  # noqa: PLC0415
    from xml.etree.ElementTree import ParseError  # noqa: PLC0415

    size = len(text.encode("utf-8", errors="replace"))
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
                    _finite_vec(raw.split(), f"<{tag} {attr}>", _where(name))
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
                if not math.isfinite(v):
                    raise UrdfError(f"{_where(name)}: <mimic {attr}> must be finite, got {raw}")
    from xml.etree import ElementTree as ET  # noqa: PLC0415  (building, not parsing)

    skeleton = ET.Element("robot", {"name": root.get("name", "robot")})
    for el in root:
        if el.tag == "link":
            ET.SubElement(skeleton, "link", {"name": el.get("name", "")})
        elif el.tag == "joint":
            j = ET.SubElement(skeleton, "joint", dict(el.attrib))
            for child in el:
                if child.tag in _KINEMATIC_JOINT_TAGS:
                    j.append(child)
    return ET.tostring(skeleton)


def parse_urdf(text: str) -> RobotDesc:
    """Parse and validate URDF text.

    Raises:
        UrdfError: with a message naming the problem and the element it was found in.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise UrdfError(f"URDF must be a string, got {type(text).__name__}")
    skeleton = _check_xml(text)

    from urdf_parser_py import urdf as up  # noqa: PLC0415
    from urdf_parser_py.xml_reflection import core as xcore  # noqa: PLC0415

    warnings: list[str] = []
    with _parser_lock:
        saved = xcore.on_error
        xcore.on_error = warnings.append
        try:
            robot = up.URDF.from_xml_string(skeleton)
        except xcore.ParseError as exc:
            raise UrdfError(f"URDF parse error: {exc}".replace("\n", " ")) from None
        except Exception as exc:  # urdf_parser_py raises plain errors on some bad input
            raise UrdfError(f"URDF parse error: {type(exc).__name__}: {exc}") from None
        finally:
            xcore.on_error = saved

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
            axis = _finite_vec(j.axis, "<axis xyz>", where)
        if j.type in ("revolute", "continuous", "prismatic", "planar"):
            norm = math.sqrt(sum(a * a for a in axis))
            if norm < 1e-9:
                raise UrdfError(f"{where}: <axis xyz> is the zero vector; give a direction")
            axis = tuple(a / norm for a in axis)
        lower, upper = -math.inf, math.inf
        velocity = effort = math.inf
        lim = j.limit
        if j.type in ("revolute", "prismatic"):
            if lim is None:
                raise UrdfError(
                    f"{where}: a {j.type} joint needs <limit lower upper effort velocity>; "
                    "use type 'continuous' for an unlimited revolute joint"
                )
            lower = float(lim.lower if lim.lower is not None else 0.0)
            upper = float(lim.upper if lim.upper is not None else 0.0)
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
            if j.type not in ("revolute", "continuous", "prismatic"):
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

    _check_mimics(joints)
    return RobotDesc(robot.name or "robot", tuple(link_names), tuple(joints), root,
                     tuple(warnings))


def _check_mimics(joints: list[JointDesc]) -> None:
    by_name = {j.name: j for j in joints}
    for j in joints:
        if j.mimic_joint is None:
            continue
        path = [j.name]
        cur = j
        while cur.mimic_joint is not None:
            leader = by_name.get(cur.mimic_joint)
            if leader is None:
                raise UrdfError(
                    f"joint {cur.name!r}: <mimic joint={cur.mimic_joint!r}> names a joint that "
                    f"does not exist; valid joints: {sorted(by_name)}"
                )
            if leader.type not in ("revolute", "continuous", "prismatic"):
                raise UrdfError(
                    f"joint {cur.name!r} mimics {leader.name!r}, a {leader.type} joint; a mimic "
                    "leader must be revolute, continuous or prismatic"
                )
            if leader.name in path:
                loop = " -> ".join(path + [leader.name])
                raise UrdfError(f"mimic joints form a loop: {loop}; one of them must be free")
            path.append(leader.name)
            cur = leader
