"""CUDA C++ source generated from a model selection, with the robot baked in.

One thread per row (a problem x seed pair, or one configuration) runs the whole computation in
registers: FK along the chains, the residual and its Jacobian, the damped normal equations by a
small Cholesky, the active-set hard limits, 2 pi steps round a revolute joint's limits,
acceptance and convergence, exactly as the compiled CPU fast path
(:mod:`ros2_ik.solvers._fast_kernels`) does, in the same order of floating-point operations. What
the model fixes is resolved here, at generation time: fixed transforms become literals (products
with a literal 0 are dropped, with 1 become the operand), the axis case of every joint
(prismatic, revolute about +-z, general Rodrigues) is chosen, mimic multipliers and offsets,
limits, which revolute joints go round by 2 pi and the structural zeros of the Jacobian are
literals, and every small matrix loop is unrolled with constant indices so the arrays stay in
registers.

The threads never cooperate (no shared memory, no barriers, no warp shuffles); the only memory
two threads share is a problem's ``done`` flag in speed mode (a thread that converged sets it,
the problem's other seeds stop at their next iteration). So the same text compiles with g++ for
the host through :data:`HOST_SHIM` (a loop over rows; see :mod:`.hostrun`), which is how CI runs
it on machines without a GPU and compares it with the Numba path.

Kernels of a *solve* source (:func:`solve_source`), all ``extern "C"``:

- ``r2ik_stamp(clock0)``: writes the device clock [ns] (launched just before a solve so its
  deadline counts from the host's call, not from each block's start);
- ``r2ik_lm(...)``: LM/DLS for rows ``P*K`` laid out problem-major; seeds expanded in the kernel
  (row ``k == 0``: the problem's seed; ``k > 0``: restart seed ``k-1`` except the ``keep``
  coordinates), clipped as :func:`~ros2_ik.solvers.common.clip_to_limits`;
- ``r2ik_ccd(...)``: cyclic coordinate descent sweeps with the closed-form updates of
  :mod:`ros2_ik.solvers.ccd` (one tip);
- ``r2ik_select(...)``: per problem, in float64: the winning row (first converged seed, else the
  smallest scaled error), continuous joints wrapped near the seed, limits, and the goal errors
  recomputed by float64 FK against the caller's tolerances (the success flag).

A *frames* source (:func:`frames_source`) has ``r2ik_fk`` (poses of chosen frames) and
``r2ik_jac`` (their world Jacobians, columns ``model.v_active``).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..model import Model
from ..solvers import sincos as sc
from ..solvers.common import limited_revolute, movable_coordinates, restart_seeds
from ..validate import ROTATION_TOL

__all__ = ["Chain", "chain_of", "solve_source", "frames_source", "host_variant", "HOST_SHIM",
           "DTYPES", "source_hash"]

DTYPES = {"float32": "float", "float64": "double"}
#: the goal check's rotation bound (validate.ROTATION_TOL) as the generated code writes it
ROTATION_TOL_C = "1e-6"
assert float(ROTATION_TOL_C) == ROTATION_TOL


def _double(x: float) -> str:
    """A C double literal of x (shortest round trip: the very float64 value)."""
    return repr(float(x))


def _sincos_steps(T: str, lit, floor: str) -> str:
    """C++ lines of :mod:`ros2_ik.solvers.sincos`'s recipe up to its quadrant, on ``x`` of type
    ``T`` (``lit`` writes a constant, ``floor`` names the floor): ``sp``/``cp`` the sine and
    cosine on [-pi/4, pi/4], ``quad`` = k mod 4. The host's scalar ``r2ik_sincos`` and the
    lanes' vector one share these steps, in this order."""
    S, C = sc.SIN_COEF, sc.COS_COEF
    L = lit
    return f"""  const {T} k = {floor}(x * {L(sc.TWO_OVER_PI)} + {L(0.5)});
  const {T} r = ((x - k * {L(sc.P1)}) - k * {L(sc.P2)}) - k * {L(sc.P3)};
  const {T} z = r * r;
  const {T} ps = (((({L(S[0])} * z + {L(S[1])}) * z + {L(S[2])}) * z + {L(S[3])}) * z
      + {L(S[4])}) * z + {L(S[5])};
  const {T} pc = (((({L(C[0])} * z + {L(C[1])}) * z + {L(C[2])}) * z + {L(C[3])}) * z
      + {L(C[4])}) * z + {L(C[5])};
  const {T} sp = r + r * z * ps, cp = ({L(1.0)} - {L(0.5)} * z) + z * z * pc;
  const {T} quad = k - {L(4.0)} * {floor}(k * {L(0.25)});
"""


def _host_sincos() -> str:
    """The host's ``r2ik_sincos``: float64 by :mod:`ros2_ik.solvers.sincos`'s recipe, step for
    step (the Numba kernels' FK does the same steps), float32 by libm."""
    m = _double(sc.REDUCE_MAX)
    return f"""static inline void r2ik_sincos(double x, double& s, double& c) {{
  if (!(x <= {m} && x >= -{m})) {{
    s = std::sin(x); c = std::cos(x); return;
  }}
{_sincos_steps("double", _double, "std::floor")}  const bool swap = quad == 1.0 || quad == 3.0;
  s = swap ? cp : sp; c = swap ? sp : cp;
  if (quad >= 2.0) s = -s;
  if (quad == 1.0 || quad == 2.0) c = -c;
}}
static inline void r2ik_sincos(float x, float& s, float& c) {{ s = std::sin(x); c = std::cos(x); }}
"""


# What the generated text sees: CUDA (nvcc / NVRTC) or the host (g++ through this shim). Only the
# few names below differ; everything else in the source is plain C++ shared by both.
HOST_SHIM = r"""
#include <cmath>
#include <cstdint>
#include <ctime>
using std::sin; using std::cos; using std::sqrt; using std::atan2; using std::floor;
using std::fabs;
#define R2IK_HOST 1
#define R2IK_FN static inline
#define R2IK_KERNEL static void
#define R2IK_RESTRICT __restrict__
static thread_local long long r2ik_row_ = 0;
#define R2IK_ROW r2ik_row_
static inline unsigned long long r2ik_now() {
  timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}
""" + _host_sincos()

_DEVICE_PRELUDE = r"""
#define R2IK_FN __device__ __forceinline__
#define R2IK_KERNEL extern "C" __global__ void
#define R2IK_RESTRICT __restrict__
#define R2IK_ROW ((long long)blockIdx.x * blockDim.x + threadIdx.x)
__device__ __forceinline__ unsigned long long r2ik_now() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ void r2ik_sincos(double x, double& s, double& c) { sincos(x, &s, &c); }
__device__ __forceinline__ void r2ik_sincos(float x, float& s, float& c) { sincosf(x, &s, &c); }
"""

_PRELUDE = r"""
#if !defined(__CUDACC__) && !defined(R2IK_HOST)
#error "compile for CUDA (nvcc / NVRTC), or for the host with the host shim first"
#endif
"""


@dataclass(frozen=True)
class Chain:
    """Per-joint data of the base->tip paths (the fast path's layout, plus link ids).

    ``starts`` (T+1,): joints of tip t are ``starts[t]:starts[t+1]``; per joint: ``pre`` (4, 4)
    fixed transform before it, ``axis`` (3,), ``prismatic``, ``qi`` (its q index: the leader's for
    a mimic joint), ``mult``/``off`` (mimic), ``col`` (its Jacobian column, -1 when frozen),
    ``link``; per tip: ``post`` (4, 4) fixed transform after its last joint; ``colq`` (nc,): the q
    index of each column.
    """

    model: Model
    tips: tuple
    starts: tuple
    pre: np.ndarray
    axis: np.ndarray
    prismatic: tuple
    qi: tuple
    mult: tuple
    off: tuple
    col: tuple
    link: tuple
    mimic: tuple
    post: np.ndarray
    colq: tuple

    @property
    def T(self) -> int:
        return len(self.starts) - 1

    @property
    def nc(self) -> int:
        return len(self.colq)


