#!/usr/bin/env bash
# ADR 0087's measurement, on a machine with a CUDA GPU: the KV-split attention shape (one block per
# kv head, its q heads in warps) against the split shape, for verify blocks and batched steps.
#   scripts/gpu-kv-split-ab.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds tandem, test_cuda_kernels, test_cuda_forward and tandem-random-model (and lib/ when
# packed: scripts/gpu-test.sh --pack DIR --stub-icu), optionally libtandem_kernel_trace.so
# (build-gpu/bench) for a kernel trace of the K = 4 blocks. Run from the repository root (the forward tests
# read tests/fixtures; without models/tandem-target/reference.safetensors filter *CudaGolden.* as here).
# Order: the bits first (kernel tests; the forward suite with the shape from 2 rows and forced for
# every call), then `tandem bench` of random 8B / 1B-shaped bf16 weights, TANDEM_CUDA_KV_SPLIT_ROWS
# 0 (split) and 2 alternated: K = 1, 4, 8 verify blocks at a 512-token context, batched decode of
# 1 / 4 / 8 sequences, and one-row decode at a 4096-token context with each shape forced. The random
# models are deleted at the end unless KEEP_MODELS is set (scripts/gpu-slice-plan-ab.sh reuses them).
set -uo pipefail
bin="$1" out="${2:-/tmp/kv-split-ab}"
mkdir -p "$out"
[[ -d "$bin/lib" ]] && export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
export TANDEM_SOURCE_DIR="${TANDEM_SOURCE_DIR:-$PWD}"
S=$SECONDS
stamp() { echo "== $1 at $((SECONDS - S)) s"; }
("$bin/tandem-random-model" --preset llama-3.1-8b --out "$out/m8b" --dtype bf16 >/dev/null 2>&1
  "$bin/tandem-random-model" --preset llama-3.2-1b --out "$out/m1b" --dtype bf16 >/dev/null 2>&1) &
gen=$!
"$bin/test_cuda_kernels" --gtest_filter='*ttention*:*Softcap*' >"$out/kernels.txt" 2>&1
grep -E "^\[  (FAILED|PASSED) " "$out/kernels.txt"
TANDEM_CUDA_KV_SPLIT_ROWS=2 "$bin/test_cuda_forward" --gtest_filter='-*CudaGolden.*' >"$out/forward.txt" 2>&1
grep -E "^\[  (FAILED|PASSED) " "$out/forward.txt" | sed 's/^/KV_SPLIT_ROWS=2: /'
TANDEM_CUDA_ATTENTION=kvsplit "$bin/test_cuda_forward" --gtest_filter='*Invariance*:*Speculative*' \
  >"$out/forward_forced.txt" 2>&1
grep -E "^\[  (FAILED|PASSED) " "$out/forward_forced.txt" | sed 's/^/ATTENTION=kvsplit: /'
stamp "bits"
wait "$gen" || exit 1
bench() {  # rows-threshold model args...
  local v="$1" m="$2"
  shift 2
  TANDEM_CUDA_KV_SPLIT_ROWS="$v" "$bin/tandem" bench -m "$out/$m" --device cuda "$@" 2>&1 |
    grep -E "^decode|^\| [0-9]" | sed "s|^|$m KV_SPLIT_ROWS=$v $*: |"
}
for v in 0 2 2 0; do bench "$v" m8b -p 512 -n 16 -r 2 --verify 1,4,8; done
stamp "8B verify"
for v in 0 2; do bench "$v" m1b -p 512 -n 32 -r 2 --verify 1,4,8; done
for v in 0 2; do bench "$v" m8b -p 512 -n 16 -r 2 --batch 1,4,8; done
stamp "1B verify, 8B batches"
for s in split kvsplit; do
  TANDEM_CUDA_ATTENTION=$s "$bin/tandem" bench -m "$out/m1b" --device cuda -p 4096 -n 64 -r 2 2>&1 |
    grep -E "^decode" | sed "s|^|m1b -p 4096 ATTENTION=$s: |"
done
# Where a K = 4 block's time goes with each shape (when BIN_DIR has the trace library). The bench
# replays a one-row graph and the K = 4 graph; the verify block's has more kernels (its q/k/v + RoPE
# is a launch of its own), so the largest kernel count replayed at least 4 times is summarised.
if [[ -f "$bin/libtandem_kernel_trace.so" ]]; then
  for v in 0 2; do
    TANDEM_CUDA_KV_SPLIT_ROWS=$v TANDEM_KERNEL_TRACE="$out/trace_$v.csv" LD_PRELOAD="$bin/libtandem_kernel_trace.so" \
      "$bin/tandem" bench -m "$out/m8b" --device cuda -p 512 -n 4 -r 1 --verify 4 >/dev/null 2>&1
    echo "== trace, 8B K = 4 blocks, KV_SPLIT_ROWS=$v"
    nodes=$(python3 -c 'import csv, collections, sys
g = collections.Counter(r["correlation"] for r in csv.DictReader(open(sys.argv[1])) if r["graph"] != "0")
sizes = collections.Counter(g.values())
print(max([n for n, c in sizes.items() if c >= 4] or [0]))' "$out/trace_$v.csv")
    python3 bench/cuda/trace_summary.py "$out/trace_$v.csv" --nodes "$nodes" --top 12 2>&1 | head -20
  done
fi
stamp "done"
[[ -n "${KEEP_MODELS:-}" ]] || rm -rf "$out/m8b" "$out/m1b"
