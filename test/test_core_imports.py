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


def _import_graph(package: str) -> dict:
    """{module: set of modules of ``package`` it imports}, from every ``import`` / ``from ...
    import`` statement of its modules (module level and inside functions alike), relative or
    absolute; ``from . import x`` counts as an import of the submodule ``x``. The package's
    ``__init__`` (which gathers the public names) is left out as a target."""
    import ast
    from pathlib import Path

    import ros2_ik

    root = Path(ros2_ik.__file__).resolve().parent.parent
    pkg_dir = root.joinpath(*package.split("."))
    modules = {f"{package}.{p.stem}" if p.stem != "__init__" else package: p
               for p in pkg_dir.glob("*.py")}
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
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t not in (mod, package)}
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


def test_solvers_import_graph_has_no_cycle():
    """One role per module in ros2_ik.solvers: no module imports one that imports it back, not
    even inside a function (an import deferred to dodge a circle is a circle all the same)."""
    graph = _import_graph("ros2_ik.solvers")
    assert "ros2_ik.solvers.fast" in graph["ros2_ik.solvers.api"]
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))
    # the prepared solver sits above the entry points; the planner below them
    assert "ros2_ik.solvers.api" in graph["ros2_ik.solvers.prepared"]
    for low in ("fast", "dls", "ccd", "checks", "residuals", "common"):
        assert "ros2_ik.solvers.api" not in graph[f"ros2_ik.solvers.{low}"], low
        assert "ros2_ik.solvers.prepared" not in graph[f"ros2_ik.solvers.{low}"], low
    assert "ros2_ik.solvers.dls" not in graph["ros2_ik.solvers.ccd"]


def test_cycle_finder_sees_a_circle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", ["ros2_ik.kinematics", "ros2_ik.model"])
def test_kinematics_and_model_import_graphs_have_no_cycle(package):
    graph = _import_graph(package)
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph))
