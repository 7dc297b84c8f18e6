"""The robot as the generator reads it: the chains to the tips (:class:`Chain`, from the model
layer's chain table), the coordinates they use, the limits and the Jacobian's structure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidInputError
from ...ik.seeds import limited_revolute
from ...model import Model
from ...model.chain import chain_table
from .node import Node



@dataclass(frozen=True)
class Chain:
    """A model and the chain table of its tips, in the form the emitters read (Python ints
    and tuples; :class:`ros2_ik.model.chain.ChainTable` holds the arrays)."""

    model: Model
    tips: tuple
    starts: tuple
    pre: np.ndarray
    axis: np.ndarray
    prismatic: tuple
    qi: tuple
    mult: tuple
    off: tuple
    col: tuple
    link: tuple
    mimic: tuple
    post: np.ndarray
    colq: tuple
    #: the collision model in the generator's form (None: collisions not compiled in)
    coll: object = None
    #: the terms the solve kernels carry, by name (:data:`ros2_ik.backends.terms.REGISTRY`),
    #: in the order their rows are stacked
    terms: tuple = ("pose",)

    @property
    def T(self) -> int:
        return len(self.starts) - 1

    @property
    def nc(self) -> int:
        return len(self.colq)


def chain_of(model: Model, tips, collision=None, terms=(), goal: str = "pose") -> Chain | None:
    """The chain data for ``tips`` (link names or indices), or None when a joint on a path is
    not revolute, continuous, prismatic or fixed (the generator covers 1-DOF chains only) or no
    joint on the paths can move (nothing to solve for; the reference answers those). With a
    ``collision`` model (:class:`ros2_ik.model.collision.CollisionModel`) the solve kernels
    carry the collision terms (None also when a collision link's path has another joint);
    ``terms``: the names of more terms the kernels carry (after the goal and the
    collisions); ``goal``: the goal term's (the pose of every tip, or a goal set:
    ``"goalset/<N>"``)."""
    if isinstance(tips, str) or not len(tips):
        if not isinstance(tips, str):
            raise InvalidInputError("no tips given for the generated kernels")
        tips = [tips]
    c = chain_table(model, tips)
    if c is None or c.nc == 0:
        return None
    coll = None
    if collision is not None:
        from ..terms.collision_scene import collision_chain  # noqa: PLC0415

        coll = collision_chain(model, collision, c.colq)
        if coll is None:
            return None
    return Chain(model=model, tips=c.tips, starts=tuple(int(s) for s in c.starts),
                 pre=c.pre, axis=c.axis, prismatic=tuple(bool(t) for t in c.prismatic),
                 qi=tuple(int(i) for i in c.qi), mult=tuple(float(v) for v in c.mult),
                 off=tuple(float(v) for v in c.off), col=tuple(int(v) for v in c.col),
                 link=tuple(int(l) for l in c.link), mimic=tuple(bool(m) for m in c.mimic),
                 post=c.post, colq=tuple(int(v) for v in c.colq), coll=coll,
                 terms=(goal,) + (("collision",) if coll is not None else ())
                 + tuple(terms))


def tip_nodes(ch: Chain, t: int) -> list:
    """The joints on tip ``t``'s path as a tree's nodes (each the parent of the next)."""
    out = []
    for k, j in enumerate(range(ch.starts[t], ch.starts[t + 1])):
        out.append(Node(link=int(ch.link[j]), parent=k - 1, pre=ch.pre[j],
                        axis=tuple(float(v) for v in ch.axis[j]), prismatic=bool(ch.prismatic[j]),
                        qi=int(ch.qi[j]), mult=float(ch.mult[j]), off=float(ch.off[j]),
                        col=int(ch.col[j])))
    return out


def joint_frame_decl(ch: Chain, T: str = "S") -> str:
    names = []
    for j in range(len(ch.qi)):
        names += [f"z{j}_{a}" for a in range(3)] + [f"pj{j}_{a}" for a in range(3)]
    return f"{T} " + ", ".join(names) + ";" if names else ""


def qvars(ch: Chain):
    """The q coordinates the chains read or move, in order, and a namer for them."""
    used = sorted(set(ch.qi) | set(ch.colq) | set(ch.coll.qi if ch.coll is not None else ()))
    return used, (lambda i: f"q{i}")


def trig_exports(ch: Chain) -> list:
    """The chain joints whose sine and cosine the evaluation hands to the collision terms:
    ``[(j, (q index, mult, offset))]`` (revolute joints; the first of a joint shared by tips)."""
    out, seen = [], set()
    for j in range(len(ch.qi)):
        key = (int(ch.qi[j]), float(ch.mult[j]), float(ch.off[j]))
        if not ch.prismatic[j] and key not in seen:
            seen.add(key)
            out.append((j, key))
    return out


def jac_structure(ch: Chain):
    """(6T, nc) bool: which residual Jacobian entries can be nonzero."""
    nz = np.zeros((6 * ch.T, ch.nc), dtype=bool)
    for t in range(ch.T):
        for j in range(ch.starts[t], ch.starts[t + 1]):
            c = ch.col[j]
            if c < 0:
                continue
            nz[6 * t:6 * t + 3, c] = True
            if not ch.prismatic[j]:
                nz[6 * t + 3:6 * t + 6, c] = True
    return nz


def frame_args(ch: Chain) -> str:
    names = []
    for j in range(len(ch.qi)):
        names += [f"z{j}_{a}" for a in range(3)] + [f"pj{j}_{a}" for a in range(3)]
    names += [f"pt{t}_{a}" for t in range(ch.T) for a in range(3)]
    return ", ".join(names)


def q_args(ch: Chain, prefix="q") -> str:
    used, _ = qvars(ch)
    return ", ".join(f"{prefix}{i}" for i in used)


def limits(model: Model):
    lo = np.asarray(model.lower, dtype=np.float64)
    hi = np.asarray(model.upper, dtype=np.float64)
    return lo, hi, limited_revolute(model)
