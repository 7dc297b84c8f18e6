"""The interface packages built only for the tests (test/interfaces: moveit_msgs, octomap_msgs,
object_recognition_msgs) never shadow a user's real ones: they live in a prefix of their own
(build/test-interfaces-<distro>/install), not in the product's venv, and scripts/test-env.sh
adds that prefix only where no moveit_msgs is importable already. Once they were installed into
the venv: beside a real MoveIt, which copy's libraries loaded depended on the order of the
library path, which changed from start to start (3 of 8 node starts failed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("moveit_msgs", "octomap_msgs", "object_recognition_msgs")
VENV = Path(sys.prefix)


def _test_prefix() -> Path:
    distro = (VENV / ".ros2_ik-stamps" / "distro")
    name = distro.read_text().strip() if distro.exists() else "jazzy"
    return ROOT / "build" / f"test-interfaces-{name}" / "install"


def test_the_venv_holds_none_of_the_test_packages():
    site = Path(sysconfig.get_paths()["purelib"])
    for pkg in PACKAGES:
        assert not (site / pkg).exists(), site / pkg
        assert not (VENV / "share" / pkg).exists(), VENV / "share" / pkg
        assert not list((VENV / "lib").glob(f"lib{pkg}__*.so")), pkg


def _clean_env(prefix: Path) -> dict:
    """This process's environment less the test prefix (as a user's shell after env.sh)."""
    env = dict(os.environ)
    for var in ("AMENT_PREFIX_PATH", "PYTHONPATH", "LD_LIBRARY_PATH"):
        parts = [p for p in env.get(var, "").split(os.pathsep) if p and str(prefix) not in p]
        env[var] = os.pathsep.join(parts)
    for var in ("_ROS_WHEELS_BOOTSTRAP_COMPLETE",):  # (the venv's python sets its own path)
        env.pop(var, None)
    return env


PROBE = """
import rclpy.serialization as ser
import moveit_msgs, octomap_msgs.msg
from moveit_msgs.srv import GetPositionIK
ser.serialize_message(GetPositionIK.Request())  # the type support libraries loaded
libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libmoveit_msgs__' in l})
print(moveit_msgs.__file__)
print('\\n'.join(libs))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_a_real_moveit_is_used_as_it_is(tmp_path):
    prefix = _test_prefix()
    if not (prefix / "share" / "moveit_msgs" / "package.xml").exists():
        pytest.skip(f"no test interface packages in {prefix}; run scripts/setup.sh")
    real = tmp_path / "opt" / "ros"  # a user's real MoveIt messages (a copy, elsewhere)
    shutil.copytree(prefix, real, symlinks=True)
    site = next((real / "lib").glob("python3*/site-packages"))
    env = _clean_env(prefix)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(real), env["AMENT_PREFIX_PATH"]])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(site), env["PYTHONPATH"]] if p)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in [str(real / "lib"),
                                                         env["LD_LIBRARY_PATH"]] if p)
    script = (f". scripts/env.sh --quiet && . scripts/test-env.sh && "
              f"echo \"AMENT=$AMENT_PREFIX_PATH\" && {VENV}/bin/python -c \"$PROBE\"")
    for _ in range(3):  # (the library path's order once changed from start to start)
        p = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env | {"PROBE": PROBE},
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "moveit_msgs is installed; the test interface packages are not used" in p.stdout
        lines = p.stdout.splitlines()
        assert str(prefix) not in "".join(lines), p.stdout
        found = [ln for ln in lines if "moveit_msgs" in ln and not ln.startswith(("AMENT", "ros2"))]
        assert found and all(ln.startswith(str(real)) for ln in found), p.stdout
    # without it, the test prefix is used (and only then)
    p = subprocess.run(["bash", "-c", script], cwd=ROOT, env=_clean_env(prefix) | {"PROBE": PROBE},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    found = [ln for ln in p.stdout.splitlines() if "moveit_msgs" in ln
             and not ln.startswith(("AMENT", "ros2"))]
    assert found and all(ln.startswith(str(prefix)) for ln in found), p.stdout


def test_the_suite_runs_with_moveit_msgs():
    """The MoveIt tiers run, never skip unseen: with the test packages built, the suite runs
    with moveit_msgs importable (make test sources scripts/test-env.sh; by hand:
    ``. scripts/env.sh && . scripts/test-env.sh``)."""
    import importlib.util

    if not (_test_prefix() / "share" / "moveit_msgs" / "package.xml").exists():
        pytest.skip("no test interface packages; run scripts/setup.sh")
    assert importlib.util.find_spec("moveit_msgs") is not None, (
        "moveit_msgs is not importable: source scripts/test-env.sh after scripts/env.sh "
        "(make test does)")
