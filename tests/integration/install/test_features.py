"""The optional features of the build the tests run against (docs/packaging.md,
"Optional features"): every feature whose library is installed on this machine
is in the build, so that no test skips for want of what the machine has (the
trap of a build configured before `make test` installed libnghttp2-dev: 87
HTTP/2 tests skipped in the normal lane and ran in the ASan lane).

What the build has is read from the build itself (the tls plugin, the
libraries bin/monkey links, the Duda packages), not only from its
CMakeCache.txt; BUILD/features.txt, which each configure writes, must agree
with it, and gives the reason of a feature left out. A feature turned off on
purpose (-DMK_H2=OFF) is reported as a skip, not a failure.

A scratch configure of the tree (configure only, no build) checks the
mechanism itself: configured with nghttp2 and libbrotlienc hidden from
pkg-config, then again with them visible, the cache turns MK_H2 and MK_BROTLI
on; a value given with -D stays; -DMK_H2=auto gives it back to the build.
Another one, with the proxy plugin built in, links bin/monkey with OpenSSL
(px_tls.c's tls:// upstreams).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, EMULATED, ROOT, STATIC

pytestmark = [
    pytest.mark.skipif(STATIC, reason="the static build leaves the libraries out on purpose"),
    pytest.mark.skipif(EMULATED, reason="cross build: the target's libraries are not the host's"),
]

MULTIARCH = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                           text=True).stdout.strip() or "x86_64-linux-gnu"


def header(path):
    return Path("/usr/include", path).exists()


def lib(name):
    """A development library (the .so link of a -dev package) is installed."""
    return any(Path(d, f"lib{name}.so").exists()
               for d in (f"/usr/lib/{MULTIARCH}", "/usr/lib", "/usr/local/lib"))


def pkg(spec):
    """pkg-config knows the module (and version: "libnghttp2 >= 1.52")."""
    if not shutil.which("pkg-config"):
        return None
    return subprocess.run(["pkg-config", "--exists", spec]).returncode == 0


def installed(check):
    """The library of a feature is installed: its header and .so, and its pkg-config
    module where it has one (with the version the build asks for)."""
    headers, libs, module = check
    ok = all(header(h) for h in headers) and all(lib(n) for n in libs)
    if ok and module:
        ok = pkg(module) is not False
    return ok


# feature: (headers, libraries, pkg-config module) as tools/deps.sh installs them
LIBRARIES = {
    "tls": (["openssl/ssl.h"], ["ssl", "crypto"], "openssl >= 3.0"),
    "acme": (["openssl/ssl.h", "cjson/cJSON.h"], ["ssl", "cjson"], None),
    "h2": (["nghttp2/nghttp2.h"], ["nghttp2"], "libnghttp2 >= 1.52"),
    "brotli": (["brotli/encode.h"], ["brotlienc"], "libbrotlienc"),
    "zlib": (["zlib.h"], ["z"], "zlib"),
    "pcre2": (["pcre2.h"], ["pcre2-8"], "libpcre2-8"),
    "unit-tests": (["cmocka.h"], ["cmocka"], None),
    "duda-redis-sessions": (["hiredis/async.h"], ["hiredis"], None),
    "duda-pkg-base64": (["openssl/ssl.h"], ["crypto"], None),
    "duda-pkg-sha1": (["openssl/ssl.h"], ["crypto"], None),
    "duda-pkg-sha256": (["openssl/ssl.h"], ["crypto"], None),
    "duda-pkg-websocket": (["openssl/ssl.h", "zlib.h"], ["crypto", "z"], None),
    "duda-pkg-broadcaster": (["openssl/ssl.h", "zlib.h"], ["crypto", "z"], None),
    "duda-pkg-json": (["cjson/cJSON.h"], ["cjson"], None),
    "duda-pkg-sqlite": (["sqlite3.h"], ["sqlite3"], None),
    "duda-pkg-redis": (["hiredis/async.h"], ["hiredis"], None),
    "duda-pkg-memcache": (["libmemcached-1.0/memcached.h"], ["memcached", "memcachedutil"], None),
}


# The lines of the parts that compile out and of the profile (cmake/profile.cmake).
PARTS = {"profile", "supervisor", "systemd", "compress", "fair", "realip", "rules", "reqid", "metrics",
         "small"}


def cache():
    path = BUILD / "CMakeCache.txt"
    return path.read_text() if path.exists() else ""


def needed(path):
    if not path.exists():
        return []
    p = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", p.stdout)


def duda_packages():
    return sorted(p.parent.name for p in (ROOT / "duda/packages").glob("*/package.cmake"))


def built():
    """{feature: True/False} from the build's files."""
    monkey = needed(BUILD / "bin/monkey")
    duda_so = BUILD / "plugins/monkey-duda.so"
    have = {
        "tls": (BUILD / "plugins/monkey-tls.so").exists(),
        "acme": any(s.startswith("libcjson.so") for s in needed(BUILD / "plugins/monkey-tls.so")),
        "h2": any(s.startswith("libnghttp2.so") for s in monkey),
        "brotli": any(s.startswith("libbrotlienc.so") for s in monkey),
        "zlib": any(s.startswith("libz.so") for s in monkey),
        "pcre2": any(s.startswith("libpcre2-8.so") for s in monkey),
        "unit-tests": any((BUILD / "tests").glob("test_http_parser*")),
    }
    if duda_so.exists():
        have["duda-redis-sessions"] = any(s.startswith("libhiredis.so") for s in needed(duda_so))
        for name in duda_packages():
            have[f"duda-pkg-{name}"] = (BUILD / "duda-packages" / f"{name}.dpkg").exists()
    return have


