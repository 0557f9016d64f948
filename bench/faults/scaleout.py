#!/usr/bin/env python3
"""Replicas behind nginx (deploy/replicas.py): affinity, a replica killed mid-load, a drained one
(standard library only; docs/scaling.md).

Cases (`--cases`, default all), each with its own fleet (3 replicas of the bundled target at
-np 2 behind an nginx on free 127.0.0.1 ports):

- kill: conversations (X-Session-Id), half of them streaming, run turns concurrently through
  nginx. Affinity: every turn of a conversation lands on the replica the hash picks (nginx's
  X-Upstream header), and its later turns start on cached KV blocks there
  (usage.prompt_tokens_details.cached_tokens > 0, and the replica's
  tandem:prefix_cache_hits_total), while the same turn sent to another replica finds nothing
  cached. Then, with the survivors under load, and on one replica a long stream and a long
  non-streaming request running and two more requests queued, that replica gets SIGKILL. Every request must either succeed (a valid body, or a stream ending in
  `data: [DONE]`) or be one that was in flight on the killed replica and fail cleanly: a
  client-visible error (nginx closes the connection without the last chunk of the chunked
  body; a 5xx), never a timeout or a well-framed 200 that lacks `[DONE]`. Requests sent after
  the kill all succeed; the survivors' conversations stay where they were (consistent
  hashing); once the supervisor's /health checks have marked the replica down, no request
  tries it any more. Restarted on its port, it is put back after two good checks and its
  conversations return to it (cold: its prefix cache died with it).
- drain: SIGTERM to a replica while it streams: its /health turns 503, the supervisor marks
  it down, its streams finish normally (finish_reason "length", `[DONE]`), new turns of its
  conversations go to the others (a 503 from it is retried by nginx), it exits 0, and no
  request fails.

Exits 77 (reported as skipped by ctest) when nginx is not installed. Example:
  python3 bench/faults/scaleout.py --tandem build/src/app/tandem
"""

import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "deploy"))
import faultlib as fl  # noqa: E402
import replicas  # noqa: E402

TARGET = os.path.join(fl.repo_root(), "models", "tandem-target")
REPLICAS = 3
SESSIONS_PER_REPLICA = 2
DRAIN_TOKENS = 1000  # the streams a replica drains: long enough that its /health is seen saying 503
OPENERS = [
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse",
    "Fellow citizens of the Senate and of the House of Representatives, among the vicissitudes incident to life",
    "The whale was seen at dawn off the starboard bow, and the whole crew ran to the rail to watch",
    "It is a truth that the sea keeps its own counsel, and that a sailor learns to listen before he speaks",
    "In the year of our Lord the ship Pequod sailed from Nantucket upon a long and perilous voyage",
    "We the people have met here in a time of trial to consider the state of the union and its duties",
]
FILLER = (" The captain walked the deck in silence, and the mate kept the watch until the bell rang twice,"
          " while the harpooners sharpened their irons and spoke of home.")


def session_keys(port, per_replica):
    """{replica address: [keys]}: which conversation keys nginx's hash sends where, learnt
    through the proxy with GET /health (cheap, same routing as a completion)."""
    mapping = {}
    for i in range(256):
        key = "conv-%d" % i
        status, headers = get_with_headers(port, "/health", {"X-Session-Id": key})
        assert status == 200, "/health through nginx: %d" % status
        keys = mapping.setdefault(headers["x-upstream"], [])
        if len(keys) < per_replica:
            keys.append(key)
        if len(mapping) == REPLICAS and all(len(k) == per_replica for k in mapping.values()):
            return mapping
    raise AssertionError("256 keys did not reach every replica %d times: %r" % (per_replica, mapping))


def get_with_headers(port, path, headers):
    c = fl.Conn(port, 10)
    try:
        c.send_request("GET", path, headers=headers)
        status, h = c.read_head()
        c.read_body(h)
        return status, h
    finally:
        c.close()


