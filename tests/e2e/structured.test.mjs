// Structured outputs and tool calls through the official openai client:
// response_format json_schema / json_object, llama-server's grammar field,
// tool_choice required / named (whole and streamed), tool messages, the 400s,
// and speculative output byte-identical to classic under a grammar (draft
// model and MTP head). Outputs are validated with Python jsonschema
// (validate_json.py), never with tandem's own grammar.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

import { collectStream, models, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

function validate(schema, text) {
  try {
    execFileSync('python3', [path.join(here, 'validate_json.py')], { input: JSON.stringify({ schema, text }) });
    return 'ok';
  } catch (e) {
    return `${e.stdout}${e.stderr}`.trim() || String(e);
  }
}

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 24 },
    age: { type: 'integer' },
    role: { enum: ['captain', 'mate', 'harpooneer'] },
    ships: { type: 'array', items: { type: 'string', maxLength: 12 }, maxItems: 2 },
    alive: { type: ['boolean', 'null'] },
  },
  required: ['name', 'age', 'role', 'ships', 'alive'],
  additionalProperties: false,
};
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 10 } }, required: ['zone'] },
  },
};
const ASK = [{ role: 'user', content: 'Tell me about the captain of the ship.' }];

let spec, classic, mtp, client;

before(async () => {
  [spec, classic, mtp] = await Promise.all([
    startServer({ extra: ['-md', models.draft] }),
    startServer(),
    startServer({ extra: ['-md', models.mtp] }),
  ]);
  client = spec.client();
});

after(async () => {
  await Promise.all([spec, classic, mtp].filter(Boolean).map((s) => s.stop()));
});

function personFormat() {
  return { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: PERSON } };
}

describe('response_format', () => {
  it('json_schema output parses and validates (greedy and seeded)', async () => {
    for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 1 }, { temperature: 1.0, seed: 7 }]) {
      const r = await client.chat.completions.create({
        model: 'tandem-target',
        messages: ASK,
        max_tokens: 300,
        response_format: personFormat(),
        ...sampling,
      });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', JSON.stringify(c));
      assert.equal(validate(PERSON, c.message.content), 'ok', c.message.content);
    }
  });

  it('speculative output under a grammar equals classic output byte for byte', async () => {
    for (const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 11 }]) {
      const body = { model: 'tandem-target', messages: ASK, max_tokens: 120, response_format: personFormat(), ...sampling };
      const [a, b, m] = await Promise.all([spec, classic, mtp].map((s) => s.client().chat.completions.create(body)));
      assert.equal(a.choices[0].message.content, b.choices[0].message.content);
      assert.equal(m.choices[0].message.content, b.choices[0].message.content);
      assert.ok(a.usage.completion_tokens_details.accepted_prediction_tokens > 0, 'the draft model never got a draft accepted');
    }
  });

  it('pattern, integer ranges and formats are enforced (validated with jsonschema)', async () => {
    const schema = {
      type: 'object',
      properties: {
        code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' },
        rating: { type: 'integer', minimum: 1, maximum: 5 },
        when: { type: 'string', format: 'date' },
        ip: { type: 'string', format: 'ipv4' },
      },
      required: ['code', 'rating', 'when', 'ip'],
      additionalProperties: false,
    };
    for (const seed of [1, 2]) {
      const r = await client.chat.completions.create({
        model: 'tandem-target',
        messages: ASK,
        max_tokens: 200,
        temperature: 0.9,
        seed,
        response_format: { type: 'json_schema', json_schema: { name: 'codes', strict: true, schema } },
      });
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.equal(validate(schema, r.choices[0].message.content), 'ok', r.choices[0].message.content);
    }
  });

  it('json_object output is a JSON object', async () => {
    const r = await client.chat.completions.create({
      model: 'tandem-target',
      messages: [{ role: 'user', content: 'Give me a JSON object.' }],
      max_tokens: 200,
      temperature: 0.7,
      seed: 3,
      response_format: { type: 'json_object' },
    });
    const text = r.choices[0].message.content;
    assert.ok(text.startsWith('{'), text);
    if (r.choices[0].finish_reason === 'stop') assert.equal(validate({ type: 'object' }, text), 'ok', text);
  });

  it('streams the same constrained text', async () => {
    const body = { model: 'tandem-target', messages: ASK, max_tokens: 300, temperature: 0, response_format: personFormat() };
    const whole = await client.chat.completions.create(body);
    const { chunks } = await collectStream(await client.chat.completions.create({ ...body, stream: true }));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.equal(text, whole.choices[0].message.content);
  });

  it('rejects an unknown type and an unsupported keyword with a 400 naming them', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'tandem-target', messages: ASK, response_format: { type: 'bogus_format' } }),
      (e) => e.status === 400 && e.param === 'response_format.type' && /bogus_format/.test(e.message),
    );
    const schema = { type: 'object', properties: { zips: { type: 'array', uniqueItems: true } } };
    await assert.rejects(
      client.chat.completions.create({
        model: 'tandem-target',
        messages: ASK,
        response_format: { type: 'json_schema', json_schema: { name: 'z', schema } },
      }),
      (e) => e.status === 400 && /'uniqueItems'/.test(e.message),
    );
  });

  it("llama-server's grammar field constrains /v1/completions", async () => {
    const r = await client.completions.create({
      model: 'tandem-target',
      prompt: 'The answer is',
      max_tokens: 40,
      temperature: 0,
      grammar: 'root ::= ("yes" | "no") ", because " [a-z ]{1,24} "."',
    });
    assert.match(r.choices[0].text, /^(yes|no), because [a-z ]{1,24}\.$/);
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  it("llama-server's json_schema field constrains /v1/chat/completions and /completion", async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' }, ok: { type: 'boolean' } }, required: ['n', 'ok'] };
    const chat = await spec.post('/v1/chat/completions', { messages: ASK, max_tokens: 120, temperature: 0, json_schema: schema });
    assert.equal(chat.status, 200, chat.text);
    assert.equal(chat.json.choices[0].finish_reason, 'stop', chat.text);
    assert.equal(validate(schema, chat.json.choices[0].message.content), 'ok', chat.text);
    const llama = await spec.post('/completion', { prompt: 'The answer:', n_predict: 120, temperature: 0, json_schema: schema });
    assert.equal(llama.status, 200, llama.text);
    assert.equal(validate(schema, llama.json.content), 'ok', llama.text);
    const bad = await spec.post('/completion', { prompt: 'x', json_schema: { type: 'array', uniqueItems: true } });
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json.error.message, /uniqueItems/);
  });
});