def chain_of(model: Model, tips) -> Chain | None:
    """The chain data for ``tips`` (link names or indices), or None when a joint on a path is
    not revolute, continuous, prismatic or fixed (the generator covers 1-DOF chains only) or no
    joint on the paths can move (nothing to solve for; the reference path answers those)."""
    from ..solvers.fast import _chain_arrays  # noqa: PLC0415 - one walk of the paths

    tip_ids = tuple(int(model.link_index(t)) if isinstance(t, str) else int(t) for t in tips)
    if not tip_ids:
        raise InvalidInputError("no tips given for the generated kernels")
    c = _chain_arrays(model, tip_ids)
    if c is None or c["colq"].size == 0:
        return None
    link = tuple(int(l) for l in c["link"])
    return Chain(model=model, tips=tip_ids, starts=tuple(int(s) for s in c["starts"]),
                 pre=c["pre"], axis=c["axis"], prismatic=tuple(bool(t) for t in c["typ"]),
                 qi=tuple(int(i) for i in c["qi"]), mult=tuple(float(v) for v in c["mult"]),
                 off=tuple(float(v) for v in c["off"]), col=tuple(int(v) for v in c["col"]),
                 link=link, mimic=tuple(bool(model.mimic_q[l] >= 0) for l in link),
                 post=c["post"], colq=tuple(int(v) for v in c["colq"]))


# ------------------------------------------------------------------ expression helpers

def _lit(x: float) -> str:
    """A C literal of the float64 value x (shortest round-trip repr), cast to the scalar S."""
    x = float(x)
    if not math.isfinite(x):
        raise InvalidInputError(f"non-finite constant {x} cannot be baked into a kernel")
    s = repr(x)
    if "e" not in s and "." not in s:
        s += ".0"
    return f"S({s})"


def _lin(terms) -> str | None:
    """Left-to-right sum of ``coef * expr`` terms (coef a float64 literal, or None for a runtime
    factor already in expr); literal zeros dropped, ones folded. None when nothing is left."""
    out = None
    for coef, expr in terms:
        if coef is not None and coef == 0.0:
            continue
        if coef is None or coef == 1.0:
            t, neg = expr, False
        elif coef == -1.0:
            t, neg = expr, True
        else:
            t, neg = f"{expr} * {_lit(coef)}", False
        if out is None:
            out = f"(-{t})" if neg else t
        else:
            out = f"{out} {'-' if neg else '+'} {t}"
    return out


class _Emit:
    def __init__(self):
        self.lines = []
        self.ind = 0
    def kernel(self, name, args):
        return self.block(f"R2IK_KERNEL {name}({args})")

    def __call__(self, s=""):
        for line in s.split("\n"):
            self.lines.append(("  " * self.ind + line) if line else "")

    def block(self, head):
        self(head + " {")
        self.ind += 1
        return self

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.ind -= 1
        self("}")

    def text(self):
        return "\n".join(self.lines) + "\n"


# ------------------------------------------------------------------ FK / residual / Jacobian

def _emit_fk_tip(e: _Emit, ch: Chain, t: int, qv, *, keep_joint_frames: bool,
                 sincos: bool = False):
    """FK along tip t's chain into R[9] (row-major) and pv[3]. ``qv(i)`` names q coordinate i.
    With ``keep_joint_frames`` the joints' world axes z{j}_a and origins pj{j}_a are set (as the
    Numba kernel's z/pj arrays), else only what the chain needs. With ``sincos`` (the solve
    kernels) a joint's sine and cosine come from one ``r2ik_sincos(x, s, c)`` call: CUDA's
    ``sincos`` on a GPU, on the host :mod:`ros2_ik.solvers.sincos`'s recipe (the Numba kernels'
    values); without (the frames kernels) from ``sin`` and ``cos``."""

    def sin_cos(val):
        if sincos:
            e(f"S c, sn_; r2ik_sincos({val}, sn_, c);")
            return "sn_"
        e(f"const S c = cos({val});")
        return f"sin({val})"
    e("R[0] = S(1); R[1] = S(0); R[2] = S(0); R[3] = S(0); R[4] = S(1); R[5] = S(0); "
      "R[6] = S(0); R[7] = S(0); R[8] = S(1); pv[0] = S(0); pv[1] = S(0); pv[2] = S(0);")
    for j in range(ch.starts[t], ch.starts[t + 1]):
        A = ch.pre[j]
        e(f"// joint {j}: link {ch.model.link_names[ch.link[j]]}")
        for a in range(3):
            s = _lin([(A[0, 3], f"R[{3 * a}]"), (A[1, 3], f"R[{3 * a + 1}]"),
                      (A[2, 3], f"R[{3 * a + 2}]")])
            if s is not None:
                e(f"pv[{a}] = pv[{a}] + ({s});")
        with e.block(""):
            for a in range(3):
                for b in range(3):
                    s = _lin([(A[0, b], f"R[{3 * a}]"), (A[1, b], f"R[{3 * a + 1}]"),
                              (A[2, b], f"R[{3 * a + 2}]")])
                    e(f"const S n{a}{b} = {s if s is not None else 'S(0)'};")
            e("R[0] = n00; R[1] = n01; R[2] = n02; R[3] = n10; R[4] = n11; R[5] = n12; "
              "R[6] = n20; R[7] = n21; R[8] = n22;")
        ax, ay, az = (float(v) for v in ch.axis[j])
        zname = f"z{j}_" if keep_joint_frames else "zz"
        need_z = keep_joint_frames or ch.prismatic[j]
        if need_z:
            if not keep_joint_frames:
                e("{")
                e("S zz0, zz1, zz2;")
            for a in range(3):
                s = _lin([(ax, f"R[{3 * a}]"), (ay, f"R[{3 * a + 1}]"), (az, f"R[{3 * a + 2}]")])
                e(f"{zname}{a} = {s if s is not None else 'S(0)'};")
        if keep_joint_frames:
            e(f"pj{j}_0 = pv[0]; pj{j}_1 = pv[1]; pj{j}_2 = pv[2];")
        val = qv(ch.qi[j])
        if ch.mult[j] != 1.0 or ch.off[j] != 0.0:
            val = f"({val} * {_lit(ch.mult[j])} + {_lit(ch.off[j])})"
        if ch.prismatic[j]:
            e(f"{{ const S d = {val};")
            for a in range(3):
                e(f"  pv[{a}] = pv[{a}] + {zname}{a} * d;")
            e("}")
        elif ax == 0.0 and ay == 0.0:
            with e.block(""):
                sv = sin_cos(val)
                if az == 1.0:
                    e(f"const S s = {sv};")
                elif az == -1.0:
                    e(f"const S s = -{sv};")
                else:
                    e(f"const S s = {sv} * {_lit(az)};")
                for a in range(3):
                    e(f"{{ const S x0 = R[{3 * a}], x1 = R[{3 * a + 1}]; "
                      f"R[{3 * a}] = c * x0 + s * x1; R[{3 * a + 1}] = c * x1 - s * x0; }}")
        else:
            with e.block(""):
                if sincos:
                    sv = sin_cos(val)
                    e(f"const S s = {sv}; const S C = S(1) - c;")
                else:
                    e(f"const S c = cos({val}); const S s = sin({val}); const S C = S(1) - c;")
                # m = c I + C a a^T + s [a]x, entries as the Numba kernel forms them
                m = {
                    "00": f"c + {_lit(ax * ax)} * C", "01": f"{_lit(ax * ay)} * C - {_lit(az)} * s",
                    "02": f"{_lit(ax * az)} * C + {_lit(ay)} * s",
                    "10": f"{_lit(ay * ax)} * C + {_lit(az)} * s", "11": f"c + {_lit(ay * ay)} * C",
                    "12": f"{_lit(ay * az)} * C - {_lit(ax)} * s",
                    "20": f"{_lit(az * ax)} * C - {_lit(ay)} * s",
                    "21": f"{_lit(az * ay)} * C + {_lit(ax)} * s", "22": f"c + {_lit(az * az)} * C",
                }
                for k, v in m.items():
                    e(f"const S m{k} = {v};")
                for a in range(3):
                    e(f"{{ const S x0 = R[{3 * a}], x1 = R[{3 * a + 1}], x2 = R[{3 * a + 2}];")
                    for b in range(3):
                        e(f"  R[{3 * a + b}] = x0 * m0{b} + x1 * m1{b} + x2 * m2{b};")
                    e("}")
        if need_z and not keep_joint_frames:
            e("}")
    B = ch.post[t]
    for a in range(3):
        s = _lin([(B[0, 3], f"R[{3 * a}]"), (B[1, 3], f"R[{3 * a + 1}]"),
                  (B[2, 3], f"R[{3 * a + 2}]")])
        if s is not None:
            e(f"pv[{a}] = pv[{a}] + ({s});")
    if not np.array_equal(B[:3, :3], np.eye(3)):
        for a in range(3):
            e(f"{{ const S x0 = R[{3 * a}], x1 = R[{3 * a + 1}], x2 = R[{3 * a + 2}];")
            for b in range(3):
                s = _lin([(B[0, b], "x0"), (B[1, b], "x1"), (B[2, b], "x2")])
                e(f"  R[{3 * a + b}] = {s if s is not None else 'S(0)'};")
            e("}")


