"""Batched Jacobians: geometric (world / local), frame-to-frame, numerical, J-dot, pose gradient.

Conventions (shapes ``J (B, 6, n)``; rows ``[vx vy vz wx wy wz]``):

- Columns are the model's *active* velocity coordinates ``model.v_active`` (frozen joints are
  dropped, not zero-filled); mimic joints add into their leader's column, scaled by the multiplier.
- Reference point: the origin of the frame whose motion is described (``link``). The linear rows
  are the velocity of that origin, the angular rows the angular velocity of the frame.
- ``expressed_in``: ``"world"`` = the model's base frame axes (LOCAL_WORLD_ALIGNED in Pinocchio's
  terms), ``"local"`` = the axes of ``link`` itself, ``"reference"`` = the axes of ``reference``.
- Frame-to-frame (relative) Jacobian (Karana F2F): the motion of ``link`` (B) relative to
  ``reference`` (A), both of which may move, on any branches. With ``d = p_B - p_A``::

      v_rel = J_v,B - J_v,A + [d]x J_w,A        w_rel = J_w,B - J_w,A

  joints on A's side of the common ancestor enter with opposite polarity, joints above it cancel.
  This is exactly the time derivative of ``T_A^-1 T_B`` (position, and spatial angular velocity).
  The default expression for a relative Jacobian is ``"reference"`` (A's axes).
- ``jacobian_dot``: time derivative of the world-expressed Jacobian along ``qd``.
- ``pose_gradient``: derivative with respect to ``q`` (B, 6, nq_active) instead of ``qd``; it
  differs from the Jacobian where nq != nv (floating joints: 4 quaternion columns, angular rows
  ``w = 2 vec(dq * conj(q)) / |q|^2``).
"""

from __future__ import annotations

import numpy as np

from ..backend import const, get_xp
from ..errors import InvalidInputError, ShapeError
from .. import validate
from ..validate import as_float_array, check_memory, check_names, check_number, describe
from .fk import chunked_rows
from ..model import JointType, Model
from .fk import fk, integrate
from .se3 import pose_inverse, quat_conjugate, quat_multiply, skew, so3_log

__all__ = ["jacobian", "jacobians_all", "numerical_jacobian", "jacobian_dot", "pose_gradient",
           "q_active"]

_EXPRESS = ("world", "local", "reference")


def q_active(model: Model) -> np.ndarray:
    """Indices of q coordinates not frozen (columns of :func:`pose_gradient`)."""
    frozen_links = {model.joint_index(n) for n in model.frozen}
    return np.array([i for i in range(model.nq) if int(model.q_joint[i]) not in frozen_links],
                    dtype=np.int64)


def screws(model: Model, T):
    """World axes a (B, C, 3), points p (B, C, 3) of every contribution, for link poses T."""
    xp = get_xp(T)
    c = model.tables.screws
    cl = const(xp, c.link)
    parent = const(xp, c.parent)
    origin = model.xp_arrays(xp, T.dtype)["origin"][cl]            # (C, 4, 4)
    R_jf = T[:, parent, :3, :3] @ origin[None, :, :3, :3]           # joint frame (parent side)
    a = (R_jf @ const(xp, c.dir, T.dtype)[None, :, :, None])[..., 0]
    p = T[:, cl][..., :3, 3]                                            # child origin
    return a, p


def world_jacobians_from_screws(model: Model, T, a, p, frames):
    """Full-column (nv) world Jacobians (B, F, 6, nv) of link indices ``frames``."""
    xp = get_xp(T)
    c = model.tables.screws
    B, F = T.shape[0], len(frames)
    if a.shape[1] == 0:
        return xp.zeros((B, F, 6, model.nv), dtype=T.dtype)
    key = tuple(int(f) for f in frames)
    fr, sup = model.memo("kinematics.jacobian.support", key, lambda: (
        np.array(key, dtype=np.int64), _support(model, key)), max_keys=1024)  # (F,), (F, C)
    fi = const(xp, fr)
    pf = T[:, fi][..., :3, 3]                                           # (B, F, 3)
    S = const(xp, sup, T.dtype)                                         # (F, C)
    rot = const(xp, c.rot)[None, None, :, None]
    aa = xp.broadcast_to(a[:, None], (B, F) + a.shape[1:])
    lin = xp.where(rot, xp.cross(aa, pf[:, :, None] - p[:, None]), aa)      # (B, F, C, 3)
    ang = xp.where(rot, aa, 0.0)
    contrib = xp.concatenate([lin, ang], axis=-1) * S[None, :, :, None]    # (B, F, C, 6)
    return _to_columns(model, xp.swapaxes(contrib, -1, -2))               # (B, F, 6, nv)


