"""The compiled (Numba) FK and Jacobian against the NumPy reference, on every bundled robot
(branched, mimic, floating, planar, frozen joints), and the checks of the public calls."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ROBOT_NAMES
from ros2_ik.errors import InputTypeError, InvalidInputError, ShapeError, UnknownLinkError
from ros2_ik.kinematics import compiled, fk, fk_frames, jacobian, native

pytestmark = pytest.mark.skipif(not compiled.available(), reason="Numba is not installed")


@pytest.fixture(scope="module", autouse=True)
def kernels():
    compiled.ensure_compiled()
    assert compiled.ready()


@pytest.fixture
def reference(monkeypatch):
    """Calls with the compiled path switched off (the NumPy reference answers)."""
    def call(fn, *args, **kw):
        with compiled.off():
            return fn(*args, **kw)
    return call


@pytest.fixture
def spy(monkeypatch):
    """Counts the calls that reach the kernels: through the general path ("link_poses",
    "jacobians") or the short one ("small": :func:`compiled.small_call` answered)."""
    seen = []
    for name in ("link_poses", "jacobians"):
        orig = getattr(compiled, name)
        monkeypatch.setattr(compiled, name, lambda *a, _o=orig, _n=name, **k:
                            seen.append(_n) or _o(*a, **k))
    small = compiled.small_call

    def counted(*a, **k):
        out = small(*a, **k)
        if out is not None:
            seen.append("small")
        return out
    monkeypatch.setattr(compiled, "small_call", counted)
    return seen


def _variants(models):
    out = dict(models)
    out["misc_locked"] = models["misc"].lock(["elbow_joint"])
    out["panda_locked"] = models["panda"].lock(["panda_joint3"])
    return out


def _q(m, rng, n):
    q = m.random_q(rng, n)
    q[: n // 2] *= 1.7  # also outside the limits and past +-pi: FK does not care
    return q


@pytest.mark.parametrize("name", ROBOT_NAMES + ("misc_locked", "panda_locked"))
@pytest.mark.parametrize("B", [1, 7, compiled.PARALLEL_MIN + 5])
def test_fk_equals_reference(models, rng, reference, spy, name, B):
    m = _variants(models)[name]
    q = _q(m, rng, B)
    ref = reference(fk, m, q)
    got = fk(m, q)
    assert spy in (["link_poses"], ["small"])  # the short path once the selection is made
    assert spy == ["link_poses"] or B < compiled.PARALLEL_MIN
    assert got.shape == ref.shape == (B, m.num_links, 4, 4)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    frames = list(m.link_names[::-1][:4])
    np.testing.assert_allclose(fk_frames(m, q, frames), reference(fk_frames, m, q, frames),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(fk(m, q[0]), ref[:1], rtol=0, atol=1e-12)  # a (nq,) vector


@pytest.mark.parametrize("name", ROBOT_NAMES + ("misc_locked", "panda_locked"))
@pytest.mark.parametrize("expressed_in", [None, "world", "local", "reference"])
@pytest.mark.parametrize("B", [1, compiled.PARALLEL_MIN + 3])
def test_jacobian_equals_reference(models, rng, reference, spy, name, expressed_in, B):
    m = _variants(models)[name]
    q = _q(m, rng, B)
    links = list(m.link_names[1:])
    r = np.random.default_rng(len(links))
    for link, ref_link in [(links[-1], None), (links[0], None)] + [
            (links[i], links[j]) for i, j in r.integers(0, len(links), (3, 2))]:
        kw = dict(reference=ref_link, expressed_in=expressed_in)
        got = jacobian(m, q, link, **kw)
        want = reference(jacobian, m, q, link, **kw)
        assert got.shape == want.shape == (B, 6, m.nv_active)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    got = jacobian(m, q, links[-3:], expressed_in=expressed_in)  # a list of frames
    np.testing.assert_allclose(got, reference(jacobian, m, q, links[-3:],
                                              expressed_in=expressed_in), rtol=0, atol=1e-12)
    assert spy and set(spy) <= {"jacobians", "small"}
    assert "small" not in spy or B < compiled.PARALLEL_MIN


def test_float32_keeps_the_reference(models, rng, spy):
    m = models["panda"]
    q = m.random_q(rng, 3)
    assert fk(m, q.astype(np.float32)).dtype == np.float32
    assert jacobian(m, q.astype(np.float32), "panda_link8").dtype == np.float32
    assert spy == []
    fk(m, q.astype(np.int64))  # promoted to float64: compiled
    assert spy == ["link_poses"]


@pytest.mark.parametrize("call", ["fk", "fk_frames", "jacobian"])
def test_bad_input_gets_the_reference_errors(models, reference, call):
    m = models["misc"]
    fns = {"fk": lambda q: fk(m, q), "fk_frames": lambda q: fk_frames(m, q, ["tool"]),
           "jacobian": lambda q: jacobian(m, q, "tool")}
    fn = fns[call]
    good = m.neutral_q()
    floating = [i for i, n in enumerate(m.q_names) if n.endswith("/qw")][0] - 3
    cases = []
    for bad in (np.nan, np.inf, 2e6):
        q = good.copy()
        q[2] = bad
        cases.append(q)
    q = good.copy()
    q[floating:floating + 4] = 0.0  # a zero quaternion
    cases += [q, np.zeros((0, m.nq)), np.zeros((2, m.nq + 1)), "q", None, [[1.0], [1.0, 2.0]]]
    for q in cases:
        with pytest.raises((InvalidInputError, ShapeError, InputTypeError)) as fast:
            fn(q)
        with pytest.raises(type(fast.value)) as ref:
            reference(fn, q)
        assert str(fast.value) == str(ref.value)
    with pytest.raises(UnknownLinkError, match="valid"):
        jacobian(m, good, "nope")
    with pytest.raises(InvalidInputError, match="expressed_in"):
        jacobian(m, good, "tool", expressed_in="base")


def test_ensure_compiled_makes_ready(monkeypatch):
    monkeypatch.setattr(compiled, "_ready", False)
    monkeypatch.setattr(compiled, "_looked", True)
    assert not compiled.ready()
    compiled.ensure_compiled()
    assert compiled.ready()


def test_read_only_q_uses_the_loaded_kernels(models, rng):
    """A read-only q (a message buffer) gives the same answer without a new compilation of the
    kernels for read-only arrays (seconds, inside a node's request)."""
    compiled.ensure_compiled()
    m = models["panda"]
    q = m.random_q(rng, 3)
    want_T = fk_frames(m, q, ["panda_link8"])
    want_J = jacobian(m, q, "panda_link8")
    kernels = [f for f in vars(compiled._kernels).values() if hasattr(f, "signatures")]
    before = {id(f): len(f.signatures) for f in kernels}
    ro = np.frombuffer(q.tobytes()).reshape(q.shape)
    assert not ro.flags.writeable
    np.testing.assert_array_equal(fk_frames(m, ro, ["panda_link8"]), want_T)
    np.testing.assert_array_equal(jacobian(m, ro, "panda_link8"), want_J)
    np.testing.assert_array_equal(fk_frames(m, ro[0], ["panda_link8"])[0], want_T[0])
    assert {id(f): len(f.signatures) for f in kernels} == before


@pytest.mark.parametrize("name", ["panda", "misc", "dual_arm"])
def test_small_calls_take_the_short_path_and_answer_alike(models, rng, reference, spy, name):
    """A control loop's calls (one configuration or a few, frames named before) skip the
    general path's Python (:func:`compiled.small_call`) and give the same answers; layouts the
    kernels do not take as they are (a strided view, read-only, float32) and bad values still
    go the general way, with its answers and errors."""
    m = models[name]
    tip = m.tips[0]
    frames = [tip, m.link_names[1]]
    q = m.random_q(rng, 5)
    for sel in (frames, tip):  # the selections, made once by the general path
        fk_frames(m, q, sel), jacobian(m, q, sel)
    spy.clear()
    for qq in (q[0], q[:1], q, np.ascontiguousarray(q[::2])):
        for args in ((fk_frames, frames), (fk_frames, tip), (jacobian, tip),
                     (jacobian, frames)):
            fn, sel = args
            got, want = fn(m, qq, sel), reference(fn, m, qq, sel)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert set(spy) == {"small"}  # every one of them took the short path
    a = fk_frames(m, q[0], frames)
    b = fk_frames(m, q[1], frames)
    assert not np.shares_memory(a, b)  # each call's answer is its own array
    spy.clear()
    for qq in (np.asfortranarray(q), np.frombuffer(q.tobytes()).reshape(q.shape)):
        assert not (qq.flags.c_contiguous and qq.flags.writeable)
        np.testing.assert_allclose(fk_frames(m, qq, frames), reference(fk_frames, m, q, frames),
                                   rtol=0, atol=1e-12)
    # a read-only q (a message's buffer) is taken as it is by the C call path only
    assert spy == ["link_poses", "small" if native.module() else "link_poses"]
    assert fk_frames(m, q.astype(np.float32), frames).dtype == np.float32
    bad = q[0].copy()
    bad[0] = np.nan
    with pytest.raises(InvalidInputError) as fast:
        fk_frames(m, bad, frames)
    with pytest.raises(InvalidInputError) as ref:
        reference(fk_frames, m, bad, frames)
    assert str(fast.value) == str(ref.value)
    with pytest.raises(UnknownLinkError):
        fk_frames(m, q[0], [tip, "nope"])
    for fn in (fk_frames, jacobian):  # names that are no names: the reference's error
        with pytest.raises((InputTypeError, InvalidInputError)) as fast:
            fn(m, q[0], [[tip]])
        with pytest.raises(type(fast.value)) as ref:
            reference(fn, m, q[0], [[tip]])
        assert str(fast.value) == str(ref.value)
