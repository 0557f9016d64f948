// Start-up configuration of the binary: every variable of docs/environment.md and the
// drafter flags. A malformed or out-of-range value exits 2 naming the variable (or flag)
// and the value, in every subcommand that reads it, before anything loads; a flag beats
// its variable; a block size or kind without a drafter is an error (kind mtp alone means
// the target's own MTP layers, an error when it has none); a drafter without
// tokenizer.json is accepted with a warning; /metrics answers while the model loads.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';

import { models, parseMetrics, startServer, tandemBin, waitFor } from './harness.mjs';

// Runs the binary with a private policy cache; a test that expects a start-up error
// gets it long before the timeout (nothing is loaded).
function run(args, env = {}, timeout = 20000) {
  const r = spawnSync(tandemBin, args, {
    env: { ...process.env, TANDEM_CACHE_DIR: path.join(os.tmpdir(), `tandem-e2e-cache-${process.pid}`), ...env },
    encoding: 'utf8',
    timeout,
  });
  return { status: r.status, signal: r.signal, out: r.stdout + r.stderr, stdout: r.stdout };
}

// Each subcommand that runs a model, with arguments that would otherwise succeed (or, for
// serve, keep serving: if a check failed to fire, the timeout turns that into a failure).
const target = models.target;
const draft = models.draft;
const COMMANDS = {
  serve: (md) => ['serve', '-m', target, '--host', '127.0.0.1', '--port', '0', '-t', '1', ...(md ? ['-md', draft] : [])],
  generate: (md) => ['generate', '-m', target, '--tokens', '1,2,3', '-n', '1', '-t', '1', ...(md ? ['-md', draft] : [])],
  probe: () => ['probe', '-m', target, '-md', draft, '-t', '1'],
  bench: (md) => ['bench', '-m', target, '-n', '1', '-r', '1', '-p', '4', '--bw-mib', '512', ...(md ? ['-md', draft, '--prompts', '1'] : [])],
};

function expectStartupError(args, env, message) {
  const r = run(args, env, 10000);
  const what = `${args.join(' ')} ${JSON.stringify(env)}`;
  assert.equal(r.status, 2, `${what}: exit ${r.status} (signal ${r.signal})\n${r.out}`);
  assert.match(r.out, message, what);
}

