#!/usr/bin/env bash
# The test suite, run inside the environment of tools/env.sh. A run that collects no
# test is a failure, not a success.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python -m metasim_ros.core.fastdds_shm   # Fast DDS segments left by killed runs
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run_tests: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
