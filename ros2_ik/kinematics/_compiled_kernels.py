"""Numba kernels of the compiled FK and Jacobian (imported only when Numba is available).

See :mod:`ros2_ik.kinematics.compiled` for the table layout, the scope and the contract. Every
function has ``cache=True``: the machine code is compiled once and cached on disk next to this
file (or in ``NUMBA_CACHE_DIR``).

Table of the tree (one row per link l, parents before children):
``ints (L, 3)``: parent link, joint type (:class:`ros2_ik.model.JointType`), coordinate index
(a mimic joint's leader; -1 for a fixed joint); ``floats (L, 23)``: the parent->joint origin's
top three rows (12), axis (3), planar e1 (3), planar e2 (3), mimic multiplier, mimic offset.
"""

import math

import numba as nb
import numpy as np

njit = nb.njit(cache=True, nogil=True)
njit_inline = nb.njit(cache=True, nogil=True, inline="always")
njit_parallel = nb.njit(cache=True, nogil=True, parallel=True)

# joint types (ros2_ik.model.JointType)
_REVOLUTE, _CONTINUOUS, _PRISMATIC, _PLANAR, _FLOATING = 1, 2, 3, 4, 5
# float columns
_AX, _E1, _E2, _MULT, _OFF = 12, 15, 18, 21, 22


@njit_inline
def _rotation(ax, ay, az, ang, M):
    """M[:3, :3] = rotation about the unit axis by ang: c I + s [a]x + (1 - c) a a^T."""
    c = math.cos(ang)
    s = math.sin(ang)
    C = 1.0 - c
    M[0, 0] = c + ax * ax * C
    M[0, 1] = ax * ay * C - az * s
    M[0, 2] = ax * az * C + ay * s
    M[1, 0] = ay * ax * C + az * s
    M[1, 1] = c + ay * ay * C
    M[1, 2] = ay * az * C - ax * s
    M[2, 0] = az * ax * C - ay * s
    M[2, 1] = az * ay * C + ax * s
    M[2, 2] = c + az * az * C


@njit_inline
def _joint_motion(q, l, ints, fl, M):
    """M (3, 4) = the motion of link l's joint at configuration q (identity when fixed)."""
    for a in range(3):
        for b in range(4):
            M[a, b] = 1.0 if a == b else 0.0
    t = ints[l, 1]
    i = ints[l, 2]
    f = fl[l]
    if t == _REVOLUTE or t == _CONTINUOUS:
        _rotation(f[_AX], f[_AX + 1], f[_AX + 2], q[i] * f[_MULT] + f[_OFF], M)
    elif t == _PRISMATIC:
        d = q[i] * f[_MULT] + f[_OFF]
        for a in range(3):
            M[a, 3] = f[_AX + a] * d
    elif t == _PLANAR:
        _rotation(f[_AX], f[_AX + 1], f[_AX + 2], q[i + 2], M)
        for a in range(3):
            M[a, 3] = q[i] * f[_E1 + a] + q[i + 1] * f[_E2 + a]
    elif t == _FLOATING:
        x, y, z, w = q[i + 3], q[i + 4], q[i + 5], q[i + 6]
        n = math.sqrt(x * x + y * y + z * z + w * w)
        x, y, z, w = x / n, y / n, z / n, w / n
        M[0, 0] = 1 - 2 * (y * y + z * z)
        M[0, 1] = 2 * (x * y - z * w)
        M[0, 2] = 2 * (x * z + y * w)
        M[1, 0] = 2 * (x * y + z * w)
        M[1, 1] = 1 - 2 * (x * x + z * z)
        M[1, 2] = 2 * (y * z - x * w)
        M[2, 0] = 2 * (x * z - y * w)
        M[2, 1] = 2 * (y * z + x * w)
        M[2, 2] = 1 - 2 * (x * x + y * y)
        for a in range(3):
            M[a, 3] = q[i + a]


@njit_inline
def _link_poses(q, links, ints, fl, T, M, A):
    """T[l] (3, 4) = pose of link l in the base frame, for the links ``links`` (ascending, every
    ancestor of a listed link listed too); T[0] is the base (identity)."""
    for a in range(3):
        for b in range(4):
            T[0, a, b] = 1.0 if a == b else 0.0
    for k in range(links.shape[0]):
        l = links[k]
        p = ints[l, 0]
        _joint_motion(q, l, ints, fl, M)
        f = fl[l]
        # A = origin @ M
        for a in range(3):
            o0, o1, o2 = f[4 * a], f[4 * a + 1], f[4 * a + 2]
            for b in range(4):
                A[a, b] = o0 * M[0, b] + o1 * M[1, b] + o2 * M[2, b]
            A[a, 3] += f[4 * a + 3]
        # T[l] = T[p] @ A
        for a in range(3):
            t0, t1, t2 = T[p, a, 0], T[p, a, 1], T[p, a, 2]
            for b in range(4):
                T[l, a, b] = t0 * A[0, b] + t1 * A[1, b] + t2 * A[2, b]
            T[l, a, 3] += T[p, a, 3]


