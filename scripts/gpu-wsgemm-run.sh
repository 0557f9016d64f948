#!/usr/bin/env bash
# One device call for the warp-specialised wgmma large tile (ADR 0055):
# unpacks DIR/pack.tar.xz (made by /tmp/mkpack.sh from test_cuda_kernels,
# bench_cuda_gemm, tandem, tandem-random-model), runs the GEMM bitwise tests,
# bench_cuda_gemm --large-variants, then `tandem bench` on a random
# Llama-3.1-8B shape with the old (5) and new large tiles; optional steps stop
# once BUDGET seconds have passed.
#   on the GPU machine: bash DIR/gpu-wsgemm-run.sh DIR OUT [BUDGET] [NEW]
set -uo pipefail
dir=$1 out=$2 budget=${3:-330} new=${4:-9}
tar xJf "$dir/pack.tar.xz" -C /tmp || exit 1
b=/tmp/p
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
pylib=$(python3 -c 'import glob,os,site; print(":".join(sorted({os.path.dirname(f) for s in site.getsitepackages() for f in glob.glob(os.path.join(s,"nvidia","**","libcublas.so*"),recursive=True)})))' 2>/dev/null)
[[ -n "$pylib" ]] && export LD_LIBRARY_PATH="$pylib:$LD_LIBRARY_PATH"
export TANDEM_SOURCE_DIR="$PWD"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
date -u
if [[ "${QUICK:-0}" == 1 ]]; then  # the second call: the bitwise tests and the GEMM variants only
  timeout 25 $b/test_cuda_kernels --gtest_filter='*GemmLargeTile*:*WgmmaProbe*:*GemmInvariance*' >$out/kernels.log 2>&1
  echo "== test_cuda_kernels rc=$? ($SECONDS s)"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|: Failure|^\[ RUN|Expected|Which is" $out/kernels.log | tail -12
  TANDEM_BENCH_LARGE_POINTS=quick TANDEM_BENCH_LARGE_VARIANTS=${VARIANTS:-5,13,14,11,12,9} timeout 32 \
    $b/bench_cuda_gemm --large-variants >$out/gemm.txt 2>&1
  echo "== bench_cuda_gemm --large-variants rc=$? ($SECONDS s)"
  grep -vE "^ceilings" $out/gemm.txt
  exit 0
fi
m8=/tmp/m8b
$b/tandem-random-model --preset llama-3.1-8b --out $m8 --dtype bf16 >$out/model8.log 2>&1 &
m8_pid=$!

timeout 120 $b/test_cuda_kernels --gtest_filter='*Gemm*:*Wgmma*' >$out/kernels.log 2>&1
tests_rc=$?
echo "== test_cuda_kernels rc=$tests_rc ($SECONDS s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|: Failure|Expected|Which is" $out/kernels.log | head -30
TANDEM_BENCH_LARGE_VARIANTS=5,2,9,10,11,12,13,14 timeout 150 $b/bench_cuda_gemm --large-variants >$out/gemm.txt 2>&1
echo "== bench_cuda_gemm --large-variants rc=$? ($SECONDS s)"
grep -vE "^ceilings" $out/gemm.txt

if ((tests_rc != 0)); then echo "== tests failed: no tandem bench"; kill $m8_pid 2>/dev/null; exit 1; fi
# NEW (if not given): the new variant with the least total time over the bf16 points.
if [[ -z "${4:-}" ]]; then
  pick=$(awk '/^  [^ ]/ {bf = ($0 ~ / bf16/)} bf && /^    v(9|10|11|12|13|14) / {t[$1] += $2}
              END {for (v in t) print t[v], v}' $out/gemm.txt | sort -n | head -1 | awk '{print $2}' | tr -d v)
  [[ -n "$pick" ]] && new=$pick
fi
echo "== tandem bench with the new variant $new"

run() {  # label, "ENV=.. ENV=..", tandem bench args
  local label=$1 envs=$2
  shift 2
  env $envs timeout 100 $b/tandem bench -m $m8 --device cuda "$@" >$out/bench_$label.txt 2>&1
  echo "== $label ($envs $*): rc=$? ($SECONDS s)"
  grep -E "^rep|^prefill|^decode|tok/s" $out/bench_$label.txt | head -6
}
wait $m8_pid
echo "== 8B model made ($SECONDS s)"
run p512_v5 "TANDEM_CUDA_LARGE_TILE=5" -p 512 -n 8 -r 2
run p512_v$new "TANDEM_CUDA_LARGE_TILE=$new" -p 512 -n 8 -r 2
run p512_v${new}_slices "TANDEM_CUDA_LARGE_TILE=$new TANDEM_CUDA_TILE_SLICES=1" -p 512 -n 8 -r 2
((SECONDS < budget)) && run p2048_c2048_v5 "TANDEM_CUDA_LARGE_TILE=5 TANDEM_CUDA_CHUNK_ROWS=2048" -p 2048 -n 1 -r 2
((SECONDS < budget)) && run p2048_c2048_v$new "TANDEM_CUDA_LARGE_TILE=$new TANDEM_CUDA_CHUNK_ROWS=2048" -p 2048 -n 1 -r 2
((SECONDS < budget)) && run p2048_c256_v$new "TANDEM_CUDA_LARGE_TILE=$new TANDEM_CUDA_CHUNK_ROWS=256" -p 2048 -n 1 -r 2
((SECONDS < budget)) && run p2048_v$new "TANDEM_CUDA_LARGE_TILE=$new" -p 2048 -n 1 -r 2
echo "== done ($SECONDS s)"
