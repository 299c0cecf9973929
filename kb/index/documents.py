"""What goes into the search index: the fields, their weights, one document per record.

The query-independent prior of each record is :mod:`kb.index.priors` (whoosh-free, so
the site build and the name-only lookup read it too).

Both the index's life on disk (:mod:`kb.index.searchindex`) and the ranking
(:mod:`kb.index.search`) read these, so they sit below both.
"""

from __future__ import annotations

from typing import Any

from kb.index.whoosh_import import import_whoosh

import_whoosh()

from whoosh.analysis import Token, Tokenizer  # noqa: E402
from whoosh.fields import ID, STORED, TEXT, Schema  # noqa: E402

from kb.index.fields import (  # noqa: E402, F401  (whoosh-free, shared)
    BOOSTS,
    TEXT_FIELDS,
    phrase_key,
)
from kb.index.textanalysis import tokens  # noqa: E402


class KbTokenizer(Tokenizer):  # type: ignore[misc]
    """whoosh adapter around :func:`kb.index.textanalysis.tokens` (module level: pickled)."""

    def __call__(  # type: ignore[no-untyped-def]
        self,
        value,
        positions=False,
        chars=False,
        keeporiginal=False,
        removestops=True,
        start_pos=0,
        start_char=0,
        tokenize=True,
        mode="",
        **kwargs,
    ):
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        for pos, text in enumerate(tokens(value, query=(mode == "query"))):
            t.text = text
            t.boost = 1.0
            t.stopped = False
            if positions:
                t.pos = start_pos + pos
            yield t


def schema() -> Schema:
    an = KbTokenizer()
    return Schema(
        name=ID(stored=True, unique=True),
        kind=ID(stored=True),
        summary_en=STORED,
        prior=STORED,
        dtypes=STORED,
        steps=STORED,
        phrases=STORED,
        name_text=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["name"]),
        keywords=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["keywords"]),
        summary=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["summary"]),
        fuses=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["fuses"]),
        zh=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["zh"]),
        params=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["params"]),
        body=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["body"]),
    )


def _join(*parts: Any) -> str:
    out: list[str] = []
    for p in parts:
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, (list, tuple)):
            out.append(" ".join(_join(x) for x in p))
        elif isinstance(p, dict):
            out.append(" ".join(_join(v) for v in p.values()))
    return " ".join(x for x in out if x)


def document(rec: dict[str, Any]) -> dict[str, str]:
    """The searchable text of one record, split by field."""
    kind = rec["kind"]
    summary = rec.get("summary") or {}
    keywords = rec.get("keywords") or {}
    title = rec.get("title") or {}
    name = rec["name"]
    doc = {
        "name": name,
        "kind": kind,
        "summary_en": summary.get("en", ""),
        "name_text": _join(
            name, rec.get("calls", []), rec.get("aliases", []), name.replace("_", " ")
        ),
        "keywords": _join(keywords.get("en", []), title.get("en", "")),
        "summary": summary.get("en", ""),
        "fuses": _join([s.replace("_", " ") for s in rec.get("fuses", [])]),
        "zh": _join(
            summary.get("zh", ""),
            keywords.get("zh", []),
            rec.get("description_zh", ""),
            title.get("zh", ""),
        ),
        "params": "",
        "body": rec.get("description", ""),
    }
    doc["dtypes"] = " ".join(sorted(_dtypes(rec)))
    doc["phrases"] = "|".join(
        phrase_key(k) for k in [*keywords.get("en", []), *keywords.get("zh", [])]
    )
    doc["steps"] = " ".join(rec.get("fuses") or []) if kind == "operator" else ""
    if kind == "operator":
        doc["params"] = _join([p["name"] for p in rec.get("parameters", [])])
        doc["body"] = _join(
            rec.get("description", ""),
            [c["text"] for c in rec.get("constraints", [])],
            [q["scheme"] for q in rec.get("quantization", [])],
            rec.get("category", ""),
            rec.get("changes", ""),
        )
    elif kind == "chain":
        doc["fuses"] = _join([s["stage"].replace("_", " ") for s in rec.get("stages", [])])
        doc["params"] = _join([s["operator"] for s in rec.get("stages", [])])
        doc["body"] = _join(
            rec.get("description", ""),
            rec.get("differences", ""),
            rec.get("models", []),
            [p["text"] for p in rec.get("prerequisites", [])],
            rec.get("module", ""),
        )
    elif kind == "tree":
        doc["body"] = _join(
            rec.get("description", ""),
            [
                [n["question"]["en"], [o["label"] for o in n["options"]]]
                for n in rec.get("nodes", [])
            ],
        )
        doc["zh"] += " " + _join([n["question"]["zh"] for n in rec.get("nodes", [])])
    elif kind == "playbook":
        doc["body"] = _join(
            rec.get("description", ""),
            [c["why"] for c in rec.get("op_classes", [])],
            [f["explanation"] for f in rec.get("formulas", [])],
        )
    return doc


def _dtypes(rec: dict[str, Any]) -> set[str]:
    """Dtypes an operator takes or returns and the quantization schemes it (or a chain) runs."""
    if rec["kind"] == "chain":
        return set(rec.get("quantization") or [])
    found: set[str] = set()
    for p in [*(rec.get("parameters") or []), *(rec.get("returns") or [])]:
        found.update(p.get("dtypes") or [])
    for q in rec.get("quantization") or []:
        found.add(q["scheme"])
        for dtypes in (q.get("tensors") or {}).values():
            found.update(dtypes if isinstance(dtypes, list) else [dtypes])
    return found
