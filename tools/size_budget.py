#!/usr/bin/env python3
"""The stripped size of a build's `monkey` against its budget.

    tools/size_budget.py BUILD

A stripped copy of BUILD/bin/monkey (with the strip of the binary's
architecture: strip, arm-linux-gnueabihf-strip, aarch64-linux-gnu-strip) is
measured and compared with the line of tests/size_budget.txt for the build's
kind and architecture. The kind is read from BUILD's configuration:
"embedded" (MK_PROFILE=embedded), "embedded-static" (the same with
MK_STATIC=ON: make static), "default" (no profile, RelWithDebInfo, no
sanitizer: what make builds); any other build has no budget. Prints the
figures; the exit status is 1 when the binary is larger than its budget,
0 otherwise (or when no budget applies). make embedded runs it, and
tests/integration/install/test_profile.py calls budget_check() for the build
under test.
"""

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_FILE = ROOT / "tests" / "size_budget.txt"

# ELF e_machine -> (architecture name of size_budget.txt, strip program)
MACHINES = {
    62: ("x86_64", "strip"),
    40: ("armhf", "arm-linux-gnueabihf-strip"),
    183: ("aarch64", "aarch64-linux-gnu-strip"),
}


def cache_value(build, name):
    path = Path(build) / "CMakeCache.txt"
    if not path.exists():
        return None
    m = re.search(rf"^{name}:[A-Z]+=(.*)$", path.read_text(), re.M)
    return m.group(1) if m else None


def kind(build):
    """The budget kind of `build`, or None when none applies."""
    on = lambda v: (v or "").upper() in ("ON", "1", "TRUE", "YES")
    if on(cache_value(build, "MK_SANITIZE")) or on(cache_value(build, "MK_FUZZ")):
        return None
    profile = cache_value(build, "MK_PROFILE") or ""
    static = on(cache_value(build, "MK_STATIC"))
    if profile == "embedded":
        return "embedded-static" if static else "embedded"
    build_type = cache_value(build, "CMAKE_BUILD_TYPE") or "RelWithDebInfo"
    if profile == "" and not static and build_type == "RelWithDebInfo":
        return "default"
    return None


def machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    return MACHINES.get(int.from_bytes(head[18:20], "little"), (None, None))


def budgets():
    """{(kind, arch): bytes} from tests/size_budget.txt."""
    out = {}
    for line in BUDGET_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if line:
            out[(line[0], line[1])] = int(line[2])
    return out


def stripped_size(binary, strip):
    """(stripped file size, text + data of the stripped file)."""
    tool = shutil.which(strip)
    if not tool:
        raise FileNotFoundError(f"{strip} is not installed")
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / "monkey"
        subprocess.run([tool, "-o", str(copy), str(binary)], check=True)
        size_tool = shutil.which(strip[: -len("strip")] + "size") or "size"
        p = subprocess.run([size_tool, str(copy)], capture_output=True, text=True, check=True)
        text, data = p.stdout.splitlines()[1].split()[:2]
        return copy.stat().st_size, int(text) + int(data)


def budget_check(build):
    """(kind, arch, size, text_data, bound); kind or bound None when no budget applies."""
    binary = Path(build) / "bin" / "monkey"
    k = kind(build)
    arch, strip = machine(binary)
    size, text_data = stripped_size(binary, strip or "strip")
    return k, arch, size, text_data, budgets().get((k, arch)) if k else None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    k, arch, size, text_data, bound = budget_check(sys.argv[1])
    print(f"{sys.argv[1]}/bin/monkey ({k or 'no budget'}, {arch}): {size} bytes stripped, "
          f"{text_data} bytes of text and data", end="")
    if bound is None:
        print()
        return 0
    print(f"; budget {bound} ({BUDGET_FILE.relative_to(ROOT)})")
    if size > bound:
        print(f"size_budget: {size - bound} bytes over the budget: find what grew "
              f"(docs/packaging.md, \"What each part costs\"), or raise the budget in "
              f"{BUDGET_FILE.relative_to(ROOT)} saying why", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
