"""Compiled (Numba) fast path of :func:`.fk`, :func:`.fk_frames` and :func:`.jacobian`.

The reference implementations (``fk.py``, ``jacobian.py``) are written once against ``xp`` and
spend microseconds of NumPy dispatch per array operation: a single configuration's FK costs
about 150 us there, most of it overhead. The kernels in :mod:`._compiled_kernels` walk the tree
once per configuration in compiled code (every joint type: revolute, continuous, prismatic,
planar, floating; mimic joints; frozen joints drop their columns), with the same conventions and
results (tested equal to the reference on every bundled robot).

Scope: NumPy ``float64`` input (after the same promotion rules; float32 keeps its dtype and the
reference path). CuPy input and every other function keep the reference path.

Input checks are the reference's: a float64 array of the right shape is checked in compiled code
(finite, within +-``MAX_VALUE``, non-zero floating quaternions); anything it refuses goes to
:meth:`ros2_ik.model.Model.check_q`, which raises the usual error.

Readiness: the kernels are used once Numba's disk cache for them is current (``scripts/setup.sh``
fills it through :func:`ros2_ik.solvers.warm_up`, which also calls :func:`ensure_compiled`) or
after :func:`ensure_compiled`; until then, the reference path answers, so an FK call never waits
for a compilation.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import numpy as np

from ..backend import get_xp
from ..model import MAX_BATCH, MAX_VALUE, Model
from ..validate import as_float_array, check_names
from . import native

__all__ = ["available", "ready", "ensure_compiled", "as_q", "frames_selection", "pairs_selection",
           "link_poses", "jacobians", "cache_current", "small_call", "frames_key", "pairs_key",
           "off"]

#: rows from which the kernels spread a batch over the cores
PARALLEL_MIN = 2048
EXPRESS = {"world": 0, "local": 1, "reference": 2}

_lock = threading.Lock()
_kernels = None   # the kernel module once ready; False: Numba is missing


def cache_current(module_file: str | Path, functions: int) -> bool:
    """True when Numba's index files of at least ``functions`` functions of the kernel module
    ``module_file`` exist and are newer than its source (then loading them takes about a second
    and no compilation is expected)."""
    src = Path(module_file)
    cache_dir = os.environ.get("NUMBA_CACHE_DIR")
    pattern = f"{src.stem}.*.nbi"
    index = (list(Path(cache_dir).glob(f"*/{pattern}")) if cache_dir
             else list((src.parent / "__pycache__").glob(pattern)))
    try:
        mtime = src.stat().st_mtime
        return len(index) >= functions and all(f.stat().st_mtime >= mtime for f in index)
    except OSError:
        return False


_SRC = Path(__file__).with_name("_compiled_kernels.py")
_FUNCTIONS = 6  # frames, frames_parallel, jacobians, jacobians_parallel and the two entry points


def _import():
    global _kernels
    if _kernels is None:
        try:
            from . import _compiled_kernels  # noqa: PLC0415

            _kernels = _compiled_kernels
        except Exception:  # noqa: BLE001 - any import failure means "no compiled path"
            _kernels = False
    return _kernels or None


def available() -> bool:
    """True when Numba imports (the compiled path can be used once compiled)."""
    return _import() is not None


_ready = False
_looked = False
_off = False


@contextlib.contextmanager
def off():
    """Within: every call takes the reference (NumPy) path, the short and C call paths too
    (tests and benchmarks compare against it; not for concurrent use)."""
    global _off
    before, _off = _off, True
    try:
        yield
    finally:
        _off = before


def ready() -> bool:
    """True when the compiled kernels can answer without compiling (the disk cache is looked
    at once per process; :func:`ensure_compiled` makes them ready later)."""
    global _ready, _looked
    if _off:
        return False
    if not _looked:
        with _lock:
            if not _looked and cache_current(_SRC, _FUNCTIONS):
                _ready = _import() is not None
            _looked = True
    return _ready


def ensure_compiled() -> None:
    """Compile the kernels (or load them from Numba's disk cache) on a small model, and build
    or load the C call path (:mod:`.native`); the public calls use them once this is done
    (never while it runs: they do not wait for it)."""
    if _import() is None:
        return
    if not _ready:
        _compile()
    native.module(wait=native.mode() != "0")  # and the C call path itself (once per machine)


def _compile() -> None:
    """The kernels, compiled or loaded from the disk cache, on every joint type."""
    global _ready
    from ..model import Model  # noqa: PLC0415

    m = Model.from_urdf(_WARM_URDF)
    q = m.neutral_q()[None]
    for B in (1, PARALLEL_MIN):
        qq = np.repeat(q, B, axis=0)
        link_poses(m, qq, frames_selection(m, list(m.link_names)))
        jacobians(m, qq, pairs_selection(m, ["d", "c"], "b", 1))
    _kernels.entry_points()  # the C call path's (into the disk cache with the rest)
    with _lock:
        _ready = True


# every joint type, so the warm-up touches every branch (the code is the same for any model)
_WARM_URDF = """<robot name="warm">
  <link name="a"/><link name="b"/><link name="c"/><link name="d"/>
  <joint name="j1" type="floating"><parent link="a"/><child link="b"/></joint>
  <joint name="j2" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j3" type="prismatic"><parent link="c"/><child link="d"/><axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def _links(model: Model, frames) -> np.ndarray:
    """The links whose poses frames need (themselves and their ancestors), ascending."""
    need = set()
    for f in frames:
        f = int(f)
        while f > 0 and f not in need:
            need.add(f)
            f = int(model.link_parent[f])
    return np.array(sorted(need), dtype=np.int64)


_SELECTIONS = "kinematics.compiled.selection"


def _selection(model: Model, key, build):
    """``build()`` (which validates the names and raises the reference's errors), kept per
    model and ``key`` (names that passed once pass again)."""
    return model.memo(_SELECTIONS, key, build, max_keys=1024)


_F64 = np.dtype(np.float64)
#: most output numbers of a :func:`small_call` (larger calls take the checked path)
SMALL_OUT = 1 << 16


def small_call(model: Model, q, names, jac: bool):
    """The short path of :func:`.fk_frames` (``jac`` False: ``names`` its frames) and of
    :func:`.jacobian` in the base frame (True: ``names`` its link or links) for the calls a
    control loop makes: q a C-contiguous float64 NumPy array of shape (nq,) or (B, nq) with B
    below :data:`PARALLEL_MIN`, and names (a str, a list or a tuple) already looked up by the
    general path (:func:`frames_selection` / :func:`pairs_selection`). Returns the answer, or
    None when any of that does not hold or q has a value the checks refuse (the general path
    then answers, or raises the reference's error).

    The C call path (:mod:`.native`) answers once it is loaded; until then, Numba's (q also
    writable there). Either saves microseconds per call over the general path (the selection's
    memo, :func:`as_q` and the memory check are Python calls); the kernel and its checks of q
    are the same."""
    t = type(names)
    if _off:
        return None
    if t is str:
        names_key = names  # the C call path's records are kept by the names as given
    elif t is list or t is tuple:
        names_key = tuple(names)
    else:
        return None
    rec = model.memo_peek(_NATIVE[jac], names_key)
    if rec is not None:
        return _native_call(rec, q)
    one = jac and t is str  # one Jacobian asked for by name: (B, 6, n), no K axis
    key = pairs_key(names, None, EXPRESS["world"]) if jac else frames_key(names)
    if not (_ready or ready()):
        return None
    # None also for names not looked up yet or unhashable: the general path checks them
    sel = model.memo_peek(_SELECTIONS, key)
    if sel is None:
        return None
    rec = _native_record(model, names_key, jac, one, sel)
    if rec is not None:
        return _native_call(rec, q)
    if type(q) is not np.ndarray or q.dtype is not _F64:
        return None
    flags = q.flags
    if not (flags.c_contiguous and flags.writeable):
        return None
    shape = q.shape
    nq = model.nq
    if len(shape) == 1:
        if shape[0] != nq:
            return None
        q = q[None]  # a view: half the cost of a reshape
    elif not (len(shape) == 2 and shape[1] == nq and 0 < shape[0] < PARALLEL_MIN):
        return None
    _, (idata, fdata), tail = sel
    out = np.empty((q.shape[0],) + tail)
    fn = _kernels.jacobians if jac else _kernels.frames
    if out.size > SMALL_OUT or not fn(q, idata, fdata, MAX_VALUE, out):
        return None
    return out[:, 0] if one else out


_NATIVE = ("kinematics.compiled.native_frames", "kinematics.compiled.native_jacobians")
_native_call = None  # the extension's call, once loaded


def _native_record(model: Model, key, jac: bool, one: bool, sel):
    """The C call path's record of this selection, kept for the next calls with these names
    (``key``: the str, or the names as a tuple); None while the extension is not loaded (the
    first call starts loading it, see :mod:`.native`)."""
    global _native_call
    mod = native.module()
    if mod is None:
        return None
    _, (idata, fdata), tail = sel
    rec = mod.make(mod.addresses[jac], idata, fdata, model.nq, MAX_VALUE,
                   tail[1:] if one else tail, PARALLEL_MIN, SMALL_OUT, RELEASE_GIL_ROWS)
    if _native_call is None:
        _native_call = mod.call
    return model.memo(_NATIVE[jac], key, lambda: rec, max_keys=1024)


#: rows from which the C call path lets go of the GIL while the kernel runs (below, that
#: costs more than the kernel)
RELEASE_GIL_ROWS = 16


def _pack(model: Model, links, sel, express: int = 0):
    """The table, the needed links and the selection (frames, or pairs) as the two arrays
    (int64, float64) the kernels read by offsets (see :mod:`._compiled_kernels`)."""
    tab = model.tables.packed
    sel = np.asarray(sel, dtype=np.int64)
    nk = sel.shape[0]
    C = tab.cint.shape[0]
    head = [model.num_links, len(links), nk, len(tab.floating), C, express, 0, 0]
    padded = np.zeros(2 * nk, dtype=np.int64)
    padded[:sel.size] = sel.ravel()
    idata = np.concatenate([np.array(head, dtype=np.int64), tab.ints.ravel(),
                            tab.floating, links, padded, tab.cint.ravel()])
    fdata = np.concatenate([tab.fl.ravel(), tab.cfl.ravel()])
    return idata.astype(np.int64), fdata.astype(np.float64)


def frames_selection(model: Model, frames):
    """(frame link indices (F,), the packed kernel arrays, a row's output shape (F, 4, 4)):
    ``model.link_indices(frames)`` and its errors, cached per model and frames."""
    def build():
        idx = model.link_indices(frames)
        return idx, _pack(model, _links(model, idx), idx), (len(idx), 4, 4)
    key = frames_key(frames)
    return build() if key is None else _selection(model, key, build)


def frames_key(frames):
    """The key :func:`frames_selection` keeps ``frames`` under (None: not kept)."""
    return frames if isinstance(frames, str) else ("frames",) + tuple(frames) if isinstance(
        frames, (list, tuple)) else None


def pairs_selection(model: Model, links, reference, express: int):
    """(link pairs (K, 2) [reference or 0, link], the packed kernel arrays, a row's output
    shape (K, 6, nv_active)) for a link name or a list of them, a reference link name or None
    and an ``express`` code (:data:`EXPRESS`); checked as the reference does, cached."""
    def build():
        names = [links] if isinstance(links, str) else check_names(links, "link")
        ia = 0 if reference is None else model.link_index(reference)
        pairs = np.array([(ia, model.link_index(n)) for n in names], dtype=np.int64)
        pairs = pairs.reshape(-1, 2)
        return pairs, _pack(model, _links(model, pairs.ravel()), pairs, express), (
            len(pairs), 6, model.nv_active)
    key = pairs_key(links, reference, express)
    return build() if key is None else _selection(model, key, build)


def pairs_key(links, reference, express: int):
    """The key :func:`pairs_selection` keeps its selection under (None: not kept)."""
    return ("pairs", reference, express, links) if isinstance(links, str) else (
        ("pairs", reference, express) + tuple(links) if isinstance(links, (list, tuple))
        else None)


def as_q(model: Model, q):
    """``q`` as a C-contiguous float64 (B, nq) array for the kernels (values not checked yet),
    or None when the compiled path does not take it (not ready, not NumPy, float32, not of
    shape (nq,) / (B, nq) with 0 < B <= MAX_BATCH: the reference then checks and answers)."""
    if not ready():
        return None
    if type(q) is not np.ndarray or q.dtype != np.float64:
        if get_xp(q) is not np:
            return None
        q = as_float_array(q, "q", f"shape (B, {model.nq}) or ({model.nq},)", np)  # check_q's
        if q.dtype != np.float64:  # float32 keeps its dtype on the reference path
            return None
    if q.ndim == 1:
        q = q[None]
    if q.ndim != 2 or q.shape[1] != model.nq or not 0 < q.shape[0] <= MAX_BATCH:
        return None
    if not (q.flags.c_contiguous and q.flags.writeable):
        # a read-only array (a message buffer) is another type to Numba: copied, so that the
        # kernels are not compiled again for it (seconds, inside a request)
        q = np.array(q, order="C")
    return q


def link_poses(model: Model, q, selection, check: bool = True):
    """Poses (B, F, 4, 4) of the frames of ``selection`` (:func:`frames_selection`) at ``q``
    (from :func:`as_q`); None when ``check`` and q has a value :meth:`Model.check_q` refuses."""
    _, (idata, fdata), tail = selection
    out = np.empty((q.shape[0],) + tail)
    fn = _kernels.frames_parallel if q.shape[0] >= PARALLEL_MIN else _kernels.frames
    return out if fn(q, idata, fdata, MAX_VALUE if check else -1.0, out) else None


def jacobians(model: Model, q, selection, check: bool = True):
    """Jacobians (B, K, 6, nv_active) of link pairs[k, 1] relative to link pairs[k, 0] (0: the
    base), expressed as ``selection`` (:func:`pairs_selection`) says: in the base axes, the
    link's or the reference's; None as :func:`link_poses`."""
    _, (idata, fdata), tail = selection
    out = np.empty((q.shape[0],) + tail)
    fn = _kernels.jacobians_parallel if q.shape[0] >= PARALLEL_MIN else _kernels.jacobians
    return out if fn(q, idata, fdata, MAX_VALUE if check else -1.0, out) else None
