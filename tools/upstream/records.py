"""Read operator records as plain data, tolerantly.

Drift and refresh look at records that people are still writing: a record that does
not validate yet must still be found by name (else it would be reported as a "new"
operator).  So this reads YAML only; validation stays with ``kb validate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


@dataclass
class RecordFile:
    path: Path
    root: Path
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data.get("name"))

    @property
    def rel(self) -> str:
        try:
            return str(self.path.relative_to(self.root))
        except ValueError:
            return str(self.path)


@dataclass
class RecordSet:
    records: dict[str, RecordFile]
    problems: list[str]

    def find(self, name: str) -> RecordFile | None:
        """By record name, else by any call path or alias ending in ``.name``."""
        if name in self.records:
            return self.records[name]
        for rec in self.records.values():
            spellings = list(rec.data.get("calls") or []) + list(rec.data.get("aliases") or [])
            if any(isinstance(s, str) and (s == name or s.endswith("." + name)) for s in spellings):
                return rec
        return None


def load_records(roots: list[Path]) -> RecordSet:
    records: dict[str, RecordFile] = {}
    problems: list[str] = []
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.y*ml")):
            try:
                data = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=_Loader)
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                problems.append(f"{path}: cannot read: {exc}")
                continue
            if not isinstance(data, dict) or data.get("kind", "operator") != "operator":
                continue
            name = data.get("name")
            if not isinstance(name, str):
                problems.append(f"{path}: operator without a name")
                continue
            if name in records:
                problems.append(f"{path}: {name} is also defined in {records[name].path}")
                continue
            records[name] = RecordFile(path, root, data)
    return RecordSet(records, problems)
