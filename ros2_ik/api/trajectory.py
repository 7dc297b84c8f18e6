"""Trajectory seeds: IK along a path interpolated between keyframe poses.

Keyframe poses sit at node indices ``0 = n_0 < n_1 < ... < n_M-1``; every node in between gets a
target whose position is interpolated linearly and whose orientation by slerp between the two
keyframes around it (the ``ik_interpolation`` idea). IK then runs at every node:

- ``parallel``: all nodes at once in one batch, every node from the same seed;
- ``sequential``: node by node, each seeded by the previous node's solution (the last converged
  one), which keeps neighbouring nodes on the same IK branch.

The result flags every node that failed and reports the largest wrap-aware joint jump between
neighbouring nodes, so a caller sees at once whether the seed is smooth enough to hand to a
trajectory optimizer.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import InputTypeError, InvalidInputError, ShapeError
from ..validate import (MEMORY_BUDGET, as_float_array, check_memory, check_name, check_poses,
                        check_transforms, describe, link_index)
from ..ik.batch import RESULT_COST
from ..ik.checks import apply_group, check_call_options, check_collision
from ..ik.objectives import check_weights
from ..ik.config import IKConfig, SolveMode, Status
from ..ik.seeds import seed_distance
from ..kinematics.se3 import matrix_to_quat, pq_to_pose, quat_to_matrix, slerp
from ..model import MAX_BATCH, Model, check_model
from ..ik.terms import StepBound
from .solver import prepared_solver

__all__ = ["trajectory_seed", "interpolate_keyframes", "TrajectoryResult", "MODES"]

MODES = ("parallel", "sequential")
PARALLEL_CHUNK = 256  # nodes per solver call in parallel mode (progress and cancel between)
_NODE_BYTES = 4 * 128  # interpolation: the targets and three (N, 4, 4)-sized temporaries


@dataclass
class TrajectoryResult:
    """Per-node results of a trajectory seed (N nodes)."""

    q: np.ndarray                  # (N, nq)
    success: np.ndarray            # (N,) bool, verified by FK
    status: np.ndarray             # (N,) Status values
    position_error: np.ndarray     # (N,) [m]
    orientation_error: np.ndarray  # (N,) [rad]
    jumps: np.ndarray              # (N-1,) wrap-aware L-inf joint change between neighbours
    max_joint_jump: float          # max of jumps (0 for a single node)
    cancelled: bool = False
    messages: list = field(default_factory=list)
    solve_time: float = 0.0
    #: the backend that answered (see :attr:`ros2_ik.ik.IKResult.backend`)
    backend: str = ""
    _targets: np.ndarray | None = field(default=None, repr=False)
    _interp: Callable | None = field(default=None, repr=False)

    @property
    def targets(self) -> np.ndarray:
        """(N, 4, 4) the interpolated targets (built on first use: a timeout bounds the solve,
        not the O(N) construction of every node's target)."""
        if self._targets is None:
            self._targets = self._interp()
        return self._targets

    @property
    def failed_nodes(self) -> np.ndarray:
        return np.nonzero(~self.success)[0]


#: configurations kept at each node of a bounded path (:class:`_BoundedPath`)
BEAM_WIDTH = 8
#: draws around each kept configuration a node is solved from, and how many times more a
#: widened beam draws (:class:`_BoundedPath`)
JITTER_SEEDS = 8
WIDEN = 32
MAX_BEAM_WIDTH = 256


class _BoundedPath:
    """The nodes of a path solved under a step bound, as a beam search. A node is solved from
    every configuration kept at the last solved node (``width`` at most): once from it and
    ``JITTER_SEEDS`` times from points drawn within the bound around it (the draws from
    ``rng_seed``: the same request, the same path), every answer bounded by
    :class:`StepBound` from the configuration it came from. Of the answers, the one with the
    least joint motion since the path's start is kept, then each the farthest (wrap-aware
    L-infinity) from those kept: several branches, so that one that leads into an obstacle or
    a joint limit does not end the path where another goes round. Where a node has no answer,
    the last solved node is solved once more from its own parents with ``WIDEN`` times the
    draws and twice the width (a wider beam where the narrow one ran dry), and the node
    tried again. A node that still has none fails (its answer and message: those of the
    best configuration's attempt), and the next counts its bound from the last solved node
    times the nodes since. :meth:`fill` writes the solved nodes of the path that ends at the
    last solved node's best configuration."""

    def __init__(self, model: Model, seed, bound, width: int, rng_seed: int):
        self.model, self.bound, self.width = model, bound, width
        self.rng = np.random.default_rng(rng_seed)
        self.beam = seed[None].copy()      # (W, nq) the last solved node's configurations
        self.cost = np.zeros(1)            # their joint motion since the start
        self.last = -1                     # the last solved node
        self.kept: list = []               # (node, configurations, their parents' rows)
        self.redo = None                   # how the last solved node was solved, to widen

    def _dist(self, q, ref):
        return np.asarray(seed_distance(self.model, q, np.broadcast_to(ref, q.shape)))

    def _solve(self, ik, parents, pcost, target, b, draws: int, width: int, kw):
        """Answers from ``parents``: (IKResult, the kept rows' configurations, their parents,
        their costs, the best answer's row) or the result alone where none succeeded."""
        W = parents.shape[0]
        origin = np.tile(parents, (draws + 1, 1))
        jitter = np.clip(origin[W:] + self.rng.uniform(-1.0, 1.0, origin[W:].shape) * b,
                         self.model.lower, self.model.upper)
        r = ik.solve(np.broadcast_to(target, ((draws + 1) * W, 4, 4)),
                     seeds=np.concatenate([parents, jitter]), step_from=origin,
                     max_joint_step=b, **kw)
        ok = np.nonzero(r.success)[0]
        if not ok.size:
            return r, None
        cand, parent = r.q[ok], ok % W
        cost = pcost[parent] + self._dist(cand, parents[parent])
        first = int(np.argsort(cost, kind="stable")[0])
        pick = [first]  # the least motion, then each the farthest from those kept
        near = self._dist(cand, cand[first])
        while len(pick) < min(width, cand.shape[0]):
            k = int(np.argmax(near))
            if near[k] <= 0.0:
                break
            pick.append(k)
            near = np.minimum(near, self._dist(cand, cand[k]))
        pick = np.asarray(pick)
        return r, (cand[pick], parent[pick], cost[pick], int(ok[first]))

    def node(self, ik, i: int, target, **kw):
        """Solve node ``i`` (its ``target`` (4, 4)); returns an IKResult of one problem."""
        b = self.bound * (i - self.last)
        r, got = self._solve(ik, self.beam, self.cost, target, b, JITTER_SEEDS, self.width, kw)
        if got is None and self.redo is not None:  # a wider beam at the last solved node
            pb, pc, pt, pbound = self.redo
            _, wide = self._solve(ik, pb, pc, pt, pbound, WIDEN * JITTER_SEEDS,
                                  2 * self.width, kw)
            if wide is not None:
                self.kept[-1] = (self.last, wide[0], wide[1])
                self.beam, self.cost = wide[0], wide[2]
                self.redo = None
                r, got = self._solve(ik, self.beam, self.cost, target, b, JITTER_SEEDS,
                                     self.width, kw)
        if got is None:
            return r.take([0])
        self.redo = (self.beam, self.cost, target, b)
        self.kept.append((i, got[0], got[1]))
        self.beam, self.cost, self.last = got[0], got[2], i
        return r.take([got[3]])

    def fill(self, q) -> None:
        """The solved nodes' rows of ``q`` along the path to the last one's best."""
        row = 0
        for i, cand, parent in reversed(self.kept):
            q[i] = cand[row]
            row = int(parent[row])


def _max_joint_step(model: Model, value, mode: str):
    """``max_joint_step`` as (nq,) [rad or m], or None."""
    if value is None:
        return None
    if mode != "sequential":
        raise InvalidInputError("max_joint_step bounds the step between neighbouring nodes, "
                                "which only mode='sequential' solves one after the other; "
                                "use mode='sequential'")
    s = as_float_array(value, "max_joint_step", f"a number or shape ({model.nq},)", np)
    if s.ndim == 0:
        s = np.full(model.nq, float(s))
    if s.shape != (model.nq,):
        raise ShapeError(f"max_joint_step must be a number or shape ({model.nq},) (coordinates "
                         f"{list(model.q_names)}), got {s.shape}")
    if not bool(np.all(~np.isnan(s) & (s > 0))):
        raise InvalidInputError(f"max_joint_step must be > 0 [rad or m] (inf: no bound), got "
                                f"{describe(value)}")
    return s.astype(np.float64)


def _keyframes(keyframes) -> np.ndarray:
    k = as_float_array(keyframes, "keyframes", "shape (M, 4, 4) or (M, 7)",
                       np).astype(np.float64, copy=False)
    if k.ndim >= 1 and k.shape[0] == 0:
        raise InvalidInputError("keyframes is empty; give at least one keyframe pose")
    if k.ndim == 2 and k.shape[1] == 7:
        _, _, reason = check_poses(k)
        if np.any(reason == 1):
            bad = int(np.nonzero(reason == 1)[0][0])
            raise InvalidInputError(f"keyframe {bad} contains NaN or infinity")
        if np.any(reason == 2):
            bad = int(np.nonzero(reason == 2)[0][0])
            n = float(np.linalg.norm(k[bad, 3:]))
            raise InvalidInputError(f"keyframe {bad} has a quaternion of norm {n:.6g}; "
                                    f"give a unit quaternion (x y z w)")
        return pq_to_pose(k)
    if k.ndim != 3 or k.shape[1:] != (4, 4):
        raise ShapeError(f"keyframes must have shape (M, 4, 4) or (M, 7) [x y z qx qy qz qw], "
                         f"got {k.shape}")
    check_transforms(k, "keyframes", "keyframe")
    return k


def _node_indices(node_indices, M: int) -> np.ndarray:
    n = as_float_array(node_indices, "node_indices", f"shape ({M},) of integers", np) \
        if not isinstance(node_indices, np.ndarray) or node_indices.dtype.kind not in "iu" \
        else node_indices
    if n.ndim != 1 or n.shape[0] != M:
        raise ShapeError(f"node_indices must have one entry per keyframe ({M}), got shape "
                         f"{n.shape}")
    if n.dtype.kind == "f":
        if not np.all(np.isfinite(n)) or np.any(n != np.round(n)):
            raise InvalidInputError(f"node_indices must be integers, got {n.tolist()[:10]}")
    # range first (uint64 or 2**63 - 1 would wrap when cast to int64)
    if np.any(n < 0) or np.any(n > MAX_BATCH - 1):
        raise InvalidInputError(f"node_indices must be in [0, {MAX_BATCH - 1}], got "
                                f"{n.tolist()[:10]}")
    n = n.astype(np.int64)
    if n[0] != 0:
        raise InvalidInputError(f"node_indices must start at 0 (the first keyframe is node 0), "
                                f"got {int(n[0])}")
    if np.any(np.diff(n) <= 0):
        raise InvalidInputError(f"node_indices must be strictly increasing, got "
                                f"{n.tolist()[:10]}")
    if n[-1] + 1 > MAX_BATCH:
        raise InvalidInputError(f"{int(n[-1]) + 1} nodes exceed the limit {MAX_BATCH}")
    return n.astype(np.int64)


def interpolate_keyframes(keyframes, node_indices) -> np.ndarray:
    """Targets (N, 4, 4) for nodes 0..node_indices[-1]: linear positions, slerp orientations."""
    K = _keyframes(keyframes)
    n = _node_indices(node_indices, K.shape[0])
    N = int(n[-1]) + 1
    check_memory(N * _NODE_BYTES, "the trajectory", f"{N} nodes",
                 "split the path into several calls (fewer nodes per call)")
    return _interpolate(K, n, matrix_to_quat(K[:, :3, :3]), 0, N)


def _interpolate(K, n, qk, start: int, stop: int) -> np.ndarray:
    """Targets (stop - start, 4, 4) of nodes start..stop-1 (``qk``: the keyframes' quaternions,
    computed once). Any range gives the same values as the whole path."""
    if K.shape[0] == 1:
        return K.copy()
    nodes = np.arange(start, stop)
    seg = np.clip(np.searchsorted(n, nodes, side="right") - 1, 0, K.shape[0] - 2)
    t = (nodes - n[seg]) / (n[seg + 1] - n[seg])
    p0, p1 = K[seg, :3, 3], K[seg + 1, :3, 3]
    q0, q1 = qk[seg], qk[seg + 1]
    out = np.zeros((stop - start, 4, 4))
    out[:, :3, 3] = (1.0 - t)[:, None] * p0 + t[:, None] * p1
    out[:, :3, :3] = quat_to_matrix(slerp(q0, q1, t))
    out[:, 3, 3] = 1.0
    at = (n >= start) & (n < stop)
    out[n[at] - start] = K[at]  # keyframes exactly
    return out


TIMED_OUT_MESSAGE = "not solved: the trajectory's timeout was reached"
CANCELLED_MESSAGE = "not solved: cancelled"


def trajectory_seed(model: Model, keyframes, node_indices: Sequence[int], *,
                    tip: str | None = None, mode: str = "parallel", seed=None,
                    config: IKConfig | None = None, solver: str = "dls",
                    weights=(1, 1, 1, 1, 1, 1),
                    should_stop: Callable[[], bool] | None = None,
                    progress: Callable[[int, int, int], None] | None = None,
                    group=None, backend: str = "auto", world=None,
                    collision=None, max_joint_step=None,
                    beam_width: int = BEAM_WIDTH) -> TrajectoryResult:
    """IK at every node of a path between keyframe poses (in the model's base frame).

    Args:
        keyframes: (M, 4, 4) or (M, 7) [x y z qx qy qz qw] poses of ``tip``.
        node_indices: (M,) strictly increasing ints starting at 0; N = node_indices[-1] + 1.
        mode: "parallel" (all nodes from ``seed``, batched) or "sequential" (each node seeded by
            the previous solution).
        seed: (nq,) start configuration; default mid-range.
        config: solver options; default :class:`IKConfig` with ``solve_mode="distance"``. Its
            ``timeout`` bounds the whole trajectory.
        should_stop: polled between chunks and solver iterations; True cancels (nodes not solved
            get status PREEMPTED and ``cancelled`` is set).
        progress: called as ``progress(nodes_done, nodes_total, nodes_failed)`` between chunks.
        group: a planning group (:meth:`ros2_ik.model.Srdf.group`): only its joints move, and
            its chain tip is the default tip.
        backend: as :func:`.solve_pose`'s.
        world, collision: with ``config.avoid_collisions``, as :func:`.solve_pose`'s: every node
            keeps clear of the robot itself and of the world (a node whose answers all collide
            is IN_COLLISION).
        max_joint_step: with ``mode="sequential"``, how far each joint may move between
            neighbouring nodes [rad or m]: a number, or (nq,) one per coordinate (inf: free);
            a hard bound (:class:`~ros2_ik.ik.terms.StepBound`): every node is solved within
            it of the last solved node (times the nodes since, where a node failed), a node
            that cannot keep it fails and its message names the joint. None: no bound.
            The path is searched as a beam (``beam_width`` configurations a node, see
            :class:`_BoundedPath`), so a branch that leads into an obstacle or a limit does not
            end it where another one goes round.
    """
    t0 = time.perf_counter()
    check_model(model)
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidInputError(f"unknown trajectory mode {describe(mode)}: mode must be one "
                                f"of {MODES}")
    if group is not None:  # only the group's joints move; its chain tip is the default tip
        model, tip = apply_group(model, group, tip)
    tip = (model.tips[0] if model.tips else None) if tip is None else check_name(tip, "tip")
    if tip is None:
        raise InvalidInputError("no tip link given and the model has no default tip")
    link_index(model, tip, "tip")  # raises UnknownLinkError naming the valid links
    cfg = check_call_options(IKConfig(solve_mode=SolveMode.DISTANCE) if config is None
                             else config, solver, should_stop, backend)
    if progress is not None and not callable(progress):
        raise InputTypeError(f"progress must be a callable or None, got {describe(progress)}")
    check_collision(collision)
    bound = _max_joint_step(model, max_joint_step, mode)
    if isinstance(beam_width, bool) or not isinstance(beam_width, (int, np.integer)) or not (
            1 <= beam_width <= MAX_BEAM_WIDTH):
        raise InvalidInputError(f"beam_width must be a whole number in [1, {MAX_BEAM_WIDTH}], "
                                f"got {describe(beam_width)}")
    check_weights(weights, 1, np)  # checked now: a call that times out before its first chunk too
    K = _keyframes(keyframes)
    n = _node_indices(node_indices, K.shape[0])
    N = int(n[-1]) + 1
    per_node = _NODE_BYTES + 8 * (2 * model.nq + 8)  # targets + q, jumps, errors, messages
    check_memory(N * per_node, "the trajectory", f"{N} nodes",
                 f"split the path into calls of at most {MEMORY_BUDGET // per_node} nodes")
    qk = matrix_to_quat(K[:, :3, :3])
    if seed is None:
        seed = model.neutral_q()
    seed = as_float_array(seed, "seed", f"shape ({model.nq},)", np).astype(np.float64, copy=False)
    if seed.shape != (model.nq,):
        raise ShapeError(f"seed must have shape ({model.nq},) (coordinates "
                         f"{list(model.q_names)}), got {seed.shape}")
    deadline = None if cfg.timeout is None else t0 + cfg.timeout

    # Every node starts unsolved, marked with the way a solve with these options can end early
    # (the timeout when there is one, else a cancel): writing N rows takes time in proportion
    # to N, so it is done now, inside the budget, not after the deadline.
    # (refused at once where that writing alone would end the call past its timeout + 20 ms)
    if deadline is not None:
        RESULT_COST.check(N, model.nq, deadline, "trajectory nodes", start=t0)
    t_rows = time.perf_counter()
    q = np.tile(seed, (N, 1))
    success = np.zeros(N, dtype=bool)
    unsolved = (Status.TIMED_OUT, TIMED_OUT_MESSAGE) if deadline is not None else (
        Status.PREEMPTED, CANCELLED_MESSAGE)
    status = np.full(N, int(unsolved[0]), dtype=np.int64)
    pe = np.full(N, np.nan)
    re = np.full(N, np.nan)
    messages = [unsolved[1]] * N
    RESULT_COST.record(N, model.nq, time.perf_counter() - t_rows)
    done_targets: list = []  # the targets interpolated for the solved chunks
    done = failed = 0
    cancelled = False

    def remaining():
        return None if deadline is None else max(0.0, deadline - time.perf_counter())

    if bound is not None:  # the beam's seeds replace the random restarts (see _BoundedPath)
        cfg = dataclasses.replace(cfg, num_seeds=1)
    ik = prepared_solver(model, [tip], cfg, solver, backend, collision=collision,
                         terms=() if bound is None else (StepBound(np.inf),))
    world = ik.check_world(world)

    def stopped() -> bool:
        return should_stop is not None and bool(should_stop())

    if bound is not None:
        path = _BoundedPath(model, seed, bound, beam_width, cfg.rng_seed)

    step = PARALLEL_CHUNK if mode == "parallel" else 1
    chunks = (np.arange(s, min(s + step, N)) for s in range(0, N, step))
    current = seed
    for idx in chunks:
        if stopped():
            cancelled = True
            if unsolved[0] != Status.PREEMPTED:  # the rest were marked timed out
                status[idx[0]:] = int(Status.PREEMPTED)
                messages[int(idx[0]):] = [CANCELLED_MESSAGE] * (N - int(idx[0]))
            break
        if deadline is not None and time.perf_counter() >= deadline:
            break  # the rest are marked timed out already
        targets = _interpolate(K, n, qk, int(idx[0]), int(idx[-1]) + 1)
        done_targets.append(targets)
        if bound is None:
            r = ik.solve(targets, weights=weights,
                         seeds=seed if mode == "parallel" else current, timeout=remaining(),
                         should_stop=should_stop, world=world)
        else:  # one node, from every configuration of the beam
            r = path.node(ik, int(idx[0]), targets[0], weights=weights, timeout=remaining(),
                          should_stop=should_stop, world=world)
        q[idx] = r.q
        success[idx] = r.success
        status[idx] = r.status
        pe[idx] = r.position_error
        re[idx] = r.orientation_error
        for j, i in enumerate(idx):
            messages[int(i)] = r.messages[j]
        if stopped():  # cancelled inside the solver: unfinished nodes were pre-empted
            status[idx[~r.success]] = int(Status.PREEMPTED)
            for i in idx[~r.success]:
                messages[int(i)] = CANCELLED_MESSAGE
        if mode == "sequential" and r.success[0]:
            current = r.q[0]
        done += idx.shape[0]
        failed += int(np.sum(~r.success))
        if progress is not None:
            progress(done, N, failed)
    if stopped() and done < N:
        cancelled = True
    if bound is not None:  # the solved nodes on the path through the beams
        path.fill(q)
    # nodes after the last solved one all hold the seed: their jumps are 0
    jumps = np.zeros(max(N - 1, 0))
    if done:
        m = min(done, N - 1)
        jumps[:m] = np.asarray(seed_distance(model, q[1:m + 1], q[:m]))

    def all_targets():
        rest = _interpolate(K, n, qk, done, N) if done < N else np.zeros((0, 4, 4))
        return np.concatenate(done_targets + [rest]) if done_targets else rest

    return TrajectoryResult(q=q, success=success, status=status, position_error=pe,
                            orientation_error=re, _interp=all_targets, jumps=jumps,
                            max_joint_jump=float(jumps.max()) if jumps.size else 0.0,
                            cancelled=cancelled, messages=messages,
                            solve_time=time.perf_counter() - t0, backend=ik.backend)
