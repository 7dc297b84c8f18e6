"""Batched forward kinematics and generalized <-> maximal coordinates.

The reference implementation, written once against ``xp`` (NumPy or CuPy); it never calls
compiled code (:func:`ros2_ik.api.fk_frames` chooses a compiled backend where one covers the
model). Shapes:
``q (B, nq)``, link poses ``T (B, L, 4, 4)`` expressed in the model's base frame.

The transform chain (per link l with parent p, URDF child frame == joint frame):
``T_base_l = T_base_p @ T_p_joint(origin) @ M_joint(q)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import const, get_xp
from ..errors import InvalidInputError, ShapeError
from ..model import JointType, Model
from ..validate import as_float_array, check_memory
from .se3 import (axis_angle_matrix, matrix_to_quat, pose_inverse, quat_multiply,
                  quat_normalize, quat_to_matrix, so3_exp)

__all__ = ["joint_motion", "fk", "fk_frames", "integrate", "difference",
           "wrap_q", "maximal_to_generalized", "check_link_poses"]


def joint_motion(model: Model, q):
    """Joint motion transforms ``M (B, L, 4, 4)`` (identity for fixed joints and the root)."""
    xp = get_xp(q)
    B = q.shape[0]
    g = model.tables.motion
    arr = model.xp_arrays(xp, q.dtype)
    M = xp.zeros((B, model.num_links, 4, 4), dtype=q.dtype)
    M[:, :, 0, 0] = M[:, :, 1, 1] = M[:, :, 2, 2] = M[:, :, 3, 3] = 1.0
    if g.rot_l.size:
        rl = const(xp, g.rot_l)
        ang = q[:, const(xp, g.rot_q)] * const(xp, g.rot_m, q.dtype) + const(
            xp, g.rot_o, q.dtype)
        M[:, rl, :3, :3] = axis_angle_matrix(arr["axis"][rl][None], ang)
    if g.pri_l.size:
        pl = const(xp, g.pri_l)
        d = q[:, const(xp, g.pri_q)] * const(xp, g.pri_m, q.dtype) + const(
            xp, g.pri_o, q.dtype)
        M[:, pl, :3, 3:4] = (arr["axis"][pl][None] * d[..., None])[..., None]
    for l in g.planar:
        s = int(model.q_start[l])
        M[:, l, :3, :3] = axis_angle_matrix(arr["axis"][l], q[:, s + 2])
        M[:, l, :3, 3] = q[:, s:s + 1] * arr["e1"][l] + q[:, s + 1:s + 2] * arr["e2"][l]
    for l in g.floating:
        s = int(model.q_start[l])
        M[:, l, :3, 3] = q[:, s:s + 3]
        M[:, l, :3, :3] = quat_to_matrix(q[:, s + 3:s + 7])
    return M


#: Work memory of one chunk of rows in the batched FK / Jacobian entry points [bytes].
CHUNK_BYTES = 8 << 20


def check_result_memory(B: int, out_row_bytes: int, what: str) -> None:
    """InvalidInputError when a result of B rows of ``out_row_bytes`` exceeds the budget."""
    check_memory(B * out_row_bytes, what, f"{B} rows", "split q into smaller batches")


def chunked_rows(q, fn, work_row_bytes: int, out_row_bytes: int, what: str):
    """``fn(q)`` computed over chunks of rows of ``q`` (B, n) into one preallocated result, so
    that the work arrays of a call stay near :data:`CHUNK_BYTES` whatever B (rows are
    independent: the result is the same as one call). A result larger than the memory budget
    is refused up front with a message saying how to split the call."""
    xp = get_xp(q)
    B = q.shape[0]
    check_result_memory(B, out_row_bytes, what)
    rows = max(1, CHUNK_BYTES // max(1, work_row_bytes))
    if B <= rows:
        return fn(q)
    first = fn(q[:rows])
    out = xp.empty((B,) + tuple(first.shape[1:]), dtype=first.dtype)
    out[:rows] = first
    for s in range(rows, B, rows):
        out[s:s + rows] = fn(q[s:s + rows])
    return out


def fk(model: Model, q, *, check: bool = True):
    """Poses of every link in the base frame.

    Args:
        q: (B, nq) or (nq,) joint coordinates (model.q_names order) [m, rad].
    Returns:
        T_base_link: (B, L, 4, 4), link order ``model.link_names`` (index 0 = base = identity).
    """
    if check:
        q = model.check_q(q)
        _check_fk_memory(model, q)
    xp = get_xp(q)
    A = model.xp_arrays(xp, q.dtype)["origin"][None] @ joint_motion(model, q)  # (B, L, 4, 4)
    T = xp.empty_like(A)
    T[:, 0] = A[:, 0]
    parent = model.link_parent
    for l in range(1, model.num_links):
        T[:, l] = T[:, int(parent[l])] @ A[:, l]
    return T


def _check_fk_memory(model: Model, q) -> None:
    check_memory(q.shape[0] * model.num_links * 128 * 3, "fk's link poses",
                     f"{q.shape[0]} x {model.num_links} poses",
                     "use fk_frames for the links you need, or split q into smaller batches")


def fk_frames(model: Model, q, frames):
    """Poses (B, F, 4, 4) of the named frames (links), in the base frame."""
    idx = model.link_indices(frames)
    q = model.check_q(q)
    ix = get_xp(q).asarray(idx)
    return chunked_rows(q, lambda qq: fk(model, qq, check=False)[:, ix],
                        model.num_links * 128 * 3, len(idx) * 128, "fk_frames' result")


def _angle_coords(model: Model) -> np.ndarray:
    """Indices of q coordinates that are angles wrapping modulo 2 pi (continuous, planar theta)."""
    return np.nonzero(model.q_continuous)[0]


def wrap_angle(a, xp=None):
    """Wrap angles to (-pi, pi]."""
    xp = xp or get_xp(a)
    return math.pi - xp.mod(math.pi - a, 2 * math.pi)


def wrap_q(model: Model, q):
    """Continuous-joint (and planar-angle) coordinates of q wrapped to (-pi, pi]."""
    xp = get_xp(q)
    idx = _angle_coords(model)
    if idx.size == 0:
        return q
    q = q.copy()
    ii = xp.asarray(idx)
    q[..., ii] = wrap_angle(q[..., ii], xp)
    return q


def integrate(model: Model, q, v):
    """``q (+) v``: move configuration q (B, nq) along velocity-space step v (B, nv).

    Floating joints: position += v_lin; orientation = exp(w) * quat (w in the joint's parent-side
    frame); the quaternion is re-normalized. Other coordinates add directly.
    """
    xp = get_xp(q, v)
    q = xp.array(q, copy=True)
    g = model.tables.motion
    if g.simple_q.size:
        q[..., const(xp, g.simple_q)] += v[..., const(xp, g.simple_v)]
    for l in g.floating:
        s, vs = int(model.q_start[l]), int(model.v_start[l])
        R = so3_exp(v[..., vs + 3:vs + 6])
        dq = matrix_to_quat(R)
        q[..., s + 3:s + 7] = quat_normalize(quat_multiply(dq, q[..., s + 3:s + 7]))
    return q


def difference(model: Model, q0, q1):
    """Velocity-space difference v (B, nv) with ``integrate(q0, v) == q1``; wrap-aware: angles of
    continuous joints take the short way round."""
    xp = get_xp(q0, q1)
    B = q0.shape[:-1]
    v = xp.zeros(B + (model.nv,), dtype=q0.dtype)
    qv = model.q_to_v
    simple = np.nonzero(qv >= 0)[0]
    if simple.size:
        d = q1[..., xp.asarray(simple)] - q0[..., xp.asarray(simple)]
        cont = xp.asarray(model.q_continuous[simple])
        d = xp.where(cont, wrap_angle(d, xp), d)
        v[..., xp.asarray(qv[simple])] = d
    from .se3 import so3_log  # noqa: PLC0415

    for l in model.tables.motion.floating:
        s, vs = int(model.q_start[l]), int(model.v_start[l])
        R0 = quat_to_matrix(q0[..., s + 3:s + 7])
        R1 = quat_to_matrix(q1[..., s + 3:s + 7])
        v[..., vs + 3:vs + 6] = so3_log(R1 @ xp.swapaxes(R0, -1, -2))
    return v


def check_link_poses(model: Model, T_links):
    """Validate a (B, L, 4, 4) (or (L, 4, 4)) array of link poses; returns it 4-D."""
    xp = get_xp(T_links)
    T = as_float_array(T_links, "T_links", f"shape (B, {model.num_links}, 4, 4)", xp)
    if T.ndim == 3:
        T = T[None]
    if T.ndim != 4 or T.shape[1:] != (model.num_links, 4, 4) or T.shape[0] == 0:
        raise ShapeError(f"T_links (link poses) must have shape (B, {model.num_links}, 4, 4) "
                         f"with B >= 1 for model {model.name!r}, got {tuple(T.shape)}")
    if not bool(xp.all(xp.isfinite(T))):
        raise InvalidInputError("link poses contain NaN or infinity")
    return T


def maximal_to_generalized(model: Model, T_links, q_ref=None):
    """Recover q (B, nq) from link poses (B, L, 4, 4) consistent with the tree (eval_ik).

    Each joint's motion is ``M = origin^-1 @ T_parent^-1 @ T_child``; its coordinates are read off
    M (angle about the axis via atan2, displacement along the axis, planar x/y/theta, floating
    position + quaternion). Angles come out in (-pi, pi]; with ``q_ref`` (B, nq) given they are
    taken nearest to ``q_ref`` (mod 2 pi) and floating quaternions take q_ref's sign, which makes
    ``q -> fk -> q`` exact for any q. Without q_ref, a revolute angle outside its limits is
    shifted by 2 pi when that brings it inside. Mimic joints have no coordinates of their own.
    """
    T = check_link_poses(model, T_links)
    xp = get_xp(T)
    B = T.shape[0]
    if q_ref is not None:
        q_ref = as_float_array(q_ref, "q_ref", f"shape ({B}, {model.nq}) or ({model.nq},)", xp)
        if q_ref.shape not in ((model.nq,), (B, model.nq)):
            raise ShapeError(f"q_ref must have shape ({B}, {model.nq}) or ({model.nq},) "
                             f"(coordinates {list(model.q_names)}), got {tuple(q_ref.shape)}")
        if not bool(xp.all(xp.isfinite(q_ref))):
            raise InvalidInputError("q_ref contains NaN or infinity; give finite joint values")
    origin = model.xp_arrays(xp, T.dtype)["origin"]
    parent = xp.asarray(np.maximum(model.link_parent, 0))
    Tp = T[:, parent]
    M = pose_inverse(Tp @ origin[None]) @ T  # (B, L, 4, 4); row 0 meaningless
    q = xp.zeros((B, model.nq), dtype=T.dtype)
    axis = model.xp_arrays(xp, T.dtype)["axis"]
    for l in range(1, model.num_links):
        s = int(model.q_start[l])
        if s < 0:
            continue
        t = model.joint_type[l]
        Ml = M[:, l]
        if t in (JointType.REVOLUTE, JointType.CONTINUOUS):
            R = Ml[:, :3, :3]
            vee = xp.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0],
                            R[:, 1, 0] - R[:, 0, 1]], axis=-1)
            sn = 0.5 * (vee @ axis[l])
            cs = 0.5 * (R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2] - 1.0)
            q[:, s] = xp.arctan2(sn, cs)
        elif t == JointType.PRISMATIC:
            q[:, s] = Ml[:, :3, 3] @ axis[l]
        elif t == JointType.PLANAR:
            arr = model.xp_arrays(xp, T.dtype)
            q[:, s] = Ml[:, :3, 3] @ arr["e1"][l]
            q[:, s + 1] = Ml[:, :3, 3] @ arr["e2"][l]
            R = Ml[:, :3, :3]
            vee = xp.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0],
                            R[:, 1, 0] - R[:, 0, 1]], axis=-1)
            q[:, s + 2] = xp.arctan2(0.5 * (vee @ axis[l]),
                                     0.5 * (R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2] - 1.0))
        elif t == JointType.FLOATING:
            q[:, s:s + 3] = Ml[:, :3, 3]
            quat = matrix_to_quat(Ml[:, :3, :3])
            if q_ref is not None:
                ref = xp.asarray(q_ref)[..., s + 3:s + 7]
                flip = xp.sum(quat * ref, axis=-1) < 0
                quat = xp.where(flip[:, None], -quat, quat)
            q[:, s + 3:s + 7] = quat
    angles = np.nonzero(model.q_continuous | ((model.q_to_v >= 0) & _is_revolute_q(model)))[0]
    if angles.size:
        ai = xp.asarray(angles)
        if q_ref is not None:
            ref = xp.asarray(q_ref, dtype=T.dtype)
            if ref.ndim == 1:
                ref = ref[None]
            ref = ref[:, ai]
            q[:, ai] = ref + wrap_angle(q[:, ai] - ref, xp)
        else:
            lo = xp.asarray(model.lower[angles], dtype=T.dtype)
            hi = xp.asarray(model.upper[angles], dtype=T.dtype)
            a = q[:, ai]
            a = xp.where(a < lo, a + 2 * math.pi, a)
            a = xp.where(a > hi, a - 2 * math.pi, a)
            q[:, ai] = xp.where((a >= lo) & (a <= hi), a, q[:, ai])
    return q


def _is_revolute_q(model: Model) -> np.ndarray:
    out = np.zeros(model.nq, dtype=bool)
    for i in range(model.nq):
        out[i] = model.joint_type[model.q_joint[i]] in (JointType.REVOLUTE, JointType.CONTINUOUS)
    return out
