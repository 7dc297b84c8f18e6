"""Message <-> NumPy conversions, in one place.

Two forms exist for the batched interfaces (see ``ComputeIK.srv`` / ``ComputeFK.srv``):

- friendly: one ``geometry_msgs/PoseStamped`` / ``sensor_msgs/JointState`` per item; converting
  them costs a Python loop over the items (about a microsecond per field), and
- compact: flat ``float64[]`` fields. rosidl hands those to Python as ``array.array('d')`` and
  takes ``array.array`` back without a per-element check, so the compact path here is a
  zero-copy ``np.frombuffer`` on the way in and one buffer copy on the way out: 100,000 goals
  convert in milliseconds (``bench/bench_node.py`` measures it).

Poses as 7-vectors ``(x, y, z, qx, qy, qz, qw)`` (ROS quaternion order), metres.
Only the functions that build message objects import message packages (lazily).
"""

from __future__ import annotations

import array
import struct
from typing import Sequence

import numpy as np

# pose validity has one definition for the core and the node (re-exported here)
from ..validate import QUAT_NORM_TOL, check_poses, describe_bad_pose

__all__ = ["QUAT_NORM_TOL", "f64_array", "i32_array", "u32_array", "as_f64", "pose_msg_to_pq",
           "poses_to_pq", "pq_to_pose_msg", "pq_to_pose_stamped", "check_poses",
           "describe_bad_pose", "duration_to_sec", "sec_to_duration", "joint_states",
           "joint_state_fields"]

# ---------------------------------------------------------------------- flat array fields
_U32 = struct.Struct("<I")
#: decoded name lists by their serialized bytes (a robot's joint_states repeat one list)
_NAMES: dict[bytes, tuple] = {}
_NAMES_KEPT = 64


def joint_state_fields(raw: bytes):
    """(names, positions) of a serialized ``sensor_msgs/JointState`` as DDS delivers it (plain
    little-endian CDR), read without building the Python message: rclpy's conversion of a 7-name
    message costs 3-4x the take of its bytes. ``names`` is a tuple of str (decoded once per
    distinct list), ``positions`` a float64 array of its own. None when the data is not plain
    little-endian CDR or ends early (the caller then deserializes it with rclpy, which says
    what is wrong).

    The layout (CDR, each field aligned to its size counted from the byte after the 4-byte
    encapsulation header): header (stamp: int32, uint32; frame_id: uint32 length with the
    NUL, bytes), name (uint32 count; per name a uint32 length with the NUL, bytes), position
    (uint32 count, float64 values), then velocity and effort (not read)."""
    size = len(raw)
    if size < 4 or raw[0] != 0 or raw[1] != 1:  # CDR_LE
        return None
    unpack = _U32.unpack_from
    try:  # offsets below are absolute: the payload starts at 4, itself 4-aligned
        o = 16 + unpack(raw, 12)[0]      # past the stamp and frame_id
        o = (o + 3) & ~3
        count = unpack(raw, o)[0]
        o += 4
        first = o
        spans = []
        for _ in range(count):
            o = (o + 3) & ~3
            n = unpack(raw, o)[0]
            o += 4
            if n == 0 or o + n > size:
                return None
            spans.append((o, o + n - 1))
            o += n
        block = raw[first:o]
        names = _NAMES.get(block)
        if names is None:
            names = tuple(raw[a:b].decode("utf-8", "replace") for a, b in spans)
            if len(_NAMES) >= _NAMES_KEPT:
                try:  # the oldest out (another thread may have taken it)
                    _NAMES.pop(next(iter(_NAMES)), None)
                except (RuntimeError, StopIteration):
                    pass
            _NAMES[block] = names
        o = (o + 3) & ~3
        count = unpack(raw, o)[0]
        o += 4
        if count:
            o = ((o - 4 + 7) & ~7) + 4
        positions = np.frombuffer(raw, dtype="<f8", count=count, offset=o).astype(np.float64)
    except (struct.error, ValueError):
        return None
    return names, positions


def f64_array(a) -> array.array:
    """Any array-like -> ``array.array('d')`` (C order), for ``float64[]`` message fields."""
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(a, dtype=np.float64).reshape(-1).data.cast("B"))
    return out