class Conversation:
    """One chat: each turn resends the whole history, so turn k's prompt extends turn k-1's."""

    def __init__(self, key, opener, stream):
        self.key, self.stream = key, stream
        self.messages = [{"role": "user", "content": opener + FILLER}]
        self.results = []  # Turn objects, in order

    def turn(self, port, max_tokens, key=None, record=True):
        body = {"messages": list(self.messages), "max_tokens": max_tokens, "temperature": 0,
                "logit_bias": fl.NO_EOS}
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        s = fl.Stream(port, "/v1/chat/completions", body, headers={"X-Session-Id": key or self.key}, timeout=60)
        s.started = time.monotonic()
        s.key = key or self.key
        s.run()
        s.ended = time.monotonic()
        t = Turn(s)
        if record and t.ok:
            self.messages += [{"role": "assistant", "content": t.text},
                              {"role": "user", "content": "Go on, and tell me more of it."}]
        if record:
            self.results.append(t)
        return t


class Turn:
    """A finished request and its verdict: ok, a clean failure, or a violation."""

    def __init__(self, s):
        self.s = s
        self.upstreams = [a.strip() for a in s.headers.get("x-upstream", "").split(",") if a.strip()]
        self.ok, self.text, self.cached, self.problem = False, "", None, None
        chat_stream = bool(s.body.get("stream"))
        if s.error is None and s.status == 200:
            try:
                if chat_stream:
                    r = fl.check_stream(s.events, True, 1, s.body["max_tokens"], "stream_options" in s.body)
                else:
                    r = fl.check_completion_body(s.raw, True, 1, s.body["max_tokens"])
                self.ok, self.text = True, r["texts"][0]
                usage = r["usage"] or {}
                self.cached = usage.get("prompt_tokens_details", {}).get("cached_tokens")
            except fl.ProtocolError as e:
                # A body that arrived whole (framing intact) but is wrong: for a stream, a 200
                # that ends without [DONE] is the silent truncation a client must never see.
                self.problem = "violation: complete response is invalid: %s" % e
        elif s.error is not None and ("timed out" in s.error or "timeout" in s.error.lower()):
            self.problem = "violation: hang (%s)" % s.error
        elif s.error is not None:
            self.problem = "clean: %s" % s.error  # e.g. the connection closed before the last chunk
        elif s.status >= 500:
            self.problem = "clean: HTTP %d" % s.status
        else:
            self.problem = "violation: HTTP %s" % s.status

    def describe(self):
        return "key=%s stream=%s upstreams=%s %s events=%d" % (
            self.s.key, bool(self.s.body.get("stream")), self.upstreams, self.problem, len(self.s.events))


_workdirs = []  # removed when the case passes


def fleet_env():
    cache = tempfile.mkdtemp(prefix="tandem-scaleout-cache-")
    _workdirs.append(cache)
    env = fl.isolated_env(cache)
    env["TANDEM_SHUTDOWN_DRAIN_MS"] = "30000"  # drain: in-flight streams finish; idle replicas exit at once
    return env


def replica_args():
    return fl.tandem_args(TARGET, None, args_.threads, 2)


def start_fleet(tag):
    workdir = tempfile.mkdtemp(prefix="tandem-scaleout-%s-" % tag)  # logs; kept when the case fails
    _workdirs.append(workdir)
    print("scaleout: %s: replicas' and nginx's logs in %s" % (tag, workdir), flush=True)
    return replicas.Fleet(args_.tandem, replica_args(), REPLICAS, workdir, env=fleet_env())


def make_conversations(fleet):
    mapping = session_keys(fleet.port, SESSIONS_PER_REPLICA)
    convs, home = [], {}
    for address in fleet.addresses():
        for key in mapping[address]:
            c = Conversation(key, OPENERS[len(convs) % len(OPENERS)] + " (%s)" % key, stream=len(convs) % 2 == 0)
            convs.append(c)
            home[key] = address
    return convs, home


def run_parallel(fns, timeout):
    threads = [threading.Thread(target=f, daemon=True) for f in fns]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert not stuck, "%d client threads still running after %.0f s (a hang)" % (stuck, timeout)


