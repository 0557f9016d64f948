// GET /v1/internal/mtp-policy end to end: real `tandem serve` processes on the
// bundled models, API key enabled, every row of the state table
// (docs/spec-speculative.md §5) and every field. Uses only Node's standard library.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const TANDEM = process.env.TANDEM_BIN;
const ROOT = process.env.TANDEM_SOURCE_DIR;
const TARGET = path.join(ROOT, 'models/tandem-target');
const DRAFT = path.join(ROOT, 'models/tandem-draft');
const KEY = 'sk-policy-test';
const FIELDS = ['schema_version', 'state', 'reason', 'decline_detail', 'verdict', 'mtp_enabled', 'draft_kind', 'target',
  'drafter', 'hardware', 'block_size', 'acceptance_rate', 'samples', 'samples_required', 'samples_remaining',
  // additive (docs/adr/0005-policy-confidence.md)
  'samples_max', 'speedup', 'speedup_log_stddev', 'speedup_low', 'speedup_high', 'speedup_threshold', 'settle_reason',
  'verdict_source', 'reprofile_reason', 'reprofiles', 'served_speedup', 'contradicting_windows'];

// Every directory made here goes when the process exits, pass or fail.
const tempDirs = [];
process.on('exit', () => {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(name) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `tandem-policy-${name}-`));
  tempDirs.push(d);
  return d;
}

// Starts a server; resolves once it listens (not necessarily ready).
async function start({ drafter = DRAFT, env = {}, cacheDir = tempDir('cache') } = {}) {
  const args = ['serve', '-m', TARGET, '--port', '0', '--api-key', KEY, '-t', '2'];
  if (drafter) args.push('-md', drafter);
  const child = spawn(TANDEM, args, {
    env: { ...process.env, TANDEM_CACHE_DIR: cacheDir, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line:\n${log}`)), 30000);
    child.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}:\n${log}`)); });
  });
  child.stderr.on('data', (d) => { log += d; });
  const server = {
    child, port, cacheDir, base: `http://127.0.0.1:${port}`,
    log: () => log,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    },
  };
  return server;
}

async function ready(s) {
  for (let i = 0; i < 300; i++) {
    const r = await fetch(`${s.base}/health`);
    if (r.status === 200) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`not ready:\n${s.log()}`);
}

async function policy(s, key = KEY) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const r = await fetch(`${s.base}/v1/internal/mtp-policy`, { headers });
  return { status: r.status, body: await r.json() };
}