def _emit_so3_log(e: _Emit):
    e("""
template <typename S>
R2IK_FN void r2ik_so3_log(S m00, S m01, S m02, S m10, S m11, S m12, S m20, S m21, S m22,
                          S* out) {
  const S tr = m00 + m11 + m22;
  const S d0 = 1 + tr, d1 = 1 + m00 - m11 - m22, d2 = 1 - m00 + m11 - m22, d3 = 1 - m00 - m11 + m22;
  S x, y, zq, wq;
  if (d0 >= d1 && d0 >= d2 && d0 >= d3) { x = m21 - m12; y = m02 - m20; zq = m10 - m01; wq = d0; }
  else if (d1 >= d2 && d1 >= d3) { x = d1; y = m01 + m10; zq = m02 + m20; wq = m21 - m12; }
  else if (d2 >= d3) { x = m01 + m10; y = d2; zq = m12 + m21; wq = m02 - m20; }
  else { x = m02 + m20; y = m12 + m21; zq = d3; wq = m10 - m01; }
  const S n = sqrt(x * x + y * y + zq * zq + wq * wq);
  x = x / n; y = y / n; zq = zq / n; wq = wq / n;
  if (wq < 0) { x = -x; y = -y; zq = -zq; wq = -wq; }
  const S sh = sqrt(x * x + y * y + zq * zq);
  if (sh < S(1e-12)) { out[0] = S(2) * x; out[1] = S(2) * y; out[2] = S(2) * zq; return; }
  const S sc = S(2) * atan2(sh, wq) / sh;
  out[0] = x * sc; out[1] = y * sc; out[2] = zq * sc;
}
""")


def _joint_frame_decl(ch: Chain) -> str:
    names = []
    for j in range(len(ch.qi)):
        names += [f"z{j}_{a}" for a in range(3)] + [f"pj{j}_{a}" for a in range(3)]
    return "S " + ", ".join(names) + ";" if names else ""


def _qvars(ch: Chain):
    """The q coordinates the chains read or move, in order, and a namer for them."""
    used = sorted(set(ch.qi) | set(ch.colq))
    return used, (lambda i: f"q{i}")


def _ternary(c: str, a: str, b: str) -> str:
    return f"{c} ? {a} : {b}"


def _emit_evaluate(e: _Emit, ch: Chain, name: str, *, frames: bool, sel=_ternary,
                   log: str = "r2ik_so3_log<S>", sincos: bool = False):
    """``S name(q..., tgt, w, r, frames...)`` -> cost; errors into pe/re (as the Numba
    ``evaluate``). The joint frames and tip positions are macros' by-reference arguments.
    ``sel(c, a, b)`` writes a choice (the host lanes' version writes a lane-wise select) and
    ``log`` names the SO(3) log; ``sincos``: as :func:`_emit_fk_tip`'s."""
    used, qv = _qvars(ch)
    T = ch.T
    args = [f"const S q{i}" for i in used] + ["const S* R2IK_RESTRICT tgt",
                                              "const S* R2IK_RESTRICT w", "S* r", "S& pe_o",
                                              "S& re_o"]
    if frames:
        for j in range(len(ch.qi)):
            args += [f"S& z{j}_{a}" for a in range(3)] + [f"S& pj{j}_{a}" for a in range(3)]
        args += [f"S& pt{t}_{a}" for t in range(T) for a in range(3)]
    e("template <typename S>")
    with e.block(f"R2IK_FN S {name}({', '.join(args)})"):
        e("S R[9], pv[3], er[3];")
        e("S pe_max = S(0), re_max = S(0);")
        for t in range(T):
            e(f"// ---- tip {t}: {ch.model.link_names[ch.tips[t]]}")
            _emit_fk_tip(e, ch, t, qv, keep_joint_frames=frames, sincos=sincos)
            o = 6 * t
            e(f"{{ const S* Tt = tgt + {16 * t}; const S* wt = w + {6 * t};")
            e("  const S d0 = pv[0] - Tt[3], d1 = pv[1] - Tt[7], d2 = pv[2] - Tt[11];")
            e("  const S ep0 = Tt[0] * d0 + Tt[4] * d1 + Tt[8] * d2;")
            e("  const S ep1 = Tt[1] * d0 + Tt[5] * d1 + Tt[9] * d2;")
            e("  const S ep2 = Tt[2] * d0 + Tt[6] * d1 + Tt[10] * d2;")
            mats = []
            for a in range(3):
                for b in range(3):
                    mats.append(f"Tt[{a}] * R[{b}] + Tt[{4 + a}] * R[{3 + b}] + "
                                f"Tt[{8 + a}] * R[{6 + b}]")
            e(f"  {log}(" + ",\n      ".join(mats) + ", er);")
            e(f"  r[{o}] = wt[0] * ep0; r[{o + 1}] = wt[1] * ep1; r[{o + 2}] = wt[2] * ep2;")
            e(f"  r[{o + 3}] = wt[3] * er[0]; r[{o + 4}] = wt[4] * er[1]; "
              f"r[{o + 5}] = wt[5] * er[2];")
            sq = [f"ep{a} * ep{a}" for a in range(3)] + [f"er[{a}] * er[{a}]" for a in range(3)]
            part = [f"({sel(f'wt[{i}] > 0', sq[i], 'S(0)')})" for i in range(6)]
            e(f"  const S pm = {part[0]} + {part[1]} + {part[2]};")
            e(f"  const S rm = {part[3]} + {part[4]} + {part[5]};")
            e("  const S spm = sqrt(pm), srm = sqrt(rm);")
            e(f"  pe_max = {sel('spm > pe_max', 'spm', 'pe_max')}; "
              f"re_max = {sel('srm > re_max', 'srm', 're_max')};")
            if frames:
                e(f"  pt{t}_0 = pv[0]; pt{t}_1 = pv[1]; pt{t}_2 = pv[2];")
            e("}")
        e("S cost = S(0);")
        for i in range(6 * T):
            e(f"cost = cost + r[{i}] * r[{i}];")
        e("pe_o = pe_max; re_o = re_max;")
        e("return S(0.5) * cost;")


def _jac_structure(ch: Chain):
    """(6T, nc) bool: which residual Jacobian entries can be nonzero."""
    nz = np.zeros((6 * ch.T, ch.nc), dtype=bool)
    for t in range(ch.T):
        for j in range(ch.starts[t], ch.starts[t + 1]):
            c = ch.col[j]
            if c < 0:
                continue
            nz[6 * t:6 * t + 3, c] = True
            if not ch.prismatic[j]:
                nz[6 * t + 3:6 * t + 6, c] = True
    return nz


