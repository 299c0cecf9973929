"""The plain forms of ``kb show`` and ``kb search``, read without argparse.

An agent calls these two verbs hundreds of times, each in a fresh process: importing
argparse (with gettext and locale) and building its parser was a tenth of a cold call.
:func:`parse` reads the forms people and agents type (``kb show NAME --format json``,
``kb search WORDS --limit 5``) into the namespace argparse would give, and returns
None for anything else — help, an abbreviated or ``=`` option, a repeated option, a
value or word starting with ``-``, a bad choice or number, a missing or extra word —
so argparse reads those and words every error and help text as before.
``tests/test_cli_fast.py`` holds both readers to the same namespaces.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from kb.vocab.taxonomy import KINDS

#: An option that takes no value (``store_true``).
FLAG = "flag"
#: An option whose value is any text not starting with ``-``.
TEXT = "text"
#: An option whose value is an integer, read as argparse's ``type=int`` reads it.
INT = "int"

#: Per verb: the positional's name and whether it takes several words, each option's
#: (name in the namespace, FLAG / TEXT / INT / the choices, default), and the options
#: that exclude each other.
VERBS: dict[str, tuple[str, bool, dict[str, tuple[str, Any, Any]], frozenset[str]]] = {
    "show": (
        "name",
        False,
        {
            "--format": ("format", ("text", "json"), "text"),
            "--lang": ("lang", ("en", "zh"), "en"),
            "--brief": ("brief", FLAG, False),
            "--section": ("section", TEXT, None),
        },
        frozenset({"--brief", "--section"}),
    ),
    "search": (
        "query",
        True,
        {
            "--limit": ("limit", INT, 10),
            "--kind": ("kind", KINDS, None),
            "--torch-npu": ("torch_npu", TEXT, None),
            "--format": ("format", ("text", "json"), "text"),
        },
        frozenset(),
    ),
}


def argparse_kwargs(verb: str, option: str) -> dict[str, Any]:
    """What ``add_argument`` takes for ``option`` of ``verb``: its kind, default and
    choices come from :data:`VERBS`, so the two readers share one definition."""
    dest, kind, default = VERBS[verb][2][option]
    if kind == FLAG:
        return {"dest": dest, "action": "store_true"}
    kwargs: dict[str, Any] = {"dest": dest, "default": default}
    if kind == INT:
        kwargs["type"] = int
    elif kind != TEXT:
        kwargs["choices"] = kind
    return kwargs


def parse(argv: list[str]) -> Any:
    """The namespace of a plain ``show`` or ``search`` command line, else None."""
    if not argv or argv[0] not in VERBS:
        return None
    verb = argv[0]
    positional, several, options, exclusive = VERBS[verb]
    values: dict[str, Any] = {}
    words: list[str] = []
    words_end: int | None = None  # where the run of words ended (one run only)
    i = 1
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            if words_end is not None and words_end != i:
                return None  # words on both sides of an option: argparse refuses
            words.append(arg)
            i += 1
            words_end = i
            continue
        spec = options.get(arg)
        if spec is None or spec[0] in values:
            return None  # help, "--", an abbreviation, "--x=y", a repeat: argparse
        dest, kind, _default = spec
        if kind == FLAG:
            values[dest] = True
            i += 1
            continue
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            return None
        value: Any = argv[i + 1]
        if kind == INT:
            try:
                value = int(value)
            except ValueError:
                return None
        elif kind != TEXT and value not in kind:
            return None
        values[dest] = value
        i += 2
    if not words or (len(words) > 1 and not several):
        return None
    if sum(1 for flag in exclusive if options[flag][0] in values) > 1:
        return None
    ns: dict[str, Any] = {"verb": verb, positional: words if several else words[0]}
    for dest, _kind, default in options.values():
        ns[dest] = values.get(dest, default)
    ns["func"] = importlib.import_module(f"kb.cli.{verb}").run
    return SimpleNamespace(**ns)