def check_affinity(fleet, convs, home, turns=3):
    """Runs `turns` turns of every conversation at once; returns figures."""
    before = {r.port: r.metrics().get("tandem:prefix_cache_hits_total", 0.0) for r in fleet.replicas}
    run_parallel([lambda c=c: [c.turn(fleet.port, 16) for _ in range(turns)] for c in convs], 120)
    cached_later = 0
    for c in convs:
        for i, t in enumerate(c.results):
            assert t.ok, "affinity turn %d failed: %s" % (i, t.describe())
            assert t.upstreams == [home[c.key]], "key %s went to %s, hash says %s" % (c.key, t.upstreams,
                                                                                      home[c.key])
            if i > 0:
                assert t.cached and t.cached >= 32, "turn %d of %s: cached_tokens %r" % (i, c.key, t.cached)
                cached_later += t.cached
    hits = {}
    for r in fleet.replicas:
        hits[r.port] = r.metrics().get("tandem:prefix_cache_hits_total", 0.0) - before[r.port]
        assert hits[r.port] >= 32, "replica %d: prefix_cache_hits_total grew by %r" % (r.port, hits[r.port])
    # The control: the same next turn on another replica (another key) finds nothing cached.
    c = convs[0]
    other = next(k for k, a in home.items() if a != home[c.key])
    t = c.turn(fleet.port, 4, key=other, record=False)
    assert t.ok and t.upstreams == [home[other]], t.describe()
    assert t.cached == 0, "the turn on a replica that never saw the conversation had %r cached" % t.cached
    return {"cached_tokens_later_turns": cached_later, "hits_per_replica": sorted(hits.values())}


