#!/usr/bin/env bash
# TANDEM_CUDA_SLICE_PLAN's measurement, on a machine with a CUDA GPU: B = 1 decode of random
# Llama-3.1-8B / Llama-3.2-1B-shaped bf16 weights with matrices cut into other K-slice counts than
# gemm_slicing's rule (e.g. the 8B's qkv, 6144 x 4096, 3 slices by the rule: 288 sliced-tile blocks
# for the 264 two-per-multiprocessor slots of a 132-SM part, a second wave of 24).
#   scripts/gpu-slice-plan-ab.sh BIN_DIR [OUT_DIR] [PLAN ...]
# BIN_DIR holds tandem and tandem-random-model (and lib/ when packed: scripts/gpu-pack.sh). Models in
# OUT_DIR/m8b and OUT_DIR/m1b are used when present (scripts/gpu-kv-split-ab.sh with KEEP_MODELS=1).
# Two rounds, each the default then every plan (a plan naming only one model's shapes leaves the
# other's bits and speed alone; `m8b=PLAN` / `m1b=PLAN` runs it on that model only), `-p 16 -n 64 -r 2`
# (the 1B `-n 128`). Then, for the first PLAN given and the default, the 8B's K = 1 / 4 / 8 verify
# blocks, batched steps of 1 / 4 / 8 at a 512-token context and its 512-token prefill (not with
# DECODE_ONLY=1). No PLAN: the qkv counts measured first (11, 8, 6, 4 for the 8B; 4, 8, 16 for the
# 1B) and no second part.
set -uo pipefail
bin="$1" out="${2:-/tmp/slice-plan-ab}"
shift $(($# < 2 ? $# : 2))
plans=("$@")
[[ ${#plans[@]} -gt 0 ]] ||
  plans=(6144:4096:11 6144:4096:8 6144:4096:6 6144:4096:4 3072:2048:4 3072:2048:8 3072:2048:16)
mkdir -p "$out"
[[ -d "$bin/lib" ]] && export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
[[ -d "$out/m8b" ]] || "$bin/tandem-random-model" --preset llama-3.1-8b --out "$out/m8b" --dtype bf16 >/dev/null 2>&1
[[ -d "$out/m1b" ]] || "$bin/tandem-random-model" --preset llama-3.2-1b --out "$out/m1b" --dtype bf16 >/dev/null 2>&1
run() {  # plan model lines-regex bench-args...
  local plan="$1" m="$2" keep="$3"
  shift 3
  TANDEM_CUDA_SLICE_PLAN="$plan" "$bin/tandem" bench -m "$out/$m" --device cuda "$@" 2>&1 | grep -E "$keep" |
    sed "s|^|$m plan=${plan:-default}: |"
}
for round in 1 2; do
  for plan in "" "${plans[@]}"; do
    [[ $plan == m1b=* ]] || run "${plan#m8b=}" m8b "^decode" -p 16 -n 64 -r 2
    [[ $plan == m8b=* ]] || run "${plan#m1b=}" m1b "^decode" -p 16 -n 128 -r 2
  done
done
[[ $# -gt 0 && -z ${DECODE_ONLY:-} ]] || exit 0
for plan in "" "${1#m8b=}"; do
  run "$plan" m8b "^verify|^\| [0-9]|^decode step" -p 512 -n 16 -r 2 --verify 1,4,8
  run "$plan" m8b "^\| [0-9]" -p 512 -n 16 -r 2 --batch 1,4,8
  run "$plan" m8b "^prefill" -p 512 -n 1 -r 3
done
