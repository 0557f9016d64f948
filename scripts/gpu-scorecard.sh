#!/usr/bin/env bash
# Issue 15's scorecard on a machine with a CUDA GPU, in one command: B = 1 decode of random
# Qwen2.5-0.5B / Llama-3.2-1B / Llama-3.1-8B-shaped bf16 weights against `tandem bench`'s own read
# ceiling, the 8B's K = 1 / 4 / 8 verify blocks and batched steps at a 512-token context, and its
# 512-token prefill; two rounds. Then any extra environment settings to compare on the 8B decode
# (AB_MODELS="qwen2.5-0.5b llama-3.2-1b llama-3.1-8b": on those, alternated per model):
#   scripts/gpu-scorecard.sh BIN_DIR [OUT_DIR] [VAR=VALUE ...]
# BIN_DIR holds tandem and tandem-random-model (and lib/ when packed: scripts/gpu-pack.sh). TRACE=1 adds
# the 1B and 8B decode steps' kernel traces at the end (see below).
set -uo pipefail
bin="$1" out="${2:-/tmp/scorecard}"
shift $(($# < 2 ? $# : 2))
mkdir -p "$out"
[[ -d "$bin/lib" ]] && export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem \
  --format=csv,noheader
for preset in qwen2.5-0.5b llama-3.2-1b llama-3.1-8b; do
  [[ -d "$out/$preset" ]] ||
    "$bin/tandem-random-model" --preset "$preset" --out "$out/$preset" --dtype bf16 >/dev/null 2>&1 || exit 1
done
bench() {  # label model args...
  local label="$1" m="$2"
  shift 2
  "$bin/tandem" bench -m "$out/$m" --device cuda "$@" 2>&1 | grep -E "^decode|^prefill|^ceiling|^reached|^\| [0-9]" |
    sed "s|^|$label $m: |"
}
for round in 1 2; do
  echo "== round $round"
  bench decode qwen2.5-0.5b -p 16 -n 128 -r 2 --bw-mib 512
  bench decode llama-3.2-1b -p 16 -n 128 -r 2 --bw-mib 512
  bench decode llama-3.1-8b -p 16 -n 64 -r 2 --bw-mib 4096
  bench verify llama-3.1-8b -p 512 -n 16 -r 2 --verify 1,4,8
  bench prefill llama-3.1-8b -p 512 -n 1 -r 3
done
bench batch llama-3.1-8b -p 512 -n 16 -r 2 --batch 1,4,8
# AB_MODELS (default the 8B): the presets whose decode the settings are compared on.
for setting in "$@"; do
  for round in 1 2; do
    for m in ${AB_MODELS:-llama-3.1-8b}; do
      n=128
      [[ $m == llama-3.1-8b ]] && n=64
      (export "$setting" && bench "$setting" "$m" -p 16 -n $n -r 2 | grep ": decode:")
      bench default "$m" -p 16 -n $n -r 2 | grep ": decode:"
    done
  done
done
# TRACE=1 (and libtandem_kernel_trace.so in BIN_DIR, as gpu-pack.sh packs it): one kernel trace of the
# 1B and the 8B decode step each, summarised per kernel (bench/cuda/trace_summary.py) — where the step goes.
if [[ -n ${TRACE:-} && -f "$bin/libtandem_kernel_trace.so" ]]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  for m in llama-3.2-1b llama-3.1-8b; do
    echo "== trace $m"
    TANDEM_KERNEL_TRACE="$out/trace-$m.csv" LD_PRELOAD="$bin/libtandem_kernel_trace.so" \
      "$bin/tandem" bench -m "$out/$m" --device cuda -p 16 -n 32 -r 1 >/dev/null 2>&1
    python3 "$here/bench/cuda/trace_summary.py" "$out/trace-$m.csv" --top 12
  done
fi
