#!/usr/bin/env bash
# Runs the GPU tests (ctest label "gpu": test_cuda_kernels, test_cuda_devices,
# test_cuda_forward, test_gpu_serve; test_cuda_kernels and test_cuda_forward once more with
# TANDEM_CUDA_PDL=0; the quantized kernel tests under TANDEM_CUDA_QUANT_FUSED_ROWS / _STREAM;
# test_cuda_forward and test_gpu_serve once more with
# TANDEM_CUDA_ACTIVATIONS=f32, and with TANDEM_CUDA_FUSE_ROPE_ROWS=16) and the CUDA GEMM benchmark (bench_cuda_gemm) on a machine
# with a CUDA GPU; with --e2e DIR also the tandem binary's GPU checks
# (scripts/gpu-e2e.sh: probe, generate classic == speculative, bench); and the
# memory-pattern benchmark (bench_stream_patterns) and the kernel-boundary one
# (bench_handoff_latency) unless --quick.
#
#   scripts/gpu-test.sh                 configure + build build-gpu/ (TANDEM_CUDA=ON), then run
#   scripts/gpu-test.sh --pack DIR      build, then copy the binaries, the shared libraries tandem
#                                       needs beyond glibc/libstdc++ (DIR/lib) and the scripts into
#                                       DIR (to carry to a GPU machine that cannot build). The lent
#                                       machine limits what travels (64 MiB with the checkout): there,
#                                       carry DIR as one `tar -cJ` archive (13 MB) and unpack it first.
#   scripts/gpu-test.sh --bin DIR       run prebuilt binaries from DIR (no build)
#   --stub-icu (with --pack)            put a 15 kB stand-in for libicudata.so (31 MB, 8 MB of the
#                                       archive) in DIR/lib: enough for the bundled and random
#                                       models, whose tokenizers use only ICU's compiled-in tables;
#                                       NOT for a tokenizer with an NFKC/NFKD normalizer (ICU then
#                                       finds no data). With it two tandem builds, the three GPU
#                                       test programs and lib/ pack into 14.5 MB of tar -cJ.
# Options: --quick (benchmark on 4096x4096 only), --out DIR (logs: tests.log, bench.txt),
#          --e2e (also scripts/gpu-e2e.sh: probe, speculative == classic, model benchmarks;
#                 --no-8b skips the 8B-shape model),
#          --sanitize (also run a subset under compute-sanitizer memcheck),
#          --tune (build with -DTANDEM_CUDA_TUNING=ON and time the GEMM's tuning candidates;
#                  with --bin, DIR must hold such a build),
#          --ncu (profile the shipping small- and large-M GEMM kernels with Nsight Compute).
# cuBLAS (the benchmark's yardstick and one test's reference) is loaded with dlopen;
# the script puts the toolkit's and pip's libcublas directories on LD_LIBRARY_PATH.
#
# On a lent GPU machine without the -dev packages (the device tool's `run`, which
# sends the session's checkout): pack into a folder directly under that checkout's
# root that .git/info/exclude ignores, name it in `carry`, and run
#   bash .gpu/gpu-test.sh --bin .gpu --out "$OUT" --sanitize
# (DIR must sit directly under the repository root: the script cd's to DIR/..).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$(dirname "$0")/.." || exit 1
bin="" pack="" out="" quick="" sanitize="" tune="" ncu="" e2e="" e2e_args="" stub_icu=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --pack) pack="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick="--quick"; shift ;;
    --sanitize) sanitize=1; shift ;;
    --tune) tune=1; shift ;;
    --ncu) ncu=1; shift ;;
    --e2e) e2e=1; shift ;;
    --no-8b) e2e_args="--no-8b"; shift ;;
    --stub-icu) stub_icu=1; shift ;;
    *) echo "usage: $0 [--bin DIR | --pack DIR [--stub-icu]] [--out DIR] [--quick] [--sanitize] [--tune] [--ncu]" >&2; exit 2 ;;
  esac
done

