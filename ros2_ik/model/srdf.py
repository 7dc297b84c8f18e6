"""Planning groups from an SRDF (MoveIt's semantic robot description), for the solvers.

No Python SRDF parser is kept on PyPI (``srdfdom`` is MoveIt's C++ library, not on PyPI), so the
``<group>`` elements are read here with ``defusedxml`` (as the URDF: no entity expansion). A
group holds, as in MoveIt:

- ``<chain base_link=".." tip_link=".."/>``: the joints on the way from ``base_link`` down to
  ``tip_link`` (``base_link`` must be above ``tip_link`` in the model's tree);
- ``<joint name=".."/>``: that joint;
- ``<link name=".."/>``: the joint whose child is that link;
- ``<group name=".."/>``: every joint of that (sub)group.

:meth:`Group.restrict` gives the model a solve for the group runs on: every joint with a
coordinate that is not in the group (nor the leader of a mimic joint in it) is frozen, so every
solver and path leaves it at the problem's seed. ``<disable_collisions link1 link2 reason>``
entries are kept (:attr:`Srdf.disabled_collisions`) for the collision model's self pairs, and
``<link_sphere_approximation link><sphere center radius/></link_sphere_approximation>`` entries
(srdfdom's form, which foam and ballpark write; :attr:`Srdf.link_spheres`) as the spheres of
those links. Other SRDF elements (group states, end effectors, virtual joints) are not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import SrdfError
from .tree import Model

__all__ = ["Group", "Srdf", "parse_srdf", "sphere_elements", "MAX_SRDF_BYTES"]

MAX_SRDF_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class _GroupSpec:
    name: str
    chains: tuple = ()      # ((base_link, tip_link), ...)
    joints: tuple = ()
    links: tuple = ()
    subgroups: tuple = ()


@dataclass(frozen=True)
class Group:
    """A planning group resolved against a model: its joint names (in model order), the tip a
    solve uses when none is given (``tip``: the tip link of its chain when it has exactly one,
    counting its subgroups', and every joint of the group is on the way to it; else None) and
    that chain's base link (``base``)."""

    name: str
    joints: tuple
    tip: str | None = None
    base: str | None = None
    _frozen: tuple = field(default=(), repr=False)

    def restrict(self, model: Model) -> Model:
        """``model`` with every joint outside the group frozen (cached on ``model``)."""
        return model.memo("model.srdf.group_model", (self.name, self.joints),
                          lambda: model.lock(self._frozen) if self._frozen else model)


class Srdf:
    """The groups of one SRDF document (``groups``: name -> raw definition)."""

    def __init__(self, robot_name: str, specs: dict, disabled: tuple = (),
                 link_spheres: dict | None = None):
        self.robot_name = robot_name
        self._specs = specs
        #: ``((link1, link2, reason), ...)`` of the ``<disable_collisions>`` entries
        self.disabled_collisions = tuple(disabled)
        #: ``{link: (k, 4) [x, y, z, r]}`` of the ``<link_sphere_approximation>`` entries (link
        #: frame, metres; k = 0: the SRDF says the link has no spheres)
        self.link_spheres = dict(link_spheres or {})

    @property
    def group_names(self) -> list:
        return list(self._specs)

    def group(self, model: Model, name: str) -> Group:
        """Group ``name`` resolved against ``model`` (:class:`SrdfError` when unknown or when
        it names joints or links the model lacks)."""
        if not isinstance(name, str) or name not in self._specs:
            raise SrdfError(f"unknown group {name!r}; the SRDF defines "
                            f"{sorted(self._specs) or 'no groups'}")
        joint_links: set = set()
        chains: list = []
        self._collect(model, name, joint_links, chains, ())
        order = sorted(joint_links)
        # leaders of mimic joints in the group drive them: they are in the group too
        for l in list(order):
            if model.mimic_q[l] >= 0:
                joint_links.add(int(model.q_joint[int(model.mimic_q[l])]))
        order = sorted(joint_links)
        with_q = sorted({int(l) for l in model.q_joint})
        frozen = tuple(model.joint_names[l] for l in with_q if l not in joint_links)
        tip = base = None
        if len(chains) == 1:  # the chain's tip, when every joint of the group is above it
            l = model.link_index(chains[0][1])
            above = set()
            while l > 0:
                above.add(int(l))
                l = int(model.link_parent[l])
            if joint_links <= above:
                base, tip = chains[0]
        return Group(name=name, joints=tuple(model.joint_names[l] for l in order), tip=tip,
                     base=base, _frozen=frozen)

    def _collect(self, model, name, out, chains, stack):
        if name in stack:
            raise SrdfError(f"group {name!r} contains itself through subgroups "
                            f"{' -> '.join(stack + (name,))}")
        if name not in self._specs:
            raise SrdfError(f"group {stack[-1]!r} names subgroup {name!r}, which the SRDF does "
                            f"not define; groups: {sorted(self._specs)}")
        spec = self._specs[name]
        links = {n: i for i, n in enumerate(model.link_names)}
        joints = {n: i for i, n in enumerate(model.joint_names) if i > 0}
        for base, tip in spec.chains:
            for n in (base, tip):
                if n not in links:
                    raise SrdfError(f"group {name!r}: chain link {n!r} is not in the model "
                                    f"(base {model.base!r})")
            b, l = links[base], links[tip]
            path = []
            while l != b and l > 0:
                path.append(l)
                l = int(model.link_parent[l])
            if l != b:
                raise SrdfError(f"group {name!r}: chain base_link {base!r} is not above "
                                f"tip_link {tip!r} in the model's tree")
            out.update(path)
            chains.append((base, tip))
        for j in spec.joints:
            if j not in joints:
                raise SrdfError(f"group {name!r}: joint {j!r} is not in the model")
            out.add(joints[j])
        for n in spec.links:
            if n not in links:
                raise SrdfError(f"group {name!r}: link {n!r} is not in the model")
            if links[n] > 0:  # the joint into that link (the base link has none)
                out.add(links[n])
        for g in spec.subgroups:
            self._collect(model, g, out, chains, stack + (name,))


def parse_srdf(text: str) -> Srdf:
    """Read the ``<group>`` elements of an SRDF document (:class:`SrdfError` when it is not
    one)."""
    import defusedxml.ElementTree as DET  # noqa: N814, PLC0415 - DET beside the stdlib ET
    from defusedxml import DefusedXmlException  # noqa: PLC0415
    from xml.etree.ElementTree import ParseError  # noqa: PLC0415

    if not isinstance(text, str):
        raise SrdfError(f"SRDF must be a str (the XML text), got {type(text).__name__}")
    if len(text.encode("utf-8", "replace")) > MAX_SRDF_BYTES:
        raise SrdfError(f"SRDF document is larger than {MAX_SRDF_BYTES} bytes")
    if not text.strip():
        raise SrdfError("SRDF document is empty; expected a <robot> XML document")
    try:
        root = DET.fromstring(text, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SrdfError(f"SRDF document declares XML entities ({type(exc).__name__}); they are "
                        f"refused") from None
    except ParseError as exc:
        raise SrdfError(f"SRDF document is not well-formed XML: {exc}") from None
    if root.tag != "robot":
        raise SrdfError(f"SRDF root element is <{root.tag}>, expected <robot>")
    specs: dict = {}
    for g in root.findall("group"):
        name = g.get("name")
        if not name:
            raise SrdfError("a <group> without a name")
        if name in specs:
            raise SrdfError(f"group {name!r} is defined twice")
        chains, joints, links, subs = [], [], [], []
        for c in g:
            if c.tag == "chain":
                b, t = c.get("base_link"), c.get("tip_link")
                if not b or not t:
                    raise SrdfError(f"group {name!r}: <chain> needs base_link and tip_link")
                chains.append((b, t))
            elif c.tag in ("joint", "link", "group"):
                n = c.get("name")
                if not n:
                    raise SrdfError(f"group {name!r}: <{c.tag}> without a name")
                {"joint": joints, "link": links, "group": subs}[c.tag].append(n)
        specs[name] = _GroupSpec(name, tuple(chains), tuple(joints), tuple(links), tuple(subs))
    disabled = []
    for d in root.findall("disable_collisions"):
        a, b = d.get("link1"), d.get("link2")
        if not a or not b:
            raise SrdfError("a <disable_collisions> needs link1 and link2")
        disabled.append((a, b, d.get("reason", "")))
    spheres: dict = {}
    for a in root.findall("link_sphere_approximation"):
        link = a.get("link")
        if not link:
            raise SrdfError("a <link_sphere_approximation> needs a link")
        if link in spheres:
            raise SrdfError(f"link {link!r} has two <link_sphere_approximation> entries")
        rows = []
        for k, sp in enumerate(a.findall("sphere")):
            where = f"<link_sphere_approximation link={link!r}> sphere #{k + 1}"
            try:
                c = [float(v) for v in (sp.get("center") or "").split()]
                r = float(sp.get("radius", ""))
            except ValueError:
                raise SrdfError(f"{where}: center must be 3 numbers and radius a number") from None
            if len(c) != 3 or not all(math.isfinite(v) for v in c + [r]) or r < 0 or \
                    max(abs(v) for v in c + [r]) > 1e3:
                raise SrdfError(f"{where}: center must be 3 finite numbers and radius >= 0 "
                                f"(metres, within 1 km), got center={sp.get('center')!r} "
                                f"radius={sp.get('radius')!r}")
            if r > 0:  # (srdfdom: a sphere of radius 0 means none)
                rows.append(c + [r])
        spheres[link] = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    return Srdf(root.get("name", ""), specs, tuple(disabled), spheres)


def sphere_elements(spheres: dict, indent: str = "  ") -> str:
    """``<link_sphere_approximation>`` elements for an SRDF from ``{link: (k, 4) [x, y, z, r]}``
    (a link with no spheres gets srdfdom's radius-0 sphere)."""
    out = []
    for link, rows in spheres.items():
        out.append(f'{indent}<link_sphere_approximation link="{link}">')
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
        for x, y, z, r in rows if len(rows) else [(0.0, 0.0, 0.0, 0.0)]:
            out.append(f'{indent}  <sphere center="{x:.6f} {y:.6f} {z:.6f}" radius="{r:.6f}"/>')
        out.append(f"{indent}</link_sphere_approximation>")
    return "\n".join(out) + ("\n" if out else "")
