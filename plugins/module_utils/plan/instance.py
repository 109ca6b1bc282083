# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A planned vLLM instance as a record, and the one place an instance's argv is read back (pure, no Ansible
import).

The planner writes every field of ``FIELDS`` beside the argv it renders (``planned``), so the unit writer
(units/render.py), the router's worker list (router/workers.py) and the benchmark's targets (bench/targets.py)
read fields, never the argv. An instance written by hand (``vllm_instances``, ``bench_instances`` with a name
and an argv only, as the docs allow) is read from its argv here, with cli_flags (what argparse ends with: the
last value of a repeated flag, ``--flag=value``, abbreviations). So is a planned instance whose argv was
changed after the plan (``combine({'argv': ...})`` in an inventory, a multi-host member's own argv): its
``record_of`` (the digest of the argv the fields were read from) no longer matches, and the argv wins - the
engine runs the argv, not the fields.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags

# vLLM's own default port (vllm/entrypoints/openai/cli_args.py), and the first port the planner gives out.
DEFAULT_PORT = 8000
# The fields of the record. ``host`` None: vLLM's default (every address); ``port`` None: neither the argv nor
# the entry names one (a consumer that needs one refuses or takes DEFAULT_PORT, as vLLM would); ``max_model_len``
# None: the argv names none (the model's own length); ``devices`` "": no CUDA_VISIBLE_DEVICES (the CPU build).
FIELDS = ("name", "model", "served_model_name", "host", "port", "max_model_len", "devices", "environment", "argv")
# The fields vLLM takes from the argv (the others are the entry's own keys).
ARGV_FIELDS = ("model", "served_model_name", "host", "port", "max_model_len")


def _argv(instance):
    return [str(a) for a in instance.get("argv") or []]


def _digest(argv):
    return hashlib.sha256(json.dumps([str(a) for a in argv or []]).encode("utf-8")).hexdigest()[:12]


def _model(argv):
    """The model of ``vllm serve MODEL ...`` (its tokenizer folder too), else None."""
    return argv[2] if len(argv) > 2 and argv[1] == "serve" and not argv[2].startswith("-") else None


def _int_or_none(value):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _own_fields(instance):
    """The fields an instance holds as keys (not in its argv): always read from the entry itself."""
    return {"name": instance.get("name"), "devices": str(instance.get("cuda_visible_devices", "")),
            "environment": dict(instance.get("environment") or {}), "argv": _argv(instance)}


def _argv_fields(instance):
    """The fields vLLM takes from the argv, read with cli_flags (the one place an instance's argv is parsed)."""
    argv = _argv(instance)
    model = _model(argv)
    # What vLLM serves under: the flag, else the model argument (an entry's own served_model_name key would be
    # a name the engine never answers to).
    served = cli_flags.flag_value(argv, "--served-model-name") or model
    port = cli_flags.flag_value(argv, "--port")
    if port is None:
        port = instance.get("port")
    return {
        "model": model,
        "served_model_name": str(served if served is not None else instance.get("name", "")),
        "host": cli_flags.flag_value(argv, "--host"),
        "port": port if port is None or _int_or_none(port) is None else int(port),
        "max_model_len": _int_or_none(cli_flags.flag_value(argv, "--max-model-len")),
    }


def from_argv(instance):
    """The record of an instance read from its argv (a hand-written one, or the planner's own, once)."""
    out = _own_fields(instance)
    out.update(_argv_fields(instance))
    return out


def planned(instance):
    """The planner's instance with every field of the record beside its argv (read from the argv it rendered),
    and ``record_of``, the digest of that argv."""
    out = dict(instance)
    out.update(from_argv(instance))
    out["record_of"] = _digest(out["argv"])
    return out


def record(instance):
    """The record of ``instance``: the argv's fields as the planner wrote them while its argv is the one they
    were read from, else read from its argv; name, devices and environment from the entry itself."""
    out = _own_fields(instance)
    if all(field in instance for field in ARGV_FIELDS) and instance.get("record_of") == _digest(out["argv"]):
        out.update((field, instance[field]) for field in ARGV_FIELDS)
    else:
        out.update(_argv_fields(instance))
    return out


def listen_address(instance_record):
    """The address the instance binds (vLLM's default ``None``: every address, written 0.0.0.0)."""
    host = instance_record.get("host")
    return "0.0.0.0" if host is None else str(host)


def listen_port(instance_record):
    """The port the instance binds: its own, else vLLM's default (DEFAULT_PORT)."""
    port = instance_record.get("port")
    return DEFAULT_PORT if port is None else port


def gives_flag(instance, flag):
    """Whether the instance's argv gives ``flag`` (any spelling argparse takes): the writer adds a default only
    where it does not."""
    return bool(cli_flags.flag_values(_argv(instance), flag))
