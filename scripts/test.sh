#!/usr/bin/env bash
# Set up everything the tests need, then run lint, types and the test suite.
# Installs Debian's chromium for the browser test when running as root and it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh site,test,mcp,reference,emulate,port
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "installing Debian chromium for the browser test"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/ruff check kb site_plugins tools scripts tests
.venv/bin/ruff format --check kb site_plugins tools scripts tests
.venv/bin/mypy
.venv/bin/kb validate
# one worker per core, each test file whole on one worker (its module fixtures built once);
# KB_TEST_WORKERS=0 runs in this process
.venv/bin/python -m pytest -n "${KB_TEST_WORKERS:-auto}" --dist loadfile "$@"
