#!/usr/bin/env node
// Load generator for `tandem serve` (or any OpenAI-compatible server): at each
// concurrency level, C clients each send R streaming requests back to back, and we
// measure time to first token, inter-token latency and aggregate throughput.
//
//   node bench/load/load.mjs --url http://127.0.0.1:8080 --api-key KEY \
//        [--concurrency 1,4,8,16] [--requests 4] [--max-tokens 128] [--prompt-words 64] \
//        [--endpoint completions|chat] [--ban-tokens 0,2] [--warmup 1] [--json out.json]
//
// Definitions (per request, client-side clock, streaming with include_usage):
//   TTFT   send → first chunk with text
//   ITL    gap between consecutive text chunks (one chunk is usually one token)
//   TPOT   (last text chunk − first text chunk) / (completion_tokens − 1)
// Per level:
//   aggregate throughput  Σ completion_tokens / wall time of the level (first send → last end),
//                         prefill and queueing included
//   decode throughput     Σ (completion_tokens − 1) / length of the union of the requests' decode
//                         intervals [first text chunk, last text chunk]: tokens per second while
//                         anything is decoding (time when only prefill runs is left out)
//   steady throughput     tokens per second while the most requests of the level decode at once
//                         (C, or the server's parallel limit when C exceeds it): the intervals
//                         where that many [first, last] spans overlap, counting each request's
//                         chunks in them scaled by its tokens per chunk — the batched decode rate,
//                         with neither prefill nor a straggling last request in it
//   × c=1                 a level's figure over the c=1 figure of the same run
// --repeat N cycles through all levels N times (1,4,8,16,1,4,8,16,...) so that slow drifts of a
// shared machine hit every level alike; the table gives per-level medians and pooled percentiles.
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

let OpenAI;
try {
  OpenAI = createRequire(import.meta.url)('openai').OpenAI;
} catch {
  console.error("bench/load: run 'npm ci --prefix bench/load' first (pins the openai client).");
  process.exit(2);
}

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.TANDEM_URL || 'http://127.0.0.1:8080' },
    'api-key': { type: 'string', default: process.env.TANDEM_API_KEY || 'none' },
    model: { type: 'string' },
    concurrency: { type: 'string', default: '1,4,8,16' },
    requests: { type: 'string', default: '4' }, // per client, per level
    'max-tokens': { type: 'string', default: '128' },
    'prompt-words': { type: 'string', default: '64' },
    endpoint: { type: 'string', default: 'completions' },
    'ban-tokens': { type: 'string', default: '' }, // logit_bias -100: e.g. the eos ids, so every request runs to max-tokens
    warmup: { type: 'string', default: '1' },
    temperature: { type: 'string', default: '0' },
    json: { type: 'string' },
    label: { type: 'string', default: '' },
    repeat: { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (opt.help) {
  console.log(
    'usage: node bench/load/load.mjs --url URL [--api-key K] [--model ID] [--concurrency 1,4,8,16]\n' +
      '       [--requests R per client] [--max-tokens N] [--prompt-words W] [--endpoint completions|chat]\n' +
      '       [--ban-tokens ID,ID] [--temperature T] [--warmup N] [--repeat N] [--json FILE] [--label TEXT]',
  );
  process.exit(0);
}

const levels = opt.concurrency.split(',').map(Number);
const perClient = Number(opt.requests);
const maxTokens = Number(opt['max-tokens']);
const client = new OpenAI({ baseURL: `${opt.url.replace(/\/$/, '')}/v1`, apiKey: opt['api-key'], maxRetries: 0, timeout: 600000 });
const model = opt.model || (await client.models.list()).data[0].id;
const logitBias = Object.fromEntries(
  opt['ban-tokens']
    .split(',')
    .filter(Boolean)
    .map((id) => [id, -100]),
);

// Distinct prompts of about the same length (words from a fixed list, rotated per request).
const WORDS = (
  'the sea was calm and the ship rode at anchor while the crew slept below deck and the captain ' +
  'watched the stars turn slowly over the harbour lights of the old town by the water'
).split(' ');
function prompt(i) {
  const out = [];
  for (let k = 0; k < Number(opt['prompt-words']); ++k) out.push(WORDS[(k * 7 + i * 13) % WORDS.length]);
  return `Request ${i}: ${out.join(' ')}.`;
}

const now = () => performance.now();

async function one(i) {
  const body = {
    model,
    max_tokens: maxTokens,
    temperature: Number(opt.temperature),
    seed: i,
    stream: true,
    stream_options: { include_usage: true },
    ...(Object.keys(logitBias).length ? { logit_bias: logitBias } : {}),
  };
  const t0 = now();
  const stream =
    opt.endpoint === 'chat'
      ? await client.chat.completions.create({ ...body, messages: [{ role: 'user', content: prompt(i) }] })
      : await client.completions.create({ ...body, prompt: prompt(i) });
  const times = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    const text = c ? (opt.endpoint === 'chat' ? c.delta?.content : c.text) : '';
    if (text) times.push(now());
  }
  const end = now();
  const tokens = usage?.completion_tokens ?? times.length;
  return {
    t0,
    end,
    first: times[0],
    last: times.at(-1),
    ttft: times.length ? times[0] - t0 : NaN,
    gaps: times.slice(1).map((t, k) => t - times[k]),
    times,
    tpot: tokens > 1 && times.length > 1 ? (times.at(-1) - times[0]) / (tokens - 1) : NaN,
    tokens,
    prompt: usage?.prompt_tokens ?? 0,
  };
}