def _emit_jacobian(e: _Emit, ch: Chain, name: str):
    """``name(frames..., tgt, w, J)``: the residual Jacobian (as the Numba ``jacobian``)."""
    T, nc = ch.T, ch.nc
    args = []
    for j in range(len(ch.qi)):
        args += [f"const S z{j}_{a}" for a in range(3)] + [f"const S pj{j}_{a}" for a in range(3)]
    args += [f"const S pt{t}_{a}" for t in range(T) for a in range(3)]
    args += ["const S* R2IK_RESTRICT tgt", "const S* R2IK_RESTRICT w", "S* J"]
    e("template <typename S>")
    with e.block(f"R2IK_FN void {name}({', '.join(args)})"):
        written = np.zeros((6 * T, nc), dtype=bool)
        for t in range(T):
            e(f"{{ const S* Tt = tgt + {16 * t}; const S* wt = w + {6 * t};")
            for j in range(ch.starts[t], ch.starts[t + 1]):
                c = ch.col[j]
                if c < 0:
                    continue
                mj = ch.mult[j]
                if mj == 1.0:
                    e(f"  {{ const S zx = z{j}_0, zy = z{j}_1, zz = z{j}_2;")
                else:
                    e(f"  {{ const S zx = z{j}_0 * {_lit(mj)}, zy = z{j}_1 * {_lit(mj)}, "
                      f"zz = z{j}_2 * {_lit(mj)};")
                if ch.prismatic[j]:
                    e("    const S vx = zx, vy = zy, vz = zz;")
                else:
                    e(f"    const S dx = pt{t}_0 - pj{j}_0, dy = pt{t}_1 - pj{j}_1, "
                      f"dz = pt{t}_2 - pj{j}_2;")
                    e("    const S vx = zy * dz - zz * dy, vy = zz * dx - zx * dz, "
                      "vz = zx * dy - zy * dx;")
                rows = [(a, "v") for a in range(3)]
                if not ch.prismatic[j]:
                    rows += [(a, "w") for a in range(3)]
                for a, kind in rows:
                    i = 6 * t + a + (3 if kind == "w" else 0)
                    comp = ("vx", "vy", "vz") if kind == "v" else ("zx", "zy", "zz")
                    wi = a + (3 if kind == "w" else 0)
                    val = (f"wt[{wi}] * (Tt[{a}] * {comp[0]} + Tt[{4 + a}] * {comp[1]} + "
                           f"Tt[{8 + a}] * {comp[2]})")
                    k = i * nc + c
                    if written[i, c]:
                        e(f"    J[{k}] = J[{k}] + {val};")
                    else:
                        e(f"    J[{k}] = {val};")
                        written[i, c] = True
                e("  }")
            e("}")
        nz = _jac_structure(ch)
        assert np.array_equal(nz, written)


def _emit_common(e: _Emit, ch: Chain):
    e(_PRELUDE)
    _emit_so3_log(e)
    _emit_evaluate(e, ch, "r2ik_eval", frames=True, sincos=True)
    _emit_evaluate(e, ch, "r2ik_errors", frames=False, sincos=True)
    _emit_jacobian(e, ch, "r2ik_jac_residual")


def _frame_args(ch: Chain) -> str:
    names = []
    for j in range(len(ch.qi)):
        names += [f"z{j}_{a}" for a in range(3)] + [f"pj{j}_{a}" for a in range(3)]
    names += [f"pt{t}_{a}" for t in range(ch.T) for a in range(3)]
    return ", ".join(names)


def _q_args(ch: Chain, prefix="q") -> str:
    used, _ = _qvars(ch)
    return ", ".join(f"{prefix}{i}" for i in used)


def _limits(model: Model):
    lo = np.asarray(model.lower, dtype=np.float64)
    hi = np.asarray(model.upper, dtype=np.float64)
    return lo, hi, limited_revolute(model)


#: 2 pi in the kernel's scalar, as the Numba kernels' ``2.0 * math.pi`` in float64
_TWO_PI = "S(2) * S(R2IK_PI)"


def _emit_clip(e: _Emit, var: str, i: int, lo, hi, around, *, wrap=True):
    """clip_to_limits for coordinate i (a limited revolute joint goes around by 2 pi first
    where that lands inside)."""
    if wrap and around[i]:
        e(f"if ({var} > {_lit(hi[i])} && {var} - {_TWO_PI} >= {_lit(lo[i])}) "
          f"{var} = {var} - {_TWO_PI}; "
          f"else if ({var} < {_lit(lo[i])} && {var} + {_TWO_PI} <= {_lit(hi[i])}) "
          f"{var} = {var} + {_TWO_PI};")
    if math.isfinite(lo[i]):
        e(f"if ({var} < {_lit(lo[i])}) {var} = {_lit(lo[i])};")
    if math.isfinite(hi[i]):
        e(f"if ({var} > {_lit(hi[i])}) {var} = {_lit(hi[i])};")


def _pinned(moved, lo, hi, around, var: str = "q{}") -> str:
    """C: whether a moved revolute joint ``var.format(i)`` of range under 2 pi sits at a limit
    (``dls.py``'s excursion rule; "false" when the chain has none)."""
    c = [f"{var.format(i)} <= {_lit(lo[i])} || {var.format(i)} >= {_lit(hi[i])}" for i in moved
         if around[i] and hi[i] - lo[i] < 2 * math.pi]
    return " || ".join(c) or "false"


def _emit_turn_inside(e: _Emit, moved, lo, hi, around, var: str, inside: str):
    """The moved revolute joints ``var.format(i)`` by whole turns to their limits' side; clears
    ``inside`` where one is then outside (``dls._turn_inside``)."""
    for i in moved:
        if not around[i]:
            continue
        v, a, b = var.format(i), _lit(lo[i]), _lit(hi[i])
        e(f"if ({v} < {a}) {v} = {v} + {_TWO_PI} * ceil(({a} - {v}) / ({_TWO_PI})); "
          f"else if ({v} > {b}) {v} = {v} - {_TWO_PI} * ceil(({v} - {b}) / ({_TWO_PI}));")
        e(f"{inside} = {inside} && {v} >= {a} && {v} <= {b};")


def _emit_lm_step(e: _Emit, ch: Chain, nz, lo, hi, around, *, vector: bool,
                  release: str = "release"):
    """The LM step ``dq`` of a row from ``r``, ``J``, ``lam``, ``cost`` and the joint values
    ``q<i>``: the normal equations with the damping of ``dls.py``, Cholesky and substitutions,
    solved again (one more pass) without the joints at a limit the step pushes further out.
    One recipe for the scalar kernel (type ``S``, ``bool blocked[]``) and the AVX2 lanes
    (``vector``: type ``V``, masks ``M blocked[]`` and selects), so their op order, which the
    rows' bit equality needs, is written once. The caller declares ``H0``, ``g``, ``dq`` and
    ``blocked`` (the lanes' all false), and ``release`` (bool, the lanes' M): rows in a limit
    excursion (``dls.py``), whose revolute joints are never blocked."""
    nc, m = ch.nc, 6 * ch.T
    T = "V" if vector else "S"
    zero, one = ("V(0.0)", "V(1.0)") if vector else ("S(0)", "S(1)")
    if vector:
        def sel(c, a, b):
            return f"r2ik_sel({c}, {a}, {b})"
        AND, OR, NOT = " & ", " | ", "~"
    else:
        def sel(c, a, b):
            return f"{c} ? {a} : {b}"
        AND, OR, NOT = " && ", " || ", "!"

    def cmp(c):
        return f"({c})" if vector else c

    for a in range(nc):
        s = "".join(f" acc = acc + J[{i * nc + a}] * r[{i}];" for i in range(m) if nz[i, a])
        e(f"{{ {T} acc = {zero};{s} g[{a}] = acc; }}")
        for b in range(a + 1):
            terms = [i for i in range(m) if nz[i, a] and nz[i, b]]
            s = "; ".join(f"acc = acc + J[{i * nc + a}] * J[{i * nc + b}]" for i in terms)
            e(f"{{ {T} acc = {zero}; {s + ';' if s else ''} H0[{a * nc + b}] = acc; "
              f"H0[{b * nc + a}] = acc; }}")
    for a in range(nc):
        e(f"H0[{a * nc + a}] = H0[{a * nc + a}] + lam * (H0[{a * nc + a}] + cost "
          f"+ S(1e-9));" + ("" if vector else f" blocked[{a}] = false;"))
    if not vector:
        e("#pragma unroll 1")
    with e.block("for (int pass = 0; pass < 2; ++pass)"):
        e(f"{T} H[{nc * nc}], gb[{nc}];")
        for a in range(nc):
            for b in range(nc):
                c = f"blocked[{a}]{OR}blocked[{b}]"
                c = c if vector else f"({c})"
                e(f"H[{a * nc + b}] = {sel(c, zero, f'H0[{a * nc + b}]')};")
            if vector:
                e(f"H[{a * nc + a}] = {sel(f'blocked[{a}]', one, f'H[{a * nc + a}]')};")
            else:
                e(f"if (blocked[{a}]) H[{a * nc + a}] = {one};")
            e(f"gb[{a}] = {sel(f'blocked[{a}]', zero, f'g[{a}]')};")
        for a in range(nc):
            e(f"{{ {T} s = H[{a * nc + a}];" + "".join(
                f" s = s - H[{a * nc + b}] * H[{a * nc + b}];" for b in range(a)))
            pos = "s > V(0.0)" if vector else "s > 0"
            e(f"  s = {sel(pos, 'sqrt(s)', f'{T}(R2IK_TINY)')}; H[{a * nc + a}] = s;")
            for i in range(a + 1, nc):
                e(f"  {{ {T} t = H[{i * nc + a}];" + "".join(
                    f" t = t - H[{i * nc + b}] * H[{a * nc + b}];" for b in range(a))
                  + f" H[{i * nc + a}] = t / s; }}")
            e("}")
        for a in range(nc):
            e(f"{{ {T} t = -gb[{a}];" + "".join(
                f" t = t - H[{a * nc + b}] * dq[{b}];" for b in range(a))
              + f" dq[{a}] = t / H[{a * nc + a}]; }}")
        for a in range(nc - 1, -1, -1):
            e(f"{{ {T} t = dq[{a}];" + "".join(
                f" t = t - H[{b * nc + a}] * dq[{b}];" for b in range(a + 1, nc))
              + f" dq[{a}] = t / H[{a * nc + a}]; }}")
        e("M more = M(r2ik_mv{});" if vector else "bool more = false;")
        for a in range(nc):
            i = ch.colq[a]
            conds = []
            # at a limit and pushed out: blocked, unless a revolute joint's step goes round to
            # the far side of the arc outside its limits
            if math.isfinite(lo[i]):
                c = cmp(f"dq[{a}] < {zero}") + AND + cmp(f"q{i} <= {_lit(lo[i])}")
                if around[i]:
                    c += f"{AND}{NOT}(q{i} + dq[{a}] + {_TWO_PI} <= {_lit(hi[i])})"
                conds.append(f"({c})")
            if math.isfinite(hi[i]):
                c = cmp(f"dq[{a}] > {zero}") + AND + cmp(f"q{i} >= {_lit(hi[i])}")
                if around[i]:
                    c += f"{AND}{NOT}(q{i} + dq[{a}] - {_TWO_PI} >= {_lit(lo[i])})"
                conds.append(f"({c})")
            free = (f"~{release} & " if vector else f"!{release} && ") if around[i] else ""
            if conds and vector:
                e(f"{{ const M nb = ~blocked[{a}] & {free}({OR.join(conds)}); "
                  f"blocked[{a}] = blocked[{a}] | nb; more = more | nb; }}")
            elif conds:
                e(f"if (!blocked[{a}] && {free}({OR.join(conds)})) "
                  f"{{ blocked[{a}] = true; more = true; }}")
        e("if (!r2ik_any(more)) break;" if vector else "if (!more) break;")


