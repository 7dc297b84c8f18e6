"""The core imports and runs with rclpy and cupy unavailable."""

import subprocess
import sys
import textwrap

import pytest


def test_core_imports_without_rclpy_and_cupy():
    code = textwrap.dedent("""
        import sys
        sys.modules['rclpy'] = None   # any 'import rclpy' now raises ImportError
        sys.modules['cupy'] = None
        import ros2_ik
        from ros2_ik import model, kinematics, backend
        from ros2_ik.kinematics import fk
        m = ros2_ik.load_robot('panda')
        T = fk(m, m.neutral_q())
        assert T.shape == (1, m.num_links, 4, 4)
        r = ros2_ik.solve_pose(m, ros2_ik.fk_frames(m, m.neutral_q(), [m.tips[0]])[:, 0])
        assert r.success.all()
        import ros2_ik.reach
        assert backend.get_backend('auto').__name__ == 'numpy'
        assert not backend.cupy_available()
        bad = [k for k in sys.modules if k.startswith(('rclpy', 'cupy')) and sys.modules[k]]
        assert not bad, bad
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_cupy_backend_request_without_gpu_is_a_clear_error():
    from ros2_ik.backend import cupy_available, get_backend
    from ros2_ik.errors import BackendUnavailableError

    if cupy_available():
        pytest.skip("a GPU is present: the error path cannot be exercised here")
    with pytest.raises(BackendUnavailableError, match="backend='numpy'"):
        get_backend("cupy")
    with pytest.raises(BackendUnavailableError, match="unknown backend"):
        get_backend("tpu")


#: The layers of the package, lowest first: a module may import modules of its own layer or
#: of the layers below (the same package without a circle), never one above.
LAYERS = (
    ("ros2_ik.errors", "ros2_ik.validate", "ros2_ik.backend", "ros2_ik.robots"),
    ("ros2_ik.model",),
    ("ros2_ik.kinematics", "ros2_ik.world"),
    ("ros2_ik.ik",),
    ("ros2_ik.backends",),
    ("ros2_ik.api",),
    ("ros2_ik.reach",),
    ("ros2_ik.ros", "ros2_ik.demo"),
    ("ros2_ik.viewer",),  # the browser viewer: on the core, or on a node through ROS
)


def _layer(module: str) -> int:
    if module == "ros2_ik":  # the package's facade: above everything but the ROS layer
        return len(LAYERS) - 1.5
    for i, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    raise AssertionError(f"{module} has no layer: add it to LAYERS")


def _import_graph(package: str = "ros2_ik") -> dict:
    """{module: set of modules of ``package`` it imports}, from every ``import`` / ``from ...
    import`` statement of every module under it (module level and inside functions alike),
    relative or absolute. ``from X import y`` is an import of the module ``X.y`` where that is
    a module, else of ``X`` (a package ``X`` is its ``__init__``)."""
    import ast
    from pathlib import Path

    import ros2_ik

    root = Path(ros2_ik.__file__).resolve().parent.parent
    pkg_dir = root.joinpath(*package.split("."))
    modules = {}
    for p in pkg_dir.rglob("*.py"):
        parts = p.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = p
    graph = {}
    for mod, path in modules.items():
        here = mod.split(".") if path.stem == "__init__" else mod.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module
                                                                        else []))
                        if node.level else node.module)
                targets = []
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in modules else base)
            else:
                continue
            edges |= {t for t in targets if t in modules and t != mod}
        graph[mod] = edges
    return graph


def _find_cycle(graph: dict):
    """One cycle of ``graph`` as a list of modules, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_whole_package_has_no_import_circle_and_no_upward_import():
    """Every module of ros2_ik, function-level imports included (an import deferred to dodge a
    circle is a circle all the same): no circle anywhere, no module importing one of a layer
    above its own (the core never imports the ROS layer; the kinematics neither the IK nor the
    backends; the reference IK not the backends), and only the ROS layer and the facade above
    the public API."""
    graph = _import_graph()
    assert len(graph) > 50 and "ros2_ik.api.solver" in graph
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)
    upward = sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs
                    if _layer(b) > _layer(a))
    assert not upward, upward
    # the one dispatch point: only the API layer imports the compiled backends' runtimes
    for a, bs in graph.items():
        if a.startswith(("ros2_ik.reach", "ros2_ik.ros", "ros2_ik.demo")):
            assert not {b for b in bs if b.startswith("ros2_ik.backends")}, a
    assert "ros2_ik.ik.batch" not in graph["ros2_ik.backends.host"]


def test_cycle_finder_sees_a_circle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_function_level_and_relative_imports():
    graph = _import_graph()
    # a function-level relative import (the prepared solver builds the host backend lazily)
    assert "ros2_ik.backends.host" in graph["ros2_ik.api.solver"]
    assert "ros2_ik.ik.config" in graph["ros2_ik.backends.interface"]
