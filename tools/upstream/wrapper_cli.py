"""``python scripts/audit_wrappers.py``: records against op-plugin's wrapper checks.

Prints every disagreement :func:`tools.upstream.wrapper_audit.audit_record` finds between
the operator records and the wrappers of an op-plugin checkout (and the wheel's
docstrings, when given); ``--write`` refreshes each record's ``wrapper_checks`` blocks
(everything else in the file stays as it is).  Exit codes: 0 no unnoted high-weight
disagreement, 1 some, 2 usage errors or unreadable sources.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kb.catalog.signature import SchemaError, parse_schema
from kb.core.paths import records_dir
from tools.upstream.docstrings import parse_docstring
from tools.upstream.facts import Upstream, load_upstream
from tools.upstream.wheel import WheelError
from tools.upstream.wrapper_audit import Disagreement, audit_record, check_blocks
from tools.upstream.wrapper_checks import WrapperTree

SEVERITIES = ("high", "medium", "info")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="audit_wrappers.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--op-plugin", type=Path, required=True, help="op-plugin checkout, read-only")
    ap.add_argument("--wheel", type=Path, help="torch_npu wheel or folder with op_docstrings.json")
    ap.add_argument("--records", type=Path, help="record tree (default: kb/records)")
    ap.add_argument("--repo", default="Ascend/op-plugin", help="owner/name cited in the blocks")
    ap.add_argument(
        "--commit", help="the checkout's commit (cited in the blocks; --write needs it)"
    )
    ap.add_argument("--only", nargs="+", metavar="NAME", help="limit to these operators")
    ap.add_argument("--severity", choices=SEVERITIES, default="medium", help="lowest weight shown")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--write", action="store_true", help="refresh the records' wrapper_checks")
    return ap


def _schema_args(data: dict[str, Any]) -> list[str] | None:
    try:
        return [a.name for a in parse_schema(str(data.get("signature") or "")).args]
    except SchemaError:
        return None


def _stated(
    upstream: Upstream | None, name: str, data: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(page values, docstring values) of each parameter with a closed value set."""
    if upstream is None:
        return {}, {}
    types = {p["name"]: p["type"] for p in data.get("parameters") or []}
    facts = upstream.facts(name)
    page: dict[str, Any] = {}
    if facts is not None and facts.page is not None:
        for pname, pf in facts.params.items():
            values = pf.allowed(types.get(pname, ""))
            if values:
                page[pname] = values
    doc: dict[str, Any] = {}
    text = upstream.docstrings.get(name)
    if text:
        for pname, pf in parse_docstring(text, list(types)).params.items():
            values = pf.allowed(types.get(pname, ""))
            if values:
                doc[pname] = values
    return page, doc


def run(ns: argparse.Namespace) -> int:
    root: Path = ns.records or records_dir()
    if not (ns.op_plugin / "op_plugin" / "ops").is_dir():
        raise SystemExit(f"error: {ns.op_plugin}: no op_plugin/ops folder (an op-plugin checkout?)")
    if ns.write and not ns.commit:
        raise SystemExit("error: --write needs --commit (the blocks cite it)")
    upstream = None
    if ns.wheel or ns.write:  # pages and docstrings state the values the blocks compare with
        try:
            upstream = load_upstream(ns.op_plugin, ns.wheel)
        except (OSError, WheelError) as exc:
            if ns.wheel:
                raise SystemExit(f"error: {exc}") from None
            print(f"warning: no pages read ({exc}); blocks carry no page values", file=sys.stderr)
    tree = WrapperTree(ns.op_plugin)
    found: list[Disagreement] = []
    changed = 0
    for path in sorted(root.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        if not isinstance(data, dict) or data.get("kind", "operator") != "operator":
            continue
        name = str(data.get("name"))
        args = _schema_args(data)
        if (ns.only and name not in ns.only) or not args:
            continue
        facts = tree.facts(name, args)
        if facts is None:
            continue
        page, doc = _stated(upstream, name, data)
        found += audit_record(data, facts, doc)
        if ns.write:
            changed += _write(path, text, data, check_blocks(data, facts, ns.repo, ns.commit, page))
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    shown = [d for d in found if rank[d.severity] <= rank[ns.severity]]
    if ns.format == "json":
        print(
            json.dumps(
                {"disagreements": [d.as_json() for d in shown]}, ensure_ascii=False, indent=2
            )
        )
    else:
        for d in shown:
            print(d.line())
        counts = Counter((d.severity, d.noted) for d in found)
        print(
            f"{len(found)} disagreement(s): "
            + ", ".join(
                f"{s} {counts[(s, False)]}"
                + (f" (+{counts[(s, True)]} noted)" if counts[(s, True)] else "")
                for s in SEVERITIES
            )
        )
        if ns.write:
            print(f"{changed} record(s) with new wrapper_checks")
    return 1 if any(d.severity == "high" and not d.noted for d in found) else 0


def _write(path: Path, text: str, data: dict[str, Any], blocks: list[dict[str, Any]]) -> int:
    from tools.upstream.refresh import LIST_KEYS, ORDERS
    from tools.upstream.yamltext import update_text

    new = dict(data)
    if blocks:
        new["wrapper_checks"] = blocks
    else:
        new.pop("wrapper_checks", None)
    if new == data:
        return 0
    path.write_text(update_text(text, new, ORDERS, LIST_KEYS), encoding="utf-8")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        return run(ns)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
