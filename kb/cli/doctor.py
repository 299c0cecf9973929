"""``kb doctor``: the installed torch_npu against what the knowledge base documents."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb.audit.doctor import Report


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "doctor",
        help="compare the installed torch_npu with the knowledge base",
        description="Find the torch_npu of this Python environment without importing it "
        "(no NPU, CANN or torch needed), read the operator schemas it ships and report "
        "its release, knowledge-base operators whose documented signature differs from "
        "the installed one, knowledge-base operators it lacks, and installed operators "
        "the knowledge base does not describe. Exit 0 when every knowledge-base operator "
        "is installed as documented, 1 when something differs or is missing (installed "
        "operators the knowledge base lacks are listed but do not count) and when no "
        "torch_npu is installed (a finding about the environment, like a difference), 2 "
        "for bad usage: a --path that does not exist, or schemas that cannot be read.",
    )
    p.add_argument(
        "--path",
        type=Path,
        metavar="DIR",
        help="a site-packages directory or a torch_npu package directory "
        "(default: the first torch_npu on this interpreter's sys.path)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run, path_args=("path",))


def run(args: argparse.Namespace) -> int:
    from kb.api.doctor import absent, compare, find
    from kb.audit.doctor import NotInstalled
    from kb.cli._common import catalog_or_exit

    try:
        install = find(args.path)
    except NotInstalled as exc:
        # Nothing to compare is itself the finding: exit 1, like a difference.
        if args.format == "json":
            print(json.dumps(absent(exc), indent=2))
        else:
            print(f"kb doctor: {exc}", file=sys.stderr)
        return 1
    report = compare(catalog_or_exit(), install)
    if args.format == "json":
        print(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(report_text(report))
    return 0 if report.consistent else 1


def report_text(report: Report) -> str:
    from kb.text.render import WIDTH, wrap

    inst = report.install
    rel = report.release
    if rel is None:
        where = "not a harvested release: no release history to compare with"
    elif rel.exact:
        where = "a harvested release"
    else:
        where = f"compared as the harvested release {rel.release}"
    out = [
        f"torch_npu {inst.version or '(version unknown)'} ({where})",
        f"  package: {inst.package_dir}",
        f"  schemas: {inst.schema_file.name}, {len(report.installed)} operators",
        f"  knowledge base: {report.kb_operators} operators; {len(report.matching)} as "
        f"documented, {len(report.differs)} differ, {len(report.missing)} missing",
    ]
    if report.differs:
        out += [
            "",
            f"Described differently ({len(report.differs)}): what the documented "
            "signature has that this install does not",
        ]
        if rel and all(d.release_schema for d in report.differs):
            out += wrap(
                f"Each installed schema is the one the release history gives for "
                f"{rel.release}: the records document a later signature.",
                "  ",
            )
        for d in report.differs:
            text = f"{d.operator}: " + ("; ".join(d.changes) or "schema text differs")
            if d.release_schema is False and rel:
                text += f"  [unexpected: {rel.release} shipped another schema; a custom build?]"
            out += _hanging(text)
    if report.missing:
        out += ["", f"Missing from this install ({len(report.missing)})"]
        for m in report.missing:
            if m.in_release is False and m.first:
                why = f"first in {m.first}; not in {rel.release if rel else 'this release'}"
            elif m.in_release:
                why = (
                    f"the release history says {rel.release if rel else '?'} ships it: "
                    "check the install"
                )
            else:
                why = "no release facts for it"
            out += _hanging(f"{m.operator}: {why}")
    if report.not_in_kb:
        out += ["", f"Installed, not in the knowledge base ({len(report.not_in_kb)})"]
        out += wrap(", ".join(report.not_in_kb), "  ", WIDTH)
    out += [
        "",
        "consistent with the knowledge base" if report.consistent else "differences found (exit 1)",
    ]
    return "\n".join(out) + "\n"


def _hanging(text: str) -> list[str]:
    import textwrap

    from kb.text.render import WIDTH

    return textwrap.wrap(
        text, width=WIDTH, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False
    )
