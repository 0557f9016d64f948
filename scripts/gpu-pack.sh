#!/usr/bin/env bash
# Packs what a lent GPU machine (the device tool's `run`: no -dev packages, 64 MiB carried with the
# checkout) needs for a measurement into one archive:
#   scripts/gpu-pack.sh ARCHIVE [KEEP...]
# Builds and packs with `scripts/gpu-test.sh --pack .gpu --stub-icu`, keeps lib/ and the files KEEP
# names (default: tandem test_cuda_kernels test_cuda_forward tandem-random-model), adds
# libtandem_kernel_trace.so, and writes `tar | xz -9` to ARCHIVE (~9 MB; xz -9's 64 MiB window stores
# near-identical builds once, so an older build copied into .gpu beforehand and named in KEEP — e.g.
# tandem_old for an A/B — costs little). List /.gpu/ and ARCHIVE in .git/info/exclude, carry ARCHIVE,
# and unpack it there (`tar -xJf ARCHIVE`: it holds .gpu/). Scripts such as gpu-kv-split-ab.sh then take
# .gpu as their BIN_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
archive="$1"
shift
keep=("$@")
[[ ${#keep[@]} -gt 0 ]] || keep=(tandem test_cuda_kernels test_cuda_forward tandem-random-model)
scripts/gpu-test.sh --pack .gpu --stub-icu
cmake --build build-gpu --target tandem_kernel_trace
cp build-gpu/bench/libtandem_kernel_trace.so .gpu/
for f in .gpu/*; do
  name=$(basename "$f")
  [[ $name == lib || $name == libtandem_kernel_trace.so ]] && continue
  printf '%s\n' "${keep[@]}" | grep -qx "$name" || rm -rf "$f"
done
tar -cf - .gpu | xz -9 -T1 >"$archive"
echo "gpu-pack: $(du -h "$archive" | cut -f1) in $archive: $(ls .gpu | tr '\n' ' ')"
