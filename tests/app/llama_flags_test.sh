#!/bin/sh
# llama-server's flags on `tandem serve` (docs/llama-server.md): each class of flag —
# works, no-op, exit 2 with a message that names it — and the one-dash spellings that
# CLI11 would otherwise misparse (-cb as -c b, -hf as -h -f). Runs no model: the checks
# happen before loading, and a directory that does not exist ends an accepted command
# line at the load (exit 1) instead of serving.
# Usage: llama_flags_test.sh TANDEM_BIN
set -u
bin="$1"
missing=/nonexistent/tandem-model-dir
fails=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect EXIT PATTERN [ENV=V ...] -- ARGS...: runs `tandem serve -m $missing --port 0 ARGS`.
expect() {
  want="$1"; pattern="$2"; shift 2
  envs=""
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  env -u TANDEM_LOG_LEVEL $envs "$bin" serve -m "$missing" --host 127.0.0.1 --port 0 -t 1 "$@" >"$out" 2>&1
  got=$?
  if [ "$got" != "$want" ] || ! grep -Eq -- "$pattern" "$out"; then
    echo "FAIL: serve $* (env:$envs): exit $got (want $want), output must match /$pattern/:"
    sed 's/^/    /' "$out"
    fails=$((fails + 1))
  fi
  if grep -q "Value b not in range\|Usage:" "$out"; then
    echo "FAIL: serve $*: misparsed or printed help:"; sed 's/^/    /' "$out"; fails=$((fails + 1))
  fi
}
loads=1      # accepted: serve went on to load the (missing) model
usage=2

