"""The call path of small FK and Jacobian calls: a CPython extension of a few dozen lines.

A call of one configuration spends more time in Python (checking ``q``, filling the driver's
argument record, the ctypes call, copying the answer) than in the generated kernel. This
module's extension does that part in C: it checks ``q`` (a C-contiguous float64 ndarray of the
model's width), allocates the answer, fills :data:`.interface.FRAMES_ARGS`'s record and calls the
generated ``r2ik_frames_host`` through its address, so the answers are the ctypes path's bit
for bit (the same kernel). It is built once per machine, Python and NumPy (about a second of
``g++`` against Python's and NumPy's headers, cached with the kernels); where it cannot be
built (no compiler, no ``Python.h``) :func:`module` is None and the ctypes path answers.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

import numpy as np

from . import interface
from .codegen import source_hash
from .build import available, cache_dir, run_compiler

__all__ = ["module", "SOURCE"]

_log = logging.getLogger("ros2_ik.backends")

_NAME = "ros2_ik_pycall"

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

""" + interface._struct("r2ik_frames_args", interface.FRAMES_ARGS) + r"""
typedef int (*r2ik_frames_fn)(const r2ik_frames_args*);

/* frames(fn, q, nq, F, d1, d2, jacobian, max_value, max_rows) -> (B, F, d1, d2) float64, with F
   dropped when F is given as -1 (one frame named by a string), or None when q is not a
   C-contiguous float64 (nq,) or (B, nq) array with 1 <= B <= max_rows, or when the driver
   refuses a value (NaN, infinity, beyond max_value): the caller then takes its general path,
   which raises the error. */
static PyObject* frames(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  (void)self;
  if (n != 9) {
    PyErr_SetString(PyExc_TypeError, "frames takes 9 arguments");
    return NULL;
  }
  void* fn = PyLong_AsVoidPtr(args[0]);
  const long nq = PyLong_AsLong(args[2]), F = PyLong_AsLong(args[3]);
  const long d1 = PyLong_AsLong(args[4]), d2 = PyLong_AsLong(args[5]);
  const long jac = PyLong_AsLong(args[6]);
  const double max_value = PyFloat_AsDouble(args[7]);
  const long max_rows = PyLong_AsLong(args[8]);
  if (PyErr_Occurred()) return NULL;
  if (!PyArray_CheckExact(args[1])) Py_RETURN_NONE;
  PyArrayObject* q = (PyArrayObject*)args[1];
  if (PyArray_TYPE(q) != NPY_DOUBLE || !PyArray_IS_C_CONTIGUOUS(q) || !PyArray_ISALIGNED(q))
    Py_RETURN_NONE;
  npy_intp B;
  if (PyArray_NDIM(q) == 1 && PyArray_DIM(q, 0) == nq) B = 1;
  else if (PyArray_NDIM(q) == 2 && PyArray_DIM(q, 1) == nq) B = PyArray_DIM(q, 0);
  else Py_RETURN_NONE;
  if (B < 1 || B > max_rows) Py_RETURN_NONE;
  npy_intp dims[4];
  int nd = 0;
  dims[nd++] = B;
  if (F > 0) dims[nd++] = F;
  dims[nd++] = d1;
  dims[nd++] = d2;
  PyArrayObject* out = (PyArrayObject*)PyArray_SimpleNew(nd, dims, NPY_DOUBLE);
  if (out == NULL) return NULL;
  r2ik_frames_args a;
  a.q = (unsigned long long)PyArray_DATA(q);
  a.B = (long long)B;
  a.out = (unsigned long long)PyArray_DATA(out);
  a.jacobian = jac;
  a.max_value = max_value;
  int rc;
  if (B >= 64) {
    Py_BEGIN_ALLOW_THREADS
    rc = ((r2ik_frames_fn)fn)(&a);
    Py_END_ALLOW_THREADS
  } else {
    rc = ((r2ik_frames_fn)fn)(&a);
  }
  if (rc != 0) {
    Py_DECREF(out);
    Py_RETURN_NONE;
  }
  return (PyObject*)out;
}

static PyMethodDef methods[] = {
  {"frames", (PyCFunction)(void (*)(void))frames, METH_FASTCALL, "see ros2_ik.backends.pycall"},
  {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "ros2_ik_pycall", NULL, -1, methods};

PyMODINIT_FUNC PyInit_ros2_ik_pycall(void) {
  import_array();
  return PyModule_Create(&moddef);
}
"""

_lock = threading.Lock()
_state: list = []  # [module or None] once looked at


def _build_and_load():
    if os.environ.get("ROS2_IK_PYCALL", "1") == "0":
        return None
    inc = sysconfig.get_paths().get("include")
    if not inc or not (Path(inc) / "Python.h").exists():
        _log.info("no Python.h: small FK/Jacobian calls take the ctypes path")
        return None
    cxx = available()
    if cxx is None:
        return None
    key = source_hash(SOURCE + sys.version + np.__version__ + sys.platform)
    d = cache_dir()
    lib = d / f"{_NAME}_{key}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if not lib.exists():
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            src = Path(tmp) / "pycall.cpp"
            src.write_text(SOURCE)
            out = Path(tmp) / "pycall.so"
            run_compiler([cxx, "-O2", "-shared", "-fPIC", "-x", "c++", f"-I{inc}",
                           f"-I{np.get_include()}", str(src), "-o", str(out)])
            os.replace(out, lib)
    loader = importlib.machinery.ExtensionFileLoader(_NAME, str(lib))
    spec = importlib.util.spec_from_file_location(_NAME, str(lib), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def module():
    """The extension (built on first use), or None where it cannot be built or loaded (the
    reason is logged once)."""
    if _state:
        return _state[0]
    with _lock:
        if not _state:
            try:
                mod = _build_and_load()
            except Exception as exc:  # noqa: BLE001 - any failure: the ctypes path answers
                if "cancelled" in str(exc):  # a build ended by a shutdown: not this machine's
                    return None
                _log.info("small-call extension unavailable (%s): the ctypes path answers", exc)
                mod = None
            _state.append(mod)
    return _state[0]
