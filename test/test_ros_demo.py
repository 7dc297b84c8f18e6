"""The live demo (``ros2_ik_demo``, run by ``make demo``) runs and reports success."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")


def test_demo_runs_and_checks_itself():
    from ros_testing import random_domain_id

    env = dict(os.environ, ROS_DOMAIN_ID=str(random_domain_id()))
    out = subprocess.run([sys.executable, "-m", "ros2_ik.demo", "--goals", "30", "--nodes", "21"],
                         capture_output=True, text=True, env=env, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "demo OK" in out.stdout
    assert out.stdout.count("[ok]") == 10 and "FAILED" not in out.stdout
    assert "ComputeIK for planning group" in out.stdout


def test_demo_fails_loudly_on_bad_arguments():
    out = subprocess.run([sys.executable, "-m", "ros2_ik.demo", "--nodes", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--nodes" in out.stderr
