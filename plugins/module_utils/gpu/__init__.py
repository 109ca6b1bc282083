# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts and GPU knowledge: NVML (the only pynvml importer) and nvidia-smi parsers, topology, the facts' assembly,
the GPU family table, named hardware profiles and MIG change planning.
"""
