#!/usr/bin/env bash
# Create .venv and install the project with the extras named in $1 (default: site,test).
# Idempotent: re-running only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-site,test}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet --config-settings editable_mode=compat -e ".[${extras}]"
