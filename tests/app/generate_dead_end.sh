#!/bin/sh
# `tandem generate` where the grammar's next tokens are all banned by -l: the text before that
# position on stdout, the reason on stderr, exit 1 — classic and with the bundled draft model
# (the same text and the same message). Without the bans the same run ends normally (exit 0).
# Usage: generate_dead_end.sh TANDEM SOURCE_DIR
set -u
tandem=$1
models=$2/models
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
grammar='root ::= " Ishmael" "."'
fail() { echo "generate_dead_end: $*" >&2; exit 1; }

"$tandem" generate -m "$models/tandem-target" -p "Call me" -n 30 --temp 0 --grammar "$grammar" \
  >"$dir/free.out" 2>"$dir/free.err" || fail "without bans: exit $? ($(cat "$dir/free.err"))"
[ "$(cat "$dir/free.out")" = " Ishmael." ] || fail "without bans: printed '$(cat "$dir/free.out")'"

for drafter in "" "-md $models/tandem-draft"; do
  # shellcheck disable=SC2086  # $drafter is two words or none
  "$tandem" generate -m "$models/tandem-target" $drafter -p "Call me" -n 30 --temp 0 --grammar "$grammar" \
    -l 0-inf -l 2-inf >"$dir/out" 2>"$dir/err"
  rc=$?
  [ "$rc" = 1 ] || fail "${drafter:-classic}: exit $rc, wanted 1"
  [ "$(cat "$dir/out")" = " Ishmael." ] || fail "${drafter:-classic}: printed '$(cat "$dir/out")'"
  grep -q "no token is allowed after [0-9]* generated tokens: the grammar's next tokens 0, 2 are all banned by logit_bias" \
    "$dir/err" || fail "${drafter:-classic}: stderr was: $(cat "$dir/err")"
done
echo "generate_dead_end: ok"
