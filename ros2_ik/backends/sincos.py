"""The sine and cosine of the host kernels' forward kinematics, written out.

The generated host C++ (:mod:`.codegen`, one row at a time or rows side by side in vector
lanes) takes each revolute joint's sine and cosine from this one recipe, so that the scalar
and the vector renderings compute the same rows bit for bit, and so that the lanes compute 4
joints' pairs in a few vector instructions, where libm's ``sincos`` is a call per lane (a third
of a 7-DOF arm's solve time went there). It is the classic one (Cody and Waite's reduction by
pi/2 in three parts, then Cephes' polynomials on [-pi/4, pi/4]). Its error against a correctly
rounded sine or cosine is at most 2.3e-16 absolute (tested); a joint value beyond
:data:`REDUCE_MAX` (or not finite) takes libm's pair instead. The CUDA kernels keep CUDA's
``sincos``; the reference keeps libm's.

Every step below is one IEEE operation in a fixed order (no fused multiply-add: the host
builds' ``-ffp-contract=off``); the generated text follows :func:`sincos` line by line.
"""

from __future__ import annotations

import numpy as np

#: 2 / pi
TWO_OVER_PI = 0.6366197723675814
#: pi / 2 in three parts (Cephes' DP1..DP3 doubled): k * P1 and k * P2 are exact for the k of
#: :data:`REDUCE_MAX`
P1 = 1.570796251296997
P2 = 7.549789415861596e-08
P3 = 5.390302858158119e-15
#: |x| above this (or x not finite): libm's sin and cos
REDUCE_MAX = 1.0e5
#: sin(r) = r + r z S(z), z = r^2, S's coefficients highest first (Cephes sin.c)
SIN_COEF = (1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
            -1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1)
#: cos(r) = (1 - z / 2) + z z C(z) (Cephes sin.c)
COS_COEF = (-1.13585365213876817300e-11, 2.08757008419747316778e-9,
            -2.75573141792967388112e-7, 2.48015872888517045348e-5,
            -1.38888888888730564116e-3, 4.16666666666665929218e-2)


def sincos(x):
    """(sin x, cos x) of a float64 array by the recipe above (the reference the compiled
    copies are tested against)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        k = np.floor(x * TWO_OVER_PI + 0.5)
        r = ((x - k * P1) - k * P2) - k * P3
        z = r * r
        ps = SIN_COEF[0]
        for a in SIN_COEF[1:]:
            ps = ps * z + a
        pc = COS_COEF[0]
        for a in COS_COEF[1:]:
            pc = pc * z + a
        s = r + r * z * ps
        c = (1.0 - 0.5 * z) + z * z * pc
        quad = k - 4.0 * np.floor(k * 0.25)  # k mod 4, exactly
        swap = (quad == 1.0) | (quad == 3.0)
        sn = np.where(swap, c, s)
        cs = np.where(swap, s, c)
        sn = np.where(quad >= 2.0, -sn, sn)
        cs = np.where((quad == 1.0) | (quad == 2.0), -cs, cs)
        inside = (x <= REDUCE_MAX) & (x >= -REDUCE_MAX)
        return np.where(inside, sn, np.sin(x)), np.where(inside, cs, np.cos(x))
