"""Full-text search over the records (whoosh-reloaded), plus exact/prefix/typo name hits.

Ranking, best first:
1. the exact name or call path (``torch_npu.npu_rms_norm``);
2. names that start with the query (``npu_mla_prolog`` → v1, v2, v3, shortest first);
3. close spellings of a name when the query looks like an identifier
   (``npu_mla_prolog_v4`` → ``npu_mla_prolog_v3``);
4. BM25F text matches: documents matching every query token before those matching
   some, fields weighted by :data:`kb.index.documents.BOOSTS`, then rescored by query-independent priors
   (status, supersession, use in chains), by how much of a record's name the query
   spells out, by the dtypes and schemes the query names (:data:`DTYPE_MISS_PRIOR`),
   and with chains and trees behind operators unless the query names them or asks for
   that kind (:data:`PARTIAL_NAME_PRIOR`, :data:`KIND_WORDS`).

Where the index lives and how it is built, opened and healed is
:mod:`kb.index.searchindex`; this module decides what goes into it and how hits rank.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any, NamedTuple

from kb.index.whoosh_import import import_whoosh

import_whoosh()

from whoosh.scoring import BM25F  # noqa: E402

from kb.catalog.compiled import Catalog  # noqa: E402
from kb.index.documents import INPLACE_TWIN_PRIOR, TEXT_FIELDS  # noqa: E402
from kb.index.searchindex import open_index  # noqa: E402
from kb.index.textanalysis import glossary_tokens, tokens  # noqa: E402
from kb.vocab import CALL_PREFIXES  # noqa: E402

MAX_QUERY_CHARS = 500

class Hit(NamedTuple):
    """One result (a NamedTuple: dataclasses would cost an import of inspect)."""

    kind: str
    name: str
    score: float
    summary: str
    why: str  # exact | prefix | spelling | text

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "score": round(self.score, 3),
                "summary": self.summary}  # fmt: skip


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_VERSION = re.compile(r"^v\d+$")
#: Operators answer most queries; a chain or tree must match clearly better to lead.
KIND_PRIOR: dict[str, float] = {"operator": 1.0, "playbook": 1.0, "chain": 0.9, "tree": 0.9}
#: Query words that ask for a kind ("… chain", "决策树") lift that kind above the rest.
KIND_WORDS: dict[str, set[str]] = {
    "chain": {"chain", "pipelin", "链路", "参考链"},
    "tree": {"tree", "decis", "决策", "策树"},
    "playbook": {"playbook", "手册"},
}
KIND_ASKED = 1.5
#: A chain or tree answers a task phrase only when the query names it ("gqa decode
#: paged"); sharing a word or two with it ("moe routing") leaves it behind the
#: operators that do the work.
PARTIAL_NAME_PRIOR: dict[str, float] = {"chain": 0.75, "tree": 0.75}
#: How much a record whose own name the query spells out gains over close relatives
#: ("lightning indexer" → npu_lightning_indexer before npu_quant_lightning_indexer).
NAME_COVERAGE_WEIGHT = 0.3
#: The query spells out every part of a record's name ("lightning indexer").
FULL_NAME_BONUS = 0.5
#: "in place", "inplace", "原地": the trailing-underscore twin is what is wanted.
_INPLACE = re.compile(r"in[- ]?place|原地")


@functools.lru_cache(maxsize=4096)
def _name_stems(name: str) -> frozenset[str]:
    parts = {p for p in re.split(r"[_.\-]+", name.lower()) if p and p != "npu" and not _VERSION.match(p)}
    return frozenset(tokens(p)[0] for p in parts if tokens(p))


def _name_factor(name: str, query_tokens: set[str]) -> tuple[float, bool]:
    """How much the query spells out the record's name, and whether it spells all of it."""
    stems = _name_stems(name)
    if not stems:
        return 1.0, False
    shared = len(stems & query_tokens)
    coverage = shared / len(stems)
    if coverage < 1.0:
        return 1.0 + NAME_COVERAGE_WEIGHT * coverage, False
    # the whole name is in the query: worth more the more of the query it explains
    return 1.0 + NAME_COVERAGE_WEIGHT + FULL_NAME_BONUS * shared / max(len(query_tokens), 1), True


#: A dtype or scheme in the query ("flash attention int8") is a requirement: records
#: that never take it fall behind those that do.  Only words with a digit count
#: (int8, bf16, w8a8, fp8 ...), so "float" or "quant" in a task phrase stay plain words.
DTYPE_MISS_PRIOR = 0.6
_DTYPE_WORD = re.compile(r"[a-z]*\d[a-z0-9]*", re.IGNORECASE)


def asked_dtypes(text: str) -> set[str]:
    """Canonical dtypes and quantization schemes the query names."""
    from kb.vocab import normalize

    asked: set[str] = set()
    for word in _DTYPE_WORD.findall(text):
        for vocab in ("dtype", "quantization"):
            canon = normalize(vocab, word)
            if canon:
                asked.add(canon)
    return asked


def _name_hits(catalog: Catalog, text: str, kinds: set[str] | None) -> list[Hit]:
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
    if not _IDENT.match(text):
        return hits
    bare = text.lower()
    for prefix in CALL_PREFIXES:
        bare = bare.removeprefix(prefix)
    names = catalog.names()
    prefixed = sorted((n for n in names if n.lower().startswith(bare) and n.lower() != bare),
                      key=len)  # fmt: skip
    for i, name in enumerate(prefixed[:20]):
        add(name, 500.0 - i, "prefix")
    if not exact and len(bare) >= 4:
        import difflib

        lowered = {n.lower(): n for n in names}
        close = difflib.get_close_matches(bare, list(lowered), n=3, cutoff=0.85)
        for i, low in enumerate(close):
            add(lowered[low], 300.0 - i, "spelling")
    return hits


