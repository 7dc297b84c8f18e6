"""The collision term's compiled side joined to the LM rows and the selection
(:class:`CollisionEmitter`): the penalty of the pairs near enough added to the normal equations
as a block (``J^T J``, ``J^T r`` of every pair in the band, not stored as rows), a converged row
clear by the margin, and the answer checked by the exact distances in float64 (status
IN_COLLISION naming the pair). The device code is :mod:`.collision_kernels`, the data (the
packed scene) :mod:`.collision_scene`; the reference :mod:`ros2_ik.ik.collision`."""

from __future__ import annotations

from ..emit.chain import qvars, trig_exports
from ..emit.text import Emit
from .base import Emitter, Field, RowsContext
from .collision_kernels import emit_collision, emit_trig

__all__ = ["CollisionEmitter", "emit_state_checks", "states_source", "STATE_OUT"]


class CollisionEmitter(Emitter):
    """Self-collision and the world's obstacles kept ``collision_margin`` away; the data is one
    shared array, the packed scene (:func:`.collision_scene.pack_scene`: its ``_n`` the
    obstacle count)."""

    name = "collision"
    kind = "constraint"

    def fields(self) -> tuple:
        return (Field("scene", None),)

    def outputs(self) -> tuple:
        return ("clearance", "pair")

    def functions(self, e: Emit, check: bool) -> None:
        used, qv = qvars(self.ch)
        emit_collision(e, self.ch.coll, self.ch.nc, used, qv, check)

    # ------------------------------------------------------------------ the LM rows
    def lm_declare(self, e: Emit, c: RowsContext) -> None:
        nc = c.nc
        e("const double* R2IK_RESTRICT obs = dat->collision_scene;  // the packed scene")
        e("const long long n_obs = dat->collision_scene_n;")
        e("const S marg = S(opt->collision_margin), act = S(opt->collision_activation), "
          "wgt = S(opt->collision_weight);")
        e("const bool self_on = opt->self_collisions != 0;")
        e("// the collision rows' J^T J and J^T r where a row stands, at its trial, and the "
          "smallest distance")
        e(f"V Hc[{nc * nc}] = {{}}, gc[{nc}] = {{}}, Hc2[{nc * nc}] = {{}}, gc2[{nc}] = {{}};")
        e("V clr = V(S(0)), clr2 = V(S(0));")

    def lm_evaluate(self, e: Emit, c: RowsContext) -> str:
        ex = trig_exports(self.ch)
        emit_trig(e, self.ch.coll, c.V, lambda i: f"q{i}", "trg",
                  {key: (f"esn{j}", f"ecs{j}") for j, key in ex})
        return (f"r2ik_coll<{c.V}>({c.qargs}, obs, n_obs, self_on, V(marg), V(act), V(wgt), "
                "clr2, Hc2, gc2, trg)")

    def lm_take(self, e: Emit, c: RowsContext) -> None:
        nc = c.nc
        e(f"for (int i = 0; i < {nc * nc}; ++i) Hc[i] = r2ik_sel(acc, Hc2[i], Hc[i]);")
        e(f"for (int i = 0; i < {nc}; ++i) gc[i] = r2ik_sel(acc, gc2[i], gc[i]);")
        e("clr = r2ik_sel(acc, clr2, clr);")

    def lm_ok(self, c: RowsContext) -> list:
        return ["clr >= V(marg)"]  # and clear by the margin

    def lm_blocks(self) -> list:
        return [("gc", "Hc")]

    # ------------------------------------------------------------------ the selection
    def emit_verify(self, e: Emit, qargs: str) -> str:
        """In ``r2ik_select``: the answer's exact smallest distance and its pair (the
        reference's numbering); returns the condition that makes a converged answer fail."""
        e("double clr64 = INFINITY; long long which = -1;")
        e(f"r2ik_coll_min({qargs}, dat->collision_scene, dat->collision_scene_n, "
          "opt->self_collisions != 0, opt->collision_margin, opt->collision_activation, "
          "clr64, which);")
        e("f[R2IK_OUT_CLEARANCE] = clr64; f[R2IK_OUT_PAIR] = (double)which;")
        return "clr64 < opt->collision_margin"

    failed_status = "R2IK_STATUS_IN_COLLISION"

    def emit_unsolved(self, e: Emit) -> None:
        """In ``r2ik_select``, a problem not solved: its outputs."""
        e("f[R2IK_OUT_CLEARANCE] = r2ik_nan(); f[R2IK_OUT_PAIR] = -1;")

    # ------------------------------------------------------------------ its test kernel
    def kernels(self, e: Emit) -> None:
        """``r2ik_coll_terms``: per configuration, the collision terms the LM rows add (cost,
        the smallest distance, ``J^T J`` and ``J^T r`` over the columns ``colq``), for the tests
        that hold them against the reference (``ik/collision.py``), and the exact check's
        distance and pair."""
        ch = self.ch
        nq, nc = ch.model.nq, ch.nc
        used, _ = qvars(ch)
        W = 4 + nc * nc + nc
        e(f"""
// out (B, {W}): cost, smallest distance, exact check's distance, its pair, H ({nc}x{nc}), g""")
        args = ("long long B, const double* R2IK_RESTRICT q_all, const double* R2IK_RESTRICT obs, "
                "long long n_obs, const r2ik_options* R2IK_RESTRICT opt, "
                "double* R2IK_RESTRICT out")
        with e.kernel("r2ik_coll_terms", args):
            e("const long long b = R2IK_ROW;")
            e("if (b >= B) return;")
            e(f"const double* q = q_all + b * {nq};")
            e(f"S H[{nc * nc}], g[{nc}], clear;")
            emit_trig(e, ch.coll, "S", lambda i: f"S(q[{i}])", "trg", {})
            e(f"const S cost = r2ik_coll<S>({', '.join(f'S(q[{i}])' for i in used)}, obs, "
              "n_obs, opt->self_collisions != 0, S(opt->collision_margin), "
              "S(opt->collision_activation), S(opt->collision_weight), clear, H, g, trg);")
            e("double d64; long long which;")
            e(f"r2ik_coll_min({', '.join(f'q[{i}]' for i in used)}, obs, n_obs, "
              "opt->self_collisions != 0, opt->collision_margin, opt->collision_activation, "
              "d64, which);")
            e(f"double* o = out + b * {W};")
            e("o[0] = (double)cost; o[1] = (double)clear; o[2] = d64; o[3] = (double)which;")
            e(f"for (int i = 0; i < {nc * nc}; ++i) o[4 + i] = (double)H[i];")
            e(f"for (int i = 0; i < {nc}; ++i) o[{4 + nc * nc} + i] = (double)g[i];")


