"""Write kernel registration facts into the records: the ``kernels`` field.

A maintainer step (never run by CI).  Reads every ``op_host/*_def.cpp`` of local
checkouts of hicann/ops-transformer and hicann/ops-nn, links each operator record to
its kernels through the aclnn APIs op-plugin's wrapper calls, and replaces the record's
``kernels`` blocks (every other field and the file's layout stay as they are).  SoC
names map to product ids through ``kb/vocab/products.py``; statements the reader could
not parse are listed in the report and in the block, never guessed.

Usage (the run that wrote the shipped blocks; cannmirror/ops-transformer is a GitHub
mirror whose history holds hicann/ops-transformer's c29bc10, 209 commits newer)::

    python scripts/harvest_kernels.py \\
        --kernels cannmirror/ops-transformer@05c401f9ddebdc9ebf008bb974f9ec1256e9e6f9=/tmp/ot \\
        --kernels hicann/ops-nn@e5c3fa9327ea95ba26d06227e746923580d10921=/tmp/nn \\
        --op-plugin Ascend/op-plugin@517f2e7d0f202f38b76310706cb977ca2388ad21=/tmp/opp
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_SOURCE = re.compile(r"^([A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+)@([0-9a-f]{7,40})=(.+)$")


def _source(text: str) -> tuple[str, str, Path]:
    m = _SOURCE.match(text)
    if m is None or not Path(m.group(3)).is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected OWNER/NAME@COMMIT=DIRECTORY (an existing checkout)"
        )
    return m.group(1), m.group(2), Path(m.group(3))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--kernels",
        type=_source,
        action="append",
        required=True,
        help="OWNER/NAME@COMMIT=DIR of ops-transformer or ops-nn (repeatable)",
    )
    p.add_argument("--op-plugin", type=_source, required=True, help="OWNER/NAME@COMMIT=DIR")
    p.add_argument(
        "--records", type=Path, default=Path(__file__).resolve().parent.parent / "kb" / "records"
    )
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--verbose", action="store_true", help="list unmatched records and why")
    args = p.parse_args(argv)

    import yaml

    from kb.catalog.kernelfacts import kernel_only_products
    from kb.catalog.models import Kernel
    from kb.vocab import PRODUCT_SOCS
    from tools.upstream.kernel_facts import KernelRepo, harvest_record
    from tools.upstream.kernel_links import load_wrappers
    from tools.upstream.refresh import LIST_KEYS, ORDERS
    from tools.upstream.yamltext import PatchError, update_text

    repos = [KernelRepo(name, commit, root) for name, commit, root in args.kernels]
    for repo in repos:
        repo.load()
    plugin_name, plugin_commit, plugin_root = args.op_plugin
    wrappers = load_wrappers(plugin_root)
    unread = [u for r in repos for defs in r.defs.values() for kd in defs for u in kd.unreadable]
    socs = Counter(s for r in repos for defs in r.defs.values() for kd in defs for s in kd.socs)
    foreign = sorted(s for s in socs if s not in PRODUCT_SOCS)
    print(
        f"kernels parsed: {sum(r.kernel_count() for r in repos)} "
        f"({', '.join(f'{r.name}@{r.commit[:7]}: {r.kernel_count()}' for r in repos)}); "
        f"{len(unread)} statement(s) not read; SoCs that are not our products: "
        f"{', '.join(foreign) or 'none'}"
    )

    matched = changed = 0
    added: Counter[str] = Counter()
    for path in sorted(args.records.rglob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
            data = yaml.safe_load(text)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            print(f"{path}: cannot read the record: {' '.join(str(exc).split())}", file=sys.stderr)
            return 1
        if not isinstance(data, dict) or data.get("kind", "operator") != "operator":
            continue
        if not isinstance(data.get("name"), str):
            print(f"{path}: the record has no name", file=sys.stderr)
            return 1
        outcome = harvest_record(
            data["name"], wrappers, repos, (plugin_name, plugin_commit), PRODUCT_SOCS
        )
        for block in outcome.kernels:
            Kernel.model_validate(block)
        if outcome.kernels:
            matched += 1
            added.update(kernel_only_products({**data, "kernels": outcome.kernels}))
        elif args.verbose:
            print(f"  {data['name']}: {'; '.join(outcome.problems)}")
        new = dict(data)
        if outcome.kernels:
            new["kernels"] = outcome.kernels
        else:
            new.pop("kernels", None)
        if new == data:
            continue
        try:
            edited = update_text(text, new, ORDERS, LIST_KEYS)
        except PatchError as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 1
        changed += 1
        if not args.dry_run:
            path.write_text(edited, encoding="utf-8")
    print(
        f"records matched to kernels: {matched}; kernel-only products added: "
        f"{', '.join(f'{p} {n}' for p, n in sorted(added.items())) or 'none'}; "
        f"{changed} record(s) {'would change' if args.dry_run else 'updated'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
