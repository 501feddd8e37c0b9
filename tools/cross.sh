#!/bin/sh
# The ARM cross builds (docs/packaging.md, "ARM"), after make cross built them.
#
#   tools/cross.sh sizes ARCH BUILD   stripped copies of the server, the tools
#                                     and the plugins in BUILD/stripped/, and
#                                     their sizes
#   tools/cross.sh test ARCH BUILD    the unit tests (ctest runs them under
#                                     the toolchain's emulator) and the
#                                     integration suite against the emulated
#                                     server
#
# The integration suite starts BUILD/bin/* directly: BUILD/emu/ is a copy of
# BUILD made of symbolic links whose bin/ and tests/ hold one script per
# program that runs it under qemu-user-static, and the suite runs with MK_BUILD=BUILD/emu
# and MK_EMULATED=1 (conftest.py: a larger SLOW factor).
set -eu

cmd=$1 arch=$2 build=$(cd "$3" && pwd)
case "$arch" in
    aarch64) triplet=aarch64-linux-gnu qemu=qemu-aarch64-static ;;
    armhf) triplet=arm-linux-gnueabihf qemu=qemu-arm-static ;;
    *) echo "cross.sh: ARCH aarch64 or armhf" >&2; exit 2 ;;
esac

# Whether FILE is an ELF object (bin/ also holds scripts, such as duda).
is_elf() {
    [ "$(head -c 4 "$1" | tail -c 3)" = ELF ]
}

sizes() {
    rm -rf "$build/stripped" && mkdir -p "$build/stripped"
    for f in "$build"/bin/* "$build"/plugins/*.so; do
        is_elf "$f" || continue
        cp "$f" "$build/stripped/" && $triplet-strip "$build/stripped/${f##*/}"
    done
    echo "== $arch: stripped sizes (bytes), $build/stripped/"
    (cd "$build/stripped" && ls -l | awk 'NR > 1 { printf "%9d  %s\n", $5, $9 }')
}

# DIR of the emulated tree: the programs of BUILD/DIR as scripts that run
# them under the emulator, everything else as links.
emu_dir() {
    mkdir -p "$emu/$1"
    for f in "$build/$1"/*; do
        if [ -f "$f" ] && [ -x "$f" ] && is_elf "$f"; then
            printf '#!/bin/sh\nexec %s %s "$@"\n' "$qemu" "$f" >"$emu/$1/${f##*/}"
            chmod +x "$emu/$1/${f##*/}"
        else
            ln -s "$f" "$emu/$1/${f##*/}"
        fi
    done
}

emu_tree() {
    emu=$build/emu
    rm -rf "$emu" && mkdir -p "$emu"
    for f in "$build"/*; do
        case "${f##*/}" in bin | tests | examples | emu) ;; *) ln -s "$f" "$emu/${f##*/}" ;; esac
    done
    emu_dir bin
    emu_dir tests
    emu_dir examples
    # cmake --install (install/test_install.py) writes it into BUILD later.
    [ -e "$emu/install_manifest.txt" ] || ln -s "$build/install_manifest.txt" "$emu/"
}

run_tests() {
    emu_tree
    failed=""
    echo "== $arch: unit tests under $qemu"
    (cd "$build" && ctest --output-on-failure -j "${JOBS:-2}") || failed="$failed unit"
    echo "== $arch: integration tests, the server under $qemu"
    # shellcheck disable=SC2086
    MK_BUILD="$build/emu" MK_EMULATED=1 python3 -m pytest -q tests/integration \
        --ignore=tests/integration/install/test_deb.py ${PYTEST_ARGS:-} || failed="$failed integration"
    [ -z "$failed" ] || { echo "== $arch: failed:$failed" >&2; exit 1; }
}

case "$cmd" in
    sizes) sizes ;;
    test) run_tests ;;
    *) echo "cross.sh: sizes or test" >&2; exit 2 ;;
esac
