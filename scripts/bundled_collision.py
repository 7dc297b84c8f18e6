"""Write the <collision> geometry of the bundled robots (ros2_ik/robots/*.urdf), and print
their SRDF <disable_collisions> entries (not a test, not the product; run by hand after changing
a robot):

    python scripts/bundled_collision.py [--write]

Each link's geometry is given below as rounded segments between its own origin and its
children's joint origins (points fixed in the link), with the link's radius, plus rounded
cylinders, boxes and spheres where a segment does not describe the part (a hand, a base).
Everything is written as URDF 1.0 primitives with round ends: a segment is a cylinder with a
sphere at each end (a capsule; URDF 1.0 has no <capsule>) no longer than the segment, a
cylinder of the spec keeps its length but gets round ends, a box becomes the capsule along its
longest side. Round shapes are
what a sphere model covers tightly with few spheres (a sharp rim needs many under the collision
model's 5 mm overshoot bound). Radii follow the real robots' published outer dimensions (Franka
Panda: 0.05-0.09 m; UR5: 0.045-0.075 m). With --write the URDFs' <collision> elements are
replaced; then the SRDF entries printed by ``ros2_ik_collision_pairs`` (the sampled
never-colliding pairs) go into the SRDFs.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ros2_ik import Model  # noqa: E402

# link -> [("seg", a, b, r) | ("box", xyz, size) | ("sphere", xyz, r) | ("cyl", xyz, rpy, r, l)]
# a point is (x, y, z) in the link, "child:<link>" (that child's joint origin), "parent" (the
# parent link's origin), or ("frac", point, f) (a fraction f of the way to a point)
PANDA = {
    "panda_link0": [("cyl", (-0.02, 0, 0.07), (0, 0, 0), 0.09, 0.14)],
    "panda_link1": [("seg", (0, 0, -0.185), (0, 0, -0.03), 0.065),
                    ("sphere", (0, 0, 0), 0.07)],
    "panda_link2": [("seg", (0, 0, 0), ("frac", "child:panda_link3", 0.55), 0.065)],
    "panda_link3": [("seg", ("frac", "parent", 0.4), (0, 0, 0), 0.06),
                    ("seg", (0, 0, 0), "child:panda_link4", 0.06)],
    "panda_link4": [("seg", (0, 0, 0), ("frac", "child:panda_link5", 0.45), 0.06)],
    "panda_link5": [("seg", ("frac", "parent", 0.5), (0, 0, 0.0), 0.055),
                    ("sphere", (0, 0, 0), 0.06)],
    "panda_link6": [("seg", (0, 0, 0), "child:panda_link7", 0.055)],
    "panda_link7": [("seg", (0, 0, -0.01), (0, 0, 0.09), 0.05)],
    "panda_hand": [("box", (0, 0, 0.035), (0.06, 0.2, 0.07)),
                   ("box", (0, 0, 0.085), (0.02, 0.05, 0.03))],  # closed fingers
}
UR = {
    "base_link": [("sphere", (0, 0, -0.04), 0.06)],  # (mostly below its mounting plane)
    "shoulder_link": [("cyl", (0, 0, 0.0), (0, 0, 0), 0.06, 0.12)],
    "upper_arm_link": [("seg", (-0.05, 0, 0.136), (-0.375, 0, 0.136), 0.055),
                       ("cyl", (0, 0, 0.07), (0, 0, 0), 0.058, 0.13)],
    "forearm_link": [("seg", (-0.04, 0, 0.016), (-0.34, 0, 0.016), 0.04),
                     ("cyl", (0, 0, 0.05), (0, 0, 0), 0.045, 0.1)],
    "wrist_1_link": [("cyl", (0, 0, -0.005), (0, 0, 0), 0.04, 0.09)],
    "wrist_2_link": [("cyl", (0, 0, -0.005), (0, 0, 0), 0.04, 0.08)],
    "wrist_3_link": [("cyl", (0, 0, -0.015), (0, 0, 0), 0.04, 0.03)],
}


def _arm(side: str) -> dict:
    s = f"{side}_link"
    return {
        f"{s}1": [("sphere", (0, 0, 0.03), 0.06)],
        f"{s}2": [("seg", (0, 0, 0.02), "child:" + f"{s}3", 0.045)],
        f"{s}3": [("seg", (0, 0, 0), ("frac", "child:" + f"{s}4", 0.85), 0.05)],
        f"{s}4": [("seg", (0, 0, 0), "child:" + f"{s}5", 0.045)],
        f"{s}5": [("seg", (0, 0, 0), ("frac", "child:" + f"{s}6", 0.6), 0.04)],
        f"{s}6": [("sphere", (0, 0, 0.03), 0.04)],
        f"{s}7": [("seg", (0, 0, 0.03), (0, 0, 0.08), 0.035)],
    }


DUAL = {
    "base_link": [("cyl", (0, 0, 0.2), (0, 0, 0), 0.15, 0.4)],
    "torso_link": [("box", (0, 0, 0.25), (0.2, 0.24, 0.5))],
    "head_link": [("box", (0, 0, 0), (0.15, 0.15, 0.15))],
    **_arm("left"), **_arm("right"),
}
ROBOTS = {"panda": PANDA, "ur": UR, "dual_arm": DUAL}


def _point(m: Model, link: str, p):
    if isinstance(p, tuple) and p and p[0] == "frac":
        return _point(m, link, p[1]) * p[2]
    if isinstance(p, str):
        if p == "parent":
            l = m.link_index(link)
            return np.linalg.inv(m.origin[l])[:3, 3]
        child = m.link_index(p.split(":", 1)[1])
        assert int(m.link_parent[child]) == m.link_index(link), (link, p)
        return m.origin[child][:3, 3].copy()
    return np.asarray(p, dtype=float)


def _rpy_z_to(d):
    """rpy turning z onto direction d."""
    d = d / np.linalg.norm(d)
    pitch = math.atan2(math.hypot(d[0], d[1]), d[2])
    yaw = math.atan2(d[1], d[0])
    return (0.0, pitch, yaw)


def _fmt(v):
    return " ".join(f"{x:.6g}" for x in v)


def _element(geom: str, xyz, rpy) -> str:
    return (f'    <collision>\n      <origin xyz="{_fmt(xyz)}" rpy="{_fmt(rpy)}"/>\n'
            f'      <geometry>\n        {geom}\n      </geometry>\n    </collision>')


def _capsule(a, b, r) -> list:
    """A cylinder from a to b with a sphere of radius r at each end (one sphere if a == b)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = b - a
    length = float(np.linalg.norm(d))
    out = [_element(f'<sphere radius="{r:.6g}"/>', a, (0, 0, 0))]
    if length > 1e-6:
        out.append(_element(f'<cylinder radius="{r:.6g}" length="{length:.6g}"/>', 0.5 * (a + b),
                            _rpy_z_to(d)))
        out.append(_element(f'<sphere radius="{r:.6g}"/>', b, (0, 0, 0)))
    return out


