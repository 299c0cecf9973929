"""Import upstream facts into records and report drift (maintainers only).

usage:
  python scripts/import_upstream.py drift  --op-plugin DIR [--wheel PATH] [--records DIR] [--format text|json]
  python scripts/import_upstream.py import --op-plugin DIR [--wheel PATH] --commit SHA [--only NAME ...]
                                           [--drafts DIR] [--no-refresh] [--dry-run]
  python scripts/import_upstream.py skeleton NAME --op-plugin DIR [--wheel PATH]
  python scripts/import_upstream.py known-ops --op-plugin DIR [--wheel PATH] --commit SHA [--out FILE]

The upstream location is always an argument: sources are read, never copied into the
project.  Exit codes: 0 no drift / done, 1 drift or a failed refresh, 2 usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.upstream.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
