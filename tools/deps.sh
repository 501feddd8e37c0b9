#!/bin/sh
# What building and testing Monkey needs, from Debian packages.
#
#   tools/deps.sh build      check only: a C compiler and cmake (never installs)
#   tools/deps.sh run        + libssl-dev and openssl: make run serves HTTPS on 2443
#   tools/deps.sh test       + ninja, cmocka, python3 with pytest, curl, clang-format, musl,
#                            taskset, libssl-dev and openssl (plugins/tls), php-fpm and
#                            php-cgi (plugins/fastcgi, plugins/cgi)
#   tools/deps.sh fuzz       + clang with libFuzzer
#   tools/deps.sh static     + musl (musl-gcc) for the static embedded build
#   tools/deps.sh bench      + the peers and load tools of bench/
#   tools/deps.sh deb        + debhelper, dpkg-dev, lintian and fakeroot for
#                            make deb and make deb-test
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
    # The tls plugin and the localhost certificate made at build time.
    need /usr/include/openssl/ssl.h libssl-dev
    need openssl openssl
    [ -n "$want" ] || exit 0
    stage=run-only
fi
if [ "$stage" = build ]; then
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
    # plugins/fastcgi and plugins/cgi tests: Debian 12's php-fpm8.2 (package
    # php-fpm) run by the tests with their own pool, and php-cgi.
    need /usr/sbin/php-fpm8.2 php-fpm
    need php-cgi php-cgi
    need /usr/bin/python3 python3
    # pytest for whichever python3 runs the tests: the Debian one when the
    # first python3 on PATH has none.
    if ! python3 -c 'import pytest' >/dev/null 2>&1 && \
       ! /usr/bin/python3 -c 'import pytest' >/dev/null 2>&1; then
        want="$want python3-pytest"
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
    need dh debhelper
    need dpkg-buildpackage dpkg-dev
    need lintian lintian
    need fakeroot fakeroot
fi
if [ "$stage" = bench ]; then
    # bench/bench.py: load tools, the peers, node.js for bench/node/hello.js,
    # valgrind (callgrind_control) for --callgrind, strace for --syscalls and
    # gnuplot (pngcairo) for the charts; the openssl tool makes the tls_*
    # scenarios' certificate.
    need wrk wrk
    need openssl openssl
    need ab apache2-utils
    need h2load nghttp2-client
    need nginx nginx-light
    need lighttpd lighttpd
    need h2o h2o
    need node nodejs
    need valgrind valgrind
    need strace strace
    need callgrind_control valgrind
    need gnuplot gnuplot-nox
fi
fi # run-only

[ -z "$want" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps: missing:$want (run 'sudo tools/deps.sh $stage' or install them)" >&2
    exit 1
fi
echo "deps: installing with apt-get:$want"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $want >/dev/null
echo "deps: installed:$want"
