"""The CLI reference, rendered from the ``kb`` parser itself so it cannot drift."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from site_plugins import md

#: Replaced by the generated reference wherever it appears in a hand-written page.
MARKER = "<!-- kb:cli-reference -->"
WIDTH = 88


def _fixed_width(parser: argparse.ArgumentParser) -> None:
    """Format help at a fixed width, whatever terminal the build runs in."""
    cls = parser.formatter_class

    def make(prog: str) -> argparse.HelpFormatter:
        return cls(prog, width=WIDTH)  # type: ignore[call-arg]

    parser.formatter_class = make


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_reference(build_parser: Callable[[], argparse.ArgumentParser] | None = None) -> str:
    """``kb --help`` and ``kb VERB --help`` for every verb, as level-3 Markdown sections."""
    if build_parser is None:
        from kb.cli import build_parser as kb_parser

        build_parser = kb_parser
    parts: list[str] = []

    def add(name: str, parser: argparse.ArgumentParser) -> None:
        _fixed_width(parser)
        parts.extend([f"### {md.inline(name)}", md.code_block(parser.format_help(), "text")])
        for verb, sub in sorted(_verbs(parser).items()):
            add(f"{name} {verb}", sub)

    add("kb", build_parser())
    return "\n\n".join(parts)
