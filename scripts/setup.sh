#!/usr/bin/env bash
# Build the ros2_ik development environment in .venv at the repository root (ROS 2 Jazzy, the
# LTS release and the default) or .venv-kilted (ROS_DISTRO=kilted: ROS 2 Kilted, tested until
# its end of life, 2026-12-31):
#   1. a venv with the ROS 2 PyPI wheels and the Python dependencies
#      (scripts/requirements-<distro>.txt, locked by scripts/constraints-<distro>.txt), with the
#      include paths in the wheels' CMake exports pointed at this venv. The venv says which
#      distribution it holds (a stamp, and its rclpy wheel): one that holds another (a checkout
#      from when .venv was Kilted's) is rebuilt, never used as this one;
#   2. ros2_ik_interfaces, built with cmake/make in build/ros2_ik_interfaces-<distro>, installed
#      into the venv (the venv is a ROS install prefix); then, for the tests, MoveIt's message
#      packages of test/interfaces the same way;
#   3. ros2_ik, installed editable, laid out like a colcon --symlink-install: console scripts
#      in .venv/bin and .venv/lib/ros2_ik, and share/ros2_ik + the ament index entry;
#   4. the compiled kernels of the bundled robots built once into the kernel cache
#      (~/.cache/ros2_ik/kernels, or $ROS2_IK_KERNEL_CACHE: a minute or two of g++ the first
#      time; afterwards they only load, in milliseconds).
# Each step is skipped when a stamp keyed on a hash of its inputs is current, so a second
# run takes a few seconds. Afterwards: `. scripts/env.sh`.
#
# Usage: scripts/setup.sh [--force] [--lock]
#   --force  redo every step (keeps the pip cache)
#   --lock   rewrite the distribution's constraints file from its current venv, then exit
# Environment: ROS_DISTRO (jazzy, the default, or kilted), PYTHON (base interpreter for the
# venv, default python3), JOBS (make -j, default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# the default distribution has .venv; another has .venv-<distro> (the Makefile and env.sh agree)
DEFAULT_DISTRO=jazzy
ROS_DISTRO=${ROS_DISTRO:-$DEFAULT_DISTRO}
case $ROS_DISTRO in
  jazzy|kilted) ;;
  *) echo "setup.sh: ROS_DISTRO=$ROS_DISTRO is not supported; use jazzy (the default) or kilted" >&2
     exit 2 ;;
esac
if [[ $ROS_DISTRO == "$DEFAULT_DISTRO" ]]; then VENV=$ROOT/.venv; else VENV=$ROOT/.venv-$ROS_DISTRO; fi
VPY=$VENV/bin/python
BUILD=$ROOT/build
LOG_DIR=$BUILD/setup-logs-$ROS_DISTRO
STAMPS=$VENV/.ros2_ik-stamps
REQS=$ROOT/scripts/requirements-$ROS_DISTRO.txt
REQS_PY=$ROOT/scripts/requirements-python.txt
LOCK=$ROOT/scripts/constraints-$ROS_DISTRO.txt
IFC_SRC=$ROOT/ros2_ik_interfaces
IFC_BUILD=$BUILD/ros2_ik_interfaces-$ROS_DISTRO
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-2}

force=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    --lock) lock=1 ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

t_start=$SECONDS
die() { echo "setup.sh: FAILED: $*" >&2; exit 1; }
say() { echo "==> $*"; }

# step NAME COMMAND...: run quietly into $LOG_DIR/NAME.log; on failure show its tail and stop.
# COMMAND runs in a subshell with errexit on, so a shell function fails at its first failure.
step() {
  local name=$1; shift
  local log=$LOG_DIR/$name.log t0=$SECONDS rc
  mkdir -p "$LOG_DIR"
  set +e
  (set -e; "$@") >"$log" 2>&1
  rc=$?
  set -e
  if [[ $rc != 0 ]]; then
    echo "---- last lines of $log ----" >&2
    grep -v "is ignored: it is neither a file nor a directory" "$log" | tail -n 40 >&2 || true
    echo "----" >&2
    die "step '$name' (full log: $log)"
  fi
  echo "    $name done in $((SECONDS - t0)) s"
}

# key FILE...: short hash of the given files' names and contents (plus KEY_EXTRA).
key() {
  { printf '%s\n' "${KEY_EXTRA:-}"; for f in "$@"; do printf '%s\n' "${f#"$ROOT"/}"; cat "$f"; done; } \
    | sha256sum | cut -c1-16
}
current() { [[ $force == 0 && -f $STAMPS/$1 && $(cat "$STAMPS/$1") == "$2" ]]; }
stamp() { mkdir -p "$STAMPS"; echo "$2" >"$STAMPS/$1"; }