class Session:
    """An open searcher and the stored fields of every document, read once.

    A command builds one per query; a long-running process (``kb mcp``) keeps one per
    index and pays only for the query itself.
    """

    def __init__(self, ix: Any) -> None:
        self.searcher = ix.searcher(weighting=BM25F())
        self.stored: dict[int, dict[str, Any]] = dict(self.searcher.reader().iter_docs())

    def token_scores(self, token: str) -> dict[int, float]:
        """BM25F score of ``token`` per document, summed over the text fields.

        The sum of these over a query's words is exactly what a whoosh OR of every
        (field, word) term scores, without building whoosh's union matchers (about
        twice as fast here).
        """
        reader = self.searcher.reader()
        scores: dict[int, float] = {}
        for f in TEXT_FIELDS:
            if (f, token) not in reader:
                continue
            m = self.searcher.postings(f, token, weighting=self.searcher.weighting)
            while m.is_active():
                docnum = m.id()
                scores[docnum] = scores.get(docnum, 0.0) + m.score()
                m.next()
        return scores

    def close(self) -> None:
        self.searcher.close()


def search(catalog: Catalog, text: str, *, limit: int = 10, kinds: set[str] | None = None,
           ix: Any = None, session: Session | None = None) -> list[Hit]:  # fmt: skip
    """Best-first hits for a query; raises ValueError for an empty or oversized query."""
    text = text.strip()
    if not text:
        raise ValueError("the query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(f"the query is {len(text)} characters; keep it under {MAX_QUERY_CHARS}")
    hits = _name_hits(catalog, text, kinds)
    toks = list(dict.fromkeys(tokens(text, query=True)))
    if not toks:
        return hits[:limit]
    seen = {h.name for h in hits}
    if session is not None:  # the caller's (kb mcp): it owns healing and closing
        return (hits + _text_hits(session, text, toks, kinds, seen))[:limit]
    try:
        hits += _own_session_hits(ix or open_index(catalog), text, toks, kinds, seen)
    except Exception:  # a damaged index (zlib.error, whoosh's own): rebuild it, ask again
        hits += _own_session_hits(open_index(catalog, rebuild=True), text, toks, kinds, seen)
    return hits[:limit]


def _own_session_hits(ix: Any, text: str, toks: list[str], kinds: set[str] | None,
                      seen: set[str]) -> list[Hit]:  # fmt: skip
    session = Session(ix)
    try:
        return _text_hits(session, text, toks, kinds, seen)
    finally:
        session.close()


def _summed(scores: list[dict[int, float]]) -> dict[int, float]:
    total: dict[int, float] = {}
    for one in scores:
        for docnum, score in one.items():
            total[docnum] = total.get(docnum, 0.0) + score
    return total


def _text_hits(session: Session, text: str, toks: list[str], kinds: set[str] | None,
               seen: set[str]) -> list[Hit]:  # fmt: skip
    """BM25F matches, rescored; documents holding every query token come first."""
    # joined neighbours ("rms norm" → rmsnorm) may lift a match but are never required
    joined: list[str] = []
    if len(toks) > 1:
        joined = [a + b for a, b in itertools.pairwise(toks) if a.isalpha() and b.isalpha()]
        joined += [t for t in glossary_tokens(text) if t not in toks]
    per_token = [session.token_scores(t) for t in toks]
    main = _summed(per_token)
    extra = _summed([session.token_scores(t) for t in joined])
    every = set.intersection(*(set(s) for s in per_token)) if len(toks) > 1 else set()
    inplace = bool(_INPLACE.search(text.lower()))
    wanted = asked_dtypes(text)
    qset = set(toks) | set(joined)
    prior = dict(KIND_PRIOR)
    for kind, words in KIND_WORDS.items():
        if qset & words:
            prior[kind] = KIND_ASKED
    scored: list[tuple[float, str, str, str]] = []
    for docnum in main.keys() | extra.keys():
        # every token matched: ranked first, on the tokens' score; else any match
        raw = main.get(docnum, 0.0) + (0.0 if docnum in every else extra.get(docnum, 0.0))
        doc = session.stored[docnum]
        name, kind = doc["name"], doc["kind"]
        if name in seen or (kinds and kind not in kinds):
            continue
        factor, whole_name = _name_factor(name, qset)
        score = float(raw) * factor * prior.get(kind, 1.0) * float(doc.get("prior", 1.0))
        if kind in PARTIAL_NAME_PRIOR and not whole_name and prior[kind] != KIND_ASKED:
            score *= PARTIAL_NAME_PRIOR[kind]
        if wanted and doc.get("dtypes") and not wanted & set(doc["dtypes"].split()):
            score *= DTYPE_MISS_PRIOR
        if inplace and name.endswith("_"):
            score /= INPLACE_TWIN_PRIOR * INPLACE_TWIN_PRIOR
        if docnum in every:
            score += 100.0
        scored.append((score, name, kind, doc.get("summary_en", "")))
    scored.sort(key=lambda row: (-row[0], row[1]))  # ties by name: stable across builds
    return [Hit(kind, name, score, summary, "text") for score, name, kind, summary in scored]
