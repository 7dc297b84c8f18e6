# Source me after scripts/setup.sh:   . scripts/env.sh  [--quiet]
# (ROS 2 Kilted's venv: ROS_DISTRO=kilted . scripts/env.sh)
# Makes .venv (ROS 2 Jazzy, the default; .venv-kilted for ROS_DISTRO=kilted) the active ROS 2
# install prefix of this shell: its python, console scripts and ament index
# (get_package_share_directory), CMake packages, and local-only DDS discovery.
# Safe to source more than once. POSIX sh (dash, as in make recipes), bash and zsh; a plain sh
# cannot tell where a sourced file lives, so there source it from the repository root.

if [ -n "${BASH_VERSION:-}" ]; then
  eval '_ros2_ik_src=${BASH_SOURCE[0]}'
elif [ -n "${ZSH_VERSION:-}" ]; then
  eval '_ros2_ik_src=${(%):-%x}'
else
  _ros2_ik_src=scripts/env.sh
fi

if [ -f "$_ros2_ik_src" ] && _ros2_ik_root=$(cd "$(dirname "$_ros2_ik_src")/.." && pwd); then
  # as scripts/setup.sh names them: the default distribution (jazzy) in .venv, kilted in
  # .venv-kilted
  case "${ROS2_IK_VENV:-}:${ROS_DISTRO:-jazzy}" in
    /*) _ros2_ik_venv=$ROS2_IK_VENV ;;
    :kilted) _ros2_ik_venv=$_ros2_ik_root/.venv-kilted ;;
    *) _ros2_ik_venv=$_ros2_ik_root/.venv ;;
  esac

  # _ros2_ik_prepend VAR DIR: put DIR first in the colon-separated list VAR, once.
  _ros2_ik_prepend() {
    eval "_ros2_ik_cur=\${$1:-}"
    case ":$_ros2_ik_cur:" in
      *":$2:"*) ;;
      *) eval "export $1=\"\$2\${_ros2_ik_cur:+:\$_ros2_ik_cur}\"" ;;
    esac
    unset _ros2_ik_cur
  }
  _ros2_ik_prepend PATH "$_ros2_ik_venv/bin"
  _ros2_ik_prepend AMENT_PREFIX_PATH "$_ros2_ik_venv"
  _ros2_ik_prepend CMAKE_PREFIX_PATH "$_ros2_ik_venv"
  unset -f _ros2_ik_prepend
  export VIRTUAL_ENV="$_ros2_ik_venv"
  # Keep DDS discovery on this host unless the caller chose otherwise.
  export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"

  if [ "${1:-}" != "--quiet" ]; then
    if [ -x "$_ros2_ik_venv/bin/python" ]; then
      echo "ros2_ik env: $_ros2_ik_venv (ROS_AUTOMATIC_DISCOVERY_RANGE=$ROS_AUTOMATIC_DISCOVERY_RANGE)"
    else
      echo "ros2_ik env: $_ros2_ik_venv does not exist yet; run $_ros2_ik_root/scripts/setup.sh" >&2
    fi
  fi
  unset _ros2_ik_src _ros2_ik_root _ros2_ik_venv
else
  echo "ros2_ik env: cannot locate the repository; in sh, source scripts/env.sh from its root" >&2
  unset _ros2_ik_src
  false
fi