def _rot(rpy) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y),
                              math.sin(y))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def collisions(m: Model, link: str, spec) -> str:
    out = []
    for item in spec:
        kind = item[0]
        if kind == "seg":  # round ends inside the segment: no longer than it
            a, b, r = _point(m, link, item[1]), _point(m, link, item[2]), item[3]
            d = b - a
            length = float(np.linalg.norm(d))
            if length > 2 * r:
                u = d / length
                out += _capsule(a + r * u, b - r * u, r)
            else:
                out += _capsule(0.5 * (a + b), 0.5 * (a + b), r)
        elif kind == "box":  # the capsule along its longest side, as wide as its next side
            c, size = np.asarray(item[1], dtype=float), np.asarray(item[2], dtype=float)
            k = int(np.argmax(size))
            r = 0.5 * float(np.sort(size)[1])
            half = max(0.5 * float(size[k]) - r, 0.0)
            e = np.zeros(3)
            e[k] = half
            out += _capsule(c - e, c + e, r)
        elif kind == "sphere":
            out.append(_element(f'<sphere radius="{item[2]}"/>', np.asarray(item[1]), (0, 0, 0)))
        else:  # cyl: its length, round ends (a sphere where it is no longer than wide)
            c, r, length = np.asarray(item[1], dtype=float), item[3], item[4]
            z = _rot(item[2])[:, 2] * max(0.5 * length - r, 0.0)
            out += _capsule(c - z, c + z, r)
    return "\n".join(out)


def rewrite(path: Path, spec: dict) -> str:
    text = path.read_text()
    m = Model.from_urdf(text)
    text = re.sub(r"\n\s*<collision>.*?</collision>", "", text, flags=re.S)
    for link, items in spec.items():
        block = collisions(m, link, items)
        empty = re.search(rf'<link name="{link}"\s*/>', text)
        if empty:
            text = text.replace(empty.group(0), f'<link name="{link}">\n{block}\n  </link>')
            continue
        open_ = re.search(rf'<link name="{link}"\s*>', text)
        assert open_, link
        end = text.index("</link>", open_.end())
        text = text[:end] + block + "\n  " + text[end:]
    return text


def main() -> int:
    write = "--write" in sys.argv
    for name, spec in ROBOTS.items():
        path = ROOT / "ros2_ik" / "robots" / f"{name}.urdf"
        text = rewrite(path, spec)
        Model.from_urdf(text)  # still loads
        if write:
            path.write_text(text)
        print(f"{name}: {sum(len(v) for v in spec.values())} collision elements"
              + (" written" if write else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