# ------------------------------------------------------------------ the state checks

#: numbers per configuration :func:`emit_state_checks`' kernel writes
STATE_OUT = 4


def emit_state_checks(e: Emit, cc, nq: int) -> None:
    """``r2ik_check_states``: the exact check of configurations (:func:`.collision_kernels.
    emit_exact`), one per row: ``out (B, 4)`` = the self pairs' smallest distance and its pair,
    the world's and its pair (the reference's numbering, :func:`ros2_ik.ik.collision.clearance`
    with ``reach``); ``q_all (B, nq)``, the packed scene ``obs`` (:func:`.collision_scene.
    pack_scene`) with ``n_obs`` obstacles."""
    used = list(cc.qi)
    e(f"""
// out (B, {STATE_OUT}): self pairs' smallest distance, its pair, the world's, its pair""")
    args = ("long long B, const double* R2IK_RESTRICT q_all, const double* R2IK_RESTRICT obs, "
            "long long n_obs, int self_on, double reach, double* R2IK_RESTRICT out")
    with e.kernel("r2ik_check_states", args):
        e("const long long b = R2IK_ROW;")
        e("if (b >= B) return;")
        e(f"const double* q = q_all + b * {nq};")
        e("double sc, wc; long long sw, ww;")
        qs = "".join(f"q[{i}], " for i in used)
        e(f"r2ik_coll_exact({qs}obs, n_obs, self_on != 0, reach, sc, sw, wc, ww);")
        e(f"double* o = out + b * {STATE_OUT};")
        e("o[0] = sc; o[1] = (double)sw; o[2] = wc; o[3] = (double)ww;")


def states_source(model, cc) -> str:
    """The host source of the state checks of ``model`` whose collision links move by the
    joints of ``cc`` (:func:`.collision_scene.collision_chain`): the collision device code and
    :func:`emit_state_checks`' kernel, rendered for g++ (``host_r2ik_check_states``). Only
    the kinematic structure is compiled: the spheres, pairs and world are the packed scene."""
    from ..emit.prelude import host_variant  # noqa: PLC0415
    from ..emit.prelude import DEVICE_PRELUDE, PRELUDE  # noqa: PLC0415
    from .collision_kernels import emit_exact  # noqa: PLC0415

    e = Emit()
    e(f"// ros2_ik generated state-check kernels: model {model.name!r}, {len(cc.nodes)} joints "
      "moving collision links, scalar double.")
    e(DEVICE_PRELUDE)
    e("typedef double S;")
    e(PRELUDE)
    used = list(cc.qi)
    emit_collision(e, cc, 1, used, lambda i: f"q{i}", check=False)
    emit_exact(e, cc, used, lambda i: f"q{i}")
    emit_state_checks(e, cc, model.nq)
    return host_variant(e.text())
