# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Flags in extra_args that change vLLM's memory arithmetic: used by the plan, or refused by name (pure).

Read in vLLM 0.26.0 and 0.33.0 ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``):

* ``--block-size N`` (``CacheConfig.block_size``, int): the KV block the pool is counted in. The plan uses it
  where the ``block_size`` option is unset; both set and different is an error.
* ``--kv-cache-memory N``: not a flag of its own, argparse's prefix of ``--kv-cache-memory-bytes``
  (``FlexibleArgumentParser`` keeps ``allow_abbrev``), parsed by ``human_readable_int`` (``vllm/utils/
  argparse_utils.py``: ``1k`` = 1000, ``1K`` = 1024, ``25.6k``, a plain number; no decimals with K/M/G/T).
  The engine then allocates exactly N bytes per GPU and skips the utilization sizing: the plan uses N
  as ``kv_cache_memory_bytes``; with the option also set (rendered as ``--kv-cache-memory-bytes``) the
  two would both reach the engine: an error.
* ``--limit-mm-per-prompt``: a dict option (``parse_type(json.loads)``): JSON only, anything else makes
  the engine exit at argument parsing. ``{"image": 0, "video": 0}`` skips the vision tower
  (``SupportsMultiModal._mark_tower_model``: towers are skipped when the limit is zero for all of their
  modalities), so its weights are not counted.
* ``--num-nodes``: no such flag (the multi-host one is ``--nnodes``/``-n``), and ``--nnodes``,
  ``--node-rank``, ``--master-addr``, ``--master-port``, ``--headless`` are rendered per host by the planner
  from ``nodes`` (multinode.py): all refused by name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags

MULTINODE_FLAGS = ("--num-nodes", "--nnodes", "-n", "--node-rank", "--master-addr", "--master-port", "--headless")
_DECIMAL = {"k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
_BINARY = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}
VISION_MODALITIES = ("image", "video")


def _finding(level, code, message, fix):
    return {"level": level, "code": code, "message": message, "fix": fix}


def human_readable_int(text):
    """vLLM's ``human_readable_int``; ValueError on what it refuses."""
    value = str(text).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError("decimals are not allowed with binary suffixes like %s" % suffix)
        return int(number) * _BINARY[suffix]
    return int(value)


def _one_int(p, flag, parse, findings):
    values = cli_flags.flag_values(p.get("extra_args"), flag)
    if not values:
        return None
    try:
        parsed = [parse(v) for v in values]
    except (TypeError, ValueError):
        findings.append(_finding("error", "extra_arg_unparsable", "extra_args %s %r: vLLM refuses this value" % (flag, values[-1]),
                                 "give %s a whole number (e.g. %s 32)" % (flag, flag)))
        return None
    return parsed[-1]  # argparse keeps the last


def _block_size(p, findings):
    value = _one_int(p, "--block-size", int, findings)
    if value is None:
        return {}
    if p.get("block_size") and int(p["block_size"]) != value:
        findings.append(_finding("error", "block_size_conflict",
                                 "block_size %d and extra_args --block-size %d disagree: the plan would count blocks vLLM does not use"
                                 % (int(p["block_size"]), value), "keep one: drop block_size or the --block-size in extra_args"))
        return {}
    return {"block_size": value}


def _kv_cache_memory(p, findings):
    value = _one_int(p, "--kv-cache-memory", human_readable_int, findings)
    if value is None:
        return {}
    if p.get("kv_cache_memory_bytes"):
        findings.append(_finding("error", "kv_cache_memory_twice",
                                 "extra_args --kv-cache-memory %d (argparse's prefix of --kv-cache-memory-bytes) and kv_cache_memory_bytes %d "
                                 "both reach the engine" % (value, int(p["kv_cache_memory_bytes"])),
                                 "drop --kv-cache-memory from extra_args and keep kv_cache_memory_bytes"))
        return {}
    return {"kv_cache_memory_bytes": value}


def _limit_mm(p, findings):
    values = cli_flags.flag_values(p.get("extra_args"), "--limit-mm-per-prompt")
    if not values:
        return {}
    try:
        limits = json.loads(values[-1] or "")
        if not isinstance(limits, dict):
            raise ValueError("not an object")
    except ValueError:
        findings.append(_finding("error", "limit_mm_not_json",
                                 "extra_args --limit-mm-per-prompt %r is not JSON: vLLM parses it with json.loads and exits" % values[-1],
                                 "write it as JSON, e.g. --limit-mm-per-prompt '{\"image\": 0, \"video\": 0}'"))
        return {}
    counts = dict((k, v.get("count") if isinstance(v, dict) else v) for k, v in limits.items())
    if all(counts.get(m) == 0 for m in VISION_MODALITIES):
        return {"language_model_only": True}
    return {}


def _multinode(p, findings):
    found = [flag for _i, _word, flag in cli_flags.guarded_words([str(a) for a in (p.get("extra_args") or [])], MULTINODE_FLAGS)]
    for flag in MULTINODE_FLAGS:
        if flag in found:  # as argparse reads it: --node-r is --node-rank (cli_flags)
            what = "vLLM has no --num-nodes (its multi-host flag is --nnodes)" if flag == "--num-nodes" else \
                "%s is rendered per host by the planner" % flag
            findings.append(_finding("error", "multinode_flag_in_extra_args", "extra_args has %s: %s" % (flag, what),
                                     "remove it; list the group's hosts in vllm_cluster_hosts (vllm_plan option nodes, master_addr, master_port)"))


def passthrough(p):
    """(option overrides taken from extra_args, findings). The overrides fill options that are unset."""
    findings = []
    overrides = {}
    for part in (_block_size, _kv_cache_memory, _limit_mm):
        overrides.update(part(p, findings))
    _multinode(p, findings)
    if overrides.get("kv_cache_memory_bytes"):
        findings.append(_finding("info", "kv_cache_memory_from_extra_args",
                                 "extra_args --kv-cache-memory sets %d bytes of KV cache per GPU (argparse's prefix of "
                                 "--kv-cache-memory-bytes): planned with it" % overrides["kv_cache_memory_bytes"],
                                 "prefer the option kv_cache_memory_bytes"))
    return overrides, findings