describe('environment variables: a malformed or out-of-range value exits 2 naming it', () => {
  // [variable, value, needs a drafter, what the message must also say]
  const common = [
    ['TANDEM_MTP_ADAPTIVE', 'bogus', false, /not a boolean/],
    ['TANDEM_ENABLE_MTP_B1', 'bogus', false, /not a boolean/],
    ['TANDEM_MTP_ALLOW_INEXACT', 'maybe', false, /not a boolean/],
    ['TANDEM_GEMM', 'fast', false, /invariant, splitk/],
    ['TANDEM_DEVICE', 'gpu9', false, /auto, cpu, cuda, cuda:N/],
    ['TANDEM_WEIGHTS', 'q9', false, /stored, q8_0, q4_0, q4_k/],
    ['TANDEM_KERNELS', 'sse9', false, /scalar.*avx2, avx512/],
    ['TANDEM_LOG_LEVEL', 'loud', false, /trace, debug, info/],
    ['TANDEM_DRAFT_KIND', 'big', true, /draft, mtp/],
    ['TANDEM_DRAFT_BLOCK_SIZE', '99', true, /out of range; accepted: 2\.\.16/],
    ['TANDEM_DRAFT_BLOCK_SIZE', '1', true, /out of range; accepted: 2\.\.16/],
    ['TANDEM_DRAFT_BLOCK_SIZE', 'four', true, /not an integer/],
    // The GPU knobs, checked in every build (a CPU-only binary refuses the same typos).
    ['TANDEM_CUDA_SMALL_TILE', 'abc', false, /not a small-tile variant; accepted: 0\.\.22/],
    ['TANDEM_CUDA_SMALL_TILE', '20,9,3', false, /not a small-tile variant/],
    ['TANDEM_CUDA_FUSE', 'x', false, /not a boolean/],
    ['TANDEM_CUDA_FUSE_NORM', 'x', false, /not a boolean/],
    ['TANDEM_CUDA_FUSE_LAUNCHES', 'x', false, /not a boolean/],
    ['TANDEM_CUDA_DEVICE_PICK', 'host', false, /not a boolean/],
    ['TANDEM_CUDA_GRAPH_PICK', 'after', false, /not a boolean/],
    ['TANDEM_CUDA_PDL', 'of', false, /not a boolean/],
    ['TANDEM_CUDA_ATTENTION', 'flash', false, /serial, split, kvsplit, tile/],
    ['TANDEM_CUDA_LARGE_TILE', '18', false, /out of range; accepted: 0\.\.17/],
    ['TANDEM_CUDA_TILE_SLICES', 'maybe', false, /not a boolean/],
    ['TANDEM_CUDA_WIDE_TILE', '5', false, /out of range; accepted: 0\.\.4/],
    ['TANDEM_CUDA_ROW_NORM', '2', false, /not a boolean/],
    ['TANDEM_CUDA_CHUNK_ROWS', '0', false, /out of range; accepted: 1\.\.65536/],
    ['TANDEM_CUDA_ACTIVATIONS', 'fp16', false, /bf16, f32/],
    ['TANDEM_CUDA_GRAPH_STRIDE', 'long', false, /bucketed, pool/],
    ['TANDEM_CUDA_UPLOAD', 'mapped', false, /pinned, pageable/],
    ['TANDEM_CUDA_UPLOAD_CHUNK_MIB', '0', false, /out of range; accepted: 1\.\.4096/],
    ['TANDEM_STEP_TIMING', '2', false, /not a boolean/],
  ];
  for (const [command, argsFor] of Object.entries(COMMANDS)) {
    it(`tandem ${command}`, () => {
      for (const [name, value, md, detail] of common) {
        const message = new RegExp(`${name}='${value}'[^\\n]*${detail.source}`);
        expectStartupError(argsFor(md), { [name]: value }, message);
      }
    });
  }

  it("tandem serve's own variables, and the flags' TANDEM_* / LLAMA_ARG_* mirrors", () => {
    const cases = [
      ['TANDEM_SHUTDOWN_DRAIN_MS', 'soon', /not an integer/],
      ['TANDEM_SHUTDOWN_DRAIN_MS', '-1', /out of range/],
      ['TANDEM_LOAD_DELAY_MS', '5s', /not an integer/],
      ['TANDEM_PORT', '70000', /--port/],
      ['LLAMA_ARG_PORT', 'http', /--port/],
      ['TANDEM_CTX_SIZE', '-1', /--ctx-size/],
      ['LLAMA_ARG_CTX_SIZE', 'big', /--ctx-size/],
      ['TANDEM_PARALLEL', '0', /--parallel/],
      ['LLAMA_ARG_N_PARALLEL', 'many', /--parallel/],
      ['TANDEM_BATCH_SIZE', '0', /--batch-size/],
      ['LLAMA_ARG_BATCH', '1.5', /--batch-size/],
      ['TANDEM_THREADS', '-2', /--threads/],
      ['LLAMA_ARG_THREADS', 'all', /--threads/],
      ['TANDEM_NO_PREFIX_CACHE', 'perhaps', /not a boolean/],
      ['TANDEM_MODEL_MATCH', 'loose', /--model-match/],
      ['TANDEM_POOLING', 'cls', /--pooling/],
      ['LLAMA_ARG_POOLING', 'rank', /--pooling/],
      ['TANDEM_EMBEDDINGS', 'perhaps', /not a boolean/],
      ['LLAMA_ARG_EMBEDDINGS', 'sometimes', /not a boolean/],
    ];
    for (const [name, value, detail] of cases) {
      const message = new RegExp(`${name}='${value}'[^\\n]*${detail.source}`);
      // Without the flag the variable mirrors (a given flag wins: the variable is not read).
      const args = ['serve', '-m', target, '--host', '127.0.0.1'];
      if (!/PORT/.test(name)) args.push('--port', '0');
      if (!/THREADS/.test(name)) args.push('-t', '1');
      expectStartupError(args, { [name]: value }, message);
    }
  });

  it('API keys from the environment: errors name the variable (the keys themselves are not repeated)', () => {
    const args = COMMANDS.serve(false);
    expectStartupError(args, { TANDEM_API_KEY_FILE: '/nonexistent/keys' }, /--api-key-file \/nonexistent\/keys: cannot open \(from TANDEM_API_KEY_FILE\)/);
    expectStartupError(args, { LLAMA_API_KEY: 'sk-secret-1,,sk-secret-2' }, /--api-key: empty key .*\(from LLAMA_API_KEY\)/);
    assert.doesNotMatch(run(args, { LLAMA_API_KEY: 'sk-secret-1,,sk-secret-2' }, 10000).out, /sk-secret/);
  });

  it('a blank value counts as unset', () => {
    const blank = {
      TANDEM_MTP_ADAPTIVE: ' ',
      TANDEM_ENABLE_MTP_B1: '',
      TANDEM_GEMM: '',
      TANDEM_DRAFT_BLOCK_SIZE: ' ',
      TANDEM_LOG_LEVEL: '',
      TANDEM_CUDA_SMALL_TILE: ' ',
      TANDEM_CUDA_PDL: '',
      TANDEM_STEP_TIMING: ' ',
    };
    const r = run(COMMANDS.probe(), blank);
    assert.equal(r.status, 0, r.out);
    assert.match(r.stdout, /^block_size: 4$/m, 'the default K (the draft config declares none)');
    assert.match(r.out, / info .*block size 4 from default/, 'a blank TANDEM_LOG_LEVEL is the default, info');
    // Values are trimmed and case-insensitive.
    const warn = run(COMMANDS.probe(), { TANDEM_LOG_LEVEL: ' Warn ', TANDEM_GEMM: ' Invariant' });
    assert.equal(warn.status, 0, warn.out);
    assert.doesNotMatch(warn.out, / info /);
  });

  it('a flag wins over its variable, which is then not read (even when malformed)', async () => {
    const server = await startServer({ extra: ['-np', '2'], env: { TANDEM_PARALLEL: 'many', LLAMA_ARG_N_PARALLEL: '0' } });
    try {
      assert.match(server.log, /2 parallel sequences/);
    } finally {
      await server.stop();
    }
  });
});

