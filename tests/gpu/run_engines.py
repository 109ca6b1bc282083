# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU acceptance, engine part: start the REAL vLLM engine from each unit the role rendered.

    run_engines.py prepare --work DIR [--cases FILE]   model folders (real config.json + stand-in tokenizer)
    run_engines.py run --work DIR [--only a,b] [--deadline S]
    run_engines.py report --work DIR --out DIR

``run`` takes ExecStart= and Environment= from the rendered unit through the project's own parser
(plugins/module_utils/units/systemd_unit.py), adds only ``--load-format dummy`` (random weights at real
size: no download), starts the engine, reads its KV lines, runs the role's health gate
(roles/vllm/files/vllm_health_gate.py) for a real completion, scrapes /metrics, stops the engine.
Cases run side by side where GPUs are free; the one thing changed in the unit's environment is
CUDA_VISIBLE_DEVICES when a case is moved to a free GPU (recorded per case).

Stand-ins, named as such: the tokenizer (a word-level tokenizer with the model's vocabulary size,
made here: KV figures do not depend on it) and tests/gpu/standin-bin's ``systemctl``/``journalctl``,
which report the state and log of the engine process this script started to the health gate.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "model-configs")
GATE = os.path.join(ROOT, "roles", "vllm", "files", "vllm_health_gate.py")
STANDIN_BIN = os.path.join(HERE, "standin-bin")
# NVLink multicast must stay off on shared hosts: forced into every engine's environment.
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
KV_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
REFUSAL = re.compile(r"To serve at least one request with the model's max seq len.*")
SUGGESTED = re.compile(r"estimated maximum model length is (\d+)")
MEMORY_LINE = re.compile(r"(memory|KV cache|Model loading took|CUDA graph|block size|Maximum concurrency|page size|"
                         r"prefix caching|mamba|attention block|Graph capturing|cudagraph|torch.compile)", re.IGNORECASE)
