# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inputs of a start, which of them enter vLLM's torch.compile cache key, and the cache verdict.

What enters the key (read from vLLM 0.32.0's source; 0.26.0 computes it the same way):
- ``vllm/compilation/backends.py`` (``VllmBackend.__call__``): the cache folder is
  ``VLLM_CACHE_ROOT/torch_compile_cache/<sha256([env_hash, config_hash, code_hash, compiler_hash])[:10]>/
  rank_<rank>_<dp_rank>/<prefix>``. The AOT artefact (``decorators.py``, ``caching.aot_compile_hash_factors``)
  lives under ``torch_compile_cache/torch_aot_compile/<sha256(env_hash, config_hash, model hash)>``.
- ``env_hash`` = ``vllm.envs.compile_factors()``: every vLLM environment variable EXCEPT an ignore list, which
  holds ``VLLM_HOST_IP``, ``VLLM_CACHE_ROOT``, ``VLLM_PORT``, ``VLLM_CPU_KVCACHE_SPACE``, ``CUDA_VISIBLE_DEVICES``,
  ``LOCAL_RANK``, ``VLLM_API_KEY``, the logging variables and others (:data:`IGNORED_ENV`). So a copy keeps
  its key on a host with another ``VLLM_HOST_IP`` and another cache folder.
- ``config_hash`` = ``VllmConfig.compute_hash()``: the vLLM version, the model config (the ``model`` path
  itself is NOT ignored, nor ``max_model_len``, dtype, quantization), cache / parallel / scheduler / device /
  load / compilation configs. Ignored there: served name, tokenizer, seed, ``--gpu-memory-utilization``,
  ``--kv-cache-memory-bytes``, prefix caching, master address / port, node rank, nnodes (:data:`ARGV_NOT_IN_KEY`).
- ``code_hash``: the PATH and text of every source file the trace went through: a venv at another path gives
  another key. ``compiler_hash``: torch / inductor configuration (the torch version).
- Before vLLM 0.32.0 (0.26.0 read; the releases between are treated alike), ``compile_factors()`` also hashes
  ``VLLM_CONFIG_ROOT`` (default ``$XDG_CONFIG_HOME/vllm``, else ``$HOME/.config/vllm``) and ``VLLM_XLA_CACHE_PATH``
  (default ``$XDG_CACHE_HOME/vllm/xla_cache``): there the cache folder and HOME DO enter the key (measured on an
  H200, vLLM 0.26.0: a copy to another folder got another key, tests/fixtures/startup/restart-timing-h200-0.26.0).
  0.32.0 ignores both ("location-only derived paths"). A copy is valid on every release when it lands at the same
  ``vllm_cache_dir`` with the same ``vllm_home``; the rollout's pre-warm copies only there.
- The folder ``rank_<rank>_<dp_rank>`` is per global rank: a multi-host member (rank >= 1) needs the folder of
  its own rank, which only a host of the same rank in another group has built.
- ``TRITON_CACHE_DIR`` and ``XDG_CACHE_HOME`` are not vLLM variables: they decide where Triton's and other
  kernels are kept (the unit sets them under ``vllm_cache_dir``), not the key.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R

# vllm/envs.py compile_factors() ignored_factors, vLLM 0.32.0 (the names that exist as vLLM variables).
IGNORED_ENV = frozenset((
    "MAX_JOBS", "VLLM_TRITON_JIT_WARMUP_NUM_THREADS", "VLLM_RPC_BASE_PATH", "VLLM_USE_MODELSCOPE",
    "VLLM_RINGBUFFER_WARNING_INTERVAL", "VLLM_DEBUG_DUMP_PATH", "VLLM_PORT", "VLLM_CACHE_ROOT",
    "VLLM_ENABLE_STARTUP_PLAN", "VLLM_XLA_CACHE_PATH", "VLLM_CONFIG_ROOT", "LD_LIBRARY_PATH",
    "VLLM_SERVER_DEV_MODE", "VLLM_DP_MASTER_IP", "VLLM_DP_MASTER_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "VLLM_RANDOMIZE_DP_DUMMY_INPUTS", "VLLM_MODEL_REDIRECT_PATH", "VLLM_HOST_IP", "VLLM_ELASTIC_EP_SCALE_UP_LAUNCH",
    "VLLM_FORCE_AOT_LOAD", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_ENDPOINT_URL", "VLLM_API_KEY",
    "VLLM_USAGE_STATS_SERVER", "VLLM_NO_USAGE_STATS", "VLLM_DO_NOT_TRACK", "VLLM_LOGGING_LEVEL",
    "VLLM_LOGGING_PREFIX", "VLLM_LOGGING_STREAM", "VLLM_LOGGING_CONFIG_PATH", "VLLM_LOGGING_COLOR",
    "VLLM_LOG_STATS_INTERVAL", "VLLM_DEBUG_LOG_API_SERVER_RESPONSE", "VLLM_TUNED_CONFIG_FOLDER",
    "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR", "VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS", "VLLM_HTTP_TIMEOUT_KEEP_ALIVE",
    "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH",
    "VLLM_IMAGE_FETCH_TIMEOUT", "VLLM_VIDEO_FETCH_TIMEOUT", "VLLM_AUDIO_FETCH_TIMEOUT", "VLLM_MEDIA_CACHE",
    "VLLM_MEDIA_CACHE_MAX_SIZE_MB", "VLLM_MEDIA_CACHE_TTL_HOURS", "VLLM_MEDIA_FETCH_MAX_RETRIES",
    "VLLM_MEDIA_URL_ALLOW_REDIRECTS", "VLLM_MEDIA_LOADING_THREAD_COUNT", "VLLM_MAX_AUDIO_CLIP_FILESIZE_MB",
    "VLLM_MAX_AUDIO_DECODE_DURATION_S", "VLLM_MAX_AUDIO_DECODE_BYTES", "VLLM_MAX_AUDIO_PREPROCESS_WORKERS",
    "VLLM_MAX_EMBED_DECODE_BYTES", "VLLM_MAX_IMAGE_PIXELS", "VLLM_VIDEO_LOADER_BACKEND", "VLLM_MEDIA_CONNECTOR",
    "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME", "VLLM_ASSETS_CACHE", "VLLM_ASSETS_CACHE_MODEL_CLEAN",
    "VLLM_WORKER_MULTIPROC_METHOD", "VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_V1_OUTPUT_PROC_CHUNK_SIZE",
    "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_MOE_PREPACK", "VLLM_ZENTORCH_WEIGHT_PREPACK", "VLLM_TEST_FORCE_LOAD_FORMAT",
    "VLLM_ENABLE_CUDA_COMPATIBILITY", "VLLM_CUDA_COMPATIBILITY_PATH", "VLLM_SKIP_MODEL_NAME_VALIDATION",
    "LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "NO_COLOR", "VLLM_SKIP_VERSION_SUFFIX", "FORCE_COLOR",
))
# Not vLLM variables, but where its caches live: a change moves the cache (empty unless it was copied there).
CACHE_LOCATION_ENV = frozenset(("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR"))
# Before this release compile_factors() hashes VLLM_CONFIG_ROOT and VLLM_XLA_CACHE_PATH, derived from these.
LOCATION_IN_KEY_BEFORE = (0, 32, 0)
LOCATION_DERIVED_ENV = frozenset(("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "VLLM_CONFIG_ROOT",
                                  "VLLM_XLA_CACHE_PATH"))


def location_in_key(version):
    """True for a vLLM release whose compile key holds the config and XLA cache folders (before 0.32.0). The
    release is read by releases.parse_version (the one parser: a 0.32.0rc1 or .dev build sorts before 0.32.0)."""
    return R.parse_version(version or "") < LOCATION_IN_KEY_BEFORE


# Secrets never recorded (the unit keeps them in the 0600 env file anyway).
SECRET_ENV = frozenset(("VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "S3_ACCESS_KEY_ID",
                        "S3_SECRET_ACCESS_KEY"))
# Flags whose config fields vLLM 0.32.0's compute_hash functions ignore (model.py, cache.py, parallel.py) or that
# configure only the API server.
ARGV_NOT_IN_KEY = frozenset((
    "--host", "--port", "--served-model-name", "--api-key", "--seed", "--tokenizer", "--tokenizer-mode",
    "--tokenizer-revision", "--gpu-memory-utilization", "--kv-cache-memory-bytes", "--kv-cache-memory",
    "--enable-prefix-caching", "--no-enable-prefix-caching", "--prefix-caching-hash-algo", "--shutdown-timeout",
    "--tool-call-parser", "--enable-auto-tool-choice", "--reasoning-parser", "--chat-template",
    "--chat-template-content-format", "--uvicorn-log-level", "--disable-uvicorn-access-log", "--disable-log-stats",
    "--enable-log-requests", "--disable-log-requests", "--max-log-len", "--allowed-origins", "--allowed-methods",
    "--allowed-headers", "--middleware", "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--root-path",
    "--nnodes", "--node-rank", "--master-addr", "--master-port", "--headless", "--num-gpu-blocks-override",
    "--skip-tokenizer-init", "--enable-log-outputs", "--response-role", "--return-tokens-as-token-ids",
))


def flags(argv):
    """``{flag: value}`` of an argv, positionals under ``""``: cli_flags.flag_map, the one flag reader."""
    return cli_flags.flag_map(argv)


def inputs(vllm_version, argv, environment, venv, cache_dir, gpu=None, node_rank=None):
    """The recorded inputs of a start (secrets dropped). ``argv`` is ExecStart's argv (its first item the
    ``vllm`` of the venv, numactl's prefix cut by the caller), ``environment`` the unit's variables."""
    env = dict((k, str(v)) for k, v in sorted((environment or {}).items()) if k not in SECRET_ENV)
    return {
        "vllm_version": str(vllm_version) if vllm_version else None,
        "argv": [str(a) for a in argv or []],
        "environment": env,
        "venv": venv,
        "cache_dir": cache_dir,
        "gpu": gpu,
        "node_rank": node_rank,
    }


def fingerprint(record_inputs):
    """A short digest of the inputs that enter the key (what a copied cache must match)."""
    keyed = key_inputs(record_inputs)
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def key_inputs(record_inputs):
    """The part of the inputs that enters vLLM's key (plus the GPU type: kernels are built for it)."""
    env = record_inputs.get("environment") or {}
    parsed = flags(record_inputs.get("argv") or [])
    return {
        "vllm_version": record_inputs.get("vllm_version"),
        "venv": record_inputs.get("venv"),
        "gpu": record_inputs.get("gpu"),
        "env": dict((k, v) for k, v in env.items() if (k.startswith("VLLM_") and k not in IGNORED_ENV) or (
            k in LOCATION_DERIVED_ENV and location_in_key(record_inputs.get("vllm_version")))),
        "argv": dict((k, v) for k, v in parsed.items() if k not in ARGV_NOT_IN_KEY),
    }


def differences(before, after):
    """What changed between two recorded inputs: ``[{input, before, after, enters_key, note}]``."""
    out = []
    if not before:
        return out

    def add(name, old, new, enters, note):
        out.append({"input": name, "before": old, "after": new, "enters_key": enters, "note": note})

    for name, note in (("vllm_version", "the vLLM version is in VllmConfig.compute_hash"),
                       ("venv", "source file paths are in the code hash"),
                       ("gpu", "kernels are built for the GPU type")):
        if before.get(name) != after.get(name):
            add(name, before.get(name), after.get(name), True, note)
    old_flags, new_flags = flags(before.get("argv")), flags(after.get("argv"))
    for flag in sorted(set(old_flags) | set(new_flags)):
        if old_flags.get(flag) != new_flags.get(flag):
            name = flag or "model (positional)"
            ignored = flag in ARGV_NOT_IN_KEY
            add("argv " + name, old_flags.get(flag), new_flags.get(flag), not ignored,
                "ignored by vLLM's compute_hash" if ignored else "enters the config hash")
    old_env, new_env = before.get("environment") or {}, after.get("environment") or {}
    for name in sorted(set(old_env) | set(new_env)):
        if old_env.get(name) == new_env.get(name):
            continue
        if name in LOCATION_DERIVED_ENV and location_in_key(after.get("vllm_version")):
            enters, note = True, ("before vLLM 0.32.0 the key hashes VLLM_CONFIG_ROOT and VLLM_XLA_CACHE_PATH, "
                                  "derived from HOME / XDG_CACHE_HOME / XDG_CONFIG_HOME")
        elif name in CACHE_LOCATION_ENV:
            enters, note = False, "a cache location: not in the key, but the cache there is empty unless copied"
        elif name.startswith("VLLM_") and name not in IGNORED_ENV:
            enters, note = True, "a vLLM variable in envs.compile_factors()"
        elif name.startswith("VLLM_"):
            enters, note = False, "in envs.compile_factors()'s ignore list"
        else:
            enters, note = False, "not a vLLM variable"
        add("env " + name, old_env.get(name), new_env.get(name), enters, note)
    if before.get("cache_dir") != after.get("cache_dir"):
        add("cache_dir", before.get("cache_dir"), after.get("cache_dir"), False,
            "VLLM_CACHE_ROOT is not in the key; the cache moved (empty unless copied)")
    return out


def judge(log_verdict, keys, previous, diffs, expect_hit=False, copied_from=None):
    """The verdict of a start: ``{status, expected, finding, cause, key_changed}``.

    ``log_verdict``: boot_log's ``compile_cache``; ``keys``: this start's key folders from its log; ``previous``:
    the last record on this host (or None); ``diffs``: :func:`differences`; ``expect_hit``: a pre-warmed copy
    was installed for this start (copied_from names it). A miss is expected on the first start, after a change
    of an input that enters the key, or after the cache moved; anything else is a finding."""
    status = log_verdict.get("status")
    prev_keys = (previous or {}).get("compile", {}).get("keys") or []
    key_changed = bool(prev_keys and keys and not set(keys) & set(prev_keys))
    keyed = [d for d in diffs if d["enters_key"]]
    moved = [d for d in diffs if d["input"] == "cache_dir" or d["input"].replace("env ", "") in CACHE_LOCATION_ENV]
    out = {"status": status, "expected": True, "finding": None, "cause": log_verdict.get("cause"),
           "key_changed": key_changed}
    if status in ("hit", "not_applicable", "disabled", "unknown"):
        if status == "disabled":
            out["cause"] = "vLLM's torch.compile cache is disabled (VLLM_DISABLE_COMPILE_CACHE or the mode)"
        return out
    if status == "unloadable":
        out["expected"] = False
        out["finding"] = ("the key matched%s but vLLM could not load its artefact and compiled again" % (
            " the pre-warmed copy" if expect_hit else ""))
        return out
    # miss or partial
    if keyed:
        out["cause"] = "inputs of the key changed: " + "; ".join(
            "%s %s -> %s" % (d["input"], _short(d["before"]), _short(d["after"])) for d in keyed)
        return out
    if expect_hit:
        out["expected"] = False
        out["finding"] = "a pre-warmed copy%s was installed but the engine compiled" % (
            (" from " + copied_from) if copied_from else "")
        out["cause"] = ("the key of this start (%s) is not in the copy: an input differs from the host that built "
                        "it" % ", ".join(keys)) if keys else out["cause"]
        return out
    if previous is None:
        out["cause"] = "first start recorded here: nothing was compiled for these inputs before"
        return out
    if moved:
        out["cause"] = "the cache moved: " + "; ".join(
            "%s %s -> %s" % (d["input"], _short(d["before"]), _short(d["after"])) for d in moved)
        return out
    out["expected"] = False
    if key_changed:
        out["finding"] = "recompiled with unchanged recorded inputs: the key changed (%s -> %s)" % (
            ", ".join(prev_keys), ", ".join(keys))
        out["cause"] = ("an input the record does not hold changed: torch/inductor, a vLLM source file, the "
                        "model's config.json, or a variable set outside the unit")
    else:
        out["finding"] = "recompiled with unchanged inputs and the same key"
        out["cause"] = ("the compiled artefacts were missing: the cache folder was emptied, not writable, or not "
                        "persisted (look at %s)" % ", ".join(keys) if keys else "the compiled artefacts were missing")
    return out


def _short(value, limit=80):
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit - 3] + "..."


def unit_inputs(unit_text):
    """``(argv, environment, venv, node_rank)`` from a unit file the vllm role rendered.

    ``argv`` starts at the ``vllm`` executable (a ``numactl ... --`` prefix is cut); ``venv`` is the folder above
    its ``bin/``; ``environment`` holds the ``Environment=`` assignments (the EnvironmentFile's secrets are not
    read)."""
    from ansible_collections.gpufleet.vllm.plugins.module_utils.units import systemd_unit

    argv, env, node_rank = [], {}, None
    for raw in unit_text.splitlines():
        line = raw.strip()
        if line.startswith("ExecStart="):
            argv = systemd_unit.parse_exec_line(line[len("ExecStart="):])
        elif line.startswith("Environment="):
            env.update(systemd_unit.parse_environment(line[len("Environment="):]))
        elif line.startswith("X-GpufleetVllmNodeRank="):
            node_rank = line.split("=", 1)[1]
    if "--" in argv and argv and argv[0].endswith("numactl"):
        argv = argv[argv.index("--") + 1:]
    venv = None
    if argv and "/bin/" in argv[0]:
        venv = argv[0].rsplit("/bin/", 1)[0]
    return argv, env, venv, node_rank
