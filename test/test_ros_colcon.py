"""A colcon build of the two packages (ros2_ik, ament_python, at the repository root;
ros2_ik_interfaces, ament_cmake, inside it), as docs/colcon.md tells a user to build them in a
workspace, against this distribution's venv; then the installed node starts from the install
space and serves. Runs in the ROS tier on every distribution; skipped where colcon is not
installed (``make colcon-setup`` makes build/venv-colcon-<distro>)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

from ros_testing import NodeProcess, random_domain_id

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", ".venv-kilted", ".venv-jazzy", "build", "install", "log", "_build",
        "__pycache__", ".pytest_cache", ".hypothesis"}


def _colcon() -> str | None:
    cand = os.environ.get("COLCON") or shutil.which("colcon")
    return str(Path(cand).resolve()) if cand and Path(cand).exists() else None


@pytest.mark.skipif(_colcon() is None, reason="colcon is not installed (make colcon-setup)")
def test_colcon_build_of_both_packages_and_the_installed_node_serves(tmp_path):
    ws = tmp_path / "ws"
    src = ws / "src" / "ros2_ik"
    shutil.copytree(ROOT, src, ignore=lambda d, names: [n for n in names if n in SKIP])
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    build = subprocess.run(
        [_colcon(), "build", "--symlink-install", "--base-paths", "src",
         "src/ros2_ik/ros2_ik_interfaces", "--event-handlers", "console_cohesion+",
         "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF"],
        cwd=ws, env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    assert "2 packages finished" in build.stdout, build.stdout[-2000:]
    install = ws / "install"
    assert (install / "ros2_ik" / "share" / "ros2_ik" / "package.xml").is_file()
    assert (install / "ros2_ik_interfaces" / "share" / "ros2_ik_interfaces" / "srv" /
            "ComputeIK.srv").is_file()
    node = install / "ros2_ik" / "lib" / "ros2_ik" / "ros2_ik_node"
    assert node.exists()

    # the installed packages, from the install space (its setup script, as a user sources it)
    domain = random_domain_id()
    script = (f". {install}/local_setup.sh && cd / && python -c \"import ros2_ik_interfaces.srv "
              f"as s, ros2_ik; print(s.__file__); print(ros2_ik.__file__)\"")
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert str(install / "ros2_ik_interfaces") in out.stdout.splitlines()[0]
    assert str(ws) in out.stdout.splitlines()[1]  # this build's ros2_ik, not the repository's

    node_proc = NodeProcess(domain, params={"robot": "panda"}, params_file=None,
                            executable=node, setup_script=install / "local_setup.sh", env=env)
    try:
        assert node_proc.wait_for_log("]: ready: ", 120), node_proc.log_text()
    finally:
        rc = node_proc.stop(30)
    assert rc == 0, node_proc.log_text()[-3000:]
