#!/usr/bin/env bash
# GPU checks on a machine with CUDA and CuPy (no ROS needed): the core test suite with its CuPy
# cases, the 1,000,000-target reach study on the GPU (and on the CPU cores, side by side), then
# bench/bench_gpu.py, then (if Nsight Compute is there) a profile of the fused LM kernel. Python packages the machine lacks (urdfdom-py, defusedxml) may be carried as wheels
# in .whl/; the checkout itself is used in place (PYTHONPATH).
#   bash scripts/gpu_checks.sh [OUTDIR]   (default bench/results/gpu-run)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUTDIR=${1:-bench/results/gpu-run}
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/r2ik-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/r2ik-site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
export ROS2_IK_KERNEL_CACHE=${ROS2_IK_KERNEL_CACHE:-/tmp/r2ik-kernels}
{ nvidia-smi; $PY -c "import cupy, numpy, scipy; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__)"; } 2>&1 | tee "$OUTDIR/env.txt"
STEPS=${STEPS:-tests,reach,bench,profile}
if [[ $STEPS == *tests* ]]; then
  # the ROS tests need rclpy and the interface package: not on this machine
  # build the bundled robots' host kernels once, then the suite on 8 workers (pytest-xdist)
  $PY -m ros2_ik.api.prebuild
  XDIST=$($PY -c "import xdist" 2>/dev/null && echo "-n ${WORKERS:-8}")
  timeout ${TEST_TIMEOUT:-420} $PY -m pytest -q -p no:cacheprovider $XDIST test \
    --ignore-glob='test/test_ros_*' -k "${TEST_FILTER:-}" -rfEs 2>&1 | tee "$OUTDIR/tests.txt" | tail -n 40
fi
if [[ $STEPS == *reach* ]]; then
  for b in ${REACH_BACKENDS:-cupy numpy}; do
    timeout ${REACH_TIMEOUT:-200} $PY bench/bench_reach.py --part study --backend $b \
      --targets ${REACH_TARGETS:-1000000} --shard-size ${REACH_SHARD:-100000} \
      --out /tmp/r2ik-reach --json "$OUTDIR/reach-$b.json" > "$OUTDIR/reach-$b.log" 2>&1
    echo "reach ($b) exit $?"; tail -n 6 "$OUTDIR/reach-$b.log"
  done
fi
if [[ $STEPS == *bench* ]]; then
  timeout ${BENCH_TIMEOUT:-400} $PY bench/bench_gpu.py --out "$OUTDIR/gpu.txt" ${BENCH_ARGS:-} \
    > "$OUTDIR/bench.log" 2>&1; echo "bench exit $?"; tail -n 60 "$OUTDIR/bench.log"
fi
if [[ $STEPS == *profile* ]] && command -v ncu >/dev/null; then
  timeout ${PROFILE_TIMEOUT:-200} ncu --kernel-name r2ik_lm --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis \
    $PY bench/bench_gpu.py --only solve --sizes ${PROFILE_SIZE:-1000000} --robots panda \
    --seeds ${PROFILE_SEEDS:-8} > "$OUTDIR/ncu.txt" 2>&1; echo "ncu exit $?"
  grep -E "Registers|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|Executed Ipc|Compute \(SM\)|Duration|Block Limit|Warp Cycles|No Eligible|Active Warps" "$OUTDIR/ncu.txt" | head -40
fi
