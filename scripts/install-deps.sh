#!/usr/bin/env bash
# Installs tandem's build and test dependencies from Debian packages (root).
# Skips apt entirely when everything is already present.
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev nodejs npm curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