def features_txt():
    """BUILD/features.txt as {name: (state, why)}; {} without one."""
    path = BUILD / "features.txt"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, state, why = line.split("\t", 2)
            out[name] = (state, why)
    return out


def unit_tests_wanted():
    return "MK_TESTS:BOOL=OFF" not in cache()


def test_build_has_every_feature_whose_library_is_installed():
    notes = features_txt()
    have = built()
    if not unit_tests_wanted():
        have.pop("unit-tests")
    missing, chosen = [], []
    for feature, present in sorted(have.items()):
        if present or feature not in LIBRARIES or not installed(LIBRARIES[feature]):
            continue
        why = notes.get(feature, ("off", "no features.txt: configured before it existed"))[1]
        (chosen if why.endswith("=OFF given") else missing).append(f"{feature} ({why})")
    assert not missing, (f"{BUILD} lacks what this machine has installed: {', '.join(missing)}; "
                         f"configure it again (make reconfigure)")
    if chosen:
        pytest.skip(f"turned off on purpose: {', '.join(chosen)}")


def test_features_txt_matches_the_build():
    notes = features_txt()
    assert notes, f"no {BUILD}/features.txt"
    have = built()
    for feature, present in have.items():
        assert feature in notes, feature
        assert notes[feature][0] == ("on" if present else "off"), (feature, notes[feature])
    # Every feature listed is one this test knows how to look for (a new Duda package
    # gets its line in LIBRARIES), or a part of the server (cmake/profile.cmake), which
    # install/test_profile.py checks against monkey -v.
    assert set(notes) - {"libmonkey", "duda"} - PARTS <= set(LIBRARIES), \
        set(notes) - set(LIBRARIES) - PARTS
    for part in PARTS - {"profile"}:
        assert notes.get(part, ("",))[0] in ("on", "off"), (part, notes.get(part))


# ---- the mechanism, on a scratch configure of the tree ---------------------------------------

HIDDEN = ("libnghttp2.pc", "libbrotlienc.pc")


def pc_dirs():
    p = subprocess.run(["pkg-config", "--variable", "pc_path", "pkg-config"], capture_output=True,
                       text=True)
    return [d for d in p.stdout.strip().split(":") if d]


def configure(build, *args, env=None):
    p = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DMK_TESTS=OFF", *args],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    text = (build / "CMakeCache.txt").read_text()
    return {k: v for k, v in re.findall(r"^(MK_\w+):\w+=(.*)$", text, re.M)}


