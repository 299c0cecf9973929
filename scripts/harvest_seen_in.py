"""Record where shipping code calls each operator: the ``seen_in`` field of the records.

A maintainer step (never run by CI): scan a checkout of a public repository with the
``kb scan`` reader and write, for every operator record it calls, one ``seen_in`` entry
for that repository (repo, commit, and per call site: path, line, the products and phase
the code names, the literal arguments and the names of the others).  No code is copied.
An existing entry for the same repository is replaced; other repositories' entries and
every curated field stay as they are (the files are edited in place, layout kept).

Usage::

    python scripts/harvest_seen_in.py --repo vllm-project/vllm-ascend \\
        --commit 182b75ea84ff13ece27b57391331ef8935410aea ../shared/corpus/vllm-ascend
    python scripts/harvest_seen_in.py --repo Ascend/MindIE-LLM \\
        --commit 8b4871ad31f592aa863f6255760e4934484d78e4 \\
        --shipping examples/atb_models ../shared/corpus/mindie-llm
    python scripts/harvest_seen_in.py --repo DeepLink-org/dlinfer \\
        --commit a50184e3734e5799bd4cec484d3a2ac46a36ae86 ../shared/corpus/dlinfer
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.audit.practice import harvest, seen_in_entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path, help="checkout of the repository (a work tree)")
    p.add_argument("--repo", required=True, help="owner/name on GitHub")
    p.add_argument("--commit", required=True, help="the commit the checkout is at")
    p.add_argument(
        "--records", type=Path, default=Path(__file__).resolve().parent.parent / "kb" / "records"
    )
    p.add_argument("--include-tests", action="store_true", help="also harvest tests/ and examples/")
    p.add_argument(
        "--shipping",
        action="append",
        default=[],
        metavar="SUBDIR",
        help="a subtree (relative to ROOT) that is shipping code although its path "
        "reads like examples or tests (MindIE-LLM: examples/atb_models); repeatable",
    )
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)

    import yaml

    from kb.catalog.models import SeenIn
    from tools.upstream.refresh import LIST_KEYS, ORDERS
    from tools.upstream.yamltext import PatchError, update_text

    facts = harvest(args.root, include_tests=args.include_tests, shipping=args.shipping)
    by_record: dict[str, list] = defaultdict(list)
    for fact in facts:
        by_record[fact.record].append(fact)
    files = {}
    for path in args.records.rglob("*.yaml"):
        files[path.stem] = path
    changed = 0
    for path in sorted(files.values()):
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        if not isinstance(data, dict) or data.get("kind", "operator") != "operator":
            continue
        name = data["name"]
        kept = [e for e in data.get("seen_in") or [] if e.get("repo") != args.repo]
        previous = {
            (s["path"], s["line"]): s
            for e in data.get("seen_in") or []
            if e.get("repo") == args.repo
            for s in e.get("sites") or []
        }
        if name in by_record:
            entry = seen_in_entry(args.repo, args.commit, by_record[name], previous)
            SeenIn.model_validate(entry)
            kept.append(entry)
        if kept == (data.get("seen_in") or []):
            continue
        new = dict(data)
        if kept:
            new["seen_in"] = sorted(kept, key=lambda e: e["repo"])
        else:
            new.pop("seen_in", None)
        try:
            edited = update_text(text, new, ORDERS, LIST_KEYS)
        except PatchError as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 1
        changed += 1
        if not args.dry_run:
            path.write_text(edited, encoding="utf-8")
    sites = len(facts)
    print(
        f"{sites} call sites of {len(by_record)} operators; {changed} record(s) "
        f"{'would change' if args.dry_run else 'updated'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