describe('tools', () => {
  const weatherAsk = [{ role: 'user', content: 'What is the weather in Paris?' }];

  function checkCall(call, tool) {
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, tool.function.name);
    assert.ok(call.id && typeof call.id === 'string');
    assert.equal(validate(tool.function.parameters, call.function.arguments), 'ok', call.function.arguments);
  }

  it('tool_choice required yields a valid call (finish_reason tool_calls)', async () => {
    for (const sampling of [{ temperature: 0 }, { temperature: 0.8, seed: 5 }]) {
      const r = await client.chat.completions.create({
        model: 'tandem-target',
        messages: weatherAsk,
        tools: [WEATHER, TIME],
        tool_choice: 'required',
        parallel_tool_calls: false,
        max_tokens: 200,
        ...sampling,
      });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.equal(c.message.tool_calls.length, 1);
      const call = c.message.tool_calls[0];
      checkCall(call, call.function.name === 'get_time' ? TIME : WEATHER);
    }
  });

  it('a named tool_choice calls that function, also when streamed', async () => {
    const body = {
      model: 'tandem-target',
      messages: weatherAsk,
      tools: [WEATHER, TIME],
      tool_choice: { type: 'function', function: { name: 'get_time' } },
      parallel_tool_calls: false,
      max_tokens: 200,
      temperature: 0,
    };
    const r = await client.chat.completions.create(body);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    checkCall(r.choices[0].message.tool_calls[0], TIME);
    const { chunks } = await collectStream(await client.chat.completions.create({ ...body, stream: true }));
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].index, 0);
    assert.equal(calls[0].function.name, 'get_time');
    assert.equal(calls[0].function.arguments, r.choices[0].message.tool_calls[0].function.arguments);
    assert.equal(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean).pop(), 'tool_calls');
  });

  it('tool_choice auto parses the model\'s <tool_call> text into tool_calls, whole and streamed', async () => {
    // The tiny model never calls a tool on its own; a GBNF grammar makes it write
    // some content and then a call in the Hermes syntax, which auto must parse.
    const grammar = String.raw`root ::= "Checking. " "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" [A-Za-z]{1,12} "\", \"unit\": \"celsius\"}}\n</tool_call>"`;
    const body = { model: 'tandem-target', messages: weatherAsk, tools: [WEATHER], max_tokens: 120, temperature: 0, grammar };
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.content, 'Checking.');
    checkCall(c.message.tool_calls[0], WEATHER);
    const { chunks } = await collectStream(await client.chat.completions.create({ ...body, stream: true }));
    const content = chunks.map((k) => k.choices[0]?.delta?.content ?? '').join('');
    assert.equal(content, 'Checking. ', 'the content before the call streams; the call markup does not');
    const calls = chunks.flatMap((k) => k.choices[0]?.delta?.tool_calls ?? []);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.arguments, c.message.tool_calls[0].function.arguments);
    assert.equal(chunks.map((k) => k.choices[0]?.finish_reason).filter(Boolean).pop(), 'tool_calls');
    // tool_choice none: the same text stays content.
    const none = await client.chat.completions.create({ ...body, tool_choice: 'none' });
    assert.equal(none.choices[0].finish_reason, 'stop');
    assert.ok(none.choices[0].message.content.includes('<tool_call>'));
    assert.equal(none.choices[0].message.tool_calls, undefined);
  });

  it('parallel_tool_calls: every call the model writes comes back, or only the first when false', async () => {
    // A grammar makes the model write two Hermes calls; auto parses them.
    const call = (zone) => String.raw`"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"${zone}\"}}\n</tool_call>"`;
    const grammar = `root ::= ${call('CET')} "\\n" ${call('UTC')}`;
    const body = { model: 'tandem-target', messages: weatherAsk, tools: [TIME], max_tokens: 120, temperature: 0, grammar };
    const both = await client.chat.completions.create(body);
    assert.equal(both.choices[0].finish_reason, 'tool_calls', JSON.stringify(both.choices[0]));
    assert.deepEqual(both.choices[0].message.tool_calls.map((c) => JSON.parse(c.function.arguments).zone), ['CET', 'UTC']);
    const ids = both.choices[0].message.tool_calls.map((c) => c.id);
    assert.equal(new Set(ids).size, 2, 'call ids are distinct');
    const { chunks } = await collectStream(await client.chat.completions.create({ ...body, stream: true }));
    const deltas = chunks.flatMap((k) => k.choices[0]?.delta?.tool_calls ?? []);
    assert.deepEqual(deltas.map((d) => [d.index, JSON.parse(d.function.arguments).zone]), [[0, 'CET'], [1, 'UTC']]);
    const first = await client.chat.completions.create({ ...body, parallel_tool_calls: false });
    assert.deepEqual(first.choices[0].message.tool_calls.map((c) => JSON.parse(c.function.arguments).zone), ['CET']);
  });

  it('tool_choice auto without a grammar: free text, and any call it opens is valid', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: 'tandem-target',
        messages: weatherAsk,
        tools: [WEATHER],
        max_tokens: 60,
        temperature: 1.0,
        seed,
      });
      const c = r.choices[0];
      assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason), c.finish_reason);
      for (const call of c.message.tool_calls ?? []) checkCall(call, WEATHER);
      if (!c.message.tool_calls) assert.ok(!c.message.content.includes('<tool_call>') || c.finish_reason === 'length');
    }
  });

  it('renders assistant tool_calls with content null and tool results', async () => {
    const r = await client.chat.completions.create({
      model: 'tandem-target',
      tools: [WEATHER],
      max_tokens: 8,
      messages: [
        ...weatherAsk,
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21 degrees' },
      ],
    });
    assert.equal(typeof r.choices[0].message.content, 'string');
  });

  it('rejects a tool_choice naming a function not in tools', async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: 'tandem-target',
        messages: weatherAsk,
        tools: [WEATHER],
        tool_choice: { type: 'function', function: { name: 'nope' } },
      }),
      (e) => e.status === 400 && e.param === 'tool_choice',
    );
  });
});