def case_kill():
    with start_fleet("kill") as fleet:
        convs, home = make_conversations(fleet)
        figures = check_affinity(fleet, convs, home)
        victim = fleet.replicas[1]
        victim_addr = "%s:%d" % (fl.HOST, victim.port)
        victims = [c for c in convs if home[c.key] == victim_addr]
        survivors = [c for c in convs if home[c.key] != victim_addr]

        # Load on the survivors until told to stop; long streams and a queued request on the victim.
        stop = threading.Event()
        load = []

        def survivor_loop(c):
            while not stop.is_set():
                load.append(c.turn(fleet.port, 12))

        loops = [threading.Thread(target=survivor_loop, args=(c,), daemon=True) for c in survivors]
        for t in loops:
            t.start()
        replicas.wait_for(lambda: len(load) >= len(survivors), 60, "load on the survivors")
        # Running on the victim (-np 2): a long stream and a long non-streaming request.
        long_body = {"messages": list(victims[0].messages), "max_tokens": 1500, "temperature": 0,
                     "logit_bias": fl.NO_EOS, "stream": True}
        long_ = [fl.Stream(fleet.port, "/v1/chat/completions", long_body, headers={"X-Session-Id": victims[0].key})]
        plain_body = {"messages": list(victims[1].messages), "max_tokens": 1000, "temperature": 0,
                      "logit_bias": fl.NO_EOS}
        running_plain = fl.Stream(fleet.port, "/v1/chat/completions", plain_body,
                                  headers={"X-Session-Id": victims[1].key})
        # Queued behind them (-np 2): a non-streaming request (nothing sent to the client until it
        # is done: nginx retries it elsewhere) and a stream (tandem sends a stream's 200 headers at
        # once, queued or not: cut like the running ones).
        queued = fl.Stream(fleet.port, "/v1/chat/completions",
                           {"messages": list(victims[0].messages), "max_tokens": 8, "temperature": 0},
                           headers={"X-Session-Id": victims[0].key})
        queued_stream = fl.Stream(fleet.port, "/v1/chat/completions",
                                  {"messages": list(victims[-1].messages), "max_tokens": 8, "temperature": 0,
                                   "stream": True}, headers={"X-Session-Id": victims[-1].key})
        for s in long_ + [running_plain]:
            s.key, s.started = s.request_headers["X-Session-Id"], time.monotonic()
            s.start()
        replicas.wait_for(lambda: all(s.first_content.is_set() or s.error for s in long_) and
                          victim.metrics().get("tandem:num_requests_running", 0) >= 2, 60,
                          "the long requests on the victim to start")
        for s, c in ((queued, victims[0]), (queued_stream, victims[-1])):
            s.key, s.started = c.key, time.monotonic()
            s.start()
        replicas.wait_for(lambda: victim.metrics().get("tandem:num_requests_waiting", 0) >= 2, 30,
                          "the queued requests to reach the victim")

        victim.proc.kill()  # SIGKILL mid-load
        victim.proc.wait()
        killed_at = time.monotonic()

        # New turns of the killed replica's conversations right away (before the supervisor has
        # noticed): nginx's connection to it is refused and it tries the next replica.
        after = []
        run_parallel([lambda c=c: after.append(c.turn(fleet.port, 8)) for c in victims], 60)
        replicas.wait_for(lambda: not fleet.supervisor.healthy[victim_addr], 30, "the supervisor to mark it down")
        marked_down = time.monotonic() - killed_at
        # Every conversation once more: the victim is down in nginx's upstream and never tried.
        after_down = []
        run_parallel([lambda c=c: after_down.append(c.turn(fleet.port, 8)) for c in convs], 60)
        stop.set()
        for t in loops:
            t.join(90)
        # The replica comes back on its port: two good checks put it back, and its conversations
        # return to it (the ring kept its place), starting cold (its cache died with it).
        fleet.replicas[1] = fl.Server(args_.tandem, replica_args(), env=fleet_env(), port=victim.port,
                                      with_parent=True)
        replicas.wait_for(lambda: fleet.supervisor.healthy[victim_addr], 30, "the supervisor to put it back")
        back = []
        run_parallel([lambda c=c: back.append(c.turn(fleet.port, 8)) for c in victims], 60)
        for t in back:
            assert t.ok and t.upstreams == [victim_addr], "after the restart: " + t.describe()
        assert not any(t.is_alive() for t in loops), "a survivor load thread hangs"
        for s in long_ + [queued, queued_stream, running_plain]:
            s.join(90)
            assert not s.is_alive(), "a request in flight on the killed replica hangs"

        in_flight = [Turn(s) for s in long_ + [queued, queued_stream, running_plain]]
        violations = []
        for t in in_flight + load + after + after_down:
            if t.problem and t.problem.startswith("violation"):
                violations.append(t.describe())
            elif not t.ok and (t.upstreams[-1:] != [victim_addr] or t.s.started > killed_at):
                violations.append("lost (not in flight on the killed replica): " + t.describe())
        assert not violations, "%d violations:\n  %s" % (len(violations), "\n  ".join(violations[:10]))
        cut = [t for t in in_flight[:len(long_)] if not t.ok]
        assert cut, "the long stream on the killed replica was not cut (it needs 1500 tokens): %s" % [
            t.describe() for t in in_flight]
        # Streaming passes through nginx as it is written: the cut streams had delivered events
        # (their first content was seen before the kill) although they never finished.
        assert all(t.s.events for t in cut), [t.describe() for t in cut]
        queued_turn, queued_stream_turn, plain_turn = in_flight[len(long_):]
        # Nothing of a non-streaming reply had reached the client: nginx redid it elsewhere (or
        # it had finished before the kill).
        assert plain_turn.ok, "the non-streaming request running on the killed replica: " + plain_turn.describe()
        for t in load + after + after_down:
            if t.s.started > killed_at:
                assert t.ok, "a request sent after the kill failed: " + t.describe()
        for t in load:
            assert t.upstreams == [home[t.s.key]], "a survivor's conversation moved: " + t.describe()
        for t in after:
            assert t.upstreams[-1] != victim_addr, t.describe()
        for t in after_down:
            assert victim_addr not in t.upstreams, "tried the replica marked down: " + t.describe()
            assert t.upstreams[0] == home[t.s.key] or home[t.s.key] == victim_addr, t.describe()
        figures.update({
            "survivor_requests": len(load), "survivor_failures": sum(not t.ok for t in load),
            "victim_in_flight": len(in_flight), "cut_cleanly": len(cut),
            "cut_errors": sorted({t.problem for t in cut}),
            "queued_on_victim": "retried on %s" % queued.headers.get("x-upstream") if queued_turn.ok else
            queued_turn.problem,
            "queued_stream_on_victim": "ok" if queued_stream_turn.ok else queued_stream_turn.problem,
            "running_plain_on_victim": "upstreams %s" % plain_turn.upstreams,
            "after_kill_ok": sum(t.ok for t in after + after_down), "marked_down_s": round(marked_down, 2),
            "back_on_restarted": len(back), "cached_after_restart": sum(t.cached or 0 for t in back)})
        return figures


