"""The full-text half of search: BM25F over the whoosh index, rescored.

Fields are weighted by :data:`kb.index.documents.BOOSTS`; a record's score is scaled
by the share of the query's words it holds (:data:`COVERAGE_POWER`, a Chinese run
counting as one word) and lifted by it (:data:`EVERY_TOKEN_BONUS`); it is also multiplied by the
query-independent priors (:mod:`kb.index.priors`), by how much of a record's name the
query spells out (:func:`kb.index.names.name_factor`), by how well the record's fused
steps answer the steps the query names (:mod:`kb.index.steps`), by the dtypes and
schemes the query names (:data:`DTYPE_MISS_PRIOR`), with chains and trees behind
operators unless the query names them or asks for that kind (:data:`PARTIAL_NAME_PRIOR`,
:data:`KIND_WORDS`).
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from kb.index.fields import TEXT_FIELDS, phrase_key
from kb.index.names import Hit, name_factor, name_stems, name_words
from kb.index.priors import INPLACE_TWIN_PRIOR
from kb.index.steps import (
    UNASKED_NAMED_STEP_PRIOR,
    name_spelled,
    named_steps,
    step_factor,
    unasked_named_steps,
)
from kb.index.textanalysis import glossary_tokens, query_words

if TYPE_CHECKING:
    from kb.index.termtable import TermTable

#: Added to the score of a document holding every query token: usually enough to rank
#: it first, yet a far better match on the named steps or name can still lead.
EVERY_TOKEN_BONUS = 100.0
#: Holding most of the words earns part of it: one filler word ("after") a document
#: happens to contain must not outrank a better match on the words that matter.
SHARE_POWER = 3
#: The share of the query's words a record holds also scales its score: a record
#: missing a word the query names is a weaker answer, however well it matches the rest.
COVERAGE_POWER = 2.0
#: A record matching only a joined spelling or a glossary word of the query holds none
#: of its words; it keeps this share, so such records still rank among themselves.
MIN_SHARE = 0.1
#: The query is, word for word, one of the record's own keyword phrases.
KEYWORD_PHRASE_BONUS = 1.5
#: Operators answer most queries; a chain or tree must match clearly better to lead.
KIND_PRIOR: dict[str, float] = {"operator": 1.0, "playbook": 1.0, "chain": 0.9, "tree": 0.9}
#: Query words that ask for a kind ("… chain", "决策树") lift that kind above the rest:
#: a reader who names the kind wants those records first, not the operators they use.
KIND_WORDS: dict[str, set[str]] = {
    "chain": {"chain", "pipelin", "链路", "参考链"},
    "tree": {"tree", "decis", "决策", "策树"},
    "playbook": {"playbook", "手册"},
}
KIND_ASKED = 3.0
#: A chain or tree answers a task phrase only when the query names it ("gqa decode
#: paged"); sharing a word or two with it ("moe routing") leaves it behind the
#: operators that do the work.
PARTIAL_NAME_PRIOR: dict[str, float] = {"chain": 0.75, "tree": 0.75}
#: "in place", "inplace", "原地": the trailing-underscore twin is what is wanted.
_INPLACE = re.compile(r"in[- ]?place|原地")


#: A dtype or scheme in the query ("flash attention int8") is a requirement: records
#: that never take it fall behind those that do.  Only words with a digit count
#: (int8, bf16, w8a8, fp8 ...), so "float" or "quant" in a task phrase stay plain words.
DTYPE_MISS_PRIOR = 0.6
_DTYPE_WORD = re.compile(r"[a-z]*\d[a-z0-9]*", re.IGNORECASE)


def asked_dtypes(text: str) -> set[str]:
    """Canonical dtypes and quantization schemes the query names."""
    words = _DTYPE_WORD.findall(text)
    if not words:  # most queries: no word with a digit, no need for the alias tables
        return set()
    from kb.vocab import normalize

    asked: set[str] = set()
    for word in words:
        for vocab in ("dtype", "quantization"):
            canon = normalize(vocab, word)
            if canon:
                asked.add(canon)
    return asked


class Session:
    """An open whoosh searcher and the stored fields of every document, read once.

    A long-running process (``kb mcp``) keeps one per index and pays only for the query
    itself; a cold command reads the same scores from the index's term table instead
    (:class:`kb.index.termtable.TermTable`), without importing whoosh.
    """

    def __init__(self, ix: Any) -> None:
        from kb.index.whoosh_import import import_whoosh

        import_whoosh()
        from whoosh.scoring import BM25F

        from kb.index.searchindex import STORED_ATTR

        self.searcher = ix.searcher(weighting=BM25F())
        stored = getattr(ix, STORED_ATTR, None)  # docs.json of an index on disk
        self.stored: dict[int, dict[str, Any]] = (
            stored if stored is not None else dict(self.searcher.reader().iter_docs())
        )

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


def own_session_hits(
    ix: Any, text: str, toks: list[str], kinds: set[str] | None, seen: set[str]
) -> list[Hit]:
    """Text hits through a session opened (and closed) for this one query."""
    session = Session(ix)
    try:
        return text_hits(session, text, toks, kinds, seen)
    finally:
        session.close()


def _summed(scores: list[dict[int, float]]) -> dict[int, float]:
    total: dict[int, float] = {}
    for one in scores:
        for docnum, score in one.items():
            total[docnum] = total.get(docnum, 0.0) + score
    return total


def _word_shares(words: list[list[str]], scores: dict[str, dict[int, float]]) -> dict[int, float]:
    """Per document, the mean over the query's words of the share of each word's tokens
    it holds (a Chinese run is one word, so its bigrams together count as one)."""
    held: dict[int, float] = {}
    for word in words:
        toks = list(dict.fromkeys(word))
        for tok in toks:
            for docnum in scores.get(tok, {}):
                held[docnum] = held.get(docnum, 0.0) + 1.0 / len(toks) / len(words)
    return held


class _Doc(NamedTuple):
    """What the rescoring reads of one stored document, split and parsed once."""

    name: str
    kind: str
    parts: Any  # the name's (raw, stem) parts; None: stemmed when needed
    prior: float
    phrases: frozenset[str]
    fused: frozenset[str]
    stems: frozenset[str]
    dtypes: frozenset[str]
    summary: str
    words: frozenset[str] | None  # what could spell the name (names.name_words)
    spelled: frozenset[str]  # fused steps the name spells (steps.name_spelled)


def _facts(session: Session | TermTable) -> dict[int, _Doc]:
    """The digested documents of a session, kept on it: a long-running process (``kb
    mcp``) digests each document once, not once per query."""
    facts: dict[int, _Doc] | None = getattr(session, "_kb_facts", None)
    if facts is None:
        facts = {}
        session._kb_facts = facts  # type: ignore[union-attr]
    return facts


def _digest(session: Session | TermTable, docnum: int, facts: dict[int, _Doc]) -> _Doc:
    doc = session.stored[docnum]
    name = doc["name"]
    parts = doc.get("parts")  # stored at build (docs.json); else stemmed when needed
    fused = frozenset(doc["steps"].split()) if doc.get("steps") else frozenset()
    stems = name_stems(name, parts) if fused else frozenset()
    facts[docnum] = digested = _Doc(
        name,
        doc["kind"],
        parts,
        float(doc.get("prior", 1.0)),
        frozenset((doc.get("phrases") or "").split("|")),
        fused,
        stems,
        frozenset((doc.get("dtypes") or "").split()),
        doc.get("summary_en", ""),
        name_words(parts) if parts is not None else None,
        name_spelled(stems, fused),
    )
    return digested


def text_hits(
    session: Session | TermTable, text: str, toks: list[str], kinds: set[str] | None, seen: set[str]
) -> list[Hit]:
    """BM25F matches, rescored; documents holding more of the query's words come first."""
    # joined neighbours ("rms norm" → rmsnorm) may lift a match but are never required
    joined: list[str] = []
    if len(toks) > 1:
        joined = [a + b for a, b in itertools.pairwise(toks) if a.isalpha() and b.isalpha()]
        joined += [t for t in glossary_tokens(text) if t not in toks]
    per_token = [session.token_scores(t) for t in toks]
    main = _summed(per_token)
    extra = _summed([session.token_scores(t) for t in joined])
    every = set.intersection(*(set(s) for s in per_token)) if len(toks) > 1 else set()
    held = _word_shares(query_words(text), dict(zip(toks, per_token, strict=True)))
    inplace = bool(_INPLACE.search(text.lower()))
    wanted = asked_dtypes(text)
    qset = set(toks) | set(joined)
    steps = named_steps(qset)
    phrase = phrase_key(text)
    prior = dict(KIND_PRIOR)
    for kind, words in KIND_WORDS.items():
        if qset & words:
            prior[kind] = KIND_ASKED
    facts = _facts(session)
    scored: list[tuple[float, str, str, str]] = []
    for docnum in main.keys() | extra.keys():
        # every token matched: ranked first, on the tokens' score; else any match
        raw = main.get(docnum, 0.0) + (0.0 if docnum in every else extra.get(docnum, 0.0))
        doc = facts.get(docnum) or _digest(session, docnum, facts)
        name, kind = doc.name, doc.kind
        if name in seen or (kinds and kind not in kinds):
            continue
        factor, whole_name = name_factor(name, qset, doc.parts, doc.words)
        score = float(raw) * factor * prior.get(kind, 1.0) * doc.prior
        if phrase in doc.phrases:
            score *= KEYWORD_PHRASE_BONUS
        if doc.fused:
            score *= step_factor(doc.fused, steps)
            if doc.spelled:  # the only steps that can count (steps.name_spelled)
                score *= UNASKED_NAMED_STEP_PRIOR ** unasked_named_steps(
                    doc.stems, doc.spelled, qset, steps
                )
        if kind in PARTIAL_NAME_PRIOR and not whole_name and prior[kind] != KIND_ASKED:
            score *= PARTIAL_NAME_PRIOR[kind]
        if wanted and doc.dtypes and not wanted & doc.dtypes:
            score *= DTYPE_MISS_PRIOR
        if inplace and name.endswith("_"):
            score /= INPLACE_TWIN_PRIOR * INPLACE_TWIN_PRIOR
        share = held.get(docnum, 0.0)
        score *= max(share, MIN_SHARE) ** COVERAGE_POWER
        if len(toks) > 1:  # the share of the query's words the document holds
            score += EVERY_TOKEN_BONUS * share**SHARE_POWER
        scored.append((score, name, kind, doc.summary))
    scored.sort(key=lambda row: (-row[0], row[1]))  # ties by name: stable across builds
    return [Hit(kind, name, score, summary, "text") for score, name, kind, summary in scored]
