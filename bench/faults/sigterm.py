#!/usr/bin/env python3
"""SIGTERM/SIGINT against `tandem serve` at awkward moments (standard library only).

Cases (`--cases`, default all), each with its own server on a free 127.0.0.1 port:

- drain: streams in flight (chat and completions, n=2, usage, a non-streaming request,
  requests still queued behind -np, an idle keep-alive connection, a client that stopped
  reading) when SIGTERM comes with TANDEM_SHUTDOWN_DRAIN_MS=2000. Every stream that is read
  ends with a final event per choice (finish_reason "length" for the short ones, which
  have at most 10 tokens left at the signal and finish inside the drain window; "abort" or "length" for the others) and then
  `data: [DONE]`; the non-streaming request gets its JSON; a request sent during the drain
  gets 503 (or a refused connection); the process exits 0 within the drain time plus a
  bound, the stalled client included.
- drain0: SIGINT with TANDEM_SHUTDOWN_DRAIN_MS=0: every stream is cut at once, each with a
  final "abort" event and [DONE]; exit 0 promptly.
- keepalive: SIGTERM while a short stream is in flight, one client holds a keep-alive
  connection (a request every 0.2 s while the stream drains, then silent) and another has
  connected and sent nothing: the stream ends with finish_reason "length" and [DONE], the
  server closes both connections, and the process exits 0 before the keep-alive timeout
  (5 s) counted from the idle connection's last answer — cpp-httplib's own wait ran it out.
- loading: SIGTERM while the model is still loading (TANDEM_LOAD_DELAY_MS=60000): /health
  and a completion answer 503 meanwhile; the process exits 0 within a few seconds, not after
  the delay.

Exit status 0 when every case passes. Example:
  python3 bench/faults/sigterm.py --tandem build/src/app/tandem
"""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib as fl  # noqa: E402

ROOT = fl.repo_root()
TARGET = os.path.join(ROOT, "models", "tandem-target")
DRAFT = os.path.join(ROOT, "models", "tandem-draft")
# How long exit may take after the signal beyond the drain window when a client stopped
# reading: a blocked write waits out its 5 s write timeout before the server's worker
# threads join, plus a margin for a busy shared machine. Idle keep-alive connections no
# longer delay exit (src/server/prompt_stop_server.h; the keepalive case). Without such
# clients exit follows the drain at once (EXIT_PROMPT_S, the drain0 and loading cases).
EXIT_SLACK_S = 10.0
EXIT_PROMPT_S = 3.0
KEEP_ALIVE_S = 5.0  # the server's keep-alive idle timeout (src/server/http_server.cpp)


def completion(prompt, max_tokens, stream=True, **extra):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logit_bias": fl.NO_EOS}
    if stream:
        body["stream"] = True
    body.update(extra)
    return "/v1/completions", body


def chat(content, max_tokens, stream=True, **extra):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0.7,
            "seed": 7, "logit_bias": fl.NO_EOS}
    if stream:
        body["stream"] = True
    body.update(extra)
    return "/v1/chat/completions", body


def start(env, extra=(), drafter=DRAFT, wait_ready=True):
    cache = fl.temp_cache("tandem-sigterm-cache-")
    e = fl.isolated_env(cache)
    e.update(env)
    return fl.Server(args_.tandem, fl.tandem_args(TARGET, drafter, args_.threads, 4, extra), env=e,
                     wait_ready=wait_ready)


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


def check_read_stream(s, name, finishes):
    assert s.error is None, "%s: %s" % (name, s.error)
    assert s.status == 200, "%s: HTTP %s" % (name, s.status)
    assert s.complete, "%s: stream not complete" % name
    body = s.body
    r = fl.check_stream(s.events, s.path.endswith("chat/completions"), body.get("n", 1), body["max_tokens"],
                        bool(body.get("stream_options", {}).get("include_usage")), finishes)
    return r


