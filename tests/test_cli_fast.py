"""kb.cli.fast reads plain ``kb show`` and ``kb search`` lines as argparse reads them.

A command line the fast reader takes must give argparse's namespace, item for item and
in argparse's order; anything it does not take goes to argparse, which then words the
help or the error.  Both are checked on generated command lines, and the reader's table
against the verbs' own parsers, so an option added to a verb cannot be missed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random

import pytest

from kb.cli import build_parser, fast


def _verb_parser(verb: str) -> argparse.ArgumentParser:
    parser = build_parser((verb,))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[verb]  # type: ignore[no-any-return]


def _argparse(argv: list[str]) -> dict[str, object] | None:
    """argparse's namespace as an ordered list of items, None when it refuses the line."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return dict(vars(build_parser((argv[0],)).parse_args(argv)))
        except SystemExit:
            return None


@pytest.mark.parametrize("verb", sorted(fast.VERBS))
def test_the_table_is_the_verbs_parser(verb: str) -> None:
    positional, several, options, exclusive = fast.VERBS[verb]
    actions = [a for a in _verb_parser(verb)._actions if not isinstance(a, argparse._HelpAction)]
    (pos,) = [a for a in actions if not a.option_strings]
    assert (pos.dest, pos.nargs == "+") == (positional, several)
    seen = {}
    for a in actions:
        if not a.option_strings:
            continue
        (flag,) = [s for s in a.option_strings if s.startswith("--")]
        if isinstance(a, argparse._StoreTrueAction):
            kind = fast.FLAG
        elif a.type is int:
            kind = fast.INT
        elif a.choices:
            kind = tuple(a.choices)
        else:
            assert a.type is None and a.nargs is None, flag
            kind = fast.TEXT
        seen[flag] = (a.dest, kind, a.default)
    assert seen == options
    groups = _verb_parser(verb)._mutually_exclusive_groups
    assert {s for g in groups for a in g._group_actions for s in a.option_strings} == exclusive


WORDS = ["npu_rms_norm", "paged", "attention", "权重预取", "x y", "", "json", "5", "chain"]
TRICKY = ["-h", "--help", "--", "-1", "--form", "--format=json", "--limit=3", "--brie", "-x y"]


def _lines(verb: str, rnd: random.Random) -> list[str]:
    _pos, _several, options, _excl = fast.VERBS[verb]
    values = {
        fast.FLAG: [],
        fast.TEXT: ["parameters", "2.5.1", "-x", "中文"],
        fast.INT: ["3", "0", "-2", "x", " 7", "1_0"],
    }
    argv = [verb]
    for _ in range(rnd.randint(0, 6)):
        pick = rnd.random()
        if pick < 0.45:
            argv.append(rnd.choice(WORDS))
        elif pick < 0.9:
            flag = rnd.choice(sorted(options))
            kind = options[flag][1]
            argv.append(flag)
            if kind != fast.FLAG:
                pool = values.get(kind) if isinstance(kind, str) else [*kind, "bad", "-q"]
                argv += [rnd.choice(pool)] if rnd.random() < 0.95 else []
        else:
            argv.append(rnd.choice(TRICKY))
    return argv


@pytest.mark.parametrize("verb", sorted(fast.VERBS))
def test_generated_lines_read_as_argparse_reads_them(verb: str) -> None:
    rnd = random.Random(f"fast-{verb}")
    taken = 0
    for _ in range(3000):
        argv = _lines(verb, rnd)
        got = fast.parse(argv)
        if got is None:
            continue
        taken += 1
        expected = _argparse(argv)
        assert expected is not None, argv
        assert list(vars(got).items()) == list(expected.items()), argv
    assert taken > 300  # the plain forms are common among the lines: the reader is used


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "npu_rms_norm"],
        ["show", "torch_npu.npu_mla_prolog_v3", "--format", "json", "--lang", "zh"],
        ["show", "--section", "parameters", "npu_rms_norm"],
        ["search", "paged", "attention", "decode"],
        ["search", "权重预取", "--limit", "3", "--kind", "operator", "--torch-npu", "2.5.1"],
    ],
)
def test_the_everyday_lines_skip_argparse(argv: list[str]) -> None:
    got = fast.parse(argv)
    assert got is not None and list(vars(got).items()) == list(_argparse(argv).items())  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "argv",
    [
        ["show"],
        ["show", "a", "b"],
        ["show", "a", "--brief", "--section", "x"],
        ["show", "a", "--format", "yaml"],
        ["show", "a", "--format=json"],
        ["show", "a", "--form", "json"],
        ["show", "a", "--brief", "--brief"],
        ["show", "-h"],
        ["search", "a", "--limit", "3", "b"],
        ["search", "a", "--limit", "x"],
        ["search", "--", "-a"],
        ["check", "x"],
        [],
    ],
)
def test_everything_else_goes_to_argparse(argv: list[str]) -> None:
    assert fast.parse(argv) is None


def test_a_formatter_factory_is_called_as_argparse_calls_it() -> None:
    """The parser gives its help width to argparse's formatter classes only: a factory
    of the caller's (the site formats the CLI reference at a fixed width) gets ``prog``."""
    parser = build_parser(("show",))
    cls = parser.formatter_class

    def fixed(prog: str) -> argparse.HelpFormatter:
        return cls(prog, width=50)  # type: ignore[call-arg]

    parser.formatter_class = fixed  # type: ignore[assignment]
    text = parser.format_help()
    assert text.startswith("usage: kb") and max(len(line) for line in text.splitlines()) <= 50
