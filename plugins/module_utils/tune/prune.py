# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prune before launching: each candidate's plan (gpufleet.vllm.vllm_plan's result) decides whether it is started.

A candidate is skipped, with the planner's reason, when the planner refused it (an error finding: does not
fit, removed flag, ...) or when its planned concurrency at the workload's longest request is below the
concurrency the operator asked for. The planned concurrency at a length L is the KV pool's blocks over the
blocks one request of L tokens takes (vLLM's ``get_max_concurrency_for_kv_cache_config``: num_blocks over
ceil(L / block_size) per attention group), capped by ``--max-num-seqs`` where the candidate sets it (the
scheduler never runs more). Hybrid models (linear-attention groups, whose state per request does not shrink
with L) keep the figure at max_model_len, a lower bound, and say so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.cli_flags import flag_values


def _ceil_div(a, b):
    return -(-int(a) // int(b))


def planned_concurrency(capacity, request_tokens):
    """(requests of ``request_tokens`` the KV pool holds at once, how it was counted) from a plan's capacity."""
    blocks, size, per_max = capacity.get("num_blocks"), capacity.get("block_size"), capacity.get("blocks_per_request")
    max_len = capacity.get("max_model_len")
    if not blocks or not size or not per_max or not max_len:
        return None, "the plan has no KV block figures (utilization estimate without the model's memory?)"
    if capacity.get("linear_groups"):
        return int(capacity.get("max_concurrency") or 0), "hybrid model: requests of max_model_len (a lower bound)"
    per_request = per_max * _ceil_div(request_tokens, size) / float(_ceil_div(max_len, size))
    return int(blocks // per_request), "%d blocks of %d tokens, %d per request of %d tokens" % (
        blocks, size, _ceil_div(request_tokens, size), request_tokens)


def _max_num_seqs(profile):
    values = flag_values(profile.get("extra_args"), "--max-num-seqs")
    return int(values[-1]) if values and str(values[-1]).isdigit() else None


def verdict(candidate, plan, request_tokens, concurrency):
    """{id, status: launch | skipped, reason, planned{...}} for one candidate and its registered plan."""
    out = dict(id=candidate["id"], label=candidate["label"], planned={})
    if not plan or plan.get("failed") or not plan.get("instances"):
        errors = [f for f in (plan or {}).get("findings") or [] if f.get("level") == "error"]
        reason = "; ".join("%s: %s" % (f["code"], f["message"]) for f in errors) or (plan or {}).get("msg") or "no plan"
        out.update(status="skipped", reason="planner: " + reason)
        return out
    cap = plan.get("capacity") or {}
    kv, how = planned_concurrency(cap, request_tokens)
    seqs = _max_num_seqs(candidate.get("profile") or {})
    held = kv if seqs is None or kv is None else min(kv, seqs)
    instances = len(plan["instances"])
    out["planned"] = dict(kv_cache_tokens=cap.get("kv_cache_tokens"), max_concurrency=cap.get("max_concurrency"),
                          log_line=cap.get("log_line"), concurrency_at_length=held, kv_concurrency_at_length=kv,
                          max_num_seqs=seqs, instances=instances, counted=how, request_tokens=request_tokens)
    if cap.get("fits") is False:
        out.update(status="skipped", reason="planner: one request of max_model_len does not fit (max %s)" % cap.get("max_model_len_that_fits"))
    elif held is not None and held * instances < concurrency:
        limit = "--max-num-seqs %d" % seqs if seqs is not None and seqs <= (kv or seqs) else "the KV pool (%s)" % how
        out.update(status="skipped", reason="planner: %d concurrent requests of %d tokens (%s x %d instance(s)), below the "
                   "requested concurrency %d" % (held * instances, request_tokens, limit, instances, concurrency))
    else:
        out.update(status="launch", reason="planned %s concurrent requests of %d tokens >= %d requested" % (
            "?" if held is None else held * instances, request_tokens, concurrency))
    return out


def defaults_hold(defaults, plan, request_tokens, wanted):
    """The concurrency candidates must hold when the operator gave none: the workloads' highest, or - when vLLM's
    defaults cannot hold that many (a KV-bound workload queues) - what the defaults hold, so the reference runs and
    a candidate holding fewer than the defaults is pruned."""
    held = verdict(defaults, plan, request_tokens, 0)["planned"]
    count = held.get("concurrency_at_length")
    if count is None:
        return wanted
    return max(1, min(wanted, count * held["instances"]))


def workload_demand(workloads):
    """(longest request in tokens, highest concurrency) over the tune workloads (validated bench workloads)."""
    longest, most = 0, 0
    for w in workloads:
        length = int(w.get("prefix_len") or 0) + int(int(w["input_len"]) * (1 + float(w.get("range_ratio") or 0.0))) + int(w.get("output_len") or 16)
        longest = max(longest, length)
        most = max([most] + [int(c) for c in w.get("concurrency") or [1]])
    return longest, most
