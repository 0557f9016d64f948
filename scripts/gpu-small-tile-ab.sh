#!/usr/bin/env bash
# A/B of the small-M GEMM tile choice in the whole model (ADR 0052), on a machine with a CUDA GPU:
# B = 1 decode of random bf16 models of the 8B / 1B / 0.5B shapes for each TANDEM_CUDA_SMALL_TILE
# setting ("default" = unset; "W,L,S[,E]" or "L,S" = the by-shape picks; "N" = one variant), then a
# 2-layer 8B-shape model with programmatic dependent launch on and off, and (where ncu exists)
# per-kernel GPU time of that model for the first two settings.
#   scripts/gpu-small-tile-ab.sh BIN_DIR OUT_DIR [SETTING...]   (default: default 8,3 15,3)
# BIN_DIR holds tandem and tandem-random-model (and lib/ when packed, scripts/gpu-test.sh --pack).
set -uo pipefail
bin="$1" out="$2"
shift 2
settings=("$@")
[[ ${#settings[@]} -gt 0 ]] || settings=(default 8,3 15,3)
mkdir -p "$out"
[[ -d "$bin/lib" ]] && export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
bench() {  # model tag setting tokens [extra env...]
  local model="$1" tag="$2" v="$3" n="$4" f="$out/bench_$2_${3//,/_}.txt"
  shift 4
  if [[ $v == default ]]; then env -u TANDEM_CUDA_SMALL_TILE "$@" "$bin/tandem" bench -m "$model" --device cuda -p 512 -n "$n" -r 2 --bw-mib 4096 >"$f" 2>&1
  else env TANDEM_CUDA_SMALL_TILE="$v" "$@" "$bin/tandem" bench -m "$model" --device cuda -p 512 -n "$n" -r 2 --bw-mib 4096 >"$f" 2>&1; fi
  echo "== $tag small tile $v ${*:-}: rc=$? $(grep -E '^decode' "$f")"
}
for p in llama-3.1-8b:64 llama-3.2-1b:128 qwen2.5-0.5b:128; do
  preset="${p%:*}" n="${p#*:}" dir="/tmp/ab-${p%:*}"
  "$bin/tandem-random-model" --preset "$preset" --out "$dir" --dtype bf16 >/dev/null 2>&1 || { echo "FAIL random model $preset"; continue; }
  for v in "${settings[@]}"; do bench "$dir" "$preset" "$v" "$n"; done
  rm -rf "$dir"
done
dir=/tmp/ab-8b-2layers
"$bin/tandem-random-model" --preset llama-3.1-8b --layers 2 --out "$dir" --dtype bf16 >/dev/null 2>&1 || exit 1
for pdl in 1 0; do
  for v in "${settings[@]}"; do bench "$dir" "8b-2layers-pdl$pdl" "$v" 64 TANDEM_CUDA_PDL=$pdl; done
done
if command -v ncu >/dev/null; then
  for v in "${settings[@]:0:2}"; do
    f="$out/ncu_${v//,/_}.txt"
    if [[ $v == default ]]; then set -- env -u TANDEM_CUDA_SMALL_TILE; else set -- env TANDEM_CUDA_SMALL_TILE="$v"; fi
    timeout 120 "$@" ncu --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum \
      "$bin/tandem" bench -m "$dir" --device cuda -p 16 -n 4 -r 1 --bw-mib 512 >"$f" 2>&1
    echo "== ncu $v: rc=$? ($f)"
  done
fi
rm -rf "$dir"
