#!/usr/bin/env python3
"""layers.py: check that the server's folders call only down (docs/ARCHITECTURE.md, "Layers").

    tools/layers.py OBJDIR        e.g. build/CMakeFiles/monkeylib.dir
    tools/layers.py --table       print the layers, lowest first

OBJDIR holds the objects of the server library as CMake builds them, one
folder per source folder (OBJDIR/core/*.o, OBJDIR/server/http/*.o, ...).
For every global symbol an object uses (nm: U) and another object defines,
the defining object's layer must be the user's own or one below it. A call
upward is allowed only through a table registered at start (struct
mk_proto, hook lists, timer and event callbacks): a function pointer is no
symbol that nm sees, so those never count.

Exit status: 0 when every call goes down or sideways, 1 when one goes up
(each printed as "user -> definer: symbols"), 2 when OBJDIR has objects in
a folder the table does not know (a new folder must take its place in it).
"""

import collections
import os
import subprocess
import sys

# The layers, lowest first: a folder calls its own files and the folders
# before it in this list. The one table of the rule; ARCHITECTURE.md
# describes each line.
LAYERS = [
    ("core", "runtime with no HTTP knowledge: event loop, timers, memory, config reader, log"),
    ("server/http", "pure HTTP: the parser, fields, paths, route patterns, codings"),
    ("server/config", "a configuration: [SERVER], sites, MIME types, the built-in keys"),
    ("server/conn", "a connection: its life, the transport seam, its timers, the worker's loop"),
    ("server/request", "a request: stages, responses, bodies, context slots, tasks"),
    ("server/proto", "the protocols: HTTP/1, HTTP/2, the takeover, the ALPN table"),
    ("server/static", "the static handler: files, variants, ranges, compression, caches"),
    ("server/runtime", "the worker threads and their listeners"),
    ("server/plugin", "the plugin loader, the API table, library mode's sites"),
    ("server/process", "the process: start, reload, stop, signals, supervisor, systemd"),
]


def layer_of(rel):
    """The layer index of an object at `rel` below OBJDIR, or None."""
    folder = os.path.dirname(rel)
    for i, (name, _) in enumerate(LAYERS):
        if folder == name:
            return i
    return None


def symbols(path):
    """(defined, used) global symbols of one object, from nm."""
    out = subprocess.run(["nm", "-g", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            used.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRVWG":
            defined.add(f[2])
    return defined, used


def check(objdir):
    objs = []
    for dp, _, fs in os.walk(objdir):
        objs += [os.path.join(dp, f) for f in fs if f.endswith(".o")]
    objs.sort()
    unknown = sorted({os.path.dirname(os.path.relpath(o, objdir)) for o in objs
                      if layer_of(os.path.relpath(o, objdir)) is None})
    if unknown:
        print("layers.py: folders with no place in the table: " + ", ".join(unknown),
              file=sys.stderr)
        return 2
    if not objs:
        print(f"layers.py: no objects under {objdir}", file=sys.stderr)
        return 2
    owner, uses = {}, {}
    for o in objs:
        defined, used = symbols(o)
        uses[o] = used
        for s in defined:
            owner.setdefault(s, o)
    up = collections.defaultdict(set)
    for o in objs:
        lo = layer_of(os.path.relpath(o, objdir))
        for s in uses[o]:
            t = owner.get(s)
            if t and layer_of(os.path.relpath(t, objdir)) > lo:
                up[(o, t)].add(s)
    for (o, t), syms in sorted(up.items()):
        name = lambda p: os.path.relpath(p, objdir).replace(".c.o", ".c")  # noqa: E731
        print(f"{name(o)} -> {name(t)}: {', '.join(sorted(syms))}")
    if up:
        print(f"layers.py: {len(up)} calls go up a layer (tools/layers.py, docs/ARCHITECTURE.md)",
              file=sys.stderr)
        return 1
    print(f"layers.py: {len(objs)} objects in {len(LAYERS)} layers, every call goes down")
    return 0


def main(argv):
    if argv[1:] == ["--table"]:
        for name, what in LAYERS:
            print(f"{name:16} {what}")
        return 0
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    return check(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