# The engine's own memory terms (vllm/v1/worker/gpu_worker.py and the model runners, 0.26.0), in GiB.
MEMORY_TERMS = (
    ("model_loading_gib", re.compile(r"Model loading took ([\d.]+) GiB")),
    ("available_kv_gib", re.compile(r"Available KV cache memory: ([\d.]+) GiB")),
    ("estimated_cudagraph_gib", re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB total")),
    ("startup_free_gib", re.compile(r"Free memory on device \(([\d.]+)/[\d.]+ GiB\) on startup")),
    ("startup_total_gib", re.compile(r"Free memory on device \([\d.]+/([\d.]+) GiB\) on startup")),
    ("requested_gib", re.compile(r"Desired GPU memory utilization is \([\d.]+, ([\d.]+) GiB\)")),
    ("weights_gib", re.compile(r"Actual usage is ([\d.]+) GiB for weight")),
    ("peak_activation_gib", re.compile(r"([\d.]+) GiB for peak activation")),
    ("non_torch_gib", re.compile(r"([\d.]+) GiB for non-torch memory")),
    ("cudagraph_gib", re.compile(r"([\d.]+) GiB for CUDAGraph memory")),
    ("suggested_kv_cache_memory_bytes", re.compile(r"`--kv-cache-memory=(\d+)` \([\d.]+ GiB\) to fit into requested")),
    ("graph_capture_seconds", re.compile(r"Graph capturing finished in ([\d.]+) secs")),
    ("graph_capture_gib", re.compile(r"Graph capturing finished in [\d.]+ secs, took ([\d.]+) GiB")),
)
BLOCKS_METRIC = re.compile(r'^vllm:cache_config_info\{([^}]*)\}', re.MULTILINE)


def load_systemd_unit():
    path = os.path.join(ROOT, "plugins", "module_utils", "systemd_unit.py")
    spec = importlib.util.spec_from_file_location("gpufleet_systemd_unit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_cases(path):
    import yaml  # PyYAML ships with Ansible's dependencies

    with open(path) as handle:
        return yaml.safe_load(handle)["cases"]


# --- prepare -----------------------------------------------------------------------------------

def text_config(raw):
    return raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw


def write_standin_tokenizer(folder, vocab_size):
    """A word-level tokenizer with exactly the model's vocabulary size (stand-in: no weights, no real tokens)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    vocab = {"<unk>": 0, "<eos>": 1}
    for word in ("Say", "OK", ".", "Hello", "world"):
        vocab[word] = len(vocab)
    for i in range(len(vocab), vocab_size):
        vocab["w%d" % i] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as handle:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "eos_token": "<eos>",
                   "model_max_length": 1 << 22, "stand_in": "gpufleet GPU acceptance word-level tokenizer"}, handle)


def cmd_prepare(opts):
    models = os.path.join(opts.work, "models")
    for case in load_cases(opts.cases):
        folder = os.path.join(models, case["model"])
        if not os.path.exists(os.path.join(folder, "tokenizer.json")):
            os.makedirs(folder, exist_ok=True)
            shutil.copy(os.path.join(FIXTURES, case["model"] + ".config.json"), os.path.join(folder, "config.json"))
            with open(os.path.join(folder, "config.json")) as handle:
                raw = json.load(handle)
            write_standin_tokenizer(folder, int(text_config(raw)["vocab_size"]))
        if case.get("weights_index"):
            with open(os.path.join(FIXTURES, case["weights_index"])) as handle:
                total = int(re.search(r'"total_size":\s*(\d+)', handle.read()).group(1))
            with open(os.path.join(folder, "model.safetensors.index.json"), "w") as handle:
                json.dump({"metadata": {"total_size": total}, "weight_map": {}}, handle)
    for sub in ("home", "cache"):
        os.makedirs(os.path.join(opts.work, sub), exist_ok=True)
    open(os.path.join(opts.work, "vllm.env"), "a").close()
    os.chmod(os.path.join(opts.work, "vllm.env"), 0o600)
    print("prepared", models)


# --- run ---------------------------------------------------------------------------------------

def read_unit(path, su):
    exec_line, env = None, {}
    with open(path) as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line.startswith("ExecStart="):
                exec_line = line[len("ExecStart="):]
            elif line.startswith("Environment="):
                env.update(su.parse_environment(line[len("Environment="):]))
    return su.parse_exec_line(exec_line), env


def set_flag(argv, flag, value):
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def parse_log(text):
    tokens = [int(m.group(1).replace(",", "")) for m in KV_TOKENS.finditer(text)]
    conc = [(int(m.group(1).replace(",", "")), float(m.group(2))) for m in KV_CONC.finditer(text)]
    refusal = REFUSAL.search(text)
    suggested = SUGGESTED.search(text)
    return {
        "logged_kv_tokens_all": tokens,
        "logged_kv_tokens": tokens[-1] if tokens else None,
        "logged_concurrency": conc[-1][1] if conc else None,
        "logged_concurrency_len": conc[-1][0] if conc else None,
        "refusal": refusal.group(0)[:400] if refusal else None,
        "suggested_max_model_len": int(suggested.group(1)) if suggested else None,
        "log_lines": [ln.strip()[:600] for ln in text.splitlines() if MEMORY_LINE.search(ln)][:60],
        "memory_terms": memory_terms(text),
    }


def memory_terms(text):
    """The engine's memory figures as it logged them (first occurrence of each; None when not logged)."""
    out = {}
    for key, pattern in MEMORY_TERMS:
        match = pattern.search(text)
        out[key] = None if match is None else (int(match.group(1)) if key.endswith("_bytes") else float(match.group(1)))
    return out


def metrics_blocks(text):
    for match in BLOCKS_METRIC.finditer(text or ""):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if "num_gpu_blocks" in labels:
            return int(labels["num_gpu_blocks"]), labels
    return None, {}


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # nosec - the engine we started
        return resp.read().decode("utf-8", "replace")


class Runner:
    def __init__(self, opts):
        self.opts = opts
        self.su = load_systemd_unit()
        self.cases = load_cases(opts.cases)
        self.lock = threading.Lock()
        self.free = list(range(opts.gpus))
        self.deadline = time.monotonic() + opts.deadline
        self.results = {}

    def case_argv_env(self, case):
        """argv and env from the case's own unit, or (edges the planner refuses) from `unit_from` with
        only --max-model-len changed."""
        unit = os.path.join(self.opts.work, case["id"] + ".service")
        changed = {}
        if not os.path.exists(unit) and case.get("unit_from"):
            unit = os.path.join(self.opts.work, case["unit_from"] + ".service")
            changed["--max-model-len"] = str(case["plan"]["max_model_len"])
        if not os.path.exists(unit):
            return None, None, None, changed
        argv, env = read_unit(unit, self.su)
        for flag, value in changed.items():
            argv = set_flag(argv, flag, value)
        return unit, argv, env, changed

    def run_case(self, case, gpu_ids):
        rid = case["id"]
        work = self.opts.work
        unit, argv, unit_env, changed = self.case_argv_env(case)
        # The planner's verdict decides what to expect: a case it refuses has no unit of its own.
        res = {"id": rid, "expect": "refuse" if changed else "start", "gpus_used": gpu_ids}
        if unit is None:
            res.update(outcome="not_run", reason="no rendered unit (see %s.plan.json)" % rid)
            return res
        argv = argv + ["--load-format", "dummy"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        env.update(unit_env)
        env.update(SAFETY_ENV)
        planned_cvd = unit_env.get("CUDA_VISIBLE_DEVICES")
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpu_ids)
        res.update(unit=os.path.basename(unit), argv=argv, env=env, unit_changes=dict(changed),
                   planned_cuda_visible_devices=planned_cvd)
        log_path = os.path.join(work, rid + ".engine.log")
        state_path = os.path.join(work, os.path.basename(unit) + ".state")
        began = time.monotonic()
        with open(log_path, "w") as log, open(state_path, "w") as st:
            st.write("ActiveState=activating\nSubState=start\nNRestarts=0\nResult=success\n")
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=env.get("HOME", work),
                                    start_new_session=True)
            st.write("MainPID=%d\n" % proc.pid)  # the gate sends the key only to this process (or its children)
        watcher = threading.Thread(target=self.watch, args=(proc, state_path), daemon=True)
        watcher.start()
        gate = None
        if res["expect"] == "start":
            gate = self.gate(unit, log_path, os.path.basename(unit), state_path)
            res["gate_rc"], res["gate_output"] = gate.returncode, gate.stdout.strip()[-2000:]
            if gate.returncode == 0:
                try:
                    metrics = http_get(self.base_url(unit) + "/metrics")
                    with open(os.path.join(work, rid + ".metrics.txt"), "w") as handle:
                        handle.write(metrics)
                    res["metrics_num_gpu_blocks"], res["cache_config_info"] = metrics_blocks(metrics)
                except OSError as exc:
                    res["metrics_error"] = str(exc)
                if case.get("bench"):
                    res["bench"] = self.bench(case, argv, env, unit)
        else:
            res["health_after_refusal_expected"] = self.wait_exit_or_health(proc, unit)
        res["engine_seconds"] = round(time.monotonic() - began, 1)
        self.stop(proc)
        res["exit_code"] = proc.returncode
        with open(log_path, errors="replace") as handle:
            res.update(parse_log(handle.read()))
        healthy = (gate is not None and gate.returncode == 0) or res.get("health_after_refusal_expected") == 200
        res["outcome"] = "started" if healthy else "refused" if res.get("refusal") else "failed"
        return res

    def wait_exit_or_health(self, proc, unit):
        """For a case the planner refuses: the engine must exit; if /health answers 200 it started after all."""
        limit = time.monotonic() + min(self.opts.gate_timeout, max(30, self.deadline - time.monotonic()))
        while time.monotonic() < limit:
            if proc.poll() is not None:
                return None
            try:
                http_get(self.base_url(unit) + "/health", timeout=5)
                return 200
            except OSError:
                time.sleep(2)
        return "timeout"

    def bench(self, case, argv, env, unit):
        """A `vllm bench serve` run against the engine just started (same executable, same environment).
        case["bench"] with `workloads`: the collection's bench role (tests/gpu/bench.yml), the measurement;
        otherwise num_prompts, input_len, output_len: a smoke run of the client, not a measurement."""
        if case["bench"].get("workloads"):
            return self.bench_role(case, argv, env, unit)
        spec = dict({"num_prompts": 32, "input_len": 256, "output_len": 32}, **case["bench"])
        model_dir = argv[argv.index("serve") + 1]
        result = case["id"] + ".bench.json"
        cmd = [argv[0], "bench", "serve", "--backend", "vllm", "--base-url", self.base_url(unit),
               "--model", case["id"], "--tokenizer", model_dir, "--dataset-name", "random",
               "--random-input-len", str(spec["input_len"]), "--random-output-len", str(spec["output_len"]),
               "--num-prompts", str(spec["num_prompts"]), "--ignore-eos", "--save-result",
               "--result-dir", self.opts.work, "--result-filename", result]
        began = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True, timeout=120, check=False)
            rc, output = proc.returncode, proc.stdout
        except subprocess.TimeoutExpired as exc:
            rc, output = "timeout", exc.stdout if isinstance(exc.stdout, str) else ""
        with open(os.path.join(self.opts.work, case["id"] + ".bench.log"), "w") as handle:
            handle.write(" ".join(cmd) + "\n" + (output or ""))
        return {"argv": cmd, "rc": rc, "seconds": round(time.monotonic() - began, 1),
                "output_tail": (output or "")[-1500:], "result_file": result}

    def bench_role(self, case, argv, env, unit):
        """The bench role (tests/gpu/bench.yml) on this host against the case's engine: its report lands in
        WORK/bench/<case>/ (report.md, results.json with vLLM's raw results, latency-throughput.png)."""
        with open(os.path.join(self.opts.work, case["id"] + ".plan.json")) as handle:
            plan = json.load(handle)
        instance = dict(plan["instances"][0])
        instance["port"] = int(self.base_url(unit).rsplit(":", 1)[1])
        results = os.path.join(self.opts.work, "bench", case["id"])
        os.makedirs(results, exist_ok=True)
        variables = {"bench_instances": [instance], "bench_workloads": case["bench"]["workloads"],
                     "bench_vllm_bin": argv[0], "bench_results_dir": results,
                     "bench_planned_concurrency": plan.get("capacity", {}).get("max_concurrency", 0),
                     "bench_probe": bool(case["bench"].get("probe", True)),
                     "bench_slo": case["bench"].get("slo", {})}
        vars_file = os.path.join(self.opts.work, case["id"] + ".bench-vars.json")
        with open(vars_file, "w") as handle:
            json.dump(variables, handle)
        cmd = [sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-c", "local",
               os.path.join(HERE, "bench.yml"), "-e", "@" + vars_file]
        began = time.monotonic()
        run_env = dict(os.environ)
        run_env.update({k: v for k, v in env.items() if k not in ("CUDA_VISIBLE_DEVICES",)})
        run_env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
        limit = max(60, int(self.deadline - time.monotonic()) - 20)
        try:
            proc = subprocess.run(cmd, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True, timeout=limit, check=False)
            rc, output = proc.returncode, proc.stdout
        except subprocess.TimeoutExpired as exc:
            rc, output = "timeout", exc.stdout if isinstance(exc.stdout, str) else ""
        with open(os.path.join(self.opts.work, case["id"] + ".bench.log"), "w") as handle:
            handle.write(" ".join(cmd) + "\n" + (output or ""))
        return {"argv": cmd, "rc": rc, "seconds": round(time.monotonic() - began, 1),
                "output_tail": (output or "")[-3000:], "results_dir": results}

    def base_url(self, unit):
        with open(unit) as handle:
            return re.search(r"^X-GpufleetVllmURL=(.*)$", handle.read(), re.MULTILINE).group(1)

    def gate(self, unit, log_path, unit_name, state_path):
        # The suite runs the engine as its own child, not as a systemd unit (even where systemd runs),
        # so the gate's systemctl/journalctl calls go to the stand-ins that watch that child.
        env = dict(os.environ)
        env["PATH"] = STANDIN_BIN + os.pathsep + env.get("PATH", "")
        env["GPU_ACC_STATE_" + re.sub(r"\W", "_", unit_name)] = state_path
        env["GPU_ACC_LOG_" + re.sub(r"\W", "_", unit_name)] = log_path
        timeout = int(max(60, min(self.opts.gate_timeout, self.deadline - time.monotonic())))
        cmd = [sys.executable, GATE, "--unit-file", unit, "--env-file", os.path.join(self.opts.work, "vllm.env"),
               "--timeout", str(timeout), "--interval", "2", "--request-timeout", "120",
               "--prompt", "Say OK.", "--max-tokens", "4", "--warmup", "2", "--journal-lines", "40"]
        return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, check=False)

    @staticmethod
    def watch(proc, state_path):
        code = proc.wait()
        with open(state_path, "w") as st:
            st.write("ActiveState=%s\nSubState=%s\nNRestarts=0\nResult=%s\n"
                     % (("inactive", "dead", "success") if code == 0 else ("failed", "failed", "exit-code")))

    @staticmethod
    def stop(proc):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=40)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def worker(self, case, gpu_ids):
        try:
            res = self.run_case(case, gpu_ids)
        except Exception as exc:  # keep the other cases going; the error is the case's result
            res = {"id": case["id"], "outcome": "error", "reason": repr(exc)}
        with self.lock:
            self.results[case["id"]] = res
            with open(os.path.join(self.opts.work, case["id"] + ".result.json"), "w") as handle:
                json.dump(res, handle, indent=1, sort_keys=True)
            self.free.extend(gpu_ids)
            self.free.sort()
        print("[%s] %s: %s kv=%s conc=%s (%.0f s)" % (
            time.strftime("%H:%M:%S"), case["id"], res.get("outcome"), res.get("logged_kv_tokens"),
            res.get("logged_concurrency"), res.get("engine_seconds") or 0), flush=True)

    def run(self):
        only = [c for c in (self.opts.only or "").split(",") if c]
        todo = [c for c in self.cases if not only or c["id"] in only]
        threads = []
        while todo:
            if self.deadline - time.monotonic() < self.opts.min_left:
                print("deadline: not started:", ", ".join(c["id"] for c in todo), flush=True)
                break
            started = False
            with self.lock:
                for case in list(todo):
                    need = int(case.get("gpus", 1))
                    if need <= len(self.free):
                        gpu_ids, self.free = self.free[:need], self.free[need:]
                        todo.remove(case)
                        thread = threading.Thread(target=self.worker, args=(case, gpu_ids))
                        thread.start()
                        threads.append(thread)
                        started = True
                        break
            if not started:
                time.sleep(1)
        for thread in threads:
            thread.join()


