"""What goes into the search index: the fields, their weights, one document per record,
and the query-independent prior of each record.

Both the index's life on disk (:mod:`kb.index.searchindex`) and the ranking
(:mod:`kb.index.search`) read these, so they sit below both.
"""

from __future__ import annotations

from typing import Any

from kb.index.whoosh_import import import_whoosh

import_whoosh()

from whoosh.analysis import Token, Tokenizer  # noqa: E402
from whoosh.fields import ID, STORED, TEXT, Schema  # noqa: E402

from kb.catalog.compiled import Catalog  # noqa: E402
from kb.index.textanalysis import tokens  # noqa: E402
from kb.vocab import OFFICIAL_STATUSES, STATUS_PRIOR  # noqa: E402

#: Field weights, tuned on tests/data/search_queries.yaml.
BOOSTS: dict[str, float] = {
    "name": 6.0,
    "keywords": 4.0,
    "summary": 3.0,
    "fuses": 2.5,
    "zh": 3.0,
    "params": 1.0,
    "body": 1.0,
}


class KbTokenizer(Tokenizer):  # type: ignore[misc]
    """whoosh adapter around :func:`kb.index.textanalysis.tokens` (module level: pickled)."""

    def __call__(  # type: ignore[no-untyped-def]
        self, value, positions=False, chars=False, keeporiginal=False, removestops=True,
        start_pos=0, start_char=0, tokenize=True, mode="", **kwargs,
    ):  # fmt: skip
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
        name_text=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["name"]),
        keywords=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["keywords"]),
        summary=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["summary"]),
        fuses=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["fuses"]),
        zh=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["zh"]),
        params=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["params"]),
        body=TEXT(analyzer=an, phrase=False, field_boost=BOOSTS["body"]),
    )


TEXT_FIELDS = ("name_text", "keywords", "summary", "fuses", "zh", "params", "body")


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
    if kind == "operator":
        doc["params"] = _join([p["name"] for p in rec.get("parameters", [])])
        doc["body"] = _join(rec.get("description", ""), [c["text"] for c in rec.get("constraints", [])],
                            [q["scheme"] for q in rec.get("quantization", [])], rec.get("category", ""),
                            rec.get("changes", ""))  # fmt: skip
    elif kind == "chain":
        doc["fuses"] = _join([s["stage"].replace("_", " ") for s in rec.get("stages", [])])
        doc["params"] = _join([s["operator"] for s in rec.get("stages", [])])
        doc["body"] = _join(rec.get("description", ""), rec.get("differences", ""), rec.get("models", []),
                            [p["text"] for p in rec.get("prerequisites", [])], rec.get("module", ""))  # fmt: skip
    elif kind == "tree":
        doc["body"] = _join(rec.get("description", ""),
                            [[n["question"]["en"], [o["label"] for o in n["options"]]]
                             for n in rec.get("nodes", [])])  # fmt: skip
        doc["zh"] += " " + _join([n["question"]["zh"] for n in rec.get("nodes", [])])
    elif kind == "playbook":
        doc["body"] = _join(rec.get("description", ""), [c["why"] for c in rec.get("op_classes", [])],
                            [f["explanation"] for f in rec.get("formulas", [])])  # fmt: skip
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


#: How much to trust a record as the answer before looking at the query: the
#: recommended, documented operator should lead its deprecated, superseded, private or
#: in-place relatives when the text matches them alike.  The weight per status is
#: kb.vocab's STATUS_PRIOR (each status's row holds it, beside its rank).
PRIVATE_PRIOR = 0.6  # _npu_* kernels (ATB): real, but not the public API to reach for
SUPERSEDED_PRIOR = 0.8
INPLACE_TWIN_PRIOR = 0.9
OFF_TOPIC_CATEGORY_PRIOR = 0.9  # training / vision: this KB is read for inference work


#: Operators that proven reference chains and decision trees use are the mainstream
#: answer; each use (up to PROVEN_CAP) lifts the record a little.
PROVEN_WEIGHT = 0.05
PROVEN_CAP = 2


def _uses(recs: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How many chains and trees name each operator."""
    counts: dict[str, int] = {}
    for rec in recs.values():
        named: set[str] = set()
        if rec["kind"] == "chain":
            named = {st["operator"] for st in rec.get("stages", [])}
        elif rec["kind"] == "tree":
            named = {
                op
                for n in rec.get("nodes", [])
                for o in n["options"]
                for op in o.get("operators", [])
            }
        for op in named:
            counts[op] = counts.get(op, 0) + 1
    return counts


def priors(catalog: Catalog) -> dict[str, float]:
    """A query-independent weight per record (see STATUS_PRIOR and friends)."""
    recs = {r["name"]: r for r in catalog.records()}
    uses = _uses(recs)
    out: dict[str, float] = {}
    for name, rec in recs.items():
        if rec["kind"] != "operator":
            out[name] = 1.0
            continue
        prior = STATUS_PRIOR.get(rec.get("status", "stable"), 1.0)
        successor = recs.get(rec.get("superseded_by") or "")
        if successor is not None and successor.get("status") in OFFICIAL_STATUSES:
            prior *= SUPERSEDED_PRIOR
        if name.endswith("_") and name.rstrip("_") in recs:
            prior *= INPLACE_TWIN_PRIOR
        if name.startswith("_"):
            prior *= PRIVATE_PRIOR
        if rec.get("category") in ("training", "vision"):
            prior *= OFF_TOPIC_CATEGORY_PRIOR
        prior *= 1.0 + PROVEN_WEIGHT * min(uses.get(name, 0), PROVEN_CAP)
        out[name] = prior
    return out
