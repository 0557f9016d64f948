// Speculation never fails a request that classic decoding serves: completions that fill
// the context exactly (-c 64) come back whole, with finish_reason "length", and with the
// same text as on a server without a drafter — with a draft model (K = 4 as in issue 13,
// and K = 16 on one sequence's worth of KV, -np 1) and with the MTP head (K = 16, -np 1).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { collectStream, models, startServer } from './harness.mjs';

const CONTEXT = 64;
const NO_EOS = { 0: -100, 2: -100 }; // run to max_tokens: every position up to the context end
const PROMPTS = [
  { prompt: 'Call me Ishmael. Some years ago', temperature: 0 },
  { prompt: 'The whale rose from the deep and the sea', temperature: 0.8, seed: 5 },
];

const servers = {};

before(async () => {
  const c = ['-c', String(CONTEXT)];
  [servers.plain, servers.draft4, servers.draft16, servers.mtp16] = await Promise.all([
    startServer({ extra: [...c, '-np', '1'] }),
    startServer({ extra: [...c, '-md', models.draft, '--draft-block-size', '4'] }),
    startServer({ extra: [...c, '-np', '1', '-md', models.draft, '--draft-block-size', '16'] }),
    startServer({ extra: [...c, '-np', '1', '-md', models.mtp, '--draft-block-size', '16'] }),
  ]);
});

after(async () => {
  await Promise.all(Object.values(servers).map((s) => s.stop()));
});

// The request body that fills the context: max_tokens = CONTEXT - prompt tokens.
async function filling(body) {
  const r = await servers.plain.client().completions.create({ ...body, max_tokens: 1 });
  return { ...body, logit_bias: NO_EOS, max_tokens: CONTEXT - r.usage.prompt_tokens };
}

describe('requests that end at the context limit', () => {
  let bodies, reference;

  before(async () => {
    bodies = await Promise.all(PROMPTS.map(filling));
    reference = [];
    for (const body of bodies) {
      const r = await servers.plain.client().completions.create(body);
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.equal(r.usage.total_tokens, CONTEXT);
      reference.push(r.choices[0].text);
    }
  });

  for (const name of ['draft4', 'draft16', 'mtp16']) {
    it(`with a drafter (${name}): whole, "length", identical to no drafter`, async () => {
      let drafted = 0;
      for (let i = 0; i < bodies.length; ++i) {
        const r = await servers[name].client().completions.create(bodies[i]);
        assert.equal(r.choices[0].finish_reason, 'length', `request ${i}`);
        assert.equal(r.usage.total_tokens, CONTEXT, `request ${i}`);
        assert.equal(r.choices[0].text, reference[i], `request ${i}`);
        drafted += r.timings.draft_n;
        // Streaming too: the same text, then "length".
        const s = await collectStream(
          await servers[name].client().completions.create({ ...bodies[i], stream: true, stream_options: { include_usage: true } }),
          { chat: false },
        );
        assert.equal(s.text, reference[i], `request ${i}, streamed`);
        assert.equal(s.finish, 'length', `request ${i}, streamed`);
      }
      assert.ok(drafted > 0, 'speculation actually ran');
    });
  }
});
