"""Answers to a decision tree's questions: which option an answer selects (exact, any
case, a vocabulary alias, a count against range options), and the error that names
what a question accepts.  Below the advice layer, so the chain selector
(:mod:`kb.catalog.select`) reads answers as ``kb advise`` does."""

from __future__ import annotations

import re
from typing import Any

from kb.vocab import SCHEME_FLAG

Record = dict[str, Any]

_VOCAB_KEYS = {"product": "product", "phase": "phase", SCHEME_FLAG: "quantization"}


class AdviceError(ValueError):
    """A missing or unusable answer; the message names the flag and its allowed values."""


_AT_MOST = re.compile(r"^([0-9]+)-or-fewer$")
_ABOVE = re.compile(r"^more-than-([0-9]+)$")
#: The longest count an answer may be (far above any expert or head count).
MAX_COUNT_DIGITS = 12


def _threshold(options: list[Record], number: int) -> Record | None:
    """``--experts-per-rank 32`` picks ``more-than-24``: numeric answers to range options."""
    for opt in options:
        low = _AT_MOST.match(opt["value"])
        high = _ABOVE.match(opt["value"])
        if (low and number <= int(low.group(1))) or (high and number > int(high.group(1))):
            return opt
    return None


def match(node: Record, answer: str) -> Record | None:
    """The option an answer selects: exact value, any case, a vocabulary alias or a count."""
    options = node["options"]
    text = answer.strip()
    for opt in options:
        if opt["value"] == text:
            return opt
    if text.isdigit():  # ASCII or not: a count the user meant, refused unless 0-9
        if not (text.isascii() and len(text) <= MAX_COUNT_DIGITS):
            raise AdviceError(
                f"--{node['key']} {text[:20]!r}{'...' if len(text) > 20 else ''}: a count is "
                f"written with the digits 0-9, at most {MAX_COUNT_DIGITS} of them; this "
                f"question offers:{describe_options(node)}"
            )
        hit = _threshold(options, int(text))
        # a count no option names falls to the catch-all (``--routed-experts 160`` -> other)
        return hit or next((o for o in options if o["value"] == "other"), None)
    folded = text.lower().replace("_", "-")
    for opt in options:
        if opt["value"] == folded:
            return opt
    vocab = _VOCAB_KEYS.get(node["key"])
    if vocab:
        from kb.vocab import ambiguous_scheme_message, normalize

        canon = normalize(vocab, text)
        for opt in options:
            if canon is not None and opt["value"] == canon:
                return opt
        shared = ambiguous_scheme_message(text) if vocab == "quantization" else None
        if shared:  # ``w8a8``: static or dynamic - say so, never pick one
            raise AdviceError(
                f"--{node['key']} {shared}; this question offers:{describe_options(node)}"
            )
    return None


def describe_options(node: Record) -> str:
    """One line per option, for error messages that must say what would be accepted."""
    width = max(len(o["value"]) for o in node["options"])
    return "".join(f"\n  {o['value']:<{width}}  {o['label']}" for o in node["options"])
