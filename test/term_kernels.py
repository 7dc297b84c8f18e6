"""The one generated source run by hand, for the terms' tests: the CUDA kernels rendered for
the host (one row a thread, float64: :func:`kernel_answers`) and the host driver in either
rendering of the LM rows (one row, or AVX2 lanes: :func:`driver_answers`). Each returns the
selection's output (P, nq + fields): q, then status, errors, iterations, seed, flags and the
terms' outputs."""

from __future__ import annotations

import ctypes

import numpy as np

from ros2_ik.backends import codegen, interface
from ros2_ik.backends import host as hostrun
from ros2_ik.backends.terms import emitters
from ros2_ik.ik.objectives import EvalContext
from ros2_ik.ik.seeds import movable_coordinates, restart_seeds


def _rnd(m, tips, cfg):
    K, nq = cfg.num_seeds, m.nq
    rnd = restart_seeds(m, K, cfg.rng_seed, movable_coordinates(m, tips))[0]
    return np.ascontiguousarray(rnd.reshape(-1, nq) if K > 1 else np.zeros((1, nq)))


def kernel_answers(m, tips, terms, data: dict, seeds, cfg, goal="pose") -> np.ndarray:
    """r2ik_prep, r2ik_lm and r2ik_select of the CUDA text, run on the CPU; ``data``: the
    terms' fields by their struct names (``pose_target`` (P, T*16), ``step_origin`` ...);
    ``goal`` the goal term's compiled name."""
    return kernel_rows(m, tips, terms, data, seeds, cfg, goal)[1]


def kernel_rows(m, tips, terms, data: dict, seeds, cfg, goal="pose"):
    """:func:`kernel_answers`, with the LM's rows before the selection: ((q (P K, nq), conv,
    iterations, position and orientation errors), the selection's output)."""
    ch = codegen.chain_of(m, tips, None, list(terms), goal=goal)
    mod = hostrun.compile_host(codegen.solve_source(ch, "float64", host=True))
    prep, lm, select = (mod.get_function(k) for k in ("r2ik_prep", "r2ik_lm", "r2ik_select"))
    P, K, nq = seeds.shape[0], cfg.num_seeds, m.nq
    ems = emitters(ch)
    dat = hostrun.TermData(ems, data, P).record.view(np.uint8)
    rnd = _rnd(m, tips, cfg)
    sd = np.ascontiguousarray(seeds, dtype=np.float64)
    active, flags, done = np.zeros(P, np.uint8), np.zeros(P, np.uint8), np.zeros(P, np.int32)
    opt = interface.options_record(cfg).view(np.uint8)
    prep(P, P, 0, dat, sd, nq, active, flags, done)
    N = P * K
    qo, conv, it = np.zeros((N, nq)), np.zeros(N, np.uint8), np.zeros(N, np.int32)
    pe, re, to = np.zeros(N), np.zeros(N), np.zeros(N, np.uint8)
    stop = np.zeros(1, np.int32)
    lm(N, P, K, sd, nq, rnd, 0, dat, active, opt, np.zeros(1, np.uint64), np.array([-1, 0]),
       stop, done, qo, conv, it, pe, re, to)
    out = np.zeros((P, nq + len(interface.out_fields(ems))))
    select(P, P, 0, K, qo, conv, it, pe, re, to, 0, flags, sd, nq, dat, opt, stop, out)
    return (qo, conv, it, pe, re), out


def driver_answers(m, tips, terms, data: dict, seeds, cfg, *, lanes: bool = True,
                   goal="pose") -> np.ndarray:
    """The host driver ``r2ik_solve_host`` of the host rendering, its LM rows one at a time
    (``lanes`` False) or 4 side by side in AVX2 lanes (where the CPU has them)."""
    ch = codegen.chain_of(m, tips, None, list(terms), goal=goal)
    src = codegen.solve_source(ch, "float64", host=True, **({} if lanes else {"lanes": 0}))
    fn = hostrun.compile_host(src).lib.r2ik_solve_host
    fn.argtypes = [ctypes.c_void_p]
    P, K, nq = seeds.shape[0], cfg.num_seeds, m.nq
    rnd = _rnd(m, tips, cfg)
    sd = np.ascontiguousarray(seeds, dtype=np.float64)
    opt = interface.options_record(cfg)
    ems = emitters(ch)
    out = np.zeros((P, nq + len(interface.out_fields(ems))))
    dat = hostrun.TermData(ems, data, P)
    stop = np.zeros(1, np.int32)
    rec = np.zeros(1, interface.SOLVE_DTYPE)
    for name, value in (("p_begin", 0), ("p_end", P), ("K", K), ("seeds", sd.ctypes.data),
                        ("seed_stride", nq), ("rnd", rnd.ctypes.data), ("data", dat.address),
                        ("opt", opt.ctypes.data), ("budget_ns", -1),
                        ("stop", stop.ctypes.data), ("out", out.ctypes.data)):
        rec[name] = value
    fn(rec.ctypes.data)
    return out


def fd_jacobian(m, obj, q, h: float):
    """A term's reference rows at ``q`` (P, nq), the seed held at ``q``: (r, J, J by central
    differences of each active coordinate with step ``h``), J (P, rows, active)."""
    pidx = np.arange(q.shape[0])
    r, J = obj.residual(EvalContext(m, q, q), pidx)
    Jfd = np.zeros_like(J)
    for k, col in enumerate(m.v_active):
        i = int(np.nonzero(m.q_to_v == col)[0][0])
        dq = np.zeros_like(q)
        dq[:, i] = h
        rp, _ = obj.residual(EvalContext(m, q + dq, q), pidx)
        rm, _ = obj.residual(EvalContext(m, q - dq, q), pidx)
        Jfd[:, :, k] = (rp - rm) / (2 * h)
    return r, J, Jfd
