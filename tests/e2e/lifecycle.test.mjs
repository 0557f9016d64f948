// Request and process lifecycle: a streaming client that disconnects frees its KV while
// another request completes; requests beyond -np queue and still come out right;
// SIGTERM and SIGINT drain and exit 0; serve's flags, their ranges and their environment mirrors.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';

import { models, sleep, startServer, tandemBin, waitFor } from './harness.mjs';

const NO_EOS = { 0: -100, 2: -100 };

describe('client disconnect', () => {
  let server;
  before(async () => {
    server = await startServer({ extra: ['-np', '4'] });
  });
  after(async () => {
    if (!server) return;
    if (server.child.exitCode !== null || server.child.signalCode !== null)
      console.log(`# server died: code ${server.child.exitCode} signal ${server.child.signalCode}\n${server.log}`);
    await server.stop();
  });

  it('a streaming client that disconnects mid-generation: KV released, the other request completes', async () => {
    const client = server.client();
    const m0 = await server.metrics();
    assert.equal(m0.get('tandem:kv_cache_blocks_used'), 0);
    const aborts0 = m0.get('tandem:request_success_total{finished_reason="abort"}');

    // The other request: long enough to still be running when the stream is dropped.
    let otherDone = false;
    const other = client.completions
      .create({ prompt: 'The sea was calm and the ship', max_tokens: 160, temperature: 0, logit_bias: NO_EOS })
      .finally(() => {
        otherDone = true;
      });

    // The stream: a long prompt (many KV blocks) and far more tokens than we will read.
    const longPrompt = 'The whale and the ship and the sea. '.repeat(60);
    const controller = new AbortController();
    const stream = await client.completions.create(
      { prompt: longPrompt, max_tokens: 1500, temperature: 0, stream: true, logit_bias: NO_EOS },
      { signal: controller.signal },
    );
    let chunks = 0;
    let during;
    // Drop the connection: abort the HTTP request (the client may end the iteration quietly or throw).
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.text) ++chunks;
        if (chunks === 5) {
          during = await server.metrics();
          controller.abort();
          break;
        }
      }
    } catch (e) {
      assert.ok(e.name === 'AbortError' || /abort/i.test(String(e)), String(e));
    }
    const abortedAt = Date.now();
    assert.equal(chunks, 5);
    assert.equal(during.get('tandem:num_requests_running'), 2);
    const usedBoth = during.get('tandem:kv_cache_blocks_used');
    assert.ok(usedBoth > 10, `the long prompt holds many blocks (${usedBoth})`);

    // Its KV goes back while the other request is still decoding.
    const freed = await waitFor(
      async () => {
        const m = await server.metrics();
        return m.get('tandem:num_requests_running') === 1 && m.get('tandem:kv_cache_blocks_used') < usedBoth / 2 ? m : null;
      },
      { timeoutMs: 3000, intervalMs: 10 },
    );
    const latency = Date.now() - abortedAt;
    assert.ok(freed, 'the disconnected stream still holds its KV 3 s after the disconnect');
    assert.ok(!otherDone, 'the other request was still running when the KV came back (test timing assumption)');
    assert.equal(freed.get('tandem:request_success_total{finished_reason="abort"}'), aborts0 + 1);
    console.log(`# KV of the disconnected stream released ${latency} ms after the disconnect`);

    const r = await other;
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 160);
    const alone = await client.completions.create({
      prompt: 'The sea was calm and the ship',
      max_tokens: 160,
      temperature: 0,
      logit_bias: NO_EOS,
    });
    assert.equal(r.choices[0].text, alone.choices[0].text, 'the other request was not disturbed');

    const idle = await waitFor(async () => (await server.metrics()).get('tandem:kv_cache_blocks_used') === 0, {
      timeoutMs: 2000,
    });
    assert.ok(idle, 'all KV blocks free once idle');
    // And the server keeps serving.
    const after = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 });
    assert.ok(after.choices[0].message.content.length > 0);
  });

  it('requests beyond -np queue (num_requests_waiting) and produce the same text as alone', async () => {
    const client = server.client();
    const prompts = Array.from({ length: 7 }, (_, i) => `The ${['whale', 'ship', 'sea', 'captain', 'crew', 'storm', 'harbour'][i]} was`);
    // Long enough that the first four hold their slots for many decode steps while the
    // poller looks: with 24 tokens all seven could finish between two polls on a fast machine.
    const make = (prompt) => client.completions.create({ prompt, max_tokens: 160, temperature: 0, logit_bias: NO_EOS });
    // Queue time (deterministic, not sampled): a request that a plan did not admit records its
    // wait; one admitted at once records exactly 0 (the le="0" bucket).
    const queued = (m) => m.get('tandem:request_queue_time_seconds_count') - m.get('tandem:request_queue_time_seconds_bucket{le="0"}');
    const before = await server.metrics();
    let sawWaiting = 0;
    let polling = true;
    const poller = (async () => {
      for (let i = 0; polling && i < 500; ++i) {
        sawWaiting = Math.max(sawWaiting, (await server.metrics()).get('tandem:num_requests_waiting'));
        await sleep(5);
      }
    })();
    const together = await Promise.all(prompts.map(make));
    polling = false;
    await poller;
    const after = await server.metrics();
    assert.equal(after.get('tandem:request_queue_time_seconds_count') - before.get('tandem:request_queue_time_seconds_count'), 7);
    assert.ok(queued(after) - queued(before) >= 3, `with 7 requests and -np 4, at least 3 waited: ${queued(after) - queued(before)}`);
    assert.ok(after.get('tandem:request_queue_time_seconds_sum') > before.get('tandem:request_queue_time_seconds_sum'));
    assert.ok(sawWaiting >= 1, 'with 7 requests and -np 4, the gauge saw some waiting');
    for (let i = 0; i < prompts.length; ++i) {
      const single = await make(prompts[i]);
      assert.equal(together[i].choices[0].text, single.choices[0].text, `request ${i}`);
    }
  });

  it(
    'a non-streaming client that disconnects: its request is cancelled too',
    async () => {
      const client = server.client();
      const controller = new AbortController();
      const pending = client.completions
        .create({ prompt: 'The ship', max_tokens: 1500, temperature: 0, logit_bias: NO_EOS }, { signal: controller.signal })
        .catch((e) => e);
      const running = await waitFor(async () => (await server.metrics()).get('tandem:num_requests_running') === 1, {
        timeoutMs: 5000,
      });
      assert.ok(running, 'the request started');
      await sleep(200);
      controller.abort();
      await pending;
      const freed = await waitFor(
        async () => {
          const m = await server.metrics();
          return m.get('tandem:num_requests_running') === 0 && m.get('tandem:kv_cache_blocks_used') === 0;
        },
        { timeoutMs: 1500 },
      );
      // (1500 tokens cannot finish on their own within 1.5 s; the suite's after() stops the server either way.)
      assert.ok(freed, 'still generating 1.5 s after its client went away');
    },
  );
});

