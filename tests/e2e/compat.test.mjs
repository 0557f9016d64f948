// The routes that make tandem a drop-in for other servers' clients (docs/api.md):
// llama-server's /tokenize, /detokenize, /apply-template, /props, /slots and /completion;
// OpenAI's /v1/models/{id} and /v1/embeddings (official openai client); Ollama's /api/*
// through the official `ollama` Python client (tests/e2e/ollama_client.py); CORS.
// One server for the whole file. Where a route has a twin (the OpenAI completion of the same
// prompt at temperature 0), the twin's answer is the reference.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import { API_KEY, MODEL_ID, OpenAI, startServer, waitFor } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const ALLOWED = 'http://allowed.example';
const PROMPT = 'Call me Ishmael. Some years ago, never mind how long precisely,';
const CHAT = [{ role: 'user', content: 'Tell me about the whale and the sea.' }];

let server;
let client;

before(async () => {
  server = await startServer({ extra: ['-np', '2', '--embeddings', '--cors-origin', `${ALLOWED}, http://other.example`] });
  client = server.client();
});

after(async () => {
  if (server) await server.stop();
});

// Runs a command to its end without blocking the event loop: {status, stdout, stderr}.
function runAsync(command, args, { env, timeoutMs }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
  });
}

// Reads an SSE body into its events' JSON objects.
async function sseEvents(res) {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => JSON.parse(e.slice(6)));
}

