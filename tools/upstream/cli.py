"""``python scripts/import_upstream.py {drift,import,skeleton,known-ops} …``: the maintainer CLI.

Exit codes: 0 nothing to report (no drift / import done), 1 drift found or some
record could not be refreshed, 2 usage errors or unreadable sources.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kb.core.paths import records_dir
from tools.upstream import drift as drift_mod
from tools.upstream.drafts import build_draft, draft_text, guess_category, needs_words
from tools.upstream.facts import OperatorFacts, Upstream, load_upstream
from tools.upstream.records import load_records
from tools.upstream.refresh import PatchError, refresh_text, refreshed
from tools.upstream.wheel import WheelError


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="import_upstream.py",
        description="Import facts from op-plugin and a torch_npu wheel; report drift.",
    )
    sub = ap.add_subparsers(dest="command", required=True)

    def sources(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--op-plugin",
            type=Path,
            required=True,
            help="op-plugin checkout (docs + config), read-only",
        )
        p.add_argument(
            "--wheel", type=Path, help="torch_npu .whl, installed package dir, or extracted folder"
        )
        p.add_argument(
            "--records",
            type=Path,
            action="append",
            help="record tree(s) to compare or refresh (default: kb/records)",
        )
        p.add_argument("--format", choices=("text", "json"), default="text")

    d = sub.add_parser("drift", help="report drift between records and upstream")
    sources(d)
    i = sub.add_parser("import", help="write drafts for new operators, refresh facts of others")
    sources(i)
    i.add_argument("--commit", help="upstream commit to cite in upstream.commit")
    i.add_argument("--only", nargs="+", metavar="NAME", help="limit to these operators")
    i.add_argument("--dry-run", action="store_true", help="print what would change, write nothing")
    i.add_argument(
        "--drafts",
        type=Path,
        help="root for new drafts (operators/<category>/<name>.yaml); "
        "default: the first --records tree",
    )
    i.add_argument("--no-refresh", action="store_true", help="do not touch existing records")
    i.add_argument(
        "--no-undocumented",
        action="store_true",
        help="draft only operators that have an official page",
    )
    s = sub.add_parser("skeleton", help="print the fact skeleton of one operator")
    s.add_argument("name")
    s.add_argument("--op-plugin", type=Path, required=True)
    s.add_argument("--wheel", type=Path)
    s.add_argument("--commit")
    k = sub.add_parser(
        "known-ops", help="write kb/data/known_ops.json: operators no harvested wheel shows"
    )
    k.add_argument(
        "--op-plugin", type=Path, required=True, help="op-plugin checkout (config), read-only"
    )
    k.add_argument(
        "--wheel", type=Path, help="torch_npu .whl, installed package dir, or extracted folder"
    )
    k.add_argument("--release", help="the wheel's torch_npu release (default: read from its name)")
    k.add_argument("--commit", required=True, help="the op-plugin commit to cite")
    k.add_argument("--out", type=Path, help="output file (default: kb/data/known_ops.json)")
    k.add_argument("--dry-run", action="store_true", help="print the summary, write nothing")
    return ap


def _load(ns: argparse.Namespace) -> Upstream:
    try:
        return load_upstream(ns.op_plugin, ns.wheel)
    except (FileNotFoundError, WheelError, OSError) as exc:
        raise UsageError(str(exc)) from None


def _roots(ns: argparse.Namespace) -> list[Path]:
    roots: list[Path] = ns.records or [records_dir()]
    for root in roots:
        if not root.is_dir():
            raise UsageError(f"{root}: records directory not found")
    return roots


def cmd_drift(ns: argparse.Namespace) -> int:
    upstream = _load(ns)
    records = load_records(_roots(ns))
    report = drift_mod.drift(upstream, records)
    out = drift_mod.to_json(report) if ns.format == "json" else drift_mod.to_text(report)
    sys.stdout.write(out)
    return 1 if report.items else 0


def _targets(upstream: Upstream, ns: argparse.Namespace) -> dict[str, OperatorFacts]:
    ops = upstream.documented()
    if not ns.no_undocumented:
        ops.update(upstream.undocumented()[0])
    if ns.only:
        unknown = [n for n in ns.only if n not in ops and upstream.facts(n) is None]
        if unknown:
            raise UsageError(f"upstream knows no operator named {', '.join(unknown)}")
        ops = {n: ops.get(n) or upstream.facts(n) for n in ns.only}  # type: ignore[misc]
    return ops


def cmd_import(ns: argparse.Namespace) -> int:
    upstream = _load(ns)
    roots = _roots(ns)
    drafts_root: Path = ns.drafts or roots[0]
    records = load_records([*roots, drafts_root] if drafts_root not in roots else roots)
    targets = _targets(upstream, ns)
    known = set(targets) | set(records.records)
    summary: dict[str, Any] = {
        "drafts": [],
        "refreshed": [],
        "unchanged": 0,
        "failed": [],
        "needs_words": {},
        "warnings": list(upstream.warnings),
    }
    for name in sorted(targets):
        facts = targets[name]
        record = records.find(name)
        if record is None:
            data = build_draft(facts, ns.commit, known)
            path = drafts_root / "operators" / guess_category(name) / f"{name}.yaml"
            summary["drafts"].append(
                {
                    "name": name,
                    "file": str(path),
                    "status": facts.status,
                    "category": data["category"],
                }
            )
            summary["needs_words"][name] = needs_words(data)
            if not ns.dry_run:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(draft_text(data), encoding="utf-8")
            continue
        if ns.no_refresh:
            continue
        result = refreshed(record.data, facts, ns.commit, known)
        summary["warnings"] += [f"{name}: {w}" for w in result.warnings]
        if not result.changes:
            summary["unchanged"] += 1
            continue
        old = record.path.read_text(encoding="utf-8")
        try:
            new = refresh_text(old, result)
        except PatchError as exc:
            summary["failed"].append({"name": name, "file": str(record.path), "error": str(exc)})
            continue
        summary["refreshed"].append(
            {"name": name, "file": str(record.path), "changes": result.changes}
        )
        if ns.dry_run:
            diff = difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), str(record.path), str(record.path)
            )
            if ns.format == "text":
                sys.stdout.writelines(diff)
        else:
            record.path.write_text(new, encoding="utf-8")
    _print_import(summary, ns)
    return 1 if summary["failed"] else 0


def _print_import(summary: dict[str, Any], ns: argparse.Namespace) -> None:
    if ns.format == "json":
        sys.stdout.write(json.dumps(summary, ensure_ascii=False, indent=2) + "\n")
        return
    verb = "would write" if ns.dry_run else "wrote"
    drafts = summary["drafts"]
    print(
        f"{verb} {len(drafts)} draft(s); refreshed {len(summary['refreshed'])}, "
        f"unchanged {summary['unchanged']}, failed {len(summary['failed'])}"
    )
    for d in drafts:
        print(f"  draft {d['name']} ({d['status']}, {d['category']}) → {d['file']}")
    for r in summary["refreshed"]:
        print(f"  refresh {r['name']}: {', '.join(r['changes'])}")
    for f in summary["failed"]:
        print(f"  FAILED {f['name']}: {f['error']}")
    if drafts:
        print(f"{len(drafts)} draft(s) need words (fields starting with 'TODO:')")
    for w in summary["warnings"]:
        print(f"warning: {w}")


def cmd_skeleton(ns: argparse.Namespace) -> int:
    upstream = _load(ns)
    facts = upstream.facts(ns.name)
    if facts is None:
        print(f"upstream knows no operator named {ns.name}", file=sys.stderr)
        return 1
    data = build_draft(facts, ns.commit, set())
    keep = ("signature", "parameters", "returns", "products", "versions", "upstream")
    sys.stdout.write(draft_text({k: data[k] for k in keep if k in data}))
    return 0


def cmd_known_ops(ns: argparse.Namespace) -> int:
    from kb.catalog.releases import load as load_releases
    from tools.upstream import knownops

    try:
        report = knownops.build(ns.op_plugin, ns.wheel, ns.commit, load_releases(), ns.release)
    except (FileNotFoundError, WheelError, OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    ops = report.data["operators"]
    by_source: dict[str, int] = {}
    for entry in ops.values():
        by_source[entry["source"]] = by_source.get(entry["source"], 0) + 1
    shown = ", ".join(f"{n} from {s}" for s, n in sorted(by_source.items()))
    print(
        f"{len(ops)} operator(s) beyond releases.json ({shown}); "
        f"{report.covered} wheel schema(s) already in releases.json"
    )
    for w in report.warnings:
        print(f"warning: {w}")
    if not ns.dry_run:
        knownops.write(report, ns.out or knownops.KNOWN_FILE)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        if ns.command == "drift":
            return cmd_drift(ns)
        if ns.command == "import":
            return cmd_import(ns)
        if ns.command == "known-ops":
            return cmd_known_ops(ns)
        return cmd_skeleton(ns)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
