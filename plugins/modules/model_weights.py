#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_weights
short_description: Pinned, per-file sha256-verified model snapshots with resume and atomic promotion
version_added: 0.1.0
description:
  - Brings O(dest) to a verified copy of a model snapshot from the Hugging Face Hub (or a mirror of
    it), from a plain HTTP server that publishes a C(sha256sum) manifest, or from a local directory
    such as an NFS mount.
  - Every file is checked against an expected digest. C(hf) uses the sha256 the hub publishes for LFS
    files; small files outside LFS are checked against their git blob id (sha1 over
    C(blob <size>\\0<content>)) and their sha256 is recorded from the verified bytes. C(http) uses the
    manifest. C(local) uses the manifest if given, else it computes one from the source files and
    records it (cached by the source files' size and mtime).
  - Downloads go to C(<dest>/.gpufleet-weights/tmp/) (same filesystem), are hashed while streaming,
    resume partial files with HTTP range requests, run O(workers) files in parallel, and are fsynced
    and renamed to their final path only after the digest matches. A partial or unverified file never
    sits at its final path.
  - C(<dest>/.gpufleet-weights/record.json) records each verified file (path, size, sha256, mtime,
    inode); C(<dest>/.gpufleet-weights/SHA256SUMS) is the snapshot's manifest, so any host can serve
    O(dest) to its peers (O(source=http)). C(progress.json) next to them shows a running job's progress.
  - Free space on the filesystem of O(dest) is checked against the bytes still to fetch before any
    download starts.
  - Files an earlier run placed in O(dest) (its record lists them) that the new manifest does not list - an
    earlier model's or revision's, or after narrowing O(allow_patterns) - are removed before the fetch, with
    the folders they leave empty (result C(removed)); a link there is removed, never followed. A stale
    C(model.safetensors.index.json) would otherwise make vLLM (and the planner) load the old shards. Unlisted
    files the module did not place are left alone and named in a warning.
author:
  - gpufleet.vllm maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Resolves the revision, stats (and with O(verify=full) hashes) files, and reports which files
      would be fetched or repaired. Nothing is written, not even the temp area.
  diff_mode:
    support: full
    description: Before/after lines name each file that would be fetched, repaired or removed, and the expected digests.
  platform:
    support: full
    platforms: posix
    description: Linux targets (uses C(fcntl) locks and C(os.replace) on one filesystem).
options:
  dest:
    description: Directory that holds the snapshot. Created when missing.
    type: path
    required: true
  source:
    description:
      - Where the snapshot comes from.
      - V(hf) needs O(repo_id) and the C(huggingface_hub) Python package on the target.
      - V(http) needs O(url); V(local) needs O(path).
    type: str
    choices: [hf, http, local]
    default: hf
  repo_id:
    description: Hub repository, for example C(Qwen/Qwen3-32B-FP8). Used with O(source=hf).
    type: str
  revision:
    description:
      - Branch, tag or commit id on the hub (O(source=hf)). A branch or tag is resolved to its commit id,
        which is returned and recorded; pin a commit id for reproducible fleets.
    type: str
    default: main
  url:
    description:
      - Base URL of the snapshot for O(source=http); file C(a/b) is fetched from C(<url>/a/b).
    type: str
  manifest:
    description:
      - C(sha256sum)-format manifest of relative paths, as a local path or an http(s) URL.
      - With O(source=http) it defaults to C(<url>/.gpufleet-weights/SHA256SUMS), the manifest this module
        writes into every O(dest), so a peer's O(dest) served over HTTP works as a source as is.
      - With O(source=local) it is optional; without it the module computes the digests from O(path).
    type: str
  path:
    description: Source directory for O(source=local), for example an NFS mount holding the snapshot.
    type: path
  follow_links:
    description:
      - With O(source=local), follow symbolic links found under O(path), but only to files and folders
        that are themselves inside O(path); a link leading outside it is always refused.
      - By default any link under O(path) is refused with an error naming it, so a link to a root-only
        file can never be copied into O(dest).
      - Links inside O(dest) are never followed (the module runs as root in a tree the serving user owns).
    type: bool
    default: false
  verify:
    description:
      - V(cached) trusts a file whose size, mtime and inode still equal the record and re-hashes only the
        others (cost grows with the file count, not the bytes).
      - V(full) re-hashes every file, O(workers) at a time.
      - In both modes a missing or mismatching file is fetched again, and only that file.
    type: str
    choices: [cached, full]
    default: cached
  workers:
    description: Files fetched or hashed in parallel (1 to 256).
    type: int
    default: 4
  allow_patterns:
    description: Only files matching one of these shell patterns (huggingface_hub's rule; C(dir/) means
      everything below C(dir)). All files when omitted.
    type: list
    elements: str
  ignore_patterns:
    description: Skip files matching one of these shell patterns.
    type: list
    elements: str
  token:
    description:
      - Hub access token for private or gated repositories, sent only to the O(endpoint) host (never to
        the CDN it redirects to, never to an O(source=http) mirror, never over plain http unless
        O(token_over_http)). Falls back to the E(HF_TOKEN) environment variable on the target.
      - Never logged, returned or written to disk by this module.
    type: str
  token_over_http:
    description:
      - Send O(token) to an C(http://) O(endpoint) (plain text on the wire). Off by default - the token is
        then withheld with a warning; set it only for a trusted internal hub mirror on a private network.
      - The token only ever goes to the O(endpoint) host; never to O(url), an http(s) O(manifest), or a host a
        redirect leads to.
    type: bool
    default: false
  endpoint:
    description: Hub endpoint, for example an internal hub mirror. Defaults to E(HF_ENDPOINT) or C(https://huggingface.co).
    type: str
  owner:
    description: Owner (name or uid) of the snapshot files and folders (the serving user). An unknown
      name fails before anything is downloaded.
    type: str
  group:
    description: Group (name or gid) of the snapshot files and folders. An unknown name fails before anything
      is downloaded.
    type: str
  mode:
    description:
      - Octal mode of the snapshot files as a quoted string, for example C('0644'). Folders get the same bits
        plus C(x) wherever C(r) is set.
      - A number is refused. YAML reads an unquoted C(mode=644) as the decimal 644 (octal 1204) and an
        unquoted C(0644) as 420, so a number cannot say which mode was meant.
    type: raw
    default: '0644'
notes:
  - Run long downloads with C(async) and poll C(<dest>/.gpufleet-weights/progress.json) for a progress
    line; the C(gpufleet.vllm.model_weights) role does this.
  - Only one run per O(dest) at a time (a lock file in the state folder); a second one fails at once.
requirements:
  - huggingface_hub (only for O(source=hf))
seealso:
  - name: Fleet weights pattern
    description: One host serves a verified snapshot over HTTP to its peers (docs/fleet-weights.md).
    link: https://github.com/gpufleet/vllm/blob/main/docs/fleet-weights.md
"""

EXAMPLES = r"""
- name: Qwen3 from the hub, pinned to a commit, owned by the serving user
  gpufleet.vllm.model_weights:
    dest: /models/Qwen3-32B-FP8
    source: hf
    repo_id: Qwen/Qwen3-32B-FP8
    revision: 9c6bdf5a4e8e6b4f2c1f0d6f1c6c0e3c1b9f2a7d
    allow_patterns: ["*.json", "*.safetensors", "tokenizer*", "*.txt"]
    owner: vllm
    group: vllm
  register: weights

- name: A peer from the fleet's mirror (its dest served by nginx), re-hashing everything
  gpufleet.vllm.model_weights:
    dest: /models/Qwen3-32B-FP8
    source: http
    url: http://mirror-01.internal/models/Qwen3-32B-FP8
    verify: full
    workers: 8

- name: From an NFS export with a published manifest
  gpufleet.vllm.model_weights:
    dest: /models/Qwen3-32B-FP8
    source: local
    path: /mnt/nfs/models/Qwen3-32B-FP8
    manifest: /mnt/nfs/models/Qwen3-32B-FP8.sha256
"""

RETURN = r"""
revision:
  description: Resolved revision. hf - the commit id; http/local - C(sha256:) of the manifest text.
  returned: always
  type: str
  sample: 9c6bdf5a4e8e6b4f2c1f0d6f1c6c0e3c1b9f2a7d
requested_revision:
  description: O(revision) as given (O(source=hf)); a branch or tag here and a commit id in RV(revision) means
    the snapshot was not pinned (a warning says so).
  returned: when source is hf
  type: str
  sample: main
source:
  description: The source kind used.
  returned: always
  type: str
  sample: hf
snapshot_dir:
  description: Absolute path of O(dest).
  returned: always
  type: str
  sample: /models/Qwen3-32B-FP8
file_count:
  description: Files in the snapshot (after allow/ignore patterns).
  returned: always
  type: int
  sample: 17
total_bytes:
  description: Size of the snapshot in bytes.
  returned: always
  type: int
  sample: 32801216512
downloaded_bytes:
  description: Bytes transferred in this run (0 in check mode).
  returned: always
  type: int
  sample: 4294967296
hashed_bytes:
  description: Bytes of existing files re-hashed in this run (verification, not download).
  returned: always
  type: int
  sample: 0
needed_bytes:
  description: Bytes the fetch needs on the filesystem of O(dest) (sizes minus resumable partial files).
  returned: always
  type: int
  sample: 4294967296
fetched:
  description: Files that were missing and were fetched (in check mode, would be fetched).
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00004.safetensors]
repaired:
  description: Files on disk whose content did not match and were fetched again (in check mode, would be).
  returned: always
  type: list
  elements: str
  sample: [model-00003-of-00004.safetensors]
removed:
  description:
    - Files an earlier run placed in O(dest) that the snapshot's manifest does not list (an earlier model's or
      revision's), removed before the fetch (in check mode, would be); folders left empty go too. A stale
      C(model.safetensors.index.json) would otherwise make vLLM and the planner use the old shards.
  returned: always
  type: list
  elements: str
  sample: [model.safetensors.index.json, model-00002-of-00002.safetensors]
elapsed_s:
  description: Wall time of the run in seconds.
  returned: always
  type: float
  sample: 41.7
throughput_bytes_per_s:
  description: Download throughput of this run (downloaded bytes over the fetch phase).
  returned: always
  type: int
  sample: 1073741824
manifest:
  description: Path of the snapshot's C(sha256sum) manifest inside O(dest).
  returned: always
  type: str
  sample: /models/Qwen3-32B-FP8/.gpufleet-weights/SHA256SUMS
record:
  description: Path of the record of verified files.
  returned: always
  type: str
  sample: /models/Qwen3-32B-FP8/.gpufleet-weights/record.json
"""

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.gpufleet.vllm.plugins.module_utils import redact
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError, run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import request, sources

ARGUMENT_SPEC = dict(
    dest=dict(type="path", required=True),
    source=dict(type="str", default="hf", choices=["hf", "http", "local"]),
    repo_id=dict(type="str"),
    revision=dict(type="str", default="main"),
    url=dict(type="str"),
    manifest=dict(type="str"),
    path=dict(type="path"),
    follow_links=dict(type="bool", default=False),
    verify=dict(type="str", default="cached", choices=["cached", "full"]),
    workers=dict(type="int", default=4),
    allow_patterns=dict(type="list", elements="str"),
    ignore_patterns=dict(type="list", elements="str"),
    token=dict(type="str", no_log=True, fallback=(env_fallback, ["HF_TOKEN"])),
    token_over_http=dict(type="bool", default=False),
    endpoint=dict(type="str"),
    owner=dict(type="str"),
    group=dict(type="str"),
    mode=dict(type="raw", default="0644"),
)


def body(module):
    params = module.params
    request.check_params(params)
    if params["source"] == "hf":
        hf_api, hf_error = sources.load_hf_api()
        if hf_api is None:
            raise UserError(missing_required_lib("huggingface_hub", reason="for source: hf") +
                            " (or use source: http against a fleet mirror)", exception=hf_error)
    result, warnings = request.synced(params, module.check_mode)
    diff = result.pop("diff", None)
    for warning in warnings:
        module.warn(warning)
    if module._diff and diff is not None:
        result["diff"] = diff
    return result


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[
            ("source", "hf", ["repo_id"]),
            ("source", "http", ["url"]),
            ("source", "local", ["path"]),
        ],
        supports_check_mode=True,
    )
    # a password in url/manifest/endpoint is refused, and masked in everything returned (the echoed arguments too)
    redact.hide(module, [secret for name in request.URL_OPTIONS for secret in redact.url_secrets(module.params[name])])
    result = run_guarded(module, body, "model_weights")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
