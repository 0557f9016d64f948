#!/usr/bin/env bash
# Installs tandem's build and test dependencies from Debian packages (root).
# clang + libclang-rt-14-dev: the libFuzzer targets (scripts/fuzz.sh); clang-format:
# scripts/check-format.sh.
# Skips apt entirely when everything is already present.
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev curl
  clang libclang-rt-14-dev clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (test fixtures and end-to-end tests): Debian's packages
# unless the machine already has them from elsewhere (e.g. a bundled npm).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# Python 3 (the fault and load tests under bench/faults; the GGUF fixtures below).
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Python packages of the test fixtures (PyPI): gguf, the reference GGUF writer, with which
# tools/fixtures/make_gguf.py writes the GGUF test files at test time (brings numpy).
if ! python3 -c 'import gguf' 2>/dev/null; then
  command -v pip3 >/dev/null 2>&1 || python3 -m pip --version >/dev/null 2>&1 || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip
  }
  python3 -m pip install --quiet 'gguf==0.19.0' ||
    python3 -m pip install --quiet --break-system-packages 'gguf==0.19.0'
fi
