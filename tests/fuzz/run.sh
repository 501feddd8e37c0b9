#!/bin/sh
# Run the libFuzzer targets one after the other (what `make fuzz` does).
#
#   tests/fuzz/run.sh BUILD SECONDS [TARGET...]
#
# BUILD is a build directory configured with CC=clang -DMK_FUZZ=ON (the
# targets are in BUILD/fuzz/); SECONDS is the time given to each target;
# TARGET names (http_request, path, fields, config, gw_head, fcgi, supervisor, h2,
# duda_json, duda_base64, duda_session, duda_qs, ws, accept_encoding, priority,
# route, util, tls, acme, logger, h2_upgrade, auth_users, fcgi_responder, px_http,
# px_fields, proxy_protocol, realip, rules, reqid,
# ratelimit) limit the run to those.
#
# Each target works on a scratch corpus, BUILD/fuzz-corpus/TARGET, seeded from
# the committed tests/fuzz/corpus/TARGET; what it finds stays there (and is
# reused by the next run) and is never merged back into the repository. Logs
# go to BUILD/fuzz-logs/TARGET.log, crashing inputs to
# BUILD/fuzz-artifacts/TARGET/. One summary line is printed per target; the
# exit status is non-zero when any target found a crash, a leak or a timeout.
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD SECONDS [TARGET...]" >&2
    exit 2
fi
build=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
# fuzz_h2 exists when the build has HTTP/2 (nghttp2).
default="http_request path fields config gw_head fcgi supervisor duda_session duda_qs ws
accept_encoding priority route util tls logger h2_upgrade auth_users
fcgi_responder px_http px_fields rules ratelimit acme"
[ -x "$build/fuzz/fuzz_h2" ] && default="$default h2"
# fuzz_proxy_protocol and fuzz_realip exist when the build has the client's
# address behind a balancer (MK_REALIP).
for t in proxy_protocol realip; do
    [ -x "$build/fuzz/fuzz_$t" ] && default="$default $t"
done
# fuzz_reqid exists when the build has request IDs and trace context (MK_REQID).
[ -x "$build/fuzz/fuzz_reqid" ] && default="$default reqid"
# The Duda packages' targets exist when their libraries are installed.
for t in duda_json duda_base64; do
    [ -x "$build/fuzz/fuzz_$t" ] && default="$default $t"
done
targets=${*:-$default}

failed=0
for t in $targets; do
    bin="$build/fuzz/fuzz_$t"
    if [ ! -x "$bin" ]; then
        echo "fuzz_$t: not built ($bin)" >&2
        failed=1
        continue
    fi
    corpus="$build/fuzz-corpus/$t"
    artifacts="$build/fuzz-artifacts/$t"
    log="$build/fuzz-logs/$t.log"
    mkdir -p "$corpus" "$artifacts" "$build/fuzz-logs"
    cp "$here/corpus/$t/"* "$corpus/"

    set -- -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/"
    case $t in
        http_request) set -- "$@" -dict="$here/http.dict" -max_len=65536 ;;
        fields) set -- "$@" -dict="$here/http.dict" ;;
        config) set -- "$@" -dict="$here/config.dict" ;;
        h2) set -- "$@" -max_len=16384 ;;
    esac

    before=$(ls "$artifacts" | wc -l)
    "$bin" "$@" "$corpus" >"$log" 2>&1
    rc=$?
    after=$(ls "$artifacts" | wc -l)

    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
    cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    if [ "$rc" -eq 0 ] && [ "$after" -eq "$before" ]; then
        status=ok
    else
        status="FAILED (exit $rc, see $log and $artifacts/)"
        failed=1
    fi
    printf 'fuzz_%-13s %ss: %s execs, cov %s, ft %s, corpus %s: %s\n' "$t" "$seconds" \
        "${runs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$status"
done
exit $failed
