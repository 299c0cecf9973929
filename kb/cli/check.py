"""``kb check FILE...``: lint candidate lists against the records.

Exit codes (kb.api.errors): 0 no errors (warnings and info allowed), 1 at least
one error finding, 2 usage error, an unreadable input, or records that do not validate.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "check",
        help="lint candidate lists (fusion candidates, prefetch points)",
        description="Check candidate lists (YAML or JSON, '-' for standard input) against the "
        "operator records and the prefetch playbook. Findings print as "
        "file:line:col: CODE severity: message. A '# kb: ignore[CODE,...]' comment on a "
        "candidate's first line silences those codes for that candidate; on any other line, "
        "for that line. 'kb rules' lists the codes.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="candidate list file, or - for stdin")
    p.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="text for people (default), json for tools, github for CI annotations",
    )
    p.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODE",
        help="run only these rules (codes, prefixes such as KB4, or names; repeatable, "
        "comma-separated)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE",
        help="skip these rules (codes, prefixes or names; repeatable, comma-separated)",
    )
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour text output: auto = only on a terminal without NO_COLOR",
    )
    p.set_defaults(func=run, path_args=("files",))


def _use_color(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def run(args: argparse.Namespace) -> int:
    from kb.api.check import checker as make_checker
    from kb.api.errors import UsageError
    from kb.catalog.compiled import StoreInvalid
    from kb.check.source import InputError, read_source
    from kb.text.escape import printable
    from kb.text.findings import render

    if args.files.count("-") > 1:
        raise UsageError("'-' (standard input) can be given once")
    # A short-lived process holding a large node graph: the cyclic collector would rescan
    # it again and again while the rules run, for nothing (input size is bounded).
    import gc

    gc.disable()
    sources, unreadable = [], []
    for path in args.files:
        try:
            sources.append(read_source(path))
        except InputError as exc:
            unreadable.append(exc)
            print(printable(f"kb check: {exc.file}: {exc.message}"), file=sys.stderr)
    try:
        checker = make_checker(select=args.select, ignore=args.ignore)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except StoreInvalid as exc:
        for problem in exc.problems[:10]:
            print(printable(str(problem)), file=sys.stderr)
        print(
            f"kb check: the records do not validate ({len(exc.problems)} problem(s)); run "
            "'kb validate'",
            file=sys.stderr,
        )
        return 2
    report = checker.check_sources(sources)
    if sources or args.format == "json":
        sys.stdout.write(render(report, args.format, color=_use_color(args.color)))
        sys.stdout.flush()
    if unreadable:
        return 2
    return 1 if report.count("error") else 0
