#!/usr/bin/env bash
# Installs tandem's build and test dependencies from Debian packages (root).
# clang + libclang-rt-14-dev: the libFuzzer targets (scripts/fuzz.sh); clang-format:
# scripts/check-format.sh. chromium + fonts-dejavu-core: the browser test of the web page
# (tests/webui, ctest -L browser; docs/webui.md). On the 2-core development machine that was
# 25 packages, 119 MB: 4 s to download from deb.debian.org, 14 s to install (a bare image may
# lack more of the libraries they need).
# nginx: the replicas-behind-a-load-balancer test (faults.scaleout, docs/scaling.md); the test
# starts its own nginx in the foreground, the package's service is not used.
# Skips apt entirely when everything is already present.
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev curl
  clang libclang-rt-14-dev clang-format
  chromium fonts-dejavu-core
  nginx
  python3-jsonschema python3-jinja2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (test fixtures and end-to-end tests): Debian's packages
# unless the machine already has them from elsewhere (e.g. a bundled npm).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# Python 3 (the fault and load tests under bench/faults; the GGUF fixtures below) and pip
# (the official ollama client for tests/e2e/compat.test.mjs, below).
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The official ollama Python client and langchain-openai (PyPI), pinned by tests/e2e/python-requirements.txt, into
# tests/e2e/python_modules (pip --target: nothing system-wide, no virtual environment). Where
# PyPI is unreachable the Ollama test of compat.test.mjs and langchain.test.mjs are skipped, saying why.
root="$(cd "$(dirname "$0")/.." && pwd)"
py_dir="$root/tests/e2e/python_modules"
py_req="$root/tests/e2e/python-requirements.txt"
if ! cmp -s "$py_req" "$py_dir/.installed-requirements.txt" 2>/dev/null; then
  if python3 -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$py_dir" -r "$py_req"; then
    cp "$py_req" "$py_dir/.installed-requirements.txt"
  else
    echo "install-deps: warning: could not install $py_req from PyPI; the Ollama and LangChain client tests will be skipped" >&2
  fi
fi

# Python packages of the test fixtures and references (PyPI): gguf, the reference GGUF writer,
# with which tools/fixtures/make_gguf.py writes the GGUF test files at test time (brings numpy);
# jsonschema and jinja2, the references of the grammar and template tests (Debian's
# python3-jsonschema/python3-jinja2 above serve Debian's python3; this covers another one first on PATH).
if ! python3 -c 'import gguf, jsonschema, jinja2' 2>/dev/null; then
  command -v pip3 >/dev/null 2>&1 || python3 -m pip --version >/dev/null 2>&1 || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip
  }
  python3 -m pip install --quiet 'gguf==0.19.0' jsonschema jinja2 ||
    python3 -m pip install --quiet --break-system-packages 'gguf==0.19.0' jsonschema jinja2
fi
