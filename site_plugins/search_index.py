"""The site's search index: the CLI's ranking, shipped as data for the browser.

Material's lunr search ranks differently from ``kb search`` and loads a 2 MB index on
every cold page.  Instead the site ships what the CLI ranks with, and a small worker
(``assets/javascripts/kb-search-worker.js``, plugged into Material's search box as a
custom worker) runs the same steps as :mod:`kb.index.search`:

* ``docs.json``: one row per record in the index's document order (name, kind, page, prior,
  dtypes, fused steps, summary, name parts with their stems), the record spellings for
  exact names, the other pages' titles, and every ranking constant, read from the
  modules that define them.  A page URL the worker can derive (``dirs[kind] + name/``)
  ships as "" ("-": no page), and a name part that is its own stem as a bare string;
* ``s<N>.json`` shards, by a hash of the term: each term's BM25F score per document
  (exactly what ``Session.token_scores`` sums, read from the index's term table), the stems of
  the record words hashed there, and the keyword phrases hashed there.

A query fetches ``docs.json`` and the few shards its words hash to, never the whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kb.catalog.compiled import Catalog, root_key
from kb.index import fulltext, names, priors, steps, textanalysis
from kb.index.documents import TEXT_FIELDS, document
from kb.index.searchindex import open_index, open_terms
from kb.index.termtable import TermTable
from kb.vocab import CALL_PREFIXES, normalize
from kb.vocab.dtypes import DTYPE_CODES
from kb.vocab.spellings import ALIAS_TABLES, CANONICAL
from site_plugins import build_cache, md
from site_plugins.common import KIND_DIRS, SiteData

#: Shards of the term table.  A query fetches one per word, stem and phrase (about ten
#: for three words), so more, smaller shards cut what the first search transfers:
#: at 512 a shard averages about 2 KB (issue 34: a cold page and one search <= 300 KB).
SHARDS = 512
DIRECTORY = "search/kb"
#: Score precision in the shards: rank ties closer than this may order differently.
DIGITS = 3
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_PARTS = re.compile(r"[_.\-]+")


def shard_of(text: str) -> int:
    """The shard of a term or word: the sum of its code points (the worker does the same)."""
    return sum(map(ord, text)) % SHARDS


def _constants() -> dict[str, Any]:
    """Every number and word list the ranking reads, from the module that defines it."""
    return {
        "MAX_QUERY_CHARS": names.MAX_QUERY_CHARS,
        "NAME_COVERAGE_WEIGHT": names.NAME_COVERAGE_WEIGHT,
        "FULL_NAME_BONUS": names.FULL_NAME_BONUS,
        "KIND_PRIOR": fulltext.KIND_PRIOR,
        "KIND_WORDS": {k: sorted(v) for k, v in fulltext.KIND_WORDS.items()},
        "KIND_ASKED": fulltext.KIND_ASKED,
        "PARTIAL_NAME_PRIOR": fulltext.PARTIAL_NAME_PRIOR,
        "DTYPE_MISS_PRIOR": fulltext.DTYPE_MISS_PRIOR,
        "EVERY_TOKEN_BONUS": fulltext.EVERY_TOKEN_BONUS,
        "SHARE_POWER": fulltext.SHARE_POWER,
        "COVERAGE_POWER": fulltext.COVERAGE_POWER,
        "MIN_SHARE": fulltext.MIN_SHARE,
        "KEYWORD_PHRASE_BONUS": fulltext.KEYWORD_PHRASE_BONUS,
        "INPLACE_TWIN_PRIOR": priors.INPLACE_TWIN_PRIOR,
        "STEP_WEIGHT": steps.STEP_WEIGHT,
        "EXTRA_STEP_COST": steps.EXTRA_STEP_COST,
        "MIN_NAMED": steps.MIN_NAMED,
        "UNASKED_NAMED_STEP_PRIOR": steps.UNASKED_NAMED_STEP_PRIOR,
        "STEP_WORDS": [[s, sorted(w), j] for s, w, j in steps._step_words()],
        "STOP": sorted(textanalysis.STOP),
        "GLOSSARY": [[zh, textanalysis.tokens(en)] for zh, en in textanalysis.GLOSSARY.items()],
        "CALL_PREFIXES": list(CALL_PREFIXES),
        "SCHEME_WORDS": _scheme_words(),
        "SHARDS": SHARDS,
    }


def _scheme_words() -> dict[str, list[str]]:
    """Query words (letters and digits, at least one digit) → the dtypes and schemes
    :func:`kb.index.fulltext.asked_dtypes` reads them as."""
    candidates = {str(code) for code in DTYPE_CODES}
    for vocab in ("dtype", "quantization"):
        candidates.update(c.lower() for c in CANONICAL[vocab])
        candidates.update(a.lower() for a in ALIAS_TABLES[vocab])
    out: dict[str, list[str]] = {}
    for word in sorted(candidates):
        if not re.fullmatch(r"[a-z]*\d[a-z0-9]*", word):
            continue
        found = [c for c in (normalize(v, word) for v in ("dtype", "quantization")) if c]
        if found:
            out[word] = found
    return out


def _stems(catalog: Catalog) -> dict[str, str]:
    """Each record word whose stem differs from it (the worker cannot run Porter)."""
    out: dict[str, str] = {}
    for stems in _record_stems(catalog).values():
        out.update((word, stem) for word, stem in stems.items() if stem != word)
    for step in steps._step_words():
        for word in step[0].split("_"):
            stem = textanalysis.stem(word)
            if stem != word:
                out[word] = stem
    return out


def _record_stems(catalog: Catalog) -> dict[str, dict[str, str]]:
    """Each record's words and their stems (by its row digest), split from what the
    index reads of it.

    Kept in the cache beside the pages: a one-record edit splits and stems one record's
    text, not all of them.  Keyed by the code (what a word and its stem are) and each
    record's content digest; the store's own digest catches a damaged file, which is
    then split again."""
    name = f"stems-{root_key(Path(catalog.root))}"
    stored = build_cache.load(name)
    code = build_cache.code_version()
    known = stored.get("stems") if stored.get("code") == code else None
    if not isinstance(known, dict):
        known = {}
    out: dict[str, dict[str, str]] = {}
    for rec_name, rec_digest in sorted(catalog.digests().items()):
        stems = known.get(rec_digest)
        if not (isinstance(stems, dict) and all(isinstance(v, str) for v in stems.values())):
            rec = catalog.get(rec_name)
            words = sorted(_words(rec)) if rec is not None else []
            stems = {word: textanalysis.stem(word) for word in words}
        out[rec_digest] = stems
    if out != known:
        build_cache.store(name, {"code": code, "stems": out})
    return out


def _words(rec: dict[str, Any]) -> set[str]:
    words: set[str] = set()
    for text in document(rec).values():
        for match in _WORD.finditer(text if isinstance(text, str) else ""):
            words.update(p for p in _PARTS.split(match.group(0).lower()) if p)
    return words


def build(catalog: Catalog, data: SiteData, pages: list[list[str]]) -> dict[str, str]:
    """Every file of the site index (path under the site → text)."""
    ix = open_index(catalog)
    table = open_terms(catalog)  # every term's scores, read without walking whoosh's postings
    session: fulltext.Session | TermTable = table if table is not None else fulltext.Session(ix)
    try:
        docs = []
        if sorted(session.stored) != list(range(len(session.stored))):
            raise ValueError("the search index has gaps in its document numbers; rebuild it")
        for docnum in range(len(session.stored)):
            doc = session.stored[docnum]
            path = data.path(doc["name"])
            url = md.page_url(path, data.directory_urls) if path else ""
            docs.append(
                [
                    doc["name"],
                    doc["kind"],
                    "" if url and url == _usual_url(doc, data) else url or "-",
                    doc.get("prior", 1.0),
                    doc.get("dtypes", ""),
                    doc.get("steps", ""),
                    snippet(doc.get("summary_en", "")),
                    [
                        raw if raw == stem else [raw, stem]
                        for raw, stem in names._name_parts(doc["name"])
                    ],
                ]
            )
        shards: list[dict[str, Any]] = [{"t": {}, "s": {}, "p": {}} for _ in range(SHARDS)]
        for term, scored in _every_score(session):
            shards[shard_of(term)]["t"][term] = [
                value for docnum, score in scored for value in (docnum, round(score, DIGITS))
            ]
        for docnum, doc in session.stored.items():
            for phrase in (doc.get("phrases") or "").split("|"):
                if phrase:
                    shards[shard_of(phrase)]["p"].setdefault(phrase, []).append(docnum)
    finally:
        session.close()
    for word, stem in sorted(_stems(catalog).items()):
        shards[shard_of(word)]["s"][word] = stem
    head = {
        "dirs": {kind: f"{folder}/" for kind, folder in KIND_DIRS.items()},
        "docs": docs,
        "spellings": _spellings(catalog),
        "pages": pages,
        "k": _constants(),
        "content": catalog.content,
    }
    out = {f"{DIRECTORY}/docs.json": _dump(head)}
    for i, shard in enumerate(shards):
        out[f"{DIRECTORY}/s{i}.json"] = _dump(shard)
    return out


def _every_score(
    session: fulltext.Session | TermTable,
) -> Iterator[tuple[str, list[tuple[int, float]]]]:
    """Every term, sorted, with its ``(document, score)`` pairs in document order."""
    if isinstance(session, TermTable):
        yield from session.every_score()  # one pass over the table, no query per term
        return
    terms: set[str] = set()
    reader = session.searcher.reader()
    for field in TEXT_FIELDS:
        terms.update(
            t if isinstance(t, str) else t.decode("utf-8") for t in reader.field_terms(field)
        )
    for term in sorted(terms):
        yield term, sorted(session.token_scores(term).items())


def _usual_url(doc: dict[str, Any], data: SiteData) -> str | None:
    """The page URL the worker derives itself (``dirs[kind] + name + "/"``): such rows
    ship "" instead (12 KB of a first search's download)."""
    folder = KIND_DIRS.get(doc["kind"])
    return f"{folder}/{doc['name']}/" if folder and data.directory_urls else None


def _spellings(catalog: Catalog) -> dict[str, str]:
    """Aliases the worker cannot derive: a name, or a call path that is a prefix plus
    the name, resolves in the worker without a table entry."""
    out = {}
    for spelling in catalog.spellings():
        name = catalog.resolve(spelling)
        bare = spelling.strip()
        for prefix in CALL_PREFIXES:
            bare = bare.removeprefix(prefix)
        if name and bare.lower() != name.lower():
            out[spelling] = name
    return out


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_EXCLUDED_HEADING = re.compile(r"<h[1-6]\b[^>]*?\bid=\"?([^\"\s>]+)\"?[^>]*data-search-exclude")
_FIRST_H1 = re.compile(r"<h1\b[^>]*?\bid=\"?([^\"\s>]+)")


def page_titles(page: Any) -> list[dict[str, str]]:
    """The entries Material's search would make of a page's titles: the page itself, then
    each heading's section (``url#id``) unless the heading says ``data-search-exclude``.
    Read from the table of contents, without parsing the page's HTML."""
    content = page.content or ""
    excluded = set(_EXCLUDED_HEADING.findall(content))
    first = _FIRST_H1.search(content)
    title = (page.meta or {}).get("title") or page.title or ""
    out = [{"location": page.url, "title": str(title)}]

    def walk(items: Any) -> None:
        for item in items:
            if item.id not in excluded and not (first and item.id == first.group(1)):
                out.append({"location": f"{page.url}#{item.id}", "title": str(item.title)})
            walk(item.children)

    walk(page.toc or [])
    return out


def other_pages(search_index: dict[str, Any], record_urls: set[str]) -> list[list[str]]:
    """``[[url, title, words], …]`` of hand-written, rule and index pages and their
    sections, from Material's own index, for the worker to list after the records."""
    out = []
    for doc in search_index.get("docs", []):
        location = doc.get("location", "")
        if location.split("#")[0] in record_urls:
            continue
        title = re.sub(r"<[^>]+>", "", doc.get("title") or "")
        if not title:
            continue
        words = " ".join(dict.fromkeys(textanalysis.tokens(title)))
        out.append([location, title, words])
    return out


#: The longest summary a search result shows under its title (the page has the rest):
#: the shipped search data stays small however many records there are.
SNIPPET_CHARS = 110


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """A result's text: the summary's first sentence when it fits, else its words up to
    ``limit`` characters and an ellipsis."""
    text = " ".join(text.split())
    end = text.find(". ")
    if 0 < end < limit:
        return text[: end + 1]
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:-") + "…"