def _support(model: Model, frames) -> np.ndarray:
    """(F, C) bool: contribution c moves frame f (its joint is on f's path from the base)."""
    link = model.tables.screws.link
    out = np.zeros((len(frames), link.shape[0]), dtype=bool)
    for i, f in enumerate(frames):
        out[i] = np.isin(link, model.ancestors(int(f)))
    return out


def _to_columns(model: Model, contrib):
    """Contributions (..., C) added into their velocity columns (..., nv), times their factor
    (a mimic joint adds into its leader's column). Most columns take one contribution: those
    are written at once, the few shared ones (mimic joints) added after."""
    xp = get_xp(contrib)
    c = model.tables.screws
    first, cols, rest = model.memo("kinematics.jacobian.columns", "first and the rest",
                                   lambda: _column_split(c.col))
    w = contrib * const(xp, c.factor, contrib.dtype)
    out = xp.zeros(contrib.shape[:-1] + (model.nv,), dtype=contrib.dtype)
    out[..., const(xp, cols)] = w[..., const(xp, first)]
    for i in rest:
        out[..., int(c.col[i])] += w[..., int(i)]
    return out


def _column_split(col: np.ndarray):
    """(the first contribution of each column, those columns, the other contributions):
    indices into ``col`` (kept with the model: uploaded once to a device)."""
    _, first = np.unique(col, return_index=True)
    rest = np.setdiff1d(np.arange(col.shape[0]), first)
    out = (first.astype(np.int64), col[first].astype(np.int64), rest.astype(np.int64))
    for a in out:
        a.setflags(write=False)
    return out


def _express(J, R):
    """Rotate both 3-row blocks of J (..., 6, n) by R^T (..., 3, 3)."""
    xp = get_xp(J)
    Rt = xp.swapaxes(R, -1, -2)
    return xp.concatenate([Rt @ J[..., :3, :], Rt @ J[..., 3:, :]], axis=-2)


def _check_express(expressed_in, reference, model=None, link=None):
    """``expressed_in`` one of :data:`_EXPRESS`; with ``model``, ``link`` and ``reference``
    links of it (errors naming the argument)."""
    if not isinstance(expressed_in, str) or expressed_in not in _EXPRESS:
        raise InvalidInputError(f"expressed_in must be one of {_EXPRESS}, got "
                                f"{describe(expressed_in)}")
    if model is not None:
        validate.link_index(model, link, "link")
        if reference is not None:
            validate.link_index(model, reference, "reference")


def _relative(model, T, Jfull, ia, ib, expressed_in):
    """Relative Jacobian of link ib w.r.t. link ia, given their world Jacobians."""
    xp = get_xp(T)
    JA, JB = Jfull[:, 0], Jfull[:, 1]
    d = T[:, ib, :3, 3] - T[:, ia, :3, 3]
    Jv = JB[:, :3] - JA[:, :3] + skew(d) @ JA[:, 3:]
    Jw = JB[:, 3:] - JA[:, 3:]
    J = xp.concatenate([Jv, Jw], axis=1)
    if expressed_in == "world":
        return J
    R = T[:, ib, :3, :3] if expressed_in == "local" else T[:, ia, :3, :3]
    return _express(J, R)


def _relative_full(model, q, link, reference, expressed_in):
    """Checked q and the all-columns (nv) Jacobian of ``link`` relative to ``reference``."""
    q = model.check_q(q)
    ib = model.link_index(link)
    ia = 0 if reference is None else model.link_index(reference)
    T = fk(model, q, check=False)
    a, p = screws(model, T)
    Jfull = world_jacobians_from_screws(model, T, a, p, [ia, ib])
    return q, _relative(model, T, Jfull, ia, ib, expressed_in)


def jacobian(model: Model, q, link: str, *, reference: str | None = None,
             expressed_in: str | None = None, method: str = "analytic"):
    """Geometric Jacobian of ``link`` (B, 6, nv_active); see the module docstring.

    Args:
        q: (B, nq) or (nq,).
        link: frame whose motion is described (reference point: its origin); a list of frames
            gives (B, F, 6, nv_active), one Jacobian per frame, as :func:`fk_frames`.
        reference: None (the base frame) or another link for the frame-to-frame Jacobian.
        expressed_in: "world" (default without reference), "local", or "reference" (default
            with a reference).
        method: "analytic" or "numerical" (central differences, see :func:`numerical_jacobian`).
    """
    if not isinstance(link, str):  # a list of frames, as fk_frames: (B, F, 6, nv_active)
        names = check_names(link, "link")
        q = model.check_q(q)
        parts = [jacobian(model, q, n, reference=reference, expressed_in=expressed_in,
                          method=method) for n in names]
        return get_xp(q).stack(parts, axis=1)
    if expressed_in is None:
        expressed_in = "world" if reference is None else "reference"
    _check_express(expressed_in, reference, model, link)
    if method == "numerical":
        return numerical_jacobian(model, q, link, reference=reference, expressed_in=expressed_in)
    if method != "analytic":
        raise InvalidInputError(f"method must be 'analytic' or 'numerical', got {method!r}")
    q = model.check_q(q)
    va = get_xp(q).asarray(model.v_active)

    def one(qq):
        return _relative_full(model, qq, link, reference, expressed_in)[1][:, :, va]

    L = model.num_links
    return chunked_rows(q, one, L * (128 * 3 + 96) + 2 * 48 * model.nv, 48 * model.nv_active,
                        "the Jacobian")