function pct(xs, p) {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

// Length of the union of [a, b] intervals.
function unionLength(intervals) {
  const s = intervals.filter(([a, b]) => Number.isFinite(a) && b > a).sort((x, y) => x[0] - y[0]);
  let total = 0;
  let cur = null;
  for (const [a, b] of s) {
    if (!cur || a > cur[1]) {
      if (cur) total += cur[1] - cur[0];
      cur = [a, b];
    } else cur[1] = Math.max(cur[1], b);
  }
  if (cur) total += cur[1] - cur[0];
  return total;
}

// Tokens per second inside the intervals where the most decode spans overlap (at most `c`):
// sweep the span ends, keep the stretches at that occupancy, count each request's chunks that
// land in them (scaled by the request's tokens per chunk, 1 unless the server sends several).
function steadyRate(all, c) {
  const events = all
    .filter((r) => Number.isFinite(r.first) && r.last > r.first)
    .flatMap((r) => [
      [r.first, 1],
      [r.last, -1],
    ])
    .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let active = 0;
  let peak = 0;
  for (const [, d] of events) peak = Math.max(peak, (active += d));
  c = Math.min(c, peak);
  const full = [];
  active = 0;
  for (const [t, d] of events) {
    if (active === c && d < 0) full.at(-1)[1] = t;
    active += d;
    if (active === c && d > 0) full.push([t, t]);
  }
  const span = full.reduce((a, [x, y]) => a + (y - x), 0);
  if (span <= 0) return { rate: NaN, span: 0, width: c };
  let tokens = 0;
  for (const r of all) {
    if (r.times.length < 2) continue;
    const perChunk = (r.tokens - 1) / (r.times.length - 1);
    // A chunk counts for the gap that ends with it.
    for (let k = 1; k < r.times.length; ++k) {
      const t = r.times[k];
      if (full.some(([x, y]) => t > x && t <= y)) tokens += perChunk;
    }
  }
  return { rate: tokens / (span / 1000), span: span / 1000, width: c };
}

async function level(c, offset) {
  const start = now();
  const results = await Promise.all(
    Array.from({ length: c }, async (_, w) => {
      const mine = [];
      for (let r = 0; r < perClient; ++r) mine.push(await one(offset + w * perClient + r));
      return mine;
    }),
  );
  const wall = (now() - start) / 1000;
  const all = results.flat();
  const tokens = all.reduce((a, r) => a + r.tokens, 0);
  const decodeTokens = all.reduce((a, r) => a + Math.max(0, r.tokens - 1), 0);
  const decodeSpan = unionLength(all.map((r) => [r.first, r.last])) / 1000;
  const steady = steadyRate(all, c);
  return {
    concurrency: c,
    requests: all.length,
    prompt_tokens_mean: mean(all.map((r) => r.prompt)),
    completion_tokens: tokens,
    wall_s: wall,
    aggregate_tok_s: tokens / wall,
    decode_tok_s: decodeTokens / decodeSpan,
    steady_tok_s: steady.rate,
    steady_s: steady.span,
    steady_width: steady.width,
    ttfts: all.map((r) => r.ttft),
    gaps: all.flatMap((r) => r.gaps),
    tpots: all.map((r) => r.tpot),
  };
}

const median = (xs) => pct(xs, 50);

const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : '–');
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');

