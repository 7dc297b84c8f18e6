"""The C call path of fk / fk_frames / jacobian (ros2_ik.kinematics.native): the same numbers
as the Numba call path bit for bit, every other input to the general path with its errors, safe
from several threads, and a machine without a C compiler still answers."""

from __future__ import annotations

import importlib.util
import pickle
import sys
import threading

import numpy as np
import pytest

from conftest import ROBOT_NAMES
from ros2_ik import load_robot
from ros2_ik.errors import InvalidInputError, ShapeError
from ros2_ik.kinematics import compiled, fk, fk_frames, jacobian, native

pytestmark = pytest.mark.skipif(not compiled.available(), reason="Numba is not installed")


@pytest.fixture(scope="module", autouse=True)
def loaded():
    compiled.ensure_compiled()
    if native.module(wait=True) is None:
        pytest.skip(f"no C call path here: {native.status()}")


@pytest.fixture
def taken(monkeypatch):
    """How many calls the C call path answered (not None)."""
    seen = []
    call = native.module().call

    def counted(rec, q):
        out = call(rec, q)
        seen.append(out is not None)
        return out
    monkeypatch.setattr(compiled, "_native_call", counted)
    return seen


def _general(q):
    """q as the general path takes it (a strided copy: neither short path takes it), with the
    same values."""
    q = np.asarray(q)
    wide = np.repeat(q[..., None], 2, axis=-1)
    return wide[..., 0]


def _variants(models):
    out = dict(models)
    out["panda_locked"] = models["panda"].lock(["panda_joint3"])
    return out


