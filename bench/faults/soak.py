#!/usr/bin/env python3
"""Soak `tandem serve` with abusive streaming clients, then check that it is still whole.

For each configuration (`--configs`, default `draft,plain`: the bundled target with the
bundled draft model, then the target alone) it starts its own `tandem serve` on a free
loopback port (127.0.0.1 only) and runs `--streams` client threads for `--seconds`. Each
client loops (bounded in time and in count) over random requests:

- /v1/chat/completions and /v1/completions, mostly `stream: true`, some not; mixed
  max_tokens, temperatures, seeds, top_p, n=2, logprobs, stop strings, EOS suppressed or
  not, short and long prompts, keep-alive reuse or a fresh connection;
- a random fraction (`--disconnect`) drop the connection at a random moment: right after
  sending, after the response headers, after k events, in the middle of a chunk, or after
  a pause without reading; by FIN or by TCP reset;
- a few canaries (a fixed seeded request whose text must be the same every time, whatever
  else runs) and a few junk requests (broken JSON, bad fields, truncated bodies, garbage
  request lines, over-long requests) that must get their 400 or a closed connection.

Checks (every one a violation, exit 1): each request that was not dropped gets HTTP 200 and
a well-formed complete stream (chunked framing, `data:` events, one finish_reason per
choice, usage when asked, `data: [DONE]` last) or a complete JSON body; no HTTP error, no
socket error or timeout; canaries identical; /metrics and /health (polled every second
during the load) answer within `--observe-timeout`; afterwards /metrics shows
`tandem:num_requests_running` and `tandem:num_requests_waiting` at 0 and
`tandem:kv_cache_blocks_used` at 0 (`tandem:kv_cache_usage_perc` 0), no
`tandem:request_failure_total`; the server's VmRSS after the load is within
`--rss-tolerance` (+ `--rss-slack-mb`) of its value at the end of the warm-up; the server
is alive at the end and exits 0 on SIGTERM.

Prints a summary (and writes it as JSON with `--json`). Example (the full soak):
  python3 bench/faults/soak.py --seconds 600 --streams 64 --configs draft
"""

import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib as fl  # noqa: E402

PROMPTS = [
    "The sea was calm and the ship",
    "Call me Ishmael. Some years ago, never mind how long precisely,",
    "Fellow citizens, the",
    "It was a dark night upon the water, and",
    "The captain stood upon the deck and",
    "In the course of human events",
    "Whale",
    "The harbour lay",
]
LONG_SENTENCE = "The whale and the ship and the sea, and the men who sailed upon them. "
CHATS = [
    "Tell me about the whale and the sea.",
    "Hello",
    "What did the captain say to the crew?",
    "Write about a storm.",
]
CANARIES = {
    "canary-completion": ("/v1/completions", {"prompt": "The old sailor looked at the sea and", "max_tokens": 40,
                                              "temperature": 0.8, "seed": 4242, "logit_bias": fl.NO_EOS}),
    "canary-chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me of the whale."}],
                                            "max_tokens": 40, "temperature": 0.0, "logit_bias": fl.NO_EOS}),
}


