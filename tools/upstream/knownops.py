"""Every operator torch_npu defines, as data: ``kb/data/known_ops.json`` (maintainer step).

``kb/data/releases.json`` already holds the schema of every operator in the ``custom``
section of each harvested wheel; this step adds what that file cannot know and never
repeats what it does:

* operators of op-plugin's ``op_plugin_functions.yaml`` (sections ``custom`` and the
  torch_npu names of ``symint``) that no harvested wheel ships yet;
* the ATB operators (``atb_schemas.txt``, and ``atb_ops.yaml`` names without a
  published schema), which register under ``torch.ops.atb`` outside the codegen file;
* operators of the wheel given with ``--wheel`` that the harvest lacks or ships with
  another schema (a newer wheel than the harvest: rerun ``scripts/harvest_releases.py``);
* under ``out_overloads``, every ``.out`` overload of op-plugin and of that wheel, which
  the harvest leaves out: the Python binding takes them as the functional call plus
  ``out=(...)`` (``torch_npu.npu_apply_adam_w(..., out=(var, m, v))``), and a few
  operators exist only in that form (``npu_hans_encode``).

Facts only: name, namespace, schema strings exactly as upstream writes them, and where
each came from (file and commit).  The file is generated, never edited by hand; the
checker reads it through :mod:`kb.catalog.knownops`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kb.catalog.knownops import DATA_FORMAT, KNOWN_FILE
from kb.catalog.releases import ReleaseData, normalize_schema, read_schemas
from kb.scan.registrations import native_registrations
from tools.upstream import schemas as sch
from tools.upstream.wheel import read_wheel

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

#: Sections of op_plugin_functions.yaml that define torch_npu's own operators; ``symint``
#: mixes them with ATen overrides, which ``official`` names.
_OWN_SECTIONS = ("custom", "symint")
_ATEN_SECTION = "official"
_WHEEL_RELEASE = re.compile(r"torch_npu-(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?(?:rc\d+)?)")


@dataclass
class KnownOpsReport:
    """What the step wrote and why, for the maintainer's terminal."""

    data: dict[str, Any]
    covered: int = 0  # wheel operators releases.json already lists with the same schema
    warnings: list[str] = field(default_factory=list)


def _is_out(key: str) -> bool:
    overload = key.partition(".")[2]
    return overload == "out" or overload.endswith("_out")


def op_plugin_own(text: str, outs: dict[str, str] | None = None) -> dict[str, str]:
    """torch_npu's own schemas in an ``op_plugin_functions.yaml`` (``.out`` overloads go
    to ``outs`` when given, else are left out)."""
    data = yaml.load(text.lstrip("\ufeff"), Loader=_Loader)
    if not isinstance(data, dict) or not isinstance(data.get("custom"), list):
        raise ValueError("no 'custom' section: not an op_plugin_functions.yaml")
    aten = {
        str(e["func"]).split("(", 1)[0].split(".", 1)[0]
        for e in data.get(_ATEN_SECTION) or []
        if isinstance(e, dict) and "func" in e
    }
    out: dict[str, str] = {}
    for section in _OWN_SECTIONS:
        for entry in data.get(section) or []:
            func = entry.get("func") if isinstance(entry, dict) else None
            if not isinstance(func, str) or "(" not in func:
                continue
            key = func.split("(", 1)[0].strip()
            if key.split(".", 1)[0] in aten:
                continue
            if _is_out(key):
                if outs is not None:
                    outs.setdefault(key, normalize_schema(func))
                continue
            out.setdefault(key, normalize_schema(func))
    return out


def wheel_outs(codegen_yaml: str) -> dict[str, str]:
    """The ``.out`` overloads of a wheel's ``npu_native_functions_by_codegen.yaml``."""
    doc = yaml.load(codegen_yaml, Loader=_Loader)
    out: dict[str, str] = {}
    for entry in (doc or {}).get("custom") or []:
        func = entry.get("func") if isinstance(entry, dict) else None
        if isinstance(func, str) and "(" in func and _is_out(func.split("(", 1)[0].strip()):
            out.setdefault(func.split("(", 1)[0].strip(), normalize_schema(func))
    return out


def _atb_sources(op_plugin: Path) -> list[Path]:
    """op-plugin's ATB registrations (``op_plugin/ops/atb/*.cpp``), where the checkout has
    them: the only place the ATB ``.out`` overloads are written (``atb_schemas.txt`` lists
    the functional forms)."""
    for base in (op_plugin / "op_plugin" / "ops" / "atb", op_plugin / "ops" / "atb"):
        if base.is_dir():
            return sorted(base.glob("*.cpp"))
    return []


def _out_table(outs: dict[str, str]) -> dict[str, list[str]]:
    """``{bare name: [schema, ...]}`` sorted, for the data file."""
    table: dict[str, list[str]] = {}
    for key in sorted(outs):
        schemas = table.setdefault(key.split(".", 1)[0], [])
        if outs[key] not in schemas:
            schemas.append(outs[key])
    return table


