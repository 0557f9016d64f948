#!/usr/bin/env bash
# Builds tandem (installing its Debian dependencies first) and runs it.
# With no arguments it runs the main job; any arguments are passed to tandem.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
if (($# == 0)); then
  # Until the bundled model and the server land (issues 6 and 8), the main job
  # is a self-description of this machine and the kernels tandem will use.
  set -- info
fi
exec build/src/app/tandem "$@"
