#!/usr/bin/env bash
# One device call for the prefill work (issue 15/17, ADRs 0043-0044): unpacks
# a pack made by `scripts/gpu-prefill-run.sh --pack DIR` (binaries + shared
# libraries + this script), runs the GPU tests, the large-tile GEMM variants,
# and `tandem bench` prefill at 512 and 2048 tokens on a random Llama-3.1-8B
# shape (tile attention vs the split shape it replaces, bf16 activations,
# each large-tile variant), then an ncu per-kernel summary of a 2-layer 8B-shape prefill.
# Optional steps are skipped once BUDGET seconds have passed.
#   on the GPU machine: bash DIR/gpu-prefill-run.sh DIR OUT [BUDGET]
set -uo pipefail
if [[ "${1:-}" == "--pack" ]]; then
  dir=$2 b=build-gpu stage=$(mktemp -d)
  mkdir -p "$stage/lib" "$dir"
  cp $b/tests/kernels/test_cuda_kernels $b/tests/model/test_cuda_forward $b/bench/bench_cuda_gemm \
    $b/src/app/tandem $b/tools/random_model/tandem-random-model "$stage/"
  strip "$stage"/test_* "$stage"/bench_cuda_gemm "$stage"/tandem "$stage"/tandem-random-model
  for bin in $b/src/app/tandem $b/tests/model/test_cuda_forward; do
    ldd $bin | awk '/=> \// {print $3}' |
      grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
      xargs -r -I{} cp -L {} "$stage/lib/"
  done
  icu=$(ls "$stage"/lib/libicudata.so.* 2>/dev/null | head -1)
  if [[ -n "$icu" ]]; then  # an empty ICU data package (the tokenizer's data is in libicuuc)
    ver=$(basename "$icu" | sed 's/libicudata.so.\([0-9]*\).*/\1/')
    echo "const char icudt${ver}_dat[1]={0};" >"$stage/s.c"
    gcc -shared -o "$icu" "$stage/s.c" && rm "$stage/s.c"
  fi
  tar -cJf "$dir/pack.tar.xz" -C "$stage" . && cp "$0" "$dir/" && rm -rf "$stage"
  ls -la "$dir"
  exit 0
fi

dir=$1 out=$2 budget=${3:-170}
b=/tmp/prefill-bin
mkdir -p $b && tar -xJf "$dir/pack.tar.xz" -C $b || exit 1
export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
pylib=$(python3 -c 'import glob,os,site; print(":".join(sorted({os.path.dirname(f) for s in site.getsitepackages() for f in glob.glob(os.path.join(s,"nvidia","**","libcublas.so*"),recursive=True)})))' 2>/dev/null)
[[ -n "$pylib" ]] && export LD_LIBRARY_PATH="$pylib:$LD_LIBRARY_PATH"
export TANDEM_SOURCE_DIR="$PWD"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
m8=/tmp/m8b m2=/tmp/m8b2
$b/tandem-random-model --preset llama-3.1-8b --layers 2 --out $m2 --dtype bf16 >$out/model2.log 2>&1 &
m2_pid=$!
$b/tandem-random-model --preset llama-3.1-8b --out $m8 --dtype bf16 >$out/model8.log 2>&1 &
m8_pid=$!

timeout 90 $b/test_cuda_kernels >$out/kernels.log 2>&1
echo "== test_cuda_kernels rc=$? ($SECONDS s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|: Failure" $out/kernels.log | head -20
timeout 120 $b/test_cuda_forward >$out/forward.log 2>&1
echo "== test_cuda_forward rc=$? ($SECONDS s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|: Failure" $out/forward.log | head -20
timeout 60 $b/bench_cuda_gemm --large-variants >$out/gemm.txt 2>&1
echo "== bench_cuda_gemm --large-variants rc=$? ($SECONDS s)"
grep -vE "^device|^ceilings" $out/gemm.txt

run() {  # label, model, "ENV=.. ENV=..", tandem bench args
  local label=$1 model=$2 envs=$3
  shift 3
  env $envs timeout 150 $b/tandem bench -m $model --device cuda --bw-mib 1024 "$@" >$out/bench_$label.txt 2>&1
  echo "== $label ($envs $*): rc=$? ($SECONDS s)"
  grep -E "^rep|^prefill|^decode" $out/bench_$label.txt | head -6
}
wait $m2_pid
echo "== 2-layer model made ($SECONDS s)"
# Comparisons on a 2-layer 8B shape (the same layers, a fraction of the load
# time): this work's defaults, the configuration before it, bf16 activations.
run l2_p2048 $m2 "" -p 2048 -n 1 -r 3
run l2_p2048_before $m2 "TANDEM_CUDA_ATTENTION=split TANDEM_CUDA_CHUNK_ROWS=128" -p 2048 -n 1 -r 2
run l2_p2048_bf16 $m2 "TANDEM_CUDA_ACTIVATIONS=bf16" -p 2048 -n 1 -r 3
wait $m8_pid
echo "== 8B model made ($SECONDS s)"
# The figures against the targets: the whole 8B shape, this work's defaults.
run p512 $m8 "" -p 512 -n 8 -r 2
run p2048 $m8 "" -p 2048 -n 4 -r 2
# Optional, while the budget lasts: 128-row chunks, each large tile, bf16 on the whole 8B.
((SECONDS < budget)) && run l2_p2048_chunk128 $m2 "TANDEM_CUDA_CHUNK_ROWS=128" -p 2048 -n 1 -r 2
for v in 2 6 7 8; do  # the default is 5 (wgmma, ADR 0053); 2 the mma.sync one before
  ((SECONDS < budget)) || break
  run l2_p2048_large$v $m2 "TANDEM_CUDA_LARGE_TILE=$v" -p 2048 -n 1 -r 3
done
((SECONDS < budget)) && run p512_bf16 $m8 "TANDEM_CUDA_ACTIVATIONS=bf16" -p 512 -n 1 -r 2
if ((SECONDS < budget)) && command -v ncu >/dev/null; then
  timeout 60 ncu --clock-control none --print-summary per-kernel --metrics gpu__time_duration.sum \
    $b/tandem bench -m $m2 --device cuda -p 2048 -n 1 -r 1 --bw-mib 256 >$out/ncu_p2048.txt 2>&1
  echo "== ncu 2-layer p2048 rc=$? ($SECONDS s)"
  grep -E "^  [a-z_A-Z].*\(|gpu__time_duration.sum|Invocations" $out/ncu_p2048.txt | head -60
fi
echo "== done ($SECONDS s)"