console.error(`load: ${opt.url} model=${model} endpoint=${opt.endpoint} levels=${levels} requests/client=${perClient} max_tokens=${maxTokens}`);
for (let w = 0; w < Number(opt.warmup); ++w) await one(1e6 + w);
const runs = [];
let offset = 0;
for (let rep = 0; rep < Number(opt.repeat); ++rep) {
  for (const c of levels) {
    const r = await level(c, offset);
    offset += c * perClient;
    r.repeat = rep;
    runs.push(r);
    console.error(
      `  [${rep}] c=${c}: ${r.completion_tokens} tokens in ${f2(r.wall_s)} s → ${f1(r.aggregate_tok_s)} tok/s aggregate, ` +
        `${f1(r.decode_tok_s)} tok/s decode, ${f1(r.steady_tok_s)} tok/s steady (${r.steady_width} decoding, ${f2(r.steady_s)} s), TTFT p50 ${f1(pct(r.ttfts, 50))} ms, ITL p50 ${f1(pct(r.gaps, 50))} ms`,
    );
  }
}
const rows = levels.map((c) => {
  const mine = runs.filter((r) => r.concurrency === c);
  const ttfts = mine.flatMap((r) => r.ttfts);
  const gaps = mine.flatMap((r) => r.gaps);
  const tpots = mine.flatMap((r) => r.tpots);
  return {
    concurrency: c,
    requests: mine.reduce((a, r) => a + r.requests, 0),
    completion_tokens: mine.reduce((a, r) => a + r.completion_tokens, 0),
    prompt_tokens_mean: mean(mine.map((r) => r.prompt_tokens_mean)),
    aggregate_tok_s: median(mine.map((r) => r.aggregate_tok_s)),
    decode_tok_s: median(mine.map((r) => r.decode_tok_s)),
    aggregate_tok_s_each: mine.map((r) => r.aggregate_tok_s),
    decode_tok_s_each: mine.map((r) => r.decode_tok_s),
    steady_tok_s: median(mine.map((r) => r.steady_tok_s)),
    steady_tok_s_each: mine.map((r) => r.steady_tok_s),
    ttft_ms: { p50: pct(ttfts, 50), p90: pct(ttfts, 90), p99: pct(ttfts, 99) },
    itl_ms: { p50: pct(gaps, 50), p90: pct(gaps, 90), p99: pct(gaps, 99) },
    tpot_ms: { p50: pct(tpots, 50), p90: pct(tpots, 90) },
  };
});
const base = rows.find((r) => r.concurrency === 1);
for (const r of rows) {
  r.aggregate_x = base ? r.aggregate_tok_s / base.aggregate_tok_s : NaN;
  r.decode_x = base ? r.decode_tok_s / base.decode_tok_s : NaN;
  r.steady_x = base ? r.steady_tok_s / base.steady_tok_s : NaN;
}
console.log(
  '| concurrency | requests | tokens | aggregate tok/s | × c=1 | decode tok/s | × c=1 | steady tok/s | × c=1 | TTFT p50 / p90 / p99 ms | ITL p50 / p90 / p99 ms | TPOT p50 ms |',
);
console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |');
for (const r of rows) {
  console.log(
    `| ${r.concurrency} | ${r.requests} | ${r.completion_tokens} | ${f1(r.aggregate_tok_s)} | ${f2(r.aggregate_x)} | ` +
      `${f1(r.decode_tok_s)} | ${f2(r.decode_x)} | ${f1(r.steady_tok_s)} | ${f2(r.steady_x)} | ${f1(r.ttft_ms.p50)} / ${f1(r.ttft_ms.p90)} / ${f1(r.ttft_ms.p99)} | ` +
      `${f1(r.itl_ms.p50)} / ${f1(r.itl_ms.p90)} / ${f1(r.itl_ms.p99)} | ${f1(r.tpot_ms.p50)} |`,
  );
}
if (opt.json) {
  const { writeFileSync } = await import('node:fs');
  const slim = runs.map(({ ttfts, gaps, tpots, times, ...rest }) => rest);
  writeFileSync(opt.json, JSON.stringify({ label: opt.label, url: opt.url, model, options: opt, rows, runs: slim }, null, 2));
}