describe('shutdown', () => {
  it('SIGTERM: in-flight requests drain (or are cut at the deadline) and the process exits 0', async () => {
    // A 1 s drain window (TANDEM_SHUTDOWN_DRAIN_MS): the signal comes when the short request has
    // 10 tokens left (well within it even on a busy machine); the long one has ~1950 left.
    const server = await startServer({ extra: ['-np', '4'], env: { TANDEM_SHUTDOWN_DRAIN_MS: '1000' } });
    try {
      const client = server.client();
      const tokens = { short: 0, long: 0 };
      const streamed = async (name, max_tokens) => {
        const stream = await client.completions.create({
          prompt: `The ${name} ship`,
          max_tokens,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
          logit_bias: NO_EOS,
        });
        let text = '';
        let finish = null;
        let usage = null;
        try {
          for await (const chunk of stream) {
            if (chunk.usage) usage = chunk.usage;
            for (const c of chunk.choices) {
              text += c.text ?? '';
              if (c.text) tokens[name]++;
              if (c.finish_reason) finish = c.finish_reason;
            }
          }
        } catch {}
        return { text, finish, usage };
      };
      const short = streamed('short', 60);
      const long = streamed('long', 2000);
      assert.ok(await waitFor(() => tokens.short >= 50 && tokens.long > 0, { timeoutMs: 30000, intervalMs: 2 }), 'both decoding');
      const t0 = Date.now();
      server.child.kill('SIGTERM');
      const [exit, s, l] = await Promise.all([server.exited, short, long]);
      const elapsed = Date.now() - t0;
      assert.deepEqual(exit, { code: 0, signal: null }, server.log);
      assert.ok(elapsed < 10000, `exit took ${elapsed} ms`);
      assert.equal(s.finish, 'length', 'the short request finished within the drain window');
      assert.equal(s.usage?.completion_tokens, 60);
      const longTokens = l.usage?.completion_tokens ?? 0;
      assert.ok(l.text.length > 0 && longTokens < 2000, `the long stream was cut (${longTokens} tokens)`);
      assert.match(server.log, /shutting down/);
      console.log(`# SIGTERM → exit 0 in ${elapsed} ms; the long stream ended with finish_reason ${l.finish}`);
    } finally {
      await server.stop();
    }
  });

  it('SIGINT on an idle server exits 0 promptly', async () => {
    const server = await startServer();
    try {
      const t0 = Date.now();
      server.child.kill('SIGINT');
      const exit = await server.exited;
      assert.deepEqual(exit, { code: 0, signal: null }, server.log);
      assert.ok(Date.now() - t0 < 5000);
    } finally {
      await server.stop();
    }
  });
});

describe('flags and their environment mirrors', () => {
  it('out-of-range flags and variables exit 2 naming the option, before anything loads', () => {
    const cases = [
      [['-np', '0'], {}, /--parallel/],
      [['--port', '70000'], {}, /--port/],
      [['-b', '0'], {}, /--batch-size/],
      [['-t', '-1'], {}, /--threads/],
      [[], { TANDEM_PARALLEL: 'many' }, /--parallel|TANDEM_PARALLEL/],
    ];
    for (const [flags, env, message] of cases) {
      const r = spawnSync(tandemBin, ['serve', '-m', models.target, ...flags], {
        env: { ...process.env, ...env },
        encoding: 'utf8',
        timeout: 10000,
      });
      assert.equal(r.status, 2, `${flags.join(' ')} ${JSON.stringify(env)}: ${r.stderr}`);
      assert.match(r.stderr + r.stdout, message);
    }
  });

  it('TANDEM_* and llama-server LLAMA_ARG_* variables set the flags; a flag wins', async () => {
    const runs = [
      [{ TANDEM_PARALLEL: '3', TANDEM_BATCH_SIZE: '16' }, [], /3 parallel sequences/],
      [{ LLAMA_ARG_N_PARALLEL: '2', LLAMA_ARG_CTX_SIZE: '512' }, [], /context 512 tokens, 2 parallel sequences/],
      [{ TANDEM_PARALLEL: '3' }, ['-np', '5'], /5 parallel sequences/],
    ];
    for (const [env, extra, ready] of runs) {
      const server = await startServer({ env, extra });
      try {
        assert.match(server.log, ready, server.log);
        const r = await server.client().completions.create({ prompt: 'The sea', max_tokens: 4, temperature: 0 });
        assert.equal(r.usage.completion_tokens > 0, true);
      } finally {
        await server.stop();
      }
    }
  });
});