if [[ ${lock:-0} == 1 ]]; then
  [[ -x $VPY ]] || die "no $VENV yet; run scripts/setup.sh first"
  {
    if [[ -f $LOCK ]]; then sed -n '/^#/p;/^$/q' "$LOCK"
    else echo "# Every transitive version of ${VENV#"$ROOT"/} (ROS 2 $ROS_DISTRO), written by scripts/setup.sh --lock"; fi
    echo
    "$VPY" - <<'EOF'
from importlib import metadata
rows = set()
for dist in metadata.distributions():
    path = getattr(dist, '_path', None)
    # Wheels install *.dist-info; the ROS wheels also carry egg-info metadata of their inner
    # Python packages, which are no PyPI distributions and must not be pinned.
    if path is None or path.suffix != '.dist-info':
        continue
    name = dist.metadata['Name']
    if name.lower().replace('_', '-') not in ('pip', 'ros2-ik'):
        rows.add(f'{name}=={dist.version}')
print('\n'.join(sorted(rows, key=str.lower)))
EOF
  } >"$LOCK.new"
  mv "$LOCK.new" "$LOCK"
  echo "wrote $LOCK ($(grep -c '==' "$LOCK") pins)"
  exit 0
fi

# One set-up at a time (e.g. parallel make targets that all depend on it).
mkdir -p "$BUILD"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$BUILD/.setup.lock"
  flock 9
fi

# ---- 0. tools the build needs ---------------------------------------------------------------
for tool in "$PYTHON" cmake make cc c++ sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found on PATH (needed: $PYTHON >= 3.10 with the venv module, cmake >= 3.8, make, a C and a C++ compiler)"
done
# The base interpreter, also when python3 is this very venv's (env.sh sourced): the venv may be
# rebuilt. Resolved to its real path: the venv's python reports python3.11 where the plain one
# says python3, and the venv's key (below) must not depend on which of the two ran set-up.
PYTHON=$("$PYTHON" -c 'import os, sys
print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))') \
  || die "cannot run $PYTHON"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "$PYTHON is $("$PYTHON" -V 2>&1); the ROS 2 wheels need CPython >= 3.10 (verified on 3.11; set PYTHON=...)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
  || die "$PYTHON cannot create venvs (on Debian/Ubuntu: apt-get install python3-venv)"
py_version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# shellcheck source=env.sh
ROS2_IK_VENV=$VENV . "$ROOT/scripts/env.sh" --quiet

# ---- 1. venv + wheels ------------------------------------------------------------------------
KEY_EXTRA="$ROOT $PYTHON $py_version $ROS_DISTRO"
lock_files=("$LOCK")
lock_args=(-c "$LOCK")
if [[ ! -f $LOCK ]]; then  # a new distribution: unlocked once, then `--lock` writes its lock
  say "no ${LOCK#"$ROOT"/}: installing unlocked (then: ROS_DISTRO=$ROS_DISTRO scripts/setup.sh --lock)"
  lock_files=()
  lock_args=()
