"""Write the records' JSON Schemas to schema/ (a test fails when they are stale)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kb.catalog.schema_export import write

if __name__ == "__main__":
    for path in write(Path(__file__).resolve().parent.parent / "schema"):
        print(path)
