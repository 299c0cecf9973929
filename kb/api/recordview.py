"""What ``kb show`` cuts out of a record: the brief card, one section, and their names.

Text output, ``--format json`` and the MCP ``show`` tool all take the same cut from
here, so a section or a field of the card is defined once.  Works on the plain record
dicts of :mod:`kb.catalog.compiled`; imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

from kb.catalog.kernelfacts import kernel_only_products
from kb.emulate.names import emulated

Record = dict[str, Any]

LANGS = ("en", "zh")
#: Fields that identify a record; every cut keeps them, none is a section.
IDENTITY = ("kind", "name")
#: Spellings people try for a section, mapped to the record field.
SECTION_ALIASES = {
    "params": "parameters",
    "args": "parameters",
    "arguments": "parameters",
    "history": "versions",
    "releases": "versions",
    "torch_npu": "versions",
    "prereqs": "prerequisites",
    "questions": "nodes",
    "example": "examples",
    "rule": "rules",
    "constraint": "constraints",
    "schemes": "quantization",
    "semantics": "reference",
    "computes": "reference",
}


def section_names(rec: Record) -> list[str]:
    """Every section of this record, in record order (its fields, less the identity)."""
    return [k for k in rec if k not in IDENTITY]


def section_key(rec: Record, name: str) -> str | None:
    """The field a section name means for this record (``graph-mode`` → ``graph_mode``)."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    key = SECTION_ALIASES.get(key, key)
    return key if key in section_names(rec) else None


def section(rec: Record, key: str) -> Record:
    """The record cut down to one field (``key`` from :func:`section_key`)."""
    return {"kind": rec["kind"], "name": rec["name"], key: rec[key]}


def text_in(value: Any, lang: str) -> str:
    """The ``lang`` text of an ``{en, zh}`` pair, English when that language is missing."""
    if isinstance(value, dict):
        return str(value.get(lang) or value.get("en") or "")
    return str(value or "")


def release_span(versions: Record) -> str:
    """``2.1.0.post17, 2.6.0.post3+``: the runs of releases that ship it, gaps kept."""
    from kb.catalog.releases import format_ranges

    if versions.get("ranges"):
        return format_ranges(versions["ranges"])
    first, last = versions.get("first"), versions.get("last")
    if not first:
        return ""
    return f"{first} .. {last}" if last else f"{first}+"


def call_line(rec: Record) -> str:
    """``torch_npu.npu_rms_norm(self, gamma, …1 optional)``: the call with what it needs."""
    calls = rec.get("calls") or [rec["name"]]
    params = rec.get("parameters") or []
    required = [p for p in params if p.get("required", True)]
    positional = [p["name"] for p in required if not p.get("keyword_only")]
    keyword = [p["name"] for p in required if p.get("keyword_only")]
    parts = positional + (["*", *keyword] if keyword else [])
    optional = len(params) - len(required)
    if optional:
        parts.append(f"…{optional} optional")
    return f"{calls[0]}({', '.join(parts)})"


def brief(rec: Record, lang: str = "en") -> Record:
    """The summary card: what to call, where it runs, in which releases, which schemes."""
    kind = rec["kind"]
    card: Record = {"kind": kind, "name": rec["name"], "summary": text_in(rec.get("summary"), lang)}
    if kind == "operator":
        versions = rec.get("versions") or {}
        card |= {
            "status": rec.get("status"),
            "category": rec.get("category"),
            "call": call_line(rec),
            "products": rec.get("products") or [],
            "kernel_only_products": kernel_only_products(rec),
            "phases": rec.get("phases") or [],
            "torch_npu": release_span(versions),
            "ranges": versions.get("ranges") or [],
            "schemes": _unique(q["scheme"] for q in rec.get("quantization") or []),
            "superseded_by": rec.get("superseded_by"),
            "emulated": emulated(rec["name"]),
        }
    elif kind == "chain":
        card |= {
            "title": text_in(rec.get("title"), lang),
            "module": rec.get("module"),
            "phases": rec.get("phases") or [],
            "products": rec.get("products") or [],
            "schemes": rec.get("quantization") or [],
            "operators": _unique(s["operator"] for s in rec.get("stages") or []),
        }
    elif kind == "tree":
        from kb.advice.advise import flags

        card |= {"title": text_in(rec.get("title"), lang), "flags": flags(rec)}
    elif kind == "playbook":
        card |= {
            "title": text_in(rec.get("title"), lang),
            "targets": [c["id"] for c in rec.get("op_classes") or [] if c.get("weight_heavy")],
            "conservative_factor": rec.get("conservative_factor"),
            "ladder": rec.get("ladder") or [],
        }
    return card


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))
