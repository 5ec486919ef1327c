# Source this to get the environment the node and tests run in:
#   . tools/env.sh                 venv + ROS prefix + built workspace
#   . tools/env.sh --no-workspace  venv + ROS prefix only (used while building)
_metasim_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_metasim_venv="$_metasim_root/.venv"
export VIRTUAL_ENV="$_metasim_venv"
export PATH="$_metasim_venv/bin:$PATH"
if [ -z "${ROS_DISTRO:-}" ]; then
  # The venv is the ROS prefix. Set the library path here rather than letting the
  # wheels re-exec every Python process to set it.
  _metasim_site=$(echo "$_metasim_venv"/lib/python3*/site-packages)
  _metasim_libs="$_metasim_venv/lib"
  for _d in "$_metasim_site"/ros_*.libs; do [ -d "$_d" ] && _metasim_libs="$_metasim_libs:$_d"; done
  export LD_LIBRARY_PATH="$_metasim_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
  export AMENT_PREFIX_PATH="$_metasim_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$_metasim_venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
fi
if [ "${1:-}" != "--no-workspace" ] && [ -f "$_metasim_root/install/setup.sh" ]; then
  COLCON_CURRENT_PREFIX="$_metasim_root/install" . "$_metasim_root/install/setup.sh"
fi
export MUJOCO_GL="${MUJOCO_GL:-egl}"
unset _metasim_root _metasim_venv _metasim_site _metasim_libs _d
