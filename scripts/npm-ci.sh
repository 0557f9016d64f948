#!/usr/bin/env bash
# Installs the npm packages pinned by DIR/package-lock.json into DIR/node_modules.
#   scripts/npm-ci.sh DIR [DIR...]
# Where the packages come from, first match wins:
#   1. TANDEM_NPM_CACHE=PATH    an npm cache (`npm ci --offline --cache PATH`)
#   2. the npm registry, when it answers within a few seconds
#   3. an offline mirror beside the checkout (../shared/npm-cache), as this project's
#      build machines carry one; a user's machine needs none of this
# The lockfile pins every version and integrity hash, so each source installs the same
# bytes. Fails, naming what it tried, when none of them has the packages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
common=(--no-audit --no-fund --loglevel=error)

cache=${TANDEM_NPM_CACHE:-}
if [ -z "$cache" ]; then
  if timeout 15 npm ping --fetch-timeout=5000 --fetch-retries=0 >/dev/null 2>&1; then
    source="registry"
  elif [ -d "$root/../shared/npm-cache/_cacache" ]; then
    cache=$(cd "$root/../shared/npm-cache" && pwd)
  else
    echo "npm-ci: the npm registry does not answer and no offline cache was found" \
      "(set TANDEM_NPM_CACHE to an npm cache holding the lockfiles' packages)" >&2
    exit 1
  fi
fi
if [ -n "$cache" ]; then
  [ -d "$cache/_cacache" ] || {
    echo "npm-ci: $cache is not an npm cache (no _cacache/)" >&2
    exit 1
  }
  source="offline cache $cache"
  # The cache may be read-only: npm's logs go elsewhere.
  common+=(--offline --cache "$cache" --logs-dir "${TMPDIR:-/tmp}/tandem-npm-logs")
fi

for dir in "$@"; do
  echo "npm-ci: $dir (from the $source)"
  npm ci --prefix "$dir" "${common[@]}"
done
