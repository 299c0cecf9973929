#!/usr/bin/env bash
# Set up (pip runs only when pyproject.toml or the package list changed), build the
# documentation site from the records and serve it (default http://127.0.0.1:8000).
# usage: scripts/serve.sh [PORT | HOST:PORT] [kb site serve options]
#   scripts/serve.sh 8123             serve on 127.0.0.1:8123
#   scripts/serve.sh 0.0.0.0:8000     serve on every interface
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh site
.venv/bin/kb validate
if [[ $# -gt 0 && $1 =~ ^([^-][^:]*:)?[0-9]+$ ]]; then
  addr=$1
  shift
  [[ $addr == *:* ]] || addr="127.0.0.1:$addr"
  set -- --dev-addr "$addr" "$@"
fi
exec .venv/bin/kb site serve "$@"
