"""A CPU stand-in of CuPy with CuPy's host/device rules, for testing GPU-facing code without a GPU.

- Device arrays (:class:`ndarray`) wrap NumPy arrays but refuse every implicit trip to the host:
  ``np.asarray(d)``, ``bool(d)``, ``float(d)``, ``int(d)``, iteration, ``d.tolist()`` raise
  TypeError, as CuPy does; so does mixing a NumPy array into a device operation.
- Explicit transfers are counted: ``d.get()`` / ``asnumpy(d)`` (device -> host, a host sync) in
  ``stats["to_host"]``; ``asarray(numpy_array)`` (host -> device) in ``stats["to_device"]``.
- ``RawModule(code=...)`` compiles the generated CUDA text for the host
  (:func:`ros2_ik.gpu.codegen.host_variant`, g++) and a launch ``kernel(grid, block, args)``
  runs ``grid * block`` rows; arguments must be device arrays or NumPy scalars (CuPy's rule).
- Streams, events and mapped host memory are there in the shape the runtime uses them.

The module name starts with "cupy" so that ``ros2_ik.backend.get_xp`` treats its arrays as CuPy
arrays; install it with :func:`install` (a monkeypatch of the backend's CuPy state).
"""

from __future__ import annotations

import ctypes
import types

import numpy as np

from ros2_ik.backends import codegen
from ros2_ik.backends import host as hostrun

stats = {"to_host": 0, "to_device": 0, "launches": 0, "implicit": 0, "graph_launches": 0}
strict = True  # False: count implicit host syncs in stats["implicit"] instead of raising

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int32, int64, uint8, uint64 = np.int8, np.int32, np.int64, np.uint8, np.uint64
bool_ = np.bool_
newaxis = None
inf, nan, pi = np.inf, np.nan, np.pi


def reset_stats():
    for k in stats:
        stats[k] = 0


def _unwrap(x, where="operation"):
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray):
        raise TypeError(f"Unsupported type <class 'numpy.ndarray'> in a device {where} "
                        "(CuPy does not mix host arrays into device operations; use asarray)")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, where) for v in x)
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return ndarray(x)
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, np.generic):  # CuPy reductions return 0-d device arrays
        return ndarray(np.asarray(x))
    return x


class ndarray:
    __array_priority__ = 1000

    def __init__(self, a):
        self._a = a

    # --- the host boundary
    def get(self, stream=None):
        stats["to_host"] += 1
        return self._a.copy()

    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError("set() takes a NumPy array")
        stats["to_device"] += 1
        self._a[...] = arr

    def __array__(self, *a, **k):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def _no(self, *a):
        raise TypeError("implicit device -> host conversion (a hidden host sync); "
                        "use .get() explicitly")

    def _implicit(name):
        def f(self, *a):
            if strict:
                self._no()
            stats["implicit"] += 1
            return getattr(self._a, name)(*a)
        return f

    __bool__ = _implicit("__bool__")
    __float__ = _implicit("__float__")
    __int__ = _implicit("__int__")
    __index__ = _implicit("__index__")
    __complex__ = __iter__ = tolist = _no
    item = _implicit("item")

    # --- array protocol
    shape = property(lambda s: s._a.shape)
    dtype = property(lambda s: s._a.dtype)
    ndim = property(lambda s: s._a.ndim)
    size = property(lambda s: s._a.size)
    T = property(lambda s: ndarray(s._a.T))
    flags = property(lambda s: s._a.flags)
    data = property(lambda s: types.SimpleNamespace(ptr=s._a.ctypes.data))

    def __len__(self):
        return len(self._a)

    def __repr__(self):
        return f"standin.ndarray(shape={self.shape}, dtype={self.dtype})"

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key, "index")])

    def __setitem__(self, key, value):
        self._a[_unwrap(key, "index")] = _unwrap(value, "assignment")

    def __getattr__(self, name):
        if name.startswith("__"):  # no __array_interface__ & co.: no implicit host access
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if callable(attr):
            return lambda *a, **k: _wrap(attr(*_unwrap(a), **{n: _unwrap(v) for n, v in
                                                              k.items()}))
        return _wrap(attr)


def _binop(name):
    def op(self, other):
        return _wrap(getattr(self._a, name)(_unwrap(other)))
    return op


for _n in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
           "rfloordiv", "mod", "pow", "rpow", "matmul", "rmatmul", "and", "rand", "or", "ror",
           "xor", "lt", "le", "gt", "ge", "eq", "ne", "iadd", "isub", "imul", "itruediv", "iand",
           "ior"):
    setattr(ndarray, f"__{_n}__", _binop(f"__{_n}__"))
for _n in ("neg", "pos", "abs", "invert"):
    setattr(ndarray, f"__{_n}__", (lambda nm: lambda self: _wrap(getattr(self._a, nm)()))(
        f"__{_n}__"))


