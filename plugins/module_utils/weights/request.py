# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model_weights module's request: options checked, owner/group/mode resolved, the source built, synced.

What the module did itself before round 3 (issue 29): the option checks AnsibleModule cannot express,
the uid/gid lookups, the token's binding to the hub endpoint, building the source and the call to
:func:`snapshot.sync`. The HTTP client is injected (``client_factory``) so tests give a stand-in.
No Ansible import: the module keeps ``missing_required_lib`` and ``module.warn``.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights import safefs, sources
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.errors import WeightsError
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.fetch import HttpClient, redact_url
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.manifest import STATE_DIR
from ansible_collections.gpufleet.vllm.plugins.module_utils.weights.snapshot import RECORD_NAME, sync

MAX_WORKERS = 256


def parse_mode(value):
    """'0644' / '644' -> 0o644. An int is refused: YAML turns an unquoted ``mode: 644`` into the
    decimal 644 (0o1204) and ``mode: 0644`` into 420, so an int cannot say which the user meant."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise WeightsError("mode %r is not a quoted octal string: YAML reads an unquoted mode: 644 as the decimal "
                           "number 644 (octal 1204); write it quoted, for example mode: '0644'" % (value,))
    text = value.strip()
    if not text or len(text) > 5 or any(c not in "01234567" for c in text):
        raise WeightsError("mode %r is not an octal mode; write it quoted, for example mode: '0644'" % (value,))
    mode = int(text, 8)
    if mode > 0o7777:
        raise WeightsError("mode %r is out of range; use an octal mode such as '0644'" % (value,))
    return mode


def dir_mode(mode):
    return mode | ((mode & 0o444) >> 2)


def resolve_id(name, kind):
    """uid/gid of an owner/group name or number, refused with a fix BEFORE anything is downloaded."""
    import grp
    import pwd
    if name is None:
        return None
    text = str(name).strip()
    lookup = pwd.getpwnam if kind == "owner" else grp.getgrnam
    try:
        return lookup(text).pw_uid if kind == "owner" else lookup(text).gr_gid
    except (KeyError, UnicodeError, ValueError):
        pass
    if text.isdigit() and int(text) < 2 ** 32 - 1:
        return int(text)
    what = "user" if kind == "owner" else "group"
    raise UserError("%s %r: no such %s on the target; create it first (the model_weights role's "
                    "model_weights_create_owner does) or fix %s" % (kind, name, what, kind), option=kind)


URL_OPTIONS = ("url", "manifest", "endpoint")


def _has_userinfo(value):
    try:
        return "//" in value and "@" in urlsplit(value).netloc
    except ValueError:  # an unparsable URL (a bad IPv6 literal): refused later, when it is used
        return "@" in value.split("//", 1)[-1].split("/", 1)[0]


def check_params(params):
    """Option checks AnsibleModule cannot express; each message names the option and the fix."""
    workers = params["workers"]
    if workers < 1 or workers > MAX_WORKERS:
        raise UserError("workers must be between 1 and %d (got %d)" % (MAX_WORKERS, workers), option="workers")
    for name in ("dest", "repo_id", "revision", "url", "manifest", "path", "endpoint"):
        value = params[name]
        if value is not None and any(c in value for c in "\x00\r\n"):
            shown = redact_url(value) if name in URL_OPTIONS else value
            raise UserError("%s must not contain a newline or NUL character (got %r)" % (name, shown), option=name)
    for name in URL_OPTIONS:
        value = params[name]
        if value and _has_userinfo(value):
            raise UserError("%s %s carries user:password@, which would be dropped silently and written to logs: "
                            "a mirror or endpoint that needs a password is not supported. Serve the mirror on the "
                            "fleet's network without one, or give the hub a token (token / HF_TOKEN)"
                            % (name, redact_url(value)), option=name)
    for name in ("allow_patterns", "ignore_patterns"):
        for pat in params[name] or []:
            if not pat or any(c in pat for c in "\x00\r\n"):
                raise UserError("%s: %r is not a usable pattern (empty, newline or NUL)" % (name, pat), option=name)
    hit = safefs.system_dir(params["dest"])
    if hit is not None:
        raise UserError("dest %s is %s: the module would give it to the snapshot's owner and remove files there that "
                        "the manifest does not list. Use a folder of its own for the snapshot, such as "
                        "/srv/models/<model> (absolute, no '.' or '..')"
                        % (params["dest"], "a system folder" if hit == params["dest"].rstrip("/") or hit == "/"
                           else "inside the system folder %s" % hit), option="dest")
    # required_if lets an explicit null through (``path: null``, or a variable that is unset).
    needed = {"hf": "repo_id", "http": "url", "local": "path"}[params["source"]]
    if not params[needed]:
        raise UserError("%s is required with source: %s (it is empty or null)" % (needed, params["source"]), option=needed)
    for name in ("url", "endpoint"):
        value = params[name]
        if value and not value.startswith(("http://", "https://")):
            raise UserError("%s %r must start with http:// or https://" % (name, redact_url(value)), option=name)


def hub_endpoint(params):
    return (params["endpoint"] or os.environ.get("HF_ENDPOINT") or sources.DEFAULT_ENDPOINT).rstrip("/")


def hub_token(params, warnings):
    """The token, or None where it may not go: it is bound to the hub endpoint, never plain http
    unless token_over_http says so (a warning says it was withheld)."""
    token = params["token"]
    if not token or params["source"] != "hf":
        return None
    endpoint = hub_endpoint(params)
    if not endpoint.startswith("https://") and not params["token_over_http"]:
        warnings.append("token (or HF_TOKEN) was NOT sent: endpoint %s is plain http; use https, or set "
                        "token_over_http: true for a trusted internal hub mirror" % endpoint)
        return None
    return token


def build_source(params, client, token=None):
    kind = params["source"]
    allow, ignore = params["allow_patterns"], params["ignore_patterns"]
    if kind == "hf":
        return sources.HfSource(client, params["repo_id"], params["revision"], hub_endpoint(params), token,
                                allow, ignore)
    if kind == "http":
        return sources.HttpSource(client, params["url"], params["manifest"], allow, ignore)
    return sources.LocalSource(client, params["path"], params["manifest"], allow, ignore, params["workers"],
                               _local_cache(params["dest"]), follow_links=params["follow_links"])


def _local_cache(dest):
    """Source-file digests cached in the record by a previous local run (size + mtime keyed)."""
    try:
        state = os.open(os.path.join(dest, STATE_DIR), os.O_RDONLY | safefs.DIRECTORY | safefs.NOFOLLOW)
    except OSError:
        return {}
    try:
        data = json.loads(safefs.read_text(state, RECORD_NAME, RECORD_NAME) or "{}")
        cache = data.get("source_files") if isinstance(data, dict) else None
        return cache if isinstance(cache, dict) else {}
    except (IOError, OSError, ValueError, WeightsError):
        return {}
    finally:
        os.close(state)


def synced(params, check_mode, client_factory=HttpClient):
    """Sync ``params['dest']`` from the source the params name: (result, warnings) for the module."""
    attrs = safefs.Attrs(resolve_id(params["owner"], "owner"), resolve_id(params["group"], "group"),
                         parse_mode(params["mode"]))
    warnings = []
    token = hub_token(params, warnings)
    client = client_factory(token=token, token_url=hub_endpoint(params) if token else None,
                            token_over_http=params["token_over_http"])
    try:
        source = build_source(params, client, token)
        result = sync(params["dest"], source, verify=params["verify"], workers=params["workers"],
                      check_mode=check_mode, attrs=attrs)
    finally:
        client.close()
    if params["source"] == "hf":
        result["requested_revision"] = params["revision"]
        if params["revision"] != result["revision"]:
            warnings.append("revision %r is a branch or tag and resolved to commit %s; pin revision to that commit "
                            "so every host gets the same snapshot" % (params["revision"], result["revision"]))
    return result, warnings + result.pop("warnings", [])
