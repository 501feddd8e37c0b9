#!/bin/sh
# What building and testing Monkey needs, from Debian packages.
#
#   tools/deps.sh build      check only: a C compiler and cmake (never installs); names the
#                            optional libraries missing (Duda's redis and memcache
#                            packages: libhiredis-dev, libmemcached-dev)
#   tools/deps.sh run        + libssl-dev and openssl, libnghttp2-dev and pkg-config:
#                            make run serves HTTPS and HTTP/2 (h2 by ALPN) on 2443
#   tools/deps.sh test       + ninja, cmocka, python3 with pytest, curl, clang-format, musl,
#                            taskset, wrk (the supervisor's crash test), libssl-dev and
#                            openssl (plugins/tls), libnghttp2-dev
#                            (HTTP/2), nghttp and h2load, Python's h2, h2spec (built with
#                            Go: tools/h2spec/go.mod; a failure is an error), Pebble
#                            and pebble-challtestsrv v2.10.3 (ACME, built with Go into
#                            /usr/local/bin), php-fpm
#                            and php-cgi (plugins/fastcgi, plugins/cgi), haproxy (in
#                            front of the server: the PROXY protocol), pkg-config (the
#                            libmonkey example), zlib1g-dev and libbrotli-dev (static
#                            files compressed on the fly, gzip and br) with Python's
#                            brotli, libpcre2-dev (Regex of request rules), Python's
#                            websockets and
#                            chromium (the Duda websocket packages and chat), redis-server
#                            and memcached (Duda's redis and memcache packages),
#                            inotify-tools (duda -w watches a service with inotifywait), and
#                            optionally libcjson-dev, libsqlite3-dev, libhiredis-dev and
#                            libmemcached-dev (Duda's json, sqlite, redis, memcache packages)
#   tools/deps.sh fuzz       + clang with libFuzzer (make fuzz, and make test, which
#                            builds every target and runs each for a moment)
#   tools/deps.sh static     + musl (musl-gcc) for the static embedded build
#   tools/deps.sh bench      + the peers and load tools of bench/ (node's ws and
#                            better-sqlite3 with npm)
#   tools/deps.sh deb        + debhelper, dpkg-dev, lintian and fakeroot for
#                            make deb and make deb-test, and the libraries of
#                            debian/control's Build-Depends
#   tools/deps.sh cross ARCH + for make cross and make cross-test (ARCH aarch64
#                            or armhf): the cross compiler, qemu-user-static,
#                            and through multiarch (dpkg --add-architecture)
#                            the architecture's libssl-dev, libcrypt-dev and
#                            libcmocka-dev
#
# Except for "build", what is missing is installed with apt-get when run as
# root, and every package is named before it is installed. Without root it
# prints what is missing and fails.
set -eu

