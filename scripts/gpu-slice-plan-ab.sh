#!/usr/bin/env bash
# TANDEM_CUDA_SLICE_PLAN's measurement, on a machine with a CUDA GPU: B = 1 decode of random
# Llama-3.1-8B / Llama-3.2-1B-shaped bf16 weights with the qkv projection cut into other K-slice
# counts than gemm_slicing's rule (the 8B's 6144 x 4096 takes 3: 288 sliced-tile blocks for the 264
# two-per-multiprocessor slots of a 132-SM part, a second wave of 24; the 1B's 3072 x 2048 takes 6:
# 288 as well).
#   scripts/gpu-slice-plan-ab.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds tandem and tandem-random-model (and lib/ when packed: scripts/gpu-pack.sh). Models in
# OUT_DIR/m8b and OUT_DIR/m1b are used when present (scripts/gpu-kv-split-ab.sh with KEEP_MODELS=1).
# Two rounds, each the default then every plan, `-p 16 -n 64 -r 2` (the 1B `-n 128`).
set -uo pipefail
bin="$1" out="${2:-/tmp/slice-plan-ab}"
mkdir -p "$out"
[[ -d "$bin/lib" ]] && export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
[[ -d "$out/m8b" ]] || "$bin/tandem-random-model" --preset llama-3.1-8b --out "$out/m8b" --dtype bf16 >/dev/null 2>&1
[[ -d "$out/m1b" ]] || "$bin/tandem-random-model" --preset llama-3.2-1b --out "$out/m1b" --dtype bf16 >/dev/null 2>&1
decode() {  # plan model n
  TANDEM_CUDA_SLICE_PLAN="$1" "$bin/tandem" bench -m "$out/$2" --device cuda -p 16 -n "$3" -r 2 2>&1 |
    grep -E "^decode" | sed "s|^|$2 plan=${1:-default}: |"
}
for round in 1 2; do
  for plan in "" 6144:4096:11 6144:4096:8 6144:4096:6 6144:4096:4; do decode "$plan" m8b 64; done
  for plan in "" 3072:2048:4 3072:2048:8 3072:2048:16; do decode "$plan" m1b 128; done
done
