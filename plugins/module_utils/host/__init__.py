# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files on a host as root: a role's directories and files in one pass, and what root does in trees another
account can write without following a link.
"""