fi
deps_key=$(key "$REQS" "$REQS_PY" "${lock_files[@]}" "$ROOT/scripts/setup.sh")
# Which distribution the venv holds: the one its stamp names, and its rclpy wheel's (7: Jazzy,
# 8 and 9: Kilted; as ros2_ik/ros/compat.py reads it). Both must be this one.
held_distro() {
  local named wheel
  named=$(cat "$STAMPS/distro" 2>/dev/null) || named=
  wheel=$("$VPY" -c 'from importlib.metadata import version
print({7: "jazzy", 8: "kilted", 9: "kilted"}.get(int(version("ros-rclpy").split(".")[0]), "?"))' \
    2>/dev/null) || wheel=
  if [[ -z $wheel ]]; then echo "none"
  elif [[ $named == "$wheel" ]]; then echo "$wheel"
  else echo "$wheel (its stamp says '${named:-nothing}')"; fi
}
held=none
[[ -x $VPY ]] && held=$(held_distro)
if current deps "$deps_key" && [[ $held == "$ROS_DISTRO" ]]; then
  say "venv: up to date ($VENV, ROS 2 $ROS_DISTRO)"
else
  if [[ $held != none && $held != "$ROS_DISTRO" ]]; then
    say "venv: $VENV holds ROS 2 $held, not $ROS_DISTRO (set up before $DEFAULT_DISTRO became the default?): rebuilding it for $ROS_DISTRO"
  fi
  say "venv: building $VENV (ROS 2 $ROS_DISTRO, Python $py_version; first run downloads ~300 MB of wheels)"
  # A venv is tied to its interpreter and its absolute path: start over rather than patch.
  rm -rf "$VENV" "$IFC_BUILD"
  step venv "$PYTHON" -m venv "$VENV"
  step pip-install "$VPY" -m pip install --disable-pip-version-check \
    -r "$REQS" "${lock_args[@]}"

  # The wheels' exported CMake targets name the include dirs of the machine that built them
  # (/opt/python/cpXY-cpXY/...); CMake rejects them as missing. Point them at this venv.
  py_include=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  np_include=$("$VPY" -c 'import numpy; print(numpy.get_include())')
  fix_cmake_exports() {
    grep -rlE '/opt/python/cp[0-9]+-cp[0-9]+t?/' "$VENV"/share/*/cmake 2>/dev/null \
      | xargs -r sed -i -E \
        -e "s#/opt/python/cp[0-9]+-cp[0-9]+t?/include/python[0-9.]+t?#$py_include#g" \
        -e "s#/opt/python/cp[0-9]+-cp[0-9]+t?/lib/python[0-9.]+t?/site-packages/numpy/_core/include#$np_include#g"
    ! grep -rqE '/opt/python/cp[0-9]+-cp[0-9]+t?/(include|lib)' "$VENV"/share/*/cmake
  }
  step fix-cmake-exports fix_cmake_exports
  stamp distro "$ROS_DISTRO"
  stamp deps "$deps_key"
fi
if [[ $ROS_DISTRO == jazzy && -d $ROOT/.venv-jazzy ]]; then
  say "note: .venv-jazzy is left from when Jazzy was not the default (it is .venv now); nothing uses it: rm -rf .venv-jazzy"
fi

# ---- 2. ros2_ik_interfaces -------------------------------------------------------------------
mapfile -t ifc_files < <(find "$IFC_SRC" -maxdepth 2 -type f \( -name package.xml \
  -o -name CMakeLists.txt -o -name '*.msg' -o -name '*.srv' -o -name '*.action' -o -name '*.idl' \) \
  | LC_ALL=C sort)
KEY_EXTRA=$deps_key
ifc_key=$(key "${ifc_files[@]}")
if current interfaces "$ifc_key" && [[ -f $VENV/share/ros2_ik_interfaces/package.xml ]]; then
  say "ros2_ik_interfaces: up to date"
else
  say "ros2_ik_interfaces: building in ${IFC_BUILD#"$ROOT"/} (make -j$JOBS)"
  rm -rf "$IFC_BUILD"
  mkdir -p "$IFC_BUILD"
  step ifc-cmake cmake -S "$IFC_SRC" -B "$IFC_BUILD" \
    -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$VPY" -DBUILD_TESTING=OFF
  step ifc-make make -C "$IFC_BUILD" -j"$JOBS"
  step ifc-install make -C "$IFC_BUILD" install
  stamp interfaces "$ifc_key"
fi

# ---- 2b. MoveIt's messages, for the tests -----------------------------------------------------
# test/interfaces: moveit_msgs (and the two packages it uses) with the upstream fields and
# types, built by rosidl as ros2_ik_interfaces is (no registry here carries them): the suite
# drives the node with the classes rosidl generates. See test/interfaces/README.md. They go to
# a prefix of their own (build/test-interfaces-<distro>/install), never into the venv: a user's
# real MoveIt is never shadowed by them. scripts/test-env.sh adds that prefix for the tests
# (make test, demo, bench-node), and only where no moveit_msgs is importable already.
TEST_IFC=$ROOT/test/interfaces
TEST_PREFIX=$BUILD/test-interfaces-$ROS_DISTRO/install
mapfile -t tifc_files < <(find "$TEST_IFC" -maxdepth 3 -type f \( -name package.xml \
  -o -name CMakeLists.txt -o -name '*.msg' -o -name '*.srv' \) | LC_ALL=C sort)
KEY_EXTRA=$deps_key
tifc_key=$(key "${tifc_files[@]}")
# an earlier set-up installed them into the venv itself: taken out (its install manifests)
for pkg in object_recognition_msgs octomap_msgs moveit_msgs; do
  manifest=$BUILD/test-interfaces-$ROS_DISTRO/$pkg/install_manifest.txt
  if [[ -f $manifest ]] && grep -q "^$VENV/" "$manifest"; then
    say "test interfaces: removing $pkg from ${VENV#"$ROOT"/} (it shadowed a real one)"
    grep "^$VENV/" "$manifest" | while IFS= read -r f; do rm -f -- "$f"; done
    rm -rf "$VENV/lib/python"*/site-packages/"$pkg" "$VENV/share/$pkg" "$VENV/include/$pkg"
    rm -f "$manifest"
  fi
done
if current test-interfaces "$tifc_key" && [[ -f $TEST_PREFIX/share/moveit_msgs/package.xml ]]
then
  say "test interfaces (moveit_msgs): up to date"
else
  say "test interfaces: object_recognition_msgs, octomap_msgs, moveit_msgs (make -j$JOBS)"
  rm -rf "$TEST_PREFIX"
  for pkg in object_recognition_msgs octomap_msgs moveit_msgs; do
    pb=$BUILD/test-interfaces-$ROS_DISTRO/$pkg
    rm -rf "$pb"
    mkdir -p "$pb"
    # (moveit_msgs finds the other two in the test prefix)
    CMAKE_PREFIX_PATH="$TEST_PREFIX:$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" \
      AMENT_PREFIX_PATH="$TEST_PREFIX:$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" \
      step "$pkg-cmake" cmake -S "$TEST_IFC/$pkg" -B "$pb" \
      -DCMAKE_INSTALL_PREFIX="$TEST_PREFIX" -DPython3_EXECUTABLE="$VPY" -DBUILD_TESTING=OFF
    step "$pkg-make" make -C "$pb" -j"$JOBS"
    step "$pkg-install" make -C "$pb" install
  done
  stamp test-interfaces "$tifc_key"
fi

# ---- 3. ros2_ik (editable) -------------------------------------------------------------------
KEY_EXTRA=$deps_key
# the names of the launch/config files count too: each one is linked on its own (below)
pkg_key=$(KEY_EXTRA="$(cd "$ROOT" && ls -1 launch config 2>/dev/null || true)" \
  key "$ROOT/package.xml" "$ROOT/setup.py" "$ROOT/setup.cfg")
if current package "$pkg_key" && [[ -d $VENV/lib/ros2_ik ]]; then
  say "ros2_ik: up to date (editable: edits under ros2_ik/ need no re-run)"
else
  say "ros2_ik: installing editable"
  step pip-editable "$VPY" -m pip install --disable-pip-version-check \
    --no-deps --no-build-isolation -e "$ROOT"

  # What colcon build --symlink-install makes of setup.py/setup.cfg, so that `ros2 run`,
  # launch_ros and get_package_share_directory('ros2_ik') find the package under the venv
  # prefix. Mirrors data_files in setup.py: share/ros2_ik/launch and config are directories
  # with a link per file, as colcon makes them (`ros2 launch ros2_ik <file>` does not look
  # inside a linked directory).
  layout() {
    local share=$VENV/share scripts
    rm -rf "$VENV/lib/ros2_ik" "$share/ros2_ik"
    mkdir -p "$VENV/lib/ros2_ik" "$share/ros2_ik" "$share/ament_index/resource_index/packages"
    ln -sfn "$ROOT/resource/ros2_ik" "$share/ament_index/resource_index/packages/ros2_ik"
    ln -sfn "$ROOT/package.xml" "$share/ros2_ik/package.xml"
    local d f
    for d in launch config; do
      mkdir -p "$share/ros2_ik/$d"
      for f in "$ROOT/$d"/*; do
        [[ -f $f ]] && ln -sfn "$f" "$share/ros2_ik/$d/${f##*/}"
      done
    done
    scripts=$("$VPY" -c 'from importlib.metadata import distribution
print(" ".join(e.name for e in distribution("ros2_ik").entry_points if e.group == "console_scripts"))')
    for exe in $scripts; do
      [[ -x $VENV/bin/$exe ]] || { echo "console script $exe missing from $VENV/bin"; return 1; }
      ln -sfn "../../bin/$exe" "$VENV/lib/ros2_ik/$exe"
      echo "lib/ros2_ik/$exe -> bin/$exe"
    done
  }
  step ament-layout layout
  stamp package "$pkg_key"
fi

# ---- 4. compiled kernels -------------------------------------------------------------------
# The one compiled source is generated per robot and built with g++ the first time a robot is
# used on a machine (seconds), then cached on disk. Done here, once, for the bundled robots, so
# that the node and library calls on them start in milliseconds; when the cache is current
# this only loads it.
prebuild_kernels() {
  (cd / && "$VPY" -m ros2_ik.api.prebuild)
}
say "compiled kernels: building / loading the bundled robots' (${ROS2_IK_KERNEL_CACHE:-~/.cache/ros2_ik/kernels})"
step kernel-cache prebuild_kernels

# ---- check -----------------------------------------------------------------------------------
check() {
  # From / so that the repository itself is not on sys.path: the venv alone must provide all.
  (cd / && "$VPY" - <<'EOF'
import importlib.util
import rclpy  # noqa: F401
from ament_index_python.packages import get_package_share_directory
from ros2_ik_interfaces.srv import ComputeIK  # noqa: F401
assert importlib.util.find_spec('ros2_ik') is not None, 'ros2_ik is not importable'
get_package_share_directory('ros2_ik')
EOF
  )
}
step check check
if [[ $ROS_DISTRO == "$DEFAULT_DISTRO" ]]; then
  say "ready in $((SECONDS - t_start)) s (ROS 2 $ROS_DISTRO). Use it with:  . scripts/env.sh"
else
  say "ready in $((SECONDS - t_start)) s (ROS 2 $ROS_DISTRO). Use it with:  ROS_DISTRO=$ROS_DISTRO . scripts/env.sh"
fi
