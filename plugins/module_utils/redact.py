# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets that arrive inside other arguments, hidden from every result and message of a module.

``no_log`` hides a whole argument; some secrets sit inside one that is not secret as a whole: the password of a
``https://user:password@host/`` URL (model_weights' ``url``, vllm_venv's ``index_url``) or a secret-named entry of
an environment mapping (vllm_settings_check's ``vllm_environment: {HF_TOKEN: ...}``, refused because it would land in
a world-readable unit). :func:`hide` adds them to the module's ``no_log_values``, so Ansible masks them wherever they
appear in the result (its ``msg``, a ``cmd``, the ``invocation`` it echoes) - also when the module refuses them.
Plain Python; the module object is duck-typed.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

USERINFO_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#@\s]*)@")
MIN_SECRET = 3  # shorter parts are hidden as a whole userinfo only (masking "a" everywhere hides nothing)


def url_secrets(text):
    """The userinfo (``user:password``) and the password of each URL in ``text``."""
    out = []
    for userinfo in USERINFO_RE.findall(str(text or "")):
        if userinfo:
            out.append(userinfo)
            password = userinfo.split(":", 1)[1] if ":" in userinfo else userinfo
            if len(password) >= MIN_SECRET:
                out.append(password)
    return out


def named_secrets(mapping, name_pattern):
    """The values of the entries of ``mapping`` whose names match ``name_pattern`` (a secret-looking name)."""
    if not isinstance(mapping, dict):
        return []
    return [str(value) for name, value in mapping.items()
            if value not in (None, "") and re.search(name_pattern, str(name))]


def hide(module, values):
    """Mask each of ``values`` in everything the module returns (Ansible's ``no_log_values``)."""
    for value in values:
        if value is not None and len(str(value)) >= MIN_SECRET:
            module.no_log_values.add(str(value))
