# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/fleet-weights.md, tested: a host's verified snapshot served by nginx is a source: http
for its peers, with the same verification (a mirror serving a damaged file is refused)."""
from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request

import pytest

from weights_support import Nginx, run_module, tree, write_files

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")),
                                reason="nginx from apt is needed (scripts/requirements-apt.txt)")
MIB = 1024 * 1024

# The server-block body from docs/fleet-weights.md, with the models root swapped for the test's.
LOCATIONS = """
    location /models/ {{
      alias {root}/;
      autoindex off;
      location ~ /\\.gpufleet-weights/(tmp/|lock$|progress\\.json$|record\\.json$) {{ return 404; }}
    }}
"""


def test_peer_fetches_a_served_snapshot_with_the_same_checks(tmp_path):
    source = tmp_path / "upstream"
    files = {"config.json": b'{"num_hidden_layers": 2}', "generation_config.json": b'{"eos_token_id": 1}',
             "model-00001-of-00002.safetensors": os.urandom(5 * MIB + 3),
             "model-00002-of-00002.safetensors": os.urandom(4 * MIB), "tokenizer/tokenizer.json": os.urandom(9000)}
    write_files(str(source), files)
    models = tmp_path / "models"
    seed = models / "qwen3-tiny"
    # host A: fetch once (here from a local directory; in a fleet, from the hub) and verify
    first, _out = run_module(dict(dest=str(seed), source="local", path=str(source)))
    assert first["changed"] and first["file_count"] == 5

    nginx = Nginx(str(tmp_path / "nginx"), LOCATIONS.format(root=str(models)))
    try:
        url = nginx.url + "/models/qwen3-tiny"
        # the state folder's internals are not served, only the manifest
        for private in ("tmp/", "record.json", "progress.json", "lock"):
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen("%s/.gpufleet-weights/%s" % (url, private))
        # host B: source http against host A, manifest at its default place
        peer = tmp_path / "peer" / "qwen3-tiny"
        second, _out = run_module(dict(dest=str(peer), source="http", url=url, workers=3))
        assert second["changed"] and second["downloaded_bytes"] == sum(map(len, files.values()))
        assert tree(str(peer)) == tree(str(seed))
        assert second["revision"] == first["revision"]  # the same manifest text, so the same pinned identity
        assert (peer / ".gpufleet-weights" / "SHA256SUMS").read_text() == \
            (seed / ".gpufleet-weights" / "SHA256SUMS").read_text()
        again, _out = run_module(dict(dest=str(peer), source="http", url=url))
        assert not again["changed"] and again["downloaded_bytes"] == 0

        # a damaged file on the serving host is refused by the next peer (same verification)
        shard = seed / "model-00002-of-00002.safetensors"
        data = bytearray(shard.read_bytes())
        data[4096] ^= 0xFF
        shard.write_bytes(bytes(data))
        third_dest = tmp_path / "peer2" / "qwen3-tiny"
        third, _out = run_module(dict(dest=str(third_dest), source="http", url=url, workers=1))
        assert third["failed"] and "digest mismatch for model-00002-of-00002.safetensors" in third["msg"]
        assert not (third_dest / "model-00002-of-00002.safetensors").exists()
        # and host A's own verify: full finds and repairs it from upstream
        healed, _out = run_module(dict(dest=str(seed), source="local", path=str(source), verify="full"))
        assert healed["repaired"] == ["model-00002-of-00002.safetensors"]
        fourth, _out = run_module(dict(dest=str(third_dest), source="http", url=url))
        assert fourth["changed"] and tree(str(third_dest)) == tree(str(seed))
    finally:
        nginx.stop()
