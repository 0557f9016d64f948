#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root) to ctest's
# summary: dependencies, npm fixtures (lockfiles), Release build + tests,
# then the unit tests again under AddressSanitizer + UBSan, then the fuzz targets.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time and the CPU time (user + system) of what it ran, printed as it
# ends and again as a table at the end. On a shared machine the wall time is noisy; the
# CPU time is what the stage costs (docs/benchmarks.md "CI time").
clock_ticks=$(getconf CLK_TCK)
children_cpu_s() { # user + system seconds of the finished children of this shell
  local stat
  read -r -a stat <"/proc/$$/stat"
  echo $(((stat[15] + stat[16]) / clock_ticks))
}
stage_names=()
stage_secs=()
stage_cpu=()
stage_name=""
stage_start=$SECONDS
stage_cpu_start=$(children_cpu_s)
suite_start=$SECONDS
stage() {
  local cpu
  cpu=$(children_cpu_s)
  if [[ -n $stage_name ]]; then
    stage_names+=("$stage_name")
    stage_secs+=($((SECONDS - stage_start)))
    stage_cpu+=($((cpu - stage_cpu_start)))
    echo "test: stage '$stage_name' took $((SECONDS - stage_start)) s (CPU $((cpu - stage_cpu_start)) s)"
  fi
  stage_name=$1
  stage_start=$SECONDS
  stage_cpu_start=$cpu
}
stage_summary() {
  local rc=$?
  stage ""
  echo "test: stage times (wall s, CPU s):"
  for i in "${!stage_names[@]}"; do
    printf '  %5d %6d  %s\n' "${stage_secs[$i]}" "${stage_cpu[$i]}" "${stage_names[$i]}"
  done
  printf '  %5d %6d  total (exit %d)\n' $((SECONDS - suite_start)) "$(children_cpu_s)" "$rc"
}
trap stage_summary EXIT

stage "dependencies"
scripts/install-deps.sh

# First, as it takes seconds: the tree matches the checked-in .clang-format.
stage "check-format"
scripts/check-format.sh

# Test fixtures and clients pinned by lockfiles (tests/ only: tools/train's corpus
# packages are for training, not for tests), from the npm registry or an offline cache
# (scripts/npm-ci.sh says which).
mapfile -t npm_dirs < <( (git ls-files 'tests/*package-lock.json' 2>/dev/null ||
  find tests -name package-lock.json -not -path '*/node_modules/*') | xargs -n1 dirname)
stage "npm ci"
scripts/npm-ci.sh "${npm_dirs[@]}"

# The test programs' own code (assertions, set-up; not the libraries under test) at -O1
# here and -O0 under the sanitizers: it halves their compile time, and the libraries keep
# their build type's flags (cmake/tandem.cmake, TANDEM_TEST_CXX_FLAGS).
jobs=$(nproc)
stage "build (Release)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_TEST_CXX_FLAGS=-O1 >/dev/null
cmake --build build -j "$jobs"

# Only what `ctest -L unit` runs, at -O1 with line tables (enough for the
# sanitizers' stack traces): the sanitized build is the longest step of CI.
# CPU only: the Release build above compiles the CUDA code (when nvcc is found).
stage "build (ASan + UBSan)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON -DTANDEM_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DTANDEM_TEST_CXX_FLAGS=-O0 -DTANDEM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$jobs" --target unit_tests

echo "test: AddressSanitizer + UBSan unit tests"
stage "tests (ASan + UBSan)"
ctest --test-dir build-asan -L unit -j "$jobs" --output-on-failure

echo "test: full suite (Release)"
stage "tests (Release)"
ctest --test-dir build -j "$jobs" --output-on-failure

# Every parser of user-supplied input under libFuzzer for a bounded time
# (clang build in build-fuzz/; scripts/fuzz.sh, docs/fuzzing.md).
echo "test: libFuzzer targets (${TANDEM_FUZZ_SECONDS:-10} s each)"
stage "fuzz (build + run)"
scripts/fuzz.sh "${TANDEM_FUZZ_SECONDS:-10}"