# Refused, exit 2, naming the flag and why.
# -ngl / --device (ADR 0030): partial offload and contradictions are refused before loading.
expect $usage "-ngl/--n-gpu-layers 3: partial offload \(3 of the model's 8 layers on the GPU\) is not supported" -- -m models/tandem-target -ngl 3
expect $usage "LLAMA_ARG_N_GPU_LAYERS \(-ngl\) 5: partial offload \(5 of the model's 8 layers" LLAMA_ARG_N_GPU_LAYERS=5 -- -m models/tandem-target
expect $usage '-ngl/--n-gpu-layers 0 \(every layer on the CPU\) and --device cuda disagree' -- -ngl 0 --device cuda
expect $usage '-ngl/--n-gpu-layers all \(every layer on the GPU\) and --device cpu disagree' -- -ngl all -dev cpu
expect $usage '-ngl/--n-gpu-layers x: not a layer count' -- -ngl x
expect $usage '--device gpu: expected auto, cpu, cuda or cuda:N' -- --device gpu
expect $usage "LLAMA_ARG_DEVICE='vulkan0': expected auto, cpu, cuda" LLAMA_ARG_DEVICE=vulkan0 --
expect $usage '--device CUDA0,CUDA1: one device only' -- -dev CUDA0,CUDA1
expect $usage '-hf/--hf-repo org/repo: not supported: tandem downloads nothing' -- -hf org/repo
expect $usage '-hf/--hf-repo' -- -hfr org/repo
expect $usage '-ctk/--cache-type-k q8_0: not supported \(accepted: f32\)' -- -ctk q8_0
expect $usage '-fa/--flash-attn off: not supported' -- -fa off
expect $usage '--no-jinja: not supported' -- --no-jinja
expect $usage '-nocb/--no-cont-batching: not supported: batching is always continuous' -- -nocb
expect $usage '--cache-reuse 256: not supported \(accepted: 0\)' -- --cache-reuse 256
expect $usage '--mirostat 2: not supported' -- --mirostat 2
expect $usage '--control-vector-layer-range 1 2: not supported' -- --control-vector-layer-range 1 2
expect $usage "LLAMA_ARG_CONT_BATCHING='maybe' is not a boolean" LLAMA_ARG_CONT_BATCHING=maybe --
expect $usage "LLAMA_ARG_TEMPERATURE='5' is not valid for --temp" LLAMA_ARG_TEMPERATURE=5 --
expect $usage "LLAMA_ARG_TEMPERATURE='hot' is not valid for --temp" LLAMA_ARG_TEMPERATURE=hot --
expect $usage '-c4096: unknown flag \(a value goes after a space: -c 4096\)' -- -c4096
expect $usage '-xyz: unknown flag' -- -xyz
expect $usage '--temp.*5' -- --temp 5
expect $usage '--top-k.*-3' -- --top-k -3
expect $usage '-n/--n-predict 0: must be >= 1, or -1' -- -n 0
expect $usage '--draft-max 4 needs a drafter' -- --draft-max 4
expect $usage '--draft-max 16: out of range; accepted: 1..15' -- -md models/tandem-draft --draft-max 16
expect $usage '--draft-max 3 and --draft-block-size 5 disagree' -- -md models/tandem-draft --draft-max 3 --draft-block-size 5
expect $usage '--spec-type ngram-simple: not supported' -- --spec-type ngram-simple
expect $usage '--chat-template-kwargs: must be a JSON object' -- --chat-template-kwargs '[1]'
expect $usage '--chat-template-file /nonexistent/t.jinja: ' -- --chat-template-file /nonexistent/t.jinja
expect $usage '--chat-template and --chat-template-file: give one' -- --chat-template chatml --chat-template-file /dev/null
expect $usage 'several aliases are not supported' -- -a one,two
# A value that starts with a dash stays the value of the option before it.
expect $loads 'no such file' -- --api-key -xyz
# One-dash spellings that CLI11 alone would have bundled into -c / -h: no-ops now, and the
# command line goes on to load the model (exit 1: it does not exist).
expect $loads '-cb/--cont-batching: accepted, no effect: batching is always continuous' -- -cb
expect $loads '-cd/--ctx-size-draft 1024: accepted, no effect' -- -cd 1024
expect $loads '-ctk/--cache-type-k f32: accepted, no effect' -- -ctk f32
expect $loads 'no such file' -- -ngl 0
expect $loads 'no such file' -- -dev none
expect $loads '-fa/--flash-attn: accepted, no effect: attention is always' -- -fa
expect $loads '--jinja: accepted, no effect: chat templates are always rendered' -- --jinja
expect $loads '--metrics: accepted, no effect: /metrics is always served' -- --metrics
expect $loads '-ub/--ubatch-size 512: accepted' -- -ub 512
expect $loads "LLAMA_ARG_FLASH_ATTN='on' \(-fa/--flash-attn\): accepted, no effect" LLAMA_ARG_FLASH_ATTN=on --
expect $loads '--draft-min 0: accepted, no effect' -- --draft-min 0
# Flags that work: accepted, the defaults they set are reported at start-up... once loaded;
# here they only must not be refused.
expect $loads 'no such file' -- -n 16 --temp 0.7 --top-k 20 --top-p 0.9 --min-p 0.05 \
  --repeat-penalty 1.1 --presence-penalty 0.5 --frequency-penalty 0.5 -s 42 --no-webui --timeout 30 \
  --threads-http 64 --chat-template chatml --no-cache-prompt -cram 0 --cors-origin '*' --embeddings \
  --pooling mean -lv 3 -to 5 --chat-template-kwargs '{"enable_thinking":false}' --cache-prompt
expect $loads 'no such file' -- -md models/tandem-draft --draft-max 3 --draft-min 2 --spec-type draft-simple
expect $loads 'no such file' -- -v

# Without a CUDA device -ngl 99 is what llama-server makes of it: a warning, the CPU; --device cuda
# is refused before loading. (On a machine with a GPU both go on to load.)
if ! "$bin" info | grep -q '^cuda device 0'; then
  expect $loads '-ngl/--n-gpu-layers 99: no CUDA device is visible to this build; serving on the CPU' -- -ngl 99
  expect $usage 'device cuda:1: .*asked for by --device' -- --device CUDA1
fi