def cmd_run(opts):
    Runner(opts).run()


# --- report ------------------------------------------------------------------------------------

def summarize(case, plan, res):
    cap = (plan or {}).get("capacity") or {}
    exact = "kv_cache_memory_bytes" in case["plan"]
    row = {
        "id": case["id"], "model": case["model"], "expect": case.get("expect", "start"),
        "exact": exact,
        "predicted_kv_tokens": cap.get("kv_cache_tokens"), "logged_kv_tokens": res.get("logged_kv_tokens"),
        "predicted_concurrency": cap.get("max_concurrency"), "logged_concurrency": res.get("logged_concurrency"),
        "predicted_num_blocks": cap.get("num_blocks"), "metrics_num_gpu_blocks": res.get("metrics_num_gpu_blocks"),
        "predicted_block_size": cap.get("block_size"),
        "predicted_fits": cap.get("fits"), "predicted_max_model_len_that_fits": cap.get("max_model_len_that_fits"),
        "plan_msg": (plan or {}).get("msg"),
        "outcome": res.get("outcome", "not_run"), "gate": res.get("gate_output"),
        "suggested_max_model_len": res.get("suggested_max_model_len"), "refusal": res.get("refusal"),
        "argv": res.get("argv"), "env": res.get("env"), "unit_changes": res.get("unit_changes"),
        "engine_seconds": res.get("engine_seconds"), "log_lines": res.get("log_lines"),
        "cuda_graphs": "--enforce-eager" not in (res.get("argv") or ["--enforce-eager"]),
        "memory_terms": res.get("memory_terms"), "bench": res.get("bench"),
        "predicted_estimate": cap.get("estimate"), "predicted_available_kv_bytes": cap.get("available_kv_bytes"),
        "predicted_weights_bytes_per_rank": cap.get("weights_bytes_per_rank"),
    }
    if row["predicted_concurrency"] is not None and row["logged_concurrency"] is not None:
        row["concurrency_match"] = round(row["predicted_concurrency"], 2) == row["logged_concurrency"]
    if row["predicted_kv_tokens"] and row["logged_kv_tokens"]:
        row["kv_tokens_rel_error"] = round(row["predicted_kv_tokens"] / float(row["logged_kv_tokens"]) - 1, 6)
    return row


