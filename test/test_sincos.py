"""The host kernels' sine and cosine (ros2_ik/backends/sincos.py): the recipe is accurate
against libm, and its two renderings in the generated host C++ (one value, and a vector of
lanes) give its values bit for bit, outside its reduction range and for NaN too."""

from __future__ import annotations

import numpy as np
import pytest

from ros2_ik.backends import codegen, emit
from ros2_ik.backends import host as hostrun
from ros2_ik.backends.sincos import REDUCE_MAX, sincos

HALF_PI = np.pi / 2


def _inputs():
    rng = np.random.default_rng(7)
    edges = np.array([0.0, -0.0, 1e-300, -1e-300, 1e-9, np.pi / 4, -np.pi / 4, np.pi, -np.pi,
                      2 * np.pi, 3 * np.pi / 4, REDUCE_MAX, -REDUCE_MAX,
                      np.nextafter(REDUCE_MAX, np.inf), -np.nextafter(REDUCE_MAX, np.inf),
                      1e7, -3e9, np.inf, -np.inf, np.nan])
    # around the quadrant boundaries (k pi/2 +- a few ulp) and the rounding points (k+1/2) pi/2
    k = np.arange(-40, 41, dtype=float)
    near = np.concatenate([np.nextafter(k * HALF_PI, s) for s in (np.inf, -np.inf)]
                          + [(k + 0.5) * HALF_PI])
    return np.concatenate([edges, near, rng.uniform(-4, 4, 20_000),
                           rng.uniform(-60, 60, 20_000), rng.uniform(-REDUCE_MAX, REDUCE_MAX,
                                                                     4_000)])


def test_recipe_is_as_accurate_as_libm_within_a_few_ulp():
    x = _inputs()
    s, c = sincos(x)
    fin = np.isfinite(x)
    assert np.max(np.abs(s[fin] - np.sin(x[fin]))) <= 2.3e-16
    assert np.max(np.abs(c[fin] - np.cos(x[fin]))) <= 2.3e-16
    assert np.all(np.isnan(s[~fin])) and np.all(np.isnan(c[~fin]))
    beyond = fin & (np.abs(x) > REDUCE_MAX)
    assert beyond.sum() >= 4
    assert np.array_equal(s[beyond], np.sin(x[beyond]))  # libm's pair out there
    assert np.array_equal(c[beyond], np.cos(x[beyond]))
    inside = np.abs(x) <= REDUCE_MAX
    assert np.mean(s[inside] != np.sin(x[inside])) > 0.01  # the recipe, not libm, in range
    # exact where it must be: sin 0 = 0, cos 0 = 1, and sin^2 + cos^2 = 1 to rounding
    assert sincos(0.0) == (0.0, 1.0)
    assert np.max(np.abs(s[fin] ** 2 + c[fin] ** 2 - 1.0)) <= 5e-16


def test_recipe_check_has_teeth():
    """A coefficient off by one part in 1e9 breaks the accuracy bound above."""
    from ros2_ik.backends import sincos as mod

    x = _inputs()
    x = x[np.isfinite(x)][:5000]
    real = mod.SIN_COEF
    try:
        mod.SIN_COEF = (real[0], real[1], real[2], real[3], real[4] * (1 + 1e-9), real[5])
        bad = sincos(x)
    finally:
        mod.SIN_COEF = real
    assert np.max(np.abs(bad[0] - np.sin(x))) > 2.3e-16


@pytest.mark.skipif(hostrun.available() is None, reason="needs g++")
def test_host_cxx_copies_are_the_recipe_bit_for_bit():
    """The host shim's scalar r2ik_sincos and the lanes' vector one (where this CPU runs the
    lanes) against the recipe; each lane of a vector sees different inputs."""
    body = r"""
R2IK_KERNEL r2ik_sincos_test(const double* R2IK_RESTRICT x, long long n,
                             double* R2IK_RESTRICT s, double* R2IK_RESTRICT c,
                             double* R2IK_RESTRICT sv, double* R2IK_RESTRICT cv,
                             int* R2IK_RESTRICT lanes) {
  if (R2IK_ROW != 0) return;
  for (long long i = 0; i < n; ++i) r2ik_sincos(x[i], s[i], c[i]);
  lanes[0] = r2ik_test_lanes(x, n, sv, cv);
}
"""
    vec = emit.VECTOR_TYPES.replace("LANES_N", "4") + emit.vector_sincos() + r"""
static int r2ik_test_lanes_v(const double* x, long long n, double* sv, double* cv) {
  for (long long i = 0; i + R2IK_L <= n; i += R2IK_L) {
    Vv a, s, c;
    for (int l = 0; l < R2IK_L; ++l) a.x[l] = x[i + l];
    r2ik_sincos(a, s, c);
    for (int l = 0; l < R2IK_L; ++l) { sv[i + l] = s.x[l]; cv[i + l] = c.x[l]; }
  }
  return R2IK_L;
}
}  // namespace r2ik_v
#pragma GCC pop_options
#endif
static int r2ik_test_lanes(const double* x, long long n, double* sv, double* cv) {
#ifdef R2IK_LANES
  if (__builtin_cpu_supports("avx2")) return r2ik_v::r2ik_test_lanes_v(x, n, sv, cv);
#endif
  return 0;
}
"""
    src = emit.DEVICE_PRELUDE + emit.PRELUDE + "typedef double S;\n" + vec + body
    fn = hostrun.compile_host(codegen.host_variant(src)).get_function("r2ik_sincos_test")
    x = _inputs()
    x = x[:len(x) // 4 * 4]
    n = len(x)
    s, c, sv, cv = (np.full(n, -7.0) for _ in range(4))
    used = np.zeros(1, np.int32)
    fn(1, x, n, s, c, sv, cv, used)
    rs, rc = sincos(x)
    np.testing.assert_array_equal(s, rs)
    np.testing.assert_array_equal(c, rc)
    if used[0] == 0:
        pytest.skip("this CPU does not run the lanes (no AVX2); the scalar copy was checked")
    np.testing.assert_array_equal(sv, rs)
    np.testing.assert_array_equal(cv, rc)
