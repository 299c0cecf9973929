"""The argparse parser of the ``kb`` verbs (each verb module adds its own)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from kb.cli import EXIT_STATUS, VERBS
from kb.text.wrapping import wrap_words


def help_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` reads it (``COLUMNS``
    when set, else the terminal of stdout, else 80), without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class Parser(argparse.ArgumentParser):
    """argparse's parser with the help width given: left to itself, each formatter it
    makes (one per option added, to check the metavar) imports shutil for the terminal
    size, with shutil's archive modules (a millisecond of every cold verb)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        make = self.formatter_class
        if isinstance(make, type) and issubclass(make, argparse.HelpFormatter):
            return make(prog=self.prog, width=help_columns() - 2)
        return make(prog=self.prog)  # a factory of the caller's (the site's fixed width)


def build(verbs: tuple[str, ...] = VERBS) -> argparse.ArgumentParser:
    parser = Parser(
        prog="kb",
        description="Knowledge base of torch_npu fused operators: search, show, check.",
        epilog="Run 'kb VERB --help' for the options of one verb.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in verbs:
        try:
            module = importlib.import_module(f"kb.cli.{verb}")
        except ModuleNotFoundError as exc:
            if exc.name == f"kb.cli.{verb}":
                continue  # verb not built in this version
            raise
        module.add_parser(sub)
    for verb_parser in sub.choices.values():
        # the shared contract after a verb's own epilog, keeping its layout (examples)
        raw = verb_parser.formatter_class is not argparse.HelpFormatter
        status = "\n".join(wrap_words(EXIT_STATUS, 78)) if raw else EXIT_STATUS
        if verb_parser.epilog and "Exit status:" in verb_parser.epilog:
            continue  # the verb states its own (scan, mcp): one paragraph, not two
        verb_parser.epilog = ("\n\n" if raw else " ").join(
            x for x in (verb_parser.epilog, status) if x
        )
    return parser