@njit_inline
def q_valid(q, floating_starts, max_value):
    """True when q (B, nq) is finite, within +-max_value and every floating quaternion is
    non-zero (what :meth:`ros2_ik.model.Model.check_q` demands of a float array)."""
    for r in range(q.shape[0]):
        for i in range(q.shape[1]):
            v = q[r, i]
            if not (abs(v) <= max_value):  # NaN fails too
                return False
        for s in floating_starts:
            n = 0.0
            for a in range(3, 7):
                n += q[r, s + a] * q[r, s + a]
            if not n > 1e-12:
                return False
    return True


@njit_inline
def _frames_row(q, r, links, frames, ints, fl, out, T, M, A):
    _link_poses(q[r], links, ints, fl, T, M, A)
    for k in range(frames.shape[0]):
        l = frames[k]
        for a in range(3):
            for b in range(4):
                out[r, k, a, b] = T[l, a, b]
        out[r, k, 3, 0] = 0.0
        out[r, k, 3, 1] = 0.0
        out[r, k, 3, 2] = 0.0
        out[r, k, 3, 3] = 1.0


@njit_inline
def _frames_serial(q, floating, max_value, links, frames, ints, fl, out):
    """out (B, F, 4, 4) = poses of the links ``frames`` at each row of q (one thread)."""
    if max_value >= 0 and not q_valid(q, floating, max_value):
        return False
    T = np.empty((ints.shape[0], 3, 4))
    M = np.empty((3, 4))
    A = np.empty((3, 4))
    for r in range(q.shape[0]):
        _frames_row(q, r, links, frames, ints, fl, out, T, M, A)
    return True


@njit_inline
def _world_columns(f, T, ints, fl, cint, cfl, J):
    """J (6, n) = the world Jacobian of link f (reference point: its origin, base axes), active
    columns only. cint (C, 3): link, is_rot, active column (-1: frozen); cfl (C, 4): direction
    in the joint frame, factor (a mimic's multiplier)."""
    for a in range(6):
        for b in range(J.shape[1]):
            J[a, b] = 0.0
    px, py, pz = T[f, 0, 3], T[f, 1, 3], T[f, 2, 3]
    for c in range(cint.shape[0]):
        l = cint[c, 0]
        col = cint[c, 2]
        if col < 0 or l > f:
            continue
        a_ = f  # is l f or an ancestor of f? (parents have smaller indices)
        while a_ > l:
            a_ = ints[a_, 0]
        if a_ != l:
            continue
        p = ints[l, 0]
        fo = fl[l]
        d0, d1, d2 = cfl[c, 0], cfl[c, 1], cfl[c, 2]
        o0 = fo[0] * d0 + fo[1] * d1 + fo[2] * d2  # world axis = R_parent R_origin dir
        o1 = fo[4] * d0 + fo[5] * d1 + fo[6] * d2
        o2 = fo[8] * d0 + fo[9] * d1 + fo[10] * d2
        fac = cfl[c, 3]
        ax = fac * (T[p, 0, 0] * o0 + T[p, 0, 1] * o1 + T[p, 0, 2] * o2)
        ay = fac * (T[p, 1, 0] * o0 + T[p, 1, 1] * o1 + T[p, 1, 2] * o2)
        az = fac * (T[p, 2, 0] * o0 + T[p, 2, 1] * o1 + T[p, 2, 2] * o2)
        if cint[c, 1] != 0:
            dx, dy, dz = px - T[l, 0, 3], py - T[l, 1, 3], pz - T[l, 2, 3]
            J[0, col] += ay * dz - az * dy
            J[1, col] += az * dx - ax * dz
            J[2, col] += ax * dy - ay * dx
            J[3, col] += ax
            J[4, col] += ay
            J[5, col] += az
        else:
            J[0, col] += ax
            J[1, col] += ay
            J[2, col] += az


@njit_inline
def _jacobian_row(q, r, links, pairs, express, ints, fl, cint, cfl, out, T, M, A, JA, JB):
    """out[r, k] (6, n) = Jacobian of link pairs[k, 1] relative to link pairs[k, 0] (0: the
    base), expressed in the base axes (express 0), B's axes (1) or A's axes (2)."""
    _link_poses(q[r], links, ints, fl, T, M, A)
    n = out.shape[3]
    for k in range(pairs.shape[0]):
        ia, ib = pairs[k, 0], pairs[k, 1]
        _world_columns(ib, T, ints, fl, cint, cfl, JB)
        if ia != 0:  # v = J_v,B - J_v,A + d x J_w,A; w = J_w,B - J_w,A (d = p_B - p_A)
            _world_columns(ia, T, ints, fl, cint, cfl, JA)
            dx = T[ib, 0, 3] - T[ia, 0, 3]
            dy = T[ib, 1, 3] - T[ia, 1, 3]
            dz = T[ib, 2, 3] - T[ia, 2, 3]
            for b in range(n):
                wx, wy, wz = JA[3, b], JA[4, b], JA[5, b]
                JB[0, b] += dy * wz - dz * wy - JA[0, b]
                JB[1, b] += dz * wx - dx * wz - JA[1, b]
                JB[2, b] += dx * wy - dy * wx - JA[2, b]
                JB[3, b] -= wx
                JB[4, b] -= wy
                JB[5, b] -= wz
        e = ib if express == 1 else ia
        for b in range(n):
            for h in range(2):
                x, y, z = JB[3 * h, b], JB[3 * h + 1, b], JB[3 * h + 2, b]
                if express == 0:
                    out[r, k, 3 * h, b] = x
                    out[r, k, 3 * h + 1, b] = y
                    out[r, k, 3 * h + 2, b] = z
                else:  # R_e^T [x y z]
                    for a in range(3):
                        out[r, k, 3 * h + a, b] = (T[e, 0, a] * x + T[e, 1, a] * y
                                                   + T[e, 2, a] * z)


