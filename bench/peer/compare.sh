#!/usr/bin/env bash
# Alternating llama.cpp / tandem runs on the same GGUF files (docs/benchmarks.md).
#
#   bench/peer/compare.sh ROUNDS OUT.log FILE.gguf...
#
# Per round, per file, per thread count (1, 2): the peer (llama_cpp_gguf.py
# run) then `tandem bench -m FILE`, each line prefixed with the 1-minute load
# average taken just before the run. Same counts on both sides: a 64-token
# prefill, 32 decode steps, best of 3. TANDEM (default build/src/app/tandem)
# names the binary.
set -u
rounds=$1
out=$2
shift 2
tandem=${TANDEM:-build/src/app/tandem}
here=$(dirname "$0")
for round in $(seq 1 "$rounds"); do
  for file in "$@"; do
    for t in 1 2; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      peer=$(python3 "$here/llama_cpp_gguf.py" run --gguf "$file" -t "$t" -p 64 -n 32 -r 3 2>&1 | grep '^llama.cpp')
      echo "round $round load $load peer $file t $t :: $peer" | tee -a "$out"
      load=$(cut -d' ' -f1 /proc/loadavg)
      ours=$("$tandem" bench -m "$file" -t "$t" -p 64 -n 32 -r 3 2>&1 |
        grep -E '^(cpu|prefetch|prefill|decode|ceiling|reached|weights streamed)' | tr '\n' '|')
      echo "round $round load $load tandem $file t $t :: $ours" | tee -a "$out"
    done
  done
done
