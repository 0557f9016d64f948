// Tool calls in the three syntaxes tandem parses, through the official openai client, each
// whole and streamed: Mistral's [TOOL_CALLS] as a special token (the Mistral-style
// tokenizer and template of tests/fixtures/mistral-style, with the bundled weights), and
// Llama 3.x JSON (a Llama-3.1-style template given with --chat-template-file). The Hermes /
// Qwen <tool_call> syntax of the bundled template is covered in structured.test.mjs.
// Arguments are validated with Python jsonschema (validate_json.py).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import { collectStream, models, repoRoot, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const MARKER_ID = 8191; // [TOOL_CALLS] in the Mistral-style tokenizer (make_mistral_style.py)

function validate(schema, text) {
  try {
    execFileSync('python3', [path.join(here, 'validate_json.py')], { input: JSON.stringify({ schema, text }) });
    return 'ok';
  } catch (e) {
    return `${e.stdout}${e.stderr}`.trim() || String(e);
  }
}

const TIME = {
  type: 'function',
  function: {
    name: 'get_time',
    description: 'The time in a zone',
    parameters: {
      type: 'object',
      properties: { zone: { type: 'string', maxLength: 10 } },
      required: ['zone'],
      additionalProperties: false,
    },
  },
};
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const ASK = [{ role: 'user', content: 'What time is it in Oslo?' }];

// A Llama-3.1-style template: tools as JSON in the user turn, calls as {"name", "parameters"},
// results in the ipython role (what detect_tool_call_format reads as the Llama 3 syntax).
const LLAMA3_TEMPLATE = `{%- for message in messages %}
{%- if message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- for call in message['tool_calls'] %}{{- '{"name": ' + (call['function']['name'] | tojson) + ', "parameters": ' + (call['function']['arguments'] | tojson) + '}' }}{%- if not loop.last %}{{- '; ' }}{%- endif %}{%- endfor %}
{{- '<|eot_id|>' }}
{%- elif message['role'] == 'tool' %}
{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}
{%- if tools and loop.last and message['role'] == 'user' %}{{- 'Respond with a JSON function call. Functions: ' + (tools | tojson) + '\\n\\n' }}{%- endif %}
{{- message['content'] + '<|eot_id|>' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}`;

let dir, mistral, llama3;

// A model directory of `weights` with the Mistral-style tokenizer files.
function mistralStyle(weights, name) {
  const d = path.join(dir, name);
  mkdirSync(d);
  for (const f of ['config.json', 'generation_config.json']) copyFileSync(path.join(weights, f), path.join(d, f));
  symlinkSync(path.join(weights, 'model.safetensors'), path.join(d, 'model.safetensors'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(path.join(repoRoot, 'tests/fixtures/mistral-style', f), path.join(d, f));
  return d;
}

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'tandem-tool-syntaxes-'));
  // The drafter needs the target's vocabulary, special tokens included.
  const target = mistralStyle(models.target, 'mistral-style');
  const draft = mistralStyle(models.draft, 'mistral-style-draft');
  const llamaTemplate = path.join(dir, 'llama3-tools.jinja');
  writeFileSync(llamaTemplate, LLAMA3_TEMPLATE);
  const started = await Promise.allSettled([
    startServer({ model: target, extra: ['-a', 'tandem-target', '-md', draft] }),
    startServer({ extra: ['--chat-template-file', llamaTemplate] }),
  ]);
  [mistral, llama3] = started.map((r) => (r.status === 'fulfilled' ? r.value : undefined));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
});

