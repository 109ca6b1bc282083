# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restart-to-healthy of the real vLLM engine in three cache states, every phase (issue 26).

    restart_timing.py --vllm /tmp/site/bin/vllm --out DIR [--budget-seconds 540] [--models dense,hybrid]
                      [--num-layers N] [--cpu --model-dir dense=/path/to/tiny-qwen3]

Per model (dense: Qwen3-8B, hybrid: Qwen3.6-27B; real config.json from tests/fixtures/model-configs, random
weights with --load-format dummy, the stand-in word-level tokenizer of tests/gpu/run_engines.py), three starts,
each until /health answers 200 and one completion returns:
  cold    a fresh cache folder A (VLLM_CACHE_ROOT, TRITON_CACHE_DIR, XDG_CACHE_HOME under it), VLLM_HOST_IP 127.0.0.1
  warm    the same folder A again, same inputs
  copied  A copied (cp -a) to another folder B, VLLM_HOST_IP 127.0.0.2: "another host" of the same batch
Each line of the engine's output is stamped on arrival in the journal's short-iso-precise form, and the phases
come from the collection's own parser (plugins/module_utils/startup/boot_log.py): API server, weights,
torch.compile (compiled or loaded, the key folders), profiling, KV sizing, CUDA graphs, engine init, ready.

Order (most valuable first): dense cold, warm, copied, then hybrid cold, warm, copied. --budget-seconds is a
deadline for the whole run: a start is begun only with --min-left seconds left, a start still running at the
deadline is stopped, and the results so far are always written (restart_timing.json, restart_timing.md,
logs.tgz with every start's stamped log). --num-layers N serves the models with N layers (a config.json copy
with num_hidden_layers N, and layer_types cut to N for the hybrid) when the full models do not fit the time; the
output says so. --cpu runs vLLM's CPU build (VLLM_TARGET_DEVICE=cpu, real weights of --model-dir, no
--load-format dummy): the same script, end to end, on a machine without a GPU.
Stand-ins, named as such: the tokenizer (run_engines.write_standin_tokenizer); the weights are vLLM's dummy
loader's random values at real size.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model-configs")
MODELS = {
    "dense": {"config": "Qwen__Qwen3-8B", "max_model_len": 32768, "args": []},
    "hybrid": {"config": "Qwen__Qwen3.6-27B", "max_model_len": 65536,
               "args": ["--language-model-only", "--gdn-prefill-backend", "triton"]},
}
STATES = ("cold", "warm", "copied", "other-ip")  # other-ip: folder A again, VLLM_HOST_IP 127.0.0.2 (--states)
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


boot_log = load("gpufleet_boot_log", os.path.join(ROOT, "plugins", "module_utils", "startup", "boot_log.py"))


