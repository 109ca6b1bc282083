# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's pure core: workloads, ``vllm bench serve`` argv, result and /metrics figures, SLOs,
the canary, the long-context probe and the report. Acyclic, no Ansible import (like ``weights/``)."""
