"""The collision term's data: the robot's structure as the generator reads it (the joints
that move collision links: :class:`CollisionChain`) and the packed scene of a solve (the
world's obstacles and the robot's spheres, groups, links and pairs, one float64 array:
:func:`pack_scene`; the layout in :mod:`.collision_kernels`). Only the kinematic structure is
compiled; everything here is data, so a new sphere fit, MoveIt's attached objects, padding or
allowed collisions need no new kernel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidInputError
from ...model import Model
from ...model.chain import ONE_DOF
from ...model.collision import CollisionModel
from ...model.joint_types import JointType
from ...world import PACKED
from ..emit.node import Node

__all__ = ["CollisionChain", "Node", "collision_chain", "pack_scene", "PackedScene", "HEAD",
           "LINK_W", "GROUP_W", "NODE_W", "LBMAX", "covered"]

#: numbers in the robot block's header, per link, per group and per node of the obstacles' tree
#: (see :mod:`.collision_kernels`)
HEAD, LINK_W, GROUP_W, NODE_W = 8, 8, 8, 10
#: links whose bounding centres a kernel keeps per evaluation (beyond: placed where used)
LBMAX = 32


@dataclass(frozen=True)
class CollisionChain:
    """The robot's structure as the generator reads it: the nodes (moving joints above the
    collision links, parents first) and, per model link that carries spheres, its node and
    the transform from the node's frame to the link's (``anchors``: {link: (node, post)};
    node -1 is the base)."""

    nodes: tuple
    anchors: dict
    qi: tuple

    def ancestry(self, k: int) -> list:
        """Nodes from ``k`` up to the base (``k`` first); [] for -1."""
        out = []
        while k >= 0:
            out.append(k)
            k = self.nodes[k].parent
        return out


@dataclass(frozen=True)
class PackedScene:
    """A solve's collision data: ``data`` (float64, C-contiguous) and its obstacle count."""

    data: np.ndarray
    n_obs: int


def collision_chain(model: Model, cm: CollisionModel, colq) -> CollisionChain | None:
    """The generator's form of ``cm``'s links for a solve moving coordinates ``colq``, or None
    when a joint on a collision link's path is not revolute, continuous, prismatic or fixed."""
    col_of = {int(c): a for a, c in enumerate(colq)}
    nodes: list[Node] = []
    node_of: dict[int, int] = {}
    anchors = {}
    for l in sorted({int(x) for x in cm.links}):
        path = []
        k = l
        while k > 0:
            path.append(k)
            k = int(model.link_parent[k])
        acc = np.eye(4)
        parent = -1
        for k in reversed(path):
            t = int(model.joint_type[k])
            if t == JointType.FIXED:
                acc = acc @ model.origin[k]
                continue
            if t not in ONE_DOF:
                return None
            if k not in node_of:
                if model.mimic_q[k] >= 0:
                    qi, mult, off = (int(model.mimic_q[k]), float(model.mimic_multiplier[k]),
                                     float(model.mimic_offset[k]))
                else:
                    qi, mult, off = int(model.q_start[k]), 1.0, 0.0
                node_of[k] = len(nodes)
                nodes.append(Node(link=k, parent=parent, pre=acc @ model.origin[k],
                                   axis=tuple(float(v) for v in model.axis[k]),
                                   prismatic=t == JointType.PRISMATIC, qi=qi, mult=mult, off=off,
                                   col=col_of.get(qi, -1)))
            parent = node_of[k]
            acc = np.eye(4)
        anchors[l] = (parent, acc)
    return CollisionChain(nodes=tuple(nodes), anchors=anchors,
                          qi=tuple(sorted({n.qi for n in nodes})))


def pack_scene(cc: CollisionChain, cm: CollisionModel, world=None) -> PackedScene:
    """The data of a solve with collision model ``cm`` and ``world`` for kernels generated
    from ``cc`` (see the module docstring)."""
    from ...ik.collision import allowed_mask, bounding_radius  # noqa: PLC0415

    packed = np.zeros((0, PACKED)) if world is None else world.packed()
    C, S = len(cm.link_names), cm.num_spheres
    G = cm.num_groups
    NN = len(cc.nodes)
    node = np.empty(C, dtype=np.int64)
    post = np.empty((C, 4, 4))
    for c in range(C):
        nd, P = cc.anchors[int(cm.links[c])]
        node[c] = NN if nd < 0 else nd
        post[c] = P
    # every position into its node's frame
    sc = np.einsum("sij,sj->si", post[cm.sphere_link, :3, :3], cm.center) + \
        post[cm.sphere_link, :3, 3]
    lb_c, lb_r = cm.link_bounds()
    g_link, gb_c, gb_r = cm.groups()
    lc = np.einsum("cij,cj->ci", post[:, :3, :3], lb_c) + post[:, :3, 3]
    gc = np.einsum("gij,gj->gi", post[g_link, :3, :3], gb_c) + post[g_link, :3, 3] \
        if G else np.zeros((0, 3))
    gs = cm.group_start
    first = np.searchsorted(g_link, np.arange(C), side="left") if G else np.zeros(C, np.int64)
    end = np.searchsorted(g_link, np.arange(C), side="right") if G else np.zeros(C, np.int64)
    links = np.zeros((C, LINK_W))
    links[:, 0] = node
    links[:, 1], links[:, 2] = first, end
    links[:, 3] = cm.static | (node == NN)
    links[:, 4:7], links[:, 7] = lc, lb_r
    groups = np.zeros((G, GROUP_W))
    if G:
        groups[:, 0], groups[:, 1] = gs[:-1], gs[1:]
        groups[:, 2:5], groups[:, 5] = gc, gb_r
    spheres = np.concatenate([sc, cm.radius[:, None]], axis=1)
    O = len(packed)
    skip = allowed_mask(cm, world) if O else np.zeros((0, C), dtype=bool)
    # per pair its two links and its allowance (CollisionModel.allowances)
    pairs = np.concatenate([cm.pairs.astype(np.float64).reshape(-1, 2),
                            cm.pair_allowances()[:, None]], axis=1)
    tree = world.tree() if O else None
    K = len(tree) if O else 0
    nodes = np.zeros((K, NODE_W))
    nskip = np.zeros((K, C))
    if K:
        nodes[:, 0], nodes[:, 1] = tree.first, tree.end
        nodes[:, 2], nodes[:, 3] = tree.left, tree.right
        nodes[:, 4:7], nodes[:, 7:10] = tree.lo, tree.hi
        # per node and link: none of its obstacles is checked against the link
        nskip = (~tree.holds(~skip)).astype(np.float64)
    head = np.zeros(HEAD)
    head[:6] = C, G, S, len(cm.pairs), tree.alone if O else 0, K
    data = np.concatenate([packed.ravel(), head, links.ravel(), groups.ravel(),
                           spheres.ravel(), pairs.ravel(), skip.astype(np.float64).ravel(),
                           bounding_radius(packed) if O else np.zeros(0),
                           tree.order.astype(np.float64) if O else np.zeros(0), nodes.ravel(),
                           nskip.ravel()])
    data = np.ascontiguousarray(data)
    data.setflags(write=False)
    return PackedScene(data, int(packed.shape[0]))



def covered(model: Model, cm: CollisionModel, colq) -> str | None:
    """Why the compiled source cannot carry this collision model (None: it can)."""
    if collision_chain(model, cm, colq) is None:
        return ("a joint on a collision link's path is not revolute, continuous, prismatic or "
                "fixed")
    if cm.num_spheres == 0:
        raise InvalidInputError("the collision model has no spheres")
    return None
