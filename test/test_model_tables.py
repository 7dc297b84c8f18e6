"""The model's derived tables (``Model.tables``) and memos (``Model.memo``): built once, read-only,
the same values the per-module caches computed before, and no module outside the model layer
writes into a model.

``model_tables_reference.json`` holds, per bundled robot and table field, the shape, dtype and
two checksums (``sum(a * cos(i))`` over the flat index ``i``, ``sum |a|``) of what the code
before ``Model.tables`` computed (``fk._groups``, ``jacobian._contributions``,
``compiled._table``, ``common.wide_revolute``, ``dls._limited_columns``,
``Model.support_mask``, ``Model.neutral_q``); the tables were also checked equal to those
arrays bit for bit when they were introduced. ``limited_revolute`` came later (no cache
before it): its entries are its values when it was added. The dense (C, nv) screw scatter and
the (L, L) support mask left the tables (quadratic in a model's size); the screws' column
and factor are checked against the old scatter's entries, the support mask against the old
table, and the compiled kinematics' packed table went with those kernels.
"""

import ast
import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pytest

import ros2_ik
from ros2_ik import robots
from ros2_ik.model import load_robot
from ros2_ik.model.tables import ModelTables

REFERENCE = json.loads(Path(__file__).with_name("model_tables_reference.json").read_text())


def _arrays(tables: ModelTables) -> dict:
    """{"field" or "table.field": array} of every array of the tables."""
    out = {}
    for f in dataclasses.fields(tables):
        v = getattr(tables, f.name)
        if dataclasses.is_dataclass(v):
            out.update({f"{f.name}.{g.name}": getattr(v, g.name) for g in dataclasses.fields(v)})
        else:
            out[f.name] = v
    return out


def _fingerprint(a):
    x = np.nan_to_num(np.asarray(a, dtype=np.float64).ravel(), posinf=1e300, neginf=-1e300)
    return list(a.shape), str(a.dtype), float(np.dot(x, np.cos(np.arange(x.size)))), float(
        np.abs(x).sum())


def test_every_bundled_robot_has_a_reference():
    assert sorted(REFERENCE) == sorted(robots.names())


GONE = ("packed.", "screws.scatter", "support")


@pytest.mark.parametrize("name", robots.names())
def test_tables_match_the_previous_caches(name):
    m = load_robot(name)
    arrays = _arrays(m.tables)
    ref = {k: v for k, v in REFERENCE[name].items() if not k.startswith(GONE)}
    assert sorted(set(arrays) - {"screws.col", "screws.factor"}) == sorted(ref)
    c = m.tables.screws
    scatter = np.zeros((c.col.shape[0], m.nv))
    scatter[np.arange(c.col.shape[0]), c.col] = c.factor
    arrays["screws.scatter"] = scatter
    arrays["support"] = m.support_mask()
    ref.update({k: REFERENCE[name][k] for k in ("screws.scatter", "support")})
    for k, a in arrays.items():
        if k in ("screws.col", "screws.factor"):
            continue
        shape, dtype, s1, s2 = _fingerprint(a)
        assert (shape, dtype) == (ref[k][0], ref[k][1]), k
        assert s1 == pytest.approx(ref[k][2], rel=1e-9, abs=1e-9), k
        assert s2 == pytest.approx(ref[k][3], rel=1e-9, abs=1e-9), k


@pytest.mark.parametrize("name", robots.names())
def test_tables_are_read_only_and_built_once(name):
    m = load_robot(name)
    t = m.tables
    assert m.tables is t
    for k, a in _arrays(t).items():
        assert isinstance(a, np.ndarray), k
        assert not a.flags.writeable, k
        if a.size:
            with pytest.raises(ValueError, match="read-only"):
                a.flat[0] = a.flat[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.screws = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.motion.rot_l = None
    q = m.neutral_q()  # a copy the caller may change
    q[:] = 7.0
    assert not np.array_equal(m.neutral_q(), q)


def test_tables_built_once_across_threads():
    m = load_robot("panda")
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(m.tables)) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(t is seen[0] for t in seen) and m.tables is seen[0]


def test_memo_keeps_one_value_per_owner_and_key():
    m = load_robot("ur")
    calls = []

    def build():
        calls.append(1)
        return object()

    a = m.memo("test.a", (1, 2), build)
    assert m.memo("test.a", (1, 2), build) is a and len(calls) == 1
    assert m.memo("test.b", (1, 2), build) is not a and len(calls) == 2   # owners apart
    assert m.memo("test.a", "none", lambda: None) is None
    assert m.memo("test.a", "none", build) is None and len(calls) == 2     # None is a value
    assert m.memo("test.a", [1], build) is not m.memo("test.a", [1], build)  # unhashable: not kept
    for i in range(3):
        m.memo("test.full", i, build, max_keys=2)
    n = len(calls)
    m.memo("test.full", 2, build, max_keys=2)   # past max_keys: computed again
    m.memo("test.full", 0, build, max_keys=2)   # kept
    assert len(calls) == n + 1
    assert load_robot("ur").memo("test.a", (1, 2), build) is not a          # per model
    n = len(calls)  # memo_peek: what is kept, never built
    assert m.memo_peek("test.a", (1, 2)) is a
    assert m.memo_peek("test.a", (3, 4)) is None and m.memo_peek("test.c", (1, 2)) is None
    assert m.memo_peek("test.a", [1]) is None and len(calls) == n


def test_no_module_outside_the_model_writes_into_a_model():
    """Derived data lives in ``Model.tables`` and ``Model.memo``: no module but
    ``model/tree.py`` touches ``Model._cache``."""
    root = Path(ros2_ik.__file__).resolve().parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "model" / "tree.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "_cache":
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not offenders, offenders
