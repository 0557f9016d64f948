#!/usr/bin/env bash
# `-m model.gguf` through the CLI: generate prints the same ids for the bundled target as a
# GGUF (written by tools/fixtures/make_gguf.py) as for its directory, with and without a GGUF
# drafter (-md); tokenize reads the GGUF's tokenizer. Skips (exit 77) without python's gguf.
#   gguf_cli.sh TANDEM SOURCE_DIR WORK_DIR
set -euo pipefail
tandem=$1 src=$2 work=$3
python3 -c 'import gguf' 2>/dev/null || { echo "skip: python3 cannot import gguf"; exit 77; }
mkdir -p "$work"
python3 "$src/tools/fixtures/make_gguf.py" "$src/models/tandem-target" "$work/target.gguf"
python3 "$src/tools/fixtures/make_gguf.py" "$src/models/tandem-draft" "$work/draft.gguf"
prompt=312,1401,344,263,1104,310,2987,946,587,889,450,77
want=$("$tandem" generate -m "$src/models/tandem-target" --tokens "$prompt" -n 24 -t 1 --temp 0 --ignore-eos 2>/dev/null)
got=$("$tandem" generate -m "$work/target.gguf" --tokens "$prompt" -n 24 -t 1 --temp 0 --ignore-eos 2>/dev/null)
spec=$("$tandem" generate -m "$work/target.gguf" -md "$work/draft.gguf" --tokens "$prompt" -n 24 -t 1 --temp 0 \
  --ignore-eos 2>/dev/null)
[ -n "$want" ] || { echo "no output from the directory"; exit 1; }
[ "$want" = "$got" ] || { echo "directory: $want"; echo "gguf:      $got"; exit 1; }
[ "$want" = "$spec" ] || { echo "directory:  $want"; echo "gguf + -md: $spec"; exit 1; }
# Seeded sampling: the same draws from the same logits.
sampled_dir=$("$tandem" generate -m "$src/models/tandem-target" --tokens "$prompt" -n 24 -t 1 --temp 0.8 -s 7 \
  --ignore-eos 2>/dev/null)
sampled_gguf=$("$tandem" generate -m "$work/target.gguf" -md "$work/draft.gguf" --tokens "$prompt" -n 24 -t 1 \
  --temp 0.8 -s 7 --ignore-eos 2>/dev/null)
[ "$sampled_dir" = "$sampled_gguf" ] || { echo "seeded: $sampled_dir vs $sampled_gguf"; exit 1; }
text="Hello world, 123 tokens."
[ "$("$tandem" tokenize -m "$src/models/tandem-target" "$text")" = "$("$tandem" tokenize -m "$work/target.gguf" "$text")" ] ||
  { echo "tokenize differs"; exit 1; }
echo "ok: $got"
