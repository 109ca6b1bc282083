# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: systemd_quote
short_description: Quote a command or an environment assignment for a systemd unit file
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - Renders a list of arguments as the value of C(ExecStart=) so that systemd passes exactly that
    list to the process. Arguments holding spaces, quotes, backslashes, control characters or JSON
    are double-quoted with C-style escapes; C(%) becomes C(%%) (unit specifiers) and C($) becomes
    C($$) (environment variable expansion).
  - With O(context=environment), renders one C(NAME=value) assignment for C(Environment=), where
    C(%) is doubled but C($) is kept (systemd expands no variables there).
options:
  _input:
    description:
      - For O(context=exec), the command as a list of strings; the first one must be an absolute path.
      - For O(context=environment), a dictionary of one or more variables; each becomes one quoted assignment,
        and the assignments are joined by spaces.
    type: raw
    required: true
  context:
    description: Where the result goes.
    type: str
    choices: [exec, environment]
    default: exec
"""

EXAMPLES = r"""
- name: Render an ExecStart= line
  ansible.builtin.debug:
    msg: "ExecStart={{ ['/opt/vllm/current/bin/vllm', 'serve', '/srv/models/q', '--speculative-config',
      '{\"method\":\"mtp\",\"num_speculative_tokens\":3}'] | gpufleet.vllm.systemd_quote }}"
  # ExecStart=/opt/vllm/current/bin/vllm serve /srv/models/q --speculative-config
  #   "{\"method\":\"mtp\",\"num_speculative_tokens\":3}"

- name: Render Environment= lines
  ansible.builtin.debug:
    msg: "Environment={{ {'CUDA_VISIBLE_DEVICES': '0,1'} | gpufleet.vllm.systemd_quote(context='environment') }}"
"""

RETURN = r"""
_value:
  description: The quoted text, ready to follow C(ExecStart=) or C(Environment=).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.units.systemd_unit import (
    SystemdQuoteError,
    quote_environment,
    quote_exec_argv,
)


def systemd_quote(data, context="exec"):
    """Quote ``data`` for a systemd unit file (see DOCUMENTATION)."""
    try:
        if context == "exec":
            return quote_exec_argv(data)
        if context == "environment":
            if not isinstance(data, dict):
                raise SystemdQuoteError(
                    "context=environment takes a dictionary of variables, got %s" % type(data).__name__
                )
            return " ".join(quote_environment(name, value) for name, value in data.items())
    except SystemdQuoteError as exc:
        raise AnsibleFilterError("systemd_quote: %s" % exc)
    raise AnsibleFilterError("systemd_quote: context must be 'exec' or 'environment', got %r" % (context,))


class FilterModule(object):
    """Filters for systemd unit files."""

    def filters(self):
        return {"systemd_quote": systemd_quote}
