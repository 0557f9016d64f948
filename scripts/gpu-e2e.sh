#!/usr/bin/env bash
# The tandem binary's GPU checks (issue 15), run by scripts/gpu-test.sh --e2e on a
# machine with a CUDA GPU, from the repository root:
#   1. probe on the GPU: exit 0 on the invariant path (draft model and MTP head),
#      exit 3 with a reason when TANDEM_GEMM=splitk pins the cuBLAS GEMM;
#   2. speculative == classic on the GPU, byte for byte: greedy and seeded T > 0,
#      K = 2..8, draft model and MTP head (the bundled models/);
#   3. bench on the GPU: B=1 decode and 512-token prefill of random bf16 models of
#      the Qwen2.5-0.5B / Llama-3.2-1B / Llama-3.1-8B shapes (tandem-random-model),
#      and an f16 copy of the 0.5B shape (ADR 0083: two bf16 terms a weight).
#   scripts/gpu-e2e.sh BIN_DIR OUT_DIR [--no-8b]
set -uo pipefail
bin="$1" out="$2" big="${3:-}"
mkdir -p "$out"
t="$bin/tandem"
status=0
check() {  # name expected-rc command...
  local name="$1" want="$2"; shift 2
  "$@" >"$out/$name.out" 2>"$out/$name.err"
  local rc=$?
  if [[ $rc -eq $want ]]; then echo "ok   $name (rc $rc)"; else echo "FAIL $name (rc $rc, want $want)"; status=1; tail -3 "$out/$name.err"; fi
}
tgt=models/tandem-target
for d in draft mtp; do
  check "probe_$d" 0 "$t" probe -m $tgt -md models/tandem-$d --device cuda
  TANDEM_GEMM=splitk check "probe_${d}_cublas" 3 "$t" probe -m $tgt -md models/tandem-$d --device cuda
  grep -h "reason" "$out/probe_$d.out" "$out/probe_${d}_cublas.out"
done
prompt="1,200,300,400,500,600,700,800,900,1000,1100,1200"
gen() { "$t" generate -m $tgt --tokens "$prompt" -n 96 --ignore-eos --device cuda "$@"; }
for mode in greedy seeded; do
  args=(--temp 0); [[ $mode == seeded ]] && args=(--temp 0.8 --seed 7)
  gen "${args[@]}" >"$out/classic_$mode.txt" 2>/dev/null || { echo "FAIL classic $mode"; status=1; }
  "$t" generate -m $tgt --tokens "$prompt" -n 96 --ignore-eos --device cpu "${args[@]}" >"$out/cpu_$mode.txt" 2>/dev/null
  cmp -s "$out/classic_$mode.txt" "$out/cpu_$mode.txt" && echo "info cpu == gpu classic ($mode)" ||
    echo "info cpu != gpu classic ($mode): tolerance only, not a failure"
  for d in draft mtp; do
    for k in 2 3 4 5 6 7 8; do
      gen "${args[@]}" -md models/tandem-$d --draft-block-size $k --stats >"$out/spec_${mode}_${d}_$k.txt" \
        2>"$out/spec_${mode}_${d}_$k.err"
      if cmp -s "$out/classic_$mode.txt" "$out/spec_${mode}_${d}_$k.txt"; then
        echo "ok   speculative == classic ($mode, $d, K=$k): $(grep -o 'accept[^,]*' "$out/spec_${mode}_${d}_$k.err" | head -1)"
      else
        echo "FAIL speculative != classic ($mode, $d, K=$k)"; status=1
      fi
    done
  done
done
rm=$bin/tandem-random-model
presets="qwen2.5-0.5b llama-3.2-1b"
[[ "$big" == "--no-8b" ]] || presets="$presets llama-3.1-8b"
for p in $presets; do
  dir=/tmp/rand-$p
  $rm --preset $p --out $dir --dtype bf16 >/dev/null 2>&1 || { echo "FAIL random model $p"; status=1; continue; }
  if [[ $p == qwen2.5-0.5b ]]; then  # a model big enough for cuBLAS to pick by shape; its own drafter
    check probe_random_invariant 0 "$t" probe -m $dir -md $dir --device cuda
    TANDEM_GEMM=splitk check probe_random_cublas 3 "$t" probe -m $dir -md $dir --device cuda
    grep -h "reason" "$out/probe_random_invariant.out" "$out/probe_random_cublas.out"
    grep -h "probe\|declined" "$out/probe_random_cublas.err" | tail -2
    for k in 8 16; do  # cuBLAS may pick one algorithm for all small M: try wider verify blocks
      TANDEM_GEMM=splitk "$t" probe -m $dir -md $dir --device cuda --draft-block-size $k 2>/dev/null |
        sed "s/^/cuBLAS probe K=$k: /"
      echo "cuBLAS probe K=$k: exit ${PIPESTATUS[0]}"
    done
    # Where a decode step's GPU time goes (ncu: kernels serialised, so totals, not the step's wall time).
    if [[ -z ${TANDEM_E2E_NO_NCU:-} ]] && command -v ncu >/dev/null; then  # TANDEM_E2E_NO_NCU=1 skips it
      timeout 150 ncu --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum \
        "$t" bench -m $dir --device cuda -p 16 -n 4 -r 1 --bw-mib 512 >"$out/ncu_decode.txt" 2>&1
      echo "ncu rc=$?"; grep -E "^  [a-z_A-Z].*\(|gpu__time_duration.sum|Invocations" "$out/ncu_decode.txt" | head -80
    fi
  fi
  echo "== bench $p"
  "$t" bench -m $dir --device cuda -p 512 -n 128 -r 3 --bw-mib 4096 2>&1 | tee "$out/bench_$p.txt" |
    grep -E "^(device|model|prefill|decode|ceiling|reached)"
  # Short context too: separates the per-token fixed cost from attention over a long cache.
  "$t" bench -m $dir --device cuda -p 16 -n 128 -r 2 --bw-mib 4096 2>&1 | tee "$out/bench_short_$p.txt" |
    grep -E "^decode" | sed 's/^/short context (16-token prompt): /'
  if [[ $p != llama-3.1-8b ]]; then  # without programmatic dependent launch (ADR 0041), for comparison
    TANDEM_CUDA_PDL=0 "$t" bench -m $dir --device cuda -p 16 -n 128 -r 2 --bw-mib 4096 2>&1 |
      tee "$out/bench_short_nopdl_$p.txt" | grep -E "^decode" | sed 's/^/short context, TANDEM_CUDA_PDL=0: /'
  fi
  rm -rf $dir
done
dir=/tmp/rand-f16
if $rm --preset qwen2.5-0.5b --out $dir --dtype f16 >/dev/null 2>&1; then
  echo "== bench qwen2.5-0.5b f16"
  "$t" bench -m $dir --device cuda -p 512 -n 128 -r 3 --bw-mib 4096 2>&1 | tee "$out/bench_f16.txt" |
    grep -E "^(prefill|decode|ceiling|reached)"
  rm -rf $dir
else
  echo "FAIL random model f16"; status=1
fi
exit $status
