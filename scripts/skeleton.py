"""Print the fact skeleton (signature, parameters, returns, upstream) of one operator.

usage: python scripts/skeleton.py NAME --op-plugin DIR [--wheel PATH]
       python scripts/skeleton.py NAME --sources DIR   (DIR holds op-plugin/ and torch_npu-*/)

Record authors start from this so the schema string and parameter list are copied
mechanically, never retyped.  It is ``import_upstream.py skeleton``; the facts come
from :mod:`tools.upstream`, the same code that drafts and refreshes records.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.upstream.cli import main


def _translate(argv: list[str]) -> list[str]:
    """Accept the older ``--sources`` spelling by expanding it into the new options."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--sources", type=Path)
    known, rest = ap.parse_known_args(argv)
    if known.sources is None:
        return ["skeleton", *rest]
    extra = ["--op-plugin", str(known.sources / "op-plugin")]
    wheels = sorted(known.sources.glob("torch_npu-*"))
    if wheels:
        extra += ["--wheel", str(wheels[-1])]
    return ["skeleton", *rest, *extra]


if __name__ == "__main__":
    raise SystemExit(main(_translate(sys.argv[1:])))
