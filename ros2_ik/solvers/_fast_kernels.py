"""Numba kernels of the compiled LM fast path (imported only when Numba is available).

See :mod:`ros2_ik.solvers.fast` for the scope and the contract. Module-level functions with
``cache=True``: the machine code is compiled once and cached on disk next to this file (or in
``NUMBA_CACHE_DIR``).
"""

import math

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .sincos import COS_COEF, P1, P2, P3, REDUCE_MAX, SIN_COEF, TWO_OVER_PI

njit = nb.njit(cache=True, fastmath=False, nogil=True)
njit_inline = nb.njit(cache=True, fastmath=False, nogil=True, inline="always")


@intrinsic
def monotonic_ns(typingctx):
    """CLOCK_MONOTONIC in nanoseconds (the clock of time.monotonic_ns), from compiled code."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        ts_t = ir.LiteralStructType([i64, i64])
        fnty = ir.FunctionType(i32, [i32, ts_t.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, ts_t)
        builder.call(fn, [ir.Constant(i32, 1), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1000000000)), nsec)

    return sig, codegen


@intrinsic
def read_flag(typingctx, arr):
    """Atomic (monotonic) load of ``arr[0]`` (int64): a flag another thread may set while a
    kernel runs; a plain load could be hoisted out of the loop by the compiler."""
    sig = types.int64(arr)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(ary.data, "monotonic", 8)

    return sig, codegen


S0, S1, S2, S3, S4, S5 = SIN_COEF
C0, C1, C2, C3, C4, C5 = COS_COEF


@njit_inline
def sincos(x):
    """(sin x, cos x) by :func:`.sincos.sincos`'s recipe, step for step (the generated host
    C++ does the same steps, so its rows stay these bit for bit)."""
    if not (x <= REDUCE_MAX and x >= -REDUCE_MAX):
        return math.sin(x), math.cos(x)
    k = np.floor(x * TWO_OVER_PI + 0.5)
    r = ((x - k * P1) - k * P2) - k * P3
    z = r * r
    ps = ((((S0 * z + S1) * z + S2) * z + S3) * z + S4) * z + S5
    pc = ((((C0 * z + C1) * z + C2) * z + C3) * z + C4) * z + C5
    s = r + r * z * ps
    c = (1.0 - 0.5 * z) + z * z * pc
    quad = k - 4.0 * np.floor(k * 0.25)
    if quad == 1.0 or quad == 3.0:
        s, c = c, s
    if quad >= 2.0:
        s = -s
    if quad == 1.0 or quad == 2.0:
        c = -c
    return s, c


@njit_inline
def so3_log(m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """Rotation vector of a 3x3 rotation (through the quaternion, w >= 0; Shepperd)."""
    tr = m00 + m11 + m22
    d0, d1, d2, d3 = 1 + tr, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22
    if d0 >= d1 and d0 >= d2 and d0 >= d3:
        x, y, zq, wq = m21 - m12, m02 - m20, m10 - m01, d0
    elif d1 >= d2 and d1 >= d3:
        x, y, zq, wq = d1, m01 + m10, m02 + m20, m21 - m12
    elif d2 >= d3:
        x, y, zq, wq = m01 + m10, d2, m12 + m21, m02 - m20
    else:
        x, y, zq, wq = m02 + m20, m12 + m21, d3, m10 - m01
    n = math.sqrt(x * x + y * y + zq * zq + wq * wq)
    x, y, zq, wq = x / n, y / n, zq / n, wq / n
    if wq < 0:
        x, y, zq, wq = -x, -y, -zq, -wq
    sh = math.sqrt(x * x + y * y + zq * zq)
    if sh < 1e-12:
        return 2.0 * x, 2.0 * y, 2.0 * zq
    sc = 2.0 * math.atan2(sh, wq) / sh
    return x * sc, y * sc, zq * sc


@njit_inline
def evaluate(q, starts, pre, axis, typ, qi, mult, off, post, targets, weights, p,
             r, R, pv, z, pj, ptip):
    """FK and residual r (6T,); returns (cost, pos_err, rot_err). Leaves the joints' world
    axes ``z``, origins ``pj`` and the tips' positions ``ptip`` for :func:`jacobian`."""
    T = starts.shape[0] - 1
    pe_max = 0.0
    re_max = 0.0
    for t in range(T):
        # FK along the chain: R (3x3), pv (3)
        for a in range(3):
            pv[a] = 0.0
            for b in range(3):
                R[a, b] = 1.0 if a == b else 0.0
        for j in range(starts[t], starts[t + 1]):
            A = pre[j]
            # pv += R @ A[:3, 3]; R = R @ A[:3, :3]
            for a in range(3):
                pv[a] += R[a, 0] * A[0, 3] + R[a, 1] * A[1, 3] + R[a, 2] * A[2, 3]
            r0 = R[0, 0] * A[0, 0] + R[0, 1] * A[1, 0] + R[0, 2] * A[2, 0]
            r1 = R[0, 0] * A[0, 1] + R[0, 1] * A[1, 1] + R[0, 2] * A[2, 1]
            r2 = R[0, 0] * A[0, 2] + R[0, 1] * A[1, 2] + R[0, 2] * A[2, 2]
            s0 = R[1, 0] * A[0, 0] + R[1, 1] * A[1, 0] + R[1, 2] * A[2, 0]
            s1 = R[1, 0] * A[0, 1] + R[1, 1] * A[1, 1] + R[1, 2] * A[2, 1]
            s2 = R[1, 0] * A[0, 2] + R[1, 1] * A[1, 2] + R[1, 2] * A[2, 2]
            u0 = R[2, 0] * A[0, 0] + R[2, 1] * A[1, 0] + R[2, 2] * A[2, 0]
            u1 = R[2, 0] * A[0, 1] + R[2, 1] * A[1, 1] + R[2, 2] * A[2, 1]
            u2 = R[2, 0] * A[0, 2] + R[2, 1] * A[1, 2] + R[2, 2] * A[2, 2]
            R[0, 0], R[0, 1], R[0, 2] = r0, r1, r2
            R[1, 0], R[1, 1], R[1, 2] = s0, s1, s2
            R[2, 0], R[2, 1], R[2, 2] = u0, u1, u2
            ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
            for a in range(3):
                z[j, a] = R[a, 0] * ax + R[a, 1] * ay + R[a, 2] * az
                pj[j, a] = pv[a]
            val = q[qi[j]] * mult[j] + off[j]
            if typ[j] == 1:  # prismatic: pv += z * d
                for a in range(3):
                    pv[a] += z[j, a] * val
            elif ax == 0.0 and ay == 0.0:  # revolute about +-z: two columns change
                s, c = sincos(val)
                s = s * az
                for a in range(3):
                    x0, x1 = R[a, 0], R[a, 1]
                    R[a, 0] = c * x0 + s * x1
                    R[a, 1] = c * x1 - s * x0
            else:  # revolute: R = R @ Rot(axis, val) (Rodrigues)
                s, c = sincos(val)
                C = 1.0 - c
                m00 = c + ax * ax * C
                m01 = ax * ay * C - az * s
                m02 = ax * az * C + ay * s
                m10 = ay * ax * C + az * s
                m11 = c + ay * ay * C
                m12 = ay * az * C - ax * s
                m20 = az * ax * C - ay * s
                m21 = az * ay * C + ax * s
                m22 = c + az * az * C
                for a in range(3):
                    x0, x1, x2 = R[a, 0], R[a, 1], R[a, 2]
                    R[a, 0] = x0 * m00 + x1 * m10 + x2 * m20
                    R[a, 1] = x0 * m01 + x1 * m11 + x2 * m21
                    R[a, 2] = x0 * m02 + x1 * m12 + x2 * m22
        B = post[t]
        for a in range(3):
            pv[a] += R[a, 0] * B[0, 3] + R[a, 1] * B[1, 3] + R[a, 2] * B[2, 3]
        for a in range(3):
            x0, x1, x2 = R[a, 0], R[a, 1], R[a, 2]
            R[a, 0] = x0 * B[0, 0] + x1 * B[1, 0] + x2 * B[2, 0]
            R[a, 1] = x0 * B[0, 1] + x1 * B[1, 1] + x2 * B[2, 1]
            R[a, 2] = x0 * B[0, 2] + x1 * B[1, 2] + x2 * B[2, 2]
        # errors in the target frame: ep = Rt^T (p - pt); er = log(Rt^T R)
        Tt = targets[p, t]
        w = weights[p, t]
        d0, d1, d2 = pv[0] - Tt[0, 3], pv[1] - Tt[1, 3], pv[2] - Tt[2, 3]
        ep0 = Tt[0, 0] * d0 + Tt[1, 0] * d1 + Tt[2, 0] * d2
        ep1 = Tt[0, 1] * d0 + Tt[1, 1] * d1 + Tt[2, 1] * d2
        ep2 = Tt[0, 2] * d0 + Tt[1, 2] * d1 + Tt[2, 2] * d2
        # E = Rt^T R, then its rotation vector
        er0, er1, er2 = so3_log(
            Tt[0, 0] * R[0, 0] + Tt[1, 0] * R[1, 0] + Tt[2, 0] * R[2, 0],
            Tt[0, 0] * R[0, 1] + Tt[1, 0] * R[1, 1] + Tt[2, 0] * R[2, 1],
            Tt[0, 0] * R[0, 2] + Tt[1, 0] * R[1, 2] + Tt[2, 0] * R[2, 2],
            Tt[0, 1] * R[0, 0] + Tt[1, 1] * R[1, 0] + Tt[2, 1] * R[2, 0],
            Tt[0, 1] * R[0, 1] + Tt[1, 1] * R[1, 1] + Tt[2, 1] * R[2, 1],
            Tt[0, 1] * R[0, 2] + Tt[1, 1] * R[1, 2] + Tt[2, 1] * R[2, 2],
            Tt[0, 2] * R[0, 0] + Tt[1, 2] * R[1, 0] + Tt[2, 2] * R[2, 0],
            Tt[0, 2] * R[0, 1] + Tt[1, 2] * R[1, 1] + Tt[2, 2] * R[2, 1],
            Tt[0, 2] * R[0, 2] + Tt[1, 2] * R[1, 2] + Tt[2, 2] * R[2, 2])
        o = 6 * t
        r[o + 0] = w[0] * ep0
        r[o + 1] = w[1] * ep1
        r[o + 2] = w[2] * ep2
        r[o + 3] = w[3] * er0
        r[o + 4] = w[4] * er1
        r[o + 5] = w[5] * er2
        pm = (ep0 * ep0 if w[0] > 0 else 0.0) + (ep1 * ep1 if w[1] > 0 else 0.0) + (
            ep2 * ep2 if w[2] > 0 else 0.0)
        rm = (er0 * er0 if w[3] > 0 else 0.0) + (er1 * er1 if w[4] > 0 else 0.0) + (
            er2 * er2 if w[5] > 0 else 0.0)
        pe_max = max(pe_max, math.sqrt(pm))
        re_max = max(re_max, math.sqrt(rm))
        for a in range(3):
            ptip[t, a] = pv[a]
    cost = 0.0
    for a in range(r.shape[0]):
        cost += r[a] * r[a]
    return 0.5 * cost, pe_max, re_max