def prepare_model(work, kind, layers):
    """A model folder: the real config.json (cut to ``layers`` when asked) and the stand-in tokenizer."""
    engines = load("gpufleet_run_engines", os.path.join(HERE, "run_engines.py"))
    name = MODELS[kind]["config"] + ("-%dlayers" % layers if layers else "")
    folder = os.path.join(work, "models", name)
    if os.path.exists(os.path.join(folder, "tokenizer.json")):
        return folder
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(CONFIGS, MODELS[kind]["config"] + ".config.json")) as handle:
        raw = json.load(handle)
    if layers:
        text = engines.text_config(raw)
        text["num_hidden_layers"] = layers
        if isinstance(text.get("layer_types"), list):
            text["layer_types"] = text["layer_types"][:layers]
    with open(os.path.join(folder, "config.json"), "w") as handle:
        json.dump(raw, handle, indent=1)
    engines.write_standin_tokenizer(folder, int(engines.text_config(raw)["vocab_size"]))
    return folder


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stamp(now=None):
    when = datetime.datetime.utcfromtimestamp(now if now is not None else time.time())
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def http(url, body=None, timeout=5.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # nosec - the engine this script started
        return resp.status, resp.read().decode("utf-8", "replace")


class Start(object):
    """One engine start: stamped log, health + one completion, stop."""

    def __init__(self, opts, kind, state, model, cache, host_ip, log_path):
        self.opts, self.kind, self.state, self.model, self.cache = opts, kind, state, model, cache
        self.host_ip, self.log_path = host_ip, log_path
        self.port = free_port()
        self.lines = []

    def argv_env(self):
        spec = MODELS.get(self.kind, {"max_model_len": self.opts.max_model_len or 2048, "args": []})
        length = self.opts.max_model_len or spec["max_model_len"]
        argv = [self.opts.vllm, "serve", self.model, "--host", "127.0.0.1", "--port", str(self.port),
                "--served-model-name", "m", "--max-model-len", str(length)] + spec["args"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": os.path.join(self.cache, "home"),
               "HF_HOME": os.path.join(self.cache, "huggingface"), "VLLM_CACHE_ROOT": os.path.join(self.cache, "vllm"),
               "XDG_CACHE_HOME": self.cache, "TRITON_CACHE_DIR": os.path.join(self.cache, "triton"),
               "VLLM_HOST_IP": self.host_ip, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if self.opts.cpu:
            env.update({"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto"})
        else:
            argv += ["--load-format", "dummy", "--gpu-memory-utilization", "0.9"]
            env.update({"CUDA_VISIBLE_DEVICES": self.opts.gpu})
            env.update(SAFETY_ENV)
        env.update(json.loads(self.opts.extra_env or "{}"))
        os.makedirs(env["HOME"], exist_ok=True)
        return argv, env

    def _pump(self, proc, handle):
        for raw in iter(proc.stdout.readline, b""):
            line = "%s gpufleet restart-timing[%d]: %s" % (stamp(), proc.pid, raw.decode("utf-8", "replace").rstrip("\r\n"))
            self.lines.append(line)
            handle.write(line + "\n")
            handle.flush()

    def run(self, deadline):
        argv, env = self.argv_env()
        result = {"model": self.kind, "state": self.state, "cache": self.cache, "vllm_host_ip": self.host_ip,
                  "argv": argv, "outcome": None}
        began = time.time()
        with open(self.log_path, "w") as handle:
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=env["HOME"])
            pump = threading.Thread(target=self._pump, args=(proc, handle), daemon=True)
            pump.start()
            result["outcome"], result["healthy_seconds"] = self.wait_healthy(proc, began, deadline)
            self.stop(proc)
            pump.join(10)
        parsed = boot_log.parse("\n".join(self.lines), process_start=began, year=time.gmtime(began).tm_year)
        result.update(phases=parsed["phases"], ready_seconds=parsed["total_seconds"], cache_status=parsed["compile_cache"],
                      compile_keys=parsed["compile"]["keys"], compile_seconds=parsed["compile"]["seconds"],
                      load_failures=parsed["compile"]["load_failures"], loaded=parsed["compile"]["loaded"],
                      version=parsed["version"], kv_tokens=parsed["kv_tokens"], log_complete=parsed["complete"])
        return result

    def wait_healthy(self, proc, began, deadline):
        base = "http://127.0.0.1:%d" % self.port
        while time.time() < deadline:
            if proc.poll() is not None:
                return "engine exited rc=%s" % proc.returncode, None
            try:
                if http(base + "/health", timeout=2)[0] == 200:
                    status, _body = http(base + "/v1/completions", {"model": "m", "prompt": "Say OK.", "max_tokens": 4},
                                         timeout=max(5.0, deadline - time.time()))
                    if status == 200:
                        return "healthy", round(time.time() - began, 3)
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        return "stopped at the deadline", None

    @staticmethod
    def stop(proc):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(10)


def verdict(results):
    """Per model: did warm and copied use cold's key, and load from the cache?"""
    out = {}
    for kind in sorted(set(r["model"] for r in results)):
        by = dict((r["state"], r) for r in results if r["model"] == kind)
        cold_keys = by.get("cold", {}).get("compile_keys") or []
        out[kind] = dict((state, {
            "same_key_as_cold": bool(cold_keys) and by[state]["compile_keys"] == cold_keys,
            "cache_status": by[state]["cache_status"]["status"],
            "found_under_its_own_folder": all(f["path"].startswith(by[state]["cache"]) for f in by[state]["load_failures"])
            and all(item.get("path", by[state]["cache"]).startswith(by[state]["cache"]) for item in by[state]["loaded"]),
        }) for state in ("warm", "copied", "other-ip") if state in by)
    return out


def markdown(doc):
    names = [name for name, _what in boot_log.PHASES]
    rows = ["# Restart timing (%s)" % doc["started"], "",
            "vLLM %s, %s; %s. Seconds from the process start (stamped on arrival; each phase from the previous "
            "logged one). %s" % (doc.get("vllm_version"), doc["platform"], doc["layers"], doc["note"]), "",
            "| model | state | outcome | healthy s | ready s | " + " | ".join(names) + " | torch.compile | compile s | key |",
            "|---|---|---|---|---|" + "---|" * len(names) + "---|---|---|"]
    for r in doc["results"]:
        phases = dict((p["name"], p["seconds"]) for p in r.get("phases", []))
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["state"], r["outcome"], r.get("healthy_seconds"), r.get("ready_seconds"),
            " | ".join("" if phases.get(n) is None else "%.1f" % phases[n] for n in names),
            r.get("cache_status", {}).get("status"), r.get("compile_seconds"), ",".join(k[:10] for k in r.get("compile_keys", []))))
    for item in doc["not_run"]:
        rows.append("| %s | %s | not started: %s |" % (item["model"], item["state"], item["why"]) + " |" * (len(names) + 5))
    rows += ["", "Cache verdict against the cold start: `%s`" % json.dumps(doc["verdict"], sort_keys=True), ""]
    return "\n".join(rows)