if [[ -z "$bin" ]]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON \
    -DTANDEM_CUDA_TUNING="$([[ -n "$tune" ]] && echo ON || echo OFF)" >/dev/null || exit 1
  cmake --build build-gpu --target test_cuda_kernels test_cuda_devices test_cuda_forward test_gpu_serve \
    bench_cuda_gemm bench_stream_patterns bench_handoff_latency tandem tandem-random-model || exit 1
  if [[ -n "$pack" ]]; then
    mkdir -p "$pack"
    cp build-gpu/tests/kernels/test_cuda_kernels build-gpu/tests/kernels/test_cuda_devices \
      build-gpu/tests/model/test_cuda_forward build-gpu/tests/runtime/test_gpu_serve \
      build-gpu/bench/bench_cuda_gemm build-gpu/bench/bench_stream_patterns build-gpu/bench/bench_handoff_latency \
      build-gpu/src/app/tandem \
      build-gpu/tools/random_model/tandem-random-model scripts/gpu-test.sh scripts/gpu-e2e.sh "$pack"/
    # The shared libraries tandem needs beyond glibc/libstdc++ (the GPU machine has no -dev packages).
    mkdir -p "$pack/lib"
    ldd build-gpu/src/app/tandem | awk '/=> \// {print $3}' |
      grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
      xargs -r -I{} cp -L {} "$pack/lib/"
    if [[ -n "$stub_icu" ]]; then
      icudata=$(basename "$(ls "$pack"/lib/libicudata.so.* 2>/dev/null | head -1)")
      if [[ -n "$icudata" ]]; then
        sym="icudt${icudata#libicudata.so.}_dat"
        echo "const double ${sym}[16] = {0};" >"$pack/icustub.c"
        gcc -shared -fPIC -O2 -Wl,-soname,"$icudata" -o "$pack/lib/$icudata" "$pack/icustub.c" || exit 1
        rm -f "$pack/icustub.c"
      fi
    fi
    echo "packed into $pack"
    exit 0
  fi
fi

out="${out:-$(mktemp -d)}"
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
pylib=$(python3 - 2>/dev/null <<'EOF'
import glob, os, site
dirs = set()
for s in site.getsitepackages() + [site.getusersitepackages()]:
    for f in glob.glob(os.path.join(s, "nvidia", "**", "libcublas.so*"), recursive=True):
        dirs.add(os.path.dirname(f))
print(":".join(sorted(dirs)))
EOF
)
[[ -n "$pylib" ]] && LD_LIBRARY_PATH="$pylib:${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv

status=0
if [[ -n "$bin" ]]; then
  export TANDEM_SOURCE_DIR="$PWD"  # the fixtures of this checkout (the binaries name the build machine's)
  # A packed DIR carries the shared libraries the binaries need (test_cuda_forward and tandem link spdlog, ...).
  [[ -d "$bin/lib" ]] && export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}"
  for t in test_cuda_devices test_cuda_kernels test_cuda_forward test_gpu_serve; do
    [[ -x "$bin/$t" ]] || continue
    "$bin/$t" >"$out/$t.log" 2>&1
    rc=$?
    cat "$out/$t.log" >>"$out/tests.log"
    grep -E "^\[  (PASSED|FAILED) |^\[ accuracy|^\[gpu golden|: Failure" "$out/$t.log"
    echo "== $t: rc=$rc"
    [[ $rc -eq 0 ]] || status=1
  done
  bench="$bin/bench_cuda_gemm"
else
  ctest --test-dir build-gpu -L gpu --output-on-failure 2>&1 | tee "$out/tests.log" || status=1
  bench=build-gpu/bench/bench_cuda_gemm
fi
# rerun VAR=VALUE LABEL TEST...: the named test binaries once more with VAR=VALUE (log: TEST_LABEL.log).
rerun() {
  local setting="$1" label="$2" t exe rc
  shift 2
  for t in "$@"; do
    exe="${bin:+$bin/$t}"
    [[ -z "$bin" ]] && exe=$(find build-gpu/tests -name "$t" -type f -perm -u+x | head -1)
    [[ -n "$exe" && -x "$exe" ]] || continue
    env "$setting" "$exe" >"$out/${t}_$label.log" 2>&1
    rc=$?
    grep -E "^\[  (PASSED|FAILED) |: Failure" "$out/${t}_$label.log"
    echo "== $t with $setting: rc=$rc"
    [[ $rc -eq 0 ]] || status=1
  done
}
# The same bitwise tests with programmatic dependent launch off (ADR 0041: the bits must not move).
rerun TANDEM_CUDA_PDL=0 pdl0 test_cuda_kernels test_cuda_forward
# The quantized GEMM's lone-row kernels (ADR 0078): the round kernel everywhere (stream 0) and
# the streamed one everywhere (2), the row read as blocks (fused rows 0, the default) or
# quantized by the GEMM itself (1); the default streams only wide matrices.
for mode in "0 0" "0 2" "1 0" "1 1" "1 2"; do
  set -- $mode
  exe="${bin:+$bin/test_cuda_kernels}"
  [[ -z "$bin" ]] && exe=$(find build-gpu/tests -name test_cuda_kernels -type f -perm -u+x | head -1)
  [[ -n "$exe" && -x "$exe" ]] || continue
  log="$out/test_cuda_kernels_fused$1_stream$2.log"
  TANDEM_CUDA_QUANT_FUSED_ROWS=$1 TANDEM_CUDA_QUANT_STREAM=$2 "$exe" --gtest_filter='*Quant*' >"$log" 2>&1
  rc=$?
  grep -E "^\[  (PASSED|FAILED) |: Failure" "$log"
  echo "== test_cuda_kernels (quantized) with TANDEM_CUDA_QUANT_FUSED_ROWS=$1 TANDEM_CUDA_QUANT_STREAM=$2: rc=$rc"
  [[ $rc -eq 0 ]] || status=1