def _emit_lm_kernel(e: _Emit, ch: Chain, scalar: str):
    """The fused LM kernel (mirrors ``_fast_kernels.solve_problem`` row by row)."""
    model = ch.model
    nq, T, nc, m = model.nq, ch.T, ch.nc, 6 * ch.T
    used, qv = _qvars(ch)
    lo, hi, around = _limits(model)
    # the restart rule of solvers.common.expand_seeds: coordinates off the base->tip paths
    # (movable_coordinates) keep the problem's seed, as in the Numba rows
    _, keep = restart_seeds(model, 1, 0, movable_coordinates(model, ch.tips))
    nz = _jac_structure(ch)
    e(f"""
// rows = P * K, problem-major. seeds (P, nq) float64 (seed_stride nq; 0: one seed for all);
// rnd (K-1, nq) float64 restart seeds;
// tgt (P, {T}, 16) and w (P, {T}, 6) in S; fp: tol_p tol_r lam0 lmin lmax up down stall_f stall_n
// nonmono exc_n exc_stall (solvers.fast._fparams).
// Outputs per row: q_out (rows, nq) S, conv/tout (u8), iters (i32), pe/re (S).
// done (P,) int: speed mode, set by a row that converged; stop: host-settable cancel flag;
// clock0: the device clock at the call (r2ik_stamp); params[0] = budget_ns (< 0: none).""")
    args = ("const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, "
            "const S* R2IK_RESTRICT tgt_all, const S* R2IK_RESTRICT w_all, long long P, int K, "
            "const unsigned char* R2IK_RESTRICT active, int max_iter, "
            "const double* R2IK_RESTRICT fp, int speed, "
            "const unsigned long long* clock0, const long long* params, const volatile int* stop, "
            "volatile int* done, S* R2IK_RESTRICT q_out, unsigned char* R2IK_RESTRICT conv_o, "
            "int* R2IK_RESTRICT iters_o, S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, "
            "unsigned char* R2IK_RESTRICT tout_o")
    with e.kernel("r2ik_lm", args):
        e(f"typedef {scalar} S;")
        e("const long long row = R2IK_ROW;")
        e("if (row >= P * (long long)K) return;")
        e("const long long p = row / K; const int k = (int)(row - p * K);")
        e("const S* tgt = tgt_all + p * " + str(16 * T) + "; const S* w = w_all + p * "
          + str(6 * T) + ";")
        e("S* qo = q_out + row * " + str(nq) + ";")
        e("const double* sd = seeds + p * seed_stride;")
        e("const double* rk = rnd + (long long)(k > 0 ? k - 1 : 0) * " + str(nq) + ";")
        # start values: the problem's seed or a restart seed, clipped to the limits
        e("S " + ", ".join(f"q{i}" for i in used) + ";")
        for i in range(nq):
            src = f"sd[{i}]" if keep[i] or i not in used else f"(k == 0 ? sd[{i}] : rk[{i}])"
            with e.block(""):
                e(f"S v = S({src});")
                _emit_clip(e, "v", i, lo, hi, around)
                if i in used:
                    e(f"q{i} = v;")
                else:
                    e(f"qo[{i}] = v;")
        e("const S tol_p = S(fp[0]), tol_r = S(fp[1]), lam0 = S(fp[2]), lmin = S(fp[3]), "
          "lmax = S(fp[4]), up = S(fp[5]), down = S(fp[6]), stall_f = S(fp[7]);")
        e("const int stall_n = (int)fp[8];")
        e("const double nonmono = fp[9];")
        e("const int exc_n = (int)fp[10], exc_stall = (int)fp[11];")
        e("const long long budget_ns = params[0];")
        e("const unsigned long long deadline = budget_ns < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)budget_ns;")
        e("bool ok = false, timed = false; int it = 0; S pe_r = S(INFINITY), re_r = S(INFINITY);")
        moved = list(ch.colq)
        with e.block("if (active[p] && !(speed && done[p]))"):
            e(f"S r[{m}], r2[{m}], J[{m * nc}];")
            e(_joint_frame_decl(ch))
            e("S " + ", ".join(f"pt{t}_{a}" for t in range(T) for a in range(3)) + ";")
            e(f"S cost = r2ik_eval<S>({_q_args(ch)}, tgt, w, r, pe_r, re_r, {_frame_args(ch)});")
            e(f"r2ik_jac_residual<S>({_frame_args(ch)}, tgt, w, J);")
            e("ok = pe_r <= tol_p && re_r <= tol_r;")
            e("S cost0 = cost;  // the non-monotone phase's reference")
            e("S lam = lam0; int stall = 0;")
            e("const int give_up = k < K - 1 ? stall_n : 0;")
            e("// the limit excursion (dls.py): phase 0 may start one, 1 in it, 2 not")
            e("int phase = (give_up <= 0 && exc_n > 0) ? 0 : 2, it0 = 0; bool mono = false;")
            e("S pe_a = pe_r, re_a = re_r;")
            e("S " + ", ".join(f"qS{i} = q{i}, qA{i} = q{i}" for i in moved) + ";")
            with e.block("while (!ok && it < max_iter && (give_up <= 0 || stall < give_up))"):
                # the flags are device memory read through L2: every 4th iteration is enough
                e("if ((it & 3) == 0 && (*stop != 0 || (speed && done[p]))) break;")
                e("if (budget_ns >= 0 && r2ik_now() >= deadline) { timed = true; break; }")
                with e.block("if (phase == 0 && it >= exc_n && stall >= exc_stall && "
                             f"({_pinned(moved, lo, hi, around)}))"):
                    e(" ".join(f"qA{i} = q{i}; q{i} = qS{i};" for i in moved))
                    e("pe_a = pe_r; re_a = re_r;")
                    e(f"cost = r2ik_eval<S>({_q_args(ch)}, tgt, w, r, pe_r, re_r, "
                      f"{_frame_args(ch)});")
                    e(f"r2ik_jac_residual<S>({_frame_args(ch)}, tgt, w, J);")
                    e("cost0 = cost; lam = lam0; stall = 0; phase = 1; it0 = it;")
                e(f"S H0[{nc * nc}], g[{nc}], dq[{nc}], qs[{nc}];")
                e(f"bool blocked[{nc}];")
                e("const bool release = phase == 1;")
                _emit_lm_step(e, ch, nz, lo, hi, around, vector=False)
                for a in range(nc):
                    i = ch.colq[a]
                    with e.block(""):
                        e(f"qs[{a}] = q{i}; S v = q{i} + dq[{a}];")
                        # an excursion's revolute joints go unclipped
                        with e.block("if (!release)" if around[i] else ""):
                            _emit_clip(e, "v", i, lo, hi, around)
                        e(f"q{i} = v;")
                e("S pe2, re2;")
                e(f"const S cost2 = r2ik_eval<S>({_q_args(ch)}, tgt, w, r2, pe2, re2, "
                  f"{_frame_args(ch)});")
                e("it += 1;")
                with e.block("if (cost2 < (!mono && (double)(it - it0) <= nonmono ? cost0 "
                             ": cost))"):
                    e("if (cost2 > cost * stall_f) stall += 1; else stall = 0;")
                    e("cost = cost2; pe_r = pe2; re_r = re2;")
                    e(f"for (int i = 0; i < {m}; ++i) r[i] = r2[i];")
                    e(f"r2ik_jac_residual<S>({_frame_args(ch)}, tgt, w, J);")
                    e("lam = lam * down > lmin ? lam * down : lmin;")
                    e("ok = pe_r <= tol_p && re_r <= tol_r;")
                with e.block("else"):
                    for a in range(nc):
                        e(f"q{ch.colq[a]} = qs[{a}];")
                    e("const S lam2 = lam * up < lmax ? lam * up : lmax;")
                    e("if (lam2 == lam) break;  // the same step again next time: stuck")
                    e("lam = lam2;")
                    e("stall += 1;")
                with e.block("if (phase == 1 && (ok || it - it0 >= exc_n))"):
                    e("bool inside = true;")
                    with e.block("if (ok)"):
                        _emit_turn_inside(e, moved, lo, hi, around, "q{}", "inside")
                    with e.block("if (!(ok && inside))"):
                        e(" ".join(f"q{i} = qA{i};" for i in moved))
                        e(f"cost = r2ik_eval<S>({_q_args(ch)}, tgt, w, r, pe_r, re_r, "
                          f"{_frame_args(ch)});")
                        e(f"r2ik_jac_residual<S>({_frame_args(ch)}, tgt, w, J);")
                        e("lam = lam0; stall = 0; ok = false;")
                    e("mono = true; phase = 2;")
            with e.block("if (phase == 1)"):  # the iterations ran out in the excursion
                e(" ".join(f"q{i} = qA{i};" for i in moved) + " pe_r = pe_a; re_r = re_a; "
                  "ok = false;")
            e("if (ok && speed) done[p] = 1;")
        for i in used:
            e(f"qo[{i}] = q{i};")
        e("conv_o[row] = ok ? 1 : 0; iters_o[row] = it; pe_o[row] = pe_r; re_o[row] = re_r; "
          "tout_o[row] = timed ? 1 : 0;")