def jacobians_all(model: Model, q, frames=None):
    """World Jacobians of several frames at once: (B, F, 6, nv_active) and the poses (B, L, 4, 4).

    ``frames``: link names (default: the model's tips).
    """
    q = model.check_q(q)
    xp = get_xp(q)
    frames = model.tips if frames is None else frames
    idx = model.link_indices(frames)
    B = q.shape[0] if q.ndim == 2 else 1
    # every link's pose and screw (kept for the result), and the Jacobians: refused up front
    # when over the memory budget, as fk's link poses are
    check_memory(B * (model.num_links * (128 * 3 + 48) + len(idx) * 48 * model.nv * 2),
                 "jacobians_all's link poses and Jacobians",
                 f"{B} x {model.num_links} poses, {len(idx)} Jacobians each",
                 "use jacobian for the frames you need, or split q into smaller batches")
    T = fk(model, q, check=False)
    a, p = screws(model, T)
    J = world_jacobians_from_screws(model, T, a, p, list(idx))
    return J[..., xp.asarray(model.v_active)], T


def numerical_jacobian(model: Model, q, link: str, *, reference: str | None = None,
                       expressed_in: str | None = None, wrt: str = "v", eps: float = 1e-6):
    """Jacobian by central differences (same conventions and columns as :func:`jacobian`).

    ``wrt="v"``: perturb along velocity coordinates (q (+) +-eps e_k), giving the Jacobian;
    ``wrt="q"``: perturb the coordinates of q directly, giving the pose gradient.
    Linear rows: ``(p(+) - p(-)) / 2 eps``; angular rows: ``log(R(+) R(-)^T) / 2 eps``.
    """
    if expressed_in is None:
        expressed_in = "world" if reference is None else "reference"
    _check_express(expressed_in, reference, model, link)
    check_number(eps, "eps", low=0.0, low_open=True, high=1.0)
    if wrt not in ("v", "q"):
        raise InvalidInputError(f"wrt must be 'v' or 'q', got {wrt!r}")
    q = model.check_q(q)
    n = model.nv_active if wrt == "v" else len(q_active(model))
    return chunked_rows(
        q, lambda qq: _numerical(model, qq, link, reference, expressed_in, wrt, eps),
        (2 * n + 1) * model.num_links * 128 * 3, 48 * max(n, 1), "the numerical Jacobian")


def _numerical(model, q, link, reference, expressed_in, wrt, eps):
    xp = get_xp(q)
    ib = model.link_index(link)
    ia = 0 if reference is None else model.link_index(reference)
    B = q.shape[0]
    cols = model.v_active if wrt == "v" else q_active(model)
    if wrt not in ("v", "q"):
        raise InvalidInputError(f"wrt must be 'v' or 'q', got {wrt!r}")
    n = len(cols)
    width = model.nv if wrt == "v" else model.nq
    steps = xp.zeros((2 * n, width), dtype=q.dtype)
    for k, c in enumerate(cols):
        steps[2 * k, c] = eps
        steps[2 * k + 1, c] = -eps
    qq = xp.repeat(q, 2 * n, axis=0)
    st = xp.tile(steps, (B, 1))
    qp = integrate(model, qq, st) if wrt == "v" else qq + st
    T = fk(model, qp, check=False)
    Trel = pose_inverse(T[:, ia]) @ T[:, ib]                                   # pose of B in A
    Trel = Trel.reshape(B, n, 2, 4, 4)
    dp = (Trel[:, :, 0, :3, 3] - Trel[:, :, 1, :3, 3]) / (2 * eps)     # (B, n, 3) in A
    Rp, Rm = Trel[:, :, 0, :3, :3], Trel[:, :, 1, :3, :3]
    w = so3_log(Rp @ xp.swapaxes(Rm, -1, -2)) / (2 * eps)              # spatial, in A
    J = xp.swapaxes(xp.concatenate([dp, w], axis=-1), -1, -2)          # (B, 6, n)
    if expressed_in == "reference":
        return J
    T0 = fk(model, q, check=False)
    if expressed_in == "world":
        R = xp.swapaxes(T0[:, ia, :3, :3], -1, -2)                     # express A -> world
        return _express(J, R)
    Rrel = xp.swapaxes(T0[:, ia, :3, :3], -1, -2) @ T0[:, ib, :3, :3]
    return _express(J, Rrel)


