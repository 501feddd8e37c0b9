#!/bin/sh
# make bench: install what the benchmarks need (as root, naming each package:
# tools/deps.sh bench), build Monkey if needed, then run the harness.
#
#   bench/run.sh [bench.py options]      e.g. bench/run.sh --quick
#   make bench BENCH_ARGS="--quick --servers monkey,nginx --scenarios ka13"
#
# bench/README.md describes the options, the scenarios and the output.
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh bench
if [ ! -x build/bin/monkey ] || [ ! -x build/bin/mk-watch ]; then
    make all
fi
# The harness uses the standard library only; any python3 will do.
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=/usr/bin/python3
exec "$PYTHON" bench/bench.py "$@"
