#!/bin/sh
# `tandem info` runs the start-up check of the TANDEM_* variables (validate_environment,
# src/app/environment.h) like serve, generate, probe and bench: a bad value exits 2 naming the
# variable and its value, and prints nothing about the machine; a blank or good value runs
# (exit 0, the CPU line). No model, no GPU needed.
# Usage: info_environment_test.sh TANDEM_BIN
set -u
bin="$1"
fails=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

info() {
  env -u TANDEM_LOG_LEVEL "$1=$2" "$bin" info >"$out" 2>&1
}

# refused NAME VALUE
refused() {
  info "$1" "$2"
  got=$?
  if [ "$got" != 2 ] || ! grep -Fq -- "tandem info: " "$out" || ! grep -Fq -- "$1='$2'" "$out" ||
    grep -q '^cpu: ' "$out"; then
    echo "FAIL: info with $1='$2': exit $got (want 2, naming it, before the report):"
    sed 's/^/    /' "$out"
    fails=$((fails + 1))
  fi
}

# accepted NAME VALUE
accepted() {
  info "$1" "$2"
  got=$?
  if [ "$got" != 0 ] || ! grep -q '^cpu: ' "$out"; then
    echo "FAIL: info with $1='$2': exit $got (want 0 and the report):"
    sed 's/^/    /' "$out"
    fails=$((fails + 1))
  fi
}

for pair in TANDEM_CUDA_PDL=of TANDEM_CUDA_SMALL_TILE=23 TANDEM_STEP_TIMING=2 TANDEM_GEMM=fast \
  TANDEM_KERNELS=sse9 TANDEM_DEVICE=gpu9 TANDEM_WEIGHTS=q9 TANDEM_MTP_ADAPTIVE=bogus \
  TANDEM_CPU_PREFETCH=streams=5 TANDEM_CPU_PREFETCH=farther=1; do
  refused "${pair%%=*}" "${pair#*=}"
done
for pair in TANDEM_CUDA_PDL=off TANDEM_CUDA_SMALL_TILE=20 TANDEM_GEMM=invariant TANDEM_KERNELS=scalar \
  TANDEM_CUDA_PDL= TANDEM_GEMM=' ' TANDEM_CPU_PREFETCH=streams=2,quant=1024; do
  accepted "${pair%%=*}" "${pair#*=}"
done

[ "$fails" = 0 ] && echo "info environment: all cases pass"
exit "$fails"