def memory_table(rows):
    """The engine's own memory terms (GiB, as logged) beside the plan's KV bytes, for cases that logged them."""
    keys = ("weights_gib", "peak_activation_gib", "non_torch_gib", "cudagraph_gib", "estimated_cudagraph_gib",
            "graph_capture_gib", "available_kv_gib", "requested_gib", "startup_free_gib")
    logged = [r for r in rows if any((r.get("memory_terms") or {}).get(k) is not None for k in keys)]
    if not logged:
        return []
    out = ["", "Engine memory terms (GiB, from its log; `-` = not logged) and the plan's KV bytes:", "",
           "| case | graphs | " + " | ".join(keys) + " | plan available KV GiB | KV tokens plan/engine - 1 |",
           "|---|---|" + "---|" * len(keys) + "---|---|"]
    for r in logged:
        terms = r["memory_terms"]
        plan_kv = r.get("predicted_available_kv_bytes")
        out.append("| %s | %s | %s | %s | %s |" % (
            r["id"], "on" if r.get("cuda_graphs") else "off",
            " | ".join("-" if terms.get(k) is None else "%.2f" % terms[k] for k in keys),
            "-" if plan_kv is None else "%.2f" % (plan_kv / 2.0 ** 30),
            "-" if r.get("kv_tokens_rel_error") is None else "%+.4f%%" % (100 * r["kv_tokens_rel_error"])))
    return out


