#!/usr/bin/env bash
# Set up (pip runs only when pyproject.toml or the package list changed), build the
# documentation site from the records and serve it on localhost.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh site
.venv/bin/kb validate
exec .venv/bin/kb site serve "$@"
