# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The correctness canary: one greedy request sent cold, then again as a prefix-cache hit; the
generated token ids must be identical.

With a KV offload tier (the OffloadingConnector) a hit can come from either tier: :func:`tier_verdict` reads the
tokens each send found in the GPU prefix cache (``vllm:prefix_cache_hits_total``) and through the connector
(``vllm:external_prefix_cache_hits_total``), so a canary can prove a CPU-tier hit (the prompt evicted from the GPU,
found in host memory) and can catch a "cold" send that was not cold: a cache reset that did not reach every tier
(vLLM's ``POST /reset_prefix_cache`` resets the connector's tier only with ``reset_external=true``).

The prompt starts with a per-run unique text (so its first KV block was never cached: the first send
is really cold) and is a few KV blocks long (vLLM caches full blocks only: a prompt shorter than one
block can never hit). Token ids come back with ``return_token_ids`` (vLLM's completions API since
0.10.2, PR 22587: ``choices[0].token_ids``; present in 0.26 and 0.32). The hit is proved by
``vllm:prefix_cache_hits_total`` rising between the two sends, not assumed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def request_body(model, prompt_ids, max_tokens, seed):
    """A greedy, seeded completion of exactly max_tokens tokens from a token-id prompt, ids returned."""
    return dict(model=model, prompt=list(prompt_ids), max_tokens=max_tokens, temperature=0, seed=seed,
                ignore_eos=True, return_token_ids=True, logprobs=1)


def logprob_delta(cold, warm):
    """The largest |difference| between the two sends' per-token logprobs (0.0: bit-identical), or None."""
    if not cold or not warm or len(cold) != len(warm) or None in cold or None in warm:
        return None
    return max(abs(a - b) for a, b in zip(cold, warm))


def prompt_ids(unique_ids, filler_ids, length):
    """unique_ids first, then filler ids repeated, cut to ``length`` tokens."""
    if not filler_ids:
        raise ValueError("filler_ids must not be empty")
    ids = list(unique_ids)
    while len(ids) < length:
        ids.extend(filler_ids)
    return ids[:length]


def compare(cold, warm, hits_cold, hits_warm):
    """The verdict: {identical, first_difference, cache_hit, hit_tokens, status, message}.

    The rule: the generated token ids must be identical; the logprobs are reported beside (``logprob_delta``)
    but not gated, since a cached prefix skips the prefill kernels whose float sums are not bit-stable
    across batch shapes on every backend.

    status: ``pass`` (same ids and the second send hit the cache), ``no_hit`` (same ids, but the hit
    counter did not move: the check proved nothing about the cache), ``mismatch`` (different ids).
    """
    first = None
    for index in range(max(len(cold), len(warm))):
        if index >= len(cold) or index >= len(warm) or cold[index] != warm[index]:
            first = index
            break
    hit_tokens = None if hits_cold is None or hits_warm is None else hits_warm - hits_cold
    cache_hit = bool(hit_tokens)
    if first is not None:
        status = "mismatch"
        message = ("canary MISMATCH: the prefix-cache hit generated different token ids from the cold run, first "
                   "at position %d (cold %s, cached %s)" % (first, cold[first:first + 4], warm[first:first + 4]))
    elif not cache_hit:
        status = "no_hit"
        message = ("canary inconclusive: identical ids, but vllm:prefix_cache_hits_total did not rise on the second "
                   "send (prefix caching off, or the prompt is shorter than one KV block)")
    else:
        status = "pass"
        message = "canary ok: %d generated ids identical cold and from %d cached prompt tokens" % (
            len(cold), hit_tokens)
    return dict(identical=first is None, first_difference=first, cache_hit=cache_hit,
                hit_tokens=hit_tokens, status=status, message=message)


def _first_difference(cold, warm):
    for index in range(max(len(cold), len(warm))):
        if index >= len(cold) or index >= len(warm) or cold[index] != warm[index]:
            return index
    return None


def tier_verdict(cold, warm, cold_hits, warm_hits):
    """The canary across KV tiers. ``cold_hits`` / ``warm_hits``: {"gpu": tokens, "offload": tokens} each send found
    (counter deltas over that send; None where the engine exposes no such counter).

    status: ``not_cold`` (the cold send found cached tokens: a reset missed a tier, the comparison proves nothing),
    ``mismatch`` (different ids), ``pass`` (same ids; ``tier`` says where the second send's prefix came from:
    ``gpu``, ``offload`` or ``gpu+offload``), ``no_hit`` (same ids, no tier found the prompt)."""
    cold_found = dict((tier, n) for tier, n in (cold_hits or {}).items() if n)
    if cold_found:
        where = " and ".join("%d from the %s tier" % (n, tier) for tier, n in sorted(cold_found.items()))
        return dict(status="not_cold", tier=None, first_difference=None, message=(
            "canary NOT COLD: the first send found cached tokens (%s): a cache reset did not reach every tier "
            "(the offload tier is reset only by POST /reset_prefix_cache?reset_external=true)" % where))
    first = _first_difference(cold, warm)
    if first is not None:
        return dict(status="mismatch", tier=None, first_difference=first, message=(
            "canary MISMATCH: the cached send generated different token ids from the cold one, first at position %d "
            "(cold %s, cached %s)" % (first, cold[first:first + 4], warm[first:first + 4])))
    gpu, offload = (warm_hits or {}).get("gpu") or 0, (warm_hits or {}).get("offload") or 0
    tier = "+".join(name for name, n in (("gpu", gpu), ("offload", offload)) if n) or None
    if tier is None:
        return dict(status="no_hit", tier=None, first_difference=None, message=(
            "canary inconclusive: identical ids, but no tier found the prompt on the second send"))
    return dict(status="pass", tier=tier, first_difference=None, message=(
        "canary ok: %d generated ids identical cold and from the %s tier (%d tokens from the GPU cache, %d through "
        "the offload connector)" % (len(cold), tier, gpu, offload)))
