#!/usr/bin/env bash
# `tandem serve` on the GPU (issue 17, ADR 0030), run from the repository root
# of a machine with a CUDA GPU:
#   1. test_gpu_serve (the bitwise checks of serve's engine on the device);
#   2. a Llama-3.1-8B-shaped random bf16 model (tandem-random-model), made there,
#      with the Llama-3 tokenizer (ids below its 128256);
#   3. bench/load/load.py against `tandem serve --device cuda`: 1, 8 and 64 streams
#      of 128 tokens; the TTFT of a 2048-token prompt alone; the same load with
#      --gemm splitk (cuBLAS); at B=1 a self-draft at K=4 against classic, through
#      the server and through `tandem bench -md` (round and verify timing);
#   4. `tandem bench --verify` (the K-row verify forward against a decode step and
#      the all-accepted upper bound, ADR 0047) and `--batch 1,8` (the raw forward
#      at 1 and 8 rows, to set against serve's TPOT).
# The servers run with TANDEM_STEP_TIMING=1: their logs say where a step's host
# time goes (upload / enqueue / wait per device chunk; forward / sampling /
# delivery per engine tick), grepped below; the weight upload's time and rate
# come from the "uploaded ... GB of weights" line.
#   scripts/gpu-serve-bench.sh BIN_DIR OUT_DIR TOKENIZER_DIR
# BIN_DIR: tandem, tandem-random-model, test_gpu_serve, lib/ (scripts/gpu-test.sh --pack).
# GPU_SERVE_BENCH_SKIP_TESTS=1 skips step 1 (a caller that ran test_gpu_serve
# beside other tests); a model already made at /tmp/rand-8b (config.json and
# its safetensors) is used as it is, so a caller can make it in parallel.
set -uo pipefail
bin="$1" out="$2" tok="$3"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
t="$bin/tandem"
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
"$t" info | grep -i cuda

if [[ "${GPU_SERVE_BENCH_SKIP_TESTS:-}" != 1 ]]; then
  echo "== test_gpu_serve ($(elapsed) s)"
  TANDEM_SOURCE_DIR=$PWD timeout 150 "$bin/test_gpu_serve" >"$out/test_gpu_serve.log" 2>&1
  echo "test_gpu_serve rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED \]|rounds|Failure|Expected|Which is" "$out/test_gpu_serve.log" | head -40
fi

m=/tmp/rand-8b
echo "== random model ($(elapsed) s)"
if ! ls $m/config.json $m/*.safetensors >/dev/null 2>&1; then
  "$bin/tandem-random-model" --preset llama-3.1-8b --out $m --dtype bf16 >"$out/random_model.log" 2>&1 ||
    { echo "FAIL random model"; tail -3 "$out/random_model.log"; exit 1; }
fi
cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json $m/
grep -E '"(eos|bos)_token_id"' $m/config.json
# Requests run to --max-tokens through ignore_eos (vLLM's meaning), so greedy requests stay plain greedy
# and take the greedy picks made on the device (ADR 0070); GPU_SERVE_BENCH_BAN=1 bans the end-of-sequence
# ids with logit_bias instead (the rows downloaded and sampled on the host, the runs before ADR 0070).
ban=128001,128008,128009,2
if [[ "${GPU_SERVE_BENCH_BAN:-0}" == 1 ]]; then eos_args=(--ban-tokens "$ban"); else eos_args=(--ignore-eos); fi
port=18090
serve() {  # label args...: starts the server, waits for /health 200
  local label="$1"; shift
  serving="$label"
  TANDEM_STEP_TIMING=1 "$t" serve -m $m --host 127.0.0.1 --port $port --no-webui "$@" >"$out/serve_$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || { echo "FAIL serve $label exited"; tail -5 "$out/serve_$label.log"; return 1; }
    sleep 0.5
  done
  grep -E "ready:|forward on|exactness|speculation|uploaded" "$out/serve_$label.log" | cut -c1-400 | head -6
}
stop() {
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  # The last timing report of each kind and rows (the steady state of the last load level).
  grep -E "(cuda forward|engine) timing" "$out/serve_$serving.log" | sed -E 's/^[0-9-]+ [0-9:.]+ info +//' | tail -12
}
load() {  # label args...
  local label="$1"; shift
  timeout 120 python3 "$bin/load.py" --url http://127.0.0.1:$port "${eos_args[@]}" --label "$label" \
    --json "$out/load_$label.json" "$@"
}

echo "== serve, invariant GEMM ($(elapsed) s)"
if serve invariant -np 64 -c 2304 -b 2048 --device cuda; then
  curl -s http://127.0.0.1:$port/health | head -c 300; echo
  curl -s http://127.0.0.1:$port/v1/models; echo
  curl -s http://127.0.0.1:$port/metrics | grep device_info
  load invariant --concurrency 1,8,64 --max-tokens 128 --prompt-tokens 32 --warmup 1
  load ttft2048 --concurrency 1 --max-tokens 1 --prompt-tokens 2048 --warmup 0 --repeat 3
  stop
fi

echo "== serve, --gemm splitk (cuBLAS) ($(elapsed) s)"
if serve cublas -np 64 -c 2304 -b 2048 --device cuda --gemm splitk; then
  load cublas --concurrency 1,8,64 --max-tokens 128 --prompt-tokens 32 --warmup 1
  load ttft2048_cublas --concurrency 1 --max-tokens 1 --prompt-tokens 2048 --warmup 0 --repeat 2
  stop
fi

echo "== bench --verify and --batch ($(elapsed) s)"
timeout 120 "$t" bench -m $m --device cuda --verify 1,2,4,5,8 -p 128 -n 32 2>&1 |
  tee "$out/bench_verify.txt" | grep -E "uploaded|verify|decode step|^\|"
timeout 120 "$t" bench -m $m --device cuda --batch 1,8 -p 32 -n 32 -r 2 2>&1 |
  tee "$out/bench_batch.txt" | grep -E "uploaded|^\|"

echo "== bench -md self, K=4 ($(elapsed) s)"
timeout 150 "$t" bench -m $m -md $m --k-min 4 --k-max 4 --prompts 2 -n 64 --device cuda 2>&1 |
  tee "$out/bench_spec_self.txt" | grep -vE "^\S+ \S+ info"

if [[ $(elapsed) -lt 250 ]]; then
  echo "== serve, self-draft K=4, B=1 ($(elapsed) s)"
  if TANDEM_ENABLE_MTP_B1=1 serve selfdraft -np 1 -c 2304 --device cuda -md $m --draft-block-size 4; then
    load selfdraft --concurrency 1 --max-tokens 128 --prompt-tokens 32 --warmup 1 --repeat 2
    curl -s http://127.0.0.1:$port/v1/internal/mtp-policy; echo
    stop
  fi
fi
echo "done ($(elapsed) s)"
