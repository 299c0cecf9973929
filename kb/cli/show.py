"""``kb show NAME``: one record, whole, as a brief card, or one section; text or JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from kb.cli.fast import argparse_kwargs

if TYPE_CHECKING:
    import argparse

#: A record longer than this ends with a hint towards --brief and --section.
LONG_OUTPUT_LINES = 80
HINT_SECTIONS = ("parameters", "constraints", "examples", "versions", "stages", "nodes", "rules")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    import argparse

    p = sub.add_parser(
        "show",
        help="show one operator, chain, tree or playbook",
        description="Print one record. NAME may be the bare name (npu_mla_prolog_v3), a call\n"
        "path (torch_npu.npu_mla_prolog_v3, torch.ops.npu.npu_mla_prolog_v3) or an alias;\n"
        "case does not matter. Unknown names exit 1 with suggestions; a torch_npu\n"
        "operator without a record prints its upstream schema and also exits 1. Text is\n"
        "English; --lang zh prints the Chinese summary and description where the record\n"
        "has them.\n"
        "Long records end with a hint: --brief for a card, --section NAME for one part.",
        epilog="examples:\n"
        "  kb show npu_mla_prolog_v3 --brief            call, products, releases, schemes\n"
        "  kb show npu_mla_prolog_v3 --section parameters\n"
        "  kb show npu_rms_norm --format json           the record, for tools",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", help="record name or call path")
    p.add_argument(
        "--format",
        **argparse_kwargs("show", "--format"),
        help="text for people (default), json for tools",
    )
    p.add_argument(
        "--lang",
        **argparse_kwargs("show", "--lang"),
        help="language of summaries and descriptions (default: en)",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--brief",
        **argparse_kwargs("show", "--brief"),
        help="a summary card: call, products, torch_npu releases, schemes",
    )
    what.add_argument(
        "--section",
        **argparse_kwargs("show", "--section"),
        metavar="NAME",
        help="only this part, by record field: parameters, constraints, "
        "versions, examples, stages, nodes ... (an unknown NAME lists them)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.api.errors import NotFound
    from kb.api.show import known_without_record, section_of, view
    from kb.cli._common import catalog_or_exit, did_you_mean

    catalog = catalog_or_exit()
    rec = catalog.get(args.name)
    if rec is None:
        shown = (
            repr(args.name)
            if len(args.name) <= 80
            else f"{args.name[:60]!r}… ({len(args.name)} characters)"
        )
        known = known_without_record(args.name) if len(args.name) <= 200 else None
        if known is not None:
            _print_known(known, args.format)
            print(
                f"kb show: no record named {shown}; torch_npu defines it (schema above)",
                file=sys.stderr,
            )
            return 1
        raise NotFound(f"no record named {shown}{did_you_mean(catalog, args.name)}")
    key = section_of(rec, args.section) if args.section is not None else None
    if args.format == "json":
        doc = view(rec, section=key, brief=args.brief, lang=args.lang)
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    from kb.api.recordview import brief
    from kb.text.card import brief_text
    from kb.text.render import record_text, section_text

    if args.brief:
        sys.stdout.write(brief_text(brief(rec, args.lang)))
    elif key:
        sys.stdout.write(section_text(rec, key, args.lang))
    else:
        text = record_text(rec, args.lang)
        sys.stdout.write(text)
        lines = text.count("\n")
        if lines > LONG_OUTPUT_LINES:  # on stderr: a pipe still gets the record alone
            parts = [k for k in HINT_SECTIONS if rec.get(k)]
            sys.stdout.flush()
            from kb.text.wrapping import wrap_words

            hint = (
                f"kb show: {lines} lines; --brief prints a summary card, --section NAME "
                f"one part ({', '.join(parts)} …)"
            )
            print("\n".join(wrap_words(hint, 80, rest="  ")), file=sys.stderr)
    return 0


def _print_known(known: dict[str, object], fmt: str) -> None:
    """The schema of an operator torch_npu defines that no record describes."""
    if fmt == "json":
        print(json.dumps(known, ensure_ascii=False, indent=2))
        return
    print(f"{known['name']}  [known from {known['known_from']}; no record]")
    schemas = known["schemas"] or ["(no schema string is published)"]
    for schema in schemas:  # type: ignore[attr-defined]
        print(f"  schema: {schema}")
    print(f"  namespace: torch.ops.{known['namespace']}; kind: {known['role']} operator")