@pytest.mark.parametrize("name", ROBOT_NAMES + ("panda_locked",))
def test_the_c_call_path_answers_bit_for_bit_as_the_numba_kernels(models, rng, taken, name):
    m = _variants(models)[name]
    links = list(m.link_names[1:])
    frames = [links[-1], links[0], links[len(links) // 2]]
    Q = m.random_q(rng, 40)
    Q[:20] *= 1.7
    calls = [lambda q: fk_frames(m, q, frames), lambda q: fk_frames(m, q, tuple(frames)),
             lambda q: fk_frames(m, q, links[-1]), lambda q: fk(m, q),
             lambda q: jacobian(m, q, links[-1]), lambda q: jacobian(m, q, frames)]
    for call in calls:  # the first call with these names makes the selection (general
        call(Q[:2])     # path), the second the C call path's record
        call(Q[:2])
    taken.clear()
    for q in (Q[0], Q[:1], Q[:7], Q):
        for call in calls:
            got = call(q)
            assert taken.pop() is True
            want = call(_general(q))
            assert taken.pop() is False  # refused in C: the general path's kernels answered
            assert got.shape == want.shape and got.dtype == np.float64
            np.testing.assert_array_equal(got, want)
    with compiled.off():
        np.testing.assert_allclose(fk_frames(m, Q, frames), calls[0](Q), rtol=0, atol=1e-12)


def test_other_inputs_take_the_general_path_with_its_answers_and_errors(models, rng, taken):
    m = models["misc"]  # a floating joint: a zero quaternion is refused
    tip = "tool"
    q = m.random_q(rng, 3)
    for _ in range(2):  # the selections, then the C call path's records
        fk_frames(m, q, [tip]), jacobian(m, q, tip)
    qw = [i for i, n in enumerate(m.q_names) if n.endswith("/qw")][0]
    bad = []
    for v in (np.nan, np.inf, -2e6):
        b = q[0].copy()
        b[2] = v
        bad.append(b)
    zero = q[0].copy()
    zero[qw - 3:qw + 1] = 0.0
    bad.append(zero)
    for call in (lambda x: fk_frames(m, x, [tip]), lambda x: jacobian(m, x, tip)):
        for b in bad:
            taken.clear()
            with pytest.raises(InvalidInputError) as fast:
                call(b)
            assert taken == [False]  # refused in C, then the reference's error
            with compiled.off(), pytest.raises(InvalidInputError) as ref:
                call(b)
            assert str(fast.value) == str(ref.value)
        for wrong in (np.zeros(m.nq + 1), np.zeros((2, m.nq - 1)), np.zeros((1, 1, m.nq))):
            with pytest.raises(ShapeError):
                call(wrong)
        with pytest.raises(InvalidInputError, match="empty batch"):
            call(np.zeros((0, m.nq)))
        big = np.tile(q[:1], (compiled.PARALLEL_MIN + 1, 1))
        np.testing.assert_array_equal(call(big)[-1], call(q[0])[0])  # the parallel kernels
        assert call(q.astype(np.float32)).dtype == np.float32  # the reference keeps float32
        np.testing.assert_allclose(call(q.tolist()), call(q), rtol=0, atol=0)
        np.testing.assert_array_equal(call(np.frombuffer(q.tobytes()).reshape(q.shape)), call(q))


def test_read_only_q_alone_takes_the_c_call_path(rng, taken):
    """A node's calls: q is always a message's read-only buffer (Numba's short path never
    takes it), from the second call with the same names on."""
    m = load_robot("panda")
    q = np.frombuffer(m.random_q(rng, 1)[0].tobytes())
    assert not q.flags.writeable
    first = fk_frames(m, q, ["panda_link8"])
    assert taken == []
    np.testing.assert_array_equal(fk_frames(m, q, ["panda_link8"]), first)
    assert taken == [True]


def test_the_extension_checks_its_own_arguments():
    mod = native.module()
    m = load_robot("panda")
    q = m.neutral_q()
    fk_frames(m, q, ["panda_link8"]), fk_frames(m, q, ["panda_link8"])
    rec = m.memo_peek(compiled._NATIVE[False], ("panda_link8",))
    assert rec is not None
    with pytest.raises(TypeError):
        mod.call(rec)
    with pytest.raises((TypeError, ValueError)):
        mod.call("not a record", q)
    assert mod.call(rec, q.tolist()) is None  # not an array: the general path's
    assert mod.call(rec, q.astype(np.float32)) is None
    assert mod.call(rec, q.astype(">f8")) is None  # byte-swapped
    idata = np.zeros(16, dtype=np.int64)
    fdata = np.zeros(16)
    with pytest.raises(TypeError, match="int64"):
        mod.make(mod.addresses[0], fdata, fdata, 7, 1.0, (1, 4, 4), 10, 100, 16)
    with pytest.raises(ValueError):
        mod.make(0, idata, fdata, 7, 1.0, (1, 4, 4), 10, 100, 16)
    with pytest.raises(ValueError):
        mod.make(mod.addresses[0], idata, fdata, 7, 1.0, (1, 0, 4), 10, 100, 16)
    # references: a call keeps none of its own, a record keeps its arrays
    before = sys.getrefcount(q), sys.getrefcount(rec)
    for _ in range(1000):
        mod.call(rec, q)
    assert (sys.getrefcount(q), sys.getrefcount(rec)) == before
    r2 = mod.make(mod.addresses[0], idata, fdata, 7, 1.0, (1, 4, 4), 10, 100, 16)
    assert sys.getrefcount(idata) == 3  # idata, the argument, the record
    del r2
    assert sys.getrefcount(idata) == 2


def test_several_threads_get_their_own_answers(models, rng):
    m = models["panda"]
    tip = "panda_link8"
    Q = m.random_q(rng, 64)
    want_T = fk_frames(m, Q, [tip])
    want_J = jacobian(m, Q, tip)
    for q in (Q[0], Q):
        fk_frames(m, q, [tip]), jacobian(m, q, tip)
    bad = []

    def work(k):
        for i in range(300):
            r = (i + k) % 64
            if i % 2:  # 64 rows: the kernel runs without the GIL
                ok = (np.array_equal(fk_frames(m, Q, [tip]), want_T)
                      and np.array_equal(jacobian(m, Q, tip), want_J))
            else:
                ok = (np.array_equal(fk_frames(m, Q[r], [tip])[0], want_T[r])
                      and np.array_equal(jacobian(m, Q[r], tip)[0], want_J[r]))
            if not ok:
                bad.append((k, i))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert bad == []


def test_a_model_with_records_pickles_without_them(models, rng):
    m = load_robot("ur")
    tip = m.tips[0]
    q = m.random_q(rng, 2)
    fk_frames(m, q, [tip]), fk_frames(m, q, [tip])
    assert m.memo_peek(compiled._NATIVE[False], (tip,)) is not None
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.memo_peek(compiled._NATIVE[False], (tip,)) is None
    np.testing.assert_array_equal(fk_frames(m2, q, [tip]), fk_frames(m, q, [tip]))


def test_without_a_compiler_the_numba_path_answers(monkeypatch, tmp_path, rng):
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_failed", None)
    monkeypatch.setattr(native, "_thread", None)
    monkeypatch.setenv("ROS2_IK_KERNEL_CACHE", str(tmp_path))  # nothing built there
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert native.module(wait=True) is None
    assert "no-such-cc" in native.status()
    m = load_robot("panda")
    q = m.random_q(rng, 3)
    with compiled.off():
        want = fk_frames(m, q, ["panda_link8"])
    for _ in range(3):
        np.testing.assert_allclose(fk_frames(m, q, ["panda_link8"]), want, rtol=0, atol=1e-12)
    assert m.memo_peek(compiled._NATIVE[False], ("panda_link8",)) is None


def test_switched_off_it_is_not_built(monkeypatch):
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_failed", None)
    monkeypatch.setattr(native, "_thread", None)
    monkeypatch.setenv("ROS2_IK_NATIVE", "0")
    assert native.module() is None and native.module(wait=True) is None
    assert native._thread is None
    assert "off" in native.status()


def test_it_builds_into_an_empty_cache_and_loads(monkeypatch, tmp_path):
    """What a fresh machine does once (the other tests may find the library built before)."""
    monkeypatch.setenv("ROS2_IK_KERNEL_CACHE", str(tmp_path))
    lib = native.build()
    assert lib.parent == tmp_path and lib.exists()
    assert native.build() == lib  # cached: not built again
    spec = importlib.util.spec_from_file_location(native.NAME, lib)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert callable(mod.call) and callable(mod.make)
