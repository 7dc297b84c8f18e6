"""The compiled backends, all rendered from one generated source (:mod:`.codegen`).

- :mod:`.interface`: the kernels' options, status codes and argument structs, generated from
  the spec's types (:mod:`ros2_ik.ik.config`);
- :mod:`.codegen`: the one compiled source (C++ with the robot baked in), rendered for CUDA,
  the host one row at a time, and the host in AVX2 vector lanes;
- :mod:`.host`: built with g++ and called through ctypes; :mod:`.cuda`: compiled by NVRTC and
  run through CuPy; :mod:`.cubin`: an sm_90 build without a GPU (tests, resource reports).

Importing this package needs neither a compiler, CuPy nor a GPU; the prepared solvers of
:mod:`ros2_ik.api` build what they use.
"""
