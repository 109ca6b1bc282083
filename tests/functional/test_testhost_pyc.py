# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test hosts' bytecode cache for zip imports (extensions/molecule/resources/testhost_pyc, baked into the
test-host image by scripts/build-testhost-image.sh): a module imported from a zip is compiled once, then loaded from
the cache under the path it is imported from now; a damaged or unwritable cache falls back to a plain compile."""
import os
import pathlib
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOOK = ROOT / "extensions" / "molecule" / "resources" / "testhost_pyc"

SOURCE = b'''"""a module only found in a zip"""
def where():
    return __file__

def answer():
    return sum(n for n in range(10))

class Thing:
    def method(self):
        raise ValueError("from the zip")
'''

# Imports the module from the zip given as argv[1] with the hook loaded (as gpufleet_testhost_pyc.pth does at
# start-up), and prints what the module and a traceback from it say of their file.
PROBE = r'''
import sys, traceback
sys.path.insert(0, sys.argv[2])
import gpufleet_testhost_pyc
sys.path.insert(0, sys.argv[1])
import zipped_probe
print(zipped_probe.answer())
print(zipped_probe.where())
try:
    zipped_probe.Thing().method()
except ValueError:
    print(traceback.extract_tb(sys.exc_info()[2])[-1].filename)
'''


def _zip(path):
    with zipfile.ZipFile(str(path), "w") as archive:
        archive.writestr("zipped_probe.py", SOURCE)
    return path


def _probe(zip_path, cache):
    env = dict(os.environ, GPUFLEET_PYC_CACHE=str(cache), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", PROBE, str(zip_path), str(HOOK)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _cached(cache):
    return sorted(p for p in cache.rglob("*") if p.is_file()) if cache.is_dir() else []


def test_compiled_once_then_loaded_under_the_new_path(tmp_path):
    cache = tmp_path / "cache"
    first = _probe(_zip(tmp_path / "one.zip"), cache)
    assert first == ["45", str(tmp_path / "one.zip" / "zipped_probe.py"), str(tmp_path / "one.zip" / "zipped_probe.py")]
    files = _cached(cache)
    assert len(files) == 1 and not files[0].name.endswith(".tmp"), files
    stamp = files[0].stat().st_mtime_ns
    # another zip with the same source (Ansible writes a new payload per task): the cached code, under the new path,
    # also in a traceback from a nested function
    second = _probe(_zip(tmp_path / "two.zip"), cache)
    assert second == ["45", str(tmp_path / "two.zip" / "zipped_probe.py"), str(tmp_path / "two.zip" / "zipped_probe.py")]
    assert _cached(cache) == files and files[0].stat().st_mtime_ns == stamp


def test_a_changed_source_is_compiled_anew(tmp_path):
    cache = tmp_path / "cache"
    _probe(_zip(tmp_path / "one.zip"), cache)
    with zipfile.ZipFile(str(tmp_path / "changed.zip"), "w") as archive:
        archive.writestr("zipped_probe.py", SOURCE.replace(b"range(10)", b"range(11)"))
    assert _probe(tmp_path / "changed.zip", cache)[0] == "55"
    assert len(_cached(cache)) == 2


def test_a_damaged_cache_entry_or_an_unwritable_cache_falls_back_to_a_compile(tmp_path):
    cache = tmp_path / "cache"
    _probe(_zip(tmp_path / "one.zip"), cache)
    _cached(cache)[0].write_bytes(b"not marshal data")
    assert _probe(tmp_path / "one.zip", cache)[0] == "45"
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    assert _probe(tmp_path / "one.zip", blocked)[0] == "45"


def test_the_image_recipe_bakes_the_hook_in():
    script = (ROOT / "scripts" / "build-testhost-image.sh").read_text()
    assert "gpufleet_testhost_pyc.py gpufleet_testhost_pyc.pth /usr/local/lib/python3.11/dist-packages/" in script
    assert (HOOK / "gpufleet_testhost_pyc.pth").read_text() == "import gpufleet_testhost_pyc\n"
