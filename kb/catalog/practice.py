"""Where a chain is practiced, and what it needs: engines, releases, products.

Advice may name several chains for one situation; a reader picks by engine, release and
product.  Everything here is derived from records, never typed twice: the chain's own
citations (repo, commit, path, lines), the operator records' ``seen_in`` (which public
code bases call each stage's operator), their ``versions`` (the PyTorch releases a
torch_npu build ships the operator for) and their ``products``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Record = dict[str, Any]


def _release_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))


def _operators(chain: Record, get: Callable[[str], Record | None]) -> list[Record]:
    names: list[str] = []
    for st in chain.get("stages") or []:
        if st["operator"] != "plain-torch" and st["operator"] not in names:
            names.append(st["operator"])
    return [
        rec for rec in (get(n) for n in names) if rec is not None and rec.get("kind") == "operator"
    ]


def engines(chain: Record, ops: list[Record]) -> list[dict[str, Any]]:
    """Code bases and how many of the chain's operators each calls, most first.

    A chain citation counts for every operator of the chain in that repository (the
    cited lines were read stage by stage)."""
    total = len(ops)
    seen: dict[str, set[str]] = {}
    commits: dict[str, str] = {}
    for rec in ops:
        for entry in rec.get("seen_in") or []:
            seen.setdefault(entry["repo"], set()).add(rec["name"])
            commits.setdefault(entry["repo"], entry.get("commit", ""))
    cited = {src["repo"] for src in chain.get("sources") or []}
    for src in chain.get("sources") or []:
        commits.setdefault(src["repo"], src["commit"])
    out = []
    for repo in sorted(set(seen) | cited):
        count = total if repo in cited else len(seen.get(repo, ()))
        out.append(
            {
                "repo": repo,
                "commit": commits.get(repo, ""),
                "operators_seen": count,
                "operators": total,
                "cited": repo in cited,
            }
        )
    return sorted(out, key=lambda e: (-e["operators_seen"], not e["cited"], e["repo"]))


def releases(ops: list[Record]) -> list[str]:
    """PyTorch releases whose torch_npu ships every operator of the chain."""
    common: set[str] | None = None
    for rec in ops:
        have = set(((rec.get("versions") or {}).get("pytorch")) or [])
        if not have:
            continue
        common = have if common is None else common & have
    return sorted(common or (), key=_release_key)


def products(chain: Record, ops: list[Record]) -> list[str]:
    """The chain's products, else the products every operator of it claims."""
    if chain.get("products"):
        return list(chain["products"])
    common: list[str] | None = None
    for rec in ops:
        have = list(rec.get("products") or [])
        common = have if common is None else [p for p in common if p in have]
    return common or []


def practice(chain: Record, get: Callable[[str], Record | None]) -> dict[str, Any]:
    """Where the chain runs and what it needs, for the advice document."""
    ops = _operators(chain, get)
    return {
        "engines": engines(chain, ops),
        "releases": releases(ops),
        "products": products(chain, ops),
        "cited": [
            {k: src[k] for k in ("model", "repo", "commit", "path", "lines")}
            for src in chain.get("sources") or []
        ],
    }
