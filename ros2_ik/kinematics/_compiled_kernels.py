"""Numba kernels of the compiled FK and Jacobian (imported only when Numba is available).

See :mod:`ros2_ik.kinematics.compiled` for the scope and the contract. Every function has
``cache=True``: the machine code is compiled once and cached on disk next to this file (or in
``NUMBA_CACHE_DIR``).

The kernels read the model and the selection from two flat arrays (``compiled._pack``), by
offsets, never through reshaped views: Numba's ``reshape`` of a slice costs about 80 ns, and a
7-DOF arm's whole FK costs about 0.5 us. ``idata`` (int64): a head of 8 (links L, needed links
nl, selected frames or pairs nk, floating joints nfl, contributions C, express code, 0, 0),
then per link (3): parent link, joint type (:class:`ros2_ik.model.JointType`), coordinate
index (a mimic joint's leader; -1 for a fixed joint); the floating joints' first q indices
(nfl); the needed links, ascending (nl); the selection (2 nk: frames, or pairs); per
contribution (3): link, is rotation, active column (-1: frozen). ``fdata`` (float64): per link
(23): the parent->joint origin's top three rows (12), axis (3), planar e1 (3), planar e2 (3),
mimic multiplier, mimic offset; per contribution (4): direction in the joint frame (3), factor
(a mimic's multiplier). Poses are kept as flat (3, 4) blocks of 12 per link.
"""

import math

import numba as nb
import numpy as np

njit = nb.njit(cache=True, nogil=True)
njit_inline = nb.njit(cache=True, nogil=True, inline="always")
njit_parallel = nb.njit(cache=True, nogil=True, parallel=True)

# joint types (ros2_ik.model.JointType)
_REVOLUTE, _CONTINUOUS, _PRISMATIC, _PLANAR, _FLOATING = 1, 2, 3, 4, 5
# float columns per link
_FL, _AX, _E1, _E2, _MULT, _OFF = 23, 12, 15, 18, 21, 22
_HEAD = 8


@njit_inline
def _offsets(idata):
    """(links L, the needed links' offset, their count, the selection's offset, its count,
    the floating starts' offset, their count, the contributions' offset, their count, the
    contributions' float offset) in ``idata`` / ``fdata``."""
    L, nl, nk, nfl, C = idata[0], idata[1], idata[2], idata[3], idata[4]
    o_flt = _HEAD + 3 * L
    o_lnk = o_flt + nfl
    o_sel = o_lnk + nl
    o_con = o_sel + 2 * nk
    return L, o_lnk, nl, o_sel, nk, o_flt, nfl, o_con, C, _FL * L


@njit_inline
def _dot3(v, o, x, y, z):
    return v[o] * x + v[o + 1] * y + v[o + 2] * z


