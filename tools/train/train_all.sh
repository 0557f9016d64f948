#!/usr/bin/env bash
# Rebuilds tandem's bundled models (models/) from scratch.
#   1. here (node + npm):   the corpus
#   2. on a CUDA machine:   tokenizer + target + draft + MTP head, evaluation, references
#   3. here:                copy OUT/models/tandem-* into models/
# The released models were made with exactly these commands (one H200, torch 2.11,
# transformers 5.17, tokenizers 0.23); the smoke run checks the pipeline first (~30 s).
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-runs/main}
if [ ! -f data/train.txt ]; then
  ../../scripts/npm-ci.sh .
  node prepare_corpus.mjs
fi
export PYTHONUNBUFFERED=1
python3 train.py --smoke --out "$OUT-smoke"
python3 train.py --out "$OUT" --dropout 0.2 --target-epochs 14 --draft-epochs 40 --draft-seconds 120 \
  --mtp-epochs 40 --mtp-seconds 110 --mtp-lr 3e-3
