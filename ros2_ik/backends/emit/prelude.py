"""The fixed parts of every generated source: the device prelude (CUDA), the host shim (g++),
the shared prelude, the host's ``r2ik_sincos`` recipe (:mod:`ros2_ik.backends.sincos`), and the
host lanes' vector types; :func:`host_variant`, the CUDA text made into host C++."""

from __future__ import annotations

import re

from ...errors import InvalidInputError
from .. import sincos as sc
from .text import Dialect, Emit, dlit


def sincos_steps(T: str, lit, floor: str) -> str:
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


def host_sincos() -> str:
    """The host's ``r2ik_sincos``: float64 by :mod:`.sincos`'s recipe, step for step, float32
    by libm."""
    m = dlit(sc.REDUCE_MAX)
    return f"""__attribute__((always_inline)) static inline void r2ik_sincos(double x, double& s,
                                                                  double& c) {{
  if (__builtin_expect(!(x <= {m} && x >= -{m}), 0)) {{
    s = std::sin(x); c = std::cos(x); return;
  }}
{sincos_steps("double", dlit, "std::floor")}  // swap and signs by the quadrant, branch-free
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
// a problem's rows run on one thread, in seed order (the driver): a plain minimum
static inline void r2ik_min_int(volatile int* a, int v) { if (v < *a) *a = v; }
""" + host_sincos()


DEVICE_PRELUDE = r"""
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
// a problem's rows run on threads of their own: an atomic minimum
__device__ __forceinline__ void r2ik_min_int(volatile int* a, int v) { atomicMin((int*)a, v); }
"""


PRELUDE = r"""
#if !defined(__CUDACC__) && !defined(R2IK_HOST)
#error "compile for CUDA (nvcc / NVRTC), or for the host with the host shim first"
#endif
// a choice between two values both computed (the scalar dialect's select; the vector one's
// is lane-wise, see the lanes' types)
template <typename T> R2IK_FN T r2ik_sel(bool c, T a, T b) { return c ? a : b; }
// "any lane": a bool is one lane (the vector dialect's mask has its own)
R2IK_FN bool r2ik_any_m(bool c) { return c; }
// no row: a problem's lowest converged seed index before any converged (speed mode)
#define R2IK_NO_ROW 0x7fffffff
"""


def dialect_prelude(d: Dialect) -> str:
    """The names the LM rows use, for a dialect: inside its namespace."""
    if d.vector:
        return "typedef r2ik_vec V; typedef r2ik_vmask M;\n"
    return ("typedef ::S V; typedef bool M;\n")


# The host lanes' types: R2IK_L rows side by side in one vector (x86-64 g++, built for AVX2 and
# used where the CPU has it; elsewhere the one-row rendering runs)
VECTOR_TYPES = r"""
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


def vector_sincos() -> str:
    """``r2ik_sincos`` of a vector: the host's scalar recipe (:func:`sincos_steps`) with its
    branches as selects; a lane beyond the reduction's range takes libm's pair, as the scalar
    code does."""
    m = dlit(sc.REDUCE_MAX)
    return f"""
static inline void r2ik_sincos(Vv x, Vv& s, Vv& c) {{
{sincos_steps("Vv", lambda v: f"Vv({dlit(v)})", "r2ik_floor")}\
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


KERNEL_RE = re.compile(r"^R2IK_KERNEL (\w+)\(([^)]*)\)", re.M)


def host_variant(src: str) -> str:
    """The generated CUDA text made into host C++: the device prelude swapped for
    :data:`HOST_SHIM`, and per kernel an ``extern "C" host_<kernel>(rows, args...)`` that runs
    it once per row, in row order (the threads do not cooperate, so this is the kernel's
    result). Everything between is the very text NVRTC compiles."""
    if DEVICE_PRELUDE not in src:
        raise InvalidInputError("not a generated ros2_ik kernel source")
    e = Emit()
    for name, args in KERNEL_RE.findall(src):
        params = [a.strip() for a in args.split(",")]
        names = [re.findall(r"[A-Za-z_][A-Za-z_0-9]*", a)[-1] for a in params]
        with e.block(f'extern "C" void host_{name}(long long rows, {args})'):
            e(f"for (r2ik_row_ = 0; r2ik_row_ < rows; ++r2ik_row_) "
              f"{name}({', '.join(names)});")
    return src.replace(DEVICE_PRELUDE, HOST_SHIM) + e.text()