want=""
need() { # need COMMAND-or-FILE PACKAGE
    case "$1" in
        /*) [ -e "$1" ] && return 0 ;;
        *) command -v "$1" >/dev/null 2>&1 && return 0 ;;
    esac
    want="$want $2"
}

stage=${1:-test}
need cc gcc
need cmake cmake
need /usr/include/crypt.h libcrypt-dev # the auth plugin (a dependency of libc6-dev)
if [ "$stage" = run ]; then
    # The tls plugin and the localhost certificate made at build time, and
    # HTTP/2 (nghttp2, found through pkg-config): the README's quick start
    # serves https://localhost:2443 with h2.
    need /usr/include/openssl/ssl.h libssl-dev
    need openssl openssl
    need /usr/include/nghttp2/nghttp2.h libnghttp2-dev
    need pkg-config pkgconf
    [ -n "$want" ] || exit 0
    stage=run-only
fi
# Optional: Duda's redis package and Redis session store (hiredis) and its
# memcache package (libmemcached); without them they and their tests are left out.
duda_optional=""
[ -e /usr/include/hiredis/async.h ] || duda_optional="$duda_optional libhiredis-dev"
[ -e /usr/include/libmemcached-1.0/memcached.h ] || duda_optional="$duda_optional libmemcached-dev"
if [ "$stage" = build ]; then
    [ -z "$duda_optional" ] || echo "deps: optional, not installed:$duda_optional" >&2
    [ -z "$want" ] && exit 0
    echo "deps: building needs:$want (as root: apt-get install$want)" >&2
    exit 1
fi
if [ "$stage" != run-only ]; then
need ninja ninja-build
need /usr/include/cmocka.h libcmocka-dev
if [ "$stage" != build ]; then
    need musl-gcc musl-tools
    need curl curl
    need /usr/include/openssl/ssl.h libssl-dev # plugins/tls
    need openssl openssl # the test certificates
    need clang-format clang-format
    need taskset util-linux # make test: the integration suite pinned to one CPU
    # process/test_supervisor.py kills the server under wrk's load and reads wrk's
    # count of refused connects; it fails without wrk.
    need wrk wrk
    # plugins/fastcgi and plugins/cgi tests: Debian 12's php-fpm8.2 (package
    # php-fpm) run by the tests with their own pool, and php-cgi.
    need /usr/sbin/php-fpm8.2 php-fpm
    need php-cgi php-cgi
    # Listen ... proxy_protocol and RealIPFrom: HAProxy in front of the server
    # (conn/test_proxy_protocol.py, conn/test_realip.py, the recipe of docs/load-balancer.md).
    need /usr/sbin/haproxy haproxy
    # plugins/proxy: node's http module as one of the upstreams
    # (gateway/test_proxy_upstreams.py).
    need node nodejs
    # Duda's redis and memcache packages: their libraries (optional) and the
    # servers their tests start.
    optional="${optional:-}$duda_optional"
    need redis-server redis-server
    need memcached memcached
    # duda -w rebuilds a service when its sources change: with inotifywait
    # when it is there (its tests check both ways), else by polling.
    need inotifywait inotify-tools
    need /usr/bin/python3 python3
    # pytest for whichever python3 runs the tests: the Debian one when the
    # first python3 on PATH has none.
    if ! python3 -c 'import pytest' >/dev/null 2>&1 && \
       ! /usr/bin/python3 -c 'import pytest' >/dev/null 2>&1; then
        want="$want python3-pytest"
    fi
    # HTTP/2: nghttp2 for the server, its client tools and Python's h2 for the tests.
    need /usr/include/nghttp2/nghttp2.h libnghttp2-dev
    # Duda's json and sqlite packages (duda/packages/): optional, the build
    # leaves them (and the tests their tests) out without these.
    [ -e /usr/include/cjson/cJSON.h ] || optional="${optional:-} libcjson-dev"
    [ -e /usr/include/sqlite3.h ] || optional="${optional:-} libsqlite3-dev"
    need nghttp nghttp2-client
    need h2load nghttp2-client
    # install/test_embed.py: the example is built against the installed libmonkey.
    need pkg-config pkgconf
    # h2spec is built with Go (below, after the packages): Debian's Go when
    # there is none.
    [ "$stage" = test ] && need go golang-go
    # The websocket packages (duda/packages/websocket): zlib for
    # permessage-deflate; their tests use Python's websockets and drive the
    # chat example in headless Chromium.
    need /usr/include/zlib.h zlib1g-dev
    # Compression on the fly (server/static/static_compress.c): br with libbrotli
    # (gzip with the zlib above); its tests decode br with Python's brotli.
    need /usr/include/brotli/encode.h libbrotli-dev
    # Regex conditions of request rules ([RULE], server/http/rules.c).
    need /usr/include/pcre2.h libpcre2-dev
    need chromium chromium
    # The metrics of the control plugin (MetricsPath): Prometheus itself
    # scrapes them and answers queries, and promtool checks the format.
    need prometheus prometheus
    # websockets.sync and websockets.asyncio (websockets 13 and later): Debian
    # 12's python3-websockets (10.4) has neither, so it comes from PyPI for
    # whichever python3 runs the tests.
    ws_pip=""
    ws_new='import websockets.sync.client, websockets.asyncio.client'
    if ! python3 -c "$ws_new" >/dev/null 2>&1; then
        if python3 -c 'import pytest' >/dev/null 2>&1 && \
           [ "$(command -v python3)" != /usr/bin/python3 ]; then
            ws_pip=yes # the python3 that runs the tests is not Debian's: pip
        elif ! /usr/bin/python3 -c "$ws_new" >/dev/null 2>&1; then
            ws_pip=debian # Debian's python3: pip beside its own packages
            need /usr/lib/python3/dist-packages/pip/__init__.py python3-pip
        fi
    fi
    brotli_pip=""
    if ! python3 -c 'import brotli' >/dev/null 2>&1; then
        if python3 -c 'import pytest' >/dev/null 2>&1 && \
           [ "$(command -v python3)" != /usr/bin/python3 ]; then
            brotli_pip=yes # the python3 that runs the tests is not Debian's: pip
        else
            want="$want python3-brotli"
        fi
    fi
    h2_pip=""
    if ! python3 -c 'import h2' >/dev/null 2>&1; then
        if python3 -c 'import pytest' >/dev/null 2>&1 && \
           [ "$(command -v python3)" != /usr/bin/python3 ]; then
            h2_pip=yes # the python3 that runs the tests is not Debian's: pip
        else
            want="$want python3-h2"
        fi
    fi
fi
if [ "$stage" = static ]; then
    need musl-gcc musl-tools
fi
if [ "$stage" = fuzz ]; then
    need clang clang
    need /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev
fi
if [ "$stage" = deb ]; then
    # make deb, make deb-test (docs/packaging.md): what debian/control's
    # Build-Depends name, and the tools that build and check the packages.
    need make build-essential
    need /usr/include/openssl/ssl.h libssl-dev
    need openssl openssl
    need /usr/include/nghttp2/nghttp2.h libnghttp2-dev
    need /usr/include/cjson/cJSON.h libcjson-dev
    need /usr/include/sqlite3.h libsqlite3-dev
    need /usr/include/zlib.h zlib1g-dev
    need /usr/include/brotli/encode.h libbrotli-dev
    need /usr/include/pcre2.h libpcre2-dev
    need /usr/include/hiredis/async.h libhiredis-dev
    need /usr/include/libmemcached-1.0/memcached.h libmemcached-dev
    need dh debhelper
    need dpkg-buildpackage dpkg-dev
    need lintian lintian
    need fakeroot fakeroot
fi
if [ "$stage" = cross ]; then
    # make cross, make cross-test (docs/packaging.md, "ARM"): Debian's cross
    # compiler and its C library, the emulator, and the target's libcrypt
    # (the auth plugin) through multiarch (dpkg --add-architecture). The
    # target's libssl-dev (the tls plugin), libcmocka-dev (the unit tests),
    # libnghttp2-dev (HTTP/2), zlib1g-dev and libbrotli-dev (compression) and
    # libpcre2-dev (Regex of request rules) are
    # installed after them when they can be: a multiarch -dev package needs
    # the very version of the host's, which a mirror does not always have for
    # every architecture, and one that would upgrade the host's package to
    # match (and what depends on it) is not installed (below); without them
    # the cross build leaves that part out.
    case "${2:-}" in
        aarch64) triplet=aarch64-linux-gnu; debarch=arm64; qemu=qemu-aarch64-static ;;
        armhf) triplet=arm-linux-gnueabihf; debarch=armhf; qemu=qemu-arm-static ;;
        *) echo "deps: cross needs ARCH aarch64 or armhf" >&2; exit 2 ;;
    esac
    need $triplet-gcc gcc-$triplet
    need /usr/$triplet/include/stdio.h libc6-dev-$debarch-cross
    need $qemu qemu-user-static
    need /usr/lib/$triplet/libcrypt.so libcrypt-dev:$debarch
    need /usr/lib/$triplet/libc.so.6 libc6:$debarch # the loader qemu runs the programs with
    need openssl openssl # the test certificates, made on the host
    optional=""
    [ -e /usr/include/$triplet/openssl/opensslconf.h ] || optional="$optional libssl-dev:$debarch"
    [ -e /usr/lib/$triplet/libcmocka.so ] || optional="$optional libcmocka-dev:$debarch"
    [ -e /usr/lib/$triplet/libnghttp2.so ] || optional="$optional libnghttp2-dev:$debarch"
    [ -e /usr/lib/$triplet/libz.so ] || optional="$optional zlib1g-dev:$debarch"
    [ -e /usr/lib/$triplet/libbrotlienc.so ] || optional="$optional libbrotli-dev:$debarch"
    [ -e /usr/lib/$triplet/libpcre2-8.so ] || optional="$optional libpcre2-dev:$debarch"
    if [ -n "$want$optional" ] && [ "$(id -u)" = 0 ] &&
       ! dpkg --print-foreign-architectures | grep -qx "$debarch"; then
        echo "deps: dpkg --add-architecture $debarch"
        dpkg --add-architecture "$debarch"
    fi
    stage="cross $2"
fi
if [ "$stage" = bench ]; then
    # bench/bench.py: load tools, the peers (and HAProxy, bench/proxy.py's),
    # node.js for bench/node/hello.js,
    # valgrind (callgrind_control) for --callgrind, strace for --syscalls, perf
    # for --perf-syscalls and gnuplot (pngcairo) for the charts; the openssl
    # tool makes the tls_* scenarios' certificate.
    need wrk wrk
    need openssl openssl
    need ab apache2-utils
    need h2load nghttp2-client
    need nginx nginx-light
    need lighttpd lighttpd
    need h2o h2o
    need /usr/sbin/haproxy haproxy # bench/proxy.py: a peer of the proxy plugin
    need node nodejs
    need npm npm # bench/node/package.json: ws and better-sqlite3 for bench/node/
    need valgrind valgrind
    need strace strace
    need perf linux-perf
    need callgrind_control valgrind
    need gnuplot gnuplot-nox
fi
fi # run-only

optional=${optional:-}
if [ -n "$want$optional" ]; then
    if [ "$(id -u)" != 0 ]; then
        if [ -n "$want" ]; then
            echo "deps: missing:$want (run 'sudo tools/deps.sh $stage' or install them)" >&2
            exit 1
        fi
        echo "deps: not installed (optional):$optional" >&2
    else
        export DEBIAN_FRONTEND=noninteractive
        # An index that fails to download (a mirror in sync) is not fatal:
        # the install below fails if it needed it.
        apt-get update -q >/dev/null || echo "deps: apt-get update reported errors" >&2
        if [ -n "$want" ]; then
            echo "deps: installing with apt-get:$want"
            # shellcheck disable=SC2086
            apt-get install -y -q --no-install-recommends $want >/dev/null
            echo "deps: installed:$want"
        fi
        for p in $optional; do
            # PACKAGE:ARCH of another architecture: only in the version of
            # the host's PACKAGE, when the host has it (apt would upgrade the
            # host's to match, and what depends on it).
            host=$(dpkg-query -W -f '${Version}' "${p%%:*}:$(dpkg --print-architecture)" 2>/dev/null || true)
            cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ { print $2 }')
            if [ "$p" != "${p%%:*}" ] && [ -n "$host" ] && [ "$host" != "$cand" ]; then
                echo "deps: $p is $cand, the host's ${p%%:*} $host: left out" \
                     "(apt-get install --only-upgrade ${p%%:*} first, to have it)" >&2
                continue
            fi
            if apt-get install -y -q --no-install-recommends "$p" >/dev/null 2>&1; then
                echo "deps: installed: $p"
            else
                echo "deps: $p cannot be installed (apt-get install $p says why): left out" >&2
            fi
        done
    fi
fi

if [ "${ws_pip:-}" = yes ]; then
    echo "deps: installing Python's websockets with pip for $(command -v python3)"
    python3 -m pip install -q 'websockets>=13' || { echo "deps: pip install websockets failed" >&2; exit 1; }
elif [ "${ws_pip:-}" = debian ]; then
    echo "deps: installing Python's websockets with pip for /usr/bin/python3"
    /usr/bin/python3 -m pip install -q --break-system-packages 'websockets>=13' ||
        { echo "deps: pip install websockets failed" >&2; exit 1; }
fi
if [ -n "${brotli_pip:-}" ]; then
    echo "deps: installing Python's brotli with pip for $(command -v python3)"
    python3 -m pip install -q brotli || { echo "deps: pip install brotli failed" >&2; exit 1; }
fi
if [ -n "${h2_pip:-}" ]; then
    echo "deps: installing Python's h2 with pip for $(command -v python3)"
    python3 -m pip install -q h2 || { echo "deps: pip install h2 failed" >&2; exit 1; }
fi
# h2spec (tests/integration/h2/test_h2_spec.py), built with Go from the
# module versions pinned in tools/h2spec/go.mod and go.sum (fetched through
# the Go module proxy): `go install ...@latest` would take the newest
# golang.org/x/sys, which Debian 12's Go (1.19) cannot build. It goes into
# the first GOPATH's bin/, where the test looks. Not building it is an
# error: make test tells the h2spec test that its tools are there
# (MK_TEST_DEPS=1), and the test fails without it rather than skip.
if [ "$stage" = test ] && ! command -v h2spec >/dev/null 2>&1; then
    if ! command -v go >/dev/null 2>&1; then
        echo "deps: no go to build h2spec with (apt-get install golang-go)" >&2
        exit 1
    fi
    gopath=$(go env GOPATH)
    gobin="${gopath%%:*}/bin"
    if [ ! -x "$gobin/h2spec" ]; then
        echo "deps: building h2spec (tools/h2spec/go.mod) into $gobin with $(go version)"
        if ! (cd "$(dirname "$0")/h2spec" &&
              go build -o "$gobin/h2spec" github.com/summerwind/h2spec/cmd/h2spec); then
            echo "deps: building h2spec failed (above)" >&2
            exit 1
        fi
    fi
fi
# Pebble, Let's Encrypt's test ACME CA, and its DNS server pebble-challtestsrv
# (tests/integration/tls/test_acme.py), pinned, built with Go through the Go
# module proxy into /usr/local/bin, where the test looks. Pebble 2.10 needs a
# newer Go than Debian 12's: /usr/local/go/bin/go when it is there. Not
# building them is an error, as for h2spec.
pebble_version=v2.10.3
if [ "$stage" = test ] && { [ ! -x /usr/local/bin/pebble ] || [ ! -x /usr/local/bin/pebble-challtestsrv ]; }; then
    gocmd=go
    [ -x /usr/local/go/bin/go ] && gocmd=/usr/local/go/bin/go
    if ! command -v "$gocmd" >/dev/null 2>&1; then
        echo "deps: no go to build pebble with" >&2
        exit 1
    fi
    for tool in pebble pebble-challtestsrv; do
        echo "deps: building $tool $pebble_version into /usr/local/bin with $($gocmd version)"
        if ! GOBIN=/usr/local/bin "$gocmd" install \
                "github.com/letsencrypt/pebble/v2/cmd/$tool@$pebble_version"; then
            echo "deps: building $tool failed (above)" >&2
            exit 1
        fi
    done
fi
# The node peers of bench/ (bench/node/package.json): ws for bench/websocket.py
# and better-sqlite3 for bench/duda_packages.py, from npm into
# bench/node/node_modules (better-sqlite3 is built with node-gyp when npm has
# no prebuilt binary for this node).
if [ "$stage" = bench ] && command -v npm >/dev/null 2>&1; then
    node_dir=$(cd "$(dirname "$0")/../bench/node" && pwd)
    if [ ! -d "$node_dir/node_modules/better-sqlite3" ] || [ ! -d "$node_dir/node_modules/ws" ]; then
        echo "deps: installing ws and better-sqlite3 with npm install --prefix $node_dir"
        npm install --prefix "$node_dir" --no-audit --no-fund >/dev/null 2>&1 ||
            echo "deps: npm install failed: bench/websocket.py and bench/duda_packages.py run without node" >&2
    fi
fi
exit 0