@njit_inline
def _jacobians_serial(q, floating, max_value, links, pairs, express, ints, fl, cint, cfl, out):
    """out (B, K, 6, n): the Jacobians of the link pairs at each row of q (one thread)."""
    if max_value >= 0 and not q_valid(q, floating, max_value):
        return False
    n = out.shape[3]
    T = np.empty((ints.shape[0], 3, 4))
    M = np.empty((3, 4))
    A = np.empty((3, 4))
    JA = np.empty((6, n))
    JB = np.empty((6, n))
    for r in range(q.shape[0]):
        _jacobian_row(q, r, links, pairs, express, ints, fl, cint, cfl, out, T, M, A, JA, JB)
    return True


# Packed entry points: two arrays hold the model's table and the selection (see compiled.py's
# _pack), so that a call passes five arguments (Numba's dispatch costs about 0.1-0.5 us per
# argument, as much as the FK of a 7-DOF arm), and unpacking them takes views only.
@njit_inline
def _unpack(idata, fdata):
    L, nl, nk, nfl, C = idata[0], idata[1], idata[2], idata[3], idata[4]
    o = 8
    ints = idata[o:o + 3 * L].reshape((L, 3))
    o += 3 * L
    floating = idata[o:o + nfl]
    o += nfl
    links = idata[o:o + nl]
    o += nl
    sel = idata[o:o + 2 * nk]  # frames (nk) or pairs (nk, 2)
    o += 2 * nk
    cint = idata[o:o + 3 * C].reshape((C, 3))
    fl = fdata[:23 * L].reshape((L, 23))
    cfl = fdata[23 * L:23 * L + 4 * C].reshape((C, 4))
    return ints, fl, floating, links, sel, nk, cint, cfl, idata[5]


@njit
def frames(q, idata, fdata, max_value, out):
    """out (B, F, 4, 4) = poses of the packed selection's frames; False (nothing computed) when
    q fails :func:`q_valid` (max_value < 0: not checked)."""
    ints, fl, floating, links, sel, nk, _, _, _ = _unpack(idata, fdata)
    return _frames_serial(q, floating, max_value, links, sel[:nk], ints, fl, out)


@njit_parallel
def frames_parallel(q, idata, fdata, max_value, out):
    """:func:`frames` with rows spread over the cores (chunks of 64 rows)."""
    ints, fl, floating, links, sel, nk, _, _, _ = _unpack(idata, fdata)
    if max_value >= 0 and not q_valid(q, floating, max_value):
        return False
    frames_ = sel[:nk]
    B = q.shape[0]
    for c in nb.prange((B + 63) // 64):
        T = np.empty((ints.shape[0], 3, 4))
        M = np.empty((3, 4))
        A = np.empty((3, 4))
        for r in range(64 * c, min(B, 64 * c + 64)):
            _frames_row(q, r, links, frames_, ints, fl, out, T, M, A)
    return True


@njit
def jacobians(q, idata, fdata, max_value, out):
    """out (B, K, 6, n) = the Jacobians of the packed selection's link pairs; False as
    :func:`frames`."""
    ints, fl, floating, links, sel, nk, cint, cfl, express = _unpack(idata, fdata)
    return _jacobians_serial(q, floating, max_value, links, sel.reshape((nk, 2)), express,
                             ints, fl, cint, cfl, out)


@njit_parallel
def jacobians_parallel(q, idata, fdata, max_value, out):
    """:func:`jacobians` with rows spread over the cores (chunks of 64 rows)."""
    ints, fl, floating, links, sel, nk, cint, cfl, express = _unpack(idata, fdata)
    if max_value >= 0 and not q_valid(q, floating, max_value):
        return False
    pairs = sel.reshape((nk, 2))
    B = q.shape[0]
    n = out.shape[3]
    for c in nb.prange((B + 63) // 64):
        T = np.empty((ints.shape[0], 3, 4))
        M = np.empty((3, 4))
        A = np.empty((3, 4))
        JA = np.empty((6, n))
        JB = np.empty((6, n))
        for r in range(64 * c, min(B, 64 * c + 64)):
            _jacobian_row(q, r, links, pairs, express, ints, fl, cint, cfl, out, T, M, A, JA,
                          JB)
    return True
