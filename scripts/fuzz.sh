#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan, build-fuzz/)
# and runs each for a bounded time on seed corpora made from the repository's
# fixtures, as many at once as there are cores (TANDEM_FUZZ_JOBS). Exits non-zero
# when a target crashes, hangs, leaks or runs out of memory, printing the reproducer's path.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default 20 s, all targets)
#
# Reproduce a finding: build-fuzz/tests/fuzz/fuzz_X build-fuzz/fuzz-artifacts/fuzz_X-crash-...
# The working corpora (build-fuzz/fuzz-corpus/) persist between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
all_targets=(fuzz_config fuzz_safetensors fuzz_gguf fuzz_tokenizer fuzz_chat_template fuzz_openai_request fuzz_policy_hint fuzz_grammar)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
build=build-fuzz
jobs=$(nproc)

# -O1 with line tables only: enough for the sanitizers' stack traces, and the
# build stays a small part of CI.
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF \
  -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
build_start=$SECONDS
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
echo "fuzz: build took $((SECONDS - build_start)) s"

# Seeds: generated from the fixtures each run (nothing copied into the tree),
# plus the small hand-written ones in tests/fuzz/seeds/.
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{config,safetensors,gguf,tokenizer,chat_template,openai_request,policy_hint,grammar}
n=0
for f in tests/fixtures/models/*/config.json models/*/config.json; do
  cp "$f" "$seeds/config/$((n++)).json"
done
for f in tests/fixtures/models/*/model*.safetensors; do
  # The smaller files only: libFuzzer's input length limit follows the largest seed.
  if (($(stat -c %s "$f") <= 300000)); then cp "$f" "$seeds/safetensors/$((n++)).safetensors"; fi
done
# The bundled tokenizer.json cut to its first 400 tokens and the merges among
# them (node is a test dependency anyway): the real structure, small enough
# that the fuzzer runs hundreds of inputs a second instead of a few.
node -e '
  const fs = require("fs");
  const t = JSON.parse(fs.readFileSync(process.argv[1]));
  const kept = Object.entries(t.model.vocab).filter(([, id]) => id < 400);
  const has = new Set(kept.map(([token]) => token));
  t.model.vocab = Object.fromEntries(kept);
  t.model.merges = t.model.merges.filter((m) => {
    const [a, b] = Array.isArray(m) ? m : m.split(" ");
    return has.has(a) && has.has(b) && has.has(a + b);
  });
  fs.writeFileSync(process.argv[2], JSON.stringify(t));
' models/tandem-target/tokenizer.json "$seeds/tokenizer/tandem_400.json"
# GGUF seeds, written by the reference writer (the gguf PyPI package): a tiny model per
# architecture and the 400-token tokenizer above as a GGUF vocabulary.
if python3 -c 'import gguf' 2>/dev/null; then
  for arch in llama qwen2 qwen3 qwen2moe qwen3moe; do python3 tests/fuzz/make_gguf_seed.py "$seeds/gguf/tiny_$arch.gguf" "$arch"; done
  mkdir -p "$build/fuzz-tokenizer-dir"
  cp "$seeds/tokenizer/tandem_400.json" "$build/fuzz-tokenizer-dir/tokenizer.json"
  cp models/tandem-target/tokenizer_config.json "$build/fuzz-tokenizer-dir/"
  python3 tools/fixtures/make_gguf.py --tokenizer-only "$build/fuzz-tokenizer-dir" "$seeds/gguf/tandem_400.gguf"
else
  echo "fuzz: python3 cannot import gguf (pip install gguf): fuzz_gguf starts from an empty corpus"
fi
for f in tests/tokenizer/chat/*.jinja; do cp "$f" "$seeds/chat_template/$((n++)).jinja"; done
for t in config safetensors tokenizer chat_template openai_request policy_hint grammar; do
  cp tests/fuzz/seeds/"$t"/* "$seeds/$t/" 2>/dev/null || true
done

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
# One target runs on one core (libFuzzer is single-threaded): run up to TANDEM_FUZZ_JOBS
# (default: the number of cores) at once, each still for the full time given.
fuzz_jobs=${TANDEM_FUZZ_JOBS:-$jobs}
run_target() {
  local target=$1 kind=${1#fuzz_}
  local corpus="$build/fuzz-corpus/$kind" dict=()
  mkdir -p "$corpus"
  case $kind in
    chat_template) dict=(-dict=tests/fuzz/jinja.dict) ;;
    gguf) dict=(-dict=tests/fuzz/gguf.dict) ;;
    *) dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  # -timeout: one input may take at most 25 s (generous: CI machines are slow);
  # -rss_limit_mb / -malloc_limit_mb: a single allocation or the process over 2 GiB is a finding too.
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -print_final_stats=1 "${dict[@]}" -artifact_prefix="$artifacts/$target-" \
    "$corpus" "$seeds/$kind" >"$build/fuzz-$kind.log" 2>&1
}
# Reports one finished target (in the order they were started).
report_target() {
  local target=$1 rc=$2 log="$build/fuzz-${1#fuzz_}.log"
  if ((rc)); then
    status=1
    echo "fuzz: $target FAILED (log: $log)"
    grep -E "ERROR:|SUMMARY:|Test unit written to|==[0-9]+==" "$log" | head -20 || true
    tail -n 40 "$log"
  else
    echo -n "fuzz: $target ran ${seconds}s: "
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$log" | tr '\n' ' ' || true
    echo
  fi
}
status=0
pids=()
names=()
for target in "${targets[@]}"; do
  # At most fuzz_jobs running: wait for the oldest before starting another.
  if ((${#pids[@]} >= fuzz_jobs)); then
    rc=0
    wait "${pids[0]}" || rc=$?
    report_target "${names[0]}" "$rc"
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
  echo "fuzz: $target for ${seconds}s"
  run_target "$target" &
  pids+=($!)
  names+=("$target")
done
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  report_target "${names[$i]}" "$rc"
done
if ((status)); then
  echo "fuzz: reproducers in $artifacts/ (run: $build/tests/fuzz/<target> <file>)"
fi
exit $status
