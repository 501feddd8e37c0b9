#!/usr/bin/env python3
"""What each part of the server costs in the embedded profile, in bytes.

    tools/size_table.py [--toolchain cmake/toolchain-armhf.cmake] [--dir DIR]

Builds `monkey` in the embedded profile (MK_PROFILE=embedded), then the
same with one part added back or one plugin or size flag taken away, each
in a build directory of its own under DIR (default: a temporary one), and
prints a Markdown table: the stripped file, its text + data (what is
loaded: the file also holds headers and page padding), and the difference
from the profile. docs/packaging.md ("What each part costs") holds its
output. It configures and builds about twenty times: a few minutes on two
cores.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import size_budget  # noqa: E402

PLUGINS = ["logger", "access", "dirlisting", "control"]

# (label, -D options added to the profile's)
VARIANTS = [
    ("the embedded profile", []),
    ("+ the supervisor (with systemd support, which it needs)", ["-DMK_SUPERVISOR=ON", "-DMK_SYSTEMD=ON"]),
    ("+ systemd support", ["-DMK_SYSTEMD=ON"]),
    ("+ compression on the fly, no coding library", ["-DMK_COMPRESS=ON"]),
    ("+ compression on the fly with zlib (gzip)", ["-DMK_COMPRESS=ON", "-DMK_ZLIB=ON"]),
    ("+ the fair balancing mode", ["-DMK_FAIR=ON"]),
    ("+ the client's address behind a balancer (PROXY protocol, RealIPFrom)",
     ["-DMK_REALIP=ON"]),
    ("+ library mode (server/plugin/lib.c)", ["-DMK_LIBMONKEY=ON"]),
    ("+ metrics (request/metrics.c, the control plugin's MetricsPath)", ["-DMK_METRICS=ON"]),
    ("+ HTTP/2 (h2.c with nghttp2)", ["-DMK_H2=ON"]),
    ("+ every part above", ["-DMK_SUPERVISOR=ON", "-DMK_SYSTEMD=ON", "-DMK_COMPRESS=ON",
                            "-DMK_ZLIB=ON", "-DMK_FAIR=ON", "-DMK_REALIP=ON", "-DMK_LIBMONKEY=ON",
                            "-DMK_METRICS=ON", "-DMK_H2=ON"]),
]
for p in PLUGINS:
    rest = ";".join(q for q in PLUGINS if q != p)
    VARIANTS.append((f"- the {p} plugin", [f"-DMK_BUILTIN_PLUGINS={rest}"]))
VARIANTS += [
    ("- every plugin (the server alone)", ["-DMK_BUILTIN_PLUGINS="]),
    ("MK_SMALL=OFF (MinSizeRel: -Os, no LTO, unwind tables)", ["-DMK_SMALL=OFF"]),
    ("RelWithDebInfo (-O2), MK_SMALL=OFF", ["-DMK_SMALL=OFF", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"]),
]


def build(src, build_dir, toolchain, extra):
    args = ["cmake", "-S", str(src), "-B", str(build_dir), "-DMK_PROFILE=embedded"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if toolchain:
        args.append(f"-DCMAKE_TOOLCHAIN_FILE={Path(toolchain).resolve()}")
    p = subprocess.run(args + extra, capture_output=True, text=True)
    if p.returncode != 0:
        # "MK_ZLIB=ON, but zlib (zlib1g-dev) is not found: ...", wrapped by CMake
        words = " ".join(p.stderr.split())
        m = re.search(r"(MK_\w+=ON, but .*? is not found)", words)
        return None, "not built: " + (m.group(1) if m else "the configure step failed")
    p = subprocess.run(["cmake", "--build", str(build_dir), "-j", str(os.cpu_count() or 2),
                        "--target", "monkey"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, "build failed"
    _, arch, size, text_data, _ = size_budget.budget_check(build_dir)
    return (arch, size, text_data), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--toolchain", help="a CMake toolchain file (cmake/toolchain-ARCH.cmake)")
    ap.add_argument("--dir", help="where the build directories go (kept)")
    a = ap.parse_args()
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="mk-size-"))
    work.mkdir(parents=True, exist_ok=True)
    rows, base = [], None
    for i, (label, extra) in enumerate(VARIANTS):
        res, why = build(ROOT, work / f"v{i}", a.toolchain, extra)
        if res is None:
            rows.append(f"| {label} | {why} | | |")
            continue
        arch, size, text_data = res
        if base is None:
            base = (size, text_data)
            rows.append(f"| {label} ({arch}) | {size:,} | {text_data:,} | |")
        else:
            d = text_data - base[1]
            rows.append(f"| {label} | {size:,} | {text_data:,} | {d:+,} |")
        print(rows[-1], file=sys.stderr, flush=True)
    print("| build | stripped file (bytes) | text + data (bytes) | text + data vs the profile |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    if not a.dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
