"""The one compiled source: C++ generated from a chain table, rendered for every compiled backend.

Every compiled algorithm of ros2_ik (FK and the residual Jacobian along the chains, the LM step
with its damping, non-monotone phase, active-set limits and limit excursion, the CCD sweep,
selection and FK verification) is written once, here, as an emitter of C++ text with the robot
baked in: fixed transforms become literals (products with a literal 0 are dropped, with 1
become the operand), the axis case of every joint (prismatic, revolute about +-z, general
Rodrigues) is chosen, mimic multipliers and offsets, limits, which revolute joints go round by
2 pi and the structural zeros of the Jacobian are literals, and every small matrix loop is
unrolled with constant indices so that the arrays stay in registers. The readable reference of
the same steps is :mod:`ros2_ik.ik` (``lm.py``, ``ccd.py``, ``batch.py``); a solver change
touches that and this module, nothing else.

One text, three renderings:

- CUDA (:func:`solve_source`, NVRTC through CuPy: :mod:`.cuda`): one thread per row (a problem
  x seed pair);
- host scalar (:func:`solve_source` with ``host=True``, g++: :mod:`.host`): the same kernel text
  after :func:`host_variant` swaps the device prelude for :data:`HOST_SHIM`, plus a driver that
  runs a slice of problems (check, solve, select) in one call;
- host vector lanes: the LM rows rendered a second time in the :data:`VECTOR` dialect, where a
  value is 4 rows side by side in an AVX2 register and a branch is a lane-wise select.

The LM rows are emitted by ONE function (:func:`_emit_lm_rows`) for both dialects: a
:class:`Dialect` says how a value, a mask, a select and a lane are spelt, and every lane does
the one-row rendering's operations in the same order, so the scalar and the vector renderings
give the same rows bit for bit (``test_backends.py``). The kernels' interface (the options
struct, status codes, solve modes, argument structs) is generated from the spec's types
(:mod:`.interface`), and the robot from the model layer's typed chain table
(:func:`ros2_ik.model.chain.chain_table`).

The threads never cooperate (no shared memory, no barriers, no warp shuffles); the only memory
two rows share is a problem's ``done`` flag in speed mode (a row that converged sets it, the
problem's other seeds stop). On the host a lane runs a problem's seeds in order (the first
that converges wins, as in the reference's speed mode); on a GPU they run side by side.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError
from ..ik.batch import CCD_POLISH_SWEEPS
from ..ik.ccd import DEFAULT_RTOL, ORIENTATION_SCALE
from ..ik.checks import SEED_LIMIT_SLACK
from ..ik.seeds import limited_revolute, movable_coordinates, restart_seeds
from ..model import MAX_VALUE, Model
from ..model.chain import chain_table
from ..validate import ROTATION_TOL
from . import interface
from . import sincos as sc
from .ctext import lin as _lin
from .ctext import lit as _lit

__all__ = ["Chain", "chain_of", "solve_source", "frames_source", "host_variant", "HOST_SHIM",
           "DTYPES", "source_hash", "Dialect", "SCALAR", "VECTOR", "LANES"]

DTYPES = {"float32": "float", "float64": "double"}
#: the goal check's rotation bound (validate.ROTATION_TOL) as the generated code writes it
ROTATION_TOL_C = "1e-6"
assert float(ROTATION_TOL_C) == ROTATION_TOL
#: rows per vector of the host lanes: 4 doubles (one AVX register)
LANES = 4


def _double(x: float) -> str:
    """A C double literal of x (shortest round trip: the very float64 value)."""
    return repr(float(x))


def _sincos_steps(T: str, lit, floor: str) -> str:
    """C++ lines of :mod:`.sincos`'s recipe up to its quadrant, on ``x`` of type ``T`` (``lit``
    writes a constant, ``floor`` names the floor): ``sp``/``cp`` the sine and cosine on
    [-pi/4, pi/4], ``quad`` = k mod 4. The host's scalar ``r2ik_sincos`` and the lanes' vector
    one share these steps, in this order."""
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
    """The host's ``r2ik_sincos``: float64 by :mod:`.sincos`'s recipe, step for step, float32
    by libm."""
    m = _double(sc.REDUCE_MAX)
    return f"""__attribute__((always_inline)) static inline void r2ik_sincos(double x, double& s,
                                                                  double& c) {{
  if (__builtin_expect(!(x <= {m} && x >= -{m}), 0)) {{
    s = std::sin(x); c = std::cos(x); return;
  }}
{_sincos_steps("double", _double, "std::floor")}  // swap and signs by the quadrant, branch-free
  const int k4 = (int)quad;
  const double pair[2] = {{sp, cp}};
  const double sign[4] = {{1.0, 1.0, -1.0, -1.0}};
  s = pair[k4 & 1] * sign[k4];
  c = pair[(k4 & 1) ^ 1] * sign[(k4 + 1) & 3];
}}
static inline void r2ik_sincos(float x, float& s, float& c) {{ s = std::sin(x); c = std::cos(x); }}
"""


# What the generated text sees: CUDA (nvcc / NVRTC) or the host (g++ through this shim). Only the
# few names below differ; everything else in the source is plain C++ shared by both.
HOST_SHIM = r"""
#include <cmath>
#include <cstdint>
#include <ctime>
#include <vector>
using std::sin; using std::cos; using std::sqrt; using std::atan2; using std::floor;
using std::fabs; using std::ceil;
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
static inline double r2ik_nan() { return std::nan(""); }
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
__device__ __forceinline__ double r2ik_nan() { return nan(""); }
"""

_PRELUDE = r"""
#if !defined(__CUDACC__) && !defined(R2IK_HOST)
#error "compile for CUDA (nvcc / NVRTC), or for the host with the host shim first"
#endif
// a choice between two values both computed (the scalar dialect's select; the vector one's
// is lane-wise, see the lanes' types)
template <typename T> R2IK_FN T r2ik_sel(bool c, T a, T b) { return c ? a : b; }
// "any lane": a bool is one lane (the vector dialect's mask has its own)
R2IK_FN bool r2ik_any_m(bool c) { return c; }
"""


@dataclass(frozen=True)
class Dialect:
    """How the LM rows' text spells values and masks: one row (``lanes`` 1: a value is the
    scalar ``S``, a mask a ``bool``) or ``lanes`` rows side by side (a value is a vector ``V``,
    a mask ``M``, every branch on data a lane-wise select)."""

    lanes: int

    @property
    def vector(self) -> bool:
        return self.lanes > 1

    def and_(self, *terms) -> str:
        return (" & " if self.vector else " && ").join(f"({t})" for t in terms)

    def or_(self, *terms) -> str:
        return (" | " if self.vector else " || ").join(f"({t})" for t in terms)

    def not_(self, m: str) -> str:
        return f"~({m})" if self.vector else f"!({m})"

    def any(self, m: str) -> str:
        return f"r2ik_any({m})" if self.vector else f"({m})"

    @property
    def none(self) -> str:
        """The all-false mask."""
        return "M(r2ik_mv{})" if self.vector else "false"

    def lane(self, v: str, l: str = "l") -> str:
        """Lane ``l`` of value ``v`` (an lvalue)."""
        return f"{v}.x[{l}]" if self.vector else v

    def mlane(self, m: str, l: str = "l") -> str:
        """Lane ``l`` of mask ``m`` (a bool)."""
        return f"{m}[{l}]" if self.vector else m

    def mask(self, arr: str) -> str:
        """The mask of a ``bool arr[lanes]``."""
        return f"r2ik_mask({arr})" if self.vector else f"{arr}[0]"


SCALAR = Dialect(1)
VECTOR = Dialect(LANES)


@dataclass(frozen=True)
class Chain:
    """A model and the chain table of its tips, in the form the emitters read (Python ints
    and tuples; :class:`ros2_ik.model.chain.ChainTable` holds the arrays)."""

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
    #: the collision model in the generator's form (None: collisions not compiled in)
    coll: object = None

    @property
    def T(self) -> int:
        return len(self.starts) - 1

    @property
    def nc(self) -> int:
        return len(self.colq)


def chain_of(model: Model, tips, collision=None) -> Chain | None:
    """The chain data for ``tips`` (link names or indices), or None when a joint on a path is
    not revolute, continuous, prismatic or fixed (the generator covers 1-DOF chains only) or no
    joint on the paths can move (nothing to solve for; the reference answers those). With a
    ``collision`` model (:class:`ros2_ik.model.collision.CollisionModel`) the solve kernels
    carry the collision terms (None also when a collision link's path has another joint)."""
    if isinstance(tips, str) or not len(tips):
        if not isinstance(tips, str):
            raise InvalidInputError("no tips given for the generated kernels")
        tips = [tips]
    c = chain_table(model, tips)
    if c is None or c.nc == 0:
        return None
    coll = None
    if collision is not None:
        from .codegen_collision import collision_chain  # noqa: PLC0415

        coll = collision_chain(model, collision, c.colq)
        if coll is None:
            return None
    return Chain(model=model, tips=c.tips, starts=tuple(int(s) for s in c.starts),
                 pre=c.pre, axis=c.axis, prismatic=tuple(bool(t) for t in c.prismatic),
                 qi=tuple(int(i) for i in c.qi), mult=tuple(float(v) for v in c.mult),
                 off=tuple(float(v) for v in c.off), col=tuple(int(v) for v in c.col),
                 link=tuple(int(l) for l in c.link), mimic=tuple(bool(m) for m in c.mimic),
                 post=c.post, colq=tuple(int(v) for v in c.colq), coll=coll)


# ------------------------------------------------------------------ expression helpers

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
                 sincos: bool = False, export_trig: bool = False):
    """FK along tip t's chain into R[9] (row-major) and pv[3]. ``qv(i)`` names q coordinate i.
    With ``keep_joint_frames`` the joints' world axes z{j}_a and origins pj{j}_a are set, else
    only what the chain needs. With ``sincos`` (the solve
    kernels) a joint's sine and cosine come from one ``r2ik_sincos(x, s, c)`` call: CUDA's
    ``sincos`` on a GPU, on the host :mod:`.sincos`'s recipe); without (the frames kernels)
    from ``sin`` and ``cos``; with ``export_trig`` each revolute joint's pair also goes to
    ``esn{j}`` / ``ecs{j}`` (for the collision terms: :func:`_trig_exports`)."""
    jj = [0]

    def sin_cos(val):
        if sincos:
            e(f"S c, sn_; r2ik_sincos({val}, sn_, c);")
            if export_trig:
                e(f"esn{jj[0]} = sn_; ecs{jj[0]} = c;")
            return "sn_"
        e(f"const S c = cos({val});")
        return f"sin({val})"
    e("R[0] = S(1); R[1] = S(0); R[2] = S(0); R[3] = S(0); R[4] = S(1); R[5] = S(0); "
      "R[6] = S(0); R[7] = S(0); R[8] = S(1); pv[0] = S(0); pv[1] = S(0); pv[2] = S(0);")
    for j in range(ch.starts[t], ch.starts[t + 1]):
        jj[0] = j
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
                # m = c I + C a a^T + s [a]x
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
    """``r2ik_so3_log<S>``: the rotation vector of a rotation matrix (as
    :func:`ros2_ik.kinematics.se3.so3_log`), its branches as selects of values each computed
    as the branch would, so that one text serves a row and a vector of lanes."""
    e("""
template <typename S>
R2IK_FN void r2ik_so3_log(S m00, S m01, S m02, S m10, S m11, S m12, S m20, S m21, S m22,
                          S* out) {
  const S tr = m00 + m11 + m22;
  const S one = S(1);
  const S d0 = one + tr, d1 = one + m00 - m11 - m22, d2 = one - m00 + m11 - m22;
  const S d3 = one - m00 - m11 + m22;
  const auto c0 = (d0 >= d1) & (d0 >= d2) & (d0 >= d3);
  const auto c1 = (d1 >= d2) & (d1 >= d3);
  const auto c2 = d2 >= d3;
  S x = r2ik_sel(c0, m21 - m12, r2ik_sel(c1, d1, r2ik_sel(c2, m01 + m10, m02 + m20)));
  S y = r2ik_sel(c0, m02 - m20, r2ik_sel(c1, m01 + m10, r2ik_sel(c2, d2, m12 + m21)));
  S zq = r2ik_sel(c0, m10 - m01, r2ik_sel(c1, m02 + m20, r2ik_sel(c2, m12 + m21, d3)));
  S wq = r2ik_sel(c0, d0, r2ik_sel(c1, m21 - m12, r2ik_sel(c2, m02 - m20, m10 - m01)));
  const S n = sqrt(x * x + y * y + zq * zq + wq * wq);
  x = x / n; y = y / n; zq = zq / n; wq = wq / n;
  const auto neg = wq < S(0);
  x = r2ik_sel(neg, -x, x); y = r2ik_sel(neg, -y, y);
  zq = r2ik_sel(neg, -zq, zq); wq = r2ik_sel(neg, -wq, wq);
  const S sh = sqrt(x * x + y * y + zq * zq);
  const auto small = sh < S(1e-12);
  const S sc = S(2) * atan2(sh, wq) / sh;
  out[0] = r2ik_sel(small, S(2) * x, x * sc);
  out[1] = r2ik_sel(small, S(2) * y, y * sc);
  out[2] = r2ik_sel(small, S(2) * zq, zq * sc);
}
""")


