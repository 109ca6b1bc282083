# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: guarded_flags
short_description: The words of an argv that argparse reads as one of the guarded flags
version_added: 0.1.0
author: gpufleet.vllm maintainers
description:
  - Matches each word the way argparse with C(allow_abbrev) reads it (vLLM and vllm-router both parse so) -
    an exact flag, C(--flag=value), an unambiguous prefix (C(--hos) is C(--host)), underscores for dashes
    (C(--api_key)). Every prefix of a guarded flag counts (an ambiguous one makes the program exit anyway).
  - The core is C(plugins/module_utils/cli_flags.py), which every guard over extra args uses.
options:
  _input:
    description: The extra arguments (a list; each item is turned into a string).
    type: list
    elements: raw
    required: true
  guarded:
    description: The flags to find (their full names).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse flags the role renders itself
  ansible.builtin.assert:
    that: router_extra_args | gpufleet.vllm.guarded_flags(['--host', '--port']) | length == 0
"""

RETURN = r"""
_value:
  description: One C("word (flag)") string per offending word, in argv order; the value after C(=) is left out.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.vllm.plugins.module_utils.cli_flags import guarded_words


def guarded_flags(args, guarded):
    if not isinstance(args, (list, tuple)):
        raise AnsibleFilterError("guarded_flags: the input must be a list of arguments, got %s" % type(args).__name__)
    out = []
    for _index, word, flag in guarded_words([str(a) for a in args], tuple(str(g) for g in guarded)):
        name = word.split("=", 1)[0]
        out.append(name if name == flag else "%s (%s)" % (name, flag))
    return out


class FilterModule(object):
    def filters(self):
        return {"guarded_flags": guarded_flags}