describe('--draft-block-size', () => {
  it('K outside 2..16 exits 2 naming the flag (serve, generate, probe), even with the variable set', () => {
    for (const command of ['serve', 'generate', 'probe']) {
      for (const k of ['0', '-1', '1', '17', '99']) {
        for (const env of [{}, { TANDEM_DRAFT_BLOCK_SIZE: '3' }]) {
          expectStartupError([...COMMANDS[command](true), '--draft-block-size', k], env, /--draft-block-size/);
        }
      }
    }
  });

  it('a block size or draft kind without a drafter (-md) exits 2', () => {
    for (const command of ['serve', 'generate']) {
      expectStartupError([...COMMANDS[command](false), '--draft-block-size', '4'], {}, /--draft-block-size 4 needs a drafter/);
      expectStartupError([...COMMANDS[command](false), '--draft-kind', 'draft'], {}, /--draft-kind draft needs a drafter/);
      // --draft-kind mtp alone drafts with MTP layers inside the target's checkpoint (ADR 0027):
      // this target has none, which the loader says (exit 1, as for any drafter that does not load).
      const r = run([...COMMANDS[command](false), '--draft-kind', 'mtp'], {}, 10000);
      assert.equal(r.status, 1, `${command} --draft-kind mtp: exit ${r.status} (signal ${r.signal})\n${r.out}`);
      assert.match(r.out, /--draft-kind mtp without -md drafts with the MTP layers of the target's own checkpoint, but .* holds no MTP layers/);
    }
    for (const command of ['serve', 'generate', 'bench'])
      expectStartupError(COMMANDS[command](false), { TANDEM_DRAFT_BLOCK_SIZE: '4' }, /TANDEM_DRAFT_BLOCK_SIZE='4' needs a drafter/);
    expectStartupError(['probe', '-m', target], {}, /-md\/--model-draft DIR is required/);
  });

  it('the flag beats TANDEM_DRAFT_BLOCK_SIZE, which beats the drafter config and the default', () => {
    const flag = run([...COMMANDS.probe(), '--draft-block-size', '3'], { TANDEM_DRAFT_BLOCK_SIZE: '5' });
    assert.equal(flag.status, 0, flag.out);
    assert.match(flag.stdout, /^block_size: 3$/m);
    assert.match(flag.out, /block size 3 from --draft-block-size/);
    const shadowed = run([...COMMANDS.probe(), '--draft-block-size', '3'], { TANDEM_DRAFT_BLOCK_SIZE: 'four' });
    assert.equal(shadowed.status, 0, `the flag is given, so the variable is not read:\n${shadowed.out}`);
    const env = run(COMMANDS.probe(), { TANDEM_DRAFT_BLOCK_SIZE: '5' });
    assert.equal(env.status, 0, env.out);
    assert.match(env.stdout, /^block_size: 5$/m);
    assert.match(env.out, /block size 5 from TANDEM_DRAFT_BLOCK_SIZE/);
    // The MTP head's config.json declares draft_block_size 4: the variable beats it.
    const mtp = ['probe', '-m', target, '-md', models.mtp, '-t', '1'];
    const declared = run(mtp);
    assert.equal(declared.status, 0, declared.out);
    assert.match(declared.out, /block size 4 from drafter config/);
    const over = run(mtp, { TANDEM_DRAFT_BLOCK_SIZE: '5' });
    assert.equal(over.status, 0, over.out);
    assert.match(over.stdout, /^block_size: 5$/m);
  });
});

describe('a draft model without tokenizer.json', () => {
  it('is accepted with a warning that the vocabularies could not be compared', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-draft-notok-'));
    try {
      for (const f of readdirSync(draft)) if (f !== 'tokenizer.json') symlinkSync(path.join(draft, f), path.join(dir, f));
      const r = run(['probe', '-m', target, '-md', dir, '-t', '1']);
      assert.equal(r.status, 0, r.out);
      assert.match(r.out, /WARN.*tokenizer\.json not found: the vocabularies of the drafter .* could not be compared/i);
      // With both tokenizers present there is nothing to warn about.
      const both = run(COMMANDS.probe());
      assert.equal(both.status, 0, both.out);
      assert.doesNotMatch(both.out, /could not be compared/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('/metrics while the model loads', () => {
  it('answers a valid Prometheus body with the server state, then the engine families once ready', async () => {
    let loading;
    const server = await startServer({
      env: { TANDEM_LOAD_DELAY_MS: '3000' },
      whileLoading: async (s) => {
        const res = await s.fetch('/metrics');
        loading = { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
      },
    });
    try {
      assert.equal(loading.status, 200);
      assert.match(loading.type, /^text\/plain/);
      assert.ok(loading.text.length > 0, 'an empty body while loading');
      // Text format 0.0.4: every sample line is `name{labels} value`, of a family declared by # TYPE.
      const declared = new Set([...loading.text.matchAll(/^# TYPE (\S+) (gauge|counter|histogram)$/gm)].map((m) => m[1]));
      for (const line of loading.text.split('\n')) {
        if (!line || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
        const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? (\S+)$/);
        assert.ok(m, `not a sample line: ${JSON.stringify(line)}`);
        assert.ok(declared.has(m[1]), `${m[1]} has no # TYPE`);
        assert.ok(!Number.isNaN(Number(m[4])), line);
      }
      const before = parseMetrics(loading.text);
      assert.equal(before.get('tandem:server_state{state="loading"}'), 1);
      assert.equal(before.get('tandem:server_state{state="ready"}'), 0);
      assert.equal(before.get('tandem:request_success_total{finished_reason="stop"}'), 0);
      const ready = await server.metrics();
      assert.equal(ready.get('tandem:server_state{state="loading"}'), 0);
      assert.equal(ready.get('tandem:server_state{state="ready"}'), 1);
      assert.equal(typeof ready.get('tandem:kv_cache_blocks_total'), 'number');
    } finally {
      await server.stop();
    }
  });
});
