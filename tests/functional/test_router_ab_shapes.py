# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/gpu/router_ab.py's traffic shapes (issue 47 item 4), the pure parts: the chat client's conversations, the
shapes' ceiling hit rates, the balance figure, the percentiles, the plan's order; and the chat client against a
stand-in streaming server. Every expected value is worked out by hand in the comments, not with the code under test."""
import http.server
import importlib.util
import json
import pathlib
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("router_ab_shapes", ROOT / "tests" / "gpu" / "router_ab.py")
router_ab = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(router_ab)


def _opts(tmp_path, *more):
    return router_ab.parse(["--model", str(tmp_path), "--out", str(tmp_path / "out"), "--port-base", "18800"]
                           + list(more))


@pytest.mark.parametrize("system, history, user, expected", [
    # turn 1: the system prompt, then the user's words
    ("s1 s2", [], "u1", "s1 s2 u1"),
    # turn 3: every earlier user text and answer in order, then the new user text; the answer's leading space
    # (a stream's first chunk) is dropped, so the text is the same words the engine saw and produced
    ("s1 s2", [("u1", " a1 a2"), ("u2", "a3")], "u3", "s1 s2 u1 a1 a2 u2 a3 u3"),
    # a failed turn's empty answer leaves no double space
    ("s1", [("u1", "")], "u2", "s1 u1 u2"),
])
def test_conversation_is_the_history_then_the_new_words(system, history, user, expected):
    assert router_ab.conversation(system, history, user) == expected


def test_chat_texts_are_the_same_for_every_arm_and_repeat_of_a_seed():
    first = router_ab.chat_texts(7, 3, 2, 20, 5, 1000)
    assert first == router_ab.chat_texts(7, 3, 2, 20, 5, 1000)
    system, users = first
    assert len(system.split()) == 20 and [[len(u.split()) for u in s] for s in users] == [[5, 5]] * 3
    assert all(2 < int(word[1:]) < 1000 and word[0] == "w" for word in system.split())
    assert len(set(u for s in users for u in s)) == 6  # every turn of every session its own words
    assert router_ab.chat_texts(8, 3, 2, 20, 5, 1000)[0] != system


def test_session_ids_are_stable_per_repeat_and_differ_between_repeats():
    assert router_ab.session_ids(0, 0, 16) == router_ab.session_ids(0, 0, 16)
    assert len(set(router_ab.session_ids(0, 0, 16))) == 16
    assert router_ab.session_ids(0, 0, 16) != router_ab.session_ids(0, 1, 16)


@pytest.mark.parametrize("args, expected", [
    # the committed run of 2026-12-02: 8 requests per prefix of 4,000 tokens + 64: 7 x 4000 / (8 x 4064)
    # = 28000 / 32512 = 0.861220...
    ((8, 4000, 64), 28000 / 32512.0),
    # 6 requests per 8,000-token prefix: 5 x 8000 / (6 x 8064) = 40000 / 48384 = 0.826720...
    ((6, 8000, 64), 40000 / 48384.0),
    # a prefix of 1,000 tokens holds 62 whole blocks (992 tokens): 3 x 992 / (4 x 1064) = 2976 / 4256
    ((4, 1000, 64), 2976 / 4256.0),
])
def test_prefix_ceiling(args, expected):
    assert router_ab.prefix_ceiling(*args) == pytest.approx(expected, abs=1e-12)
    assert round(router_ab.prefix_ceiling(8, 4000, 64), 4) == 0.8612


@pytest.mark.parametrize("args, expected", [
    # 96 requests of a 1,000-token head + 3,000 own tokens over two engines: the head (62 whole blocks = 992
    # tokens) computed once per engine, a hit for the other 94: 94 x 992 / (96 x 4000) = 93248 / 384000
    ((96, 1000, 3000), 93248 / 384000.0),
    # 64 requests: 62 x 992 / (64 x 4000) = 61504 / 256000 = 0.24025
    ((64, 1000, 3000), 61504 / 256000.0),
    # one engine: 95 x 992 / 384000
    ((96, 1000, 3000, 1), 94240 / 384000.0),
])
def test_sysprompt_ceiling(args, expected):
    assert router_ab.sysprompt_ceiling(*args) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("args, expected", [
    # 16 sessions x 6 turns, system 2,000, user 192, answer 64 (all whole blocks of 16: 2000 = 125, 256 = 16).
    # Turn t's prompt: 2000 + 256 (t-1) + 192; per session 6 x 2192 + 256 x (0+1+2+3+4+5) = 13152 + 3840 = 16992,
    # x 16 = 271,872 tokens queried. Hits: turn t >= 2 finds 2000 + 256 (t-1) (the previous prompt + its answer):
    # 2256 + 2512 + 2768 + 3024 + 3280 = 13840 per session, x 16 = 221,440; turn 1 finds the system prompt in
    # 16 - 2 sessions (computed once on each engine): 14 x 2000 = 28,000. 249,440 / 271,872 = 0.917490...
    ((16, 6, 2000, 192, 64), 249440 / 271872.0),
    # the same on one engine: 15 x 2000 = 30,000 -> 251,440 / 271,872
    ((16, 6, 2000, 192, 64, 1), 251440 / 271872.0),
    # 2 sessions x 2 turns, 16 each: queried 2 x 32 + 2 x 64 = 192; hits: turn 2 finds 48 tokens (3 blocks) in
    # both sessions = 96, turn 1 nothing (2 sessions, 2 engines) -> 0.5
    ((2, 2, 16, 16, 16), 0.5),
    # a system prompt of 20 tokens: 1 whole block; 3 sessions x 1 turn of 20 + 12 = 32: hits (3 - 2) x 16 = 16
    # of 96 -> 1/6
    ((3, 1, 20, 12, 64), 16 / 96.0),
])
def test_chat_ceiling(args, expected):
    assert router_ab.chat_ceiling(*args) == pytest.approx(expected, abs=1e-12)


def test_shape_ceiling_uses_the_shapes_options(tmp_path):
    opts = _opts(tmp_path, "--prompts-per-prefix", "6", "--prefix-len", "8000", "--sysprompt-num-prompts", "64")
    assert opts.shape_list == ["prefix", "random"]
    assert router_ab.shape_ceiling(opts, "prefix") == pytest.approx(40000 / 48384.0)
    assert router_ab.shape_ceiling(opts, "sysprompt") == pytest.approx(61504 / 256000.0)
    assert router_ab.shape_ceiling(opts, "chat_header") == pytest.approx(249440 / 271872.0)
    assert router_ab.shape_ceiling(opts, "chat_noheader") == pytest.approx(249440 / 271872.0)
    assert router_ab.shape_ceiling(opts, "random") == 0.0


@pytest.mark.parametrize("requests, expected", [
    ([48, 48], 0.5),     # an even split
    ([96, 0], 1.0),      # everything on one engine (the chat shape through nginx prefix_hash, issue 47)
    ([30, 66], 0.6875),  # 66 / 96
    ([40.0, 56.0], 0.5833),  # 56 / 96 = 0.58333 (the engines' counters are floats)
    ([0, 0], None),
])
def test_balance_is_the_busier_engines_share(requests, expected):
    assert router_ab.balance(requests) == expected


@pytest.mark.parametrize("values, q, expected", [
    ([4.0, 1.0, 3.0, 2.0], 50, 2.5),   # sorted 1 2 3 4: position 1.5 -> 2.5
    ([4.0, 1.0, 3.0, 2.0], 90, 3.7),   # position 2.7 -> 3 + 0.7
    ([10.0], 90, 10.0),
    ([], 50, None),
])
def test_percentile_is_numpys_linear(values, q, expected):
    got = router_ab.percentile(values, q)
    assert got == (None if expected is None else pytest.approx(expected))


def test_chat_result_counts_failures_and_output_tokens():
    ok = dict(error=None, ttft_ms=100.0, e2el_ms=730.0, prompt_tokens=2192, completion_tokens=64)
    records = [ok, dict(ok, ttft_ms=300.0, e2el_ms=930.0, prompt_tokens=2448),
               dict(ok, error="HTTPError: HTTP Error 502: Bad Gateway", ttft_ms=None, completion_tokens=None,
                    prompt_tokens=None)]
    result = router_ab.chat_result(records, 2.0)
    assert (result["completed"], result["failed"]) == (2, 1)
    assert result["errors"] == ["HTTPError: HTTP Error 502: Bad Gateway"]
    assert result["total_input_tokens"] == 4640 and result["total_output_tokens"] == 128
    assert result["output_throughput"] == 64.0 and result["request_throughput"] == 1.0  # 128 / 2 s, 2 / 2 s
    assert result["p50_ttft_ms"] == 200.0 and result["p90_ttft_ms"] == pytest.approx(280.0)  # 100 + 0.9 x 200
    assert result["p50_tpot_ms"] == 10.0  # (730 - 100) / 63


def test_the_plan_goes_repeat_by_repeat_over_the_shapes(tmp_path):
    opts = _opts(tmp_path, "--shapes", "prefix,sysprompt,chat_header,chat_noheader,random", "--concurrency", "16",
                 "--repeats", "2", "--arms", "nginx_least_conn,nginx_default",
                 "--chat-header-arms", "nginx_least_conn,consistent_hash_header", "--random-arms", "nginx_least_conn",
                 "--chat-sessions", "4")
    plan = router_ab.run_plan(opts)
    first = [("nginx_least_conn", "prefix", 16), ("nginx_default", "prefix", 16),
             ("nginx_least_conn", "sysprompt", 32), ("nginx_default", "sysprompt", 32),
             ("nginx_least_conn", "chat_header", 4), ("consistent_hash_header", "chat_header", 4),
             ("nginx_least_conn", "chat_noheader", 4), ("nginx_default", "chat_noheader", 4),
             ("nginx_least_conn", "random", 16)]
    assert plan == [c + (0,) for c in first] + [c + (1,) for c in first]


def test_an_unknown_shape_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _opts(tmp_path, "--shapes", "prefix,chat")
    assert "unknown shape 'chat'" in capsys.readouterr().err


def test_router_argv_of_the_tight_cache_aware_arm(tmp_path):
    opts = _opts(tmp_path)
    argv = router_ab.router_argv(opts, "cache_aware_tight")
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    assert argv[argv.index("--balance-abs-threshold") + 1] == "4"
    assert argv[argv.index("--balance-rel-threshold") + 1] == "1.2"
    plain = router_ab.router_argv(opts, "cache_aware")
    assert plain[plain.index("--balance-abs-threshold") + 1] == "64"  # vllm-router 0.1.17's own default
    header = router_ab.router_argv(opts, "consistent_hash_header")
    assert header[header.index("--policy") + 1] == "consistent_hash" and "--balance-abs-threshold" not in header


def test_paired_ratios_pair_each_repeat_with_least_conn():
    rows = [dict(workload="chat_header", arm=arm, concurrency=16, repeat=rep, output_throughput=tps)
            for arm, rep, tps in [("nginx_least_conn", 0, 100.0), ("nginx_least_conn", 1, 80.0),
                                  ("nginx_default", 0, 120.0), ("nginx_default", 1, 120.0)]]
    # 120 / 100 = 1.2 and 120 / 80 = 1.5 (worse over worse would be 120 / 80)
    assert router_ab.paired_ratios(rows, ("chat_header", "nginx_default", 16)) == [1.2, 1.5]


# ---- the chat client against a stand-in streaming server ------------------------------------------------------
class _Engine(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Engine.seen.append((self.headers.get("X-Session-Id"), body))
        words = len(body["prompt"].split())
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in ({"choices": [{"text": " w%d" % words}]}, {"choices": [{"text": " w9"}]},
                      {"choices": [], "usage": {"prompt_tokens": words, "completion_tokens": 2}}):
            self.wfile.write(("data: %s\n\n" % json.dumps(chunk)).encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):  # quiet
        pass


@pytest.mark.parametrize("header", [True, False])
def test_chat_client_sends_growing_conversations(tmp_path, header):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Engine.seen = []
    try:
        opts = _opts(tmp_path, "--chat-sessions", "2", "--chat-turns", "3", "--chat-system-tokens", "4",
                     "--chat-user-tokens", "2", "--chat-answer-tokens", "2", "--chat-stagger", "0", "--chat-vocab", "50")
        result, records = router_ab.run_chat(opts, "http://127.0.0.1:%d" % server.server_address[1], header, 0, 30)
    finally:
        server.shutdown()
    assert (result["completed"], result["failed"], result["total_output_tokens"]) == (6, 0, 4 * 3)
    # prompt words per turn: 4 + 2 = 6; then 6 + 2 (answer) + 2 = 10; then 14 -> 2 x (6 + 10 + 14) = 60
    assert sorted(r["prompt_tokens"] for r in records) == [6, 6, 10, 10, 14, 14]
    assert result["total_input_tokens"] == 60
    system, users = router_ab.chat_texts(0, 2, 3, 4, 2, 50)
    by_session = {}
    for sid, body in _Engine.seen:
        assert body["stream"] and body["ignore_eos"] and body["max_tokens"] == 2
        assert body["stream_options"] == {"include_usage": True}
        by_session.setdefault(body["prompt"].split()[4:6] == users[0][0].split(), []).append((sid, body["prompt"]))
    first = sorted(by_session[True], key=lambda item: len(item[1]))
    # session 0: turn 2 = system + user 1 + the stand-in's answer to a 6-word prompt (" w6 w9") + user 2
    assert first[1][1] == " ".join([system, users[0][0], "w6 w9", users[0][1]])
    assert first[2][1] == " ".join([system, users[0][0], "w6 w9", users[0][1], "w10 w9", users[0][2]])
    ids = router_ab.session_ids(0, 0, 2)
    assert set(sid for sid, prompt in first) == ({ids[0]} if header else {None})


# ---- --chat-clients: fewer clients than sessions take the turns round robin ------------------------------------
def test_turn_line_takes_the_sessions_round_robin():
    line = router_ab.TurnLine(3, 2)
    # three sessions of two turns, one client answering each turn before it takes the next: 0, 1, 2, then each
    # session's second turn in the order the first ones were answered; then the line is empty
    taken = []
    for count in range(6):
        session, turn = line.take()
        assert len(taken) == count
        taken.append((session, turn))
        line.done(session)
    assert taken == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert line.take() is None


def test_turn_line_never_gives_a_session_to_two_clients_at_once():
    line = router_ab.TurnLine(2, 3)
    assert line.take() == (0, 0) and line.take() == (1, 0)
    # both sessions in flight: nothing in line, although turns are left (their own clients put them back)
    assert line.take() is None
    line.done(1)
    assert line.take() == (1, 1)
    line.done(0)
    line.done(1)
    assert [line.take(), line.take()] == [(0, 1), (1, 2)]
    line.done(0)
    line.done(1)  # session 1 had its 3 turns: not put back
    assert [line.take(), line.take()] == [(0, 2), None]


def test_chat_clients_above_the_sessions_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _opts(tmp_path, "--chat-sessions", "4", "--chat-clients", "5")
    assert "--chat-clients 5" in capsys.readouterr().err


def test_the_plan_runs_chat_at_the_clients_concurrency(tmp_path):
    opts = _opts(tmp_path, "--shapes", "chat_header", "--repeats", "1", "--chat-arms", "nginx_default",
                 "--chat-sessions", "48", "--chat-clients", "16")
    assert router_ab.run_plan(opts) == [("nginx_default", "chat_header", 16, 0)]


def test_chat_clients_send_every_turn_in_order_with_its_history(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Engine.seen = []
    try:
        opts = _opts(tmp_path, "--chat-sessions", "5", "--chat-clients", "2", "--chat-turns", "3",
                     "--chat-system-tokens", "4", "--chat-user-tokens", "2", "--chat-answer-tokens", "2",
                     "--chat-stagger", "0", "--chat-vocab", "50")
        result, records = router_ab.run_chat(opts, "http://127.0.0.1:%d" % server.server_address[1], True, 0, 30)
    finally:
        server.shutdown()
    # 5 sessions x 3 turns, every one answered; each session's prompts 6, 10, 14 words (as above): 5 x 30 = 150
    assert (result["completed"], result["failed"], result["total_input_tokens"]) == (15, 0, 150)
    assert [(r["session"], r["turn"], r["prompt_tokens"]) for r in records] == [
        (s, t, 6 + 4 * t) for s in range(5) for t in range(3)]
    ids = router_ab.session_ids(0, 0, 5)
    assert sorted(set(r["session_id"] for r in records)) == sorted(ids)


class _Pick(object):
    """A stand-in random.Random whose randrange gives the listed picks in turn."""

    def __init__(self, picks):
        self.picks = list(picks)

    def randrange(self, n):
        pick = self.picks.pop(0)
        assert 0 <= pick < n
        return pick


def test_turn_line_random_order_takes_the_picked_waiting_session():
    line = router_ab.TurnLine(4, 2, _Pick([2, 0, 1]))
    # line 0 1 2 3: pick index 2 -> session 2; line 3 0 1 (rotated, then 2 taken) : pick 0 -> session 3
    assert line.take() == (2, 0)
    assert line.take() == (3, 0)
    line.done(2)  # line 0 1 2: pick 1 -> session 1
    assert line.take() == (1, 0)
