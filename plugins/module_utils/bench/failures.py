# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What failed in a benchmark point, and whether a vLLM result file can be read at all.

Counted per point, from vLLM's own result JSON (vllm/benchmarks/serve.py ``benchmark``):
- ``failed``: requests vLLM's client saw fail (an HTTP error such as ``400 Bad Request``, a dropped
  connection); with ``--save-detailed`` the per-request ``errors`` list holds each one's text (``""`` when it
  succeeded), and ``output_lens`` / ``input_lens`` each request's token counts;
- truncated: a request that succeeded with fewer output tokens than it asked for, where the benchmark sends
  ``ignore_eos`` (the ``random`` dataset and a length mix's ``timed_trace``; session.py ``asked_output``), so
  every token asked for must come back. Without per-request lists, a lower bound from the totals;
- aborted: the engine's own ``vllm:request_success_total{finished_reason="abort"}`` (and ``"error"``) over the
  window (engine.py), requests the engine dropped that the client may never have seen.

A result file that is not vLLM's shape (not an object, counts that are not whole numbers, figures that are
not numbers) is refused with a BenchError naming the file and the key: the module never reports it as a bug.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.vllm.plugins.module_utils.bench.errors import BenchError

COUNTS = ("completed", "failed")
LISTS = ("errors", "output_lens", "input_lens")
MAX_TEXTS = 5


def _whole(value):
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def _number(value):
    return value is None or (not isinstance(value, bool) and isinstance(value, (int, float)))


def check_result(result, where, figures=()):
    """Refuse a result that is not vLLM's shape: BenchError naming ``where`` (the file) and the key."""
    fix = "it is not a result file `vllm bench serve --save-result` wrote: rerun the benchmark"
    if not isinstance(result, dict):
        raise BenchError("%s is not vLLM's result JSON (an object with completed, failed, ...) but %s: %s."
                         % (where, type(result).__name__, fix), file=where)
    for key in COUNTS:
        if key in result and not _whole(result[key]):
            raise BenchError("%s: %s is %r, not a whole number >= 0: %s." % (where, key, result[key], fix),
                             file=where, key=key)
    if "completed" not in result:
        raise BenchError("%s has no 'completed' count: %s." % (where, fix), file=where, key="completed")
    for key in figures:
        if not _number(result.get(key)):
            raise BenchError("%s: %s is %r, not a number: %s." % (where, key, result.get(key), fix),
                             file=where, key=key)
    sizes = set(len(result[k]) if isinstance(result.get(k), list) else -1 for k in LISTS if k in result)
    if -1 in sizes or len(sizes) > 1:
        raise BenchError("%s: the per-request lists %s are not lists of one length: %s."
                         % (where, ", ".join(k for k in LISTS if k in result), fix), file=where)
    return result


def error_texts(texts):
    """[{text, count}] of the distinct non-empty error texts, most frequent first, at most MAX_TEXTS."""
    counts = {}
    for text in texts:
        if text:
            short = " ".join(str(text).split())[:300]
            counts[short] = counts.get(short, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [dict(text=t, count=n) for t, n in ranked[:MAX_TEXTS]]


def asked_output(w):
    """The output tokens each request of a validated workload must get back (the benchmark sends ignore_eos):
    a number (with a range_ratio, the least vLLM's random dataset asks: floor(output_len x (1 - ratio))), or
    {input_len: output_len} per class of a length mix."""
    if w.get("mix"):
        return dict((c["input_len"], c["output_len"]) for c in w["mix"])
    return max(1, int(w["output_len"] * (1.0 - (w.get("range_ratio") or 0.0))))


def _asked(asked, input_len):
    if isinstance(asked, dict):
        return asked.get(input_len)
    return asked


def _truncated(result, asked):
    """Requests that succeeded with fewer output tokens than asked: a count, a lower bound, or None."""
    if asked is None or asked == {}:
        return None
    if "output_lens" in result and "errors" in result:
        lens, errors = result["output_lens"], result["errors"]
        inputs = result.get("input_lens") or [None] * len(lens)
        return sum(1 for n, e, i in zip(lens, errors, inputs)
                   if not e and _asked(asked, i) is not None and (n or 0) < _asked(asked, i))
    total = result.get("total_output_tokens")
    if isinstance(asked, dict) or not _whole(total):
        return None
    missing = result["completed"] * asked - total
    return -(-missing // asked) if missing > 0 else 0


def summarize(result, asked=None, engine=None):
    """The failures of one point: {sent, completed, failed, truncated, error_rate, errors, aborted}.

    ``asked``: the output tokens each request must get back (a number, or {input_len: output tokens} for a
    mix); None where the benchmark does not send ignore_eos. ``error_rate`` = failed / sent: a truncated output is
    reported beside it, not counted as an error (a prompt that re-tokenizes longer than asked stops at
    max_model_len, which is the engine's limit doing its job, not a failed request).
    """
    completed, failed = result.get("completed") or 0, result.get("failed") or 0
    truncated = _truncated(result, asked)
    sent = completed + failed
    engine = engine or {}
    return dict(sent=sent, completed=completed, failed=failed, truncated=truncated,
                error_rate=(float(failed) / sent) if sent else 1.0,
                errors=error_texts(result.get("errors") or []), error_texts_saved="errors" in result,
                aborted=engine.get("aborted_requests"), errored=engine.get("errored_requests"))


def of_point(point):
    """A point's failures: what the benchmark recorded, else what its result alone tells (older results)."""
    return point.get("failures") or summarize(point.get("result") or {}, None, point.get("engine"))


def describe(found):
    """One line: '2 of 8 requests failed ("Bad Request" x2), 0 truncated'."""
    texts = ", ".join('"%s" x%d' % (e["text"], e["count"]) for e in found["errors"])
    if found["failed"] and not texts:
        texts = "vLLM saved no error texts: run without --save-detailed" if not found.get("error_texts_saved") \
            else "no error text"
    line = "%d of %d requests failed%s" % (found["failed"], found["sent"], " (%s)" % texts if texts else "")
    if found.get("truncated"):
        line += ", %d returned fewer output tokens than asked (ignore_eos)" % found["truncated"]
    if found.get("aborted"):
        line += ", the engine aborted %d" % found["aborted"]
    return line
