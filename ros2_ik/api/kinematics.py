"""The public FK and Jacobian calls: :func:`fk`, :func:`fk_frames`, :func:`jacobian`.

Each call goes through a prepared :class:`Kinematics` (kept per model and frames), which fixed
its backend when it was built: the generated frames kernels on the host where they cover the
frames (every joint on their paths revolute, continuous, prismatic or fixed; NumPy float64
input), else the reference (:mod:`ros2_ik.kinematics`), with the same results (tested) and
the same errors. Other input (CuPy, float32, frame-to-frame or local-frame Jacobians, numerical
ones) is the reference's.
"""

from __future__ import annotations

import logging

import numpy as np

from ..errors import BackendUnavailableError, IKError
from ..kinematics import fk as _fk
from ..kinematics import fk_frames as _fk_frames
from ..kinematics import jacobian as _jacobian
from ..kinematics.fk import check_result_memory
from ..model import MAX_BATCH, MAX_VALUE, Model, check_model
from ..model.chain import chain_table
from ..validate import check_flag, link_indices

__all__ = ["Kinematics", "fk", "fk_frames", "jacobian"]

_log = logging.getLogger("ros2_ik.api")
#: most joints (summed over the frames' paths) a compiled frames source is generated for
#: (about 2.3 kB of source each; g++'s time grows faster than the source)
MAX_JOINTS = 512
_F64 = np.dtype(np.float64)
#: largest batch the small-call extension answers (larger ones check the result's memory first)
SMALL_ROWS = 4096


class Kinematics:
    """Prepared FK / world Jacobians of ``frames`` (link names) of ``model``; ``backend`` is
    "host" (compiled) or "reference", fixed when built (``backend="auto"`` picks "host" where it
    covers the frames and a compiler is there; :attr:`reason` says why not)."""

    def __init__(self, model: Model, frames, backend: str = "auto"):
        self.model = model
        self.one = isinstance(frames, str)
        self.index = model.link_indices(frames)  # UnknownLinkError, InputTypeError
        self.frames = [frames] if self.one else list(frames)
        self._host = None
        self._fk1 = self._jac1 = None  # the small-call extension's calls, where it is there
        self.backend, self.reason = "reference", "asked for"
        self._building = ""  # the background build this waits for (see IKSolver.building)
        if backend == "auto":
            self.reason = self._why_not()
            if self.reason is None:
                try:
                    from ..backends.codegen import chain_of  # noqa: PLC0415
                    from ..backends.host import HostKinematics  # noqa: PLC0415

                    self._host = HostKinematics(model, chain_of(model, list(self.index)))
                    self.backend, self.reason = "host", ""
                    self._small_call()
                except BackendUnavailableError as exc:
                    self.reason = str(exc)
                    self._building = getattr(exc, "key", "")
                except RuntimeError as exc:
                    self.reason = f"the frames kernels could not be built: {exc}"
                    _log.warning("%s", self.reason)

    def _small_call(self):
        """The extension's call of the host kernels (:mod:`ros2_ik.backends.pycall`) for
        batches up to :data:`SMALL_ROWS`, where the extension is there."""
        from ..backends import pycall  # noqa: PLC0415 - the host backend only

        ext = pycall.module()
        if ext is None:
            return
        F = -1 if self.one else len(self.frames)
        nq, nva = self.model.nq, self.model.nv_active
        addr, call = self._host.address, ext.frames
        self._fk1 = lambda q, mv: call(addr, q, nq, len(self.frames), 4, 4, 0, mv, SMALL_ROWS)
        self._jac1 = lambda q: call(addr, q, nq, F, 6, nva, 1, MAX_VALUE, SMALL_ROWS)

    def _why_not(self) -> str | None:
        m = self.model
        if m.nq == 0:
            return "the model has no joint coordinates"
        c = chain_table(m, list(self.index))
        if c is None:
            return "a joint on a frame's path is not revolute, continuous, prismatic or fixed"
        if c.nc == 0:
            return "no joint moves these frames"
        if c.nj > MAX_JOINTS:
            return f"the frames' paths have more than {MAX_JOINTS} joints"
        return None

    def _q(self, q):
        """q as the compiled kernels take it (float64, C-contiguous, (B, nq)), or None."""
        if type(q) is not np.ndarray or q.dtype != _F64:
            return None
        nq = self.model.nq
        if q.ndim == 1:
            if q.shape[0] != nq:
                return None
            q = q[None]
        elif q.ndim != 2 or q.shape[1] != nq or not 0 < q.shape[0] <= MAX_BATCH:
            return None
        return q if q.flags.c_contiguous else np.ascontiguousarray(q)

    def fk(self, q, check: bool = True):
        """Poses (B, F, 4, 4) of the frames, in the base frame."""
        if check is not True and check is not False:
            check = check_flag(check, "check")
        if self._fk1 is not None:
            T = self._fk1(q, MAX_VALUE if check else -1.0)
            if T is not None:
                return T
        if self._host is not None:
            qc = self._q(q)
            if qc is not None:
                check_result_memory(qc.shape[0], len(self.frames) * 128, "fk_frames' result")
                T = self._host(qc, False, MAX_VALUE if check else -1.0)
                if T is not None:
                    return T
        return _fk_frames(self.model, q, self.frames)

    def jacobian(self, q):
        """World Jacobians (B, F, 6, nv_active), or (B, 6, nv_active) for one frame given as a
        str."""
        if self._jac1 is not None:
            J = self._jac1(q)
            if J is not None:
                return J
        if self._host is not None:
            qc = self._q(q)
            if qc is not None:
                check_result_memory(qc.shape[0], 48 * self.model.nv_active * len(self.frames),
                                    "the Jacobian")
                J = self._host(qc, True, MAX_VALUE)
                if J is not None:
                    return J[:, 0] if self.one else J
        return _jacobian(self.model, q, self.frames[0] if self.one else self.frames)