def case_drain():
    with start_fleet("drain") as fleet:
        convs, home = make_conversations(fleet)
        for c in convs:  # one turn each, so each conversation has history on its replica
            t = c.turn(fleet.port, 8)
            assert t.ok, t.describe()
        victim = fleet.replicas[0]
        victim_addr = "%s:%d" % (fl.HOST, victim.port)
        victims = [c for c in convs if home[c.key] == victim_addr]
        streams = []
        for c in victims:
            body = {"messages": list(c.messages), "max_tokens": DRAIN_TOKENS, "temperature": 0,
                    "logit_bias": fl.NO_EOS, "stream": True}
            s = fl.Stream(fleet.port, "/v1/chat/completions", body, headers={"X-Session-Id": c.key})
            s.key, s.started = c.key, time.monotonic()
            streams.append(s)
            s.start()
        replicas.wait_for(lambda: all(s.first_content.is_set() or s.error for s in streams), 60,
                          "the streams on the draining replica to start")
        victim.signal()  # SIGTERM: drain
        health = []

        def health_changed():  # the first answer that is not 200 must be a 503, not a closed port
            try:
                status, body = fl.http_get(victim.port, "/health", timeout=5)
                health.append((status, json.loads(body).get("status")))
            except (OSError, fl.ProtocolError) as e:
                health.append((None, str(e)))
            return health[-1][0] != 200

        replicas.wait_for(health_changed, 30, "the draining replica's /health to change")
        assert health[-1] == (503, "shutting_down"), "/health of a draining replica: %r" % (health[-1],)
        # While it drains, new turns of its conversations: a 503 from it makes nginx try the next.
        during = []
        run_parallel([lambda c=c: during.append(c.turn(fleet.port, 8)) for c in victims], 60)
        # Its /health says 503 while it drains, so the supervisor takes it out while its streams
        # still run (reported, not asserted: that is a race, if a lopsided one).
        replicas.wait_for(lambda: not fleet.supervisor.healthy[victim_addr] or victim.proc.poll() is not None, 30,
                          "the supervisor to mark the draining replica down")
        still_streaming = sum(not s.complete for s in streams)
        for s in streams:
            s.join(60)
        code = victim.wait(60)
        assert code == 0, "the drained replica exited with %r" % code
        after = []
        run_parallel([lambda c=c: after.append(c.turn(fleet.port, 8)) for c in convs], 60)
        for s in streams:
            t = Turn(s)
            assert t.ok, "a stream on the draining replica: " + t.describe()
            assert fl.check_stream(s.events, True, 1, DRAIN_TOKENS)["finish"] == ["length"], t.describe()
        for t in during + after:
            assert t.ok, "a request during/after the drain: " + t.describe()
            assert t.upstreams[-1] != victim_addr, t.describe()
        return {"drained_streams": len(streams), "streaming_when_marked_down": still_streaming,
                "during_drain": len(during),
                "retried_past_503": sum(len(t.upstreams) > 1 for t in during), "after_ok": len(after)}


def cleaned_up(case):
    """The case; its fleet's directory is removed when it passes."""
    def run():
        figures = case()
        while _workdirs:
            shutil.rmtree(_workdirs.pop(), ignore_errors=True)
        return figures
    return run


args_ = None


def set_args(a):
    global args_
    args_ = a


if __name__ == "__main__":
    if not replicas.find_nginx():
        print("scaleout: nginx not found (apt-get install nginx); skipped")
        sys.exit(replicas.SKIP)
    fl.run_cases("scaleout", {"kill": cleaned_up(case_kill), "drain": cleaned_up(case_drain)},
                 "replicas behind nginx: affinity, SIGKILL mid-load, drain", set_args)
