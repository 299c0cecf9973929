"""The README's counts (operator records, official pages, chains, trees, wheels, reference
operators), checked against the records, or rewritten from them.

usage: python scripts/readme_figures.py [--write]

Counts typed by hand drift ("47 chains" while there were 65): each figure here is a
pattern of the README with the number in it and the function that counts it.
tests/test_readme_figures.py fails with the right numbers; ``--write`` puts them in.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _catalog() -> object:
    from kb.catalog.compiled import open_catalog

    return open_catalog(ROOT / "kb" / "records")


def _count(kind: str) -> Callable[[], int]:
    def count() -> int:
        return len(_catalog().names(kind))  # type: ignore[attr-defined]

    return count


def _official_pages() -> int:
    """Distinct upstream pages the operator records cite (every official API page)."""
    records = _catalog().records("operator")  # type: ignore[attr-defined]
    return len({(r.get("upstream") or {}).get("path") for r in records} - {None})


def _wheels() -> int:
    data = json.loads((ROOT / "kb" / "data" / "releases.json").read_text(encoding="utf-8"))
    return len(data["releases"])


def _reference_operators() -> int:
    import kb.reference

    return len(kb.reference.available())


#: (what it counts, the README's words with ``(\d+)`` where the number stands, the count)
FIGURES: list[tuple[str, str, Callable[[], int]]] = [
    ("operator records", r"(\d+) operator records", _count("operator")),
    ("official pages", r"every API of the (\d+) official pages", _official_pages),
    ("reference chains", r"(\d+) reference chains", _count("chain")),
    ("decision trees", r"(\d+) decision trees", _count("tree")),
    ("released wheels", r"harvested from (\d+) released wheels", _wheels),
    ("reference operators", r"runs (\d+) of the fused operators", _reference_operators),
]


def _words(pattern: str) -> str:
    """The pattern with any run of white space (a line break of the paragraph) between words."""
    return pattern.replace(" ", r"\s+")


def check(text: str) -> list[str]:
    """One line per figure the README gets wrong (or does not state exactly once)."""
    problems = []
    for what, pattern, count in FIGURES:
        found = re.findall(_words(pattern), text)
        if len(found) != 1:
            problems.append(f"README.md states {what} {len(found)} times (/{pattern}/), not once")
            continue
        actual = count()
        if int(found[0]) != actual:
            problems.append(f"README.md says {found[0]} {what}; the records have {actual}")
    return problems


def write(text: str) -> str:
    """``text`` with every figure set to its count."""
    for _what, pattern, count in FIGURES:
        actual = count()
        text = re.sub(_words(pattern), lambda m, n=actual: _put(m, n), text, count=1)
    return text


def _put(match: re.Match[str], number: int) -> str:
    whole, start = match.group(0), match.start(1) - match.start(0)
    return whole[:start] + str(number) + whole[start + len(match.group(1)) :]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite README.md's figures")
    ns = ap.parse_args()
    text = README.read_text(encoding="utf-8")
    if ns.write:
        README.write_text(write(text), encoding="utf-8")
    problems = check(README.read_text(encoding="utf-8"))
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
