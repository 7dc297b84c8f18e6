"""The parts a solve holds, and what they do to an answer.

A solve for some tips moves the coordinates on the paths from the base to those tips
(:func:`ros2_ik.ik.seeds.movable_coordinates`); every other coordinate (a gripper's fingers,
the other arm of a two-armed robot, a head) is held at the problem's seed, in every answer.
With collision avoidance the links those held coordinates carry are still checked, where the
seed put them: when they are within the margin of an obstacle or of another part that does not
move either, no answer can be clear, whatever the goal. :func:`held_collisions` finds that at
the answers of the problems that failed, so their messages can say which held part is in the
way and what to do (a seed where it is clear, or a group that moves it).
"""

from __future__ import annotations

import numpy as np

from ..model import Model
from .seeds import movable_coordinates

__all__ = ["held_joints", "held_links", "still_pairs", "held_collisions", "MAX_EXPLAINED"]

#: the failed problems of one call whose held parts are looked at (a bound on the extra work)
MAX_EXPLAINED = 1000


def held_joints(model: Model, tips) -> tuple[str, ...]:
    """The coordinates (``model.q_names``) a solve for ``tips`` holds at the seed."""
    mov = movable_coordinates(model, tips)
    return tuple(n for n, m in zip(model.q_names, mov) if not m)


def _paths(model: Model, cm, tips):
    """Per collision link, the set of model links (joints) from it up to the base; and the
    joints of the movable and of the held coordinates."""
    mov = movable_coordinates(model, tips)
    moving = {int(model.q_joint[i]) for i in np.nonzero(mov)[0]}
    held = {int(model.q_joint[i]) for i in np.nonzero(~mov)[0]}

    def above(link: int) -> frozenset:
        out = set()
        while link > 0:
            out.add(link)
            link = int(model.link_parent[link])
        return frozenset(out)

    return [above(int(link)) for link in np.asarray(cm.links).tolist()], moving, held


def _masks(model: Model, cm, tips) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`held_links`, :func:`still_pairs`), kept with the model per tips and collision
    model (the value holds the collision model: its id is not reused while it is kept)."""
    def build():
        up, moving, held = _paths(model, cm, tips)
        links = np.array([bool(u & held) and not (u & moving) for u in up], dtype=bool)
        pairs = np.zeros(len(cm.pairs), dtype=bool)
        for k, (a, b) in enumerate(cm.pairs.tolist()):
            between = up[a] ^ up[b]
            pairs[k] = bool(between & held) and not (between & moving)
        return cm, links, pairs

    key = (tuple(tips), id(cm))
    return model.memo("ik.held.masks", key, build)[1:]


def held_links(model: Model, cm, tips) -> np.ndarray:
    """(C,) bool: the collision links of ``cm`` that a solve for ``tips`` does not move but the
    seed places (a held coordinate above them, none of the movable ones): not rigid with the
    base (those the world checks leave out), not moved by the solve."""
    return _masks(model, cm, tips)[0].copy()


def still_pairs(model: Model, cm, tips) -> np.ndarray:
    """(Pp,) bool: the checked pairs of ``cm`` whose relative pose a solve for ``tips`` never
    changes though the seed sets it: the joints between the two links (on the tree path from one
    to the other) are held coordinates only (a finger and its palm, the other arm and the
    torso)."""
    return _masks(model, cm, tips)[1].copy()


def held_collisions(model: Model, cm, q, world, margin: float, tips) -> list:
    """Per row of ``q`` (n, nq): a sentence naming a held part within ``margin`` of an obstacle
    of ``world`` (:func:`held_links`) or of another part whose pose relative to it the solve
    does not change (:func:`still_pairs`), or None.
    The pairs the solve checks, as it checks them (its collision model and the obstacles'
    allowed links)."""
    from .collision import clearance  # noqa: PLC0415

    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    held, still = _masks(model, cm, tips)
    if not (held.any() or still.any()) or not len(q):
        return [None] * len(q)
    names = cm.link_names
    drop = [(names[a], names[b]) for (a, b), s in zip(cm.pairs.tolist(), still) if not s]
    sub = cm.with_disabled(drop, "moved by the solve") if drop else cm
    if world is not None and len(world):
        movers = [n for n, h in zip(names, held) if not h]
        from ..world import World  # noqa: PLC0415

        world = World([o.with_touch(set(o.touch) | set(movers)) for o in world],
                      version=world.version)
    # the distances exact below the margin (a lower bound beyond: enough to say "within")
    d, which, describe = clearance(model, sub, q, world, reach=max(float(margin), 1e-6))
    hold = dict(zip(model.q_names, np.asarray(q).T))
    held_q = held_joints(model, tips)
    out = []
    for k in range(len(q)):
        if not (d[k] < margin):
            out.append(None)
            continue
        vals = ", ".join(f"{n} = {hold[n][k]:.3g}" for n in held_q[:6])
        more = f" and {len(held_q) - 6} more" if len(held_q) > 6 else ""
        out.append(f"a part this solve holds at the seed ({describe(int(which[k]))}, "
                   f"{d[k]:+.3f} m) is within the margin: the joints off the goal's "
                   f"path ({vals}{more}) stay at the seed in every answer, so no answer can be "
                   "clear; give a seed where they are clear, or solve a group that moves them")
    return out