def case_drain():
    server = start({"TANDEM_SHUTDOWN_DRAIN_MS": "2000"})
    figures = {}
    try:
        port = server.port
        # Admitted first (-np 4): two short streams that finish inside the drain window, two long ones.
        short = [fl.Stream(port, *completion("The short ship", 40, stream_options={"include_usage": True})),
                 fl.Stream(port, *chat("Say something short.", 40))]
        long_ = [fl.Stream(port, *completion("The long voyage of the ship", 1800, stream_options={"include_usage": True})),
                 fl.Stream(port, *chat("Tell me a very long story.", 900, n=2, stream_options={"include_usage": True}))]
        first = short + long_
        for s in first:
            s.start()
        wait_until(lambda: all(s.first_content.is_set() for s in first), 60, "the first streams to decode")
        # Queued behind -np 4: a stream, a non-streaming request, a stalled reader (small receive buffer).
        queued = [fl.Stream(port, *completion("The queued whale", 500)),
                  fl.Stream(port, *completion("The plain request", 1500, stream=False)),
                  fl.Stream(port, *chat("Queued chat", 300))]
        stalled = fl.Stream(port, *completion("The stalled reader", 1900), read=False, rcvbuf=4096)
        for s in queued + [stalled]:
            s.start()
        idle = fl.Conn(port, timeout=30)  # an idle keep-alive connection
        idle.send_request("GET", "/health")
        st, h = idle.read_head()
        idle.read_body(h)
        assert st == 200
        # The signal comes when the short streams have at most 10 tokens left: well inside the
        # drain window even on a busy machine.
        wait_until(lambda: all(len(s.events) >= 31 for s in short), 60, "the short streams to near their end")
        m = server.metrics()
        figures["running_at_signal"] = m.get("tandem:num_requests_running")
        figures["waiting_at_signal"] = m.get("tandem:num_requests_waiting")
        t0 = time.monotonic()
        server.signal(signal.SIGTERM)
        time.sleep(0.2)
        try:  # during the drain a new request is refused: 503, or the connection is refused
            st, _, body = fl.http_post_json(port, *completion("late", 4, stream=False), timeout=10)
            figures["late_request"] = st
            assert st == 503, "a request during the drain got %d %r" % (st, body[:200])
        except (ConnectionRefusedError, ConnectionResetError, fl.ProtocolError):
            figures["late_request"] = "refused"
        code = server.wait(2.0 + EXIT_SLACK_S)
        took = time.monotonic() - t0
        figures["exit"], figures["exit_seconds"] = code, round(took, 2)
        assert code == 0, "exit %s %.1f s after SIGTERM\n%s" % (code, took, server.log()[-2000:])
        for s in first + queued:
            s.join(10)
        finishes = {}
        for i, s in enumerate(short):
            r = check_read_stream(s, "short %d" % i, ("length",))
            finishes["short%d" % i] = r["finish"]
        for i, s in enumerate(long_ + [queued[0], queued[2]]):
            r = check_read_stream(s, "long %d" % i, ("abort", "length"))
            finishes["long%d" % i] = r["finish"]
        plain = queued[1]
        assert plain.error is None and plain.status == 200 and plain.complete, \
            "non-streaming: %s %s" % (plain.status, plain.error)
        j = json.loads(plain.raw)
        finishes["non_stream"] = [c["finish_reason"] for c in j["choices"]]
        assert all(f in ("abort", "length") for f in finishes["non_stream"]), finishes
        figures["finish_reasons"] = finishes
        assert "abort" in json.dumps(finishes), "nothing was cut at the deadline (test timing assumption)"
        if getattr(stalled, "conn", None):
            stalled.conn.abort()
        idle.close()
        return figures
    finally:
        server.kill()


