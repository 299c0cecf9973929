"""Did-you-mean suggestions for names (operators, chains, rules, arguments).

rapidfuzz is imported lazily: only a miss pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from kb.vocab.call_paths import bare_operator


def _strip(name: str) -> str:
    return bare_operator(name, loose=True)


def suggest(name: str, choices: Sequence[str], limit: int = 3, cutoff: float = 70.0) -> list[str]:
    """Closest ``choices`` to ``name``, best first; empty when nothing is close.

    Memoised: a long candidate list repeats the same misspelling thousands of times.
    """
    if not name or not choices:
        return []
    return list(_suggest(name, tuple(choices), limit, cutoff))


@lru_cache(maxsize=4096)
def _suggest(name: str, choices: tuple[str, ...], limit: int, cutoff: float) -> tuple[str, ...]:
    from rapidfuzz import fuzz, process

    query = _strip(name).lower()
    bare = sorted({_strip(c) for c in choices})
    scored = process.extract(query, bare, scorer=fuzz.WRatio, limit=limit * 3, processor=str.lower)
    ranked: list[tuple[float, int, str]] = []
    for choice, score, _ in scored:
        if score < cutoff:
            continue
        # Prefer same-length neighbours: npu_mla_prolog_v4 → npu_mla_prolog_v3, not _v2's cousin.
        ratio = fuzz.ratio(query, choice.lower())
        ranked.append((-(score + ratio) / 2, abs(len(choice) - len(query)), choice))
    ranked.sort()
    return tuple(c for _, _, c in ranked[:limit])
