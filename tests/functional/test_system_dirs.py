# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 27: `model_storage_path: /etc` (or any system folder) was accepted and would be mounted over and given
to the service account; a model_weights dest there would be chowned and have unlisted files removed. Both roles'
checks are evaluated here with Ansible's own templating on the shipped files, on a hand-written table of
paths; their lists must equal the module's (plugins/module_utils/weights/safefs.py)."""
import ast
import pathlib

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = pathlib.Path(__file__).resolve().parents[2]

# path -> the system folder the refusal names ('' = accepted)
PATHS = [
    ("/etc", "/etc"), ("/etc/", "/etc"), ("//etc", "/etc"), ("/etc/systemd/system", "/etc"), ("/", "/"),
    ("/usr", "/usr"), ("/usr/local/models", "/usr"), ("/bin", "/bin"), ("/boot", "/boot"), ("/dev/shm", "/dev"),
    ("/proc", "/proc"), ("/sys", "/sys"), ("/run/x", "/run"), ("/var", "/var"), ("/var/lib", "/var/lib"),
    ("/root", "/root"), ("/home", "/home"), ("/home/", "/home"), ("/srv", "/srv"), ("/opt", "/opt"), ("/tmp", "/tmp"),
    ("/srv/models/../../etc", "/"), ("/srv/./models", "/"),
    ("/srv/models", ""), ("/data/models", ""), ("/var/lib/vllm/models", ""), ("/home/alice/models", ""),
    ("/opt/models", ""), ("/etcetera", ""), ("/usrdata/m", ""),
]


def _role_vars(role):
    return yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())


def _hit(role, var, path, hit_var):
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in _role_vars(role).items())
    variables[var] = path
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template("{{ %s }}" % hit_var)).strip()


@pytest.mark.parametrize("path, hit", PATHS)
def test_model_storage_refuses_system_folders(path, hit):
    assert _hit("model_storage", "model_storage_path", path, "_model_storage_system_hit") == hit


@pytest.mark.parametrize("path, hit", PATHS)
def test_model_weights_refuses_system_folders_as_dest(path, hit):
    assert _hit("model_weights", "model_weights_dest", path, "_model_weights_system_hit") == hit


def test_the_roles_lists_are_the_module_s():
    tree = ast.parse((ROOT / "plugins" / "module_utils" / "weights" / "safefs.py").read_text())
    consts = dict((node.targets[0].id, ast.literal_eval(node.value)) for node in tree.body
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("SYSTEM_DIRS", "SYSTEM_TREES"))
    for role, prefix in (("model_storage", "_model_storage"), ("model_weights", "_model_weights")):
        data = _role_vars(role)
        assert tuple(data[prefix + "_system_dirs"]) == consts["SYSTEM_DIRS"], role
        assert tuple(data[prefix + "_system_trees"]) == consts["SYSTEM_TREES"], role


@pytest.mark.parametrize("role, task, var", [
    ("model_storage", "Refuse a system folder as model_storage_path", "model_storage_path"),
    ("model_weights", "Refuse a system folder as model_weights_dest", "model_weights_dest"),
])
def test_the_refusal_names_the_option_and_the_fix(role, task, var):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "validate.yml").read_text())
    assert_task = next(t for t in tasks if t["name"] == task)["ansible.builtin.assert"]
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in _role_vars(role).items())
    variables.update({var: "/etc/systemd/system", "model_storage_owner": "vllm", "model_weights_owner": "vllm"})
    templar = Templar(loader=DataLoader(), variables=variables)
    assert not templar.template(trust_as_template("{{ (%s) | bool }}" % assert_task["that"]))
    msg = " ".join(templar.template(trust_as_template(assert_task["fail_msg"])).split())
    assert msg.startswith(var + " /etc/systemd/system is inside the system folder /etc"), msg
    assert "Use a folder of its own" in msg
