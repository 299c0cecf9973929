"""A rule condition in words: the one function ``kb show``, ``kb check`` and the site use.

An operator rule's ``when`` clauses (:class:`kb.catalog.models.Condition`, as the dicts
the catalog stores) are worded here once: which parts of a clause are said, in which
order, and how clauses join.  A medium only chooses its :class:`Notation` (how a name,
a value and a set of values are written, and the phrase of each clause kind), so the
terminal, the finding messages and the Markdown pages cannot say different things —
a tensor clause with both ``dtype_in`` and ``format_in`` names both, everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The clause kinds a notation has a phrase for.  A phrase is a format string over
#: ``{subject}`` (the named argument or tensor), ``{value}`` (an ``equals`` value),
#: ``{values}`` (the notation's spelling of a set) and ``{list}`` (the set as Python
#: prints a list).
PHRASES = (
    "equals",
    "in",
    "not_in",
    "dtype_in",
    "format_in",
    "present",
    "absent",
    "product",
    "quantization",
)
#: How clauses (and the dtype and format parts of one tensor clause) are joined.
AND = " and "


class Notation:
    """How one medium writes a condition.  (A plain class, not a dataclass: ``kb show``
    renders rules, and importing dataclasses costs it ``inspect`` and ``ast``.)"""

    __slots__ = ("name", "phrases", "value", "values")

    def __init__(
        self,
        name: Callable[[object], str],
        value: Callable[[object], str],
        values: Callable[[Sequence[object]], str],
        phrases: Mapping[str, str],
    ) -> None:
        if set(phrases) != set(PHRASES):
            raise ValueError(f"a notation has a phrase for each of {', '.join(PHRASES)}")
        self.name = name
        self.value = value
        self.values = values
        self.phrases = phrases


def condition_words(cond: Mapping[str, Any], notation: Notation) -> str:
    """One ``when`` clause in words ("" for a clause with no subject)."""

    def say(
        kind: str, subject: object = "", values: Sequence[object] = (), value: object = None
    ) -> str:
        return notation.phrases[kind].format(
            subject=notation.name(subject),
            value=notation.value(value),
            values=notation.values(values),
            list=list(values),
        )

    if cond.get("arg") is not None:
        if cond.get("equals") is not None:
            return say("equals", cond["arg"], value=cond["equals"])
        if cond.get("in") is not None:
            return say("in", cond["arg"], cond["in"])
        return say("not_in", cond["arg"], cond.get("not_in") or [])
    if cond.get("tensor") is not None:
        parts = [
            say(kind, cond["tensor"], cond[kind])
            for kind in ("dtype_in", "format_in")
            if cond.get(kind)
        ]
        return AND.join(parts)
    for kind in ("present", "absent"):
        if cond.get(kind) is not None:
            return say(kind, cond[kind])
    for kind in ("product", "quantization"):
        if cond.get(kind) is not None:
            return say(kind, values=cond[kind])
    return ""


def when_words(rule: Mapping[str, Any], notation: Notation) -> str:
    """All of a rule's ``when`` clauses in words, joined ("" for a rule that always applies)."""
    return AND.join(filter(None, (condition_words(c, notation) for c in rule.get("when") or [])))


def _slashed(values: Sequence[object]) -> str:
    return "/".join(map(str, values))


#: ``kb show``: Python-like, ``cache_mode == 'PA_NZ'``, ``x dtype in ['float16']``.
TEXT = Notation(
    name=str,
    value=repr,
    values=str,
    phrases={
        "equals": "{subject} == {value}",
        "in": "{subject} in {list}",
        "not_in": "{subject} not in {list}",
        "dtype_in": "{subject} dtype in {list}",
        "format_in": "{subject} format in {list}",
        "present": "{subject} given",
        "absent": "{subject} not given",
        "product": "product in {list}",
        "quantization": "quantization in {list}",
    },
)

#: ``kb check`` findings ("… (record rule R, when …)"): short, ``x is float16/bfloat16``.
MESSAGE = Notation(
    name=str,
    value=str,
    values=_slashed,
    phrases={
        "equals": "{subject}={value}",
        "in": "{subject} in {list}",
        "not_in": "{subject} not in {list}",
        "dtype_in": "{subject} is {values}",
        "format_in": "{subject} is {values}",
        "present": "{subject} given",
        "absent": "{subject} not given",
        "product": "product {values}",
        "quantization": "quantization {values}",
    },
)
