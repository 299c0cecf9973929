#!/usr/bin/env bash
# Create .venv and install the project (editable) with the extras named in $1
# (comma-separated; default: site,test,mcp,reference).
#
# Quiet and cheap to repeat: pip runs only when .venv is new, pyproject.toml changed,
# the top-level package list changed, or an extra is asked for that is not installed
# yet. The stamp that records this lives in .venv/.kb-setup. KB_SETUP_FORCE=1 reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-site,test,mcp,reference}"
stamp=.venv/.kb-setup

# What an install depends on: the project metadata and the packages it finds.
state="$(cat pyproject.toml; ls -d kb*/ site_plugins*/ 2>/dev/null)"
state_hash="$(printf '%s' "$state" | python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"

satisfied() {
  [ -z "${KB_SETUP_FORCE:-}" ] && [ -x .venv/bin/kb ] && [ -f "$stamp" ] || return 1
  [ "$(sed -n 1p "$stamp")" = "$state_hash" ] || return 1
  local have want
  have=",$(sed -n 2p "$stamp"),"
  for want in ${extras//,/ }; do
    [[ "$have" == *",$want,"* ]] || return 1
  done
}

if satisfied; then
  exit 0
fi

fresh=0
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  fresh=1
fi
if [ "$fresh" = 1 ]; then
  .venv/bin/python -m pip install --quiet --quiet --upgrade pip
fi
# Keep what an earlier run installed: a narrower request must not look like a downgrade.
if [ -f "$stamp" ] && [ "$(sed -n 1p "$stamp")" = "$state_hash" ]; then
  extras="$(printf '%s,%s' "$(sed -n 2p "$stamp")" "$extras" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)"
fi
echo "setup: installing the project with extras [${extras}] into .venv"
# -qq: errors still print; setuptools' notices about editable installs do not.
.venv/bin/python -m pip install --quiet --quiet -e ".[${extras}]"
printf '%s\n%s\n' "$state_hash" "$extras" > "$stamp"
