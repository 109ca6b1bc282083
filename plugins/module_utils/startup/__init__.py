# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine start-up timings and compile-cache verdicts (pure logic behind gpufleet.vllm.vllm_startup_report).

- :mod:`boot_log`: one start's journal (or raw engine log) -> phases with seconds, compile-cache evidence;
- :mod:`cache_key`: the recorded inputs of a start, which of them enter vLLM's torch.compile cache key,
  and the verdict (hit / miss, expected or not, with the cause);
- :mod:`report`: the record kept on the host, the restart budget, the one-line summary;
- :mod:`store`: the records on the host, checked as untrusted input; :mod:`prewarm`: the rollout's cache pack.
"""
