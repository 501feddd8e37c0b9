"""The rule of the server's layers (docs/ARCHITECTURE.md, "Layers"): a folder
calls its own files and the folders below it, never one above, and
tools/layers.py checks it from the objects (nm). make test runs it on the
build first; here, that it holds for the build the tests run against, and
that the check itself fails on a deliberate upward call: two objects of a
scratch object folder, compiled with cc, one in server/http calling one in
server/process, make it exit 1 naming the symbol, and the same pair the
other way round passes.
"""

import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT

LAYERS = ROOT / "tools" / "layers.py"
CC = shutil.which("cc") or shutil.which("gcc")


def layers(objdir):
    return subprocess.run([sys.executable, str(LAYERS), str(objdir)], capture_output=True,
                          text=True)


def objdir_of(tmp_path, lower_calls_upper):
    """OBJDIR/server/http/low.c.o and OBJDIR/server/process/high.c.o, as CMake
    names objects; the one that calls the other is chosen by the argument."""
    objdir = tmp_path / "monkeylib.dir"
    sources = {
        "server/http/low.c": "int mk_fake_high(void);\nint mk_fake_low(void);\n"
                             "int mk_fake_low(void) { return %s; }\n"
                             % ("mk_fake_high()" if lower_calls_upper else "1"),
        "server/process/high.c": "int mk_fake_low(void);\nint mk_fake_high(void);\n"
                                 "int mk_fake_high(void) { return %s; }\n"
                                 % ("2" if lower_calls_upper else "mk_fake_low()"),
    }
    for rel, text in sources.items():
        src = tmp_path / "src" / rel
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(text)
        obj = objdir / (rel + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([CC, "-c", "-o", str(obj), str(src)], check=True)
    return objdir


def test_the_build_calls_only_down():
    objdir = BUILD / "CMakeFiles" / "monkeylib.dir"
    if not objdir.is_dir():
        pytest.skip(f"{objdir}: no objects of the server library in this build")
    r = layers(objdir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every call goes down" in r.stdout


@pytest.mark.skipif(not CC or not shutil.which("nm"), reason="needs cc and nm")
def test_an_upward_call_fails_the_check(tmp_path):
    r = layers(objdir_of(tmp_path, lower_calls_upper=True))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "server/http/low.c -> server/process/high.c: mk_fake_high" in r.stdout
    assert "1 calls go up a layer" in r.stderr


@pytest.mark.skipif(not CC or not shutil.which("nm"), reason="needs cc and nm")
def test_a_downward_call_passes_the_check(tmp_path):
    r = layers(objdir_of(tmp_path, lower_calls_upper=False))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 objects in" in r.stdout


@pytest.mark.skipif(not CC or not shutil.which("nm"), reason="needs cc and nm")
def test_a_folder_outside_the_table_is_refused(tmp_path):
    objdir = objdir_of(tmp_path, lower_calls_upper=False)
    stray = objdir / "server" / "elsewhere"
    stray.mkdir()
    shutil.copy(objdir / "server" / "http" / "low.c.o", stray / "low.c.o")
    r = layers(objdir)
    assert r.returncode == 2
    assert "server/elsewhere" in r.stderr
