"""``kb.core.yamlpos`` builds a document without anchors by a shorter path (no alias
accounting, plain-text keys taken as they are): it must give the same data, the same
``#`` spans and the same refusals as the general path, which an unused anchor forces."""

from __future__ import annotations

import pytest

from kb.core.yamlpos import YamlError, load

DOCUMENTS = [
    "version: 1\ncandidates:\n  - {module: 'a # b', notes: plain}\n  - [1, 2.5, true, null, ~]\n",
    "'#key': value\nother: 'x#y'\nlist: [a, 'b#']\n",
    "1: one\n1.0: same number, kept under its text\ntrue: yes\n'true': text\n",
    "date: 2024-13-45\nwhen: 2024-01-01\nnumber: 0x1F\n",
    "a: 1\nb: {c: 1}\na: 2\n",  # duplicate key
    "? [x]\n: y\n",  # a non-scalar key
    "<<: {a: 1}\n",  # merge key
    "n: " + "1" * 80 + "\n",  # an over-long number
    "deep: " + "[" * 70 + "]" * 70 + "\n",  # nesting over the limit
]


def _outcome(text: str) -> object:
    try:
        located = load(text)
    except YamlError as exc:
        return ("refused", exc.message, exc.line, exc.column)
    return located.data, located.hash_spans


@pytest.mark.parametrize("text", DOCUMENTS)
def test_without_anchors_loads_as_with_one(text: str) -> None:
    anchored = text + "unused: &u 1\n"  # an anchor sends the document down the general path
    plain, general = _outcome(text), _outcome(anchored)
    if isinstance(plain, tuple) and plain[0] == "refused":
        assert plain == general
        return
    data, spans = plain  # type: ignore[misc]
    data_a, spans_a = general  # type: ignore[misc]
    assert {k: v for k, v in data_a.items() if k != "unused"} == data
    assert [type(v) for v in data.values()] == [type(data_a[k]) for k in data]
    assert spans == spans_a
