"""The operator page's "Checkable rules": each record rule's conditions and effects.

The conditions are worded by :func:`kb.catalog.wording.when_words`, the function
``kb show`` and ``kb check`` use too; this module only says how Markdown writes them.
"""

from __future__ import annotations

from kb.catalog.wording import Notation, when_words
from kb.check.conditions import range_text
from site_plugins import md
from site_plugins.common import Record, folded, no_search, scalar, value_text

#: Conditions on a page: code spans and set notation, ``cache_mode`` ∈ {``PA_NZ``}.
MARKDOWN = Notation(
    name=md.code,
    value=lambda v: md.code(scalar(v)),
    values=lambda vs: md.words(scalar(v) for v in vs),
    phrases={
        "equals": "{subject} = {value}",
        "in": "{subject} ∈ {{{values}}}",
        "not_in": "{subject} ∉ {{{values}}}",
        "dtype_in": "{subject} dtype ∈ {{{values}}}",
        "format_in": "{subject} format ∈ {{{values}}}",
        "present": "{subject} is passed",
        "absent": "{subject} is not passed",
        "product": "product ∈ {{{values}}}",
        "quantization": "quantization ∈ {{{values}}}",
    },
)


def effect_lines(rule: Record) -> list[str]:
    """What a rule demands once it applies, one phrase per effect."""
    out = []
    if rule.get("require"):
        out.append("pass " + md.words(rule["require"]))
    if rule.get("forbid"):
        out.append("do not pass " + md.words(rule["forbid"]))
    for tensor, dtypes in (rule.get("dtypes") or {}).items():
        out.append(f"{md.code(tensor)} dtype ∈ {{{md.words(dtypes)}}}")
    for tensor, formats in (rule.get("formats") or {}).items():
        out.append(f"{md.code(tensor)} format ∈ {{{md.words(formats)}}}")
    for arg, values in (rule.get("values") or {}).items():
        out.append(f"{md.code(arg)} ∈ {{{md.words(value_text(v) for v in values)}}}")
    for arg, rng in (rule.get("ranges") or {}).items():
        out.append(f"{md.code(arg)} ∈ {md.inline(range_text(rng))}")
    if rule.get("products"):
        out.append("only on " + md.words(rule["products"]))
    return out


def rules_section(op: Record) -> str:
    rules = op.get("rules", [])
    if not rules:
        return ""
    items = []
    for rule in rules:
        when = when_words(rule, MARKDOWN)
        rid = rule["id"]
        items.append(
            f"- **{md.inline(rid)}**{{ #rule-{rid} }}: "
            + (f"when {when}, " if when else "always: ")
            + "; ".join(effect_lines(rule))
            + f"  \n  *{md.inline(rule.get('message', ''))}*"
        )
    intro = (
        "`kb check` evaluates these against a candidate list; a rule whose conditions "
        "the candidate does not state stays silent."
    )
    body = intro + "\n\n" + "\n".join(items)
    return (
        no_search("## Checkable rules")
        + "\n\n"
        + folded(f"{len(rules)} rules kb check applies", body, "success")
    )