def _joint_frame_decl(ch: Chain, T: str = "S") -> str:
    names = []
    for j in range(len(ch.qi)):
        names += [f"z{j}_{a}" for a in range(3)] + [f"pj{j}_{a}" for a in range(3)]
    return f"{T} " + ", ".join(names) + ";" if names else ""


def _qvars(ch: Chain):
    """The q coordinates the chains read or move, in order, and a namer for them."""
    used = sorted(set(ch.qi) | set(ch.colq) | set(ch.coll.qi if ch.coll is not None else ()))
    return used, (lambda i: f"q{i}")


def _ternary(c: str, a: str, b: str) -> str:
    return f"r2ik_sel({c}, {a}, {b})"

def _trig_exports(ch: Chain) -> list:
    """The chain joints whose sine and cosine the evaluation hands to the collision terms:
    ``[(j, (q index, mult, offset))]`` (revolute joints; the first of a joint shared by tips)."""
    out, seen = [], set()
    for j in range(len(ch.qi)):
        key = (int(ch.qi[j]), float(ch.mult[j]), float(ch.off[j]))
        if not ch.prismatic[j] and key not in seen:
            seen.add(key)
            out.append((j, key))
    return out


def _emit_evaluate(e: _Emit, ch: Chain, name: str, *, frames: bool, sel=_ternary,
                   log: str = "r2ik_so3_log<S>", sincos: bool = False,
                   export_trig: bool = False):
    """``S name(q..., tgt, w, r, frames...)`` -> cost; errors into pe/re (as
    ``ik.residuals.evaluate`` with pose objectives). The joint frames and tip positions are
    macros' by-reference arguments.
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
    exported = {j for j, _ in _trig_exports(ch)} if export_trig else set()
    if export_trig:
        args += [f"S& esn{j}, S& ecs{j}" for j in sorted(exported)]
    e("template <typename S>")
    with e.block(f"R2IK_FN S {name}({', '.join(args)})"):
        if export_trig:  # (a joint shared by tips writes its pair once more: the same values)
            e(" ".join(f"S esn{j}, ecs{j};" for j in range(len(ch.qi))
                       if not ch.prismatic[j] and j not in exported))
        e("S R[9], pv[3], er[3];")
        e("S pe_max = S(0), re_max = S(0);")
        for t in range(T):
            e(f"// ---- tip {t}: {ch.model.link_names[ch.tips[t]]}")
            _emit_fk_tip(e, ch, t, qv, keep_joint_frames=frames, sincos=sincos,
                         export_trig=export_trig)
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
    """``name(frames..., tgt, w, J)``: the residual Jacobian (as the pose objectives' rows)."""
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




def _emit_common(e: _Emit, ch: Chain, check: bool = True):
    """The templates every rendering instantiates: SO(3) log, evaluate (cost, errors, joint
    frames), errors only, and the residual Jacobian; with a collision model its terms (and,
    with ``check``, the float64 exact check the select kernel runs)."""
    _emit_so3_log(e)
    _emit_evaluate(e, ch, "r2ik_eval", frames=True, sincos=True,
                   export_trig=ch.coll is not None)
    _emit_evaluate(e, ch, "r2ik_errors", frames=False, sincos=True)
    _emit_jacobian(e, ch, "r2ik_jac_residual")
    if ch.coll is not None:
        from .codegen_collision import emit_collision  # noqa: PLC0415

        used, qv = _qvars(ch)
        emit_collision(e, ch.coll, ch.nc, used, qv, check)


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


#: 2 pi in the kernel's scalar, as the reference's ``2 * math.pi`` in float64
_TWO_PI = "S(2) * S(R2IK_PI)"


def _emit_clip(e: _Emit, var: str, i: int, lo, hi, around, *, wrap=True):
    """clip_to_limits (:func:`ros2_ik.ik.seeds.clip_to_limits`) of coordinate i of a scalar
    (a limited revolute joint goes around by 2 pi first where that lands inside)."""
    if wrap and around[i]:
        e(f"if ({var} > {_lit(hi[i])} && {var} - {_TWO_PI} >= {_lit(lo[i])}) "
          f"{var} = {var} - {_TWO_PI}; "
          f"else if ({var} < {_lit(lo[i])} && {var} + {_TWO_PI} <= {_lit(hi[i])}) "
          f"{var} = {var} + {_TWO_PI};")
    if math.isfinite(lo[i]):
        e(f"if ({var} < {_lit(lo[i])}) {var} = {_lit(lo[i])};")
    if math.isfinite(hi[i]):
        e(f"if ({var} > {_lit(hi[i])}) {var} = {_lit(hi[i])};")


def _emit_clip_sel(e: _Emit, d: Dialect, var: str, i: int, lo, hi, around):
    """:func:`_emit_clip` as selects (the LM step's trial values, in either dialect)."""
    if around[i]:
        a, b = _lit(lo[i]), _lit(hi[i])
        e(f"{{ const M up_ = {d.and_(f'{var} > {b}', f'{var} - {_TWO_PI} >= {a}')};")
        e(f"  const M dn_ = {d.and_(d.not_('up_'), f'{var} < {a}', f'{var} + {_TWO_PI} <= {b}')};")
        e(f"  {var} = r2ik_sel(up_, {var} - {_TWO_PI}, "
          f"r2ik_sel(dn_, {var} + {_TWO_PI}, {var})); }}")
    if math.isfinite(lo[i]):
        e(f"{var} = r2ik_sel({var} < {_lit(lo[i])}, V({_lit(lo[i])}), {var});")
    if math.isfinite(hi[i]):
        e(f"{var} = r2ik_sel({var} > {_lit(hi[i])}, V({_lit(hi[i])}), {var});")


def _pinned(moved, lo, hi, around, var: str = "q{}") -> str:
    """C: whether a moved revolute joint ``var.format(i)`` of range under 2 pi sits at a limit
    (``ik/lm.py``'s excursion rule; "false" when the chain has none)."""
    c = [f"{var.format(i)} <= {_lit(lo[i])} || {var.format(i)} >= {_lit(hi[i])}" for i in moved
         if around[i] and hi[i] - lo[i] < 2 * math.pi]
    return " || ".join(c) or "false"


def _emit_turn_inside(e: _Emit, moved, lo, hi, around, var: str, inside: str):
    """The moved revolute joints ``var.format(i)`` by whole turns to their limits' side; clears
    ``inside`` where one is then outside (``ik/lm.py``'s ``_turn_inside``)."""
    for i in moved:
        if not around[i]:
            continue
        v, a, b = var.format(i), _lit(lo[i]), _lit(hi[i])
        e(f"if ({v} < {a}) {v} = {v} + {_TWO_PI} * ceil(({a} - {v}) / ({_TWO_PI})); "
          f"else if ({v} > {b}) {v} = {v} - {_TWO_PI} * ceil(({v} - {b}) / ({_TWO_PI}));")
        e(f"{inside} = {inside} && {v} >= {a} && {v} <= {b};")


def _emit_lm_step(e: _Emit, ch: Chain, d: Dialect, nz, lo, hi, around, coll: bool = False):
    """The LM step ``dq`` of a row (or of every lane) from ``r``, ``J``, ``lam``, ``cost`` and
    the joint values ``q<i>``: the normal equations with the damping of ``ik/lm.py``
    (``lambda (diag(J^T J) + E + 1e-9)``), Cholesky and substitutions, solved again (one more
    pass) without the joints at a limit the step pushes further out. The caller declares
    ``H0``, ``g``, ``dq``, ``blocked`` (all false) and ``release`` (rows in a limit excursion,
    whose revolute joints are never blocked). ``coll``: the collision rows' ``J^T J`` and
    ``J^T r`` (``Hc``, ``gc``) are added to the goals' ones."""
    nc, m = ch.nc, 6 * ch.T
    zero, one = "V(S(0))", "V(S(1))"
    for a in range(nc):
        s = "".join(f" acc = acc + J[{i * nc + a}] * r[{i}];" for i in range(m) if nz[i, a])
        if coll:
            s += f" acc = acc + gc[{a}];"
        e(f"{{ V acc = {zero};{s} g[{a}] = acc; }}")
        for b in range(a + 1):
            terms = [i for i in range(m) if nz[i, a] and nz[i, b]]
            s = "; ".join(f"acc = acc + J[{i * nc + a}] * J[{i * nc + b}]" for i in terms)
            if coll:
                s = (s + "; " if s else "") + f"acc = acc + Hc[{a * nc + b}]"
            e(f"{{ V acc = {zero}; {s + ';' if s else ''} H0[{a * nc + b}] = acc; "
              f"H0[{b * nc + a}] = acc; }}")
    for a in range(nc):
        e(f"H0[{a * nc + a}] = H0[{a * nc + a}] + lam * (H0[{a * nc + a}] + cost + V(S(1e-9)));")
    e("#pragma unroll 1")
    with e.block("for (int pass = 0; pass < 2; ++pass)"):
        e(f"V H[{nc * nc}], gb[{nc}];")
        for a in range(nc):
            for b in range(nc):
                e(f"H[{a * nc + b}] = r2ik_sel({d.or_(f'blocked[{a}]', f'blocked[{b}]')}, "
                  f"{zero}, H0[{a * nc + b}]);")
            e(f"H[{a * nc + a}] = r2ik_sel(blocked[{a}], {one}, H[{a * nc + a}]);")
            e(f"gb[{a}] = r2ik_sel(blocked[{a}], {zero}, g[{a}]);")
        # Cholesky H = L L^T (L in H's lower triangle), one division per column (its
        # diagonal's reciprocal), then L y = -g and L^T dq = y
        e(f"V hinv[{nc}];")
        for a in range(nc):
            e(f"{{ V s = H[{a * nc + a}];" + "".join(
                f" s = s - H[{a * nc + b}] * H[{a * nc + b}];" for b in range(a)))
            e(f"  s = r2ik_sel(s > {zero}, sqrt(s), V(S(R2IK_TINY))); H[{a * nc + a}] = s;")
            e(f"  const V inv = {one} / s; hinv[{a}] = inv;")
            for i in range(a + 1, nc):
                e(f"  {{ V t = H[{i * nc + a}];" + "".join(
                    f" t = t - H[{i * nc + b}] * H[{a * nc + b}];" for b in range(a))
                  + f" H[{i * nc + a}] = t * inv; }}")
            e("}")
        for a in range(nc):
            e(f"{{ V t = -gb[{a}];" + "".join(
                f" t = t - H[{a * nc + b}] * dq[{b}];" for b in range(a))
              + f" dq[{a}] = t * hinv[{a}]; }}")
        for a in range(nc - 1, -1, -1):
            e(f"{{ V t = dq[{a}];" + "".join(
                f" t = t - H[{b * nc + a}] * dq[{b}];" for b in range(a + 1, nc))
              + f" dq[{a}] = t * hinv[{a}]; }}")
        e(f"M more = {d.none};")
        for a in range(nc):
            i = ch.colq[a]
            conds = []
            # at a limit and pushed out: blocked, unless a revolute joint's step goes round to
            # the far side of the arc outside its limits
            if math.isfinite(lo[i]):
                t = [f"dq[{a}] < {zero}", f"q{i} <= {_lit(lo[i])}"]
                if around[i]:
                    t.append(d.not_(f"q{i} + dq[{a}] + {_TWO_PI} <= {_lit(hi[i])}"))
                conds.append(d.and_(*t))
            if math.isfinite(hi[i]):
                t = [f"dq[{a}] > {zero}", f"q{i} >= {_lit(hi[i])}"]
                if around[i]:
                    t.append(d.not_(f"q{i} + dq[{a}] - {_TWO_PI} >= {_lit(lo[i])}"))
                conds.append(d.and_(*t))
            if not conds:
                continue
            parts = [d.not_(f"blocked[{a}]")]
            if around[i]:
                parts.append(d.not_("release"))
            parts.append(d.or_(*conds))
            e(f"{{ const M nb = {d.and_(*parts)}; blocked[{a}] = {d.or_(f'blocked[{a}]', 'nb')}; "
              f"more = {d.or_('more', 'nb')}; }}")
        e(f"if (!{d.any('more')}) break;")


def _emit_start_value(e: _Emit, ch: Chain, i: int, keep, used, lo, hi, around):
    """Coordinate i of a row's start into ``v``: the start row's value when one is given, else
    the problem's seed (row 0, and every row for coordinates a restart keeps) or restart seed
    ``k-1``; then clipped (:func:`ros2_ik.ik.seeds.expand_seeds`, then ``clip_to_limits``).
    Reads ``st`` (start row or null), ``sd`` (seed), ``rk`` (restart seed), ``k``."""
    src = f"sd[{i}]" if keep[i] or i not in used else f"(k == 0 ? sd[{i}] : rk[{i}])"
    e(f"S v = S(st ? st[{i}] : {src});")
    _emit_clip(e, "v", i, lo, hi, around)


def _emit_lm_rows(e: _Emit, ch: Chain, d: Dialect):
    """``r2ik_lm_rows``: LM on the rows of problems ``[p_begin, p_end)`` (``only_row`` < 0: a
    host call; each of the dialect's lanes takes a problem and runs its seeds in order, then
    the next problem; a problem is started only before the deadline and a stop), or on the one
    row ``only_row`` (a GPU thread). Mirrors ``ik/lm.py`` step for step; written for either
    dialect (see :class:`Dialect`)."""
    model = ch.model
    nq, T, nc, m = model.nq, ch.T, ch.nc, 6 * ch.T
    used, _ = _qvars(ch)
    lo, hi, around = _limits(model)
    # the restart rule of ik.seeds.expand_seeds: coordinates off the base->tip paths
    # (movable_coordinates) keep the problem's seed
    _, keep = restart_seeds(model, 1, 0, movable_coordinates(model, ch.tips))
    nz = _jac_structure(ch)
    moved = list(ch.colq)
    L = d.lanes
    lane = d.lane
    e(f"""
// Rows p * K + k of problems p in [p_begin, p_end) (outputs indexed from p_begin * K, done and
// started from p_begin): seeds (P, nq) (seed_stride nq, or 0: one seed), rnd (K-1, nq) restart
// seeds, start (rows, nq) start rows or null, tgt_all (P, {T}, 16), w_all (P or 1, {T}, 6),
// active (from p_begin), opt the options, deadline [ns of r2ik_now] or 0, stop / done flags.""")
    args = ("long long p_begin, long long p_end, long long only_row, int K, "
            "const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const double* R2IK_RESTRICT start, "
            "const S* R2IK_RESTRICT tgt_all, const S* R2IK_RESTRICT w_all, long long w_stride, "
            "const unsigned char* R2IK_RESTRICT active, const r2ik_options* R2IK_RESTRICT opt, "
            "unsigned long long deadline, const volatile int* stop, volatile int* done, "
            "unsigned char* R2IK_RESTRICT started, S* R2IK_RESTRICT q_out, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT iters_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    coll = ch.coll is not None
    if coll:  # the world (ros2_ik.world.World.packed), read by every row
        args += ", const double* R2IK_RESTRICT obs, long long n_obs"
    with e.block(f"R2IK_FN void r2ik_lm_rows({args})"):
        e("const S tol_p = S(opt->position_tolerance), tol_r = S(opt->orientation_tolerance);")
        e("const S lam0 = S(opt->lambda_initial), lmin = S(opt->lambda_min), "
          "lmax = S(opt->lambda_max), up = S(opt->lambda_up), down = S(opt->lambda_down), "
          "stall_f = S(opt->stall_ratio);")
        e("const long long stall_n = opt->stall_iterations, max_iter = opt->max_iterations;")
        e("const double nonmono = (double)opt->nonmonotone_iterations;")
        e("const long long exc_n = opt->excursion_iterations, exc_stall = opt->excursion_stall;")
        e("const bool speed = opt->solve_mode == R2IK_MODE_SPEED;")
        e("const long long r0 = p_begin * K;  // the first output row")
        if coll:
            e("const S marg = S(opt->collision_margin), act = S(opt->collision_activation), "
              "wgt = S(opt->collision_weight);")
            e("const bool self_on = opt->self_collisions != 0;")
            e("// the collision rows' J^T J and J^T r where a row stands, at its trial, and the "
              "smallest distance")
            e(f"V Hc[{nc * nc}] = {{}}, gc[{nc}] = {{}}, Hc2[{nc * nc}] = {{}}, gc2[{nc}] = {{}};")
            e("V clr = V(S(0)), clr2 = V(S(0));")
        qv = ", ".join(f"q{i}" for i in used)
        e(f"V {qv};")
        if d.vector:  # each lane's goal, copied in when it takes a problem
            e(f"V tg[{16 * T}] = {{}}, wv[{6 * T}] = {{}};")
        else:  # one row: the problem's goal where it is
            e("const S* tg = tgt_all; const S* wv = w_all;")
        e(f"V r[{m}] = {{}}, r2[{m}] = {{}}, J[{m * nc}] = {{}}, J2[{m * nc}] = {{}};")
        e("V cost = V(S(0)), cost0 = V(S(0)), lam = V(S(0)), pe_r = V(S(0)), re_r = V(S(0));")
        e("// the limit excursion (ik/lm.py): a lane's start values, where an excursion left,")
        e("// and the errors there; phase 0 may start one, 1 in it, 2 not")
        e("V " + ", ".join(f"qS{i} = V(S(0)), qA{i} = V(S(0))" for i in moved)
          + ", pe_a = V(S(0)), re_a = V(S(0));")
        frames = _frame_args(ch).split(", ")
        e("V " + ", ".join(f"{f} = V(S(0))" for f in frames) + ";")
        e(f"int phase[{L}], it0[{L}], it[{L}], stall[{L}], kk[{L}];")
        e(f"bool mono[{L}], live[{L}], init[{L}], dead[{L}], okl[{L}];")
        e(f"long long pp[{L}];")
        e(f"for (int l = 0; l < {L}; ++l) {{ live[l] = init[l] = dead[l] = okl[l] = mono[l] = "
          "false; it[l] = stall[l] = kk[l] = phase[l] = it0[l] = 0; pp[l] = -1; }")
        e("long long next_p = p_begin;")
        with e.block("for (;;)"):
            e("// lanes without a row take the next one (a skipped row is written at once)")
            with e.block(f"for (int l = 0; l < {L}; ++l)"):
                with e.block("while (!live[l] && !dead[l])"):
                    e("long long p; int k;")
                    with e.block("if (only_row >= 0)"):  # a GPU thread: its one row, once
                        e("if (pp[l] >= 0 || only_row >= p_end * K) { dead[l] = true; break; }")
                        e("p = only_row / K; k = (int)(only_row - p * K);")
                    e("else if (pp[l] >= 0 && kk[l] + 1 < K) { p = pp[l]; k = kk[l] + 1; }")
                    with e.block("else if (next_p < p_end)"):
                        e("p = next_p++; k = 0;")
                        e("if (*stop != 0 || (deadline != 0ull && r2ik_now() >= deadline)) {")
                        e("  started[p - p_begin] = 0; pp[l] = -1; continue; }")
                        e("started[p - p_begin] = 1;")
                    e("else { dead[l] = true; break; }")
                    e("pp[l] = p; kk[l] = k;")
                    e("const long long row = p * K + k;")
                    e(f"S* qo = q_out + (row - r0) * {nq};")
                    e("const double* sd = seeds + p * seed_stride;")
                    e(f"const double* rk = rnd + (long long)(k > 0 ? k - 1 : 0) * {nq};")
                    e(f"const double* st = start ? start + (row - r0) * {nq} : (const double*)0;")
                    for i in range(nq):
                        with e.block(""):
                            _emit_start_value(e, ch, i, keep, used, lo, hi, around)
                            e(f"{lane(f'q{i}')} = v;" if i in used else f"qo[{i}] = v;")
                    with e.block("if (active[p - p_begin] && !(speed && done[p - p_begin]))"):
                        if d.vector:
                            e(f"for (int i = 0; i < {16 * T}; ++i) tg[i].x[l] = "
                              f"tgt_all[p * {16 * T} + i];")
                            e(f"for (int i = 0; i < {6 * T}; ++i) wv[i].x[l] = "
                              "w_all[p * w_stride + i];")
                        else:
                            e(f"tg = tgt_all + p * {16 * T}; wv = w_all + p * w_stride;")
                        e("live[l] = true; init[l] = true; it[l] = 0; stall[l] = 0; "
                          "okl[l] = false;")
                        e("phase[l] = ((k < K - 1 ? stall_n : 0) <= 0 && exc_n > 0) ? 0 : 2; "
                          "it0[l] = 0; mono[l] = false;")
                        e(" ".join(f"{lane(f'qS{i}')} = {lane(f'q{i}')};" for i in moved))
                    with e.block("else"):
                        for i in used:
                            e(f"qo[{i}] = {lane(f'q{i}')};")
                        e("conv_o[row - r0] = 0; iters_o[row - r0] = 0; "
                          "pe_o[row - r0] = S(INFINITY); re_o[row - r0] = S(INFINITY); "
                          "tout_o[row - r0] = 0;")
            e("bool any_live = false;")
            e(f"for (int l = 0; l < {L}; ++l) any_live = any_live || live[l];")
            e("if (!any_live) break;")
            e("const M initm = " + d.mask("init") + ";")
            e(f"V qs[{nc}];")
            for a in range(nc):
                e(f"qs[{a}] = q{ch.colq[a]};")
            e("// the step of every lane that is not evaluating its start (or a restart)")
            with e.block(f"if ({d.any(d.not_('initm'))})"):
                e(f"V H0[{nc * nc}], g[{nc}], dq[{nc}];")
                e(f"M blocked[{nc}] = {{" + ", ".join([d.none] * nc) + "};")
                e(f"bool rel[{L}];")
                e(f"for (int l = 0; l < {L}; ++l) rel[l] = phase[l] == 1;")
                e("const M release = " + d.mask("rel") + ";")
                _emit_lm_step(e, ch, d, nz, lo, hi, around, coll)
                for a in range(nc):
                    i = ch.colq[a]
                    with e.block(""):
                        e(f"V v = q{i} + dq[{a}];")
                        if around[i]:  # an excursion's revolute joints go unclipped
                            e("const V v0 = v;")
                            _emit_clip_sel(e, d, "v", i, lo, hi, around)
                            e("v = r2ik_sel(release, v0, v);")
                        else:
                            _emit_clip_sel(e, d, "v", i, lo, hi, around)
                        e(f"q{i} = r2ik_sel(initm, q{i}, v);")
            e("V pe2, re2;")
            trig = ""
            if coll:  # the joints' sines and cosines: computed once, for both
                from .codegen_collision import emit_trig  # noqa: PLC0415

                ex = _trig_exports(ch)
                e("V " + ", ".join(f"esn{j}, ecs{j}" for j, _ in ex) + ";" if ex else "")
                trig = "".join(f", esn{j}, ecs{j}" for j, _ in ex)
            e(f"{'V' if coll else 'const V'} cost2 = r2ik_eval<V>({_q_args(ch)}, tg, wv, r2, "
              f"pe2, re2, {_frame_args(ch)}{trig});")
            if coll:
                emit_trig(e, ch.coll, "V", lambda i: f"q{i}", "trg",
                          {key: (f"esn{j}", f"ecs{j}") for j, key in ex})
                e(f"cost2 = cost2 + r2ik_coll<V>({_q_args(ch)}, obs, n_obs, self_on, V(marg), "
                  "V(act), V(wgt), clr2, Hc2, gc2, trg);")
            e("// accepted (or initial) lanes take the trial; the others go back. The reference")
            e("// is the seed's cost in a lane's first nonmono iterations (ik/lm.py)")
            e(f"bool nmb[{L}];")
            e(f"for (int l = 0; l < {L}; ++l) nmb[l] = !mono[l] && (double)(it[l] - it0[l]) "
              "< nonmono;")
            e(f"const M better = cost2 < r2ik_sel({d.mask('nmb')}, cost0, cost);")
            e(f"const M acc = {d.or_('initm', 'better')};")
            e("cost0 = r2ik_sel(initm, cost2, cost0);")
            e("const M slow = cost2 > cost * V(stall_f);")
            e("const V ld = lam * V(down), lu = lam * V(up);")
            e("const V lam_acc = r2ik_sel(ld > V(lmin), ld, V(lmin));")
            e("const V lam_rej = r2ik_sel(lu < V(lmax), lu, V(lmax));")
            e(f"const M stuck = {d.and_(d.not_('acc'), 'lam_rej == lam')};")
            e("lam = r2ik_sel(initm, V(lam0), r2ik_sel(acc, lam_acc, lam_rej));")
            e("cost = r2ik_sel(acc, cost2, cost); pe_r = r2ik_sel(acc, pe2, pe_r); "
              "re_r = r2ik_sel(acc, re2, re_r);")
            e(f"for (int i = 0; i < {m}; ++i) r[i] = r2ik_sel(acc, r2[i], r[i]);")
            with e.block(f"if ({d.any('acc')})"):
                e(f"r2ik_jac_residual<V>({_frame_args(ch)}, tg, wv, J2);")
                for k in range(m * nc):
                    if nz[k // nc, k % nc]:
                        e(f"J[{k}] = r2ik_sel(acc, J2[{k}], J[{k}]);")
                if coll:
                    e(f"for (int i = 0; i < {nc * nc}; ++i) Hc[i] = r2ik_sel(acc, Hc2[i], Hc[i]);")
                    e(f"for (int i = 0; i < {nc}; ++i) gc[i] = r2ik_sel(acc, gc2[i], gc[i]);")
                    e("clr = r2ik_sel(acc, clr2, clr);")
            for a in range(nc):
                e(f"q{ch.colq[a]} = r2ik_sel(acc, q{ch.colq[a]}, qs[{a}]);")
            ok_terms = ["pe_r <= V(tol_p)", "re_r <= V(tol_r)"]
            if coll:  # and clear by the margin
                ok_terms.append("clr >= V(marg)")
            e(f"const M okm = {d.and_(*ok_terms)};")
            e("// per lane: the loop test of ik/lm.py, then the flags and the clock")
            e("int stopped = -1;  // *stop, read when first needed")
            e("const unsigned long long now = deadline != 0ull ? r2ik_now() : 0ull;")
            with e.block(f"for (int l = 0; l < {L}; ++l)"):
                e("if (!live[l]) continue;")
                e("bool end = false, tm = false;")
                e("if (init[l]) init[l] = false;")
                e(f"else {{ it[l] += 1; if ({d.mlane('better')}) stall[l] = "
                  f"{d.mlane('slow')} ? stall[l] + 1 : 0; "
                  f"else {{ end = {d.mlane('stuck')}; stall[l] += 1; }} }}")
                e(f"okl[l] = {d.mlane('okm')};")
                with e.block("if (phase[l] == 1 && (okl[l] || it[l] - it0[l] >= exc_n))"):
                    e("bool inside = true;")
                    with e.block("if (okl[l])"):
                        _emit_turn_inside(e, moved, lo, hi, around, lane("q{}"), "inside")
                    with e.block("if (!(okl[l] && inside))"):
                        e("// back where the excursion left (evaluated there next pass)")
                        e(" ".join(f"{lane(f'q{i}')} = {lane(f'qA{i}')};" for i in moved))
                        e(f"{lane('pe_r')} = {lane('pe_a')}; {lane('re_r')} = {lane('re_a')}; "
                          "okl[l] = false; init[l] = true; stall[l] = 0;")
                    e("mono[l] = true; phase[l] = 2;")
                e("const long long p = pp[l];")
                with e.block("if (!end)"):
                    e("const long long give_up = kk[l] < K - 1 ? stall_n : 0;")
                    e("if (okl[l] || it[l] >= max_iter || (give_up > 0 && stall[l] >= give_up)) "
                      "end = true;")
                    with e.block("else if ((it[l] & 3) == 0)"):
                        e("if (stopped < 0) stopped = *stop != 0;")
                        e("if (stopped || (speed && done[p - p_begin])) end = true;")
                    e("if (!end && deadline != 0ull && now >= deadline) { end = true; tm = true; }")
                with e.block("if (!end && phase[l] == 0 && it[l] >= exc_n && stall[l] >= exc_stall "
                             f"&& ({_pinned(moved, lo, hi, around, lane('q{}'))}))"):
                    e(" ".join(f"{lane(f'qA{i}')} = {lane(f'q{i}')}; "
                               f"{lane(f'q{i}')} = {lane(f'qS{i}')};" for i in moved))
                    e(f"{lane('pe_a')} = {lane('pe_r')}; {lane('re_a')} = {lane('re_r')}; "
                      "init[l] = true; stall[l] = 0; phase[l] = 1; it0[l] = it[l];")
                e("if (!end) continue;")
                with e.block("if (phase[l] == 1)"):  # the iterations ran out in the excursion
                    e(" ".join(f"{lane(f'q{i}')} = {lane(f'qA{i}')};" for i in moved)
                      + f" {lane('pe_r')} = {lane('pe_a')}; {lane('re_r')} = {lane('re_a')}; "
                      "okl[l] = false;")
                e("const long long row = p * K + kk[l] - r0;")
                e(f"S* qo = q_out + row * {nq};")
                for i in used:
                    e(f"qo[{i}] = {lane(f'q{i}')};")
                e(f"conv_o[row] = okl[l] ? 1 : 0; iters_o[row] = it[l]; "
                  f"pe_o[row] = {lane('pe_r')}; re_o[row] = {lane('re_r')}; "
                  "tout_o[row] = tm ? 1 : 0;")
                e("if (okl[l] && speed) done[p - p_begin] = 1;")
                e("live[l] = false;")


def _dialect_prelude(d: Dialect) -> str:
    """The names the LM rows use, for a dialect: inside its namespace."""
    if d.vector:
        return "typedef r2ik_vec V; typedef r2ik_vmask M;\n"
    return ("typedef ::S V; typedef bool M;\n")


def _emit_prep_kernel(e: _Emit, ch: Chain):
    """Per problem: the goal check in float64 (finite, position within MAX_VALUE, rotation
    orthonormal within :data:`ROTATION_TOL_C` and right-handed, as
    ``PoseObjective.invalid_problems``) and the seed check (finite, within the limits, or
    :data:`ros2_ik.model.MAX_VALUE` where a coordinate has none, up to
    :data:`ros2_ik.ik.checks.SEED_LIMIT_SLACK` outside, as ``ik.checks.check_seeds``); where
    asked, targets and weights cast to S (an invalid goal becomes the identity, so that the
    float math stays finite); active = both checks passed."""
    model = ch.model
    T, nq = ch.T, model.nq
    lo = np.maximum(model.lower, -MAX_VALUE) - SEED_LIMIT_SLACK
    hi = np.minimum(model.upper, MAX_VALUE) + SEED_LIMIT_SLACK
    e(f"""
// Problems p_begin + i, i in [0, P): tgt64 (P, {T}, 16), w64 (P or 1, {T}, 6), seeds (P or 1, nq)
// -> tgtS, wS (or null), active (P,), flags (P,) (R2IK_FLAG_GOAL_OK | R2IK_FLAG_SEED_OK),
// done (P,) reset; the per-problem outputs from index 0.""")
    args = ("long long P, long long p_begin, const double* R2IK_RESTRICT tgt64, "
            "const double* R2IK_RESTRICT w64, long long w_stride, "
            "const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "S* R2IK_RESTRICT tgtS, S* R2IK_RESTRICT wS, unsigned char* R2IK_RESTRICT active, "
            "unsigned char* R2IK_RESTRICT flags, int* R2IK_RESTRICT done")
    with e.kernel("r2ik_prep", args):
        e("const long long i = R2IK_ROW;")
        e("if (i >= P) return;")
        e("const long long p = p_begin + i;")
        e(f"const double* t = tgt64 + p * {16 * T};")
        e("bool ok = true;")
        e(f"for (int j = 0; j < {16 * T}; ++j) if (!(t[j] - t[j] == 0.0)) ok = false;")
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
        e("const double* sd = seeds + p * seed_stride;")
        e("bool sok = true;")
        for i in range(nq):
            e(f"if (!(sd[{i}] >= {_double(lo[i])} && sd[{i}] <= {_double(hi[i])})) sok = false;")
        with e.block("if (tgtS)"):
            e(f"for (int j = 0; j < {16 * T}; ++j) tgtS[i * {16 * T} + j] = "
              "ok ? S(t[j]) : S((j % 16) % 5 == 0 ? 1 : 0);")
            e(f"for (int j = 0; j < {6 * T}; ++j) wS[i * {6 * T} + j] = S(w64[p * w_stride + j]);")
        e("flags[i] = (ok ? R2IK_FLAG_GOAL_OK : 0) | (sok ? R2IK_FLAG_SEED_OK : 0);")
        e("active[i] = (ok && sok) ? 1 : 0;")
        e("done[i] = 0;")


def _emit_lm_kernel(e: _Emit, ch: Chain):
    """``r2ik_lm``: one row per thread (the GPU's launch; on the host, the same kernel row by
    row), by the one-row rendering of :func:`_emit_lm_rows`."""
    e("""
// One thread per row p * K + k of P problems (all indexed from 0); tgt_all (P, T, 16) and
// w_all in S; clock0: the device clock at the call (r2ik_stamp); params[0] = budget [ns]
// (< 0: none).""")
    args = ("long long P, int K, const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const double* R2IK_RESTRICT start, "
            "const S* R2IK_RESTRICT tgt_all, const S* R2IK_RESTRICT w_all, long long w_stride, "
            "const unsigned char* R2IK_RESTRICT active, const r2ik_options* R2IK_RESTRICT opt, "
            "const unsigned long long* clock0, const long long* params, "
            "const volatile int* stop, volatile int* done, S* R2IK_RESTRICT q_out, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT iters_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    world = ""
    if ch.coll is not None:
        args += ", const double* R2IK_RESTRICT obs, long long n_obs"
        world = ", obs, n_obs"
    with e.kernel("r2ik_lm", args):
        e("const long long row = R2IK_ROW;")
        e("if (row >= P * (long long)K) return;")
        e("const unsigned long long deadline = params[0] < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)params[0];")
        e("r2ik_s::r2ik_lm_rows(0, P, row, K, seeds, seed_stride, rnd, start, tgt_all, w_all, "
          "w_stride, active, opt, deadline, stop, done, (unsigned char*)0, q_out, conv_o, "
          f"iters_o, pe_o, re_o, tout_o{world});")


def _emit_ccd_kernel(e: _Emit, ch: Chain):
    """CCD sweeps with the closed-form updates of ``ik/ccd.py`` (one tip), one row per thread;
    the rows start as the LM rows do (:func:`_emit_start_value`)."""
    model = ch.model
    nq = model.nq
    used, qv = _qvars(ch)
    lo, hi, around = _limits(model)
    _, keep = restart_seeds(model, 1, 0, movable_coordinates(model, ch.tips))
    frozen = {model.joint_index(n) for n in model.frozen}
    # CCD moves the non-mimic, non-frozen joints, tip first
    joints = [j for j in range(ch.starts[1] - 1, -1, -1)
              if not ch.mimic[j] and ch.link[j] not in frozen]
    e(f"""
// CCD on rows p * K + k of P problems (indexed from 0): start as r2ik_lm's rows, sweeps of
// ik/ccd.py until the tolerances, a sweep improving the cost by less than {DEFAULT_RTOL!r},
// max_sweeps, the deadline or a stop. Outputs per row: q_out (rows, nq), conv/tout (u8),
// sweeps (i32), pe/re (S).""")
    args = ("long long P, int K, const double* R2IK_RESTRICT seeds, long long seed_stride, "
            "const double* R2IK_RESTRICT rnd, const S* R2IK_RESTRICT tgt_all, "
            "const S* R2IK_RESTRICT w_all, long long w_stride, "
            "const unsigned char* R2IK_RESTRICT active, const r2ik_options* R2IK_RESTRICT opt, "
            "long long max_sweeps, const unsigned long long* clock0, const long long* params, "
            "const volatile int* stop, S* R2IK_RESTRICT q_out, "
            "unsigned char* R2IK_RESTRICT conv_o, int* R2IK_RESTRICT sweeps_o, "
            "S* R2IK_RESTRICT pe_o, S* R2IK_RESTRICT re_o, unsigned char* R2IK_RESTRICT tout_o")
    with e.kernel("r2ik_ccd", args):
        e("const long long row = R2IK_ROW;")
        e("if (row >= P * (long long)K) return;")
        e("const long long p = row / K; const int k = (int)(row - p * K);")
        e(f"S* qr = q_out + row * {nq};")
        e("const S* tgt = tgt_all + p * 16; const S* w = w_all + p * w_stride;")
        e("const double* sd = seeds + p * seed_stride;")
        e(f"const double* rk = rnd + (long long)(k > 0 ? k - 1 : 0) * {nq};")
        e("const double* st = (const double*)0;")
        e("S " + ", ".join(f"q{i}" for i in used) + ";")
        for i in range(nq):
            with e.block(""):
                _emit_start_value(e, ch, i, keep, used, lo, hi, around)
                e(f"q{i} = v;" if i in used else f"qr[{i}] = v;")
        e("const S tol_p = S(opt->position_tolerance), tol_r = S(opt->orientation_tolerance);")
        e("const S wp = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]) / S(3);")
        e(f"const S wo = S({ORIENTATION_SCALE!r}) * ((w[3] * w[3] + w[4] * w[4] + w[5] * w[5]) "
          f"/ S(3));")
        e("const long long cap = opt->max_iterations < max_sweeps ? opt->max_iterations : "
          "max_sweeps;")
        e("const unsigned long long deadline = params[0] < 0 ? 0ull : "
          "clock0[0] + (unsigned long long)params[0];")
        e("S r[6]; S pe_r, re_r;")
        e(f"S cost = r2ik_errors<S>({_q_args(ch)}, tgt, w, r, pe_r, re_r);")
        e("bool conv = pe_r <= tol_p && re_r <= tol_r; bool act = active[p] != 0;")
        e("bool timed = false; int sw = 0;")
        e("S R[9], pv[3];")
        e(_joint_frame_decl(ch))
        with e.block("for (long long it = 0; it < cap; ++it)"):
            e("act = act && !conv;")
            e("if (!act) break;")
            e("if (deadline != 0ull && r2ik_now() >= deadline) { timed = true; break; }")
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
            e(f"const bool stalled = cost2 >= cost * (S(1) - S({DEFAULT_RTOL!r}));")
            e("pe_r = pe2; re_r = re2; cost = cost2;")
            e("conv = conv || (pe_r <= tol_p && re_r <= tol_r);")
            e("act = act && !stalled;")
        for i in used:
            e(f"qr[{i}] = q{i};")
        e("conv_o[row] = conv ? 1 : 0; sweeps_o[row] = sw; pe_o[row] = pe_r; re_o[row] = re_r; "
          "tout_o[row] = timed ? 1 : 0;")


def _emit_finalize(e: _Emit, ch: Chain, src, dst: str, cont, lo, hi, around):
    """``dst[i]`` = coordinate i of a row (``src(i)``, float64) finalized as
    ``ik.seeds.finalize_q``: continuous joints within pi of the seed ``sd``, then the limits;
    a coordinate no column moves is the seed's, exactly (a float32 row holds it rounded)."""
    moved = set(int(c) for c in ch.colq)
    for i in range(ch.model.nq):
        with e.block(""):
            e("typedef double S;")  # the clip below runs in float64
            e(f"double v = {src(i) if i in moved else f'sd[{i}]'};")
            if cont[i]:
                e(f"{{ const double x = R2IK_PI - (v - sd[{i}]); "
                  f"v = sd[{i}] + R2IK_PI - "
                  f"(x - 2.0 * R2IK_PI * floor(x / (2.0 * R2IK_PI))); }}")
            _emit_clip(e, "v", i, lo, hi, around)
            e(f"{dst}[{i}] = v;")


def _emit_select_kernel(e: _Emit, ch: Chain):
    """Per problem (float64): the winning row, its q finalized, its goal errors recomputed by
    FK, the status: ``ik.batch.select`` for the speed and distance modes."""
    model = ch.model
    nq, T = model.nq, ch.T
    used, _ = _qvars(ch)
    lo, hi, around = _limits(model)
    cont = np.asarray(model.q_continuous, dtype=bool)
    neutral = np.clip(model.neutral_q(), lo, hi)
    F = len(interface.OUT_FIELDS)
    e(f"""
// Per problem i in [0, P) (problem p_begin + i of the inputs): the winning row among its K
// rows (rows and flags indexed from 0): speed mode: the converged row with the fewest
// iterations, then the lowest seed index; distance mode: the converged row nearest the seed
// (wrap-aware, largest coordinate); none converged: the smallest pe/tol_p + re/tol_r (first on
// ties). q finalized in float64 (continuous joints within pi of the seed, the limits), its goal
// errors recomputed by float64 FK against tgt64, success = errors within the tolerances (q is
// within the limits). out (P, nq + {F}) float64 from p_begin: q, then R2IK_OUT_* fields.""")
    args = ("long long P, long long p_begin, int K, const S* R2IK_RESTRICT q_rows, "
            "const unsigned char* R2IK_RESTRICT conv, const int* R2IK_RESTRICT iters, "
            "const S* R2IK_RESTRICT pe, const S* R2IK_RESTRICT re, "
            "const unsigned char* R2IK_RESTRICT tout, const unsigned char* R2IK_RESTRICT started, "
            "const unsigned char* R2IK_RESTRICT flags, const double* R2IK_RESTRICT seeds, "
            "long long seed_stride, const double* R2IK_RESTRICT tgt64, "
            "const double* R2IK_RESTRICT w64, long long w_stride, "
            "const r2ik_options* R2IK_RESTRICT opt, const volatile int* stop, "
            "double* R2IK_RESTRICT out")
    if ch.coll is not None:
        args += ", const double* R2IK_RESTRICT obs, long long n_obs"
    with e.kernel("r2ik_select", args):
        e("const long long i = R2IK_ROW;")
        e("if (i >= P) return;")
        e("const long long p = p_begin + i;")
        e(f"double* o = out + p * {nq + F};")
        e("const double tol_p = opt->position_tolerance, tol_r = opt->orientation_tolerance;")
        e("const int fl = flags[i] | ((started == 0 || started[i]) ? R2IK_FLAG_STARTED : 0);")
        e("const bool valid = (fl & R2IK_FLAG_GOAL_OK) && (fl & R2IK_FLAG_SEED_OK);")
        with e.block("if (!valid || !(fl & R2IK_FLAG_STARTED))"):
            e("// not solved: the seed inside the limits (mid-range for a bad seed)")
            e("const double* sd = (fl & R2IK_FLAG_SEED_OK) ? seeds + p * seed_stride : "
              "(const double*)0;")
            for i in range(nq):
                with e.block(""):
                    e("typedef double S;")
                    e(f"double v = sd ? sd[{i}] : {_double(neutral[i])};")
                    _emit_clip(e, "v", i, lo, hi, around)
                    e(f"o[{i}] = v;")
            e(f"double* f = o + {nq};")
            e("f[R2IK_OUT_STATUS] = !valid ? R2IK_STATUS_INVALID_INPUT : *stop != 0 ? "
              "R2IK_STATUS_PREEMPTED : R2IK_STATUS_TIMED_OUT;")
            e("f[R2IK_OUT_POSITION_ERROR] = f[R2IK_OUT_ORIENTATION_ERROR] = r2ik_nan();")
            e("f[R2IK_OUT_ITERATIONS] = 0; f[R2IK_OUT_SEED_INDEX] = 0; f[R2IK_OUT_FLAGS] = fl;")
            e("f[R2IK_OUT_CLEARANCE] = r2ik_nan(); f[R2IK_OUT_PAIR] = -1;")
            e("return;")
        e("const double* sd = seeds + p * seed_stride;")
        e("const bool distance = opt->solve_mode == R2IK_MODE_DISTANCE;")
        e("int best = -1, best_c = -1; long long best_key = 0; double best_err = 0, best_d = 0; "
          "bool any_t = false;")
        with e.block("for (int k = 0; k < K; ++k)"):
            e("const long long row = i * K + k;")
            e("if (tout[row]) any_t = true;")
            with e.block("if (conv[row])"):
                with e.block("if (distance)"):
                    e(f"const S* qr = q_rows + row * {nq};")
                    e(f"double qf[{nq}];")
                    _emit_finalize(e, ch, lambda i: f"(double)qr[{i}]", "qf", cont, lo, hi, around)
                    e("double dist = 0;")
                    for i in range(nq):
                        if cont[i]:
                            e(f"{{ const double x = R2IK_PI - (qf[{i}] - sd[{i}]); "
                              f"const double dd = fabs(R2IK_PI - (x - 2.0 * R2IK_PI * "
                              f"floor(x / (2.0 * R2IK_PI)))); if (dd > dist) dist = dd; }}")
                        else:
                            e(f"{{ const double dd = fabs(qf[{i}] - sd[{i}]); "
                              "if (dd > dist) dist = dd; }")
                    e("if (best_c < 0 || dist < best_d) { best_c = k; best_d = dist; }")
                with e.block("else"):
                    e("const long long key = (long long)iters[row] * K + k;")
                    e("if (best_c < 0 || key < best_key) { best_c = k; best_key = key; }")
            e("const double er = (double)pe[row] / tol_p + (double)re[row] / tol_r;")
            e("if (best < 0 || er < best_err) { best = k; best_err = er; }")
        e("if (best_c >= 0) best = best_c;")
        e("const long long row = i * K + best;")
        e(f"const S* qr = q_rows + row * {nq};")
        _emit_finalize(e, ch, lambda i: f"(double)qr[{i}]", "o", cont, lo, hi, around)
        e(f"double r[{6 * T}]; double pe64, re64;")
        e(f"r2ik_errors<double>({', '.join(f'o[{i}]' for i in used)}, tgt64 + p * {16 * T}, "
          "w64 + p * w_stride, r, pe64, re64);")
        e("const bool ok = pe64 <= tol_p && re64 <= tol_r;  // verified by FK; q is clipped")
        e("double clr64 = INFINITY; long long which = -1;")
        if ch.coll is not None:  # the exact distances of the answer (ik/batch.py's select)
            e(f"r2ik_coll_min({', '.join(f'o[{i}]' for i in used)}, obs, n_obs, "
              "opt->self_collisions != 0, opt->collision_margin, opt->collision_activation, "
              "clr64, which);")
        e("const bool hit = ok && clr64 < opt->collision_margin;")
        e(f"double* f = o + {nq};")
        e("f[R2IK_OUT_STATUS] = hit ? R2IK_STATUS_IN_COLLISION : ok ? R2IK_STATUS_CONVERGED : "
          "*stop != 0 ? R2IK_STATUS_PREEMPTED : any_t ? R2IK_STATUS_TIMED_OUT : "
          "R2IK_STATUS_NOT_CONVERGED;")
        e("f[R2IK_OUT_CLEARANCE] = clr64; f[R2IK_OUT_PAIR] = (double)which;")
        e("f[R2IK_OUT_POSITION_ERROR] = pe64; f[R2IK_OUT_ORIENTATION_ERROR] = re64;")
        e("f[R2IK_OUT_ITERATIONS] = (double)iters[row]; f[R2IK_OUT_SEED_INDEX] = (double)best; "
          "f[R2IK_OUT_FLAGS] = fl;")


def _emit_coll_terms_kernel(e: _Emit, ch: Chain):
    """``r2ik_coll_terms``: per configuration, the collision terms the LM rows add (cost, the
    smallest distance, ``J^T J`` and ``J^T r`` over the columns ``colq``), for the tests that
    hold them against the reference (``ik/collision.py``), and the exact check's distance and
    pair."""
    nq, nc = ch.model.nq, ch.nc
    used, _ = _qvars(ch)
    W = 4 + nc * nc + nc
    e(f"""
// out (B, {W}): cost, smallest distance, exact check's distance, its pair, H ({nc}x{nc}), g""")
    args = ("long long B, const double* R2IK_RESTRICT q_all, const double* R2IK_RESTRICT obs, "
            "long long n_obs, const r2ik_options* R2IK_RESTRICT opt, double* R2IK_RESTRICT out")
    with e.kernel("r2ik_coll_terms", args):
        e("const long long b = R2IK_ROW;")
        e("if (b >= B) return;")
        e(f"const double* q = q_all + b * {nq};")
        e(f"S H[{nc * nc}], g[{nc}], clear;")
        from .codegen_collision import emit_trig  # noqa: PLC0415

        emit_trig(e, ch.coll, "S", lambda i: f"S(q[{i}])", "trg", {})
        e(f"const S cost = r2ik_coll<S>({', '.join(f'S(q[{i}])' for i in used)}, obs, n_obs, "
          "opt->self_collisions != 0, S(opt->collision_margin), S(opt->collision_activation), "
          "S(opt->collision_weight), clear, H, g, trg);")
        e("double d64; long long which;")
        e(f"r2ik_coll_min({', '.join(f'q[{i}]' for i in used)}, obs, n_obs, "
          "opt->self_collisions != 0, opt->collision_margin, opt->collision_activation, d64, "
          "which);")
        e(f"double* o = out + b * {W};")
        e("o[0] = (double)cost; o[1] = (double)clear; o[2] = d64; o[3] = (double)which;")
        e(f"for (int i = 0; i < {nc * nc}; ++i) o[4 + i] = (double)H[i];")
        e(f"for (int i = 0; i < {nc}; ++i) o[{4 + nc * nc} + i] = (double)g[i];")


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


# The host lanes' types: R2IK_L rows side by side in one vector (x86-64 g++, built for AVX2 and
# used where the CPU has it; elsewhere the one-row rendering runs)
_VECTOR_TYPES = r"""
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define R2IK_LANES 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define R2IK_L LANES_N
namespace r2ik_v {
typedef double r2ik_dv __attribute__((vector_size(8 * R2IK_L)));
typedef long long r2ik_mv __attribute__((vector_size(8 * R2IK_L)));
struct r2ik_vec {
  r2ik_dv x;
  r2ik_vec() = default;  // scratch is not zeroed; the kernel's state is, where it is declared
  r2ik_vec(double s) { for (int l = 0; l < R2IK_L; ++l) x[l] = s; }
  explicit r2ik_vec(r2ik_dv y) : x(y) {}
};
struct r2ik_vmask {
  r2ik_mv x;
  explicit r2ik_vmask(r2ik_mv y) : x(y) {}
  bool operator[](int l) const { return x[l] != 0; }
};
typedef r2ik_vec Vv;
typedef r2ik_vmask Mv;
static inline Vv operator+(Vv a, Vv b) { return Vv(a.x + b.x); }
static inline Vv operator-(Vv a, Vv b) { return Vv(a.x - b.x); }
static inline Vv operator*(Vv a, Vv b) { return Vv(a.x * b.x); }
static inline Vv operator/(Vv a, Vv b) { return Vv(a.x / b.x); }
static inline Vv operator-(Vv a) { return Vv(-a.x); }
static inline Mv operator<(Vv a, Vv b) { return Mv(a.x < b.x); }
static inline Mv operator>(Vv a, Vv b) { return Mv(a.x > b.x); }
static inline Mv operator<=(Vv a, Vv b) { return Mv(a.x <= b.x); }
static inline Mv operator>=(Vv a, Vv b) { return Mv(a.x >= b.x); }
static inline Mv operator==(Vv a, Vv b) { return Mv(a.x == b.x); }
static inline Mv operator&(Mv a, Mv b) { return Mv(a.x & b.x); }
static inline Mv operator|(Mv a, Mv b) { return Mv(a.x | b.x); }
static inline Mv operator~(Mv a) { return Mv(~a.x); }
#define R2IK_LANEWISE for (int l = 0; l < R2IK_L; ++l)
#if R2IK_L == 4
// a lane's mask is all ones or all zeros: the sign bits say which (one vmovmskpd, no branch
// per lane; the collision terms ask this before every pair and obstacle)
static inline bool r2ik_any(Mv a) { return __builtin_ia32_movmskpd256((r2ik_dv)a.x) != 0; }
#else
static inline bool r2ik_any(Mv a) { R2IK_LANEWISE if (a.x[l]) return true; return false; }
#endif
static inline bool r2ik_any_m(Mv a) { return r2ik_any(a); }
static inline Mv r2ik_mask(const bool* b) {
  r2ik_mv m; R2IK_LANEWISE m[l] = b[l] ? -1 : 0; return Mv(m);
}
static inline Vv r2ik_sel(Mv c, Vv a, Vv b) { return Vv(c.x ? a.x : b.x); }
// sqrt and floor: one AVX instruction for 4 lanes (IEEE's, so the scalar code's values)
#if R2IK_L == 4
static inline Vv sqrt(Vv a) { return Vv(__builtin_ia32_sqrtpd256(a.x)); }
static inline Vv r2ik_floor(Vv a) { return Vv(__builtin_ia32_roundpd256(a.x, 0x9)); }
#else
static inline Vv sqrt(Vv a) { Vv r; R2IK_LANEWISE r.x[l] = std::sqrt(a.x[l]); return r; }
static inline Vv r2ik_floor(Vv a) { Vv r; R2IK_LANEWISE r.x[l] = std::floor(a.x[l]); return r; }
#endif
static inline Vv atan2(Vv a, Vv b) {
  Vv r; R2IK_LANEWISE r.x[l] = std::atan2(a.x[l], b.x[l]); return r;
}
"""


def _vector_sincos() -> str:
    """``r2ik_sincos`` of a vector: the host's scalar recipe (:func:`_sincos_steps`) with its
    branches as selects; a lane beyond the reduction's range takes libm's pair, as the scalar
    code does."""
    m = _double(sc.REDUCE_MAX)
    return f"""
static inline void r2ik_sincos(Vv x, Vv& s, Vv& c) {{
{_sincos_steps("Vv", lambda v: f"Vv({_double(v)})", "r2ik_floor")}\
  const Mv swap = (quad == Vv(1.0)) | (quad == Vv(3.0));
  const Vv s1 = r2ik_sel(swap, cp, sp), c1 = r2ik_sel(swap, sp, cp);
  s = r2ik_sel(quad >= Vv(2.0), -s1, s1);
  c = r2ik_sel((quad == Vv(1.0)) | (quad == Vv(2.0)), -c1, c1);
  const Mv out = ~((x <= Vv({m})) & (x >= Vv(-{m})));
  if (r2ik_any(out)) {{
    R2IK_LANEWISE if (out[l]) {{ s.x[l] = std::sin(x.x[l]); c.x[l] = std::cos(x.x[l]); }}
  }}
}}
"""


def _rows_namespace(ch: Chain, d: Dialect) -> str:
    """The LM rows of one dialect, in its own namespace (``r2ik_s``: one row; ``r2ik_v``: the
    lanes, opened by their types, with the templates rendered again inside the AVX2 region so
    that they are built for it)."""
    e = _Emit()
    if not d.vector:
        e("namespace r2ik_s {")
    e(_dialect_prelude(d))
    if d.vector:
        _emit_common(e, ch, check=False)
    _emit_lm_rows(e, ch, d)
    e("}  // namespace")
    return e.text()


def solve_source(ch: Chain, dtype="float32", *, host: bool = False, lanes: int | None = None
                 ) -> str:
    """The solve kernels (stamp, prep, lm, ccd for one tip, select) for ``ch``: CUDA C++, or
    with ``host`` the same text for g++ (:func:`host_variant`) plus the host driver
    ``r2ik_solve_host``. A host float64 source also carries the LM rows in the vector dialect
    (``lanes`` rows side by side: None or 4; 0: none), used where the CPU has AVX2; the rows
    are the same either way, bit for bit."""
    scalar = _scalar(dtype)
    e = _Emit()
    e(_header(ch, scalar, "solve"))
    e(_DEVICE_PRELUDE)
    e(interface.declarations())
    e(f"typedef {scalar} S;  // the kernels' scalar (templates below take theirs as a parameter)")
    e(_PRELUDE)
    _emit_common(e, ch)
    e(_rows_namespace(ch, SCALAR))
    # params = {budget_ns (< 0: no deadline), initial stop flag}: device memory, so that a
    # captured CUDA graph replays with each call's values
    with e.kernel("r2ik_stamp", "unsigned long long* clock0, int* stop, const long long* params"):
        e("if (R2IK_ROW == 0) { clock0[0] = r2ik_now(); stop[0] = (int)params[1]; }")
    _emit_prep_kernel(e, ch)
    _emit_lm_kernel(e, ch)
    if ch.T == 1:
        _emit_ccd_kernel(e, ch)
    _emit_select_kernel(e, ch)
    if ch.coll is not None:
        _emit_coll_terms_kernel(e, ch)
    if not host:
        return e.text()
    n = LANES if lanes is None else int(lanes)
    vector = ""
    if scalar == "double" and n > 1:
        vector = (_VECTOR_TYPES.replace("LANES_N", str(n)) + _vector_sincos()
                  + _rows_namespace(ch, Dialect(n)) + "#pragma GCC pop_options\n#endif\n")
    # the host driver runs float64 rows (a float32 host source is for tests of the CUDA text)
    return host_variant(e.text()) + vector + (_solve_driver(ch) if scalar == "double" else "")


#: rows of a block of problems the host's ``ccd+dls`` runs CCD on before their LM polish (a
#: problem's K rows at least; the order changes no answer, only what a deadline leaves done)
CCD_BLOCK_ROWS = 1024


def _solve_driver(ch: Chain) -> str:
    """``r2ik_solve_host(const r2ik_solve_args*)``: problems [p_begin, p_end) checked, solved
    (LM rows in lanes where the CPU has AVX2, else row by row; CCD first for ``ccd`` and
    ``ccd+dls``), selected and verified, in one call (:mod:`.host` calls it from its threads,
    one slice of problems each).

    A problem is started only before the deadline and a stop, by CCD as by LM, and the work
    after the deadline is bounded whatever the batch: CCD takes the problems in order, each
    one's rows after the check (the rows of a problem not started are never run: a row's
    start and first errors cost an FK each, a million rows 0.3 s); ``ccd+dls`` polishes
    blocks of problems (:data:`CCD_BLOCK_ROWS` rows) as CCD finishes them, as the reference
    solves its chunks, and a problem CCD ran but LM did not start (the deadline came between)
    keeps its CCD rows (select verifies them by FK)."""
    nq, T = ch.model.nq, ch.T
    ccd = ""
    if T == 1:
        ccd = f"""
  if (a->solver == R2IK_SOLVER_CCD || a->solver == R2IK_SOLVER_CCD_DLS) {{
    // CCD rows, problem by problem (each started only before the deadline and a stop); for
    // ccd+dls LM from where they stopped, block by block
    const bool polish = a->solver == R2IK_SOLVER_CCD_DLS;
    const long long cap = polish ? {CCD_POLISH_SWEEPS} : opt->max_iterations;
    double* qc = polish ? r2ik_buf(start, (size_t)N * {nq}) : qr;
    sw = r2ik_buf(sweeps, (size_t)N);
    const long long block = polish ? (K >= {CCD_BLOCK_ROWS} ? 1 : {CCD_BLOCK_ROWS} / K) : P;
    long long ccd_end = 0;  // problems [0, ccd_end) were started by CCD
    for (long long b0 = 0; b0 < P; b0 += block) {{
      const long long b1 = b0 + block < P ? b0 + block : P;
      for (; ccd_end < b1; ++ccd_end) {{
        if (*stop != 0 || (deadline != 0ull && r2ik_now() >= deadline)) break;
        stt[ccd_end] = 1;
        for (r2ik_row_ = ccd_end * K; r2ik_row_ < (ccd_end + 1) * K; ++r2ik_row_)
          r2ik_ccd(P, (int)K, seeds + a->p_begin * a->seed_stride, a->seed_stride, rnd,
                   tgt + a->p_begin * 16, w + a->p_begin * a->w_stride, a->w_stride, act, opt,
                   cap, &clock0, params, stop, qc, cv, sw, per, rer, to);
      }}
      for (long long i = ccd_end; i < b1; ++i) stt[i] = 0;
      if (polish) lm_block(b0, b1, qc);
      if (ccd_end < b1) {{  // the deadline or a stop: no later problem is started
        for (long long i = b1; i < P; ++i) stt[i] = 0;
        break;
      }}
    }}
    if (polish) {{
      for (long long i = 0; i < ccd_end; ++i) {{
        const long long r0 = i * K;
        if (stt[i]) {{  // polished: its iterations count CCD's sweeps too
          for (long long r = r0; r < r0 + K; ++r) it[r] += sw[r];
          continue;
        }}
        // CCD ran it, LM did not start it: CCD's rows stand (timed out where not converged)
        stt[i] = 1;
        for (long long r = r0; r < r0 + K; ++r) {{
          for (int c = 0; c < {nq}; ++c) qr[r * {nq} + c] = qc[r * {nq} + c];
          it[r] = sw[r];
          to[r] = 1;
        }}
      }}
    }} else {{
      for (long long r = 0; r < ccd_end * K; ++r) it[r] = sw[r];
    }}
  }}"""
    world = ", (const double*)a->obs, a->n_obs" if ch.coll is not None else ""
    lm = f"""r2ik_lm_rows(a->p_begin + b0, a->p_begin + b1, -1, (int)K, seeds, a->seed_stride,
                   rnd, st ? st + b0 * K * {nq} : st, tgt, w, a->w_stride, act + b0, opt,
                   deadline, stop, dn + b0, stt + b0, qr + b0 * K * {nq}, cv + b0 * K,
                   it + b0 * K, per + b0 * K, rer + b0 * K, to + b0 * K{world});"""
    return f"""
// ---- the host driver
extern "C" int r2ik_lanes_used(void) {{
#ifdef R2IK_LANES
  if (__builtin_cpu_supports("avx2")) return R2IK_L;
#endif
  return 0;
}}
template <typename T> static T* r2ik_buf(std::vector<T>& v, size_t n) {{
  if (v.size() < n) v.resize(n);
  return v.data();
}}
extern "C" int r2ik_solve_host(const r2ik_solve_args* a) {{
  const long long P = a->p_end - a->p_begin, K = a->K, N = P * K;
  if (P <= 0) return 0;
  const r2ik_options* opt = (const r2ik_options*)a->opt;
  const double* seeds = (const double*)a->seeds;
  const double* rnd = (const double*)a->rnd;
  const double* tgt = (const double*)a->tgt;
  const double* w = (const double*)a->w;
  const volatile int* stop = (const volatile int*)a->stop;
  static thread_local std::vector<double> q_rows, pe, re, start;
  static thread_local std::vector<unsigned char> conv, tout, active, flags, started;
  static thread_local std::vector<int> iters, done, sweeps;
  double* qr = r2ik_buf(q_rows, (size_t)N * {nq});
  double* per = r2ik_buf(pe, (size_t)N);
  double* rer = r2ik_buf(re, (size_t)N);
  unsigned char* cv = r2ik_buf(conv, (size_t)N);
  unsigned char* to = r2ik_buf(tout, (size_t)N);
  int* it = r2ik_buf(iters, (size_t)N);
  unsigned char* act = r2ik_buf(active, (size_t)P);
  unsigned char* fl = r2ik_buf(flags, (size_t)P);
  unsigned char* stt = r2ik_buf(started, (size_t)P);
  int* dn = r2ik_buf(done, (size_t)P);
  for (r2ik_row_ = 0; r2ik_row_ < P; ++r2ik_row_)
    r2ik_prep(P, a->p_begin, tgt, w, a->w_stride, seeds, a->seed_stride, (S*)0, (S*)0, act,
              fl, dn);
  const unsigned long long clock0 = a->clock0;
  const long long params[2] = {{a->budget_ns, 0}};
  const unsigned long long deadline = a->budget_ns < 0 ? 0ull :
      clock0 + (unsigned long long)a->budget_ns;
  // LM on problems [b0, b1) of the slice from the start rows st (null: the seeds)
  auto lm_block = [&](long long b0, long long b1, const double* st) {{
    if (b1 <= b0) return;
#ifdef R2IK_LANES
    // lanes take a problem each: fewer problems than lanes run faster one row at a time
    if (b1 - b0 >= R2IK_L && __builtin_cpu_supports("avx2"))
      r2ik_v::{lm}
    else
#endif
      r2ik_s::{lm}
  }};
  int* sw = (int*)0;{ccd}
  if (!sw) lm_block(0, P, (const double*)0);  // dls
  for (r2ik_row_ = 0; r2ik_row_ < P; ++r2ik_row_)
    r2ik_select(P, a->p_begin, (int)K, qr, cv, it, per, rer, to, stt, fl, seeds, a->seed_stride,
                tgt, w, a->w_stride, opt, stop, (double*)a->out{world});
  if (N > (1 << 16)) {{  // a large slice's work memory goes back (a small one's is reused)
    std::vector<double>().swap(q_rows); std::vector<double>().swap(pe);
    std::vector<double>().swap(re); std::vector<double>().swap(start);
    std::vector<unsigned char>().swap(conv); std::vector<unsigned char>().swap(tout);
    std::vector<int>().swap(iters); std::vector<int>().swap(sweeps);
  }}
  return 0;
}}
"""


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
    """``r2ik_fk`` and ``r2ik_jac`` for the frames ``ch.tips`` (CUDA C++; ``host``: for g++,
    with the driver ``r2ik_frames_host``, which checks q as ``Model.check_q`` does)."""
    scalar = _scalar(dtype)
    e = _Emit()
    e(_header(ch, scalar, "frames"))
    e(_DEVICE_PRELUDE)
    e(interface.declarations())
    e(_PRELUDE)
    e(f"typedef {scalar} S;")
    _emit_frames_kernels(e, ch, scalar)
    if not host:
        return e.text()
    return host_variant(e.text()) + f"""
// ---- the host driver: 0 when done, 1 when q has a NaN, an infinity or a value beyond
// max_value (nothing written then)
extern "C" int r2ik_frames_host(const r2ik_frames_args* a) {{
  const S* q = (const S*)a->q;
  const long long n = a->B * {ch.model.nq};
  if (a->max_value >= 0)
    for (long long i = 0; i < n; ++i) if (!(fabs(q[i]) <= a->max_value)) return 1;
  for (r2ik_row_ = 0; r2ik_row_ < a->B; ++r2ik_row_) {{
    if (a->jacobian) r2ik_jac(q, a->B, (S*)a->out); else r2ik_fk(q, a->B, (S*)a->out);
  }}
  return 0;
}}
"""


KERNEL_RE = re.compile(r"^R2IK_KERNEL (\w+)\(([^)]*)\)", re.M)


def host_variant(src: str) -> str:
    """The generated CUDA text made into host C++: the device prelude swapped for
    :data:`HOST_SHIM`, and per kernel an ``extern "C" host_<kernel>(rows, args...)`` that runs
    it once per row, in row order (the threads do not cooperate, so this is the kernel's
    result). Everything between is the very text NVRTC compiles."""
    if _DEVICE_PRELUDE not in src:
        raise InvalidInputError("not a generated ros2_ik kernel source")
    e = _Emit()
    for name, args in KERNEL_RE.findall(src):
        params = [a.strip() for a in args.split(",")]
        names = [re.findall(r"[A-Za-z_][A-Za-z_0-9]*", a)[-1] for a in params]
        with e.block(f'extern "C" void host_{name}(long long rows, {args})'):
            e(f"for (r2ik_row_ = 0; r2ik_row_ < rows; ++r2ik_row_) "
              f"{name}({', '.join(names)});")
    return src.replace(_DEVICE_PRELUDE, HOST_SHIM) + e.text()


def source_hash(src: str) -> str:
    return hashlib.sha256(src.encode()).hexdigest()[:16]
