#!/usr/bin/env bash
# Encode throughput, one thread, same text: tandem (bench_tokenizer) vs the
# Hugging Face `tokenizers` node binding (tests/tokenizer/npm/bench_hf.mjs).
# Usage: bench/tokenizer_compare.sh [build-dir]   (needs npm ci in tests/tokenizer/npm)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tandem_out=$("$build/bench/bench_tokenizer" --benchmark_format=json 2>/dev/null)
hf_out=$(cd tests/tokenizer/npm && node bench_hf.mjs)
echo "$hf_out"
for mode in whole paragraphs; do
  for name in qwen3 llama3 llama2; do
    bm=$([ $mode = whole ] && echo BM_Encode || echo BM_EncodeParagraphs)
    hf=$([ $mode = whole ] && echo hf-tokenizers || echo hf-tokenizers-paragraphs)
    ours=$(echo "$tandem_out" | python3 -c "import json,sys; d=json.load(sys.stdin); print('%.2f' % [b['bytes_per_second']/1e6 for b in d['benchmarks'] if b['name'].startswith('$bm/$name/')][0])")
    theirs=$(echo "$hf_out" | awk -v h="$hf" -v n="$name:" '$1 == h && $2 == n {print $3}')
    echo "$mode $name: tandem $ours MB/s, hf $theirs MB/s, ratio $(python3 -c "print('%.1f' % ($ours / $theirs))")x"
  done
done
