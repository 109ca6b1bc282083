# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm role's unit life cycle, pure logic (no Ansible import, no I/O).

- ``render``: one planned instance + the role's settings -> the exact unit text.
- ``lifecycle``: which files are ours, the shrink guard, the change set, the restart set, and the
  file moves of a rollback. ``plugins/modules/vllm_units.py`` does the I/O around them.
- ``settings``: the role's settings checks before anything is touched (``vllm_settings_check``).
- ``venv``: the versioned venv's exact commands and the install's decisions (``vllm_venv``; I/O through an
  injected ``run(argv)`` and the venv directory).
"""
