"""Print the fact skeleton (signature + parameters) of one operator from upstream.

usage: python scripts/skeleton.py NAME --sources PATH_TO_SOURCES

Record authors start from this so the schema string and parameter list are copied
mechanically, never retyped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kb.signature import parse_schema  # noqa: E402

SCHEMA_FILES = (
    ("op-plugin/config/op_plugin_functions.yaml", "op_plugin_functions.yaml"),
    ("torch_npu-2.14.0/npu_native_functions_by_codegen.yaml", "npu_native_functions_by_codegen.yaml"),
    ("op-plugin/config/atb_schemas.txt", "atb_schemas.txt"),
)


def find_schema(sources: Path, name: str) -> tuple[str, str] | None:
    for rel, label in SCHEMA_FILES:
        path = sources / rel
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8-sig").splitlines():
            text = line.strip()
            if text.startswith("- func:"):
                text = text[len("- func:"):].strip()
            elif text.startswith("func:"):
                text = text[len("func:"):].strip()
            if text.startswith(name + "("):
                return text, label
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("name")
    ap.add_argument("--sources", type=Path, required=True)
    ns = ap.parse_args()
    hit = find_schema(ns.sources, ns.name)
    if hit is None:
        print(f"no schema for {ns.name}", file=sys.stderr)
        return 1
    text, label = hit
    schema = parse_schema(text)
    params = []
    for a in schema.args:
        p: dict[str, object] = {"name": a.name, "type": a.type}
        if not a.required:
            p["required"] = False
            p["default"] = a.default
        if a.keyword_only:
            p["keyword_only"] = True
        if a.mutated:
            p["mutated"] = True
        params.append(p)
    doc = {"signature": text, "parameters": params,
           "returns": [{"name": f"out{i}", "type": r} for i, r in enumerate(schema.returns)],
           "upstream": {"schema_source": label}}
    yaml.safe_dump(doc, sys.stdout, sort_keys=False, allow_unicode=True, width=10_000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
