# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite's disk rules (scripts/lib.sh: free_gib, disk_line, release_parser_caches; used by scripts/test.sh).
CI's disk is shared, and on 2026-12-05 it filled while Molecule's engine hosts installed vLLM: pip's jobs hung until
the suite's deadline. Before Molecule starts, the suite releases pytest's parser caches when the disk is short, and
does not start the scenarios at all below a floor. Here on a temporary XDG_CACHE_HOME with stand-in cache folders."""
import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bash(script, env):
    return subprocess.run(["bash", "-c", "source scripts/lib.sh; set +e; " + script], cwd=str(ROOT), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60,
                          check=False)


def test_free_gib_reads_the_closest_existing_folder(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    out = _bash('free_gib "%s/not/made/yet"' % tmp_path, env)
    assert out.stdout.strip() == str(shutil.disk_usage(str(tmp_path)).free // 1024 ** 3), out.stdout


def test_releasing_the_parser_caches_removes_the_default_places_only(tmp_path):
    cache = tmp_path / "xdg" / "gpufleet-vllm"
    made = ["vllm-0.33.0-venv/bin", "vllm-0.34.0-venv/bin", "wheelhouse", "wheelhouse-cpu-0.32.0", "0123456789ab/logs"]
    for rel in made:
        (cache / rel).mkdir(parents=True)
    (cache / "vllm-0.33.0-venv.lock").write_text("")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop("GPUFLEET_WHEELHOUSE", None)
    out = _bash("release_parser_caches", env)
    assert out.returncode == 0 and "released the parser check's caches" in out.stdout, out.stdout
    assert sorted(p.name for p in cache.iterdir()) == ["0123456789ab", "wheelhouse-cpu-0.32.0"]

    # a wheelhouse the user named is theirs, not a cache of the suite's
    (cache / "wheelhouse").mkdir()
    out = _bash("release_parser_caches", dict(env, GPUFLEET_WHEELHOUSE=str(tmp_path / "mine")))
    assert (cache / "wheelhouse").is_dir(), out.stdout


def test_the_disk_line_names_both_places(tmp_path):
    out = _bash("disk_line", dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    assert out.stdout.startswith("disk: ") and str(tmp_path / "gpufleet-vllm") in out.stdout, out.stdout
    assert "GiB for the test hosts" in out.stdout
