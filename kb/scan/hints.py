"""What the code says about where a call runs: product and phase hints.

Shipping code keeps device- and phase-specific paths apart by name: ``if is_310p():``,
``class A5DeviceAdaptor``, ``def _forward_decode``, ``vllm_ascend/_310p/...``.  A call
inside such a path runs only there, so it is judged against that product (an Ascend 950
path is not an Atlas A3 error) and that phase.  Hints are read from the branch
conditions that hold at the call, the enclosing function and class names and the file
path; a name that mentions nothing decides nothing.

Besides the code words of :mod:`kb.vocab.products` (and its feature words, read only where
a path is taken for them: ``if use_mxfp8:``, ``w8a8_mxfp8.py``), two spellings of the chip are read,
both through the SoC columns of that table: a device-name test (``is_Ascend310P()``,
``SocVersion.is_Ascend910()``: every product whose SoC names start with the word), and a
comparison of a SoC id (``get_soc_version() in (220, 223)``, ``220 <= soc_version <= 225``,
``soc_info.soc_version >= 250 and soc_info.soc_version < 260``: the products whose ids
satisfy it).  A comparison mixed with other conditions restricts only through its own part.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from functools import lru_cache

from kb.scan.values import Cond
from kb.vocab import (
    PHASE_CODE_WORDS,
    PRODUCT_CODE_WORDS,
    PRODUCT_FEATURE_WORDS,
    SOC_ID_PRODUCTS,
    SOC_NAME_PRODUCTS,
)

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


_ALL_IDS = frozenset(SOC_ID_PRODUCTS)
_ALL_PRODUCTS = frozenset(SOC_ID_PRODUCTS.values())
_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


def _products(text: str, taken: bool = True) -> set[str]:
    """Products a name or a condition names; ``taken``: the path runs when it holds (a
    feature word such as ``mxfp8`` says where a path taken for it runs, not the converse)."""
    words = tokens(text)
    found = {PRODUCT_CODE_WORDS[t] for t in words if t in PRODUCT_CODE_WORDS}
    if taken:
        found |= {PRODUCT_FEATURE_WORDS[t] for t in words if t in PRODUCT_FEATURE_WORDS}
    for word in _SPLIT.split(text.lower()):
        if len(word) > 6 and word.startswith("ascend") and word not in PRODUCT_CODE_WORDS:
            found |= {pid for soc, pid in SOC_NAME_PRODUCTS.items() if soc.startswith(word)}
    return found


@lru_cache(maxsize=4096)
def soc_ids(atom: str) -> frozenset[int] | None:
    """The SoC ids for which a condition holds, None when it does not compare a SoC id."""
    if "soc" not in atom.lower():
        return None
    try:
        node = ast.parse(atom.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _ids(node)


def _ids(node: ast.expr) -> frozenset[int] | None:
    if isinstance(node, ast.BoolOp):
        parts = [_ids(v) for v in node.values]
        known = [p for p in parts if p is not None]
        if isinstance(node.op, ast.And):  # an unknown part restricts nothing
            return frozenset.intersection(*known) if known else None
        return frozenset.union(*known) if known and len(known) == len(parts) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _ids(node.operand)
        return None if inner is None else _ALL_IDS - inner
    if not isinstance(node, ast.Compare):
        return None
    out: frozenset[int] | None = None
    left = node.left
    for op, right in zip(node.ops, node.comparators, strict=True):
        ids = _compare(left, op, right)
        if ids is not None:
            out = ids if out is None else out & ids
        left = right
    return out


def _compare(left: ast.expr, op: ast.cmpop, right: ast.expr) -> frozenset[int] | None:
    if _mentions_soc(right) and not _mentions_soc(left):  # 220 <= soc: the mirror image
        flip = {ast.Lt: ast.Gt(), ast.LtE: ast.GtE(), ast.Gt: ast.Lt(), ast.GtE: ast.LtE()}
        left, right, op = right, left, flip.get(type(op), op)
    if not _mentions_soc(left):
        return None
    values = _ints(right)
    if values is None:
        return None
    if isinstance(op, (ast.In, ast.NotIn)):
        hit = frozenset(i for i in _ALL_IDS if i in values)
        return hit if isinstance(op, ast.In) else _ALL_IDS - hit
    test = _COMPARE.get(type(op))
    if test is None or len(values) != 1:
        return None
    (value,) = values
    return frozenset(i for i in _ALL_IDS if test(i, value))


def _mentions_soc(node: ast.expr) -> bool:
    for sub in ast.walk(node):
        name = (
            sub.id
            if isinstance(sub, ast.Name)
            else sub.attr
            if isinstance(sub, ast.Attribute)
            else ""
        )
        if "soc" in name.lower():
            return True
    return False


def _ints(node: ast.expr) -> set[int] | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out: set[int] = set()
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and type(elt.value) is int):
                return None
            out.add(elt.value)
        return out
    return None


def _soc_products(ids: frozenset[int], truth: bool) -> tuple[set[str], set[str]]:
    """(only, never) from the ids a SoC comparison holds for, given its truth."""
    held = ids if truth else _ALL_IDS - ids
    some = {SOC_ID_PRODUCTS[i] for i in held}  # products with a chip the call may run on
    if some == _ALL_PRODUCTS:  # holds everywhere: says nothing
        return set(), set()
    return (some, set()) if truth else (set(), set(_ALL_PRODUCTS - some))


def products(cond: Cond, names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(products the call is limited to, products it is kept off) from its context."""
    only: set[str] = set()
    never: set[str] = set()
    for atom, truth in cond:
        ids = soc_ids(atom)
        if ids is not None:
            o, n = _soc_products(ids, truth)
            only |= o
            never |= n
            continue
        found = _products(atom, truth)
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