@njit_inline
def jacobian(starts, typ, mult, col, z, pj, ptip, targets, weights, p, J):
    """Residual Jacobian J (6T, nc) from the last :func:`evaluate`: w * [Rt^T Jv ; Rt^T Jw]."""
    nc = J.shape[1]
    for a in range(J.shape[0]):
        for b in range(nc):
            J[a, b] = 0.0
    for t in range(starts.shape[0] - 1):
        Tt = targets[p, t]
        w = weights[p, t]
        o = 6 * t
        for j in range(starts[t], starts[t + 1]):
            cj = col[j]
            if cj < 0:
                continue
            mj = mult[j]
            zx, zy, zz = z[j, 0] * mj, z[j, 1] * mj, z[j, 2] * mj
            if typ[j] == 1:
                vx, vy, vz = zx, zy, zz
                wx = wy = wz = 0.0
            else:
                dx, dy, dz = ptip[t, 0] - pj[j, 0], ptip[t, 1] - pj[j, 1], ptip[t, 2] - pj[j, 2]
                vx, vy, vz = zy * dz - zz * dy, zz * dx - zx * dz, zx * dy - zy * dx
                wx, wy, wz = zx, zy, zz
            for a in range(3):
                J[o + a, cj] += w[a] * (Tt[0, a] * vx + Tt[1, a] * vy + Tt[2, a] * vz)
                J[o + 3 + a, cj] += w[3 + a] * (Tt[0, a] * wx + Tt[1, a] * wy
                                                + Tt[2, a] * wz)


