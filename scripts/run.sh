#!/usr/bin/env bash
# Builds tandem (installing its Debian dependencies first) and runs it.
# With no arguments it serves the bundled model (models/tandem-target) with
# its draft model on http://127.0.0.1:8080; any arguments are passed to
# tandem instead (e.g. ./scripts/run.sh generate -m models/tandem-target -p "Call me").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
if (($# == 0)); then
  set -- serve -m models/tandem-target -md models/tandem-draft --host "${TANDEM_HOST:-127.0.0.1}" \
    --port "${TANDEM_PORT:-8080}"
fi
exec build/src/app/tandem "$@"