def wheel_release(path: Path, given: str | None) -> str:
    """The release a wheel path names (``torch_npu-2.14.0…``), unless given explicitly."""
    if given:
        return given
    m = _WHEEL_RELEASE.search(path.name) or _WHEEL_RELEASE.search(str(path))
    if not m:
        raise ValueError(f"{path}: cannot tell the torch_npu release from the name; pass --release")
    return m.group(1)


def _add(
    ops: dict[str, dict[str, Any]], key: str, schema: str | None, namespace: str, source: str
) -> None:
    name = key.split(".", 1)[0]
    entry = ops.setdefault(name, {"namespace": namespace, "source": source, "schemas": []})
    if schema is not None and schema not in entry["schemas"]:
        entry["schemas"].append(schema)


def build(
    op_plugin: Path,
    wheel: Path | None,
    commit: str,
    releases: ReleaseData,
    release: str | None = None,
) -> KnownOpsReport:
    """The data file's content from an op-plugin tree (config) and optionally a wheel."""
    from tools.upstream.facts import find_config

    config = find_config(op_plugin)
    if config is None or not (config / sch.OP_PLUGIN_FUNCTIONS).is_file():
        raise FileNotFoundError(
            f"{op_plugin}: no {sch.OP_PLUGIN_FUNCTIONS} under op_plugin/config or config"
        )
    harvested = {k.split(".", 1)[0] for k in releases.operators()}
    ops: dict[str, dict[str, Any]] = {}
    report = KnownOpsReport(data={})
    sources: dict[str, Any] = {"op-plugin": {"commit": commit, "files": []}}
    outs: dict[str, str] = {}
    if wheel is not None:
        rel = wheel_release(wheel, release)
        contents = read_wheel(wheel)
        if contents.codegen_yaml is None:
            raise FileNotFoundError(f"{wheel}: no npu_native_functions_by_codegen.yaml")
        outs.update(wheel_outs(contents.codegen_yaml))
        for key, schema in sorted(read_schemas(contents.codegen_yaml).items()):
            if releases.schema_in(key, rel) == schema:
                report.covered += 1
                continue
            _add(ops, key, schema, "npu", f"wheel {rel}")
            report.warnings.append(
                f"{key}: the {rel} wheel's schema is not in releases.json "
                "(run scripts/harvest_releases.py)"
            )
        sources["wheel"] = {"release": rel, "covered_by_releases_json": report.covered}
    functions = config / sch.OP_PLUGIN_FUNCTIONS
    sources["op-plugin"]["files"].append(f"op_plugin/config/{sch.OP_PLUGIN_FUNCTIONS}")
    for key, schema in sorted(
        op_plugin_own(functions.read_text(encoding="utf-8-sig"), outs).items()
    ):
        if key.split(".", 1)[0] not in harvested:
            _add(ops, key, schema, "npu", sch.OP_PLUGIN_FUNCTIONS)
    atb = config / sch.ATB_SCHEMAS
    if atb.is_file():
        sources["op-plugin"]["files"].append(f"op_plugin/config/{sch.ATB_SCHEMAS}")
        for e in sch.parse_atb_schemas(atb.read_text(encoding="utf-8-sig")):
            if not e.is_out:
                _add(
                    ops,
                    e.name + (f".{e.overload}" if e.overload else ""),
                    normalize_schema(e.text),
                    "atb",
                    sch.ATB_SCHEMAS,
                )
    atb_cpp = _atb_sources(op_plugin)
    if atb_cpp:
        sources["op-plugin"]["files"].append("op_plugin/ops/atb/*.cpp")
    for cpp in atb_cpp:
        for reg in native_registrations(
            cpp.read_text(encoding="utf-8", errors="replace"), cpp.name
        ):
            key = (reg.schema or "").split("(", 1)[0].strip()
            if reg.schema and _is_out(key):
                outs.setdefault(key, normalize_schema(reg.schema))
    atb_ops = config / "atb_ops.yaml"
    if atb_ops.is_file():
        sources["op-plugin"]["files"].append("op_plugin/config/atb_ops.yaml")
        for name in sch.parse_atb_ops(atb_ops.read_text(encoding="utf-8-sig")):
            if not name.endswith("_out") and name not in ops:
                _add(ops, name, None, "atb", "atb_ops.yaml")
    report.data = {
        "format": DATA_FORMAT,
        "generated_by": "scripts/import_upstream.py known-ops",
        "extends": "releases.json",
        "sources": sources,
        "operators": {k: ops[k] for k in sorted(ops)},
        "out_overloads": _out_table(outs),
    }
    return report


def write(report: KnownOpsReport, out: Path = KNOWN_FILE) -> None:
    """Deterministic JSON (sorted operators, no timestamps): a rerun is byte-identical."""
    out.write_text(json.dumps(report.data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