# The server's grammar (--grammar, --grammar-file, -j, -jf): read and compiled before the port is
# bound; a file that cannot be read, a malformed grammar or schema exits 2 naming the flag and the
# problem, and nothing listens. A good one goes on to load the model.
grammar_dir=$(mktemp -d)
trap 'rm -f "$out"; rm -rf "$grammar_dir"' EXIT
printf 'root ::= "yes" | "no"\n' >"$grammar_dir/good.gbnf"
printf 'root ::= "yes" | (\n' >"$grammar_dir/unclosed.gbnf"
printf 'root ::= answer\n' >"$grammar_dir/undefined.gbnf"
printf '{"type": "object", "properties": {"n": {"type": "integer"}}}' >"$grammar_dir/good.json"
printf '{"type": "object",' >"$grammar_dir/broken.json"
expect $usage "--grammar-file $grammar_dir/unclosed.gbnf: grammar line 2: missing '\)'" -- --grammar-file "$grammar_dir/unclosed.gbnf"
expect $usage "--grammar-file $grammar_dir/undefined.gbnf: .*answer" -- --grammar-file "$grammar_dir/undefined.gbnf"
expect $usage "--grammar-file /nonexistent/g.gbnf: cannot read the file" -- --grammar-file /nonexistent/g.gbnf
expect $usage '--grammar: .*answer' -- --grammar 'root ::= answer'
expect $usage '--grammar: the grammar is empty' -- --grammar ' '
expect $usage "-jf/--json-schema-file $grammar_dir/broken.json: not valid JSON" -- -jf "$grammar_dir/broken.json"
expect $usage '-j/--json-schema: not valid JSON' -- -j '{"type":'
expect $usage '-j/--json-schema: .*uniqueItems' -- -j '{"type": "array", "uniqueItems": true}'
expect $usage '--grammar and -j/--json-schema: give one of them' -- --grammar 'root ::= "a"' -j '{}'
for bad in "--grammar-file $grammar_dir/unclosed.gbnf" "--grammar-file /nonexistent/g.gbnf"; do
  # shellcheck disable=SC2086
  env -u TANDEM_LOG_LEVEL "$bin" serve -m "$missing" --host 127.0.0.1 --port 0 $bad >"$out" 2>&1
  if grep -q 'listening on' "$out"; then
    echo "FAIL: serve $bad: listened before refusing the grammar:"; sed 's/^/    /' "$out"; fails=$((fails + 1))
  fi
done
expect $loads 'no such file' -- --grammar-file "$grammar_dir/good.gbnf"
expect $loads 'no such file' -- --grammar 'root ::= [a-z]+'
expect $loads 'no such file' -- -jf "$grammar_dir/good.json"
expect $loads 'no such file' -- -j '{"enum": ["left", "right"]}'

# -h alone is still help (exit 0); -hf is not help.
"$bin" serve -h >"$out" 2>&1 || { echo "FAIL: serve -h exited $?"; fails=$((fails + 1)); }
grep -q -- '--n-gpu-layers' "$out" || { echo "FAIL: serve -h does not list the llama-server flags"; fails=$((fails + 1)); }
# Before the subcommand, -hf is not -h either.
"$bin" -hf org/repo >"$out" 2>&1
got=$?
if [ "$got" != 2 ] || ! grep -q -- '-hf: unknown flag; the subcommand comes first' "$out"; then
  echo "FAIL: tandem -hf org/repo: exit $got"; sed 's/^/    /' "$out"; fails=$((fails + 1))
fi
# The spellings are serve's: another subcommand names the flag it does not take.
"$bin" generate -m "$missing" -ngl 1 -p x >"$out" 2>&1
got=$?
if [ "$got" != 2 ] || ! grep -q -- '-ngl (--n-gpu-layers) is not an option of tandem generate' "$out"; then
  echo "FAIL: generate -ngl 1: exit $got"; sed 's/^/    /' "$out"; fails=$((fails + 1))
fi

# docs/llama-server.md lists every flag of the table (it is generated from it).
for name in $(sed -n 's/^    {"\(--[a-z0-9.-]*\)[",].*/\1/p' src/app/llama_flags.cpp); do
  grep -q -- "\`$name\`" docs/llama-server.md || { echo "FAIL: docs/llama-server.md does not list $name"; fails=$((fails + 1)); }
done

[ "$fails" = 0 ] && echo "llama-server flags: all cases pass"
exit "$fails"
