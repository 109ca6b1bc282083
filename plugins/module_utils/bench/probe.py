# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The long-context probe: one request of (planned max_model_len - output) prompt tokens through the
front door, sent as token ids so the length is exact, its TTFT measured from a streamed response, and
the margin to nginx's ``proxy_read_timeout``.

nginx's proxy_read_timeout is the longest wait between two reads from vLLM, not a limit on the whole
response (ngx_http_proxy_module); with streaming the longest wait is the prefill before the first
token, so the probe's TTFT is the figure to compare. Without streaming it is the whole response.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

# nginx time units (https://nginx.org/en/docs/syntax.html): ms s m h d w M y; no unit = seconds.
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000, "y": 31536000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|M|y)?")
THIN = 0.5  # a TTFT above half the timeout leaves no room for a busier engine or a longer prompt


def nginx_seconds(value):
    """nginx time syntax ("3600s", "1h 30m", "90", "500ms") -> seconds (float)."""
    text = str(value).strip()
    if not text or _PART.sub("", text.replace(" ", "")):
        raise BenchError("nginx time %r is not nginx syntax (e.g. 3600s, 1h, 500ms): check nginx_proxy_read_timeout."
                         % (value,))
    return float(sum(int(n) * _UNITS[u or "s"] for n, u in _PART.findall(text.replace(" ", ""))))


def probe_length(max_model_len, output_tokens):
    """Prompt tokens of the probe: the planned context minus the output it asks for."""
    if max_model_len is None or output_tokens < 1 or max_model_len - output_tokens < 1:
        raise BenchError("The long-context probe needs max_model_len > output tokens (got %r and %r): set "
                         "bench_probe_output_tokens lower." % (max_model_len, output_tokens))
    return max_model_len - output_tokens


def margin(ttft_s, e2e_s, timeout, streaming=True):
    """Finding about the proxy timeout for the probe's measured waits: {level, code, message, ...}."""
    limit = nginx_seconds(timeout)
    wait = ttft_s if streaming else e2e_s
    ratio = round(wait / limit, 4) if limit else None
    base = dict(wait_s=round(wait, 4), proxy_read_timeout_s=limit, ratio=ratio)
    if limit and wait >= limit:
        return dict(base, level="error", code="probe_timeout_cut",
                    message="the full-context request waited %.1f s for its first byte, nginx's proxy_read_timeout "
                            "is %s (%.0f s): nginx would cut it. Raise nginx_proxy_read_timeout above %.0f s."
                            % (wait, timeout, limit, wait * 2))
    if limit and wait >= THIN * limit:
        return dict(base, level="warning", code="probe_timeout_thin",
                    message="the full-context request waited %.1f s, more than half nginx's proxy_read_timeout %s: "
                            "a busier engine will hit it. Raise nginx_proxy_read_timeout to at least %.0f s."
                            % (wait, timeout, wait * 4))
    return dict(base, level="ok", code="probe_timeout_margin",
                message="full-context wait %.3f s is %.2f %% of nginx's proxy_read_timeout %s" % (
                    wait, 100.0 * (ratio or 0), timeout))
