# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Send the front door's traffic shapes through nginx and count the requests each upstream served (issue 47).
Standard library only; the upstreams are TEST STAND-INs (standin_upstream.py) that answer with their name.

Usage: balance_probe.py FRONT_URL   (the API key in the environment variable GPUFLEET_PROBE_KEY, never in argv)

Shapes, each request sent after the previous one ended (so least_conn's choice is deterministic):
- shared_system_prompt: one long system prompt + a distinct document per request (how chat apps send traffic);
- distinct_prefixes: 12 prefixes, 4 requests each; no_reuse: every prompt its own;
- sessions_without_header: 16 chat sessions x 3 growing turns, no session header;
- sessions_with_header: 128 sessions x 2 growing turns, each with its own X-Session-Id (UUIDs of a fixed seed).
Prints JSON {shape: {instance: requests}, "sticky_sessions": every session's turns on one instance,
"problems": [...]}; a problem is an instance with less than 35 % or more than 65 % of a shape's requests, or a
session split over instances. Exits 1 when there is a problem.
"""

import json
import os
import random
import sys
import urllib.request
import uuid

SYSTEM = "You are a helpful assistant for a law firm. Answer from the contract only, cite the clause. " * 12


def send(front, prompt, session=None):
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ.get("GPUFLEET_PROBE_KEY", "")}
    if session is not None:
        headers["X-Session-Id"] = session
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1}).encode()
    request = urllib.request.Request(front + "/v1/completions", data=body, method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["instance"]


def sessions(front, count, turns, header):
    rng = random.Random(47)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _count in range(count)]
    history, served = {}, []
    for turn in range(turns):
        for s in range(count):
            history[s] = history.get(s, SYSTEM) + " user turn %d of session %d." % (turn, s)
            served.append((ids[s], send(front, history[s], ids[s] if header else None)))
    return served


def shapes(front):
    return {
        "shared_system_prompt": [send(front, SYSTEM + "Document %03d: " % i + "clause text " * 40) for i in range(24)],
        "distinct_prefixes": [send(front, ("Prefix %02d " % (i % 12)) * 200 + " question %d" % i) for i in range(48)],
        "no_reuse": [send(front, "unique request %d " % i + str(i * 7919) * 30) for i in range(24)],
        "sessions_without_header": [name for _s, name in sessions(front, 16, 3, header=False)],
        "sessions_with_header": sessions(front, 128, 2, header=True),
    }


def judge(results):
    counts, problems = {}, []
    by_session = {}
    for session, name in results["sessions_with_header"]:
        by_session.setdefault(session, set()).add(name)
    results = dict(results, sessions_with_header=[name for _s, name in results["sessions_with_header"]])
    for shape, served in sorted(results.items()):
        counts[shape] = dict((name, served.count(name)) for name in sorted(set(served)))
        share = max(counts[shape].values()) / float(len(served))
        if len(counts[shape]) < 2 or not 0.35 <= 1.0 - share <= share <= 0.65:
            problems.append("%s: %s (each instance must get 35-65 %%)" % (shape, counts[shape]))
    sticky = all(len(names) == 1 for names in by_session.values())
    if not sticky:
        problems.append("sessions_with_header: a session's turns reached more than one instance")
    return dict(counts, sticky_sessions=sticky, problems=problems)


def main(argv):
    report = judge(shapes(argv[1].rstrip("/")))
    print(json.dumps(report, sort_keys=True))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
