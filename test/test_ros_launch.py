"""Launch files and config: a static check that always runs, and the real thing where the ROS 2
``launch`` / ``launch_ros`` packages are importable (they are not on PyPI, so not in .venv: that
part is skipped there, with the reason)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))


def _console_scripts() -> set[str]:
    text = (ROOT / "setup.py").read_text()
    return set(re.findall(r"'(\w+) = ros2_ik[\w.]*:main'", text))


def test_expected_launch_files_exist():
    assert {p.name for p in LAUNCH_FILES} == {"ros2_ik.launch.py", "demo.launch.py"}
    for name in ("ros2_ik.yaml", "ros2_ik.rviz"):
        assert (ROOT / "config" / name).is_file(), name


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_static(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in funcs
    # Node(package=..., executable=...) of this package name an installed console script
    scripts = _console_scripts()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Node":
            kw = {k.arg: k.value for k in call.keywords}
            pkg = kw["package"].value if isinstance(kw.get("package"), ast.Constant) else None
            exe = kw["executable"].value if isinstance(kw.get("executable"), ast.Constant) \
                else None
            if pkg == "ros2_ik":
                assert exe in scripts, (exe, scripts)
    # every config file named in the launch file exists in config/
    for const in ast.walk(tree):
        if isinstance(const, ast.Constant) and isinstance(const.value, str) and \
                re.fullmatch(r"ros2_ik\.(yaml|rviz)", const.value):
            assert (ROOT / "config" / const.value).is_file(), const.value


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _need_launch():
    for mod, attr in (("launch", "LaunchDescription"), ("launch_ros", "actions")):
        try:
            # (the repository's own launch/ folder imports as an empty namespace package)
            getattr(importlib.import_module(mod), attr)
            importlib.import_module(f"{mod}.actions")
        except Exception as exc:  # noqa: BLE001  (not installed, or a broken install)
            pytest.skip(f"ROS 2 '{mod}' package not importable here ({exc}); it is not on "
                        "PyPI: this runs on a full ROS 2 install")
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        get_package_share_directory("ros2_ik")
    except PackageNotFoundError:
        pytest.skip("package ros2_ik is not on AMENT_PREFIX_PATH (source scripts/env.sh)")


def test_ros2_ik_launch_description():
    _need_launch()
    from launch import LaunchContext, LaunchDescription
    from launch.actions import DeclareLaunchArgument
    from launch_ros.actions import Node

    ld = _load(ROOT / "launch" / "ros2_ik.launch.py").generate_launch_description()
    assert isinstance(ld, LaunchDescription)
    args = {a.name: a for a in ld.entities if isinstance(a, DeclareLaunchArgument)}
    assert {"urdf", "robot", "params_file", "namespace", "node_name", "log_level"} <= set(args)
    assert args["params_file"].default_value[0].perform(LaunchContext()).endswith(
        "config/ros2_ik.yaml")
    nodes = [e for e in ld.entities if isinstance(e, Node)]
    assert len(nodes) == 1 and nodes[0].node_package == "ros2_ik"
    assert nodes[0].node_executable == "ros2_ik_node"


def test_demo_launch_nodes():
    _need_launch()
    from launch import LaunchContext
    from launch_ros.actions import Node

    mod = _load(ROOT / "launch" / "demo.launch.py")
    ld = mod.generate_launch_description()
    ctx = LaunchContext()
    ctx.launch_configurations.update({"robot": "ur", "use_rsp": "true", "rviz": "false"})
    actions = mod._nodes(ctx)
    nodes = [a for a in actions if isinstance(a, Node)]
    packages = [n.node_package for n in nodes]
    assert "ros2_ik" in packages
    assert len(ld.entities) == 4
    ctx.launch_configurations["robot"] = "r2d2"
    with pytest.raises(ValueError, match="panda"):
        mod._nodes(ctx)


def test_rviz_config_reads_what_the_node_and_the_demo_publish():
    """Every topic and interactive-marker namespace of config/ros2_ik.rviz is one the node
    offers (ros2_ik.ros.surface, under /ros2_ik) or one the demo launch file's
    robot_state_publishers publish, so the displays are never silently empty."""
    import yaml

    from ros2_ik.ros.surface import SURFACE

    cfg = yaml.safe_load((ROOT / "config" / "ros2_ik.rviz").read_text())
    displays = cfg["Visualization Manager"]["Displays"]
    node_topics = {n.replace("~", "/ros2_ik") for n, kind, _, _ in SURFACE if kind == "pub"}
    demo = (ROOT / "launch" / "demo.launch.py").read_text()
    seen = set()
    for d in displays:
        topic = (d.get("Topic") or d.get("Description Topic") or {}).get("Value")
        if d["Class"] == "rviz_default_plugins/InteractiveMarkers":
            ns = d["Interactive Markers Namespace"]
            assert f"{ns}/update" in node_topics, ns
            seen.add("interactive")
        elif topic in ("/robot_description", "/ghost/robot_description"):
            # robot_state_publisher's, the ghost's in the namespace the demo gives it
            assert topic == "/robot_description" or "namespace='ghost'" in demo
            seen.add(topic)
        elif topic is not None:
            assert topic in node_topics, topic
    assert {"interactive", "/robot_description", "/ghost/robot_description"} <= seen
    # the ghost robot follows the handle's answers
    assert "/ros2_ik/goal_marker/solution" in demo
    assert "/ros2_ik/goal_marker/solution" in node_topics
