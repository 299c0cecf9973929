"""A fact audit of a seeded sample of operator records (a maintainer step).

Lists every fact of each sampled record with a verdict from the sources that state it
(schema, page and docstring text, wrapper checks, kernel registration, the record's
citations) and prints the ones a person must read: contradicted, cited only, or open.
The method and the last results are in docs/audits/.

    python scripts/audit_facts.py --op-plugin /tmp/op-plugin --wheel /path/to/torch_npu-2.14.0 \\
        --size 35 --seed 32 [--exclude NAME ...] [--out facts.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    import yaml

    from kb.catalog.signature import SchemaError, parse_schema
    from kb.core.paths import records_dir
    from tools.upstream.docstrings import parse_docstring
    from tools.upstream.fact_audit import Sources, audit_record, sample, summary
    from tools.upstream.facts import load_upstream
    from tools.upstream.pages import docs_dir
    from tools.upstream.wrapper_checks import WrapperTree

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--op-plugin", type=Path, required=True, help="op-plugin checkout (docs, config, ops)"
    )
    ap.add_argument("--wheel", type=Path, help="torch_npu wheel or folder with op_docstrings.json")
    ap.add_argument("--records", type=Path, default=records_dir())
    ap.add_argument("--size", type=int, default=35)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument(
        "--exclude", nargs="*", default=[], metavar="NAME", help="leave out of the draw"
    )
    ap.add_argument("--only", nargs="*", metavar="NAME", help="audit exactly these records")
    ap.add_argument("--out", type=Path, help="write every fact with its verdict as JSON")
    ns = ap.parse_args(argv)

    records = {}
    for path in sorted(ns.records.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("kind", "operator") == "operator":
            records[data["name"]] = data
    names = ns.only or sample(list(records), ns.size, ns.seed, set(ns.exclude))
    upstream = load_upstream(ns.op_plugin, ns.wheel)
    pages = docs_dir(ns.op_plugin)
    tree = WrapperTree(ns.op_plugin)
    facts = []
    for name in names:
        rec = records[name]
        up = upstream.facts(name)
        try:
            args = [a.name for a in parse_schema(rec.get("signature") or "").args]
        except SchemaError:
            args = []
        text = (pages / up.page.file).read_text(encoding="utf-8") if up and up.page else ""
        doc = upstream.docstrings.get(name, "")
        doc_params = parse_docstring(doc, args).params if doc and args else None
        src = Sources(up, tree.facts(name, args) if args else None, doc_params, text + "\n" + doc)
        found = audit_record(rec, src)
        facts += found
        counts = summary(found)
        print(
            f"{name}: {counts['facts']} facts, "
            + ", ".join(f"{k} {counts[k]}" for k in ("confirmed", "contradicted", "cited", "open"))
        )
        for f in found:
            if f.verdict != "confirmed":
                print(
                    f"  {f.verdict:12} {f.field} = {f.value[:90]} {('(' + f.source + ')') if f.source else ''}"
                )
    total = summary(facts)
    print(
        f"sample of {total['records']} records (seed {ns.seed}): {total['facts']} facts; "
        + ", ".join(f"{k} {total[k]}" for k in ("confirmed", "contradicted", "cited", "open"))
    )
    if ns.out:
        ns.out.write_text(
            json.dumps([f.as_json() for f in facts], ensure_ascii=False, indent=1), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
