"""Write an extension record (kb/records/extensions/<package>.yaml) from a package's sources.

A maintainer step (never run by CI): read the operator registrations of a public kernel
package's source tree (C++ TORCH_LIBRARY blocks, Python torch.library definitions) with
the scanner's readers and write one record: the package, the modules whose import
registers the operators, the namespaces, repo, commit and licence, and per operator its
namespace, exact schema and the place of its registration.  Nothing is copied but those
facts; the summary is given in our own words.

Usage::

    python scripts/harvest_extensions.py /tmp/sgl-kernel-npu --name sgl-kernel-npu \\
        --repo sgl-project/sgl-kernel-npu --commit f425bdf1e191a7682296d3b2ed0b927d4e37d671 \\
        --licence MIT --import sgl_kernel_npu --namespace npu --only csrc/pytorch_extensions.cpp \\
        --summary-en "..." --summary-zh "..."
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.upstream.extensions import dump, record, registrations


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path, help="the package's source tree at --commit")
    p.add_argument("--name", required=True, help="the package's distribution name")
    p.add_argument("--repo", required=True, help="owner/name on GitHub")
    p.add_argument("--commit", required=True, help="the commit the tree is at (40 hex digits)")
    p.add_argument("--licence", required=True, help="SPDX identifier")
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        required=True,
        help="a module whose import registers the operators (repeatable)",
    )
    p.add_argument("--namespace", action="append", default=[], help="keep only these namespaces")
    p.add_argument("--macro-namespace", help="the namespace of blocks that name it through a macro")
    p.add_argument("--only", action="append", default=[], help="harvest only these sub-paths")
    p.add_argument("--product", action="append", default=[], help="a product id the package states")
    p.add_argument("--summary-en", required=True)
    p.add_argument("--summary-zh", required=True)
    p.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "kb" / "records" / "extensions",
    )
    p.add_argument("--dry-run", action="store_true", help="print the record instead of writing it")
    args = p.parse_args(argv)
    if not args.root.is_dir():
        print(f"error: {args.root} is not a directory", file=sys.stderr)
        return 2
    regs = registrations(args.root, args.only)
    body = record(
        regs,
        name=args.name,
        repo=args.repo,
        commit=args.commit,
        licence=args.licence,
        imports=args.imports,
        summary_en=args.summary_en,
        summary_zh=args.summary_zh,
        namespaces=args.namespace,
        macro_namespace=args.macro_namespace,
        products=args.product,
        root=args.root,
    )
    if not body["operators"]:
        print(f"error: no operator registrations found under {args.root}", file=sys.stderr)
        return 1
    try:
        text = dump(body)
    except ValueError as exc:
        print(f"error: the harvested record does not validate: {exc}", file=sys.stderr)
        return 1
    if args.dry_run:
        print(text, end="")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.yaml"
    path.write_text(text, encoding="utf-8")
    print(f"{path}: {len(body['operators'])} operators in {', '.join(body['namespaces'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