@pytest.fixture(scope="module")
def hidden_pkgconfig(tmp_path_factory):
    """A pkg-config path with the machine's modules but libnghttp2 and libbrotlienc."""
    if not shutil.which("pkg-config") or not all(pkg(m) for m in ("libnghttp2 >= 1.52",
                                                                     "libbrotlienc")):
        pytest.skip("needs pkg-config, libnghttp2-dev and libbrotli-dev (tools/deps.sh test)")
    d = tmp_path_factory.mktemp("pkgconfig")
    for src in pc_dirs():
        for pc in Path(src).glob("*.pc") if Path(src).is_dir() else ():
            if pc.name not in HIDDEN and not (d / pc.name).exists():
                (d / pc.name).symlink_to(pc)
    return {**os.environ, "PKG_CONFIG_LIBDIR": str(d)}


def test_a_library_installed_after_the_first_configure_is_taken(tmp_path, hidden_pkgconfig):
    build = tmp_path / "build"
    first = configure(build, env=hidden_pkgconfig)
    assert (first["MK_H2"], first["MK_BROTLI"]) == ("OFF", "OFF")
    before = (build / "features.txt").read_text() if (build / "features.txt").exists() else ""
    again = configure(build)  # `make reconfigure` once make test installed them
    assert (again["MK_H2"], again["MK_BROTLI"]) == ("ON", "ON")
    assert "h2\toff\tnot found: libnghttp2" in before
    assert "h2\ton\tfound: libnghttp2 " in (build / "features.txt").read_text()


def test_a_value_given_is_kept_and_auto_gives_it_back(tmp_path, hidden_pkgconfig):
    build = tmp_path / "build"
    assert configure(build, "-DMK_H2=OFF")["MK_H2"] == "OFF"
    assert configure(build)["MK_H2"] == "OFF"  # the user's, from then on
    given = (build / "features.txt").read_text() if (build / "features.txt").exists() else ""
    assert configure(build, "-DMK_H2=auto")["MK_H2"] == "ON"
    assert "h2\toff\tMK_H2=OFF given" in given
    assert configure(build, env=hidden_pkgconfig)["MK_H2"] == "ON"  # found once: cached
    # Edited in the cache (as ccmake does) is the user's too.
    cache_file = build / "CMakeCache.txt"
    cache_file.write_text(cache_file.read_text().replace("MK_BROTLI:BOOL=ON", "MK_BROTLI:BOOL=OFF"))
    assert configure(build)["MK_BROTLI"] == "OFF"


def test_on_without_the_library_stops_the_configure(tmp_path, hidden_pkgconfig):
    p = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tmp_path / "b"), "-DMK_TESTS=OFF",
                        "-DMK_H2=ON"], capture_output=True, text=True, timeout=300,
                       env=hidden_pkgconfig)
    assert p.returncode != 0
    assert "MK_H2=ON, but libnghttp2 >= 1.52 (libnghttp2-dev) is not found" in " ".join(
        p.stderr.split())


def monkey_link_line(build):
    """What bin/monkey of a configured (not built) tree links: Ninja's or Make's line."""
    ninja = build / "build.ninja"
    if ninja.exists():
        m = re.search(r"^build bin/monkey: .*\n((?:  .*\n)*)", ninja.read_text(), re.M)
        return m.group(1) if m else ""
    link = build / "CMakeFiles" / "monkey.dir" / "link.txt"
    return link.read_text() if link.exists() else ""


def test_a_built_in_proxy_links_openssl(tmp_path):
    # px_tls.c built into monkeylib calls OpenSSL: the binary must link it
    # (the objects of the built-in plugins bring no libraries of their own along)
    if not pkg("openssl >= 3.0"):
        pytest.skip("no OpenSSL 3 (libssl-dev): a built-in proxy has no tls:// upstreams")
    build = tmp_path / "build"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    cache = configure(build, *gen, "-DMK_DUDA=OFF", "-DMK_BUILTIN_PLUGINS=proxy")
    assert cache["MK_TLS"] == "ON", cache
    line = monkey_link_line(build)
    assert line, "no link line of bin/monkey"
    assert "libssl" in line or "-lssl" in line, line
