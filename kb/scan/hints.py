"""What the code says about where a call runs: product and phase hints.

Shipping code keeps device- and phase-specific paths apart by name: ``if is_310p():``,
``class A5DeviceAdaptor``, ``def _forward_decode``, ``vllm_ascend/_310p/...``.  A call
inside such a path runs only there, so it is judged against that product (an Ascend 950
path is not an Atlas A3 error) and that phase.  Hints are read from the branch
conditions that hold at the call, the enclosing function and class names and the file
path; a name that mentions nothing decides nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.scan.values import Cond
from kb.vocab import PHASE_CODE_WORDS, PRODUCT_CODE_WORDS

#: Word tokens (lower case) name products and phases (kb.vocab's PRODUCT_CODE_WORDS,
#: PHASE_CODE_WORDS).  Tokens come from splitting on non-alphanumerics and on
#: camelCase, so ``A5DeviceAdaptor`` yields ``a5`` and ``is_310p`` yields ``310p``.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for word in _SPLIT.split(text):
        if not word:
            continue
        out.append(word.lower())
        parts = _CAMEL.split(word)
        if len(parts) > 1:
            out += [p.lower() for p in parts if p]
    return out


def _products(text: str) -> set[str]:
    return {PRODUCT_CODE_WORDS[t] for t in tokens(text) if t in PRODUCT_CODE_WORDS}


def products(cond: Cond, names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(products the call is limited to, products it is kept off) from its context."""
    only: set[str] = set()
    never: set[str] = set()
    for atom, truth in cond:
        found = _products(atom)
        if not found:
            continue
        if truth:
            only |= found
        else:
            never |= found
    for name in names:
        only |= _products(name)
    return only - never, never


def phase(cond: Cond, names: Iterable[str]) -> str | None:
    """``prefill`` or ``decode`` when the context names exactly one of them."""
    found: set[str] = set()
    for atom, truth in cond:
        if truth:
            found |= {PHASE_CODE_WORDS[t] for t in tokens(atom) if t in PHASE_CODE_WORDS}
    for name in names:
        found |= {PHASE_CODE_WORDS[t] for t in tokens(name) if t in PHASE_CODE_WORDS}
    return found.pop() if len(found) == 1 else None
