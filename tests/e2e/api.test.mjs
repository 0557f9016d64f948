// The OpenAI-compatible API of `tandem serve`, driven by the official openai client:
// chat and completions, streaming and not, stop sequences, logprobs, n, seeds, usage,
// /v1/models, /health, API keys, and every error reply.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { API_KEY, MODEL_ID, collectStream, models, startServer, tandemBin } from './harness.mjs';

let server;
let client;

before(async () => {
  server = await startServer({ extra: ['-np', '4'] });
  client = server.client();
});

after(async () => {
  if (server) await server.stop();
});

const CHAT = [{ role: 'user', content: 'Tell me about the whale and the sea.' }];
const PROMPT = 'Call me Ishmael. Some years ago, never mind how long precisely,';

function assertErrorShape(body, status) {
  assert.ok(body && body.error, `expected an OpenAI error body, got ${JSON.stringify(body)}`);
  for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in body.error, `error.${k} missing`);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.equal(typeof body.error.type, 'string');
  if (status) assert.ok(body.error.code !== undefined);
}

function assertUsage(usage, completionTokens) {
  assert.ok(usage, 'usage missing');
  assert.ok(usage.prompt_tokens > 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  if (completionTokens !== undefined) assert.equal(usage.completion_tokens, completionTokens);
  assert.equal(typeof usage.completion_tokens_details?.accepted_prediction_tokens, 'number');
  assert.equal(typeof usage.completion_tokens_details?.rejected_prediction_tokens, 'number');
}

describe('discovery and health', () => {
  it('GET /health answers 200 without a key', async () => {
    const res = await fetch(`${server.baseURL}/health`);
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.status, 'ok');
    // While loading it answered 503 (if the harness was early enough to see it), never anything else.
    for (const s of server.healthStatuses) assert.ok(s === 503 || s === 200, `unexpected /health status ${s}`);
  });

  it('GET /v1/models lists the served model', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    assert.deepEqual(ids, [MODEL_ID]);
    assert.equal(page.data[0].object, 'model');
    assert.equal(typeof page.data[0].created, 'number');
    assert.equal(typeof page.data[0].owned_by, 'string');
  });

  it('GET /metrics is Prometheus text with the tandem: families', async () => {
    const res = await server.fetch('/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/plain/);
    const text = await res.text();
    for (const name of [
      'tandem:num_requests_running',
      'tandem:num_requests_waiting',
      'tandem:kv_cache_usage_perc',
      'tandem:kv_cache_blocks_used',
      'tandem:time_to_first_token_seconds',
      'tandem:inter_token_latency_seconds',
      'tandem:spec_decode_num_drafts_total',
      'tandem:spec_decode_num_draft_tokens_total',
      'tandem:spec_decode_num_accepted_tokens_total',
      'tandem:spec_decode_num_accepted_tokens_per_pos_total',
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${name} (gauge|counter|histogram)$`, 'm'), `${name} missing`);
    }
    assert.match(text, /^tandem:time_to_first_token_seconds_bucket\{model_name="tandem-target",le="\+Inf"\} \d+$/m);
    assert.match(text, /^tandem:spec_decode_num_accepted_tokens_per_pos_total\{model_name="tandem-target",position="0"\} \d+$/m);
  });

  it('the defaults: no --embeddings (501 naming the flag), no --cors-origin (no CORS headers, no preflight)', async () => {
    const r = await server.post('/v1/embeddings', { input: 'x' });
    assert.equal(r.status, 501);
    assert.match(r.json.error.message, /--embeddings/);
    const res = await server.fetch('/v1/models', { headers: { origin: 'http://a.example' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
    const preflight = await server.fetch('/v1/models', { method: 'OPTIONS', headers: { authorization: null, origin: 'http://a.example' } });
    assert.notEqual(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), null);
  });
});

describe('chat completions', () => {
  it('non-streaming: one assistant message, finish_reason, usage, timings', async () => {
    const r = await client.chat.completions.create({ model: MODEL_ID, messages: CHAT, max_tokens: 24, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.model, MODEL_ID);
    assert.equal(r.choices.length, 1);
    const c = r.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(c.message.content.length > 0);
    assert.ok(['stop', 'length'].includes(c.finish_reason));
    assertUsage(r.usage);
    assert.ok(r.usage.completion_tokens <= 24);
    if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 24);
    const t = r.timings;
    assert.ok(t, 'timings missing');
    assert.equal(t.prompt_n + t.cache_n, r.usage.prompt_tokens);
    assert.equal(t.cache_n, r.usage.prompt_tokens_details.cached_tokens);
    assert.equal(t.predicted_n, r.usage.completion_tokens);
    for (const k of ['prompt_ms', 'predicted_ms', 'prompt_per_second', 'predicted_per_second', 'draft_n', 'draft_n_accepted'])
      assert.equal(typeof t[k], 'number', `timings.${k}`);
    assert.equal(t.draft_n, 0, 'no drafter configured');
  });

  it('max_completion_tokens limits like max_tokens (finish_reason length)', async () => {
    const r = await client.chat.completions.create({
      messages: CHAT,
      max_completion_tokens: 5,
      temperature: 0,
      logit_bias: { 0: -100, 2: -100 }, // no end-of-turn: the limit must be what stops it
    });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 5);
  });

  it('streaming: role first, content deltas, finish_reason, same text as non-streaming', async () => {
    const params = { messages: CHAT, max_tokens: 24, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const s = await collectStream(stream);
    assert.equal(s.chunks[0].choices[0].delta.role, 'assistant');
    for (const ch of s.chunks) {
      assert.equal(ch.object, 'chat.completion.chunk');
      assert.equal(ch.id, s.chunks[0].id);
    }
    assert.equal(s.text, whole.choices[0].message.content);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.equal(s.usage, null, 'no usage chunk unless include_usage');
  });

  it('stream_options.include_usage: a last chunk with empty choices and usage', async () => {
    const stream = await client.chat.completions.create({
      messages: CHAT,
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const s = await collectStream(stream);
    const last = s.chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assertUsage(last.usage);
    const deltas = s.chunks.filter((c) => c.choices.length && c.choices[0].delta?.content).length;
    assert.ok(deltas >= 1);
    assert.ok(last.usage.completion_tokens >= 1 && last.usage.completion_tokens <= 12);
    for (const c of s.chunks.slice(0, -1)) assert.ok(!c.usage, 'usage only in the last chunk');
  });

  it('logprobs with top_logprobs: OpenAI chat shape, greedy token is the top alternative', async () => {
    const r = await client.chat.completions.create({
      messages: CHAT,
      max_tokens: 8,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    assert.equal(content.map((t) => t.token).join(''), r.choices[0].message.content);
    for (const t of content) {
      assert.equal(typeof t.token, 'string');
      assert.ok(t.logprob <= 0);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
      assert.equal(t.top_logprobs.length, 3);
      for (const alt of t.top_logprobs) {
        assert.equal(typeof alt.token, 'string');
        assert.ok(alt.logprob <= 0);
        assert.ok(Array.isArray(alt.bytes));
      }
      const best = Math.max(...t.top_logprobs.map((a) => a.logprob));
      assert.ok(Math.abs(best - t.logprob) < 1e-5, 'temperature 0 picks the most likely token');
      assert.ok(t.top_logprobs.some((a) => a.token === t.token));
    }
  });

  it('logprobs without top_logprobs: empty top_logprobs lists; logprobs absent → null', async () => {
    const r = await client.chat.completions.create({ messages: CHAT, max_tokens: 4, temperature: 0, logprobs: true });
    for (const t of r.choices[0].logprobs.content) assert.deepEqual(t.top_logprobs, []);
    const plain = await client.chat.completions.create({ messages: CHAT, max_tokens: 4, temperature: 0 });
    assert.equal(plain.choices[0].logprobs, null);
  });

  it('streaming logprobs: every content chunk carries the logprobs of its tokens', async () => {
    const params = { messages: CHAT, max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 2 };
    const whole = await client.chat.completions.create(params);
    const s = await collectStream(await client.chat.completions.create({ ...params, stream: true }));
    const streamed = s.chunks.flatMap((c) => c.choices.flatMap((ch) => ch.logprobs?.content ?? []));
    assert.deepEqual(
      streamed.map((t) => [t.token, t.logprob]),
      whole.choices[0].logprobs.content.map((t) => [t.token, t.logprob]),
    );
    for (const t of streamed) assert.equal(t.top_logprobs.length, 2);
  });

  it('n=2: two choices, choice i is the single request with seed + i', async () => {
    const base = { messages: CHAT, max_tokens: 16, temperature: 0.9, seed: 1234 };
    const r = await client.chat.completions.create({ ...base, n: 2 });
    assert.deepEqual(
      r.choices.map((c) => c.index),
      [0, 1],
    );
    const a = await client.chat.completions.create({ ...base, seed: 1234 });
    const b = await client.chat.completions.create({ ...base, seed: 1235 });
    assert.equal(r.choices[0].message.content, a.choices[0].message.content);
    assert.equal(r.choices[1].message.content, b.choices[0].message.content);
    assert.equal(r.usage.completion_tokens, a.usage.completion_tokens + b.usage.completion_tokens);
    assert.equal(r.usage.prompt_tokens, a.usage.prompt_tokens, 'the prompt is counted once');
  });

  it('n=2 streaming: chunks for both indices, each with its finish_reason', async () => {
    const base = { messages: CHAT, max_tokens: 10, temperature: 0.9, seed: 99, n: 2 };
    const whole = await client.chat.completions.create(base);
    const s = await collectStream(await client.chat.completions.create({ ...base, stream: true }));
    assert.equal(s.texts.get(0), whole.choices[0].message.content);
    assert.equal(s.texts.get(1), whole.choices[1].message.content);
    assert.equal(s.finishes.get(0), whole.choices[0].finish_reason);
    assert.equal(s.finishes.get(1), whole.choices[1].finish_reason);
  });

  it('seeds: same seed → same text; temperature 0 is deterministic', async () => {
    const seeded = { messages: CHAT, max_tokens: 24, temperature: 0.8, seed: 42 };
    const [a, b] = await Promise.all([client.chat.completions.create(seeded), client.chat.completions.create(seeded)]);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const others = await Promise.all(
      [43, 44, 45].map((seed) => client.chat.completions.create({ ...seeded, seed })),
    );
    assert.ok(
      others.some((o) => o.choices[0].message.content !== a.choices[0].message.content),
      'different seeds should not all produce the same text',
    );
    const g1 = await client.chat.completions.create({ messages: CHAT, max_tokens: 24, temperature: 0 });
    const g2 = await client.chat.completions.create({ messages: CHAT, max_tokens: 24, temperature: 0, seed: 7 });
    assert.equal(g1.choices[0].message.content, g2.choices[0].message.content);
  });

  it(
    'array-of-parts content renders like a string',
    async () => {
    const a = await client.chat.completions.create({ messages: CHAT, max_tokens: 8, temperature: 0 });
    const b = await client.chat.completions.create({
      messages: [{ role: 'user', content: [{ type: 'text', text: CHAT[0].content }] }],
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    assert.equal(b.usage.prompt_tokens, a.usage.prompt_tokens);
    },
  );
});

describe('completions', () => {
  it('non-streaming: text_completion, finish_reason length at max_tokens, usage', async () => {
    const r = await client.completions.create({
      model: MODEL_ID,
      prompt: PROMPT,
      max_tokens: 16,
      temperature: 0,
      logit_bias: { 0: -100, 2: -100 },
    });
    assert.equal(r.object, 'text_completion');
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].index, 0);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(typeof r.choices[0].text, 'string');
    assertUsage(r.usage, 16);
  });

  it('streaming: text chunks concatenate to the non-streaming text; include_usage', async () => {
    const params = { prompt: PROMPT, max_tokens: 16, temperature: 0 };
    const whole = await client.completions.create(params);
    const s = await collectStream(
      await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }),
      { chat: false },
    );
    for (const c of s.chunks) assert.equal(c.object, 'text_completion');
    assert.equal(s.text, whole.choices[0].text);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.deepEqual(s.chunks.at(-1).choices, []);
    assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
    assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
  });

  it('logprobs=N: legacy shape (tokens, token_logprobs, top_logprobs dicts, text_offset)', async () => {
    const r = await client.completions.create({ prompt: PROMPT, max_tokens: 8, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    const n = r.usage.completion_tokens;
    assert.equal(lp.tokens.length, n);
    assert.equal(lp.token_logprobs.length, n);
    assert.equal(lp.top_logprobs.length, n);
    assert.equal(lp.text_offset.length, n);
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    let offset = 0;
    for (let i = 0; i < n; ++i) {
      assert.equal(lp.text_offset[i], offset);
      offset += Buffer.byteLength(lp.tokens[i], 'utf8');
      assert.ok(lp.token_logprobs[i] <= 0);
      const alts = Object.entries(lp.top_logprobs[i]);
      assert.ok(alts.length >= 1 && alts.length <= 3, `top_logprobs[${i}] has ${alts.length} entries`);
      assert.ok(lp.top_logprobs[i][lp.tokens[i]] !== undefined, 'greedy token among the alternatives');
    }
  });

  it('prompt as an array of token ids equals the same prompt as text', async () => {
    // Token ids from `tandem tokenize` (the same tokenizer the server uses).
    const out = execFileSync(tandemBin, ['tokenize', '-m', models.target, PROMPT], { encoding: 'utf8' });
    const ids = out.trim().split(/\s+/).map(Number);
    assert.ok(ids.length > 3 && ids.every(Number.isInteger), out);
    const text = await client.completions.create({ prompt: PROMPT, max_tokens: 12, temperature: 0 });
    const byIds = await client.completions.create({ prompt: ids, max_tokens: 12, temperature: 0 });
    assert.equal(byIds.usage.prompt_tokens, ids.length);
    assert.equal(text.usage.prompt_tokens, ids.length);
    assert.equal(byIds.choices[0].text, text.choices[0].text);
  });

  it('echo: the prompt is prepended to the text (streaming and not)', async () => {
    const params = { prompt: PROMPT, max_tokens: 6, temperature: 0 };
    const plain = await client.completions.create(params);
    const echoed = await client.completions.create({ ...params, echo: true });
    assert.equal(echoed.choices[0].text, PROMPT + plain.choices[0].text);
    const s = await collectStream(await client.completions.create({ ...params, echo: true, stream: true }), { chat: false });
    assert.equal(s.text, PROMPT + plain.choices[0].text);
  });

  it('n=2 with seed: choice i equals the single request with seed + i', async () => {
    const base = { prompt: PROMPT, max_tokens: 12, temperature: 1.0, seed: 5 };
    const r = await client.completions.create({ ...base, n: 2 });
    const a = await client.completions.create({ ...base, seed: 5 });
    const b = await client.completions.create({ ...base, seed: 6 });
    assert.deepEqual(
      r.choices.map((c) => c.text),
      [a.choices[0].text, b.choices[0].text],
    );
  });
});

describe('prefix cache', () => {
  it('a repeated long prompt reuses cached blocks: cached_tokens, cache_n, metrics — and the same text', async () => {
    const prompt = 'The whale and the ship and the sea under the grey sky. '.repeat(10) + 'And then';
    const body = { model: MODEL_ID, prompt, max_tokens: 12, temperature: 0, logit_bias: { 0: -100, 2: -100 } };
    const m0 = await server.metrics();
    const first = await client.completions.create(body);
    const second = await client.completions.create(body);
    const m1 = await server.metrics();
    assert.ok(first.usage.prompt_tokens > 64, `prompt of ${first.usage.prompt_tokens} tokens`);
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
    const cached = second.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached >= 32 && cached % 32 === 0 && cached < second.usage.prompt_tokens, `cached ${cached}`);
    assert.equal(second.timings.cache_n, cached);
    assert.equal(second.timings.prompt_n, second.usage.prompt_tokens - cached);
    assert.equal(second.choices[0].text, first.choices[0].text, 'exact: the same completion');
    const hits = m1.get('tandem:prefix_cache_hits_total') - m0.get('tandem:prefix_cache_hits_total');
    const queries = m1.get('tandem:prefix_cache_queries_total') - m0.get('tandem:prefix_cache_queries_total');
    assert.equal(hits, cached);
    assert.equal(queries, 2 * first.usage.prompt_tokens);
    assert.ok(m1.get('tandem:prefix_cache_blocks') >= cached / 32);
  });

  it('--no-prefix-cache: nothing is reused, the text is the same', async () => {
    const other = await startServer({ extra: ['--no-prefix-cache'] });
    try {
      const prompt = 'The whale and the ship and the sea under the grey sky. '.repeat(10) + 'And then';
      const body = { model: MODEL_ID, prompt, max_tokens: 12, temperature: 0, logit_bias: { 0: -100, 2: -100 } };
      const c = other.client();
      const a = await c.completions.create(body);
      const b = await c.completions.create(body);
      assert.equal(b.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(b.timings.cache_n, 0);
      assert.equal(a.choices[0].text, b.choices[0].text);
      const reference = await client.completions.create(body);
      assert.equal(reference.choices[0].text, a.choices[0].text, 'cached and uncached servers agree');
    } finally {
      await other.stop();
    }
  });
});

describe('stop sequences', () => {
  // A greedy reference continuation with per-token text, long enough to pick stops from.
  let ref;
  before(async () => {
    const r = await client.completions.create({
      prompt: PROMPT,
      max_tokens: 40,
      temperature: 0,
      logprobs: 0,
      logit_bias: { 0: -100, 2: -100 },
    });
    ref = { text: r.choices[0].text, tokens: r.choices[0].logprobs.tokens };
    assert.equal(ref.tokens.join(''), ref.text);
    assert.equal(ref.tokens.length, 40);
  });

  // A stop string that straddles the boundary between token k and k+1 (the last char(s) of
  // one and the first char(s) of the next) and whose first occurrence is at that boundary.
  function straddlingStop() {
    for (let k = 4; k < ref.tokens.length - 4; ++k) {
      const left = ref.tokens[k];
      const right = ref.tokens[k + 1];
      if (left.length < 2 || right.length < 2) continue;
      const stop = left.slice(-2) + right.slice(0, 2);
      const boundary = ref.tokens.slice(0, k + 1).join('').length;
      if (ref.text.indexOf(stop) === boundary - 2) return { stop, at: boundary - 2 };
    }
    return null;
  }

  it('a stop string across a token boundary is matched and never emitted (non-streaming)', async () => {
    const s = straddlingStop();
    assert.ok(s, `no straddling stop candidate in ${JSON.stringify(ref.tokens)}`);
    const r = await client.completions.create({
      prompt: PROMPT,
      max_tokens: 40,
      temperature: 0,
      stop: s.stop,
      logit_bias: { 0: -100, 2: -100 },
    });
    assert.equal(r.choices[0].text, ref.text.slice(0, s.at));
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(!r.choices[0].text.includes(s.stop));
  });

  it('/metrics counts a request ended by a stop string as finished_reason "stop", not "abort"', async () => {
    const s = straddlingStop();
    const reasons = (m) => ['stop', 'length', 'abort'].map((r) => m.get(`tandem:request_success_total{finished_reason="${r}"}`));
    const [stop0, length0, abort0] = reasons(await server.metrics());
    const body = { prompt: PROMPT, max_tokens: 40, temperature: 0, stop: s.stop, logit_bias: { 0: -100, 2: -100 } };
    const whole = await client.completions.create(body);
    assert.equal(whole.choices[0].finish_reason, 'stop');
    const streamed = await collectStream(await client.completions.create({ ...body, stream: true }), { chat: false });
    assert.equal(streamed.finish, 'stop');
    // Counted when the response is made; the engine frees the request a step later either way.
    assert.deepEqual(reasons(await server.metrics()), [stop0 + 2, length0, abort0]);
  });

  it('the same across chunk boundaries when streaming (chat and completions)', async () => {
    const s = straddlingStop();
    const st = await collectStream(
      await client.completions.create({
        prompt: PROMPT,
        max_tokens: 40,
        temperature: 0,
        stop: [s.stop],
        stream: true,
        logit_bias: { 0: -100, 2: -100 },
      }),
      { chat: false },
    );
    assert.equal(st.text, ref.text.slice(0, s.at));
    assert.equal(st.finish, 'stop');
    for (const c of st.chunks) for (const ch of c.choices) assert.ok(!(ch.text ?? '').includes(s.stop));

    // chat: take the stop from a chat reply and check the streamed text stops before it.
    const params = { messages: CHAT, max_tokens: 30, temperature: 0, logit_bias: { 0: -100, 2: -100 } };
    const whole = (await client.chat.completions.create(params)).choices[0].message.content;
    const cut = Math.floor(whole.length / 2);
    const stop = whole.slice(cut, cut + 3);
    const at = whole.indexOf(stop);
    const chat = await collectStream(await client.chat.completions.create({ ...params, stop, stream: true }));
    assert.equal(chat.text, whole.slice(0, at));
    assert.equal(chat.finish, 'stop');
  });

  it('several stops: the earliest match wins; a stop that never occurs changes nothing', async () => {
    const s = straddlingStop();
    const later = ref.text.slice(s.at + s.stop.length + 2, s.at + s.stop.length + 6);
    const r = await client.completions.create({
      prompt: PROMPT,
      max_tokens: 40,
      temperature: 0,
      stop: ['\u0000never-emitted\u0000', later, s.stop],
      logit_bias: { 0: -100, 2: -100 },
    });
    assert.equal(r.choices[0].text, ref.text.slice(0, Math.min(s.at, ref.text.indexOf(later))));
    const none = await client.completions.create({
      prompt: PROMPT,
      max_tokens: 40,
      temperature: 0,
      stop: 'zzzzqqqq',
      logit_bias: { 0: -100, 2: -100 },
    });
    assert.equal(none.choices[0].text, ref.text);
    assert.equal(none.choices[0].finish_reason, 'length');
  });
});

describe('API keys', () => {
  const route = '/v1/models';
  it('401 without a key, in the OpenAI error shape', async () => {
    const res = await server.fetch(route, { headers: { authorization: null } });
    assert.equal(res.status, 401);
    const body = await res.json();
    assertErrorShape(body);
    assert.equal(body.error.type, 'authentication_error');
  });

  it('401 with a wrong key (Authorization: Bearer and X-Api-Key)', async () => {
    for (const headers of [
      { authorization: `Bearer ${API_KEY}x` },
      { authorization: 'Bearer ' },
      { authorization: API_KEY }, // not "Bearer <key>"
      { authorization: null, 'x-api-key': `${API_KEY}x` },
      { authorization: null, 'x-api-key': API_KEY.slice(0, -1) },
    ]) {
      const res = await server.fetch(route, { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      assertErrorShape(await res.json());
    }
  });

  it('200 with the right key in either header; generation routes are guarded too', async () => {
    const ok1 = await server.fetch(route);
    assert.equal(ok1.status, 200);
    const ok2 = await server.fetch(route, { headers: { authorization: null, 'x-api-key': API_KEY } });
    assert.equal(ok2.status, 200);
    const denied = await server.post('/v1/chat/completions', { messages: CHAT, max_tokens: 1 }, { authorization: null });
    assert.equal(denied.status, 401);
    const metrics = await server.fetch('/metrics', { headers: { authorization: null } });
    assert.equal(metrics.status, 401);
  });

  it('the openai client raises AuthenticationError for a wrong key', async () => {
    const bad = server.client({ apiKey: 'sk-wrong' });
    await assert.rejects(bad.chat.completions.create({ messages: CHAT, max_tokens: 1 }), (e) => {
      assert.equal(e.status, 401);
      assert.equal(e.type, 'authentication_error');
      return true;
    });
  });
});

describe('errors', () => {
  async function expectError(route, body, status, param, code) {
    const r = await server.post(route, body);
    assert.equal(r.status, status, `${JSON.stringify(body).slice(0, 200)} → ${r.status} ${r.text.slice(0, 300)}`);
    assertErrorShape(r.json);
    if (param !== undefined) assert.equal(r.json.error.param, param, r.text);
    if (code !== undefined) assert.equal(r.json.error.code, code, r.text);
    return r.json.error;
  }

  it('404 for an unknown model id (model_not_found), via the client too', async () => {
    await expectError('/v1/chat/completions', { model: 'no-such-model', messages: CHAT }, 404, 'model', 'model_not_found');
    await expectError('/v1/completions', { model: 'no-such-model', prompt: 'x' }, 404, 'model', 'model_not_found');
    await assert.rejects(client.chat.completions.create({ model: 'gpt-nope', messages: CHAT, max_tokens: 1 }), (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.code, 'model_not_found');
      return true;
    });
  });

  it('404 for an unknown route, in the OpenAI shape', async () => {
    const res = await server.fetch('/v1/no-such-route');
    assert.equal(res.status, 404);
    assertErrorShape(await res.json());
    const post = await server.post('/v1/audio/speech', { input: 'x' });
    assert.equal(post.status, 404);
    assertErrorShape(post.json);
  });

  it('400 for malformed JSON and non-object bodies (param "body")', async () => {
    await expectError('/v1/chat/completions', '{"messages": [', 400, 'body', 'invalid_json');
    await expectError('/v1/completions', '[1,2,3]', 400, 'body');
    await expectError('/v1/completions', '', 400, 'body');
  });

  it('400 naming the field for wrong types and out-of-range values', async () => {
    const chat = '/v1/chat/completions';
    const cmpl = '/v1/completions';
    const cases = [
      [chat, { max_tokens: 2 }, 'messages'],
      [chat, { messages: [] }, 'messages'],
      [chat, { messages: 'hello' }, 'messages'],
      [chat, { messages: [{ content: 'hi' }] }, 'messages[0].role'],
      [chat, { messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
      [chat, { messages: CHAT, temperature: 3 }, 'temperature'],
      [chat, { messages: CHAT, temperature: 'hot' }, 'temperature'],
      [chat, { messages: CHAT, top_p: 1.5 }, 'top_p'],
      [chat, { messages: CHAT, top_p: 0 }, 'top_p'],
      [chat, { messages: CHAT, max_tokens: 0 }, 'max_tokens'],
      [chat, { messages: CHAT, max_tokens: 2.5 }, 'max_tokens'],
      [chat, { messages: CHAT, max_completion_tokens: -1 }, 'max_completion_tokens'],
      [chat, { messages: CHAT, n: 0 }, 'n'],
      [chat, { messages: CHAT, n: 17 }, 'n'],
      [chat, { messages: CHAT, stop: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] }, 'stop'],
      [chat, { messages: CHAT, presence_penalty: 5 }, 'presence_penalty'],
      [chat, { messages: CHAT, frequency_penalty: -3 }, 'frequency_penalty'],
      [chat, { messages: CHAT, repetition_penalty: 0 }, 'repetition_penalty'],
      [chat, { messages: CHAT, min_p: 2 }, 'min_p'],
      [chat, { messages: CHAT, top_k: 'ten' }, 'top_k'],
      [chat, { messages: CHAT, seed: 'abc' }, 'seed'],
      [chat, { messages: CHAT, stream: 'yes' }, 'stream'],
      [chat, { messages: CHAT, stop: 5 }, 'stop'],
      [chat, { messages: CHAT, stop: ['a', 5] }, 'stop'],
      [chat, { messages: CHAT, logprobs: 'yes' }, 'logprobs'],
      [chat, { messages: CHAT, top_logprobs: 3 }, 'top_logprobs'],
      [chat, { messages: CHAT, logprobs: true, top_logprobs: 50 }, 'top_logprobs'],
      [chat, { messages: CHAT, logit_bias: { abc: 1 } }, 'logit_bias'],
      [chat, { messages: CHAT, logit_bias: { 5: 500 } }, 'logit_bias'],
      [chat, { messages: CHAT, stream_options: 'x' }, 'stream_options'],
      [chat, { messages: CHAT, model: 7 }, 'model'],
      [cmpl, { max_tokens: 2 }, 'prompt'],
      [cmpl, { prompt: 12 }, 'prompt'],
      [cmpl, { prompt: [] }, 'prompt'],
      [cmpl, { prompt: [1, -2] }, 'prompt'],
      [cmpl, { prompt: [1, 999999] }, 'prompt'],
      [cmpl, { prompt: 'x', logprobs: 9 }, 'logprobs'],
      [cmpl, { prompt: 'x', echo: 1 }, 'echo'],
    ];
    for (const [route, body, param] of cases) await expectError(route, body, 400, param);
  });

  it('the openai client surfaces param and code of a 400', async () => {
    await assert.rejects(client.chat.completions.create({ messages: CHAT, temperature: 9 }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'temperature');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
  });

  it('400 context_length_exceeded with the token counts (prompt too long, or prompt + max_tokens)', async () => {
    const models = await client.models.list();
    const ctx = models.data[0].meta?.context_length ?? 2048;
    const long = Array.from({ length: ctx + 10 }, (_, i) => 100 + (i % 500));
    const e1 = await expectError('/v1/completions', { prompt: long, max_tokens: 1 }, 400, 'prompt', 'context_length_exceeded');
    assert.match(e1.message, new RegExp(`${ctx}`));
    assert.match(e1.message, new RegExp(`${ctx + 10}`));
    const e2 = await expectError(
      '/v1/completions',
      { prompt: [10, 11, 12], max_tokens: ctx },
      400,
      'prompt',
      'context_length_exceeded',
    );
    assert.match(e2.message, /3 in the prompt/);
    assert.match(e2.message, new RegExp(`${ctx} for the completion`));
    await expectError(
      '/v1/chat/completions',
      { messages: CHAT, max_tokens: ctx * 2 },
      400,
      'messages',
      'context_length_exceeded',
    );
  });

  it('413 for a body over --max-body-bytes (default 8 MiB)', async () => {
    const body = JSON.stringify({ prompt: 'a'.repeat(9 * 1024 * 1024) });
    let r;
    try {
      r = await server.post('/v1/completions', body);
    } catch (e) {
      assert.fail(`the client got no reply, only ${e.cause?.code ?? e.message}`);
    }
    assert.equal(r.status, 413);
    assertErrorShape(r.json);
    // A body just under the limit is parsed (and then refused for its content, not its size).
    const ok = await server.post('/v1/completions', JSON.stringify({ prompt: 5, pad: 'a'.repeat(1024 * 1024) }));
    assert.equal(ok.status, 400);
    assert.equal(ok.json.error.param, 'prompt');
  });

  it(
    '413 message states the size that was sent',
    async () => {
      const body = JSON.stringify({ prompt: 'a'.repeat(9 * 1024 * 1024) });
      const r = await server.post('/v1/completions', body);
      assert.equal(r.status, 413);
      assert.ok(r.json.error.message.includes(String(Buffer.byteLength(body))), r.json.error.message);
    },
  );
});

describe('a model directory without tokenizer.json', () => {
  let bare;
  let dir;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-e2e-notok-'));
    for (const f of ['config.json', 'generation_config.json', 'model.safetensors'])
      symlinkSync(path.join(models.target, f), path.join(dir, f));
    bare = await startServer({ model: dir });
  });
  after(async () => {
    if (bare) await bare.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('text prompts and chat are refused with a 400 that says why', async () => {
    const chat = await bare.post('/v1/chat/completions', { messages: CHAT, max_tokens: 2 });
    assert.equal(chat.status, 400);
    assertErrorShape(chat.json);
    const text = await bare.post('/v1/completions', { prompt: 'hello', max_tokens: 2 });
    assert.equal(text.status, 400);
    assertErrorShape(text.json);
  });

  it(
    'token-id prompts still generate (as the start-up warning promises)',
    async () => {
      const r = await bare.post('/v1/completions', { prompt: [37, 477, 481], max_tokens: 4, temperature: 0 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.usage.completion_tokens, 4);
    },
  );
});

describe('API key configuration', () => {
  const status = async (srv, headers) => (await srv.fetch('/v1/models', { headers: { authorization: null, ...headers } })).status;

  it('--api-key K1,K2 accepts each key in either header', async () => {
    const srv = await startServer({ key: null, extra: ['--api-key', 'key-one,key-two'] });
    try {
      assert.equal(await status(srv, { authorization: 'Bearer key-one' }), 200);
      assert.equal(await status(srv, { 'x-api-key': 'key-two' }), 200);
      assert.equal(await status(srv, { authorization: 'Bearer key-one,key-two' }), 401);
      assert.equal(await status(srv, { authorization: 'Bearer key-three' }), 401);
      assert.equal(await status(srv, {}), 401);
    } finally {
      await srv.stop();
    }
  });

  it('--api-key-file: one key per line', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-e2e-keys-'));
    const file = path.join(dir, 'keys');
    writeFileSync(file, 'file-key-a\nfile-key-b\n');
    const srv = await startServer({ key: null, extra: ['--api-key-file', file] });
    try {
      assert.equal(await status(srv, { authorization: 'Bearer file-key-a' }), 200);
      assert.equal(await status(srv, { 'x-api-key': 'file-key-b' }), 200);
      assert.equal(await status(srv, { authorization: 'Bearer file-key-c' }), 401);
      assert.equal((await fetch(`${srv.baseURL}/health`)).status, 200);
    } finally {
      await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// runtime/text_side.h: serve and generate open the model the same way, so they stop on the
// same ids — config.json's eos ids, generation_config.json's and the template's eos token.
describe('generate and serve stop on the same ids (generation_config.json included)', () => {
  const PROMPT = [37, 477, 481];
  let dir;
  let srv;
  let free;  // the greedy continuation without stopping
  const generate = (extra = []) =>
    execFileSync(tandemBin, ['generate', '-m', dir, '--tokens', PROMPT.join(','), '-n', '8', '--temp', '0', '-t', '1', ...extra], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .trim()
      .split(',')
      .map(Number);
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-e2e-stops-'));
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
      symlinkSync(path.join(models.target, f), path.join(dir, f));
    free = generate(['--ignore-eos']);
    // The third greedy token becomes an eos id that only generation_config.json declares.
    assert.equal(free.length, 8);
    assert.ok(!free.slice(0, 2).includes(free[2]), `continuation ${free}`);
    writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [free[2]] }));
    srv = await startServer({ model: dir });
  });
  after(async () => {
    if (srv) await srv.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('generate stops before the generation_config.json eos id', () => {
    assert.deepEqual(generate(), free.slice(0, 2));
  });

  it('the server stops at the same place', async () => {
    const r = await srv.post('/v1/completions', { prompt: PROMPT, max_tokens: 8, temperature: 0 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.choices[0].finish_reason, 'stop');
    assert.equal(r.json.usage.completion_tokens, 2);
  });
});