class Tally:
    """Counters shared by the client threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}
        self.violations = []
        self.violation_count = 0
        self.canary_text = {}
        self.completion_tokens = 0

    def add(self, key, n=1):
        with self.lock:
            self.c[key] = self.c.get(key, 0) + n

    def violation(self, what):
        with self.lock:
            self.violation_count += 1
            if len(self.violations) < 30:
                self.violations.append(what)


def make_request(rng, args):
    """(path, body, chat, stream, plan) for one random request."""
    if rng.random() < args.canary:
        name = rng.choice(sorted(CANARIES))
        path, body = CANARIES[name]
        body = dict(body, stream=True, stream_options={"include_usage": True})
        return path, body, path.endswith("chat/completions"), True, {"canary": name}
    chat = rng.random() < 0.5
    body = {"max_tokens": rng.choice([1, 2, 4, 8, 16, 16, 32, 32, 64, 64, 128, 256])}
    if chat:
        body["messages"] = [{"role": "user", "content": rng.choice(CHATS)}]
    elif rng.random() < 0.15:
        body["prompt"] = LONG_SENTENCE * rng.randint(10, 60)
    else:
        body["prompt"] = rng.choice(PROMPTS)
    body["temperature"] = rng.choice([0.0, 0.0, 0.5, 0.8, 1.0, 1.3])
    if rng.random() < 0.6:
        body["seed"] = rng.randrange(1 << 31)
    if rng.random() < 0.2:
        body["top_p"] = 0.9
    if rng.random() < 0.1:
        body["n"] = 2
    if rng.random() < 0.4:
        body["logit_bias"] = fl.NO_EOS
    if rng.random() < 0.1:
        body["stop"] = [rng.choice([".", "\n", " the"])]
    if rng.random() < 0.1:
        if chat:
            body["logprobs"], body["top_logprobs"] = True, 2
        else:
            body["logprobs"] = 2
    stream = rng.random() >= args.nonstream
    if stream:
        body["stream"] = True
        if rng.random() < 0.7:
            body["stream_options"] = {"include_usage": True}
    plan = {}
    if rng.random() < args.disconnect:
        plan["drop"] = rng.choices(["after_send", "after_headers", "after_events", "mid_chunk", "pause"],
                                   [0.15, 0.1, 0.5, 0.1, 0.15])[0]
        if not stream and plan["drop"] in ("after_headers", "after_events", "mid_chunk"):
            plan["drop"] = "pause"
        plan["rst"] = rng.random() < 0.5
        plan["events"] = rng.randint(1, max(1, body["max_tokens"]))
        plan["bytes"] = rng.randint(1, 3000)
        plan["pause"] = rng.uniform(0.0, 2.0)
    return "/v1/chat/completions" if chat else "/v1/completions", body, chat, stream, plan


JUNK = ["bad_json", "bad_field", "too_long", "truncated_body", "garbage", "slow_headers"]


def run_junk(conn, rng, tally):
    kind = rng.choice(JUNK)
    tally.add("junk")
    tally.add("junk." + kind)
    if kind in ("bad_json", "bad_field", "too_long"):
        body = {
            "bad_json": b'{"messages": [{"role": "user", "content": "x"',
            "bad_field": json.dumps({"prompt": "The sea", "max_tokens": -5}).encode(),
            "too_long": json.dumps({"prompt": "The sea", "max_tokens": 1000000}).encode(),
        }[kind]
        conn.send_request("POST", "/v1/completions", body)
        status, headers = conn.read_head()
        reply = conn.read_body(headers)
        try:
            err = json.loads(reply)["error"]
            ok = status == 400 and isinstance(err.get("message"), str)
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            tally.violation("junk %s: expected a 400 OpenAI error, got %d %r" % (kind, status, reply[:200]))
        return True  # the connection stays usable
    if kind == "truncated_body":
        conn.send_raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 500\r\n\r\n{\"prompt\": \"The")
    elif kind == "garbage":
        conn.send_raw(bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) + b"\r\n\r\n")
        try:  # a 400 or a closed connection are both fine; a 5xx is not
            status, _ = conn.read_head()
            if status >= 500:
                tally.violation("junk garbage: HTTP %d" % status)
        except (fl.ProtocolError, OSError):
            pass
    else:  # slow_headers: half a request line, a pause, gone
        conn.send_raw(b"POST /v1/chat/completions HT")
        time.sleep(rng.uniform(0.0, 1.0))
    conn.abort(rst=rng.random() < 0.5)
    return False


def run_one(port, rng, args, tally, conn):
    """One request on `conn` (or a new connection). Returns the connection to reuse, or None."""
    if conn is None:
        conn = fl.Conn(port, args.request_timeout)
    if rng.random() < args.junk:
        return conn if run_junk(conn, rng, tally) else None
    path, body, chat, stream, plan = make_request(rng, args)
    tally.add("requests")
    tally.add("stream" if stream else "nonstream")
    drop = plan.get("drop")
    conn.send_request("POST", path, body)
    if drop == "after_send":
        conn.abort(plan["rst"])
        tally.add("dropped")
        return None
    if drop == "pause":
        time.sleep(plan["pause"])
        conn.abort(plan["rst"])
        tally.add("dropped")
        return None
    status, headers = conn.read_head()
    if status != 200:
        tally.violation("HTTP %d on %s %s: %r" % (status, path, json.dumps(body)[:200], conn.read_body(headers)[:300]))
        tally.add("http_errors")
        return None
    n = body.get("n", 1)
    if not stream:
        result = fl.check_completion_body(conn.read_body(headers), chat, n, body["max_tokens"])
        tally.add("completed")
        with tally.lock:
            tally.completion_tokens += result["usage"]["completion_tokens"]
        return conn if rng.random() < 0.5 else (conn.close() or None)
    if not headers.get("content-type", "").startswith("text/event-stream"):
        raise fl.ProtocolError("stream content-type %r" % headers.get("content-type"))
    if drop == "after_headers":
        conn.abort(plan["rst"])
        tally.add("dropped")
        return None
    if drop == "mid_chunk":
        conn.read_some_raw(plan["bytes"])
        conn.abort(plan["rst"])
        tally.add("dropped")
        return None
    events = []
    for data in conn.sse_events(headers):
        events.append(data)
        if drop == "after_events" and len(events) >= plan["events"]:
            conn.abort(plan["rst"])
            tally.add("dropped")
            return None
    include_usage = bool(body.get("stream_options", {}).get("include_usage"))
    result = fl.check_stream(events, chat, n, body["max_tokens"], include_usage)
    tally.add("completed")
    if result["usage"]:
        with tally.lock:
            tally.completion_tokens += result["usage"]["completion_tokens"]
    if "canary" in plan:
        name = plan["canary"]
        with tally.lock:
            first = tally.canary_text.setdefault(name, result["texts"][0])
        tally.add("canaries")
        if result["texts"][0] != first:
            tally.violation("%s: text differs from the first one: %r vs %r" % (name, result["texts"][0][:80], first[:80]))
    return conn if rng.random() < 0.5 else (conn.close() or None)


def client(idx, port, args, tally, deadline):
    rng = random.Random(args.seed * 1000003 + idx)
    conn = None
    for _ in range(args.max_requests_per_client):
        if time.monotonic() >= deadline:
            break
        try:
            conn = run_one(port, rng, args, tally, conn)
        except Exception as e:  # noqa: BLE001 - any client-side failure is a finding
            tally.violation("client %d: %s: %s" % (idx, type(e).__name__, e))
            tally.add("client_errors")
            if conn:
                conn.abort()
            conn = None
    if conn:
        conn.close()


def wait_idle(server, timeout):
    deadline = time.monotonic() + timeout
    m = {}
    while time.monotonic() < deadline:
        m = server.metrics()
        if (m.get("tandem:num_requests_running") == 0 and m.get("tandem:num_requests_waiting") == 0
                and m.get("tandem:kv_cache_blocks_used") == 0):
            return True, m
        time.sleep(0.2)
    return False, m


def slope_kb_per_min(samples, t_from):
    pts = [(t, v) for t, v in samples if t >= t_from and v is not None]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return 60.0 * sum((t - mt) * (v - mv) for t, v in pts) / den if den else None


def soak(config, args):
    root = fl.repo_root()
    target = os.path.join(root, "models", "tandem-target")
    drafter = {"draft": os.path.join(root, "models", "tandem-draft"),
               "mtp": os.path.join(root, "models", "tandem-mtp"), "plain": None}[config]
    cache = fl.temp_cache("tandem-soak-cache-")
    log_path = os.path.join(args.log_dir, "soak-%s.log" % config) if args.log_dir else None
    server = fl.Server(args.tandem, fl.tandem_args(target, drafter, args.threads, args.parallel),
                       env=fl.isolated_env(cache), log_path=log_path)
    tally = Tally()
    summary = {"config": config, "streams": args.streams, "seconds": args.seconds, "parallel": args.parallel,
               "threads": args.threads, "disconnect_fraction": args.disconnect, "command": server.cmd}
    try:
        m0 = server.metrics()
        rss = []  # (seconds since start, kB)
        t_start = time.monotonic()
        sampling = threading.Event()

        maps = {}  # smaps snapshots: where the resident memory is, at the end of the warm-up and at the end

        def sample_rss():
            while not sampling.is_set():
                t = time.monotonic() - t_start
                rss.append((t, server.rss_kb()))
                if t >= args.warmup and "warm" not in maps:
                    maps["warm"] = server.smaps()
                    if args.malloc_stats:
                        maps["malloc_warm"] = server.malloc_stats()
                sampling.wait(args.rss_interval)

        observed = {"latency": [], "running": [], "waiting": [], "failed": 0}

        def observe():  # the server must stay observable under load: /health and /metrics answer promptly
            while not sampling.is_set():
                t0 = time.monotonic()
                try:
                    m = fl.parse_metrics(fl.http_get(server.port, "/metrics", timeout=args.observe_timeout)[1].decode())
                    if fl.http_get(server.port, "/health", timeout=args.observe_timeout)[0] != 200:
                        raise OSError("/health not 200")
                    observed["latency"].append(time.monotonic() - t0)
                    observed["running"].append(m.get("tandem:num_requests_running", 0))
                    observed["waiting"].append(m.get("tandem:num_requests_waiting", 0))
                except (OSError, fl.ProtocolError) as e:
                    observed["failed"] += 1
                    tally.violation("/metrics + /health did not answer within %.0f s under load (%s)" % (
                        args.observe_timeout, type(e).__name__))
                sampling.wait(1.0)

        sampler = threading.Thread(target=sample_rss, daemon=True)
        sampler.start()
        observer = threading.Thread(target=observe, daemon=True)
        observer.start()
        deadline = t_start + args.seconds
        clients = [threading.Thread(target=client, args=(i, server.port, args, tally, deadline), daemon=True)
                   for i in range(args.streams)]
        for t in clients:
            t.start()
        join_by = deadline + args.request_timeout + 30
        for t in clients:
            t.join(max(0.0, join_by - time.monotonic()))
        hung = sum(t.is_alive() for t in clients)
        t_load = time.monotonic() - t_start
        if hung:
            tally.violation("%d client threads still running %.0f s after the deadline" % (hung, join_by - deadline))
        m_load = server.metrics()
        idle, m_idle = wait_idle(server, args.idle_timeout)
        time.sleep(1.0)
        sampling.set()
        sampler.join()
        observer.join(2 * args.observe_timeout + 5)
        rss.append((time.monotonic() - t_start, server.rss_kb()))
        maps["end"] = server.smaps()
        if args.malloc_stats:
            maps["malloc_end"] = server.malloc_stats()
        maps.setdefault("warm", maps["end"])
        alive = server.proc.poll() is None
        if not alive:
            tally.violation("the server died during the soak (exit %s)" % server.proc.returncode)
        if not idle:
            tally.violation("not idle %.0f s after the load: running %s waiting %s kv_blocks_used %s" % (
                args.idle_timeout, m_idle.get("tandem:num_requests_running"),
                m_idle.get("tandem:num_requests_waiting"), m_idle.get("tandem:kv_cache_blocks_used")))
        failures = m_idle.get("tandem:request_failure_total", 0) - m0.get("tandem:request_failure_total", 0)
        if failures:
            tally.violation("tandem:request_failure_total rose by %d" % failures)
        warm = [v for t, v in rss if t >= args.warmup and v is not None]
        base = warm[0] if warm else rss[0][1]
        last = rss[-1][1]
        peak = max(v for _, v in rss if v is not None)
        limit = base * (1 + args.rss_tolerance) + args.rss_slack_mb * 1024
        if last is None or last > limit:
            tally.violation("RSS not flat: %s kB after the load, %d kB after warm-up (limit %d kB)" % (last, base, limit))
        gen = m_load.get("tandem:generation_tokens_total", 0) - m0.get("tandem:generation_tokens_total", 0)
        def delta(key):
            return int(m_idle.get(key, 0) - m0.get(key, 0))
        summary.update({
            "load_seconds": round(t_load, 1),
            "requests": tally.c.get("requests", 0),
            "streamed": tally.c.get("stream", 0),
            "non_streamed": tally.c.get("nonstream", 0),
            "completed": tally.c.get("completed", 0),
            "dropped_by_client": tally.c.get("dropped", 0),
            "canaries_identical": tally.c.get("canaries", 0),
            "junk_requests": tally.c.get("junk", 0),
            "http_errors": tally.c.get("http_errors", 0),
            "client_errors": tally.c.get("client_errors", 0),
            "violations": tally.violation_count,
            "client_completion_tokens": tally.completion_tokens,
            "server_generated_tokens": int(gen),
            "server_tokens_per_second": round(gen / t_load, 1) if t_load > 0 else 0,
            "server_requests_received": delta("tandem:requests_received_total"),
            "server_finished": {r: delta('tandem:request_success_total{finished_reason="%s"}' % r)
                                for r in ("stop", "length", "abort")},
            "server_failures": int(failures),
            "server_spec_rounds": delta("tandem:spec_decode_num_drafts_total"),
            "server_spec_accepted_of_drafted": [delta("tandem:spec_decode_num_accepted_tokens_total"),
                                                delta("tandem:spec_decode_num_draft_tokens_total")],
            "kv_at_end": {"blocks_used": m_idle.get("tandem:kv_cache_blocks_used"),
                          "usage_perc": m_idle.get("tandem:kv_cache_usage_perc"),
                          "blocks_total": m_idle.get("tandem:kv_cache_blocks_total"),
                          "prefix_cache_blocks": m_idle.get("tandem:prefix_cache_blocks"),
                          "running": m_idle.get("tandem:num_requests_running"),
                          "waiting": m_idle.get("tandem:num_requests_waiting")},
            "observed_under_load": {"polls": len(observed["latency"]), "failed": observed["failed"],
                                    "latency_s_max": round(max(observed["latency"], default=0), 3),
                                    "running_max": max(observed["running"], default=0),
                                    "waiting_max": max(observed["waiting"], default=0)},
            "rss_kb": {"first": rss[0][1], "after_warmup": base, "last": last, "max": peak,
                       "limit": int(limit), "samples": len(rss),
                       "slope_kb_per_min_after_warmup": (lambda s: round(s, 1) if s is not None else None)(
                           slope_kb_per_min(rss[:-1], args.warmup))},
            "rss_profile_kb": [v for _, v in rss[:: max(1, len(rss) // 10)]],
            "rss_split_after_warmup": fl.smaps_split(maps["warm"]),
            "rss_split_at_end": fl.smaps_split(maps["end"]),
            "rss_growth_top_mappings": fl.smaps_growth(maps["warm"], maps["end"]),
            "malloc_after_warmup": maps.get("malloc_warm"),
            "malloc_at_end": maps.get("malloc_end"),
        })
    finally:
        code, took = server.stop()
        summary["sigterm_exit"] = code
        summary["sigterm_seconds"] = round(took, 2)
        if code != 0:
            tally.violation("SIGTERM after the soak: exit %s after %.1f s" % (code, took))
            summary["violations"] = tally.violation_count
        summary["violation_list"] = tally.violations
        if tally.violations and not log_path:
            summary["server_log_tail"] = server.log()[-3000:]
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tandem", default=os.path.join(fl.repo_root(), "build", "src", "app", "tandem"))
    p.add_argument("--configs", default="draft,plain", help="comma list of draft, plain, mtp (one server each)")
    p.add_argument("--seconds", type=float, default=60.0, help="load duration per configuration")
    p.add_argument("--streams", type=int, default=64, help="concurrent client threads")
    p.add_argument("--parallel", type=int, default=8, help="the server's -np")
    p.add_argument("--threads", type=int, default=1, help="the server's -t")
    p.add_argument("--disconnect", type=float, default=0.3, help="fraction of requests dropped by the client")
    p.add_argument("--nonstream", type=float, default=0.1, help="fraction of requests without stream")
    p.add_argument("--canary", type=float, default=0.04, help="fraction of canary requests")
    p.add_argument("--junk", type=float, default=0.03, help="fraction of junk requests")
    p.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default: 1/5 of --seconds, at most 60)")
    p.add_argument("--rss-tolerance", type=float, default=0.10)
    p.add_argument("--rss-slack-mb", type=float, default=8.0)
    p.add_argument("--rss-interval", type=float, default=1.0)
    p.add_argument("--request-timeout", type=float, default=300.0, help="socket timeout of each read")
    p.add_argument("--observe-timeout", type=float, default=5.0,
                   help="GET /metrics and /health (polled each second during the load) must answer within this")
    p.add_argument("--idle-timeout", type=float, default=30.0, help="how long the server may take to go idle after the load")
    p.add_argument("--malloc-stats", action="store_true",
                   help="diagnostic: glibc malloc totals (system vs in use) after the warm-up and at the end, via gdb")
    p.add_argument("--max-requests-per-client", type=int, default=100000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-dir", default=None, help="write each server's log here")
    p.add_argument("--json", default=None, help="write the summaries here")
    args = p.parse_args()
    if args.warmup is None:
        args.warmup = min(60.0, args.seconds / 5)
    if not os.path.exists(args.tandem):
        sys.exit("soak: %s not found (--tandem)" % args.tandem)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    summaries = []
    for config in [c for c in args.configs.split(",") if c]:
        print("soak: %s: %d streams for %.0f s ..." % (config, args.streams, args.seconds), flush=True)
        s = soak(config, args)
        summaries.append(s)
        print(json.dumps(s, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=1)
    bad = [s for s in summaries if s.get("violations")]
    for s in summaries:
        print("soak: %-5s %s: %d requests, %d completed, %d dropped, %d junk, %d violations, %.1f tok/s, "
              "RSS kB first/after-warm-up/last/max %s/%s/%s/%s, KV blocks used at end %s, SIGTERM exit %s" % (
                  s["config"], "FAIL" if s.get("violations") else "ok", s.get("requests", 0), s.get("completed", 0),
                  s.get("dropped_by_client", 0), s.get("junk_requests", 0), s.get("violations", 0),
                  s.get("server_tokens_per_second", 0), *[s.get("rss_kb", {}).get(k) for k in ("first", "after_warmup", "last", "max")],
                  s.get("kv_at_end", {}).get("blocks_used"), s.get("sigterm_exit")))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
