# The two commands of the README, and a few helpers. Every target sets up .venv first
# (scripts/setup.sh is idempotent and takes seconds when nothing changed).
.PHONY: setup demo test bench bench-kinematics clean

PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

## demo: set everything up, then run the main job on the embedded default robot
demo: setup
	@. scripts/env.sh && .venv/bin/ros2_ik_demo $(ARGS)

## test: set everything up, then run the whole test suite
test: setup
	@. scripts/env.sh && $(PY) -m pytest -q test $(ARGS)

bench-kinematics: setup
	@. scripts/env.sh && $(PY) bench/bench_kinematics.py $(ARGS)

bench: bench-kinematics

clean:
	rm -rf .venv build
