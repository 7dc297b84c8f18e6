"""The live demo (``ros2_ik_demo``, run by ``make demo``) runs and reports success: every
section's checks pass (MoveIt's planning scene too, where moveit_msgs is importable), and it
prints only what it checks: none of the node's INFO log lines, while its warnings and errors
still show."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) not installed; run make setup")

#: a log line of the node (rcutils' console format: [SEVERITY] [time] [logger]: text)
NODE_LOG = re.compile(r"^\[(DEBUG|INFO|WARN|ERROR|FATAL)\] \[[0-9.]+\] \[ros2_ik[].]",
                      re.MULTILINE)


def test_demo_runs_and_checks_itself():
    from ros_testing import random_domain_id

    env = dict(os.environ, ROS_DOMAIN_ID=str(random_domain_id()))
    out = subprocess.run([sys.executable, "-m", "ros2_ik.demo", "--goals", "30", "--nodes", "21"],
                         capture_output=True, text=True, env=env, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "demo OK" in out.stdout
    assert "ComputeIK for planning group" in out.stdout
    assert "FAILED" not in out.stdout
    # the node's own log: nothing below WARN (and nothing else went wrong here)
    assert not NODE_LOG.findall(text), NODE_LOG.findall(text)
    assert "[INFO]" not in text, text[-3000:]
    if importlib.util.find_spec("moveit_msgs") is None:
        assert "6. MoveIt's planning scene: moveit_msgs is not importable here: skipped" in \
            out.stdout
        assert out.stdout.count("[ok]") == 10, out.stdout
    else:
        assert "[ok] the planning-scene object reached the node's world" in out.stdout
        assert "[ok] MoveIt's GetPositionIK answers clear of the planning-scene object by the " \
               "margin and verified by FK" in out.stdout, out.stdout[-3000:]
        section = out.stdout.split("\n6. ", 1)[1]
        assert re.search(r"[1-9][0-9]* goals whose answer without avoid_collisions runs "
                         r"through 'demo_shelf'", section), section
        assert "with avoid_collisions: SUCCESS" in section
        assert "[ok] the octomap reached the node's world" in out.stdout
        assert "[ok] goals inside the octomap reached without collision avoidance, never with " \
               "it" in out.stdout, out.stdout[-3000:]
        assert out.stdout.count("[ok]") == 14, out.stdout


def test_the_nodes_warnings_and_errors_still_show():
    """The demo's filter on the node's log (:func:`ros2_ik.demo.node_log_level`, at the
    default 'warn'): a node named as the demo's, and a child logger of it, log at every
    severity; INFO is left out, WARN and ERROR come through."""
    from ros_testing import random_domain_id

    code = textwrap.dedent(f"""
        import rclpy
        from ros2_ik.demo import NODE_NAME, node_log_level
        ctx = rclpy.Context()
        rclpy.init(context=ctx, domain_id={random_domain_id()})
        node_log_level(NODE_NAME, "warn")
        node = rclpy.create_node(NODE_NAME, context=ctx)
        for log in (node.get_logger(), node.get_logger().get_child("scene")):
            log.info("an info line")
            log.warning("a warning line")
            log.error("an error line")
        node.destroy_node()
        rclpy.shutdown(context=ctx)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = NODE_LOG.findall(out.stdout + out.stderr)
    assert sorted(lines) == ["ERROR", "ERROR", "WARN", "WARN"], out.stdout + out.stderr
    assert "an info line" not in out.stdout + out.stderr


def test_demo_fails_loudly_on_bad_arguments():
    out = subprocess.run([sys.executable, "-m", "ros2_ik.demo", "--nodes", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--nodes" in out.stderr