after(async () => {
  await Promise.all([mistral, llama3].filter(Boolean).map((s) => s.stop()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function checkCall(call, tool) {
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, tool.function.name);
  assert.ok(call.id && typeof call.id === 'string');
  assert.equal(validate(tool.function.parameters, call.function.arguments), 'ok', call.function.arguments);
}

// The streamed reply's content, tool-call deltas and last finish_reason.
async function streamed(client, body) {
  const { chunks } = await collectStream(await client.chat.completions.create({ ...body, stream: true }));
  return {
    content: chunks.map((k) => k.choices[0]?.delta?.content ?? '').join(''),
    calls: chunks.flatMap((k) => k.choices[0]?.delta?.tool_calls ?? []),
    finish: chunks.map((k) => k.choices[0]?.finish_reason).filter(Boolean).pop(),
  };
}

describe('Mistral [TOOL_CALLS] (a special token)', () => {
  it('tool_choice auto recognises a call opened with the special token, whole and streamed', async () => {
    // The tiny model never calls a tool on its own: a logit bias makes it emit the special
    // [TOOL_CALLS] token first (the lazy auto grammar allows it there and nowhere after),
    // then the grammar keeps the call valid. The detokenizer used to drop the marker.
    const client = mistral.client();
    const body = {
      model: 'tandem-target',
      messages: ASK,
      tools: [TIME, WEATHER],
      parallel_tool_calls: false, // the tiny model would add calls until max_tokens
      max_tokens: 120,
      temperature: 0,
      logit_bias: { [MARKER_ID]: 100 },
      logprobs: true,
    };
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    for (const call of c.message.tool_calls) checkCall(call, call.function.name === 'get_time' ? TIME : WEATHER);
    assert.equal(c.logprobs.content[0].token, '[TOOL_CALLS]', 'the first token is the special marker');
    const s = await streamed(client, body);
    assert.equal(s.content, '', 'the marker and the call do not stream as content');
    assert.deepEqual(
      s.calls.map((k) => [k.index, k.function.name, k.function.arguments]),
      c.message.tool_calls.map((k, i) => [i, k.function.name, k.function.arguments]),
    );
    assert.equal(s.finish, 'tool_calls');
  });

  it('tool_choice auto without the marker is plain content', async () => {
    const r = await mistral.client().chat.completions.create({
      model: 'tandem-target',
      messages: ASK,
      tools: [TIME],
      max_tokens: 12,
      temperature: 0,
      logit_bias: { [MARKER_ID]: -100 },
    });
    assert.equal(r.choices[0].message.tool_calls, undefined);
    assert.equal(typeof r.choices[0].message.content, 'string');
  });

  it('tool_choice required and named yield valid calls, whole and streamed (speculative, draft model)', async () => {
    const client = mistral.client();
    for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
      for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 11 }]) {
        const body = { model: 'tandem-target', messages: ASK, tools: [TIME, WEATHER], tool_choice, parallel_tool_calls: false, max_tokens: 160, ...sampling };
        const r = await client.chat.completions.create(body);
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
        for (const call of c.message.tool_calls) checkCall(call, call.function.name === 'get_time' ? TIME : WEATHER);
        if (typeof tool_choice === 'object') assert.ok(c.message.tool_calls.every((k) => k.function.name === 'get_weather'));
        const s = await streamed(client, body);
        assert.equal(s.finish, 'tool_calls');
        assert.deepEqual(
          s.calls.map((k) => [k.function.name, k.function.arguments]),
          c.message.tool_calls.map((k) => [k.function.name, k.function.arguments]),
        );
      }
    }
  });

  it('renders an assistant tool call with content null and its result', async () => {
    const r = await mistral.client().chat.completions.create({
      model: 'tandem-target',
      tools: [TIME],
      max_tokens: 4,
      messages: [
        ...ASK,
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_time', arguments: '{"zone":"CET"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '12:00' },
      ],
    });
    assert.equal(typeof r.choices[0].message.content, 'string');
  });
});

describe('Llama 3.x JSON calls', () => {
  it('tool_choice required yields a {"name", "parameters"} call parsed into tool_calls, whole and streamed', async () => {
    const client = llama3.client();
    const body = { model: 'tandem-target', messages: ASK, tools: [TIME, WEATHER], tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, temperature: 0 };
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.content, null);
    for (const call of c.message.tool_calls) checkCall(call, call.function.name === 'get_time' ? TIME : WEATHER);
    const s = await streamed(client, body);
    assert.equal(s.content, '', 'a JSON call is held from its start');
    assert.deepEqual(
      s.calls.map((k) => [k.function.name, k.function.arguments]),
      c.message.tool_calls.map((k) => [k.function.name, k.function.arguments]),
    );
    assert.equal(s.finish, 'tool_calls');
  });

  it('tool_choice auto parses JSON the model writes (here forced by a grammar); none leaves it content', async () => {
    const grammar = String.raw`root ::= "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"" [A-Z]{2,4} "\"}}"`;
    const body = { model: 'tandem-target', messages: ASK, tools: [TIME], max_tokens: 60, temperature: 0, grammar };
    const client = llama3.client();
    const r = await client.chat.completions.create(body);
    assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
    checkCall(r.choices[0].message.tool_calls[0], TIME);
    const s = await streamed(client, body);
    assert.equal(s.content, '');
    assert.equal(s.calls.length, 1);
    assert.equal(s.calls[0].function.arguments, r.choices[0].message.tool_calls[0].function.arguments);
    const none = await client.chat.completions.create({ ...body, tool_choice: 'none' });
    assert.equal(none.choices[0].message.tool_calls, undefined);
    assert.ok(none.choices[0].message.content.startsWith('{"name": "get_time"'));
  });
});