def write(opts, doc, logs):
    doc["verdict"] = verdict(doc["results"])
    doc["vllm_version"] = next((r["version"] for r in doc["results"] if r.get("version")), None)
    with open(os.path.join(opts.out, "restart_timing.json.tmp"), "w") as handle:
        json.dump(doc, handle, indent=1, sort_keys=True)
    os.replace(os.path.join(opts.out, "restart_timing.json.tmp"), os.path.join(opts.out, "restart_timing.json"))
    with open(os.path.join(opts.out, "restart_timing.md"), "w") as handle:
        handle.write(markdown(doc) + "\n")
    with tarfile.open(os.path.join(opts.out, "logs.tgz.tmp"), "w:gz") as tar:
        for path in logs:
            if os.path.exists(path):
                tar.add(path, arcname=os.path.basename(path))
    os.replace(os.path.join(opts.out, "logs.tgz.tmp"), os.path.join(opts.out, "logs.tgz"))


def model_dirs(opts, kinds):
    given = dict(item.split("=", 1) for item in opts.model_dir)
    return dict((kind, given[kind] if kind in given else prepare_model(opts.work, kind, opts.num_layers)) for kind in kinds)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", required=True, help="the vllm executable")
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="/tmp/gpufleet-restart-timing")
    parser.add_argument("--models", default="dense,hybrid")
    parser.add_argument("--model-dir", action="append", default=[], help="KIND=PATH: serve this folder as KIND")
    parser.add_argument("--num-layers", type=int, default=0, help="serve the models with this many layers (0: all)")
    parser.add_argument("--max-model-len", type=int, default=0)
    parser.add_argument("--budget-seconds", type=float, default=540)
    parser.add_argument("--min-left", type=float, default=45, help="begin no start with less time left")
    parser.add_argument("--gpu", default="0")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--extra-env", default="", help="JSON object added to every engine's environment")
    parser.add_argument("--states", default="cold,warm,copied",
                        help="in order, of: cold, warm, copied, other-ip (the warm folder with another VLLM_HOST_IP: "
                             "the same path on another host)")
    opts = parser.parse_args(argv)
    deadline = time.time() + opts.budget_seconds
    os.makedirs(opts.out, exist_ok=True)
    kinds = [k for k in opts.models.split(",") if k]
    states = [x for x in opts.states.split(",") if x in STATES]
    doc = {"started": stamp(), "platform": "cpu (vLLM's CPU build)" if opts.cpu else "cuda, GPU %s" % opts.gpu,
           "layers": ("%d layers per model (--num-layers)" % opts.num_layers) if opts.num_layers else "full models",
           "note": "", "budget_seconds": opts.budget_seconds, "results": [], "not_run": []}
    dirs = model_dirs(opts, kinds)
    logs = []
    for kind in kinds:
        a, b = os.path.join(opts.work, "cache-%s-A" % kind), os.path.join(opts.work, "cache-%s-B" % kind)
        shutil.rmtree(a, ignore_errors=True)
        shutil.rmtree(b, ignore_errors=True)
        for state in states:
            left = deadline - time.time()
            if left < opts.min_left:
                doc["not_run"].append({"model": kind, "state": state, "why": "%.0f s left of the budget" % left})
                continue
            if state == "copied":
                subprocess.check_call(["cp", "-a", a, b])
            cache, ip = {"copied": (b, "127.0.0.2"), "other-ip": (a, "127.0.0.2")}.get(state, (a, "127.0.0.1"))
            log = os.path.join(opts.out, "%s-%s.log" % (kind, state))
            logs.append(log)
            print("[%s] %s %s (%.0f s left)" % (stamp(), kind, state, left), flush=True)
            result = Start(opts, kind, state, dirs[kind], cache, ip, log).run(deadline)
            doc["results"].append(result)
            print("    %s: healthy after %s s, ready in its log %s s, torch.compile %s %s s" % (
                result["outcome"], result["healthy_seconds"], result["ready_seconds"],
                result["cache_status"]["status"], result["compile_seconds"]), flush=True)
            write(opts, doc, logs)
    doc["note"] = "Budget %.0f s; %d of %d starts run." % (
        opts.budget_seconds, len(doc["results"]), len(kinds) * len(states))
    write(opts, doc, logs)
    for log in logs:
        if os.path.exists(log):
            os.remove(log)  # they are in logs.tgz (a device call returns few files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
