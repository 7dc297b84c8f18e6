# The two commands of the README, and a few helpers. Every target sets up the venv first
# (scripts/setup.sh is idempotent and takes seconds when nothing changed).
.PHONY: setup demo lint test docs docs-build fuzz bench bench-kinematics bench-ik bench-cpu bench-node \
	bench-timeouts bench-queue bench-swap bench-reach bench-gpu gpu-report bench-peers-setup bench-collision bench-states bench-placement bench-revisions bench-arms bench-moveit-real bench-worlds clean \
	viewer test-browser test-ros colcon-setup

## ROS 2 distribution: jazzy (the default: the LTS release, supported to 2029) or kilted (tested
## until its end of life, 2026-12-31), each in a venv of its own: .venv for jazzy, .venv-kilted
## for kilted (`make setup ROS_DISTRO=kilted`); every target runs on the chosen one.
## scripts/setup.sh and scripts/env.sh name the venvs the same way.
DEFAULT_ROS_DISTRO := jazzy
ROS_DISTRO ?= $(DEFAULT_ROS_DISTRO)
export ROS_DISTRO
VENV := .venv$(if $(filter $(DEFAULT_ROS_DISTRO),$(ROS_DISTRO)),,-$(ROS_DISTRO))
## the distribution `make test` runs the ROS tier on after the whole suite: the other one
OTHER_ROS_DISTRO := $(if $(filter kilted,$(ROS_DISTRO)),jazzy,kilted)
PY := $(VENV)/bin/python
## the ROS test tier: every test of the node and its interfaces (run on both distributions)
ROS_TESTS := $(wildcard test/test_ros_*.py) test/test_moveit.py test/test_fuzz_node.py \
	test/test_interface_isolation.py

setup:
	@bash scripts/setup.sh

## demo: set everything up, then run the main job on the embedded default robot
demo: setup
	@. scripts/env.sh && . scripts/test-env.sh --quiet && $(VENV)/bin/ros2_ik_demo $(ARGS)

## lint: ruff over the code (rules in ruff.toml; the pinned ruff is installed by scripts/setup.sh)
LINT_PATHS := ros2_ik test bench scripts launch setup.py
lint: setup
	@$(VENV)/bin/ruff check $(LINT_PATHS)

## test: set everything up, run the linter (any finding stops here), the docs, then the whole
## test suite on Jazzy (the default), then the ROS tier on Kilted (its venv set up first; until
## Kilted's end of life, 2026-12-31)
test: setup colcon-setup
	@$(VENV)/bin/ruff check $(LINT_PATHS)
	@$(MAKE) --no-print-directory docs-build
	@echo "==> the whole test suite on ROS 2 $(ROS_DISTRO) ($(VENV))"
	@. scripts/env.sh && . scripts/test-env.sh && COLCON=$(COLCON_VENV)/bin/colcon $(PY) -m pytest -q test $(ARGS)
	@$(MAKE) --no-print-directory test-ros ROS_DISTRO=$(OTHER_ROS_DISTRO)

## test-ros: the ROS tier alone, on ROS_DISTRO's venv (make test-ros ROS_DISTRO=kilted)
test-ros: setup colcon-setup
	@echo "==> the ROS test tier on ROS 2 $(ROS_DISTRO) ($(VENV))"
	@. scripts/env.sh && . scripts/test-env.sh && COLCON=$(COLCON_VENV)/bin/colcon $(PY) -m pytest -q $(ROS_TESTS) $(ARGS)

