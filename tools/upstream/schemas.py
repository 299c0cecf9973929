"""Operator schemas, PyTorch version ranges and deprecations from op-plugin and the wheel.

Three schema sources, in priority order: ``op_plugin_functions.yaml`` (op-plugin,
with per-backend PyTorch version ranges), ``npu_native_functions_by_codegen.yaml``
(what the wheel ships) and ``atb_schemas.txt`` (ATB registrations).  A record's
``signature`` is the ``func:`` text of the first source that has the operator,
character for character, and ``upstream.schema_source`` names that file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

OP_PLUGIN_FUNCTIONS = "op_plugin_functions.yaml"
CODEGEN = "npu_native_functions_by_codegen.yaml"
ATB_SCHEMAS = "atb_schemas.txt"
SOURCE_PRIORITY = (OP_PLUGIN_FUNCTIONS, CODEGEN, ATB_SCHEMAS)

#: Keys of an op_plugin_functions.yaml entry that are not backends.
_NOT_BACKENDS = {
    "func",
    "gen_opapi",
    "dispatch",
    "tags",
    "device_check",
    "structured",
    "structured_delegate",
    "use_const_ref_for_mutable_tensors",
}
#: Backends whose version lists decide whether op-plugin generates the operator for a
#: PyTorch line (``internal_format_opapi`` and ``dvm`` are flags on top of those).
IMPLEMENTATIONS = ("acl_op", "op_api", "sparse")
#: Where present, the PyTorch lines on which the entry is exposed as a public API.
EXPOSED = "exposed"


@dataclass
class SchemaEntry:
    """One ``func:`` line of one source."""

    name: str  # without overload
    overload: str
    text: str
    source: str  # file name, e.g. op_plugin_functions.yaml
    backends: dict[str, list[str]] = field(default_factory=dict)  # backend → versions

    @property
    def is_out(self) -> bool:
        return self.overload == "out" or self.overload.endswith("_out")

    def pytorch_lines(self) -> set[str]:
        """Lines (``v2.1`` …) this entry generates the operator for, limited to the
        lines it is exposed on when the entry says so."""
        impl = {v for b in IMPLEMENTATIONS for v in self.backends.get(b, [])}
        if EXPOSED in self.backends:
            impl &= set(self.backends[EXPOSED])
        return impl


def schema_head(text: str) -> tuple[str, str]:
    head = text.split("(", 1)[0].strip()
    name, _, overload = head.partition(".")
    return name, overload


def expand_versions(spec: Any, all_versions: list[str]) -> list[str] | None:
    """``all_version``, ``[v2.1, newest]``, ``[v2.1, v2.6]``, ``v2.2`` or ``"v2.1, v2.3"``
    (a scalar is a comma-separated list, as op-plugin's generator reads it) → versions.

    None when ``spec`` is not a version specification (the key is not a backend).
    """
    if spec == "all_version":
        return list(all_versions)
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(",")]
        if parts and all(re.fullmatch(r"v\d+\.\d+", p) for p in parts):
            return parts
        return None
    if isinstance(spec, list) and len(spec) == 2 and all(isinstance(x, str) for x in spec):
        start, end = (x.strip() for x in spec)
        if start not in all_versions:
            return None
        stop = (
            len(all_versions) - 1
            if end == "newest"
            else (all_versions.index(end) if end in all_versions else -1)
        )
        if stop < 0:
            return None
        return all_versions[all_versions.index(start) : stop + 1]
    return None


def _entries(data: Any) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if not isinstance(data, dict):
        return out
    for section, items in data.items():
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("func"), str) and "(" in item["func"]:
                out.append((str(section), item))
    return out


def load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8-sig"), Loader=_Loader)


def parse_op_plugin_functions(text: str) -> tuple[list[SchemaEntry], list[str]]:
    data = yaml.load(text.lstrip("\ufeff"), Loader=_Loader)
    all_versions = [str(v).strip() for v in (data or {}).get("all_version", [])]
    entries = []
    for _section, item in _entries(data):
        func = item["func"].strip()
        name, overload = schema_head(func)
        backends = {}
        for key, spec in item.items():
            if key in _NOT_BACKENDS:
                continue
            versions = expand_versions(spec, all_versions)
            if versions is not None:
                backends[str(key)] = versions
        entries.append(SchemaEntry(name, overload, func, OP_PLUGIN_FUNCTIONS, backends))
    return entries, all_versions


def parse_codegen(text: str) -> list[SchemaEntry]:
    data = yaml.load(text.lstrip("\ufeff"), Loader=_Loader)
    entries = []
    for _section, item in _entries(data):
        func = item["func"].strip()
        name, overload = schema_head(func)
        entries.append(SchemaEntry(name, overload, func, CODEGEN))
    return entries


def parse_atb_schemas(text: str) -> list[SchemaEntry]:
    entries = []
    for line in text.lstrip("\ufeff").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "(" not in line:
            continue
        name, overload = schema_head(line)
        entries.append(SchemaEntry(name, overload, line, ATB_SCHEMAS))
    return entries


@dataclass
class Deprecation:
    name: str
    replacement: str | None


def parse_deprecated(text: str) -> dict[str, Deprecation]:
    """Deprecated operator names (overload-free) → replacement text, if upstream gives one.

    An entry for the ``.out`` overload alone deprecates only that overload, which no
    record describes, so it is skipped.
    """
    data = yaml.load(text.lstrip("\ufeff"), Loader=_Loader) or {}
    out: dict[str, Deprecation] = {}
    for item in data.get("deprecated", []) or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name, overload = schema_head(item["name"] + "(")
        if overload == "out" or overload.endswith("_out"):
            continue
        replace = item.get("replace")
        if name not in out or (replace and not out[name].replacement):
            out[name] = Deprecation(name, str(replace).strip() if replace else None)
    return out


def parse_atb_ops(text: str) -> list[str]:
    """Operator names registered through ATB (``atb_ops.yaml``), schema or not."""
    data = yaml.load(text.lstrip("\ufeff"), Loader=_Loader) or {}
    names = []
    for item in data.get("functions", []) or []:
        impl = item.get("impl_name") if isinstance(item, dict) else None
        if isinstance(impl, str):
            names.append(impl.split("::")[-1])
    return names


@dataclass
class SchemaIndex:
    """Every schema of every source, with the version list of op_plugin_functions.yaml."""

    entries: list[SchemaEntry] = field(default_factory=list)
    all_versions: list[str] = field(default_factory=list)
    _cache: tuple[int, dict[str, dict[str, list[SchemaEntry]]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def by_source(self, name: str) -> dict[str, list[SchemaEntry]]:
        return self._index().get(name, {})

    def names(self) -> set[str]:
        return set(self._index())

    def choose(self, name: str) -> SchemaEntry | None:
        """The schema a record carries: first source in priority order that defines a
        non-out overload; within it the overload-less entry, else the first listed."""
        found = self._index().get(name, {})
        for source in SOURCE_PRIORITY:
            candidates = [e for e in found.get(source, []) if not e.is_out]
            if not candidates:
                continue
            plain = [e for e in candidates if not e.overload]
            return plain[0] if plain else candidates[0]
        return None

    def versions(self, name: str, overload: str) -> list[str]:
        """PyTorch lines (``2.1`` …) for one overload, from op_plugin_functions.yaml;
        united over the sections that list it (``custom`` and ``symint`` may both)."""
        lines: set[str] = set()
        for e in self._index().get(name, {}).get(OP_PLUGIN_FUNCTIONS, []):
            if e.overload == overload:
                lines |= e.pytorch_lines()
        return [v.removeprefix("v") for v in self.all_versions if v in lines]

    def _index(self) -> dict[str, dict[str, list[SchemaEntry]]]:
        cache = self._cache
        if cache is None or cache[0] != len(self.entries):
            idx: dict[str, dict[str, list[SchemaEntry]]] = {}
            for e in self.entries:
                idx.setdefault(e.name, {}).setdefault(e.source, []).append(e)
            cache = (len(self.entries), idx)
            self._cache = cache
        return cache[1]
