# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning vLLM instances: the plan's inputs, the model's config, KV-cache and engine-memory arithmetic per release,
placement on GPUs, the ``vllm serve`` argv and the flags that change the arithmetic (pure, no Ansible import).
"""
