#!/bin/sh
# The GPU knobs (TANDEM_CUDA_*, TANDEM_STEP_TIMING; docs/environment.md) at start-up of
# every subcommand that runs a model, in any build (no GPU needed): a bad value exits 2
# naming the variable and its value before anything loads; a blank or good one gets past
# the checks to the load of a model directory that does not exist (exit 1, "no such file").
# Usage: gpu_knobs_test.sh TANDEM_BIN
set -u
bin="$1"
missing=/nonexistent/tandem-model-dir
fails=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run SUBCOMMAND NAME VALUE: the subcommand on the missing model with NAME=VALUE.
run() {
  case "$1" in
    serve) set -- "$2" "$3" serve -m "$missing" --host 127.0.0.1 --port 0 -t 1 ;;
    generate) set -- "$2" "$3" generate -m "$missing" --tokens 1,2,3 -n 1 -t 1 ;;
    probe) set -- "$2" "$3" probe -m "$missing" -md "$missing" -t 1 ;;
    bench) set -- "$2" "$3" bench -m "$missing" -n 1 -r 1 -p 4 ;;
  esac
  name="$1" value="$2"
  shift 2
  env -u TANDEM_LOG_LEVEL "$name=$value" "$bin" "$@" >"$out" 2>&1
}

# refused SUBCOMMAND NAME VALUE
refused() {
  run "$@"
  got=$?
  if [ "$got" != 2 ] || ! grep -Fq -- "$2='$3'" "$out" || ! grep -Eq 'accepted: |is not one of: ' "$out"; then
    echo "FAIL: $1 with $2='$3': exit $got (want 2, naming it and what is accepted):"
    sed 's/^/    /' "$out"
    fails=$((fails + 1))
  fi
}

# accepted SUBCOMMAND NAME VALUE
accepted() {
  run "$@"
  got=$?
  if [ "$got" != 1 ] || ! grep -qi 'no such file' "$out"; then
    echo "FAIL: $1 with $2='$3': exit $got (want 1 at the model's load):"
    sed 's/^/    /' "$out"
    fails=$((fails + 1))
  fi
}

bad='TANDEM_CUDA_SMALL_TILE=abc TANDEM_CUDA_SMALL_TILE=23 TANDEM_CUDA_SMALL_TILE=20,9,3
TANDEM_CUDA_SMALL_TILE=20,8,3,23 TANDEM_CUDA_LARGE_TILE=abc TANDEM_CUDA_LARGE_TILE=18
TANDEM_CUDA_WIDE_TILE=5 TANDEM_CUDA_TILE_SLICES=maybe TANDEM_CUDA_PDL=of TANDEM_CUDA_ROW_NORM=2
TANDEM_CUDA_FUSE=x TANDEM_CUDA_FUSE_NORM=x TANDEM_CUDA_FUSE_LAUNCHES=x TANDEM_CUDA_ATTENTION=flash
TANDEM_CUDA_GRAPH_STRIDE=long TANDEM_CUDA_UPLOAD=mapped TANDEM_CUDA_UPLOAD_CHUNK_MIB=0
TANDEM_CUDA_CHUNK_ROWS=0 TANDEM_CUDA_ACTIVATIONS=fp16 TANDEM_STEP_TIMING=2'
good='TANDEM_CUDA_SMALL_TILE=20 TANDEM_CUDA_SMALL_TILE=9 TANDEM_CUDA_SMALL_TILE=20,8,3,25
TANDEM_CUDA_SMALL_TILE=8,3 TANDEM_CUDA_LARGE_TILE=17 TANDEM_CUDA_WIDE_TILE=0 TANDEM_CUDA_TILE_SLICES=0
TANDEM_CUDA_PDL=off TANDEM_CUDA_ROW_NORM=1 TANDEM_CUDA_FUSE=0 TANDEM_CUDA_FUSE_NORM=no
TANDEM_CUDA_FUSE_LAUNCHES=0 TANDEM_CUDA_ATTENTION=split TANDEM_CUDA_GRAPH_STRIDE=pool
TANDEM_CUDA_UPLOAD=pageable TANDEM_CUDA_UPLOAD_CHUNK_MIB=128 TANDEM_CUDA_CHUNK_ROWS=512
TANDEM_CUDA_ACTIVATIONS=f32 TANDEM_STEP_TIMING=1'

for command in serve generate probe bench; do
  for pair in $bad; do refused "$command" "${pair%%=*}" "${pair#*=}"; done
done
# The rest once each (generate): good values, and blank = the default.
for pair in $good; do accepted generate "${pair%%=*}" "${pair#*=}"; done
for pair in $bad; do
  accepted generate "${pair%%=*}" ""
  accepted generate "${pair%%=*}" " "
done

[ "$fails" = 0 ] && echo "gpu knobs: all cases pass"
exit "$fails"
