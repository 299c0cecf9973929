"""Name hits from the compiled store alone: exact names, prefixes, close spellings.

An exact or misspelt operator name is answered here without loading the full-text
engine (whoosh costs more than the rest of a cold ``kb search``), and the text ranking
reuses :func:`name_factor` to favour records whose own name the query spells out.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from kb.catalog.compiled import Catalog
from kb.index.textanalysis import tokens
from kb.vocab.call_paths import CALL_PREFIXES

MAX_QUERY_CHARS = 500


class Hit(NamedTuple):
    """One result (a NamedTuple: dataclasses would cost an import of inspect)."""

    kind: str
    name: str
    score: float
    summary: str
    why: str  # exact | prefix | spelling | text

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "score": round(self.score, 3),
            "summary": self.summary,
        }


IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_VERSION = re.compile(r"^v\d+$")
#: How much a record whose own name the query spells out gains over close relatives
#: ("lightning indexer" → npu_lightning_indexer before npu_quant_lightning_indexer).
NAME_COVERAGE_WEIGHT = 0.3
#: The query spells out every part of a record's name ("lightning indexer").
FULL_NAME_BONUS = 0.5


@functools.lru_cache(maxsize=4096)
def _name_parts(name: str) -> tuple[tuple[str, str], ...]:
    """The name's parts as (raw, stemmed), without ``npu`` and version suffixes."""
    out = []
    for part in re.split(r"[_.\-]+", name.lower()):
        if part and part != "npu" and not _VERSION.match(part):
            toks = tokens(part)
            if toks:
                out.append((part, toks[0]))
    return tuple(out)


#: A record's name parts as the index stores them (``docs.json``): computed once at
#: build time, so a cold query does not stem every matching record's name again.
Parts = tuple[tuple[str, str], ...] | list[list[str]]


def name_parts(name: str) -> Parts:
    return _name_parts(name)


def name_stems(name: str, parts: Parts | None = None) -> frozenset[str]:
    """The stemmed parts of a record's name (``npu`` and versions left out)."""
    return frozenset(stem for _, stem in (_name_parts(name) if parts is None else parts))


def name_words(parts: Parts) -> frozenset[str]:
    """Every query word that could spell part of a name with these parts: each part's
    stem and each pair of neighbours joined (``rms`` + ``norm``)."""
    stems = {stem for _, stem in parts}
    joined = {parts[i][0] + parts[i + 1][0] for i in range(len(parts) - 1)}
    return frozenset(stems | joined)


def name_factor(
    name: str,
    query_tokens: set[str],
    parts: Parts | None = None,
    words: frozenset[str] | None = None,
) -> tuple[float, bool]:
    """How much the query spells out the record's name, and whether it spells all of it.

    A joined query word covers the two parts it joins ("rmsnorm" spells ``rms_norm``).
    ``parts`` are the name's (raw, stemmed) parts when the index holds them; ``words``
    their :func:`name_words`, when the caller keeps them (a query sharing none of them
    and naming no scheme spells nothing of the name).
    """
    if parts is None:
        parts = _name_parts(name)
    if not parts:
        return 1.0, False
    schemes = _digit_words(frozenset(query_tokens))
    if words is not None and not schemes and words.isdisjoint(query_tokens):
        return 1.0, False
    covered = {i for i, (_, stem) in enumerate(parts) if stem in query_tokens}
    # a scheme word spells a short name part it starts with ("mxfp8" → mx)
    if schemes:
        covered |= {
            i
            for i, (raw, _) in enumerate(parts)
            if len(raw) >= 2 and any(t != raw and t.startswith(raw) for t in schemes)
        }
    for i in range(len(parts) - 1):
        if parts[i][0] + parts[i + 1][0] in query_tokens:
            covered.update((i, i + 1))
    coverage = len(covered) / len(parts)
    if coverage < 1.0:
        return 1.0 + NAME_COVERAGE_WEIGHT * coverage, False
    # the whole name is in the query: worth more the more of the query it explains
    shared = len({stem for _, stem in parts} & query_tokens) or 1
    return 1.0 + NAME_COVERAGE_WEIGHT + FULL_NAME_BONUS * shared / max(len(query_tokens), 1), True


@functools.lru_cache(maxsize=256)
def _digit_words(query_tokens: frozenset[str]) -> tuple[str, ...]:
    """The query's words with a digit in them (scheme words: mxfp8, w8a8); the same for
    every record a query is matched against, so worked out once per query."""
    return tuple(t for t in query_tokens if any(c.isdigit() for c in t))


def name_hits(catalog: Catalog, text: str, kinds: set[str] | None) -> list[Hit]:
    """Exact name or call path, then names starting with the query, then close spellings."""
    hits: list[Hit] = []
    seen: set[str] = set()

    def add(name: str, score: float, why: str) -> None:
        if name in seen:
            return
        rec = catalog.get(name)
        if rec is None or (kinds and rec["kind"] not in kinds):
            return
        seen.add(name)
        summary = (rec.get("summary") or {}).get("en", "")
        hits.append(Hit(rec["kind"], name, score, summary, why))

    exact = catalog.resolve(text)
    if exact:
        add(exact, 1000.0, "exact")
    if not IDENT.match(text):
        return hits
    bare = text.lower()
    for prefix in CALL_PREFIXES:
        bare = bare.removeprefix(prefix)
    names = catalog.names()
    prefixed = sorted(
        (n for n in names if n.lower().startswith(bare) and n.lower() != bare), key=len
    )
    for i, name in enumerate(prefixed[:20]):
        add(name, 500.0 - i, "prefix")
    if not exact and len(bare) >= 4:
        import difflib

        lowered = {n.lower(): n for n in names}
        close = difflib.get_close_matches(bare, list(lowered), n=3, cutoff=0.85)
        for i, low in enumerate(close):
            add(lowered[low], 300.0 - i, "spelling")
    return hits


def answered_by_name(text: str, hits: list[Hit]) -> bool:
    """An identifier query whose name hits already hold the exact name or a close
    spelling: the answer the full-text engine would put first, without loading it."""
    return (
        bool(IDENT.match(text))
        and "_" in text
        and any(h.why in ("exact", "spelling") for h in hits[:1])
    )