def _prepared(model: Model, frames) -> Kinematics:
    if isinstance(frames, str):
        key = frames
    elif isinstance(frames, (list, tuple)):
        key = ("frames",) + tuple(frames)
    else:
        return Kinematics(model, frames)
    try:
        return model.memo("api.kinematics", key, lambda: Kinematics(model, frames),
                          max_keys=1024, stale=_built_since)
    except TypeError:  # unhashable names: the checks raise their error
        return Kinematics(model, frames)


def _built_since(k: Kinematics) -> bool:
    """Whether ``k`` answers with the reference while its kernels are built in the background,
    and they are built now or this thread waits for builds (its compiled successor is due)."""
    if not k._building:
        return False
    from ..backends.host import building, in_background  # noqa: PLC0415

    return not building(k._building) or not in_background()


def fk(model: Model, q, *, check: bool = True):
    """Poses of every link in the base frame, (B, L, 4, 4) (see :func:`ros2_ik.kinematics.fk`).
    """
    check_model(model)
    if check is not True and check is not False:
        check = check_flag(check, "check")
    if type(q) is np.ndarray and q.dtype == _F64 and model.num_links <= MAX_JOINTS:
        return _prepared(model, tuple(model.link_names)).fk(q, check)
    return _fk(model, q, check=check)


def _kinematics(model: Model, frames, name: str) -> Kinematics:
    """The prepared :class:`Kinematics` of ``frames``; errors name the argument ``name``."""
    check_model(model)
    try:
        return _prepared(model, frames)
    except IKError:
        link_indices(model, frames, name)  # the same checks, naming the argument
        raise


def fk_frames(model: Model, q, frames):
    """Poses (B, F, 4, 4) of the named frames (links) in the base frame (see
    :func:`ros2_ik.kinematics.fk_frames`)."""
    return _kinematics(model, frames, "frames").fk(q)


def jacobian(model: Model, q, link, *, reference: str | None = None,
             expressed_in: str | None = None, method: str = "analytic"):
    """Geometric Jacobian of ``link`` (B, 6, nv_active), or (B, F, 6, nv_active) for a list of
    links (see :func:`ros2_ik.kinematics.jacobian` for the conventions and options)."""
    if reference is None and expressed_in in (None, "world") and method == "analytic":
        return _kinematics(model, link, "link").jacobian(q)
    check_model(model)
    return _jacobian(model, q, link, reference=reference, expressed_in=expressed_in,
                     method=method)
