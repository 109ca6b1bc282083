# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A length mix (``gpufleet_workloads[].mix``): short and long prompts in ONE ``vllm bench serve`` run, so
they share the engine at the same time, and the per-class figures read from vLLM's own per-request output.

The mechanism is vLLM's ``timed_trace`` dataset (vLLM 0.32.0, ``vllm/benchmarks/datasets/datasets.py``,
``TimedTrace``), fed a JSONL this file writes: one row per request with ``input_length``,
``output_length``, ``hash_ids`` and ``timestamp``. Why this one:

- ``TimedTrace.load_data`` reads the file with ``open``/``json`` (no pandas: ``custom``'s
  ``CustomDataset.load_data`` calls ``pd.read_json``, and the vllm role installs no ``vllm[bench]``);
- ``TimedTrace._expand_prompt`` builds each prompt as token ids, ``chunk_size`` (16) sampled tokens per hash
  id, so a prompt is exactly ``input_length`` tokens - no chat template, no re-tokenisation (``custom`` applies
  the chat template and counts the text's tokens);
- each row carries its own ``output_length``, and serve.py's ``main_async`` sets ``ignore_eos`` for
  ``timed_trace``, so every request generates exactly that many tokens;
- ``--no-self-timed`` (serve.py ``get_request``) ignores the rows' timestamps: ``--max-concurrency`` and
  ``--request-rate`` schedule the requests as for every other workload.

Distinct hash ids give distinct prompts (``_expand_prompt`` caches tokens per ``"<id>:<size>"``): the ids are
offset by the point's seed, so the points of a sweep never share a prompt in the prefix cache. The rows are
spread evenly (class by class, each at (k + 0.5) / count of the run), so the long prompts arrive among the
short ones, the same order on every run.

The split: with ``--save-detailed`` the result JSON has vLLM's per-request lists (serve.py ``benchmark``:
``input_lens``, ``output_lens``, ``ttfts``, ``itls``, ``latencies``, ``errors``; 0.26.0 has no ``latencies``:
there a request's latency is its TTFT plus its ITLs, as serve.py's request function builds both). A request's
class is its ``input_lens`` entry (exact: token-id prompts), so classes need distinct input lengths. The
figures per class are vLLM's definitions (``calculate_metrics``): successful requests only, TPOT = (latency -
TTFT) / (output tokens - 1) for outputs longer than one token, percentiles as ``numpy.percentile`` (linear).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import failures
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

CHUNK = 16  # --timed-trace-chunk-hash-size (vLLM's default): tokens per hash id
# "requests" is computed (share x num_prompts); accepted back only with the computed value (a validated
# workload is validated again by the module).
_CLASS_KEYS = ("name", "share", "input_len", "output_len", "requests")
# Keys a mix workload leaves out or at their default (they shape the random / prefix_repetition datasets only).
_EXCLUSIVE = {"input_len": None, "prefix_len": 0, "range_ratio": 0.0, "num_prefixes": 1, "suffix_len": None}
PERCENTILES = (50, 90, 99)
_ID_SPAN = 10 ** 9  # hash ids of one point: seed * span + running index


def _where(index, name):
    return "gpufleet_workloads[%d] (%s)" % (index, name)


