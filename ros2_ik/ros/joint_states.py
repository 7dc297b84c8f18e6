"""``joint_states``: the robot's current state, the default seed of a request.

joint_states are not waited on by the executor (at a robot's 1 kHz, a wait set built per
message took a whole core with no request at all): DDS keeps up to :data:`DEPTH` messages,
which the node takes on the executor thread only, every :data:`DRAIN_S` (the node's tick) and
when a request is taken, keeping the latest message per set of names (several sources: arms, a
gripper, a base). A request gets an immutable :class:`Snapshot` of them when it is taken; a
worker turns it into a seed without touching rclpy. Messages are taken as bytes and only their
names and positions read (:func:`.conversions.joint_state_fields`: 14 + ~8 us a message here,
against 47-62 us for rclpy's Python message).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from rclpy.callback_groups import CallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from .conversions import as_f64, joint_state_fields
from .executor import quiet_events

__all__ = ["JointStates", "Snapshot", "DEPTH", "DRAIN_S", "SOURCES", "QOS"]

#: messages DDS keeps between two drains (up to DEPTH / DRAIN_S = 5 kHz of messages in all)
DEPTH = 500
DRAIN_S = 0.1
SOURCES = 8  # the latest message is kept per set of names, for this many sets
QOS = QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT,
                 durability=DurabilityPolicy.VOLATILE)


class _Polled(CallbackGroup):
    """The callback group of an entity no executor waits on: the node takes its data itself."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


def _never_called(msg) -> None:  # pragma: no cover - a _Polled subscription's callback
    raise RuntimeError("joint_states are taken by JointStates.drain")


class Snapshot:
    """The joint states known when a request was taken: ``seed_base(robot)`` is the model's
    mid-range configuration overwritten by them (oldest set of names first), clamped."""

    __slots__ = ("version", "kept", "_seeds")

    def __init__(self, version: int, kept: tuple, cache: "_SeedCache"):
        self.version = version
        self.kept = kept          # ((names, positions), ...) oldest first
        self._seeds = cache

    def __call__(self, robot) -> np.ndarray:
        return self._seeds.seed(self, robot)


class _SeedCache:
    """Seeds per (snapshot version, robot), and each kept message read once per robot (a
    source whose names change in every message made each request re-read all of them)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seed: tuple | None = None        # (version, robot, seed)
        self._entries: dict = {}                # id(positions) -> (positions, robot, idx, vals)

    def seed(self, snap: Snapshot, robot) -> np.ndarray:
        cached = self._seed
        if cached is not None and cached[0] == snap.version and cached[1] is robot:
            return cached[2]
        with self._lock:
            known = self._entries
        entries = {}
        base = np.array(robot.model.neutral_q(), dtype=np.float64)
        for names, positions in snap.kept:
            e = known.get(id(positions))
            if e is None or e[0] is not positions or e[1] is not robot:
                e = (positions, robot, *robot.joint_state_entries(names, positions))
            entries[id(positions)] = e
            base[e[2]] = e[3]
        base = np.clip(base, robot.model.lower, robot.model.upper)
        base.setflags(write=False)
        with self._lock:
            self._entries = entries
            self._seed = (snap.version, robot, base)
        return base


class JointStates:
    """The node's joint_states (see the module docstring)."""

    def __init__(self, node):
        self._sub = node.create_subscription(JointState, "joint_states", _never_called, QOS,
                                             callback_group=_Polled(),
                                             event_callbacks=quiet_events(publisher=False))
        self._latest: OrderedDict[tuple, np.ndarray] = OrderedDict()  # names -> positions
        self.version = 0
        self._snapshot = Snapshot(0, (), _SeedCache())
        self._seeds = self._snapshot._seeds

    @property
    def sources(self) -> int:
        return len(self._latest)

    def drain(self) -> None:
        """Take every joint_states message DDS holds; keep the latest per set of names. The
        executor thread only (rcl calls)."""
        sub = self._sub
        latest = self._latest
        taken = 0
        while taken < DEPTH:
            try:
                with sub.handle:
                    got = sub.handle.take_message(sub.msg_type, True)
            except (InvalidHandle, RuntimeError):  # destroyed, shutting down
                return
            if got is None:
                break
            taken += 1
            fields = joint_state_fields(got[0])
            if fields is None:  # not plain little-endian CDR: rclpy reads it
                try:
                    msg = deserialize_message(got[0], JointState)
                except Exception:  # noqa: BLE001 - a message no reader can take: skipped
                    continue
                fields = (tuple(msg.name), np.array(as_f64(msg.position)))
            key, positions = fields
            if not key:
                continue
            latest.pop(key, None)
            latest[key] = positions
            if len(latest) > SOURCES:
                latest.popitem(last=False)
            self.version += 1

    def snapshot(self) -> Snapshot:
        """What is known now (drained first): the executor thread only."""
        self.drain()
        if self._snapshot.version != self.version:
            self._snapshot = Snapshot(self.version, tuple(self._latest.items()), self._seeds)
        return self._snapshot
