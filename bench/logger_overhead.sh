#!/usr/bin/env bash
# What the logger plugin costs in the 13-byte keep-alive benchmark.
#
# Issue 3's bar: with an access log, Monkey keeps at least 90% of the
# requests/s it serves with logging off (wrk -t2 -c100, a 13-byte file).
#
# Starts the monkey binary of an existing build ($MK_BUILD, default build/;
# this script builds nothing) twice from generated configurations in a
# temporary folder: "logger", the logger loaded from plugins/monkey-logger.so
# with a combined-format access log for the site, and "off", no plugin. Both
# run side by side (the idle one costs nothing) and wrk loads them in
# interleaved rounds, alternating which goes first. Before each logger round
# the log is truncated (the logger writes from the file's end, so this is
# safe) and after it the lines are counted against wrk's request count.
# Prints each round, the median requests/s of each mode and their ratio, the
# median of the per-round ratios (each pair ran back to back), and
# the median CPU time the server spent per request (all its threads, the
# logger thread included), which a loaded machine disturbs much less.
# Servers are stopped by the PIDs this script started.
#
#   bench/logger_overhead.sh [-r ROUNDS] [-d SECONDS] [-c CONNS] [-t THREADS]
#                            [-w WORKERS] [-f common|combined] [-k]
#
#   -r  rounds per mode (default 5)        -d  seconds per wrk run (default 5)
#   -c  wrk connections (default 100)      -t  wrk threads (default 2)
#   -w  server workers (default 2)         -f  log format (default combined)
#   -k  keep the temporary folder
set -euo pipefail

ROUNDS=5 DURATION=5 CONNS=100 THREADS=2 WORKERS=2 FORMAT=combined KEEP=0
while getopts "r:d:c:t:w:f:kh" opt; do
    case $opt in
    r) ROUNDS=$OPTARG ;;
    d) DURATION=$OPTARG ;;
    c) CONNS=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    w) WORKERS=$OPTARG ;;
    f) FORMAT=$OPTARG ;;
    k) KEEP=1 ;;
    *) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MK_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MONKEY=$BUILD/bin/monkey
LOGGER_SO=$BUILD/plugins/monkey-logger.so
for f in "$MONKEY" "$LOGGER_SO"; do
    [ -e "$f" ] || { echo "missing $f: build first (cmake -S . -B build && ninja -C build)" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is not installed" >&2; exit 1; }

TMP=$(mktemp -d /tmp/mk-logger-bench.XXXXXX)
declare -A PID PORT
cleanup() {
    for mode in "${!PID[@]}"; do
        local p=${PID[$mode]}
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
        fi
        wait "$p" 2>/dev/null || true
    done
    if [ "$KEEP" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

mkdir -p "$TMP/htdocs" "$TMP/logs"
printf 'Hello World!\n' >"$TMP/htdocs/hello.txt"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# make_conf MODE: a configuration directory for "logger" or "off".
make_conf() {
    local mode=$1 conf=$TMP/conf-$1
    mkdir -p "$conf/sites"
    PORT[$mode]=$(free_port)
    cat >"$conf/monkey.conf" <<EOF
[SERVER]
    Listen 127.0.0.1:${PORT[$mode]}
    Workers $WORKERS
    KeepAlive On
    KeepAliveTimeout 60
    MaxKeepAliveRequests 100000
    GracefulTimeout 1
    LogLevel warn
EOF
    printf '[HOST]\n    ServerName 127.0.0.1 localhost\n    DocumentRoot %s\n' \
        "$TMP/htdocs" >"$conf/sites/default"
    if [ "$mode" = logger ]; then
        printf '[LOGGER]\n    AccessLog %s\n    Format %s\n' "$TMP/logs/access.log" "$FORMAT" \
            >>"$conf/sites/default"
        printf '[PLUGINS]\n    Load %s\n' "$LOGGER_SO" >"$conf/plugins.load"
    fi
}

start() {
    local mode=$1
    "$MONKEY" -c "$TMP/conf-$mode" 2>"$TMP/$mode.stderr" &
    PID[$mode]=$!
    for _ in $(seq 100); do
        if [ "$(curl -s "http://127.0.0.1:${PORT[$mode]}/hello.txt")" = "Hello World!" ]; then
            return
        fi
        kill -0 "${PID[$mode]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "the $mode server did not start:" >&2
    cat "$TMP/$mode.stderr" >&2
    exit 1
}

# CPU time the server has used (all its threads), in clock ticks.
cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# run MODE ROUND: one wrk run; appends requests/s to $TMP/MODE.rps and the
# server's CPU microseconds per request to $TMP/MODE.cpu.
run() {
    local mode=$1 out rps reqs lines="" t0 t1 cpu
    local log=$TMP/logs/access.log
    [ "$mode" = logger ] && : >"$log"
    t0=$(cpu_ticks "${PID[$mode]}")
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 10s \
        "http://127.0.0.1:${PORT[$mode]}/hello.txt")
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    if [ -z "$rps" ] || grep -q "Non-2xx" <<<"$out"; then
        echo "wrk failed against $mode:" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "$rps" >>"$TMP/$mode.rps"
    if [ "$mode" = logger ]; then
        sleep 0.5 # the logger thread empties its pipe (its CPU time counts too)
        lines=$(wc -l <"$log")
        lines=" (log: $lines lines for $reqs requests)"
    fi
    t1=$(cpu_ticks "${PID[$mode]}")
    cpu=$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$reqs" \
        'BEGIN {printf "%.2f", t * 1e6 / hz / n}')
    echo "$cpu" >>"$TMP/$mode.cpu"
    printf '  round %d  %-6s %9.0f req/s %7s us CPU/request%s\n' "$2" "$mode" "$rps" "$cpu" \
        "$lines"
}

median() {
    sort -n "$1" | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

make_conf logger
make_conf off
start logger
start off

echo "logger overhead: wrk -t$THREADS -c$CONNS -d${DURATION}s, 13-byte file, keep-alive," \
    "$WORKERS workers, $ROUNDS rounds each, format $FORMAT, $(nproc) CPUs," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then run off "$r"; run logger "$r"; else run logger "$r"; run off "$r"; fi
done

# Each round's pair ran side by side in time: their ratio sees the same load.
paste "$TMP/logger.rps" "$TMP/off.rps" | awk '{print $1 / $2}' >"$TMP/pairs"
pairs=$(median "$TMP/pairs")
off=$(median "$TMP/off.rps")
on=$(median "$TMP/logger.rps")
off_cpu=$(median "$TMP/off.cpu")
on_cpu=$(median "$TMP/logger.cpu")
awk -v on="$on" -v off="$off" 'BEGIN {
    printf "median requests/s: off %.0f, logger %.0f, ratio %.3f (%.1f%% fewer)\n",
        off, on, on / off, (1 - on / off) * 100
}'
awk -v p="$pairs" 'BEGIN {
    printf "median of the rounds ratios (logger / off, same round): %.3f (%.1f%% fewer)\n",
        p, (1 - p) * 100
}'
# On a shared machine requests/s follow the other loads; the server's own CPU
# time per request does much less so.
awk -v on="$on_cpu" -v off="$off_cpu" 'BEGIN {
    printf "median server CPU per request: off %.2f us, logger %.2f us, ratio %.3f\n",
        off, on, on / off
}'
if grep -q "dropped" "$TMP/logger.stderr"; then
    grep "dropped" "$TMP/logger.stderr"
fi