done
# The forward and serve's engine once more with f32 GEMM inputs (the default is bf16, ADR 0054):
# both numerics must keep every bitwise property.
rerun TANDEM_CUDA_ACTIVATIONS=f32 f32 test_cuda_forward test_gpu_serve
# Verify blocks and batched decode through attention_from_qkv (ADR 0081; off by default until it has
# run on a GPU): the forward's and the engine's bitwise tests with the multi-row path on.
rerun TANDEM_CUDA_FUSE_ROPE_ROWS=16 fuse_rope16 test_cuda_forward test_gpu_serve
echo "== tests: $([[ $status -eq 0 ]] && echo passed || echo FAILED)"

"$bench" $quick ${tune:+--variants} 2>&1 | tee "$out/bench.txt" || status=1
# The quantized GEMM (ADR 0077) at the 1B / 8B projection shapes; skipped with --quick.
if [[ -z "$quick" ]]; then
  "$bench" --quant >"$out/bench_quant.txt" 2>&1 || status=1
  grep -E "^(8B|1B) +(gate_up|down) +q4_k .* 1 " "$out/bench_quant.txt"
fi
# How fast the GPU streams a weight matrix under the small tile's access patterns
# (docs/benchmarks.md, "Where decode's GEMM time goes"); skipped with --quick.
patterns="$(dirname "$bench")/bench_stream_patterns"
if [[ -z "$quick" && -x "$patterns" ]]; then
  "$patterns" >"$out/stream_patterns.txt" 2>&1 || status=1
  grep -E "^ceiling|gate_up +(contiguous|rows +U=4)" "$out/stream_patterns.txt"
fi
# What one kernel boundary costs a chain of dependent kernels (ADR 0075); skipped with --quick.
handoff="$(dirname "$bench")/bench_handoff_latency"
if [[ -z "$quick" && -x "$handoff" ]]; then
  "$handoff" 2>&1 | tee "$out/handoff_latency.txt" || status=1
fi

if [[ -n "$ncu" ]] && command -v ncu >/dev/null; then
  # The shipping small (M <= 16) and large tiles, bf16 x, one launch each; clocks left alone.
  for spec in "32, 16, 2, 1, 256, 4, false:5" "128, 128, 2, 4, 64, 4, false:2"; do
    name="${spec%:*}" skip="${spec##*:}"
    timeout 200 ncu --clock-control none -k "regex:Tile<$name" --launch-skip "$skip" -c 1 \
      --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis \
      --section LaunchStats "$bench" --quick >"$out/ncu_$skip.txt" 2>&1
    echo "== ncu Tile<$name>: rc=$?"
    grep -E "Duration|Throughput|Achieved Occupancy|Warp Cycles|Registers Per|Stall|stall" "$out/ncu_$skip.txt" | head -30
  done
fi

if [[ -n "$sanitize" ]] && command -v compute-sanitizer >/dev/null; then
  tests="${bin:-build-gpu/tests/kernels}/test_cuda_kernels"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
    --gtest_filter='*EveryTileShape*:*RowAloneEqualsRowInsideEveryBatch*/bf16:Cuda*' >"$out/memcheck.log" 2>&1
  rc=$?
  echo "== compute-sanitizer memcheck: rc=$rc ($(grep -c 'Invalid' "$out/memcheck.log") invalid accesses)"
  tail -3 "$out/memcheck.log"
  [[ $rc -eq 0 ]] || status=1
fi
if [[ -n "$e2e" ]]; then
  # A packed DIR carries this script's sibling gpu-e2e.sh (and lib/, on the path above).
  bash "$here/gpu-e2e.sh" "${bin:-build-gpu/src/app}" "$out/e2e" $e2e_args 2>&1 | tee "$out/e2e.txt"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
fi
exit $status
