#!/usr/bin/env bash
# Starts `tandem serve` on a free loopback port, runs load.mjs against it, stops it.
#   bench/load/with-server.sh TANDEM_BIN "SERVE ARGS" [load.mjs args...]
# e.g. bench/load/with-server.sh build/src/app/tandem "-m models/tandem-target -np 8" --concurrency 1,4,8,16
set -euo pipefail
bin=$1; serve_args=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp /tmp/tandem-load.XXXXXX.log)
key=load-$$
# shellcheck disable=SC2086
"$bin" serve $serve_args --host 127.0.0.1 --port 0 --api-key "$key" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
port=
for _ in $(seq 1 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
grep -E 'loaded|ready' "$log" >&2 || true
node "$here/load.mjs" --url "http://127.0.0.1:$port" --api-key "$key" "$@"
