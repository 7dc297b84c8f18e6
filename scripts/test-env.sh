# Source me after scripts/env.sh, for the tests only:   . scripts/test-env.sh
# (make test, test-ros, demo and bench-node do.) Adds the test interface packages
# (test/interfaces: moveit_msgs, octomap_msgs, object_recognition_msgs, built by
# scripts/setup.sh into build/test-interfaces-<distro>/install) to this shell's ROS prefixes,
# Python path and library path, and only where no moveit_msgs is importable already: a real
# MoveIt (its setup sourced before) is used as it is, never shadowed by them. A development
# aid: nothing a robot runs sources it. POSIX sh, bash and zsh; run from the repository root.

_ros2_ik_venv=${VIRTUAL_ENV:-}
if [ -z "$_ros2_ik_venv" ] || [ ! -x "$_ros2_ik_venv/bin/python" ]; then
  echo "ros2_ik test env: source scripts/env.sh first" >&2
  unset _ros2_ik_venv
  false
else
  # the venv's distribution, as scripts/setup.sh stamped it
  _ros2_ik_tp=$(cat "$_ros2_ik_venv/.ros2_ik-stamps/distro" 2>/dev/null || echo jazzy)
  _ros2_ik_tp=$(pwd)/build/test-interfaces-$_ros2_ik_tp/install
  if "$_ros2_ik_venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('moveit_msgs') is None)" 2>/dev/null; then
    [ "${1:-}" = "--quiet" ] || echo "ros2_ik test env: moveit_msgs is installed; the test interface packages are not used"
  elif [ -f "$_ros2_ik_tp/share/moveit_msgs/package.xml" ]; then
    _ros2_ik_site=$(echo "$_ros2_ik_tp"/lib/python3*/site-packages)
    export AMENT_PREFIX_PATH="$_ros2_ik_tp${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
    export PYTHONPATH="$_ros2_ik_site${PYTHONPATH:+:$PYTHONPATH}"
    export LD_LIBRARY_PATH="$_ros2_ik_tp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ "${1:-}" = "--quiet" ] || echo "ros2_ik test env: test interface packages from $_ros2_ik_tp"
    unset _ros2_ik_site
  else
    echo "ros2_ik test env: no moveit_msgs and no test interface packages ($_ros2_ik_tp); run scripts/setup.sh" >&2
  fi
  unset _ros2_ik_venv _ros2_ik_tp
fi
