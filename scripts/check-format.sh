#!/usr/bin/env bash
# Fails (listing the files) when a tracked C++/CUDA source under src/, tests/,
# bench/ or tools/ differs from what the checked-in .clang-format produces.
# Fast: run first by scripts/test.sh. To fix the tree:
#   scripts/check-format.sh --fix     (clang-format -i over the same files)
# CLANG_FORMAT selects the binary (default: clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format}
command -v "$clang_format" >/dev/null 2>&1 || { echo "check-format: $clang_format not found" >&2; exit 2; }
mapfile -t files < <(git ls-files -- 'src/*' 'tests/*' 'bench/*' 'tools/*' |
  grep -E '\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh)$')
if [[ ${1:-} == --fix ]]; then
  printf '%s\0' "${files[@]}" | xargs -0 -r -n 32 "$clang_format" -i
  exit 0
fi
# One clang-format per batch of files, on every core: it names each file that differs
# ("FILE:LINE:COL: error: code should be clang-formatted").
rc=0
out=$(printf '%s\0' "${files[@]}" |
  xargs -0 -r -n 40 -P "$(nproc)" "$clang_format" --dry-run --Werror 2>&1 >/dev/null) || rc=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
if ((rc)) && ((${#bad[@]} == 0)); then
  echo "check-format: $clang_format failed:" >&2
  echo "$out" >&2
  exit 2
fi
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: fix with scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