@njit_inline
def pinned(qr, colq, lower, upper, around):
    """Whether a moved revolute joint of range under 2 pi is held at one of its limits."""
    for a in range(colq.shape[0]):
        i = colq[a]
        if around[i] and upper[i] - lower[i] < 2.0 * math.pi and (
                qr[i] <= lower[i] or qr[i] >= upper[i]):
            return True
    return False


@njit_inline
def turn_inside(qr, colq, lower, upper, around):
    """Moved revolute joints (``around``) by whole turns to their limits' side (the same
    pose); returns whether every one is then inside its limits."""
    inside = True
    for a in range(colq.shape[0]):
        i = colq[a]
        if around[i]:
            v = qr[i]
            if v < lower[i]:
                v += 2.0 * math.pi * math.ceil((lower[i] - v) / (2.0 * math.pi))
            elif v > upper[i]:
                v -= 2.0 * math.pi * math.ceil((v - upper[i]) / (2.0 * math.pi))
            qr[i] = v
            if v < lower[i] or v > upper[i]:
                inside = False
    return inside


@njit
def solve_problem(p, q, active, conv, iters, pe, re, tout, starts, pre, axis, typ, qi, mult,
                  off, col, post, colq, targets, weights, lower, upper, around, fparams, max_iter,
                  K, speed, deadline_ns, stop):
    nc = colq.shape[0]
    nJ = pre.shape[0]
    m = 6 * (starts.shape[0] - 1)
    r = np.empty(m)
    J = np.empty((m, nc))
    r2 = np.empty(m)
    ptip = np.empty((m // 6, 3))
    R = np.empty((3, 3))
    pv = np.empty(3)
    z = np.empty((nJ, 3))
    pj = np.empty((nJ, 3))
    H = np.empty((nc, nc))
    g = np.empty(nc)
    dq = np.empty(nc)
    qs = np.empty(nc)
    H0 = np.empty((nc, nc))
    gb = np.empty(nc)
    blocked = np.zeros(nc, dtype=np.bool_)
    tol_p, tol_r = fparams[0], fparams[1]
    lam0, lmin, lmax, up, down = fparams[2], fparams[3], fparams[4], fparams[5], fparams[6]
    stall_f = fparams[7]
    stall_n = int(fparams[8])
    nonmono = fparams[9]
    exc_n = int(fparams[10])
    exc_stall = int(fparams[11])
    qA = np.empty(q.shape[1])
    qS = np.empty(q.shape[1])
    for k in range(K):
        row = p * K + k
        if not active[row]:
            continue
        qr = q[row]
        cost, pe_r, re_r = evaluate(qr, starts, pre, axis, typ, qi, mult, off, post,
                                    targets, weights, p, r, R, pv, z, pj, ptip)
        jacobian(starts, typ, mult, col, z, pj, ptip, targets, weights, p, J)
        ok = pe_r <= tol_p and re_r <= tol_r
        cost0 = cost  # the non-monotone phase's reference (dls.py)
        lam = lam0
        it = 0
        stall = 0
        # a seed is given up when it stalls, unless it is the problem's last one
        give_up = stall_n if k < K - 1 else 0
        # the limit excursion (IKConfig): phase 0 inside the limits, 1 the excursion from the
        # seed (revolute limits lifted), 2 back inside the limits for good; it0 is where the
        # phase's non-monotone count starts
        phase = 0 if (give_up <= 0 and exc_n > 0) else 2
        mono = False
        it0 = 0
        if phase == 0:  # the seed an excursion would start from
            for i in range(qr.shape[0]):
                qS[i] = qr[i]
        pe_a = pe_r
        re_a = re_r
        while not ok and it < max_iter and (give_up <= 0 or stall < give_up):
            if read_flag(stop) != 0:
                break
            if deadline_ns >= 0 and monotonic_ns() >= deadline_ns:
                tout[row] = True
                break
            if phase == 0 and it >= exc_n and stall >= exc_stall and pinned(qr, colq, lower,
                                                                            upper, around):
                for i in range(qr.shape[0]):
                    qA[i] = qr[i]
                    qr[i] = qS[i]
                pe_a = pe_r
                re_a = re_r
                cost, pe_r, re_r = evaluate(qr, starts, pre, axis, typ, qi, mult, off, post,
                                            targets, weights, p, r, R, pv, z, pj, ptip)
                jacobian(starts, typ, mult, col, z, pj, ptip, targets, weights, p, J)
                cost0 = cost
                lam = lam0
                stall = 0
                phase = 1
                it0 = it
            # H0 = J^T J + lam (diag(J^T J) + cost + 1e-9), g = J^T r
            for a in range(nc):
                acc = 0.0
                for i in range(m):
                    acc += J[i, a] * r[i]
                g[a] = acc
                for b in range(a + 1):
                    acc = 0.0
                    for i in range(m):
                        acc += J[i, a] * J[i, b]
                    H0[a, b] = acc
                    H0[b, a] = acc
            for a in range(nc):
                H0[a, a] += lam * (H0[a, a] + cost + 1e-9)
                blocked[a] = False
            # Joints that the step would push through their limit leave the system and the
            # step is solved again without them (active set; at most two solves).
            for _pass in range(2):
                for a in range(nc):
                    for b in range(nc):
                        H[a, b] = 0.0 if (blocked[a] or blocked[b]) else H0[a, b]
                    if blocked[a]:
                        H[a, a] = 1.0
                    gb[a] = 0.0 if blocked[a] else g[a]
                # Cholesky H = L L^T in place (lower triangle), then solve L L^T dq = -g
                for a in range(nc):
                    s = H[a, a]
                    for b in range(a):
                        s -= H[a, b] * H[a, b]
                    s = math.sqrt(s) if s > 0 else 1e-300
                    H[a, a] = s
                    for i in range(a + 1, nc):
                        t = H[i, a]
                        for b in range(a):
                            t -= H[i, b] * H[a, b]
                        H[i, a] = t / s
                for a in range(nc):
                    t = -gb[a]
                    for b in range(a):
                        t -= H[a, b] * dq[b]
                    dq[a] = t / H[a, a]
                for a in range(nc - 1, -1, -1):
                    t = dq[a]
                    for b in range(a + 1, nc):
                        t -= H[b, a] * dq[b]
                    dq[a] = t / H[a, a]
                more = False
                for a in range(nc):
                    i = colq[a]
                    if not blocked[a] and not (phase == 1 and around[i]) and (
                            (dq[a] < 0.0 and qr[i] <= lower[i]
                             and not (around[i] and qr[i] + dq[a] + 2.0 * math.pi <= upper[i]))
                            or (dq[a] > 0.0 and qr[i] >= upper[i]
                                and not (around[i] and qr[i] + dq[a] - 2.0 * math.pi >= lower[i]))):
                        blocked[a] = True
                        more = True
                if not more:
                    break
            for a in range(nc):
                i = colq[a]
                qs[a] = qr[i]
                if phase == 1 and around[i]:
                    qr[i] = qr[i] + dq[a]  # the excursion: no limits on revolute joints
                else:
                    qr[i] = go_around(qr[i] + dq[a], lower[i], upper[i], around[i])
            cost2, pe2, re2 = evaluate(qr, starts, pre, axis, typ, qi, mult, off, post,
                                       targets, weights, p, r2, R, pv, z, pj, ptip)
            it += 1
            if cost2 < (cost0 if (not mono and it - it0 <= nonmono) else cost):
                if cost2 > cost * stall_f:
                    stall += 1
                else:
                    stall = 0
                cost, pe_r, re_r = cost2, pe2, re2
                for i in range(m):
                    r[i] = r2[i]
                jacobian(starts, typ, mult, col, z, pj, ptip, targets, weights, p, J)
                lam = max(lam * down, lmin)
                ok = pe_r <= tol_p and re_r <= tol_r
            else:
                for a in range(nc):
                    qr[colq[a]] = qs[a]
                lam2 = min(lam * up, lmax)
                if lam2 == lam:
                    # rejected at the largest damping: the next iteration would take this same
                    # step from the same q, J and lambda, and be rejected again (for ever)
                    break
                lam = lam2
                stall += 1
            if phase == 1 and (ok or it - it0 >= exc_n):
                if not (ok and turn_inside(qr, colq, lower, upper, around)):
                    # back where the row stood when the excursion began, inside the limits
                    # for good
                    for i in range(qr.shape[0]):
                        qr[i] = qA[i]
                    cost, pe_r, re_r = evaluate(qr, starts, pre, axis, typ, qi, mult, off, post,
                                                targets, weights, p, r, R, pv, z, pj, ptip)
                    jacobian(starts, typ, mult, col, z, pj, ptip, targets, weights, p, J)
                    lam = lam0
                    stall = 0
                    ok = False
                mono = True
                phase = 2
        if phase == 1:  # the iterations ran out in the excursion: back where it started
            ok = False
            for i in range(qr.shape[0]):
                qr[i] = qA[i]
            pe_r = pe_a
            re_r = re_a
        conv[row] = ok
        iters[row] = it
        pe[row] = pe_r
        re[row] = re_r
        if tout[row] or read_flag(stop) != 0 or (ok and speed):
            break


@nb.njit(cache=True, nogil=True, parallel=True)
def solve_parallel(p0, p1, q, active, conv, iters, pe, re, tout, starts, pre, axis, typ,
                   qi, mult, off, col, post, colq, targets, weights, lower, upper, around, fparams,
                   max_iter, K, speed, deadline_ns, stop):
    for p in nb.prange(p0, p1):
        solve_problem(p, q, active, conv, iters, pe, re, tout, starts, pre, axis, typ, qi,
                      mult, off, col, post, colq, targets, weights, lower, upper, around, fparams,
                      max_iter, K, speed, deadline_ns, stop)


@njit
def solve_serial(p0, p1, q, active, conv, iters, pe, re, tout, starts, pre, axis, typ, qi,
                 mult, off, col, post, colq, targets, weights, lower, upper, around, fparams,
                 max_iter, K, speed, deadline_ns, stop):
    for p in range(p0, p1):
        solve_problem(p, q, active, conv, iters, pe, re, tout, starts, pre, axis, typ, qi,
                      mult, off, col, post, colq, targets, weights, lower, upper, around, fparams,
                      max_iter, K, speed, deadline_ns, stop)


@njit_inline
def verify_problem(p, q, starts, pre, axis, typ, qi, mult, off, post, targets, weights, pe, re):
    """Goal errors of q[p] against problem p's targets, by FK along the chains."""
    nJ = pre.shape[0]
    m = 6 * (starts.shape[0] - 1)
    _, pe[p], re[p] = evaluate(q[p], starts, pre, axis, typ, qi, mult, off, post, targets,
                               weights, p, np.empty(m), np.empty((3, 3)), np.empty(3),
                               np.empty((nJ, 3)), np.empty((nJ, 3)), np.empty((m // 6, 3)))


@nb.njit(cache=True, nogil=True, parallel=True)
def verify(q, starts, pre, axis, typ, qi, mult, off, post, targets, weights, pe, re):
    for p in nb.prange(q.shape[0]):
        verify_problem(p, q, starts, pre, axis, typ, qi, mult, off, post, targets, weights, pe,
                       re)


@njit
def verify_serial(q, starts, pre, axis, typ, qi, mult, off, post, targets, weights, pe, re):
    for p in range(q.shape[0]):
        verify_problem(p, q, starts, pre, axis, typ, qi, mult, off, post, targets, weights, pe,
                       re)


@njit_inline
def invalid_input(info, which):
    """solve_one's info for input it does not solve: ``which`` 1 the target, 2 the seed."""
    info[0] = -16.0
    info[1] = np.nan
    info[2] = np.nan
    info[3] = 0.0
    info[4] = 0.0
    info[5] = 0.0
    info[6] = which


@njit_inline
def go_around(v, lo, hi, around_i):
    """v back inside [lo, hi]; a limited revolute joint (``around_i``) by 2 pi first where that
    lands inside (as common.clip_to_limits)."""
    if around_i:
        if v > hi and v - 2.0 * math.pi >= lo:
            v -= 2.0 * math.pi
        elif v < lo and v + 2.0 * math.pi <= hi:
            v += 2.0 * math.pi
    return min(max(v, lo), hi)


@njit
def solve_one(target, seed, fbuf, ibuf, bbuf, max_iter, deadline_ns, stop, q_out, info):
    """One problem, its seed then the restart rows ``rnd`` in order until one converges (speed
    mode).

    The solver's fixed data comes packed in three arrays (:func:`.fast.pack_one` lays them
    out; ten arguments cost the call about 4 us less than the 28 arrays and scalars unpacked):
    ``ibuf`` int64 [nq, restart rows, chain joints, tips, columns, starts, typ, qi, col, colq],
    ``fbuf`` float64 [weights (6), fparams (12), max_value, rnd, pre, axis, mult, off, post,
    lower, upper, seed_lo, seed_hi], ``bbuf`` uint8 [keep, cont, around] (nq each).

    Writes the finalized q (continuous joints wrapped near the seed, inside limits) to q_out and
    ``info = [status, pos_err, rot_err, iterations, seed_index, timed_out, bad_input]`` where
    status is 1 converged, -31 not converged, -6 timed out, -7 cancelled (``stop[0]`` set), -16
    invalid input; ``bad_input`` says which: 1 the target (not finite, not a rotation, a
    translation beyond ``max_value``), 2 the seed (not finite, or outside
    ``seed_lo``..``seed_hi``; q_out is then not written). The errors are recomputed by FK at
    q_out.
    """
    nq, nr, nJ, nT, nc = ibuf[0], ibuf[1], ibuf[2], ibuf[3], ibuf[4]
    o = 5
    starts = ibuf[o:o + nT + 1]
    o += nT + 1
    typ = ibuf[o:o + nJ]
    qi = ibuf[o + nJ:o + 2 * nJ]
    col = ibuf[o + 2 * nJ:o + 3 * nJ]
    colq = ibuf[o + 3 * nJ:o + 3 * nJ + nc]
    weights = fbuf[0:6]
    fparams = fbuf[6:18]
    max_value = fbuf[18]
    o = 19
    rnd = fbuf[o:o + nr * nq].reshape((nr, nq))
    o += nr * nq
    pre = fbuf[o:o + 16 * nJ].reshape((nJ, 4, 4))
    o += 16 * nJ
    axis = fbuf[o:o + 3 * nJ].reshape((nJ, 3))
    o += 3 * nJ
    mult = fbuf[o:o + nJ]
    off = fbuf[o + nJ:o + 2 * nJ]
    o += 2 * nJ
    post = fbuf[o:o + 16 * nT].reshape((nT, 4, 4))
    o += 16 * nT
    lower = fbuf[o:o + nq]
    upper = fbuf[o + nq:o + 2 * nq]
    seed_lo = fbuf[o + 2 * nq:o + 3 * nq]
    seed_hi = fbuf[o + 3 * nq:o + 4 * nq]
    keep = bbuf[0:nq] != 0
    cont = bbuf[nq:2 * nq] != 0
    around = bbuf[2 * nq:3 * nq] != 0
    K = nr + 1
    for i in range(nq):
        if not (seed[i] >= seed_lo[i] and seed[i] <= seed_hi[i]):  # NaN fails both
            invalid_input(info, 2.0)
            return
    ok_in = True
    for a in range(4):
        for b in range(4):
            if not math.isfinite(target[a, b]):
                ok_in = False
    for a in range(3):
        if not abs(target[a, 3]) <= max_value:
            ok_in = False
    if ok_in:
        for a in range(3):
            for b in range(3):
                d = target[0, a] * target[0, b] + target[1, a] * target[1, b] + \
                    target[2, a] * target[2, b]
                if abs(d - (1.0 if a == b else 0.0)) > 1e-6:
                    ok_in = False
        det = (target[0, 0] * (target[1, 1] * target[2, 2] - target[1, 2] * target[2, 1])
               - target[0, 1] * (target[1, 0] * target[2, 2] - target[1, 2] * target[2, 0])
               + target[0, 2] * (target[1, 0] * target[2, 1] - target[1, 1] * target[2, 0]))
        if det < 0:
            ok_in = False
    if not ok_in:
        for i in range(nq):
            q_out[i] = go_around(seed[i], lower[i], upper[i], around[i])
        invalid_input(info, 1.0)
        return
    q = np.empty((K, nq))
    for k in range(K):
        for i in range(nq):
            v = seed[i] if (k == 0 or keep[i]) else rnd[k - 1, i]
            q[k, i] = go_around(v, lower[i], upper[i], around[i])
    targets = target.reshape((1, 1, 4, 4))
    w = weights.reshape((1, 1, 6))
    active = np.ones(K, dtype=np.bool_)
    conv = np.zeros(K, dtype=np.bool_)
    iters = np.zeros(K, dtype=np.int64)
    pe = np.full(K, np.inf)
    re = np.full(K, np.inf)
    tout = np.zeros(K, dtype=np.bool_)
    solve_problem(0, q, active, conv, iters, pe, re, tout, starts, pre, axis, typ, qi, mult,
                  off, col, post, colq, targets, w, lower, upper, around, fparams, max_iter, K,
                  True, deadline_ns, stop)
    best = 0
    best_err = np.inf
    for k in range(K):
        if conv[k]:
            best = k
            break
        e = pe[k] / fparams[0] + re[k] / fparams[1]
        if e < best_err:
            best_err = e
            best = k
    timed_out = False
    for k in range(K):
        if tout[k]:
            timed_out = True
    for i in range(nq):
        v = q[best, i]
        if cont[i]:
            x = math.pi - (v - seed[i])  # wrap the change to (-pi, pi], as wrap_angle()
            v = seed[i] + math.pi - (x - 2.0 * math.pi * math.floor(x / (2.0 * math.pi)))
        q_out[i] = go_around(v, lower[i], upper[i], around[i])
    nJ = pre.shape[0]
    m = 6 * (starts.shape[0] - 1)
    _, pe_f, re_f = evaluate(q_out, starts, pre, axis, typ, qi, mult, off, post, targets,
                             w, 0, np.empty(m), np.empty((3, 3)), np.empty(3),
                             np.empty((nJ, 3)), np.empty((nJ, 3)), np.empty((m // 6, 3)))
    ok = pe_f <= fparams[0] and re_f <= fparams[1]  # q_out is clipped to the limits
    info[0] = 1.0 if ok else (-7.0 if read_flag(stop) != 0 else
                              -6.0 if timed_out else -31.0)
    info[1] = pe_f
    info[2] = re_f
    info[3] = float(iters[best])
    info[4] = float(best)
    info[5] = 1.0 if timed_out else 0.0
    info[6] = 0.0