def cmd_report(opts):
    work = opts.work
    rows = []
    only = [c for c in (opts.only or "").split(",") if c]
    for case in [c for c in load_cases(opts.cases) if not only or c["id"] in only]:
        def load(suffix):
            path = os.path.join(work, case["id"] + suffix)
            return json.load(open(path)) if os.path.exists(path) else None
        rows.append(summarize(case, load(".plan.json"), load(".result.json") or {}))
    prov = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    facts_path = os.path.join(work, "gpu_facts.json")
    if os.path.exists(facts_path):
        facts = json.load(open(facts_path))["nvml"]
        prov.update(host_gpus="%d x %s" % (facts["gpu_count"], facts["gpus"][0]["name"]),
                    driver=facts.get("driver_version"), cuda=facts.get("cuda_driver_version"))
    prov["vllm"] = os.environ.get("GPU_ACC_VLLM_VERSION")
    verdict = os.path.join(work, "verdict.json")
    prov["facts_and_preflight"] = json.load(open(verdict)) if os.path.exists(verdict) else None
    for name, cmd in (("torch", "import torch; print(torch.__version__)"),):
        try:
            prov[name] = subprocess.run([sys.executable, "-c", cmd], stdout=subprocess.PIPE, universal_newlines=True,
                                        timeout=120, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    os.makedirs(opts.out, exist_ok=True)
    with open(os.path.join(opts.out, "results.json"), "w") as handle:
        json.dump({"provenance": prov, "cases": rows}, handle, indent=1, sort_keys=True)
    lines = ["# GPU acceptance results", "",
             "Host: %s; driver %s (CUDA %s); vLLM %s; torch %s; %s." % (
                 prov.get("host_gpus"), prov.get("driver"), prov.get("cuda"), prov.get("vllm"), prov.get("torch"),
                 prov["date"]), "",
             "| case | exact | predicted KV tokens | logged KV tokens | predicted concurrency | logged | "
             "plan blocks | /metrics blocks | outcome |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["id"], "yes" if r["exact"] else "estimate", r["predicted_kv_tokens"], r["logged_kv_tokens"],
            r["predicted_concurrency"], r["logged_concurrency"], r["predicted_num_blocks"],
            r["metrics_num_gpu_blocks"], r["outcome"]))
    lines += memory_table(rows)
    with open(os.path.join(opts.out, "results.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["prepare", "run", "report"])
    parser.add_argument("--work", required=True)
    parser.add_argument("--cases", default=os.path.join(HERE, "cases.yml"))
    parser.add_argument("--only", default="")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs to schedule on (default: all CUDA sees)")
    parser.add_argument("--deadline", type=float, default=3600, help="seconds for the whole run")
    parser.add_argument("--min-left", type=float, default=100, help="start no case with less time left")
    parser.add_argument("--gate-timeout", type=int, default=600)
    parser.add_argument("--out", default="")
    opts = parser.parse_args()
    if opts.command == "run" and not opts.gpus:
        out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        opts.gpus = len([ln for ln in out.splitlines() if ln.startswith("GPU ")])
    {"prepare": cmd_prepare, "run": cmd_run, "report": cmd_report}[opts.command](opts)


if __name__ == "__main__":
    main()
