// Shared helpers for the end-to-end tests: start `tandem serve` on a free
// loopback port, wait until it is ready, talk to it, and always stop it.
//
// Environment (set by CTest, see CMakeLists.txt):
//   TANDEM_BIN        path to the tandem binary (default: <repo>/build/src/app/tandem)
//   TANDEM_REPO_ROOT  repository root (default: two levels above this file)
//   TANDEM_E2E_THREADS  kernel threads of every server started (default 1)
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = process.env.TANDEM_REPO_ROOT || path.resolve(here, '..', '..');
export const tandemBin = process.env.TANDEM_BIN || path.join(repoRoot, 'build', 'src', 'app', 'tandem');
export const models = {
  target: path.join(repoRoot, 'models', 'tandem-target'),
  draft: path.join(repoRoot, 'models', 'tandem-draft'),
  mtp: path.join(repoRoot, 'models', 'tandem-mtp'),
};
export const API_KEY = 'sk-tandem-e2e-' + process.pid;
export const MODEL_ID = 'tandem-target';

// The openai client is a pinned npm dependency (package-lock.json); give a clear
// message instead of a module-resolution stack trace when `npm ci` was not run.
let OpenAIClass;
try {
  OpenAIClass = createRequire(import.meta.url)('openai').OpenAI;
} catch (e) {
  throw new Error(
    `tests/e2e: the 'openai' npm package is not installed (${e.code || e.message}). ` +
      `Run scripts/test.sh (it runs 'npm ci --prefix tests/e2e'), or run that npm ci yourself.`,
  );
}
export const OpenAI = OpenAIClass;
if (!existsSync(tandemBin)) throw new Error(`tests/e2e: tandem binary not found at ${tandemBin} (set TANDEM_BIN)`);

// Every server this process starts, so that an unexpected exit still kills them.
const live = new Set();
function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {}
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll();
    process.exit(130);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export { sleep };

// Starts `tandem serve -m <model> --port 0 --api-key <key> ...extra` and resolves once
// /health says 200. Rejects (and kills the process) if it exits or times out.
// whileLoading(server) (optional) runs once the port is known, before the wait for readiness.
export async function startServer({
  extra = [],
  env = {},
  model = models.target,
  key = API_KEY,
  timeoutMs = 60000,
  whileLoading,
} = {}) {
  const args = ['serve', '-m', model, '--host', '127.0.0.1', '--port', '0', ...(key ? ['--api-key', key] : []), ...extra];
  // One kernel thread unless told otherwise: on a machine with more runnable threads than
  // cores (CI builds beside the tests), fork-join decode with 2 threads measured 5-10x slower
  // than with 1, which made the timing-sensitive tests flaky.
  if (!extra.includes('-t') && !extra.includes('--threads')) args.push('-t', process.env.TANDEM_E2E_THREADS || '1');
  // Speculation pinned on and a private cache: a verdict persisted by an earlier run (or the
  // adaptive policy settling on "decline" on a busy machine) must not decide whether these
  // tests exercise the speculative path. tests/policy covers the policy itself.
  const isolated = { TANDEM_ENABLE_MTP_B1: '1', TANDEM_CACHE_DIR: path.join(os.tmpdir(), `tandem-e2e-cache-${process.pid}`) };
  const child = spawn(tandemBin, args, {
    env: { ...process.env, ...isolated, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let log = '';
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
  });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening on' line within ${timeoutMs} ms:\n${log}`)), timeoutMs);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`tandem serve exited (code ${code}, signal ${signal}) before listening:\n${log}`));
    });
  }).catch((e) => {
    child.kill('SIGKILL');
    throw e;
  });
  const server = {
    child,
    port,
    key,
    baseURL: `http://127.0.0.1:${port}`,
    exited,
    get log() {
      return log;
    },
    healthStatuses: [], // what /health answered while we waited for readiness
    loadingBody: undefined, // the first non-200 /health body
    client(opts = {}) {
      return new OpenAI({ baseURL: `${this.baseURL}/v1`, apiKey: key, maxRetries: 0, timeout: 120000, ...opts });
    },
    // fetch with the API key (Bearer) unless headers say otherwise.
    async fetch(route, init = {}) {
      const headers = { authorization: `Bearer ${key}`, ...(init.headers || {}) };
      for (const [k, v] of Object.entries(headers)) if (v === null) delete headers[k];
      return fetch(`${this.baseURL}${route}`, { ...init, headers });
    },
    async post(route, body, headers = {}) {
      const res = await this.fetch(route, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      let json;
      try {
        json = JSON.parse(text);
      } catch {}
      return { status: res.status, json, text, headers: res.headers };
    },
    async metrics() {
      const res = await this.fetch('/metrics');
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return parseMetrics(await res.text());
    },
    // SIGTERM, then SIGKILL if it has not exited within graceMs. Resolves to {code, signal}.
    async stop(graceMs = 15000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
  if (whileLoading) {
    try {
      await whileLoading(server);
    } catch (e) {
      child.kill('SIGKILL');
      throw e;
    }
  }
  // Wait for readiness (bounded); remember what /health said on the way.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tandem serve exited while loading:\n${log}`);
    try {
      const res = await fetch(`${server.baseURL}/health`);
      server.healthStatuses.push(res.status);
      const body = await res.text();
      if (res.status !== 200 && server.loadingBody === undefined) server.loadingBody = body;
      if (res.status === 200) break;
    } catch {}
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`tandem serve not ready within ${timeoutMs} ms:\n${log}`);
    }
    await sleep(20);
  }
  return server;
}

// Prometheus text → Map("name{labels}" → number). Every tandem series carries
// model_name="<served id>" first; it is left out of the key (so a lookup reads
// `tandem:server_state{state="ready"}`, `tandem:num_requests_running`) and the
// names seen are in the map's `modelNames` (a Set), `unlabelled` counting samples without one.
export function parseMetrics(text) {
  const out = new Map();
  out.modelNames = new Set();
  out.unlabelled = 0;
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    let key = line.slice(0, i);
    const m = key.match(/^([^{]+)\{model_name="((?:[^"\\]|\\.)*)",?(.*)\}$/);
    if (m) {
      out.modelNames.add(m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c)));
      key = m[3] ? `${m[1]}{${m[3]}}` : m[1];
    } else {
      out.unlabelled++;
    }
    out.set(key, Number(line.slice(i + 1)));
  }
  return out;
}

// Polls fn() (bounded) until it returns a truthy value; returns it, or the last value on timeout.
export async function waitFor(fn, { timeoutMs = 5000, intervalMs = 20 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let v;
  for (;;) {
    v = await fn();
    if (v || Date.now() > deadline) return v;
    await sleep(intervalMs);
  }
}

// Collects an openai-client stream into {text, chunks, finish, usage}. index: the choice to concatenate.
export async function collectStream(stream, { chat = true } = {}) {
  const chunks = [];
  const texts = new Map();
  const finishes = new Map();
  let usage = null;
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const piece = chat ? c.delta?.content ?? '' : c.text ?? '';
      texts.set(c.index, (texts.get(c.index) ?? '') + piece);
      if (c.finish_reason) finishes.set(c.index, c.finish_reason);
    }
  }
  return { text: texts.get(0) ?? '', texts, finish: finishes.get(0), finishes, usage, chunks };
}