def _emit_ccd_kernel(e: _Emit, ch: Chain, scalar: str):
    """CCD sweeps with the closed-form updates of :mod:`ros2_ik.solvers.ccd` (one tip)."""
    from ..solvers.ccd import ORIENTATION_SCALE  # noqa: PLC0415

    model = ch.model
    nq = model.nq
    used, qv = _qvars(ch)
    lo, hi, around = _limits(model)
    frozen = {model.joint_index(n) for n in model.frozen}
    # CCD moves the non-mimic, non-frozen joints, tip first
    joints = [j for j in range(ch.starts[1] - 1, -1, -1)
              if not ch.mimic[j] and ch.link[j] not in frozen]
    e("""
// CCD on rows (N, nq) in place (q in S); tgt (N, 16), w (N, 6) per row; rtol as in ccd.py.
// Outputs: conv/tout (u8), sweeps (i32), pe/re (S).""")
    args = ("S* R2IK_RESTRICT q_rows, const S* R2IK_RESTRICT tgt_all, "
            "const S* R2IK_RESTRICT w_all, const unsigned char* R2IK_RESTRICT active_in, "
            "long long N, int max_sweeps, const double* R2IK_RESTRICT fp, double rtol, "
            "const unsigned long long* clock0, long long budget_ns, const volatile int* stop, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT sweeps_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    with e.kernel("r2ik_ccd", args):
        e(f"typedef {scalar} S;")
        e("const long long row = R2IK_ROW;")
        e("if (row >= N) return;")
        e("S* qr = q_rows + row * " + str(nq) + ";")
        e("const S* tgt = tgt_all + row * 16; const S* w = w_all + row * 6;")
        e("S " + ", ".join(f"q{i}" for i in used) + ";")
        for i in range(nq):  # clip_to_limits of the whole row, as ccd_solve_rows starts
            with e.block(""):
                e(f"S v = qr[{i}];")
                _emit_clip(e, "v", i, lo, hi, around)
                e(f"q{i} = v;" if i in used else f"qr[{i}] = v;")
        e("const S tol_p = S(fp[0]), tol_r = S(fp[1]);")
        e("const S wp = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]) / S(3);")
        e(f"const S wo = S({ORIENTATION_SCALE!r}) * ((w[3] * w[3] + w[4] * w[4] + w[5] * w[5]) "
          f"/ S(3));")
        e("const unsigned long long deadline = budget_ns < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)budget_ns;")
        e("S r[6]; S pe_r, re_r;")
        e(f"S cost = r2ik_errors<S>({_q_args(ch)}, tgt, w, r, pe_r, re_r);")
        e("bool conv = pe_r <= tol_p && re_r <= tol_r; bool act = active_in[row] != 0;")
        e("bool timed = false; int sw = 0;")
        e("S R[9], pv[3];")
        e(_joint_frame_decl(ch))
        with e.block("for (int it = 0; it < max_sweeps; ++it)"):
            e("act = act && !conv;")
            e("if (!act) break;")
            e("if (budget_ns >= 0 && r2ik_now() >= deadline) { timed = true; break; }")
            e("if (*stop != 0) break;")
            for j in joints:
                with e.block(f"/* joint {j} */"):
                    # full FK with the current q: tip pose and this joint's world frame
                    _emit_fk_tip(e, ch, 0, qv, keep_joint_frames=True, sincos=True)
                    e(f"const S zx = z{j}_0, zy = z{j}_1, zz = z{j}_2;")
                    e("const S* Tt = tgt;")
                    if ch.prismatic[j]:
                        e("S step = (zx * (Tt[3] - pv[0]) + zy * (Tt[7] - pv[1]) + "
                          "zz * (Tt[11] - pv[2])) * (wp > 0 ? S(1) : S(0));")
                    else:
                        e(f"S ux = pv[0] - pj{j}_0, uy = pv[1] - pj{j}_1, uz = pv[2] - pj{j}_2;")
                        e(f"S vx = Tt[3] - pj{j}_0, vy = Tt[7] - pj{j}_1, vz = Tt[11] - pj{j}_2;")
                        e("{ const S du = ux * zx + uy * zy + uz * zz; "
                          "ux = ux - du * zx; uy = uy - du * zy; uz = uz - du * zz; }")
                        e("{ const S dv = vx * zx + vy * zy + vz * zz; "
                          "vx = vx - dv * zx; vy = vy - dv * zy; vz = vz - dv * zz; }")
                        e("S a = wp * (ux * vx + uy * vy + uz * vz);")
                        e("S b = wp * (zx * (uy * vz - uz * vy) + zy * (uz * vx - ux * vz) + "
                          "zz * (ux * vy - uy * vx));")
                        # tip axes e_i = columns of R; target axes t_i = columns of Tt
                        e("S sa = S(0), sb = S(0), szz = S(0);")
                        for i in range(3):
                            e(f"{{ const S ex = R[{i}], ey = R[{3 + i}], ez = R[{6 + i}];")
                            e(f"  const S tx = Tt[{i}], ty = Tt[{4 + i}], tz = Tt[{8 + i}];")
                            e("  sa = sa + (ex * tx + ey * ty + ez * tz);")
                            e("  szz = szz + (zx * ex + zy * ey + zz * ez) * "
                              "(zx * tx + zy * ty + zz * tz);")
                            e("  sb = sb + (zx * (ey * tz - ez * ty) + zy * (ez * tx - ex * tz) + "
                              "zz * (ex * ty - ey * tx)); }")
                        e("a = a + wo * (sa - szz); b = b + wo * sb;")
                        e("S step = atan2(b, a);")
                    i = ch.qi[j]
                    e(f"S nv = q{i} + step;")
                    _emit_clip(e, "nv", i, lo, hi, np.zeros(nq, bool), wrap=False)
                    e(f"q{i} = nv;")
            e("sw += 1;")
            e("S pe2, re2;")
            e(f"const S cost2 = r2ik_errors<S>({_q_args(ch)}, tgt, w, r, pe2, re2);")
            e("const bool stalled = cost2 >= cost * (S(1) - S(rtol));")
            e("pe_r = pe2; re_r = re2; cost = cost2;")
            e("conv = conv || (pe_r <= tol_p && re_r <= tol_r);")
            e("act = act && !stalled;")
        for i in used:
            e(f"qr[{i}] = q{i};")
        e("conv_o[row] = conv ? 1 : 0; sweeps_o[row] = sw; pe_o[row] = pe_r; re_o[row] = re_r; "
          "tout_o[row] = timed ? 1 : 0;")


def _emit_select_kernel(e: _Emit, ch: Chain, scalar: str):
    """Per problem (float64): winner row, finalized q, goal errors by FK, success flag."""
    model = ch.model
    nq, T = model.nq, ch.T
    used, _ = _qvars(ch)
    lo, hi, around = _limits(model)
    cont = np.asarray(model.q_continuous, dtype=bool)
    e("""
// Per problem p: the winning row among its K (first converged, else the smallest
// pe/tol_p + re/tol_r), q finalized in float64 (continuous joints within pi of the seed, then the
// limits), its goal errors recomputed by float64 FK against tgt64, success = errors within the
// tolerances and q within the limits. Output out float64, field by field (each contiguous):
// q (P, nq), then (P,) each: success, pos_err, rot_err, iterations, seed_index, timed_out
// (any row of the problem), goal valid.""")
    args = ("const S* R2IK_RESTRICT q_rows, const unsigned char* R2IK_RESTRICT conv, "
            "const int* R2IK_RESTRICT iters, const S* R2IK_RESTRICT pe, "
            "const S* R2IK_RESTRICT re, const unsigned char* R2IK_RESTRICT tout, "
            "const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT tgt64, "
            "const double* R2IK_RESTRICT w64, long long w_stride, long long P, int K, "
            "const double* R2IK_RESTRICT fp, const unsigned char* R2IK_RESTRICT valid, "
            "double* R2IK_RESTRICT out")
    with e.kernel("r2ik_select", args):
        e(f"typedef {scalar} S;")
        e("const long long p = R2IK_ROW;")
        e("if (p >= P) return;")
        # as api._select in speed mode: the converged row with the fewest iterations (then the
        # lowest seed index); with none converged, the smallest scaled error (first on ties)
        e("int best = -1, best_c = -1; long long best_key = 0; double best_err = 0; "
          "bool any_t = false;")
        with e.block("for (int k = 0; k < K; ++k)"):
            e("const long long row = p * K + k;")
            e("if (tout[row]) any_t = true;")
            e("if (conv[row]) { const long long key = (long long)iters[row] * K + k;")
            e("  if (best_c < 0 || key < best_key) { best_c = k; best_key = key; } }")
            e("const double er = (double)pe[row] / fp[0] + (double)re[row] / fp[1];")
            e("if (best < 0 || er < best_err) { best = k; best_err = er; }")
        e("if (best_c >= 0) best = best_c;")
        e("const long long row = p * K + best;")
        e("const S* qr = q_rows + row * " + str(nq) + ";")
        e("const double* sd = seeds + p * seed_stride;")
        e("double* qb = out + p * " + str(nq) + ";")
        moved = set(int(c) for c in ch.colq)
        for i in range(nq):
            with e.block(""):
                e("typedef double S;")  # the clip below runs in float64
                # a coordinate no column moves (off the paths, frozen) is the seed's, exactly
                # (a float32 row holds it rounded)
                e(f"double v = {f'sd[{i}]' if i not in moved else f'(double)qr[{i}]'};")
                if cont[i]:
                    e(f"{{ const double x = R2IK_PI - (v - sd[{i}]); "
                      f"v = sd[{i}] + R2IK_PI - "
                      f"(x - 2.0 * R2IK_PI * floor(x / (2.0 * R2IK_PI))); }}")
                _emit_clip(e, "v", i, lo, hi, around)
                e(f"qb[{i}] = v;")
        e("double r[" + str(6 * T) + "]; double pe64, re64;")
        e(f"r2ik_errors<double>({', '.join(f'qb[{i}]' for i in used)}, tgt64 + p * {16 * T}, "
          f"w64 + p * w_stride, r, pe64, re64);")
        e("const bool ok = pe64 <= fp[0] && re64 <= fp[1];  // verified by FK; q is clipped")
        e(f"double* inf = out + P * {nq} + p;  // field f of problem p at inf[f * P]")
        e("inf[0] = ok ? 1.0 : 0.0; inf[P] = pe64; inf[2 * P] = re64; "
          "inf[3 * P] = (double)iters[row]; inf[4 * P] = (double)best; "
          "inf[5 * P] = any_t ? 1.0 : 0.0; inf[6 * P] = valid[p] ? 1.0 : 0.0;")


def _emit_prep_kernel(e: _Emit, ch: Chain, scalar: str):
    """Per problem: goal check in float64 (finite, position within MAX_VALUE, rotation
    orthonormal within :data:`ROTATION_TOL_C` and right-handed, as
    PoseObjective.invalid_problems), targets and weights cast to S (an invalid goal becomes the
    identity, so the batch math stays finite), active = valid && seed_ok."""
    from ..model import MAX_VALUE  # noqa: PLC0415

    T = ch.T
    e("""
// tgt64 (P, T, 16), w64 (P, T, 6) float64 (w_stride 6T, or 0: one set for all) -> tgtS, wS;
// seed_ok (P,) u8 (or null: all ok);
// active (P,) u8, valid (P,) u8; done (P,) reset for the solve.""")
    args = ("const double* R2IK_RESTRICT tgt64, const double* R2IK_RESTRICT w64, "
            "long long w_stride, const unsigned char* R2IK_RESTRICT seed_ok, long long P, "
            "S* R2IK_RESTRICT tgtS, S* R2IK_RESTRICT wS, unsigned char* R2IK_RESTRICT active, "
            "unsigned char* R2IK_RESTRICT valid, int* R2IK_RESTRICT done")
    with e.kernel("r2ik_prep", args):
        e(f"typedef {scalar} S;")
        e("const long long p = R2IK_ROW;")
        e("if (p >= P) return;")
        e(f"const double* t = tgt64 + p * {16 * T};")
        e("bool ok = true;")
        e(f"for (int i = 0; i < {16 * T}; ++i) if (!(t[i] - t[i] == 0.0)) ok = false;")
        with e.block(f"for (int k = 0; ok && k < {T}; ++k)"):
            e("const double* m = t + 16 * k;")
            e(f"if (fabs(m[3]) > {MAX_VALUE!r} || fabs(m[7]) > {MAX_VALUE!r} || "
              f"fabs(m[11]) > {MAX_VALUE!r}) ok = false;")
            e("for (int a = 0; a < 3; ++a) for (int b = 0; b < 3; ++b) {")
            e("  const double d = m[a] * m[b] + m[4 + a] * m[4 + b] + m[8 + a] * m[8 + b];")
            e(f"  if (fabs(d - (a == b ? 1.0 : 0.0)) > {ROTATION_TOL_C}) ok = false; }}")
            e("const double det = m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - "
              "m[6] * m[8]) + m[2] * (m[4] * m[9] - m[5] * m[8]);")
            e("if (!(det > 0)) ok = false;")
        e(f"for (int i = 0; i < {16 * T}; ++i) tgtS[p * {16 * T} + i] = "
          "ok ? S(t[i]) : S((i % 16) % 5 == 0 ? 1 : 0);")
        e(f"for (int i = 0; i < {6 * T}; ++i) wS[p * {6 * T} + i] = S(w64[p * w_stride + i]);")
        e("valid[p] = ok ? 1 : 0;")
        e("active[p] = (ok && (seed_ok == 0 || seed_ok[p])) ? 1 : 0;")
        e("done[p] = 0;")


def _header(ch: Chain, scalar: str, what: str) -> str:
    tips = ", ".join(ch.model.link_names[t] for t in ch.tips)
    return (f"// ros2_ik generated {what} kernels: model {ch.model.name!r}, tips [{tips}], "
            f"{ch.nc} columns, scalar {scalar}.\n"
            "#ifndef INFINITY\n#define INFINITY (__int_as_float(0x7f800000))\n#endif\n"
            "#define R2IK_PI 3.141592653589793\n"
            f"#define R2IK_TINY {'1e-300' if scalar == 'double' else '1e-30f'}\n")


def _scalar(dtype: str) -> str:
    try:
        return DTYPES[str(np.dtype(dtype))]
    except (KeyError, TypeError):
        raise InvalidInputError(f"dtype must be float32 or float64, got {dtype!r}") from None


def solve_source(ch: Chain, dtype="float32", *, host: bool = False, lanes: int | None = None
                 ) -> str:
    """CUDA C++ of the solve kernels (stamp, lm, ccd for one tip, select) for ``ch``; with
    ``host``, the same text for g++ (:func:`host_variant`). A host float64 source's ``r2ik_lm``
    runs ``lanes`` rows side by side (:mod:`.lanes`; None: :data:`.lanes.LANES`, 0: one row at a
    time, the CUDA kernel's loop); the rows are the same either way, bit for bit."""
    scalar = _scalar(dtype)
    e = _Emit()
    e(_header(ch, scalar, "solve"))
    e(_DEVICE_PRELUDE)
    e(f"typedef {scalar} S;  // the kernels' scalar (templates below take theirs as a parameter)")
    _emit_common(e, ch)
    # params = {budget_ns (< 0: no deadline), initial stop flag}: device memory, so that a
    # captured CUDA graph replays with each call's values
    with e.kernel("r2ik_stamp", "unsigned long long* clock0, int* stop, const long long* params"):
        e("if (R2IK_ROW == 0) { clock0[0] = r2ik_now(); stop[0] = (int)params[1]; }")
    _emit_prep_kernel(e, ch, scalar)
    _emit_lm_kernel(e, ch, scalar)
    if ch.T == 1:
        _emit_ccd_kernel(e, ch, scalar)
    _emit_select_kernel(e, ch, scalar)
    if not host:
        return e.text()
    from . import lanes as lanes_mod  # noqa: PLC0415 - host only; it builds on this module

    n = lanes_mod.LANES if lanes is None else int(lanes)
    if scalar != "double" or n <= 1:
        return host_variant(e.text())
    return host_variant(e.text() + lanes_mod.lanes_source(ch, n),
                        all_rows={"r2ik_lm": "r2ik_lm_lanes"})


def _emit_frames_kernels(e: _Emit, ch: Chain, scalar: str):
    model = ch.model
    nq, F = model.nq, ch.T
    used, qv = _qvars(ch)
    va = {int(v): c for c, v in enumerate(model.v_active)}
    nva = len(va)
    e(f"""
// q (B, nq) in S; r2ik_fk: T (B, {F}, 4, 4) row-major; r2ik_jac: J (B, {F}, 6, {nva}) world
// Jacobians (linear; angular), columns model.v_active, zero-filled.""")
    def kernel(name, per_tip):
        """One thread per configuration: q from q_all, FK to each frame, ``per_tip(t)``."""
        with e.kernel(name, "const S* R2IK_RESTRICT q_all, long long B, S* R2IK_RESTRICT out"):
            e(f"typedef {scalar} S;")
            e("const long long b = R2IK_ROW;")
            e("if (b >= B) return;")
            e(f"const S* q = q_all + b * {nq};")
            e("S R[9], pv[3];")
            e(_joint_frame_decl(ch))
            for i in used:
                e(f"const S q{i} = q[{i}];")
            for t in range(F):
                with e.block(""):
                    _emit_fk_tip(e, ch, t, qv, keep_joint_frames=True)
                    per_tip(t)

    def pose(t):
        e(f"S* o = out + (b * {F} + {t}) * 16;")
        e("o[0] = R[0]; o[1] = R[1]; o[2] = R[2]; o[3] = pv[0]; o[4] = R[3]; o[5] = R[4]; "
          "o[6] = R[5]; o[7] = pv[1]; o[8] = R[6]; o[9] = R[7]; o[10] = R[8]; "
          "o[11] = pv[2]; o[12] = S(0); o[13] = S(0); o[14] = S(0); o[15] = S(1);")

    def jac(t):
        e(f"S* o = out + (b * {F} + {t}) * {6 * nva};")
        e(f"for (int i = 0; i < {6 * nva}; ++i) o[i] = S(0);")
        for j in range(ch.starts[t], ch.starts[t + 1]):
            if ch.col[j] < 0:
                continue
            c = va[int(model.q_to_v[ch.qi[j]])]
            mj = _lit(ch.mult[j])
            e(f"{{ const S zx = z{j}_0 * {mj}, zy = z{j}_1 * {mj}, zz = z{j}_2 * {mj};")
            if ch.prismatic[j]:
                e(f"  o[{c}] += zx; o[{nva + c}] += zy; o[{2 * nva + c}] += zz; }}")
            else:
                e(f"  const S dx = pv[0] - pj{j}_0, dy = pv[1] - pj{j}_1, dz = pv[2] - pj{j}_2;")
                e(f"  o[{c}] += zy * dz - zz * dy; o[{nva + c}] += zz * dx - zx * dz; "
                  f"o[{2 * nva + c}] += zx * dy - zy * dx;")
                e(f"  o[{3 * nva + c}] += zx; o[{4 * nva + c}] += zy; o[{5 * nva + c}] += zz; }}")

    kernel("r2ik_fk", pose)
    kernel("r2ik_jac", jac)


def frames_source(ch: Chain, dtype="float32", *, host: bool = False) -> str:
    """CUDA C++ of ``r2ik_fk`` and ``r2ik_jac`` for the frames ``ch.tips`` (``host``: for g++)."""
    scalar = _scalar(dtype)
    e = _Emit()
    e(_header(ch, scalar, "frames"))
    e(_DEVICE_PRELUDE)
    e(_PRELUDE)
    e(f"typedef {scalar} S;")
    _emit_frames_kernels(e, ch, scalar)
    return host_variant(e.text()) if host else e.text()


KERNEL_RE = re.compile(r"^R2IK_KERNEL (\w+)\(([^)]*)\)", re.M)


def host_variant(src: str, all_rows: dict[str, str] | None = None) -> str:
    """The generated CUDA text made into host C++: the device prelude swapped for
    :data:`HOST_SHIM`, and per kernel an ``extern "C" host_<kernel>(rows, args...)`` that runs
    it once per row, in row order (the threads do not cooperate, so this is the kernel's
    result). Everything between is the very text NVRTC compiles. ``all_rows`` maps a kernel to
    a host function that takes ``(rows, args...)`` and does all the rows itself."""
    all_rows = all_rows or {}
    if _DEVICE_PRELUDE not in src:
        raise InvalidInputError("not a generated ros2_ik kernel source")
    e = _Emit()
    for name, args in KERNEL_RE.findall(src):
        params = [a.strip() for a in args.split(",")]
        names = [re.findall(r"[A-Za-z_][A-Za-z_0-9]*", a)[-1] for a in params]
        with e.block(f'extern "C" void host_{name}(long long rows, {args})'):
            if name in all_rows:
                e(f"{all_rows[name]}(rows, {', '.join(names)});")
            else:
                e(f"for (r2ik_row_ = 0; r2ik_row_ < rows; ++r2ik_row_) "
                  f"{name}({', '.join(names)});")
    return src.replace(_DEVICE_PRELUDE, HOST_SHIM) + e.text()


def source_hash(src: str) -> str:
    return hashlib.sha256(src.encode()).hexdigest()[:16]