def asarray(a, dtype=None, order=None):
    if isinstance(a, ndarray):
        return ndarray(np.asarray(a._a, dtype=dtype, order=order))
    stats["to_device"] += 1
    return ndarray(np.array(a, dtype=dtype, order=order, copy=True))


def array(a, dtype=None, copy=True, order="K"):
    if isinstance(a, ndarray):
        return ndarray(np.array(a._a, dtype=dtype, copy=copy, order=order))
    return asarray(a, dtype=dtype, order=None if order == "K" else order)


def ascontiguousarray(a, dtype=None):
    return ndarray(np.ascontiguousarray(_unwrap(a), dtype=dtype))


def asnumpy(a, stream=None):
    return a.get() if isinstance(a, ndarray) else np.asarray(a)


def _fn(f):
    return lambda *a, **k: _wrap(f(*_unwrap(a), **{n: _unwrap(v) for n, v in k.items()}))


def __getattr__(name):  # every other function: NumPy's, on device arrays only
    f = getattr(np, name)
    return _fn(f) if callable(f) else f


linalg = types.SimpleNamespace(det=_fn(np.linalg.det), solve=_fn(np.linalg.solve),
                               norm=_fn(np.linalg.norm), inv=_fn(np.linalg.inv))


# --- CUDA runtime pieces the GPU runtime uses

class _Stream:
    def __init__(self, non_blocking=False):
        self.non_blocking = non_blocking
        self.ptr = id(self)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def synchronize(self):
        pass

    def wait_event(self, event):
        pass

    def begin_capture(self, mode=None):
        global _capture
        if _capture is not None:
            raise RuntimeError("already capturing")
        _capture = []

    def end_capture(self):
        global _capture
        calls, _capture = _capture, None
        return _Graph(calls)


_capture = None  # the launches recorded while a stream captures


class _Graph:
    """A captured sequence: replays the same kernels on the same buffers, as CUDA does."""

    def __init__(self, calls):
        self.calls = calls

    def launch(self, stream=None):
        stats["graph_launches"] += 1
        for fn, rows, args in self.calls:
            fn(rows, *args)


_null_stream = _Stream()


class _Event:
    def __init__(self):
        self.recorded = False

    def record(self, stream=None):
        self.recorded = True

    @property
    def done(self):  # launches run synchronously here
        return self.recorded

    def synchronize(self):
        pass


_mapped: dict[int, ctypes.Array] = {}


def _host_alloc(size, flags):
    buf = (ctypes.c_char * int(size))()
    addr = ctypes.addressof(buf)
    _mapped[addr] = buf
    return addr


def _memcpy_async(dst, src, size, kind, stream):
    ctypes.memmove(dst, src, size)


class _Runtime:
    memcpyAsync = staticmethod(_memcpy_async)
    hostAlloc = staticmethod(_host_alloc)
    hostGetDevicePointer = staticmethod(lambda ptr, flags: ptr)
    freeHost = staticmethod(lambda ptr: _mapped.pop(ptr, None))
    getDeviceCount = staticmethod(lambda: 1)


cuda = types.SimpleNamespace(Stream=_Stream, Event=_Event, runtime=_Runtime(),
                             alloc_pinned_memory=lambda n: bytearray(int(n)),
                             get_current_stream=lambda: _null_stream,
                             get_elapsed_time=lambda a, b: 0.0)


class _Kernel:
    def __init__(self, fn, name):
        self.fn = fn
        self.name = name

    def __call__(self, grid, block, args, **kw):
        rows = int(np.prod(grid)) * int(np.prod(block))
        out = []
        for a in args:
            if isinstance(a, ndarray):
                out.append(a._a)
            elif isinstance(a, np.generic):
                out.append(int(a) if (a.dtype == np.uint64) else a)
            else:
                raise TypeError(f"{self.name}: kernel argument of type {type(a).__name__}; "
                                "pass device arrays or NumPy scalars (typed) as CuPy needs")
        if _capture is not None:
            _capture.append((self.fn, rows, out))
            return
        stats["launches"] += 1
        self.fn(rows, *out)


class RawModule:
    def __init__(self, code, options=()):
        self.code = code
        self.module = hostrun.compile_host(codegen.host_variant(code))

    def get_function(self, name):
        return _Kernel(self.module.get_function(name), name)


def install(monkeypatch):
    """Make this stand-in the usable CuPy of ``ros2_ik.backend`` for one test."""
    import sys

    from ros2_ik import backend

    monkeypatch.setitem(backend._cupy_state, "module", sys.modules[__name__])
    monkeypatch.setitem(backend._cupy_state, "error", None)
    reset_stats()
    return sys.modules[__name__]