def case_drain0():
    server = start({"TANDEM_SHUTDOWN_DRAIN_MS": "0"})
    figures = {}
    try:
        streams = [fl.Stream(server.port, *completion("The ship %d" % i, 1500)) for i in range(3)]
        streams += [fl.Stream(server.port, *chat("Go on %d" % i, 1500, stream_options={"include_usage": True}))
                    for i in range(3)]
        for s in streams:
            s.start()
        wait_until(lambda: sum(s.first_content.is_set() for s in streams) >= 4, 60, "four streams to decode")
        t0 = time.monotonic()
        server.signal(signal.SIGINT)
        code = server.wait(EXIT_SLACK_S)
        took = time.monotonic() - t0
        figures["exit"], figures["exit_seconds"] = code, round(took, 2)
        assert code == 0, "exit %s %.1f s after SIGINT\n%s" % (code, took, server.log()[-2000:])
        assert took < EXIT_PROMPT_S, "exit took %.1f s with a 0 ms drain" % took
        for s in streams:
            s.join(10)
        figures["finish_reasons"] = [check_read_stream(s, "stream %d" % i, ("abort",))["finish"]
                                     for i, s in enumerate(streams)]
        return figures
    finally:
        server.kill()


def case_keepalive():
    server = start({"TANDEM_SHUTDOWN_DRAIN_MS": "60000"})
    figures = {}
    try:
        port = server.port
        # Long enough that the drain outlasts a descheduled test process (a 16-token stream
        # could finish between the first token and the idle connection's first request on a
        # loaded machine), short enough to finish well inside the 60 s drain.
        stream = fl.Stream(port, *completion("The short ship", 160))
        stream.start()
        wait_until(lambda: stream.first_content.is_set(), 120, "the stream to decode")
        idle = fl.Conn(port, timeout=30)
        silent = fl.Conn(port, timeout=30)  # connected, never sends a request
        server.signal(signal.SIGTERM)
        # While the stream drains, `idle` sends a request every 0.2 s (503 while draining), so its
        # keep-alive timer restarts at each answer; then it falls silent.
        t_idle, statuses = None, set()
        while t_idle is None or (not stream.complete and stream.error is None and stream.is_alive()):
            try:
                idle.send_request("GET", "/health")
                st, h = idle.read_head()
                idle.read_body(h)
            except (fl.ProtocolError, OSError):
                break
            t_idle = time.monotonic()
            statuses.add(st)
            time.sleep(0.2)
        stream.join(60)
        assert t_idle is not None, "the idle connection got no answer during the drain"
        figures["idle_statuses"] = sorted(statuses)
        code = server.wait(KEEP_ALIVE_S + EXIT_SLACK_S)
        took = time.monotonic() - t_idle
        figures["exit"], figures["exit_seconds_after_last_idle_answer"] = code, round(took, 2)
        assert code == 0, "exit %s %.1f s after the last answer\n%s" % (code, took, server.log()[-2000:])
        assert took < KEEP_ALIVE_S - 0.5, \
            "exit %.1f s after the idle connection's last answer: the keep-alive wait held it" % took
        figures["finish"] = check_read_stream(stream, "in-flight stream", ("length",))["finish"]
        for name, c in (("idle", idle), ("silent", silent)):
            try:
                closed = c.sock.recv(1) == b""
            except OSError:
                closed = True
            assert closed, "the %s connection was left open" % name
            c.close()
        return figures
    finally:
        server.kill()


def case_loading():
    server = start({"TANDEM_LOAD_DELAY_MS": "60000"}, wait_ready=False)
    figures = {}
    try:
        st, _ = fl.http_get(server.port, "/health")
        figures["health_while_loading"] = st
        assert st == 503, "/health while loading: %d" % st
        st, _, body = fl.http_post_json(server.port, *completion("The sea", 4, stream=False))
        figures["completion_while_loading"] = st
        assert st == 503, "a completion while loading: %d %r" % (st, body[:200])
        t0 = time.monotonic()
        server.signal(signal.SIGTERM)
        code = server.wait(10)
        took = time.monotonic() - t0
        figures["exit"], figures["exit_seconds"] = code, round(took, 2)
        assert code == 0 and took < EXIT_PROMPT_S, "exit %s %.1f s after SIGTERM while loading\n%s" % (code, took, server.log())
        return figures
    finally:
        server.kill()


CASES = {"drain": case_drain, "drain0": case_drain0, "keepalive": case_keepalive, "loading": case_loading}


def set_args(args):
    global args_
    args_ = args


def main():
    fl.run_cases("sigterm", CASES, __doc__.split("\n")[0], set_args)


if __name__ == "__main__":
    main()