def i32_array(a) -> array.array:
    """-> ``array.array('i')`` for ``int32[]`` fields."""
    out = array.array("i")
    out.frombytes(np.ascontiguousarray(a, dtype=np.int32).reshape(-1).data.cast("B"))
    return out


def u32_array(a) -> array.array:
    """-> ``array.array('I')`` for ``uint32[]`` fields."""
    out = array.array("I")
    out.frombytes(np.ascontiguousarray(a, dtype=np.uint32).reshape(-1).data.cast("B"))
    return out


def as_f64(field) -> np.ndarray:
    """A ``float64[]`` field (``array.array('d')``, list or ndarray) -> 1-D float64 ndarray.

    For ``array.array('d')`` this is a view of its buffer (no copy): do not keep it past the
    message's lifetime if the message is reused.
    """
    if isinstance(field, array.array) and field.typecode == "d":
        return np.frombuffer(field, dtype=np.float64) if len(field) else np.zeros(0)
    return np.asarray(field, dtype=np.float64).reshape(-1)


# ---------------------------------------------------------------------- poses
def pose_msg_to_pq(pose) -> tuple:
    """``geometry_msgs/Pose`` -> (x, y, z, qx, qy, qz, qw)."""
    p, o = pose.position, pose.orientation
    return (p.x, p.y, p.z, o.x, o.y, o.z, o.w)


def poses_to_pq(poses: Sequence) -> tuple[np.ndarray, list[str]]:
    """``PoseStamped`` list -> ((n, 7) array, list of the n frame_ids)."""
    if not poses:
        return np.zeros((0, 7)), []
    pq = np.array([pose_msg_to_pq(ps.pose) for ps in poses], dtype=np.float64)
    return pq, [ps.header.frame_id for ps in poses]


def pq_to_pose_msg(pq, pose=None):
    """(7,) -> ``geometry_msgs/Pose`` (filled into ``pose`` if given)."""
    if pose is None:
        from geometry_msgs.msg import Pose  # noqa: PLC0415

        pose = Pose()
    v = [float(x) for x in pq]
    pose.position.x, pose.position.y, pose.position.z = v[0], v[1], v[2]
    o = pose.orientation
    o.x, o.y, o.z, o.w = v[3], v[4], v[5], v[6]
    return pose


def pq_to_pose_stamped(pq: np.ndarray, frame_id: str, stamp=None) -> list:
    """(n, 7) -> list of ``geometry_msgs/PoseStamped`` in ``frame_id``."""
    from geometry_msgs.msg import PoseStamped  # noqa: PLC0415

    out = []
    for row in np.asarray(pq, dtype=np.float64).reshape(-1, 7).tolist():
        ps = PoseStamped()
        ps.header.frame_id = frame_id
        if stamp is not None:
            ps.header.stamp = stamp
        pq_to_pose_msg(row, ps.pose)
        out.append(ps)
    return out


# ---------------------------------------------------------------------- time
def duration_to_sec(d) -> float:
    """``builtin_interfaces/Duration`` -> seconds (may be negative when sec < 0)."""
    return float(d.sec) + float(d.nanosec) * 1e-9


def sec_to_duration(t: float, d=None):
    """Seconds (>= 0) -> ``builtin_interfaces/Duration``."""
    if d is None:
        from builtin_interfaces.msg import Duration  # noqa: PLC0415

        d = Duration()
    ns = int(round(float(t) * 1e9))
    d.sec, d.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    return d


# ---------------------------------------------------------------------- joint states
def joint_states(names: Sequence[str], Q: np.ndarray, stamp=None, frame_id: str = "") -> list:
    """(N, n) joint values -> N ``sensor_msgs/JointState`` (positions only)."""
    from sensor_msgs.msg import JointState  # noqa: PLC0415

    names = list(names)
    out = []
    for row in np.asarray(Q, dtype=np.float64).reshape(-1, len(names)):
        js = JointState()
        js.name = names
        js.position = f64_array(row)
        js.header.frame_id = frame_id
        if stamp is not None:
            js.header.stamp = stamp
        out.append(js)
    return out