@njit_inline
def _link_poses(q, r, idata, fdata, o_lnk, nl, T):
    """T[12 l:12 l + 12] = pose (3, 4) of link l in the base frame at q[r], for the needed
    links (ascending: every ancestor of a listed link is listed); T[0:12] is the base
    (identity)."""
    for a in range(12):
        T[a] = 1.0 if a % 5 == 0 else 0.0
    for k in range(nl):
        l = idata[o_lnk + k]
        p = idata[_HEAD + 3 * l]
        t = idata[_HEAD + 3 * l + 1]
        i = idata[_HEAD + 3 * l + 2]
        f = _FL * l
        # the joint's motion: rotation r.., translation d.
        r00, r01, r02 = 1.0, 0.0, 0.0
        r10, r11, r12 = 0.0, 1.0, 0.0
        r20, r21, r22 = 0.0, 0.0, 1.0
        d0, d1, d2 = 0.0, 0.0, 0.0
        if t == _REVOLUTE or t == _CONTINUOUS or t == _PLANAR:
            ax, ay, az = fdata[f + _AX], fdata[f + _AX + 1], fdata[f + _AX + 2]
            if t == _PLANAR:
                ang = q[r, i + 2]
                u = q[r, i]
                v = q[r, i + 1]
                d0 = u * fdata[f + _E1] + v * fdata[f + _E2]
                d1 = u * fdata[f + _E1 + 1] + v * fdata[f + _E2 + 1]
                d2 = u * fdata[f + _E1 + 2] + v * fdata[f + _E2 + 2]
            else:
                ang = q[r, i] * fdata[f + _MULT] + fdata[f + _OFF]
            c = math.cos(ang)
            s = math.sin(ang)
            C = 1.0 - c
            r00 = c + ax * ax * C
            r01 = ax * ay * C - az * s
            r02 = ax * az * C + ay * s
            r10 = ay * ax * C + az * s
            r11 = c + ay * ay * C
            r12 = ay * az * C - ax * s
            r20 = az * ax * C - ay * s
            r21 = az * ay * C + ax * s
            r22 = c + az * az * C
        elif t == _PRISMATIC:
            dd = q[r, i] * fdata[f + _MULT] + fdata[f + _OFF]
            d0 = fdata[f + _AX] * dd
            d1 = fdata[f + _AX + 1] * dd
            d2 = fdata[f + _AX + 2] * dd
        elif t == _FLOATING:
            x, y, z, w = q[r, i + 3], q[r, i + 4], q[r, i + 5], q[r, i + 6]
            n = math.sqrt(x * x + y * y + z * z + w * w)
            x, y, z, w = x / n, y / n, z / n, w / n
            r00 = 1 - 2 * (y * y + z * z)
            r01 = 2 * (x * y - z * w)
            r02 = 2 * (x * z + y * w)
            r10 = 2 * (x * y + z * w)
            r11 = 1 - 2 * (x * x + z * z)
            r12 = 2 * (y * z - x * w)
            r20 = 2 * (x * z - y * w)
            r21 = 2 * (y * z + x * w)
            r22 = 1 - 2 * (x * x + y * y)
            d0, d1, d2 = q[r, i], q[r, i + 1], q[r, i + 2]
        # A = origin @ motion, row by row
        a00 = _dot3(fdata, f, r00, r10, r20)
        a01 = _dot3(fdata, f, r01, r11, r21)
        a02 = _dot3(fdata, f, r02, r12, r22)
        a03 = _dot3(fdata, f, d0, d1, d2) + fdata[f + 3]
        a10 = _dot3(fdata, f + 4, r00, r10, r20)
        a11 = _dot3(fdata, f + 4, r01, r11, r21)
        a12 = _dot3(fdata, f + 4, r02, r12, r22)
        a13 = _dot3(fdata, f + 4, d0, d1, d2) + fdata[f + 7]
        a20 = _dot3(fdata, f + 8, r00, r10, r20)
        a21 = _dot3(fdata, f + 8, r01, r11, r21)
        a22 = _dot3(fdata, f + 8, r02, r12, r22)
        a23 = _dot3(fdata, f + 8, d0, d1, d2) + fdata[f + 11]
        pb = 12 * p
        lb = 12 * l
        for a in range(3):  # T[l] = T[p] @ A
            t0, t1, t2 = T[pb + 4 * a], T[pb + 4 * a + 1], T[pb + 4 * a + 2]
            T[lb + 4 * a] = t0 * a00 + t1 * a10 + t2 * a20
            T[lb + 4 * a + 1] = t0 * a01 + t1 * a11 + t2 * a21
            T[lb + 4 * a + 2] = t0 * a02 + t1 * a12 + t2 * a22
            T[lb + 4 * a + 3] = t0 * a03 + t1 * a13 + t2 * a23 + T[pb + 4 * a + 3]


@njit_inline
def q_valid(q, idata, o_flt, nfl, max_value):
    """True when q (B, nq) is finite, within +-max_value and every floating quaternion is
    non-zero (what :meth:`ros2_ik.model.Model.check_q` demands of a float array)."""
    for r in range(q.shape[0]):
        for i in range(q.shape[1]):
            v = q[r, i]
            if not (abs(v) <= max_value):  # NaN fails too
                return False
        for j in range(nfl):
            s = idata[o_flt + j]
            n = 0.0
            for a in range(3, 7):
                n += q[r, s + a] * q[r, s + a]
            if not n > 1e-12:
                return False
    return True


@njit_inline
def _frames_row(q, r, idata, fdata, o_lnk, nl, o_sel, nk, out, T):
    _link_poses(q, r, idata, fdata, o_lnk, nl, T)
    for k in range(nk):
        lb = 12 * idata[o_sel + k]
        for a in range(3):
            for b in range(4):
                out[r, k, a, b] = T[lb + 4 * a + b]
        out[r, k, 3, 0] = 0.0
        out[r, k, 3, 1] = 0.0
        out[r, k, 3, 2] = 0.0
        out[r, k, 3, 3] = 1.0