## colcon-setup: colcon (scripts/requirements-colcon.txt) in a venv layered over $(VENV) by a
## .pth file, for the ROS tier's colcon build test
COLCON_VENV := build/venv-colcon-$(ROS_DISTRO)
colcon-setup: setup
	@set -e; want=$$(cat scripts/requirements-colcon.txt $(VENV)/.ros2_ik-stamps/deps | sha256sum); \
	if [ "$$(cat $(COLCON_VENV)/.stamp 2>/dev/null)" != "$$want" ]; then \
	  echo "==> colcon: $(COLCON_VENV)"; rm -rf $(COLCON_VENV); $(PY) -m venv $(COLCON_VENV); \
	  base=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	  site=$$($(COLCON_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	  printf "import sys, site; p = '%s'; p in sys.path or site.addsitedir(p)\n" "$$base" \
	    > "$$site/_ros2_ik_base_venv.pth"; \
	  $(COLCON_VENV)/bin/python -m pip install --disable-pip-version-check -q \
	    -r scripts/requirements-colcon.txt 2>&1 | grep -v "is ignored: it is neither" || true; \
	  [ -x $(COLCON_VENV)/bin/colcon ]; echo "$$want" > $(COLCON_VENV)/.stamp; fi

## viewer: the browser viewer on the bundled panda (ARGS="--robot ur" ...), http://127.0.0.1:8080
viewer: setup
	@. scripts/env.sh && $(VENV)/bin/ros2_ik_viewer $(ARGS)

## test-browser: the viewer in headless Chromium alone (needs `apt-get install chromium`)
test-browser: setup
	@command -v chromium >/dev/null || { echo "chromium is not installed: apt-get install chromium"; exit 2; }
	@. scripts/env.sh && $(PY) -m pytest -q test/test_viewer_browser.py $(ARGS)

## docs: the documentation (Sphinx + MyST, docs/), warnings as errors, into docs/_build/html
docs: setup docs-build

docs-build:
	@$(PY) -m sphinx -b html -W --keep-going -q docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

## fuzz: the property-based fuzz tier at length (FUZZ_EXAMPLES cases per test, default 5000:
## mutated URDFs, the core API, the node's requests); counts in build/fuzz-report.json and
## build/fuzz-node-report.json. CI runs 60 per test.
FUZZ_EXAMPLES ?= 5000
fuzz: setup
	@. scripts/env.sh && FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q \
	  test/test_fuzz.py test/test_fuzz_node.py $(ARGS) && cat build/fuzz-report.json \
	  build/fuzz-node-report.json

bench-kinematics: setup
	@. scripts/env.sh && $(PY) bench/bench_kinematics.py $(ARGS)

## bench-ik: IK latency / success / throughput on the bundled robots, and the peers when installed
bench-ik: setup
	@. scripts/env.sh && $(PY) bench/bench_ik.py $(ARGS)

## bench-cpu: issue 14's table: ros2_ik vs Robotics Toolbox and Pinocchio on example-robot-data's
## arms, in one run (needs make bench-peers-setup); recorded in bench/results/cpu.txt
bench-cpu: setup
	@. scripts/env.sh && $(PY) bench/bench_cpu.py $(ARGS)

## bench-peers-setup: optional peer IK libraries (bench/requirements-peers.txt) for bench-ik, in
## build/venv-peers: a venv layered over $(VENV) by a .pth file, installed under the
## distribution's lock (scripts/constraints-$(ROS_DISTRO).txt) so the venv's pinned numpy/scipy
## are used; the venv itself is not touched.
PEERS_VENV := build/venv-peers
bench-peers-setup: setup
	@set -e; \
	[ -x $(PEERS_VENV)/bin/python ] || $(PY) -m venv $(PEERS_VENV); \
	base=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	site=$$($(PEERS_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	printf "import sys, site; p = '%s'; p in sys.path or site.addsitedir(p)\n" "$$base" \
	  > "$$site/_ros2_ik_base_venv.pth"; \
	$(PEERS_VENV)/bin/python -m pip install --disable-pip-version-check -q \
	  -r bench/requirements-peers.txt -c scripts/constraints-$(ROS_DISTRO).txt; \
	echo "peer IK libraries installed in $(PEERS_VENV); bench/bench_ik.py finds them there"

## bench-collision: what collision avoidance costs (issue 33): one goal, a batch, a 1M reach study
bench-collision: setup
	@. scripts/env.sh && $(PY) bench/bench_collision.py $(ARGS)

## bench-moveit-real: MoveIt's GetPositionIK on example-robot-data's Panda (its meshes) beside
## the bundled panda, with a table and a shelf, with and without the first pass on the cover
bench-moveit-real: setup
	@. scripts/env.sh && . scripts/test-env.sh --quiet && $(PY) bench/bench_moveit_real.py $(ARGS)

## bench-worlds: sensed and modelled worlds (issue 49): an octomap of a cell decoded and ready,
## solves against it beside the same cell as 20 primitives (bundled and real Panda), a mesh's cells
bench-worlds: setup
	@. scripts/env.sh && $(PY) bench/bench_worlds.py $(ARGS)

## bench-arms: every arm of example-robot-data (issue 47): its collision model (spheres, overshoot,
## fit time, peak memory) and collision-aware solves judged on its meshes by Pinocchio + coal;
## appended to bench/results/arms.txt (ARGS="--robots z1 so101" for a few)
bench-arms: setup
	@. scripts/env.sh && $(PY) bench/bench_arms.py --out bench/results/arms.txt $(ARGS)

## bench-states: check_states on the panda with 20 primitives (states/s on 2 threads, against the
## reference's exact distances); appended to bench/results/states.txt
bench-states: setup
	@. scripts/env.sh && $(PY) bench/bench_states.py --out bench/results/states.txt $(ARGS)

## bench-placement: base placement, 100 task poses x 10,000 candidates, and the refinement against
## a dense search; appended to bench/results/placement.txt
bench-placement: setup
	@. scripts/env.sh && $(PY) bench/bench_placement.py --out bench/results/placement.txt $(ARGS)

## bench-revisions: two revisions' CPU figures side by side in one run (BEFORE=rev, AFTER=rev or
## the working tree): one goal, batch 10,000, the collision-aware batch
bench-revisions: setup
	@. scripts/env.sh && $(PY) bench/bench_revisions.py $(BEFORE) $(AFTER) $(ARGS)

## bench-node: what the ROS node adds: service round trip vs bare solve, a 10k-goal request, compact conversion
bench-node: setup
	@. scripts/env.sh && . scripts/test-env.sh --quiet && $(PY) bench/bench_node.py $(ARGS)

## bench-swap: how long a new robot_description takes to serve, idle, under load, and big ones
bench-swap: setup
	@. scripts/env.sh && $(PY) bench/bench_swap.py $(ARGS)

## bench-queue: GetPositionIK bursts on the node, the timeout counted from each request's
## arrival (timeout_from_arrival true and false)
bench-queue: setup
	@. scripts/env.sh && . scripts/test-env.sh --quiet && $(PY) bench/bench_queue.py $(ARGS)

## bench-timeouts: how far past their timeout calls return, by batch size (1e3 .. 1e6 problems)
bench-timeouts: setup
	@. scripts/env.sh && $(PY) bench/bench_timeouts.py $(ARGS)

## bench-gpu: the GPU path (a machine with a GPU and CuPy); gpu-report: kernel resources (no GPU)
bench-gpu: setup
	@. scripts/env.sh && $(PY) bench/bench_gpu.py $(ARGS)

gpu-report: setup
	@. scripts/env.sh && $(PY) bench/bench_gpu.py --report $(ARGS)

## bench-reach: a 1,000,000-target reach study on panda end to end (every reached pose verified
## by FK) and Ray with 1 vs 2 workers; output kept in bench/results/reach.txt
bench-reach: setup
	@. scripts/env.sh && $(PY) bench/bench_reach.py --json bench/results/reach.json $(ARGS) \
	  > bench/results/reach.txt 2>&1; rc=$$?; cat bench/results/reach.txt; exit $$rc

bench: bench-kinematics bench-ik bench-node

## clean: the venvs (.venv-jazzy: left from when Jazzy was not the default) and build/
clean:
	rm -rf .venv .venv-kilted .venv-jazzy build
