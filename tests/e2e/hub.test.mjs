// Models as the Hugging Face Hub ships them, and llama-server's server-wide defaults:
// a Hub cache snapshot (models--org--name/snapshots/<hash>) is served as org/name; a
// template only in chat_template.jinja is used; generation_config.json's defaults apply to
// requests that omit them (max_new_tokens caps an unbounded request), flags beat the file
// and the request beats both; --chat-template NAME; every /metrics series is labelled with
// the served model's name.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { models, startServer } from './harness.mjs';

const NO_EOS = { 0: -100, 2: -100 };
const root = mkdtempSync(path.join(os.tmpdir(), 'tandem-hub-'));
const snapshot = path.join(root, 'hub', 'models--tandem-org--tiny-llama', 'snapshots', '0123456789abcdef');
const TEMPLATE = "{% for message in messages %}[{{ message['role'] }}] {{ message['content'] }} {% endfor %}[assistant]";

before(() => {
  mkdirSync(snapshot, { recursive: true });
  for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) symlinkSync(path.join(models.target, f), path.join(snapshot, f));
  // transformers' newer layout: the template lives in chat_template.jinja, not in tokenizer_config.json.
  const cfg = JSON.parse(readFileSync(path.join(models.target, 'tokenizer_config.json'), 'utf8'));
  delete cfg.chat_template;
  writeFileSync(path.join(snapshot, 'tokenizer_config.json'), JSON.stringify(cfg));
  writeFileSync(path.join(snapshot, 'chat_template.jinja'), TEMPLATE);
  writeFileSync(path.join(snapshot, 'generation_config.json'), JSON.stringify({ eos_token_id: [0, 2], max_new_tokens: 5, temperature: 0 }));
});
after(() => rmSync(root, { recursive: true, force: true }));

describe('a Hub cache snapshot with chat_template.jinja and generation_config.json', () => {
  let server;
  before(async () => {
    server = await startServer({ model: snapshot });
  });
  after(async () => server && (await server.stop()));

  it('is served as org/name, and start-up reports the request defaults with their sources', async () => {
    const page = await server.client().models.list();
    assert.deepEqual(page.data.map((m) => m.id), ['tandem-org/tiny-llama']);
    assert.match(server.log, /request defaults: temperature=0 \(generation_config\.json\)/);
    assert.match(server.log, /max_tokens=5 \(generation_config\.json max_new_tokens\)/);
  });

  it('chat renders chat_template.jinja (the same tokens as the rendered text as a prompt)', async () => {
    const client = server.client();
    const chat = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Call me Ishmael.' }], max_tokens: 6, temperature: 0, logit_bias: NO_EOS });
    const text = await client.completions.create({ prompt: '[user] Call me Ishmael. [assistant]', max_tokens: 6, temperature: 0, logit_bias: NO_EOS });
    assert.equal(chat.usage.prompt_tokens, text.usage.prompt_tokens);
    assert.equal(chat.choices[0].message.content, text.choices[0].text);
  });

  it("generation_config.json's max_new_tokens caps a request without max_tokens; its temperature applies", async () => {
    const client = server.client();
    const body = { prompt: 'The whale', logit_bias: NO_EOS };
    const capped = await client.completions.create(body);
    assert.equal(capped.usage.completion_tokens, 5);
    assert.equal(capped.choices[0].finish_reason, 'length');
    // The file's temperature 0: two unseeded requests agree with an explicitly greedy one.
    const again = await client.completions.create(body);
    const greedy = await client.completions.create({ ...body, temperature: 0, max_tokens: 5 });
    assert.equal(capped.choices[0].text, greedy.choices[0].text);
    assert.equal(again.choices[0].text, greedy.choices[0].text);
    // The request's own max_tokens wins.
    const own = await client.completions.create({ ...body, max_tokens: 8 });
    assert.equal(own.usage.completion_tokens, 8);
  });

  it('every /metrics series carries model_name; latency, queue time and preemptions are there', async () => {
    const m = await server.metrics();
    assert.deepEqual([...m.modelNames], ['tandem-org/tiny-llama']);
    assert.equal(m.unlabelled, 0, 'a sample without model_name');
    assert.ok(m.get('tandem:e2e_request_latency_seconds_count') >= 5);
    assert.ok(m.get('tandem:e2e_request_latency_seconds_sum') > 0);
    assert.ok(m.get('tandem:request_queue_time_seconds_count') >= 5);
    assert.equal(m.get('tandem:num_preemptions_total'), 0);
    const text = await (await server.fetch('/metrics')).text();
    assert.match(text, /^# TYPE tandem:e2e_request_latency_seconds histogram$/m);
    assert.match(text, /^tandem:request_queue_time_seconds_bucket\{model_name="tandem-org\/tiny-llama",le="0"\} \d+$/m);
  });
});

describe('server flags over generation_config.json', () => {
  let server;
  before(async () => {
    server = await startServer({ model: snapshot, extra: ['-n', '3', '--temp', '0.5', '-a', 'custom-id', '--chat-template', 'chatml'] });
  });
  after(async () => server && (await server.stop()));

  it('-n caps instead of max_new_tokens, --temp replaces the file\'s, --alias names the model', async () => {
    assert.match(server.log, /request defaults: temperature=0\.5 \(--temp\)/);
    assert.match(server.log, /max_tokens=3 \(-n\)/);
    const client = server.client();
    const r = await client.completions.create({ prompt: 'The whale', logit_bias: NO_EOS, seed: 1 });
    assert.equal(r.usage.completion_tokens, 3);
    assert.equal(r.model, 'custom-id');
    assert.deepEqual([...(await server.metrics()).modelNames], ['custom-id']);
  });

  it('--chat-template chatml replaces chat_template.jinja', async () => {
    const client = server.client();
    const chat = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0, logit_bias: NO_EOS });
    const text = await client.completions.create({ prompt: '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n', max_tokens: 4, temperature: 0, logit_bias: NO_EOS });
    assert.equal(chat.usage.prompt_tokens, text.usage.prompt_tokens);
    assert.equal(chat.choices[0].message.content, text.choices[0].text);
  });
});