@njit
def frames(q, idata, fdata, max_value, out):
    """out (B, F, 4, 4) = poses of the packed selection's frames; False (nothing computed) when
    q fails :func:`q_valid` (max_value < 0: not checked)."""
    L, o_lnk, nl, o_sel, nk, o_flt, nfl, _, _, _ = _offsets(idata)
    if max_value >= 0 and not q_valid(q, idata, o_flt, nfl, max_value):
        return False
    T = np.empty(12 * L)
    for r in range(q.shape[0]):
        _frames_row(q, r, idata, fdata, o_lnk, nl, o_sel, nk, out, T)
    return True


@njit_parallel
def frames_parallel(q, idata, fdata, max_value, out):
    """:func:`frames` with rows spread over the cores (chunks of 64 rows)."""
    L, o_lnk, nl, o_sel, nk, o_flt, nfl, _, _, _ = _offsets(idata)
    if max_value >= 0 and not q_valid(q, idata, o_flt, nfl, max_value):
        return False
    B = q.shape[0]
    for c in nb.prange((B + 63) // 64):
        T = np.empty(12 * L)
        for r in range(64 * c, min(B, 64 * c + 64)):
            _frames_row(q, r, idata, fdata, o_lnk, nl, o_sel, nk, out, T)
    return True


@njit_inline
def _world_columns(f, T, idata, fdata, o_con, C, o_cfl, J):
    """J (6, n) = the world Jacobian of link f (reference point: its origin, base axes), active
    columns only, from the contributions (link, is rotation, active column or -1 for a frozen
    one; direction in the joint frame, factor)."""
    for a in range(6):
        for b in range(J.shape[1]):
            J[a, b] = 0.0
    fb = 12 * f
    px, py, pz = T[fb + 3], T[fb + 7], T[fb + 11]
    for c in range(C):
        l = idata[o_con + 3 * c]
        col = idata[o_con + 3 * c + 2]
        if col < 0 or l > f:
            continue
        a_ = f  # is l f or an ancestor of f? (parents have smaller indices)
        while a_ > l:
            a_ = idata[_HEAD + 3 * a_]
        if a_ != l:
            continue
        pb = 12 * idata[_HEAD + 3 * l]
        fo = _FL * l
        g = o_cfl + 4 * c
        d0, d1, d2 = fdata[g], fdata[g + 1], fdata[g + 2]
        o0 = _dot3(fdata, fo, d0, d1, d2)  # world axis = R_parent R_origin dir
        o1 = _dot3(fdata, fo + 4, d0, d1, d2)
        o2 = _dot3(fdata, fo + 8, d0, d1, d2)
        fac = fdata[g + 3]
        ax = fac * _dot3(T, pb, o0, o1, o2)
        ay = fac * _dot3(T, pb + 4, o0, o1, o2)
        az = fac * _dot3(T, pb + 8, o0, o1, o2)
        if idata[o_con + 3 * c + 1] != 0:
            lb = 12 * l
            dx, dy, dz = px - T[lb + 3], py - T[lb + 7], pz - T[lb + 11]
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
def _jacobian_row(q, r, idata, fdata, out, T, JA, JB):
    """out[r, k] (6, n) = Jacobian of link pairs[k, 1] relative to link pairs[k, 0] (0: the
    base), expressed in the base axes (express 0), B's axes (1) or A's axes (2)."""
    _, o_lnk, nl, o_sel, nk, _, _, o_con, C, o_cfl = _offsets(idata)
    express = idata[5]
    _link_poses(q, r, idata, fdata, o_lnk, nl, T)
    n = out.shape[3]
    for k in range(nk):
        ia, ib = idata[o_sel + 2 * k], idata[o_sel + 2 * k + 1]
        _world_columns(ib, T, idata, fdata, o_con, C, o_cfl, JB)
        if ia != 0:  # v = J_v,B - J_v,A + d x J_w,A; w = J_w,B - J_w,A (d = p_B - p_A)
            _world_columns(ia, T, idata, fdata, o_con, C, o_cfl, JA)
            dx = T[12 * ib + 3] - T[12 * ia + 3]
            dy = T[12 * ib + 7] - T[12 * ia + 7]
            dz = T[12 * ib + 11] - T[12 * ia + 11]
            for b in range(n):
                wx, wy, wz = JA[3, b], JA[4, b], JA[5, b]
                JB[0, b] += dy * wz - dz * wy - JA[0, b]
                JB[1, b] += dz * wx - dx * wz - JA[1, b]
                JB[2, b] += dx * wy - dy * wx - JA[2, b]
                JB[3, b] -= wx
                JB[4, b] -= wy
                JB[5, b] -= wz
        eb = 12 * (ib if express == 1 else ia)
        for b in range(n):
            for h in range(2):
                x, y, z = JB[3 * h, b], JB[3 * h + 1, b], JB[3 * h + 2, b]
                if express == 0:
                    out[r, k, 3 * h, b] = x
                    out[r, k, 3 * h + 1, b] = y
                    out[r, k, 3 * h + 2, b] = z
                else:  # R_e^T [x y z]
                    for a in range(3):
                        out[r, k, 3 * h + a, b] = (T[eb + a] * x + T[eb + 4 + a] * y
                                                   + T[eb + 8 + a] * z)


@njit
def jacobians(q, idata, fdata, max_value, out):
    """out (B, K, 6, n) = the Jacobians of the packed selection's link pairs; False as
    :func:`frames`."""
    L, _, _, _, _, o_flt, nfl, _, _, _ = _offsets(idata)
    if max_value >= 0 and not q_valid(q, idata, o_flt, nfl, max_value):
        return False
    n = out.shape[3]
    T = np.empty(12 * L)
    JA = np.empty((6, n))
    JB = np.empty((6, n))
    for r in range(q.shape[0]):
        _jacobian_row(q, r, idata, fdata, out, T, JA, JB)
    return True


@njit_parallel
def jacobians_parallel(q, idata, fdata, max_value, out):
    """:func:`jacobians` with rows spread over the cores (chunks of 64 rows)."""
    L, _, _, _, _, o_flt, nfl, _, _, _ = _offsets(idata)
    if max_value >= 0 and not q_valid(q, idata, o_flt, nfl, max_value):
        return False
    B = q.shape[0]
    n = out.shape[3]
    for c in nb.prange((B + 63) // 64):
        T = np.empty(12 * L)
        JA = np.empty((6, n))
        JB = np.empty((6, n))
        for r in range(64 * c, min(B, 64 * c + 64)):
            _jacobian_row(q, r, idata, fdata, out, T, JA, JB)
    return True


_ENTRY_POINTS = None


def entry_points():
    """(frames, jacobians) as C functions (Numba ``cfunc``s, cached on disk like the rest):
    ``int32 fn(double *q, int64 B, int64 nq, int64 *idata, int64 ni, double *fdata, int64 nf,
    double max_value, double *out, int64 a, int64 b)`` runs :func:`frames` / :func:`jacobians`
    on q (B, nq) into out (B, nk, a, b) and returns 1, or 0 as they return False. The addresses
    :mod:`.native`'s C call path calls; made on the first call (a second or two from the disk
    cache), not at import."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        from numba import types as nt  # noqa: PLC0415

        f64p, i64 = nt.CPointer(nt.float64), nt.int64
        sig = nt.int32(f64p, i64, i64, nt.CPointer(i64), i64, f64p, i64, nt.float64, f64p, i64,
                       i64)
        cfunc = nb.cfunc(sig, cache=True, nogil=True)

        @cfunc
        def frames_c(qp, B, nq, ip, ni, fp, nf, max_value, op, a, b):
            idata = nb.carray(ip, (ni,))
            out = nb.carray(op, (B, idata[2], a, b))
            ok = frames(nb.carray(qp, (B, nq)), idata, nb.carray(fp, (nf,)), max_value, out)
            return 1 if ok else 0

        @cfunc
        def jacobians_c(qp, B, nq, ip, ni, fp, nf, max_value, op, a, b):
            idata = nb.carray(ip, (ni,))
            out = nb.carray(op, (B, idata[2], a, b))
            ok = jacobians(nb.carray(qp, (B, nq)), idata, nb.carray(fp, (nf,)), max_value, out)
            return 1 if ok else 0

        _ENTRY_POINTS = (frames_c, jacobians_c)
    return _ENTRY_POINTS
