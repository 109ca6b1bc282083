# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tuning by measurement (playbooks/tune.yml), pure logic (no Ansible import, no I/O).

- ``grid``: the candidate grid (``tune_grid``), its defaults, expansion with a cap, each candidate's profile.
- ``prune``: the planner's answer per candidate -> launched or skipped (with the planner's reason).
- ``score``: goodput under the SLOs from the bench results (median of repeats), noise, winner, Pareto set.
- ``winner``: the inputs hash and the winner variables file text (stable: same inputs, same bytes).
- ``report``: the report's Markdown and JSON document.
"""