def _whole(where, key, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchError("%s.%s must be a whole number >= 1, not %r." % (where, key, value))
    return value


def _share(where, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise BenchError("%s.share must be a number in (0, 1] (the fraction of num_prompts), not %r." % (where, value))
    return float(value)


def _input_len(where, value, output_len, max_model_len):
    if value == "max":
        if not max_model_len:
            raise BenchError("%s.input_len max needs the plan's max_model_len: give a number." % where)
        return max_model_len - output_len
    return _whole(where, "input_len", value)


def _one_class(where, raw, default_output, max_model_len):
    if not isinstance(raw, dict):
        raise BenchError("%s must be a mapping {share: 0.8, input_len: 512}, not %r." % (where, raw))
    unknown = sorted(set(raw) - set(_CLASS_KEYS))
    if unknown:
        raise BenchError("%s has unknown key(s) %s: use only %s." % (where, ", ".join(unknown), ", ".join(_CLASS_KEYS)))
    for key in ("share", "input_len"):
        if key not in raw:
            raise BenchError("%s.%s is required (e.g. {share: 0.2, input_len: max})." % (where, key))
    output_len = _whole(where, "output_len", raw.get("output_len", default_output))
    out = dict(name=raw.get("name"), share=_share(where, raw["share"]), output_len=output_len,
               input_len=_input_len(where, raw["input_len"], output_len, max_model_len))
    if out["name"] is not None and (not isinstance(out["name"], str) or not out["name"]):
        raise BenchError("%s.name must be a non-empty string, not %r." % (where, out["name"]))
    total = out["input_len"] + output_len
    if max_model_len and total > max_model_len:
        raise BenchError("%s: input_len %d + output_len %d = %d tokens but the plan's max_model_len is %d: use "
                         "input_len: max (%d) or shorten it, or the engine rejects the request."
                         % (where, out["input_len"], output_len, total, max_model_len, max_model_len - output_len))
    return out


def _name_classes(where, classes):
    lengths = [c["input_len"] for c in classes]
    if len(set(lengths)) != len(lengths):
        raise BenchError("%s: two classes have the same input_len %s: give each a distinct one (a request's class "
                         "is read from its prompt length in vLLM's per-request output)." % (where, lengths))
    shortest, longest = min(lengths), max(lengths)
    for c in classes:
        if c["name"] is None:
            c["name"] = "short" if c["input_len"] == shortest else "long" if c["input_len"] == longest \
                else "in%d" % c["input_len"]
    names = [c["name"] for c in classes]
    if len(set(names)) != len(names):
        raise BenchError("%s: class names must be unique, got %s: name them (mix[].name)." % (where, names))


def counts(shares, num_prompts):
    """Requests per class: the largest-remainder rounding of share x num_prompts (sums to num_prompts)."""
    exact = [s * num_prompts for s in shares]
    out = [int(e) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:num_prompts - sum(out)]:
        out[i] += 1
    return out


def _fewest_prompts(shares, num_prompts):
    n = num_prompts
    while min(counts(shares, n)) < 1:
        n += 1
    return n


def validate(index, raw, workload, max_model_len):
    """The classes of a mix workload (``raw``: the inventory's mapping; ``workload``: filled by workloads._fill).

    Returns [{name, share, input_len, output_len, requests}]; BenchError names the key and the fix.
    """
    where = _where(index, workload["name"])
    mix = raw["mix"]
    if isinstance(mix, (str, bytes, dict)) or not isinstance(mix, (list, tuple)) or len(mix) < 2:
        raise BenchError("%s: mix must be a list of at least two classes, e.g. [{share: 0.8, input_len: 512}, "
                         "{share: 0.2, input_len: max}], not %r." % (where, mix))
    clash = [k for k in sorted(_EXCLUSIVE) if raw.get(k, _EXCLUSIVE[k]) != _EXCLUSIVE[k]]
    clash += ["dataset"] if raw.get("dataset", "timed_trace") not in ("timed_trace", "random") else []
    if clash:
        raise BenchError("%s: %s cannot be set with mix (each class has its own input_len; the mix runs vLLM's "
                         "timed_trace dataset): remove %s." % (where, ", ".join(clash), ", ".join(clash)))
    classes = [_one_class("%s.mix[%d]" % (where, i), c, workload["output_len"], max_model_len)
               for i, c in enumerate(mix)]
    total = sum(c["share"] for c in classes)
    if abs(total - 1.0) > 1e-6:
        raise BenchError("%s: the mix's shares sum to %s, not 1: make them add up to 1 (e.g. 0.8 and 0.2)."
                         % (where, round(total, 6)))
    _name_classes(where, classes)
    shares = [c["share"] for c in classes]
    per = counts(shares, workload["num_prompts"])
    if min(per) < 1:
        raise BenchError("%s: num_prompts %d gives class %s no request (%s): raise num_prompts to at least %d."
                         % (where, workload["num_prompts"], classes[per.index(min(per))]["name"],
                            ", ".join("%s %d" % (c["name"], n) for c, n in zip(classes, per)),
                            _fewest_prompts(shares, workload["num_prompts"])))
    for i, (c, n) in enumerate(zip(classes, per)):
        given = mix[i].get("requests", n)
        if given != n:
            raise BenchError("%s.mix[%d].requests is %r but share x num_prompts gives %d: leave requests out (it is "
                             "computed)." % (where, i, given, n))
        c["requests"] = n
    return classes


def order(classes):
    """The class index of each request of the run: every class spread evenly over the run, the same each time."""
    slots = []
    for i, c in enumerate(classes):
        slots += [((k + 0.5) / c["requests"], i) for k in range(c["requests"])]
    return [slot[1] for slot in sorted(slots)]


def jsonl(classes, seed):
    """The timed_trace JSONL of one point: one row per request, distinct hash ids offset by ``seed``."""
    rows, next_id = [], seed * _ID_SPAN
    for i in order(classes):
        c = classes[i]
        chunks = -(-c["input_len"] // CHUNK)
        rows.append(json.dumps(dict(timestamp=0, input_length=c["input_len"], output_length=c["output_len"],
                                    hash_ids=list(range(next_id, next_id + chunks))), sort_keys=True))
        next_id += chunks
    return "\n".join(rows) + "\n"


def dataset_args(path="{dataset_path}"):
    """vLLM's flags for the mix (serve.py add_cli_args, datasets.py add_dataset_parser)."""
    return ["--dataset-name", "timed_trace", "--dataset-path", path, "--no-self-timed",
            "--timed-trace-chunk-hash-size", str(CHUNK), "--save-detailed"]


def percentile(values, q):
    """``numpy.percentile(values, q)`` (linear interpolation, numpy's default), as vLLM computes its own; None if empty."""
    data = sorted(values)
    if not data:
        return None
    rank = (len(data) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (rank - low) * (data[high] - data[low])


def _per_request(result):
    """vLLM's per-request lists as one dict per request (needs --save-detailed)."""
    lists = [result.get(k) for k in ("input_lens", "ttfts", "itls", "output_lens", "errors")]
    if any(v is None for v in lists):
        raise BenchError("vLLM's result has no per-request input_lens/ttfts/itls/output_lens/errors: the mix needs "
                         "--save-detailed (a vLLM whose `vllm bench serve --help=all` lists it).")
    latencies = result.get("latencies")
    out = []
    for i, (n, ttft, itl, olen, error) in enumerate(zip(*lists)):
        latency = latencies[i] if latencies is not None else (ttft or 0.0) + sum(itl or [])
        out.append(dict(input_len=n, ttft=ttft, itl=itl or [], output_len=olen, error=error, latency=latency))
    return out


def _figures(requests, asked):
    good = [r for r in requests if not r["error"]]
    ms = dict(ttft=[r["ttft"] * 1000.0 for r in good], e2el=[r["latency"] * 1000.0 for r in good],
              itl=[x * 1000.0 for r in good for x in r["itl"]],
              tpot=[(r["latency"] - r["ttft"]) * 1000.0 / (r["output_len"] - 1) for r in good if r["output_len"] > 1])
    out = dict(requests=len(requests), completed=len(good), failed=len(requests) - len(good),
               truncated=sum(1 for r in good if (r["output_len"] or 0) < asked),
               errors=failures.error_texts(r["error"] for r in requests),
               mean_ttft_ms=sum(ms["ttft"]) / len(good) if good else None)
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for q in PERCENTILES:
            out["p%d_%s_ms" % (q, metric)] = percentile(ms[metric], q)
    return out


def split(result, classes):
    """Per-class figures of one mix point from vLLM's per-request output: [{name, input_len, ..., p90_ttft_ms}]."""
    by_len = dict((c["input_len"], c["name"]) for c in classes)
    grouped = dict((c["name"], []) for c in classes)
    for r in _per_request(result):
        name = by_len.get(r["input_len"])
        if name is None:
            raise BenchError("vLLM sent a request of %s prompt tokens, which no class of the mix has (%s): the JSONL "
                             "was not read as written (--timed-trace-chunk-hash-size %d?)."
                             % (r["input_len"], sorted(by_len), CHUNK))
        grouped[name].append(r)
    return [dict(_figures(grouped[c["name"]], c["output_len"]), name=c["name"], input_len=c["input_len"], output_len=c["output_len"],
                 share=c["share"]) for c in classes]