async function complete(s, prompt, maxTokens = 24) {
  const r = await fetch(`${s.base}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Api-Key': KEY },
    // End-of-text suppressed, so every request runs long enough to be a profiling sample.
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, logit_bias: { 0: -100, 2: -100 } }),
  });
  assert.equal(r.status, 200);
  return (await r.json()).choices[0].text;
}

function checkShape(body) {
  assert.deepEqual(Object.keys(body).sort(), [...FIELDS].sort());
  assert.equal(body.schema_version, 1);
  assert.equal(body.samples_required, 4);
  assert.equal(body.samples_max, 12);
}

// The engine counts a finished request just after the client has its last
// byte; wait (bounded) until the policy has seen `n` samples or settled.
async function policyAfter(s, n) {
  for (let i = 0; ; i++) {
    const r = await policy(s);
    if (r.body.state !== 'profiling' || r.body.samples >= n || i >= 100) return r;
    await new Promise((res) => setTimeout(res, 20));
  }
}

// Sends requests while the policy profiles (it settles once the speedup's
// interval clears the threshold, at most at samples_max); returns the body.
async function profileUntilSettled(s, prefix) {
  for (let i = 0; i < 12; i++) {
    const { body } = await policyAfter(s, i);
    if (body.state !== 'profiling') return body;
    await complete(s, `${prefix} ${i}`);
  }
  return (await policyAfter(s, 12)).body;
}

function checkKeyFields(body, set) {
  for (const f of ['target', 'drafter', 'hardware', 'block_size']) {
    if (set) assert.notEqual(body[f], null, f); else assert.equal(body[f], null, f);
  }
  if (set) {
    assert.equal(body.target, fs.realpathSync(TARGET));
    assert.equal(body.block_size, 4);
    assert.match(body.hardware, /^cpu:.+\|t2\|(scalar|avx2|avx512)(\|x bf16)?$/);  // |x bf16: ADR 0082
  }
}

async function withServer(opts, fn) {
  const s = await start(opts);
  try { return await fn(s); } finally { assert.equal(await s.stop(), 0, 'clean exit on SIGTERM'); }
}

test('no drafter: unavailable / no_mtp_dispatch', async () => {
  await withServer({ drafter: null }, async (s) => {
    await ready(s);
    const { body } = await policy(s);
    checkShape(body);
    assert.equal(body.state, 'unavailable');
    assert.equal(body.reason, 'no_mtp_dispatch');
    assert.equal(body.mtp_enabled, false);
    assert.equal(body.verdict, null);
    assert.equal(body.decline_detail, null);
    assert.equal(body.samples, 0);
    assert.equal(body.samples_remaining, null);
    checkKeyFields(body, false);
  });
});

test('TANDEM_MTP_ADAPTIVE=0: unavailable / adaptive_disabled with the static CPU default', async () => {
  await withServer({ env: { TANDEM_MTP_ADAPTIVE: '0' } }, async (s) => {
    await ready(s);
    const { body } = await policy(s);
    checkShape(body);
    assert.equal(body.state, 'unavailable');
    assert.equal(body.reason, 'adaptive_disabled');
    assert.equal(body.mtp_enabled, true);
    assert.equal(body.acceptance_rate, null);
    checkKeyFields(body, false);
  });
});

for (const [value, enabled] of [['1', true], ['0', false]]) {
  test(`TANDEM_ENABLE_MTP_B1=${value}: forced ${enabled}`, async () => {
    await withServer({ env: { TANDEM_ENABLE_MTP_B1: value } }, async (s) => {
      await ready(s);
      const { body } = await policy(s);
      checkShape(body);
      assert.equal(body.state, 'forced');
      assert.equal(body.mtp_enabled, enabled);
      assert.equal(body.reason, null);
      assert.equal(body.verdict, null);
      assert.equal(body.acceptance_rate, null);
      assert.equal(body.samples, 0);
      assert.equal(body.samples_remaining, null);
      checkKeyFields(body, true);
    });
  });
}

test('profiling counts 4 -> 1, settles, persists, and a restart is settled at once', async () => {
  const cacheDir = tempDir('profile');
  let settledSamples = 0;
  await withServer({ cacheDir }, async (s) => {
    await ready(s);
    // Poll from several concurrent loops while profiling: every body must be complete.
    let polling = true;
    const pollers = [0, 1, 2].map(async () => {
      let n = 0;
      while (polling && n++ < 2000) {
        const { status, body } = await policy(s);
        assert.equal(status, 200);
        checkShape(body);
        assert.ok(['profiling', 'settled'].includes(body.state));
      }
    });
    for (let i = 0; i < 4; i++) {
      const { body } = await policyAfter(s, i);
      assert.equal(body.state, 'profiling');
      assert.equal(body.samples, i);
      assert.equal(body.samples_remaining, 4 - i);
      assert.equal(body.mtp_enabled, true);
      assert.equal(body.verdict, null);
      checkKeyFields(body, true);
      if (i === 0) assert.equal(body.acceptance_rate, null);
      else assert.ok(body.acceptance_rate > 0 && body.acceptance_rate <= 1);
      await complete(s, `Call me Ishmael. Some years ago ${i}`);
    }
    // Past the minimum the policy may sample more while the interval straddles the threshold.
    for (let i = 4; i < 12; i++) {
      const { body } = await policyAfter(s, i);
      if (body.state !== 'profiling') break;
      assert.equal(body.samples, i);
      assert.equal(body.samples_remaining, 12 - i);
      assert.ok(body.speedup_low <= body.speedup_threshold && body.speedup_high > body.speedup_threshold);
      await complete(s, `Call me Ishmael. Some years ago ${i}`);
    }
    polling = false;
    await Promise.all(pollers);
    const { body } = await policyAfter(s, 12);
    assert.equal(body.state, 'settled');
    assert.ok(['enable', 'decline'].includes(body.verdict));
    assert.equal(body.mtp_enabled, body.verdict === 'enable');
    assert.ok(body.samples >= 4 && body.samples <= 12);
    assert.equal(body.samples_remaining, null);
    assert.equal(Math.round(body.acceptance_rate * 100) / 100, body.acceptance_rate);
    assert.ok(['interval_cleared', 'max_samples'].includes(body.settle_reason));
    if (body.settle_reason === 'max_samples') assert.equal(body.samples, 12);
    assert.equal(body.verdict_source, 'measured');
    assert.ok(body.speedup_low <= body.speedup && body.speedup <= body.speedup_high);
    assert.ok(body.speedup_log_stddev >= 0);
    assert.equal(body.speedup_threshold, 1.0);  // a CPU's static default enables: one threshold at 1.0
    assert.equal(body.reprofile_reason, null);
    assert.equal(body.reprofiles, 0);
    assert.match(s.log(), /speculation policy settled: verdict (enable|decline) — estimated speedup [0-9.]+ = \(accepted_len/);
    const hints = fs.readdirSync(path.join(cacheDir, 'mtp-policy'));
    assert.equal(hints.length, 1);
    assert.match(hints[0], /^[0-9a-f]{16}\.json$/);
    const hint = JSON.parse(fs.readFileSync(path.join(cacheDir, 'mtp-policy', hints[0]), 'utf8'));
    assert.equal(hint.version, 2);
    assert.ok(Number.isInteger(hint.kernel_version));
    assert.equal(hint.verdict, body.verdict);
    assert.equal(hint.samples, body.samples);
    assert.equal(hint.settle_reason, body.settle_reason);
    assert.equal(hint.speedup_low, body.speedup_low);
    assert.equal(hint.speedup_high, body.speedup_high);
    settledSamples = body.samples;
    const metrics = await (await fetch(`${s.base}/metrics`, { headers: { 'X-Api-Key': KEY } })).text();
    assert.match(metrics, /tandem:mtp_policy_state\{model_name="[^"]*",state="settled"\} 1/);
    assert.match(metrics, /tandem:mtp_policy_estimated_speedup\{model_name="[^"]*"\} [0-9.]+/);
  });
  await withServer({ cacheDir }, async (s) => {
    await ready(s);
    const { body } = await policy(s);
    assert.equal(body.state, 'settled');
    assert.equal(body.samples, settledSamples);
    assert.equal(body.verdict_source, 'hint');
  });
});

test('bad hint files mean WARN and profiling again; an unwritable cache works in memory', async () => {
  const cacheDir = tempDir('hints');
  // Settle once to learn the hint's path and body.
  await withServer({ cacheDir, env: {} }, async (s) => {
    await ready(s);
    assert.equal((await profileUntilSettled(s, 'The sea')).state, 'settled');
  });
  const dir = path.join(cacheDir, 'mtp-policy');
  const file = path.join(dir, fs.readdirSync(dir)[0]);
  const good = JSON.parse(fs.readFileSync(file, 'utf8'));
  const variants = {
    corrupt: '{"version": 1, "verdict": "ena',
    truncated: '',
    wrong_version: JSON.stringify({ ...good, version: 99 }),
    key_mismatch: JSON.stringify({ ...good, target: '/somewhere/else' }),
    out_of_range: JSON.stringify({ ...good, acceptance_rate: 7.5, samples: 1000000 }),
    kernel_version: JSON.stringify({ ...good, kernel_version: good.kernel_version + 1 }),
  };
  for (const [name, text] of Object.entries(variants)) {
    fs.writeFileSync(file, text);
    await withServer({ cacheDir }, async (s) => {
      await ready(s);
      const { body } = await policy(s);
      assert.equal(body.state, 'profiling', name);
      assert.match(body.reprofile_reason, /^hint rejected: /, name);
      assert.match(s.log(), /WARN.*speculation policy: ignoring hint/i, name);
    });
  }
  const ro = tempDir('ro');
  fs.writeFileSync(path.join(ro, 'mtp-policy'), 'a file where a directory should be');
  await withServer({ cacheDir: ro }, async (s) => {
    await ready(s);
    const body = await profileUntilSettled(s, 'Whales');
    assert.equal(body.state, 'settled');
    assert.match(s.log(), /WARN.*lives in memory only/i);
  });
});

test('a pinned non-invariant kernel: exactness_declined, even when forced; output unchanged', async () => {
  const prompts = ['It was the best of times', 'Mr. Speaker, the state of the Union'];
  const plain = await withServer({ drafter: null }, async (s) => {
    await ready(s);
    const out = [];
    for (const p of prompts) out.push(await complete(s, p, 32));
    return out;
  });
  for (const env of [{ TANDEM_GEMM: 'splitk' }, { TANDEM_GEMM: 'splitk', TANDEM_ENABLE_MTP_B1: '1' }]) {
    await withServer({ env }, async (s) => {
      await ready(s);
      const { body } = await policy(s);
      checkShape(body);
      assert.equal(body.state, 'exactness_declined');
      assert.equal(body.mtp_enabled, false);
      assert.equal(body.verdict, null);
      assert.equal(body.reason, null);
      assert.equal(body.samples, 0);
      checkKeyFields(body, true);
      assert.match(body.decline_detail,
        /^verify block position \d+ differs from the single-token chain in \d+ of \d+ logit bytes\. The kernel retry was skipped because TANDEM_GEMM is pinned\.$/);
      assert.ok(s.log().includes(`speculative decoding declined: ${body.decline_detail} Falling back to classic decode.`));
      const health = await (await fetch(`${s.base}/health`)).json();
      assert.equal(health.observability.mtp_policy.state, 'exactness_declined');
      // Served classically, with the plain server's exact output (splitk only changes M > 1 rows).
      for (let i = 0; i < prompts.length; i++) assert.equal(await complete(s, prompts[i], 32), plain[i]);
    });
  }
});

test('worker_not_ready while the model loads; the endpoint needs the key, /health does not', async () => {
  await withServer({ env: { TANDEM_LOAD_DELAY_MS: '1500' } }, async (s) => {
    const { status, body } = await policy(s);
    assert.equal(status, 200);
    checkShape(body);
    assert.equal(body.state, 'unavailable');
    assert.equal(body.reason, 'worker_not_ready');
    assert.equal(body.mtp_enabled, null);
    checkKeyFields(body, false);
    const loading = await fetch(`${s.base}/health`);
    assert.equal(loading.status, 503);
    assert.equal((await loading.json()).observability.mtp_policy.reason, 'worker_not_ready');
    assert.equal((await policy(s, null)).status, 401);
    assert.equal((await policy(s, 'wrong')).status, 401);
    await ready(s);
    assert.equal((await fetch(`${s.base}/health`)).status, 200);
    assert.equal((await policy(s)).body.state, 'profiling');
  });
});

test('smoke: the README run command configuration answers a chat request in English', async () => {
  await withServer({ drafter: DRAFT }, async (s) => {
    await ready(s);
    const r = await fetch(`${s.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 32 }),
    });
    assert.equal(r.status, 200);
    const body = await r.json();
    const text = body.choices[0].message.content;
    assert.ok(text.trim().length > 0, 'non-empty answer');
    const words = text.match(/[A-Za-z]+/g) || [];
    assert.ok(words.length >= 3, `English words expected, got ${JSON.stringify(text)}`);
    const { body: p } = await policy(s);
    checkShape(p);
    assert.ok(['profiling', 'settled', 'forced'].includes(p.state), p.state);
  });
});
