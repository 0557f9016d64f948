#!/usr/bin/env python3
"""Clients that leave before their first token, and connections that never send a request
(standard library only; each case starts its own `tandem serve` on a free 127.0.0.1 port).

- streams: -np 2, both slots held by two 2000-token streams; then 40 streaming requests with
  ~800-token prompts whose clients go away while they are queued (20 right after sending,
  by FIN or reset, 20 after the response headers). Within 3 s none is still waiting, each
  counts as an abort, not one of their prompts was prefilled, /metrics keeps answering
  within 2 s throughout, and the two long streams then complete untouched ("length").
- idle: 100 connections that send nothing or half a request line; meanwhile /health,
  /metrics and a completion answer within 3 s.

Exit status 0 when both pass. Example:
  python3 bench/faults/abandon.py --tandem build/src/app/tandem
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib as fl  # noqa: E402

ROOT = fl.repo_root()
TARGET = os.path.join(ROOT, "models", "tandem-target")
LEGIT_TOKENS = 2000  # long enough to outlast the drops and the checks on a fast, quiet machine
LONG_PROMPT = "The whale and the ship and the sea, and the men who sailed upon them. " * 50


def start(parallel):
    return fl.Server(ARGS.tandem, fl.tandem_args(TARGET, None, ARGS.threads, parallel),
                     env=fl.isolated_env(fl.temp_cache("tandem-abandon-cache-")))


def timed_metrics(server, bound, what):
    t0 = time.monotonic()
    m = server.metrics()
    took = time.monotonic() - t0
    assert took < bound, "/metrics took %.1f s %s" % (took, what)
    return m


def case_streams():
    server = start(2)
    figures = {}
    try:
        legit = [fl.Stream(server.port, "/v1/completions",
                           {"prompt": "The long voyage %d" % i, "max_tokens": LEGIT_TOKENS, "temperature": 0,
                            "logit_bias": fl.NO_EOS, "stream": True, "stream_options": {"include_usage": True}})
                 for i in range(2)]
        for s in legit:
            s.start()
        deadline = time.monotonic() + 60
        while not all(s.first_content.is_set() for s in legit):
            assert time.monotonic() < deadline, "the long streams did not start"
            time.sleep(0.01)
        m0 = timed_metrics(server, 2, "before the drops")
        for i in range(40):
            chat = i % 2 == 0
            body = {"max_tokens": 50, "stream": True}
            if chat:
                body["messages"] = [{"role": "user", "content": LONG_PROMPT}]
            else:
                body["prompt"] = LONG_PROMPT
            c = fl.Conn(server.port, timeout=30)
            c.send_request("POST", "/v1/chat/completions" if chat else "/v1/completions", body)
            if i >= 20:
                status, _ = c.read_head()
                assert status == 200, "HTTP %d" % status
            c.abort(rst=i % 4 < 2)
        assert all(not s.complete for s in legit), "the long streams ended before the drops (test timing assumption)"
        deadline = time.monotonic() + 3
        while True:
            m = timed_metrics(server, 2, "while 40 abandoned streams were queued")
            if m["tandem:num_requests_waiting"] == 0:
                break
            assert time.monotonic() < deadline, "%d abandoned requests still waiting after 3 s" % (
                m["tandem:num_requests_waiting"])
            time.sleep(0.05)
        figures["abandoned_cancelled_in_s"] = round(3 - (deadline - time.monotonic()), 2)
        assert m["tandem:num_requests_running"] == 2, \
            "a long stream ended before the checks (test timing assumption): a free slot could admit a dropped request"
        aborts = m['tandem:request_success_total{finished_reason="abort"}'] - \
            m0['tandem:request_success_total{finished_reason="abort"}']
        prefilled = m["tandem:prompt_tokens_total"] - m0["tandem:prompt_tokens_total"]
        figures["aborts"], figures["prompt_tokens_prefilled"] = aborts, prefilled
        assert aborts == 40, "%d aborts for 40 abandoned requests" % aborts
        assert prefilled == 0, "%d prompt tokens of abandoned requests were prefilled" % prefilled
        for s in legit:
            s.join(120)
            r = fl.check_stream(s.events, False, 1, LEGIT_TOKENS, True, ("length",))
            assert r["usage"]["completion_tokens"] == LEGIT_TOKENS
        figures["long_streams"] = "length, %d tokens each" % LEGIT_TOKENS
        return figures
    finally:
        server.kill()


def case_idle():
    server = start(4)
    figures = {}
    try:
        conns = []
        for i in range(100):
            c = fl.Conn(server.port, timeout=10)
            if i % 2:
                c.send_raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            conns.append(c)
        time.sleep(0.3)
        t0 = time.monotonic()
        assert fl.http_get(server.port, "/health", timeout=3)[0] == 200
        timed_metrics(server, 3, "with 100 idle connections")
        status, _, body = fl.http_post_json(server.port, "/v1/completions",
                                            {"prompt": "The sea", "max_tokens": 8, "temperature": 0}, timeout=3)
        assert status == 200, "completion with 100 idle connections: %d %r" % (status, body[:200])
        fl.check_completion_body(body, False, 1, 8)
        figures["answered_in_s"] = round(time.monotonic() - t0, 3)
        for c in conns:
            c.abort()
        return figures
    finally:
        server.kill()


CASES = {"streams": case_streams, "idle": case_idle}


def set_args(args):
    global ARGS
    ARGS = args


def main():
    fl.run_cases("abandon", CASES, __doc__.split("\n")[0], set_args)


if __name__ == "__main__":
    main()
