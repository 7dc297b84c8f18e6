"""``python -m ros2_ik.reach``: the ``reach_study`` command."""

from .cli import run

run()