def jacobian_dot(model: Model, q, qd, link: str):
    """Time derivative of the world Jacobian of ``link`` along ``qd``: (B, 6, nv_active).

    ``qd``: (B, nv_active) or (nv_active,), velocities of the active coordinates.
    Column rule (a = world axis fixed in the joint's parent frame, p_c its point, moving with
    the parent's angular velocity w_par and the child origin velocity v_c):
    revolute-like: ``[ (w_par x a) x (p - p_c) + a x (v_p - v_c) ; w_par x a ]``;
    prismatic-like: ``[ w_par x a ; 0 ]``.
    """
    q = model.check_q(q)
    xp = get_xp(q)
    qd = as_float_array(qd, "qd", f"shape (B, {model.nv_active})", xp).astype(q.dtype)
    if qd.ndim == 1:
        qd = qd[None]
    if qd.shape != (q.shape[0], model.nv_active):
        raise ShapeError(f"qd must have shape ({q.shape[0]}, {model.nv_active}), got {qd.shape}")
    if not bool(xp.all(xp.isfinite(qd))):
        raise InvalidInputError("qd contains NaN or infinity")
    B = q.shape[0]
    v = xp.zeros((B, model.nv), dtype=q.dtype)
    v[:, xp.asarray(model.v_active)] = qd
    f = model.link_index(link)
    T = fk(model, q, check=False)
    a, p = screws(model, T)
    L = model.num_links
    Jl = world_jacobians_from_screws(model, T, a, p, list(range(L)))      # (B, L, 6, nv)
    V = (Jl @ v[:, None, :, None])[..., 0]                           # (B, L, 6) link twists
    c = model.tables.screws
    cl = c.link
    w_par = V[:, xp.asarray(model.link_parent[cl]), 3:]              # (B, C, 3)
    v_c = V[:, xp.asarray(cl), :3]
    adot = xp.cross(w_par, a)
    pf = T[:, f, :3, 3][:, None]
    vf = V[:, f, :3][:, None]
    rot = xp.asarray(c.rot)[None, :, None]
    lin = xp.where(rot, xp.cross(adot, pf - p) + xp.cross(a, vf - v_c), adot)
    ang = xp.where(rot, adot, 0.0)
    S = xp.asarray(_support(model, [f])[0], dtype=q.dtype)[None, :, None]
    contrib = xp.concatenate([lin, ang], axis=-1) * S                # (B, C, 6)
    Jd = _to_columns(model, xp.swapaxes(contrib, -1, -2))
    return Jd[:, :, xp.asarray(model.v_active)]


def pose_gradient(model: Model, q, link: str, *, reference: str | None = None,
                  expressed_in: str | None = None):
    """Derivative of the pose of ``link`` with respect to q: (B, 6, nq_active).

    Same rows and frame conventions as :func:`jacobian`; columns are the non-frozen q
    coordinates (:func:`q_active`). Equals the Jacobian where nq == nv.
    """
    if expressed_in is None:
        expressed_in = "world" if reference is None else "reference"
    _check_express(expressed_in, reference)
    q, J = _relative_full(model, q, link, reference, expressed_in)      # (B, 6, nv)
    xp = get_xp(q)
    B = q.shape[0]
    E = xp.zeros((B, model.nv, model.nq), dtype=q.dtype)               # qd = E(q) dq
    qv = model.q_to_v
    for i in range(model.nq):
        if qv[i] >= 0:
            E[:, int(qv[i]), i] = 1.0
    for l in range(1, model.num_links):
        if model.joint_type[l] != JointType.FLOATING or model.q_start[l] < 0:
            continue
        s, vs = int(model.q_start[l]), int(model.v_start[l])
        quat = q[:, s + 3:s + 7]
        n2 = xp.sum(quat * quat, axis=-1)[:, None]
        conj = quat_conjugate(quat)
        for k in range(4):
            e = xp.zeros_like(quat)
            e[:, k] = 1.0
            E[:, vs + 3:vs + 6, s + 3 + k] = 2.0 * quat_multiply(e, conj)[:, :3] / n2
    G = J @ E
    return G[:, :, xp.asarray(q_active(model))]
