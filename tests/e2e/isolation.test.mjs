// Isolation, bitwise: a request's output is identical when it runs alone, among 8
// concurrent different requests, and on a server with a drafter (draft model, MTP head)
// vs without, at temperature 0 and at seeded temperature 0.8.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { models, startServer, waitFor } from './harness.mjs';

const MAX_TOKENS = 40;
const NO_EOS = { 0: -100, 2: -100 }; // run to max_tokens, so every token is compared

// Eight different requests: both endpoints, greedy and seeded sampling, with the
// sampler extensions that depend on the request's own history (penalties).
const REQUESTS = [
  { kind: 'completions', body: { prompt: 'Call me Ishmael. Some years ago', temperature: 0, logit_bias: NO_EOS } },
  { kind: 'completions', body: { prompt: 'The whale rose from the deep', temperature: 0.8, seed: 11, logit_bias: NO_EOS } },
  {
    kind: 'chat',
    body: { messages: [{ role: 'user', content: 'Describe the ship in the storm.' }], temperature: 0, logit_bias: NO_EOS },
  },
  {
    kind: 'chat',
    body: {
      messages: [
        { role: 'system', content: 'You are a sailor.' },
        { role: 'user', content: 'What did you see at sea?' },
      ],
      temperature: 0.8,
      seed: 12345,
      top_p: 0.95,
      logit_bias: NO_EOS,
    },
  },
  {
    kind: 'completions',
    body: { prompt: 'Fellow citizens of the Senate and of the House', temperature: 0.8, seed: 3, top_k: 40, logit_bias: NO_EOS },
  },
  {
    kind: 'completions',
    body: { prompt: 'It was the captain who', temperature: 0, frequency_penalty: 0.5, presence_penalty: 0.3, logit_bias: NO_EOS },
  },
  {
    kind: 'chat',
    body: {
      messages: [{ role: 'user', content: 'Tell me about the government and the people.' }],
      temperature: 0.8,
      seed: 777,
      min_p: 0.05,
      repetition_penalty: 1.1,
      logit_bias: NO_EOS,
    },
  },
  { kind: 'completions', body: { prompt: 'And so the harpooneer', temperature: 0, stream: true, logit_bias: NO_EOS } },
];

const servers = {};

before(async () => {
  // Same kernel thread count everywhere (the harness's default); -np 8 so that all eight decode in one batch.
  const common = ['-np', '8'];
  [servers.plain, servers.draft, servers.mtp] = await Promise.all([
    startServer({ extra: common }),
    startServer({ extra: [...common, '-md', models.draft] }),
    startServer({ extra: [...common, '-md', models.mtp] }),
  ]);
});

after(async () => {
  await Promise.all(Object.values(servers).map((s) => s.stop()));
});

// Runs one request; returns {text, tokens, drafted} with the text of choice 0.
async function run(server, req, extra = {}) {
  const client = server.client();
  const body = { max_tokens: MAX_TOKENS, ...req.body, ...extra };
  const api = req.kind === 'chat' ? client.chat.completions : client.completions;
  if (body.stream) {
    const stream = await api.create({ ...body, stream_options: { include_usage: true } });
    let text = '';
    let usage;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) text += req.kind === 'chat' ? (c.delta?.content ?? '') : (c.text ?? '');
    }
    return {
      text,
      tokens: usage.completion_tokens,
      drafted:
        usage.completion_tokens_details.accepted_prediction_tokens + usage.completion_tokens_details.rejected_prediction_tokens,
    };
  }
  const r = await api.create(body);
  const c = r.choices[0];
  // usage's prediction-token details and llama-server's timings tell the same story.
  const d = r.usage.completion_tokens_details;
  assert.equal(d.accepted_prediction_tokens, r.timings.draft_n_accepted);
  assert.equal(d.accepted_prediction_tokens + d.rejected_prediction_tokens, r.timings.draft_n);
  return {
    text: req.kind === 'chat' ? c.message.content : c.text,
    tokens: r.usage.completion_tokens,
    drafted: r.timings?.draft_n ?? 0,
  };
}

async function alone(server) {
  const out = [];
  for (const req of REQUESTS) out.push(await run(server, req));
  return out;
}

async function concurrent(server) {
  return Promise.all(REQUESTS.map((req) => run(server, req)));
}

function assertSame(actual, reference, what) {
  for (let i = 0; i < REQUESTS.length; ++i) {
    assert.equal(actual[i].tokens, MAX_TOKENS, `${what}: request ${i} token count`);
    assert.equal(actual[i].text, reference[i].text, `${what}: request ${i} (${JSON.stringify(REQUESTS[i].body).slice(0, 80)})`);
  }
}

describe('start-up', () => {
  it('/health answers 503 {"status":"loading"} until the model (and drafter, and its exactness probe) is ready', () => {
    // The drafter servers spend about a second in the exactness probe after binding the port.
    const seen = [servers.draft, servers.mtp].filter((s) => s.healthStatuses.includes(503));
    assert.ok(seen.length > 0, `never saw a 503 while loading: ${JSON.stringify(servers.draft.healthStatuses)}`);
    for (const s of seen) {
      assert.equal(JSON.parse(s.loadingBody).status, 'loading');
      assert.equal(s.healthStatuses.at(-1), 200);
      assert.ok(s.healthStatuses.every((x) => x === 503 || x === 200));
    }
  });
});

describe('isolation (bitwise)', () => {
  let reference;

  before(async () => {
    reference = await alone(servers.plain);
    for (const r of reference) assert.equal(r.tokens, MAX_TOKENS);
    // The eight requests really are different.
    assert.equal(new Set(reference.map((r) => r.text)).size, REQUESTS.length);
  });

  it('alone twice: identical (greedy and seeded)', async () => {
    assertSame(await alone(servers.plain), reference, 'plain, alone again');
  });

  it('among 8 concurrent different requests: identical to alone', async () => {
    assertSame(await concurrent(servers.plain), reference, 'plain, 8 concurrent');
    // The gauges are published after the step that finished the requests: poll briefly.
    const idle = await waitFor(async () => (await servers.plain.metrics()).get('tandem:kv_cache_blocks_used') === 0, {
      timeoutMs: 2000,
    });
    assert.ok(idle, 'all KV blocks back once the eight are done');
  });

  for (const name of ['draft', 'mtp']) {
    it(`with a drafter (${name}), alone (speculative path): identical to no drafter`, async () => {
      const before = (await servers[name].metrics()).get('tandem:spec_decode_num_drafts_total');
      const out = await alone(servers[name]);
      assertSame(out, reference, `${name}, alone`);
      const m = await servers[name].metrics();
      assert.ok(m.get('tandem:spec_decode_num_drafts_total') > before, 'speculation actually ran');
      const accepted = m.get('tandem:spec_decode_num_accepted_tokens_total');
      assert.ok(accepted > 0, 'some drafts were accepted');
      assert.ok(m.get('tandem:spec_decode_num_draft_tokens_total') >= accepted);
      let perPos = 0;
      for (const [k, v] of m) if (k.startsWith('tandem:spec_decode_num_accepted_tokens_per_pos_total{')) perPos += v;
      assert.equal(perPos, accepted, 'accepted tokens by position add up to the total');
      const drafted = out.filter((r) => r.drafted > 0).length;
      assert.ok(drafted >= REQUESTS.length / 2, `only ${drafted} of ${REQUESTS.length} requests report drafted tokens`);
    });

    it(`with a drafter (${name}), 8 concurrent: identical to no drafter`, async () => {
      assertSame(await concurrent(servers[name]), reference, `${name}, 8 concurrent`);
    });
  }
});