describe('llama-server: /tokenize, /detokenize, /apply-template', () => {
  it('tokenize counts what /v1/completions bills, pieces join to the text, detokenize inverts it', async () => {
    const plain = await server.post('/tokenize', { content: PROMPT });
    assert.equal(plain.status, 200, plain.text);
    assert.ok(plain.json.tokens.every(Number.isInteger));
    const billed = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, max_tokens: 1, temperature: 0 });
    // /v1/completions adds the tokenizer's special tokens; /tokenize does so with add_special.
    const special = await server.post('/tokenize', { content: PROMPT, add_special: true });
    assert.equal(special.json.tokens.length, billed.usage.prompt_tokens);
    const pieces = await server.post('/tokenize', { content: PROMPT, with_pieces: true, unknown_field: 1 });
    assert.deepEqual(pieces.json.tokens.map((t) => t.id), plain.json.tokens);
    assert.equal(pieces.json.tokens.map((t) => t.piece).join(''), PROMPT);
    const back = await server.post('/detokenize', { tokens: plain.json.tokens });
    assert.equal(back.status, 200, back.text);
    assert.equal(back.json.content, PROMPT);
  });

  it('wrongly typed or missing fields are 400s naming them', async () => {
    for (const [route, body, param] of [
      ['/tokenize', { content: 5 }, 'content'],
      ['/tokenize', {}, 'content'],
      ['/tokenize', { content: 'x', with_pieces: 'yes' }, 'with_pieces'],
      ['/detokenize', { tokens: 'abc' }, 'tokens'],
      ['/detokenize', { tokens: [1, -4] }, 'tokens'],
      ['/detokenize', { tokens: [1e9] }, 'tokens'],
      ['/apply-template', { messages: 'hi' }, 'messages'],
    ]) {
      const r = await server.post(route, body);
      assert.equal(r.status, 400, `${route} ${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.error.param, param, r.text);
    }
    const wrong = await server.fetch('/tokenize');
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get('allow'), 'POST');
    const broken = await server.post('/tokenize', '{"content":');
    assert.equal(broken.status, 400);
    assert.equal(broken.json.error.code, 'invalid_json');
  });

  it('apply-template renders exactly the prompt that chat completions bill', async () => {
    const r = await server.post('/apply-template', { messages: CHAT });
    assert.equal(r.status, 200, r.text);
    // The bundled ChatML template (models/tandem-target/tokenizer_config.json).
    assert.equal(r.json.prompt, `<|im_start|>user\n${CHAT[0].content}<|im_end|>\n<|im_start|>assistant\n`);
    const chat = await client.chat.completions.create({ model: MODEL_ID, messages: CHAT, max_tokens: 1, temperature: 0 });
    const tokens = await server.post('/tokenize', { content: r.json.prompt });
    assert.equal(tokens.json.tokens.length, chat.usage.prompt_tokens);
  });
});

describe('llama-server: /completion', () => {
  it('matches /v1/completions at temperature 0, with llama-server fields and timings', async () => {
    const ref = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, max_tokens: 12, temperature: 0 });
    const r = await server.post('/completion', { prompt: PROMPT, n_predict: 12, temperature: 0, cache_prompt: true, mystery: [1] });
    assert.equal(r.status, 200, r.text);
    const j = r.json;
    assert.equal(j.content, ref.choices[0].text);
    assert.equal(j.tokens_predicted, 12);
    assert.equal(j.tokens_evaluated, ref.usage.prompt_tokens);
    assert.equal(j.stop, true);
    assert.equal(j.stop_type, 'limit');
    assert.equal(j.stopped_limit, true);
    assert.equal(j.stopped_eos, false);
    assert.equal(j.model, MODEL_ID);
    assert.equal(j.timings.predicted_n, 12);
    assert.equal(j.timings.prompt_n + j.timings.cache_n, ref.usage.prompt_tokens);
    for (const k of ['prompt_ms', 'predicted_ms', 'predicted_per_second', 'prompt_per_second'])
      assert.equal(typeof j.timings[k], 'number', k);
    assert.equal(j.generation_settings.n_predict, 12);
    assert.equal(j.generation_settings.temperature, 0);
  });

  it('n_probs gives completion_probabilities: the logprobs /v1/completions reports for the same tokens', async () => {
    const ref = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, max_tokens: 5, temperature: 0, logprobs: 3 });
    const r = await server.post('/completion', { prompt: PROMPT, n_predict: 5, temperature: 0, n_probs: 3 });
    assert.equal(r.status, 200, r.text);
    const probs = r.json.completion_probabilities;
    assert.equal(probs.length, 5);
    assert.equal(probs.map((p) => p.token).join(''), r.json.content);
    assert.deepEqual(probs.map((p) => p.token), ref.choices[0].logprobs.tokens);
    assert.deepEqual(probs.map((p) => p.logprob), ref.choices[0].logprobs.token_logprobs);
    for (let i = 0; i < probs.length; i++) {
      assert.equal(probs[i].top_logprobs.length, 3);
      assert.ok(Number.isInteger(probs[i].id));
      const refTop = ref.choices[0].logprobs.top_logprobs[i];
      for (const alt of probs[i].top_logprobs) assert.equal(refTop[alt.token], alt.logprob, `token ${i}: ${alt.token}`);
    }
    const none = await server.post('/completion', { prompt: PROMPT, n_predict: 2, temperature: 0 });
    assert.equal(none.json.completion_probabilities, undefined);
  });

  it('a token-id prompt is the same prompt as its text', async () => {
    const ids = (await server.post('/tokenize', { content: PROMPT, add_special: true })).json.tokens;
    const byText = await server.post('/completion', { prompt: PROMPT, n_predict: 6, temperature: 0 });
    const byIds = await server.post('/completion', { prompt: ids, n_predict: 6, temperature: 0 });
    assert.equal(byIds.status, 200, byIds.text);
    assert.equal(byIds.json.content, byText.json.content);
    assert.equal(byIds.json.tokens_evaluated, ids.length);
  });

  it('streams llama-server SSE events whose contents join to the whole reply; the last carries stop and timings', async () => {
    const whole = await server.post('/completion', { prompt: PROMPT, n_predict: 10, temperature: 0.9, seed: 7 });
    const res = await server.fetch('/completion', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: PROMPT, n_predict: 10, temperature: 0.9, seed: 7, stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    const events = await sseEvents(res);
    const last = events.at(-1);
    assert.equal(last.stop, true);
    assert.equal(last.tokens_predicted, 10);
    assert.ok(last.timings && last.timings.predicted_n === 10);
    assert.ok(events.slice(0, -1).every((e) => e.stop === false && typeof e.content === 'string'));
    assert.equal(events.map((e) => e.content).join(''), whole.json.content);
  });

  it('a stop string ends it as stop_type "word", naming the word; the text before it is kept', async () => {
    const free = await server.post('/completion', { prompt: PROMPT, n_predict: 16, temperature: 0 });
    const words = free.json.content.trim().split(/\s+/);
    const word = words[Math.min(2, words.length - 1)];
    const r = await server.post('/completion', { prompt: PROMPT, n_predict: 16, temperature: 0, stop: [word] });
    assert.equal(r.json.stop_type, 'word', r.text);
    assert.equal(r.json.stopped_word, true);
    assert.equal(r.json.stopping_word, word);
    assert.equal(r.json.content, free.json.content.slice(0, free.json.content.indexOf(word)));
  });

  it('wrongly typed fields are 400s naming them; llama-server spellings are read', async () => {
    for (const [body, param] of [
      [{ prompt: PROMPT, n_predict: '8' }, 'n_predict'],
      [{ prompt: PROMPT, temperature: 'hot' }, 'temperature'],
      [{ prompt: PROMPT, top_k: 1.5 }, 'top_k'],
      [{ prompt: PROMPT, stream: 1 }, 'stream'],
      [{ prompt: PROMPT, cache_prompt: 'yes' }, 'cache_prompt'],
      [{ prompt: PROMPT, n_probs: '3' }, 'n_probs'],
      [{ prompt: PROMPT, n_probs: 21 }, 'n_probs'],
      [{ prompt: PROMPT, repeat_penalty: 'x' }, 'repeat_penalty'],
      [{ prompt: PROMPT, stop: 'x', seed: 'y' }, 'seed'],
      [{ n_predict: 3 }, 'prompt'],
      [{ prompt: PROMPT, n_predict: 0 }, 'n_predict'],
      [{ prompt: PROMPT, temperature: 9 }, 'temperature'],
    ]) {
      const r = await server.post('/completion', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.error.param, param, r.text);
    }
    // seed -1 is llama-server's "random"; n_predict -1 runs to the context (bounded here by a stop at EOS or
    // length; only the acceptance is checked).
    const r = await server.post('/completion', { prompt: PROMPT, n_predict: 2, seed: -1, repeat_penalty: 1.1, logit_bias: [[5, -1]] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.generation_settings.repeat_penalty, 1.100000023841858);
  });
});

describe('llama-server: /props and /slots', () => {
  it('/props reports the slots, context, template and build', async () => {
    const r = await (await server.fetch('/props')).json();
    assert.equal(r.total_slots, 2);
    assert.equal(r.default_generation_settings.n_ctx, r.n_ctx);
    assert.ok(r.n_ctx > 0);
    assert.equal(r.default_generation_settings.params.seed, -1);
    assert.equal(r.default_generation_settings.params.grammar, '', 'no serve --grammar: empty, as llama-server');
    assert.match(r.chat_template, /im_start/);
    assert.match(r.model_path, /tandem-target$/);
    assert.match(r.build_info, /^tandem \d+\.\d+\.\d+/);
    assert.equal(r.embeddings, true);
  });

  it("/props reports serve's --grammar, and -j's schema as the GBNF it became", async () => {
    const gbnf = 'root ::= "yes" | "no"';
    for (const [flag, value, expected] of [
      ['--grammar', gbnf, /^root ::= "yes" \| "no"$/],
      ['-j', '{"enum": ["up", "down"]}', /root ::=[^]*up[^]*down/],
    ]) {
      const own = await startServer({ extra: [flag, value] });
      try {
        const props = await (await own.fetch('/props')).json();
        assert.match(props.default_generation_settings.params.grammar, expected, flag);
      } finally {
        await own.stop();
      }
    }
  });

  it('/slots shows a streaming request in its slot while it runs, and the slot idle once it ended', async () => {
    // 1,000 tokens with EOS banned: far more than the one /slots request takes to answer.
    const props = await (await server.fetch('/props')).json();
    const eos = (await server.post('/tokenize', { content: props.eos_token })).json.tokens;
    assert.equal(eos.length, 1);
    const controller = new AbortController();
    const res = await server.fetch('/completion', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: PROMPT, n_predict: 1000, temperature: 0, stream: true, logit_bias: [[eos[0], -100]] }),
      signal: controller.signal,
    });
    const reader = res.body.getReader();
    await reader.read(); // the first event: the request is decoding
    const during = await (await server.fetch('/slots')).json();
    assert.equal(during.length, 2);
    const busy = during.filter((s) => s.is_processing);
    assert.equal(busy.length, 1, JSON.stringify(during));
    assert.ok(busy[0].id_task > 0);
    assert.equal(busy[0].params.n_predict, 1000);
    assert.equal(busy[0].next_token.has_next_token, true);
    assert.ok(busy[0].next_token.n_decoded >= 1);
    assert.equal((await server.fetch('/slots?fail_on_no_slot=1')).status, 200, 'one of two slots is free');
    controller.abort(); // the client goes away: the server cancels the request and frees its slot
    await reader.closed.catch(() => {});
    const idle = await waitFor(async () => {
      const slots = await (await server.fetch('/slots')).json();
      return slots.every((s) => !s.is_processing && s.id_task === -1) ? slots : null;
    }, { timeoutMs: 20000 });
    assert.ok(idle, 'the cancelled request left its slot');
    // A request that ran to its end left its slot before its reply ended.
    const done = await server.post('/completion', { prompt: PROMPT, n_predict: 4, temperature: 0 });
    assert.equal(done.json.id_slot, 0);
    const afterwards = await (await server.fetch('/slots')).json();
    assert.ok(afterwards.every((s) => !s.is_processing), JSON.stringify(afterwards));
  });
});

describe('OpenAI: /v1/models/{id} and /v1/embeddings', () => {
  it('retrieves the served model; an unknown id is a 404 in the OpenAI shape', async () => {
    const m = await client.models.retrieve(MODEL_ID);
    assert.equal(m.id, MODEL_ID);
    assert.equal(m.object, 'model');
    await assert.rejects(client.models.retrieve('no-such-model'), (e) => {
      assert.ok(e instanceof OpenAI.NotFoundError, String(e));
      assert.equal(e.error?.code, 'model_not_found');
      return true;
    });
  });

  it('an input embeds bitwise the same alone and inside a batch; vectors are unit length', async () => {
    const texts = ['The whale', 'Call me Ishmael.', 'A long voyage across the grey and endless sea, under a sky without stars.'];
    const batch = await client.embeddings.create({ model: MODEL_ID, input: texts });
    assert.equal(batch.data.length, 3);
    assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
    for (let i = 0; i < texts.length; i++) {
      const alone = await client.embeddings.create({ model: MODEL_ID, input: texts[i], encoding_format: 'float' });
      assert.deepEqual(alone.data[0].embedding, batch.data[i].embedding, `input ${i}`);
      const v = batch.data[i].embedding;
      assert.ok(v.length > 0);
      assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5);
    }
    // A batch in another order gives every input the same bits again.
    const reversed = await client.embeddings.create({ model: MODEL_ID, input: [...texts].reverse(), encoding_format: 'float' });
    for (let i = 0; i < texts.length; i++) assert.deepEqual(reversed.data[texts.length - 1 - i].embedding, batch.data[i].embedding);
    assert.notDeepEqual(batch.data[0].embedding, batch.data[1].embedding);
    // usage: the inputs' tokens, with the tokenizer's special tokens as /tokenize add_special counts them.
    let tokens = 0;
    for (const t of texts) tokens += (await server.post('/tokenize', { content: t, add_special: true })).json.tokens.length;
    assert.equal(batch.usage.prompt_tokens, tokens);
    assert.equal(batch.usage.total_tokens, tokens);
  });

  it('token-id inputs and base64 encoding give the same vectors', async () => {
    const ids = (await server.post('/tokenize', { content: 'The whale', add_special: true })).json.tokens;
    const byText = await server.post('/v1/embeddings', { input: 'The whale' });
    const byIds = await server.post('/v1/embeddings', { input: ids });
    const byIdsBatch = await server.post('/v1/embeddings', { input: [ids, ids.slice(0, 1)] });
    assert.deepEqual(byIds.json.data[0].embedding, byText.json.data[0].embedding);
    assert.deepEqual(byIdsBatch.json.data[0].embedding, byText.json.data[0].embedding);
    const b64 = await server.post('/v1/embeddings', { input: 'The whale', encoding_format: 'base64' });
    const buf = Buffer.from(b64.json.data[0].embedding, 'base64');
    const floats = Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4));
    assert.deepEqual(floats, byText.json.data[0].embedding);
    // The openai client asks for base64 by default and decodes it itself.
    const viaClient = await client.embeddings.create({ model: MODEL_ID, input: 'The whale' });
    assert.deepEqual(viaClient.data[0].embedding, byText.json.data[0].embedding);
  });

  it('bad inputs are 400s naming the field; an unknown model is a 404', async () => {
    for (const [body, param] of [
      [{}, 'input'],
      [{ input: 3 }, 'input'],
      [{ input: [] }, 'input'],
      [{ input: [''] }, 'input'],
      [{ input: [[1, 2], 'x', {}] }, 'input'],
      [{ input: [1e9] }, 'input'],
      [{ input: 'x', encoding_format: 'int8' }, 'encoding_format'],
      [{ input: 'x', dimensions: 3 }, 'dimensions'],
    ]) {
      const r = await server.post('/v1/embeddings', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.error.param, param, r.text);
    }
    const unknown = await server.post('/v1/embeddings', { input: 'x', model: 'nope' });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, 'model_not_found');
  });
});

describe('CORS (--cors-origin)', () => {
  it('answers a preflight 204 without credentials, for an allowed origin', async () => {
    const res = await server.fetch('/v1/chat/completions', {
      method: 'OPTIONS',
      headers: { authorization: null, origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get('access-control-allow-origin'), ALLOWED);
    assert.match(res.headers.get('access-control-allow-methods'), /POST/);
    assert.match(res.headers.get('access-control-allow-headers'), /Authorization/);
    assert.match(res.headers.get('access-control-allow-headers'), /Content-Type/);
  });

  it('marks responses (errors included) for allowed origins only', async () => {
    const ok = await server.fetch('/v1/models', { headers: { origin: 'http://other.example' } });
    assert.equal(ok.headers.get('access-control-allow-origin'), 'http://other.example');
    assert.equal(ok.headers.get('vary'), 'Origin');
    const denied = await server.fetch('/v1/models', { headers: { authorization: null, origin: ALLOWED } });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), ALLOWED);
    const stranger = await server.fetch('/v1/models', { headers: { origin: 'http://evil.example' } });
    assert.equal(stranger.headers.get('access-control-allow-origin'), null);
    const stream = await server.fetch('/completion', {
      method: 'POST',
      headers: { origin: ALLOWED, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: PROMPT, n_predict: 2, stream: true }),
    });
    assert.equal(stream.headers.get('access-control-allow-origin'), ALLOWED);
    await stream.text();
  });
});

describe('Ollama: the official ollama Python client', () => {
  const python = process.env.TANDEM_PYTHON || 'python3';
  const pythonPath = [path.join(here, 'python_modules'), process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
  const probe = spawnSync(python, ['-c', 'import ollama'], { env: { ...process.env, PYTHONPATH: pythonPath } });
  const skip = probe.status === 0 ? false : 'the ollama Python package is not installed (scripts/install-deps.sh installs it)';

  it('lists, shows and generates as Ollama does; text matches the OpenAI routes at temperature 0', { skip }, async () => {
    // Asynchronously: a blocked event loop would miss the keep-alive sockets' idle timeouts,
    // and the next request would reuse one the server has closed meanwhile.
    const r = await runAsync(python, [path.join(here, 'ollama_client.py'), server.baseURL, API_KEY, MODEL_ID], {
      env: { ...process.env, PYTHONPATH: pythonPath },
      timeoutMs: 120000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const o = JSON.parse(r.stdout);
    assert.equal(typeof o.version, 'string');
    assert.deepEqual(o.tags, [MODEL_ID]);
    assert.equal(o.show.architecture, 'llama');
    assert.ok(o.show.capabilities.includes('completion'));
    assert.ok(o.show.capabilities.includes('embedding'));
    assert.match(o.show.template, /im_start/);
    assert.deepEqual(o.ps, [MODEL_ID]);

    // /api/generate raw: the prompt as it is, like /v1/completions.
    const ref = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, max_tokens: 8, temperature: 0 });
    assert.equal(o.generate_raw.response, ref.choices[0].text);
    assert.equal(o.generate_raw.done, true);
    assert.equal(o.generate_raw.done_reason, 'length');
    assert.equal(o.generate_raw.eval_count, 8);
    assert.equal(o.generate_raw.prompt_eval_count, ref.usage.prompt_tokens);
    assert.ok(o.generate_raw.total_duration > 0);
    assert.equal(o.generate_stream.text, ref.choices[0].text);
    assert.equal(o.generate_stream.last.done, true);
    assert.equal(o.generate_stream.last.eval_count, 8);
    assert.ok(o.generate_stream.chunks > 1);

    // /api/generate templated and /api/chat: the chat template, like /v1/chat/completions.
    const chatRef = await client.chat.completions.create({ model: MODEL_ID, messages: CHAT, max_tokens: 8, temperature: 0 });
    assert.equal(o.generate_templated.response, chatRef.choices[0].message.content);
    assert.equal(o.chat.message.role, 'assistant');
    assert.equal(o.chat.message.content, chatRef.choices[0].message.content);
    assert.equal(o.chat.prompt_eval_count, chatRef.usage.prompt_tokens);
    assert.equal(o.chat.done_reason, 'length');
    assert.equal(o.chat_stream.text, chatRef.choices[0].message.content);
    assert.equal(o.chat_stream.last.done, true);
    assert.equal(o.chat_stream.last.done_reason, 'length');
    // seeded sampling through options is reproducible
    assert.equal(o.seeded[0], o.seeded[1]);
    // /api/embed and the older /api/embeddings: the vectors /v1/embeddings gives, bit for bit.
    const ref2 = await server.post('/v1/embeddings', { input: ['The whale', 'Call me Ishmael.'] });
    assert.deepEqual(o.embed, ref2.json.data.map((d) => d.embedding));
    assert.deepEqual(o.embed_one, [ref2.json.data[1].embedding]);
    assert.deepEqual(o.embeddings_legacy, ref2.json.data[0].embedding);
    // format: the output parses and validates (Python jsonschema, validate_json.py, not tandem's grammar).
    const validate = (schema, text) => {
      try {
        execFileSync('python3', [path.join(here, 'validate_json.py')], { input: JSON.stringify({ schema, text }) });
        return 'ok';
      } catch (e) {
        return `${e.stdout}${e.stderr}`.trim() || String(e);
      }
    };
    assert.equal(o.format_schema.done_reason, 'stop', JSON.stringify(o.format_schema));
    assert.equal(validate(o.format_schema.schema, o.format_schema.content), 'ok', o.format_schema.content);
    assert.equal(o.format_json.done_reason, 'stop', JSON.stringify(o.format_json));
    assert.equal(validate({ type: 'object' }, o.format_json.response), 'ok', o.format_json.response);
    // errors the client raises as ResponseError with the status
    assert.equal(o.unknown_model_status, 404);
    assert.equal(o.bad_option_status, 400);
  });
});
