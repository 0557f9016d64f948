#!/usr/bin/env python3
"""Load generator for `tandem serve`, Python standard library only (for machines
without node, e.g. the lent GPU machine; load.mjs is the node/openai-client one).

C clients each send one streaming /v1/completions request at once; prompts are
token-id lists (so any tokenizer works and the prompt length is exact), every
request gets a different prompt and runs to --max-tokens (--ignore-eos: the request's
ignore_eos, vLLM's meaning, so a greedy request stays plain greedy; --ban-tokens: logit_bias
-100, normally the eos ids). Per level it prints, on the client's clock:

  ttft_ms      send -> first chunk with a token (median, max)
  aggregate    sum of completion tokens / wall time of the level (prefill included)
  steady       tokens/s while all C requests decode at once: the chunks that arrive in
               [last first-token, first last-token] over that window's length (the
               batched decode rate, without prefill or a straggler's tail)
  tpot_ms      median per-request (last - first chunk) / (tokens - 1)

  python3 bench/load/load.py --url http://127.0.0.1:8080 --concurrency 1,8,64 \\
      --max-tokens 128 --prompt-tokens 32 --ban-tokens 128001,128008,128009 --repeat 2
  --prompt-tokens 2048 --max-tokens 1 --concurrency 1: the TTFT of a long prompt alone.
  --per-client 8 --max-tokens-min 16: closed-loop clients whose requests end at different
  steps, so the batch changes every few steps (steady is then not computed).
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def one_request(url, body, out):
    # A thread's exception would leave `out` empty and the level's summary would fail far from
    # the cause (seen once at c=64): every failure becomes the request's error instead.
    try:
        request_stream(url, body, out)
    except Exception as e:  # noqa: BLE001 - reported with the level
        out.update(error=f"{type(e).__name__}: {e}")
    if "error" not in out and not out.get("chunks"):
        out.update(error="the stream carried no token")


def request_stream(url, body, out):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    sent = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        out.update(error=f"HTTP {resp.status}: {resp.read()[:300]!r}")
        return
    chunks, tokens = [], None
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        msg = json.loads(data)
        if msg.get("usage"):
            tokens = msg["usage"]["completion_tokens"]
        if msg.get("choices") and msg["choices"][0].get("text") is not None:
            chunks.append(time.perf_counter())
    conn.close()
    out.update(sent=sent, chunks=chunks, tokens=tokens if tokens is not None else len(chunks))


def client_loop(url, bodies, outs):
    for body, out in zip(bodies, outs):
        one_request(url, body, out)


def run_level(args, c, level_index):
    # Each of the c clients sends --per-client requests back to back (closed loop); with
    # --max-tokens-min each request's max_tokens is drawn in [min, --max-tokens] from its seed,
    # so requests join and leave the batch at every few steps instead of all at once.
    per = args.per_client
    results = [dict() for _ in range(c * per)]
    threads = []
    for i in range(c):
        bodies = []
        for j in range(per):
            seed = level_index * 100003 + i * 1009 + j
            prompt = [args.token_base + (seed * 7919 + p * 104729) % args.token_span
                      for p in range(args.prompt_tokens)]
            max_tokens = args.max_tokens
            if args.max_tokens_min:
                max_tokens = args.max_tokens_min + (seed * 2654435761) % (args.max_tokens - args.max_tokens_min + 1)
            body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": args.temperature,
                    "seed": seed, "stream": True, "stream_options": {"include_usage": True}}
            if args.model:
                body["model"] = args.model
            if args.ignore_eos:
                body["ignore_eos"] = True
            if args.ban:
                body["logit_bias"] = {str(t): -100 for t in args.ban}
            bodies.append(body)
        threads.append(threading.Thread(target=client_loop,
                                        args=(args.url, bodies, results[i * per:(i + 1) * per])))
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        return {"concurrency": c, "errors": errors[:3], "failed": len(errors)}
    ttft = [(r["chunks"][0] - r["sent"]) * 1000 for r in results if r["chunks"]]
    total = sum(r["tokens"] for r in results)
    tpot = [(r["chunks"][-1] - r["chunks"][0]) * 1000 / (r["tokens"] - 1) for r in results
            if len(r["chunks"]) > 1 and r["tokens"] > 1]
    lo = max(r["chunks"][0] for r in results)
    hi = min(r["chunks"][-1] for r in results)
    steady = None
    if hi > lo and per == 1:
        n = sum(sum(1 for t in r["chunks"] if lo <= t <= hi) * r["tokens"] / len(r["chunks"]) for r in results)
        steady = n / (hi - lo)
    return {"concurrency": c, "wall_s": wall, "tokens": total, "aggregate_tok_s": total / wall,
            "steady_tok_s": steady, "ttft_ms_median": statistics.median(ttft), "ttft_ms_max": max(ttft),
            "tpot_ms_median": statistics.median(tpot) if tpot else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--max-tokens-min", type=int, default=0,
                    help="draw each request's max_tokens in [this, --max-tokens] (0: all --max-tokens)")
    ap.add_argument("--per-client", type=int, default=1, help="requests each client sends back to back")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--token-base", type=int, default=1000, help="prompt ids are in [base, base + span)")
    ap.add_argument("--token-span", type=int, default=100000)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--ban-tokens", default="")
    ap.add_argument("--ignore-eos", action="store_true", help="send ignore_eos: true (run to --max-tokens)")
    ap.add_argument("--warmup", type=int, default=1, help="requests before the first level")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.ban = [int(t) for t in args.ban_tokens.split(",") if t]
    levels = [int(c) for c in args.concurrency.split(",")]
    for w in range(args.warmup):
        run_level(args, 1, 10_000 + w)
    rows = []
    for rep in range(args.repeat):
        for j, c in enumerate(levels):
            r = run_level(args, c, rep * len(levels) + j + 1)
            r.update(label=args.label, repeat=rep)
            rows.append(r)
            if "errors" in r:
                print(f"{args.label} c={c}: {r['failed']} of {c} requests failed, e.g. {r['errors']}", flush=True)
                continue
            steady = f"{r['steady_tok_s']:.1f}" if r["steady_tok_s"] else "-"
            tpot = f"{r['tpot_ms_median']:.2f}" if r["tpot_ms_median"] else "-"
            print(f"{args.label} c={c} rep={rep}: aggregate {r['aggregate_tok_s']:.1f} tok/s, steady {steady} "
                  f"tok/s, ttft median {r['ttft_ms_median']:.1f} ms (max {r['ttft_ms_max']:.1f}), "
                  f"tpot {tpot} ms, {r['tokens']} tokens in {r['wall_s']:.2f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
