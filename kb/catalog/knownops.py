"""Operators torch_npu defines that may have no record: known, with their schema.

Two generated data files answer "is this a real torch_npu operator?" without a record:
``releases.json`` (every operator of every harvested wheel, with its schema in each) and
``known_ops.json`` (what the wheels do not show: op-plugin operators no harvested wheel
ships yet and the ATB operators under ``torch.ops.atb``; written by
``scripts/import_upstream.py known-ops``).  A call of such an operator is real code,
so the checker says "known, not documented" instead of "unknown operator".

Backward, grad and underscore operators are known too: autograd and the torch_npu
Python wrappers call them, and a training stack may call them directly.  ``role`` says
which kind a name is, so messages can say that calling one directly is unusual.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from kb.catalog.releases import ReleaseData
from kb.catalog.releases import load as load_releases
from kb.core.paths import PACKAGE_DIR
from kb.vocab import bare_operator

KNOWN_FILE = PACKAGE_DIR / "data" / "known_ops.json"
DATA_FORMAT = 1
_BACKWARD = re.compile(r"(^|_)(backward|grad)(_|$)|bk$")
#: Call paths the ATB operators are spelled under besides ``torch.ops.atb.``.
_EXTRA_PREFIXES = ("torch_npu.atb.",)


class KnownOperator(NamedTuple):
    """An operator upstream defines: its schemas (one per overload) and where from."""

    name: str
    namespace: str  # npu | atb
    schemas: tuple[str, ...]
    origin: str  # where the schemas come from, in words
    role: str  # forward | backward | internal
    out_only: bool = False  # only ``.out`` overloads exist: ``schemas`` are theirs

    def arg_names(self) -> set[str] | None:
        """Every argument name of any overload; None when no schema is published."""
        from kb.catalog.signature import SchemaError, parse_schema

        names: set[str] = set()
        for schema in self.schemas:
            try:
                names |= {a.name for a in parse_schema(schema).args}
            except SchemaError:
                return None
        return names if self.schemas else None


def role_of(name: str) -> str:
    """``backward`` for gradient kernels, ``internal`` for underscore names, else ``forward``."""
    if _BACKWARD.search(name):
        return "backward"
    return "internal" if name.startswith("_") else "forward"


class KnownOperators:
    """The lookup over both data files (bare names; overloads folded into one entry)."""

    def __init__(self, releases: ReleaseData, extra: dict[str, Any]) -> None:
        if extra and extra.get("format") != DATA_FORMAT:
            raise ValueError(f"known_ops format {extra.get('format')!r}, expected {DATA_FORMAT}")
        self._releases = releases
        self._extra: dict[str, Any] = dict(extra.get("operators") or {}) if extra else {}
        self._commit = str(
            ((extra or {}).get("sources") or {}).get("op-plugin", {}).get("commit") or ""
        )
        self._outs: dict[str, list[str]] = dict(extra.get("out_overloads") or {}) if extra else {}
        self._keys: dict[str, list[str]] = {}
        for key in releases.operators():
            self._keys.setdefault(key.split(".", 1)[0], []).append(key)

    def names(self) -> list[str]:
        return sorted(set(self._keys) | set(self._extra) | set(self._outs))

    def out_schemas(self, spelling: str) -> tuple[str, ...]:
        """The ``.out`` overloads of an operator (recorded or not): the Python binding takes
        each as the functional call plus ``out=`` (the overload's mutated outputs)."""
        name = spelling.strip()
        for prefix in _EXTRA_PREFIXES:
            name = name.removeprefix(prefix)
        return tuple(self._outs.get(bare_operator(name), ()))

    def get(self, spelling: str) -> KnownOperator | None:
        """The operator a name or call path means (``torch.ops.npu._npu_dtype_cast``)."""
        name = spelling.strip()
        for prefix in _EXTRA_PREFIXES:
            name = name.removeprefix(prefix)
        name = bare_operator(name)
        if name in self._keys:
            return self._from_wheels(name)
        entry = self._extra.get(name)
        if entry is None:
            outs = self._outs.get(name)
            if not outs:
                return None
            return KnownOperator(name, "npu", tuple(outs), self._out_origin(), role_of(name), True)
        where = f"op-plugin {entry['source']}" + (
            f" at {self._commit[:12]}" if self._commit else ""
        )
        if str(entry["source"]).startswith("wheel "):
            where = f"the torch_npu {entry['source'].removeprefix('wheel ')} wheel"
        return KnownOperator(
            name, entry["namespace"], tuple(entry.get("schemas") or ()), where, role_of(name)
        )

    def _out_origin(self) -> str:
        at = f" at {self._commit[:12]}" if self._commit else ""
        return f"op-plugin op_plugin_functions.yaml{at} (only as a .out overload)"

    def _from_wheels(self, name: str) -> KnownOperator:
        data = self._releases
        schemas: list[str] = []
        first: str | None = None
        last: str | None = None
        for key in sorted(self._keys[name]):
            hist = data.history(key)
            if hist is None:
                continue
            schemas.append(hist.segments[-1].schema)
            if first is None or data.releases.index(hist.first) < data.releases.index(first):
                first = hist.first
            if last is None or data.releases.index(hist.last) > data.releases.index(last):
                last = hist.last
        if last == data.latest:
            origin = f"the torch_npu {data.latest} wheel"
        else:
            origin = f"the torch_npu {first} .. {last} wheels (not in {data.latest})"
        return KnownOperator(name, "npu", tuple(schemas), origin, role_of(name))


@lru_cache(maxsize=2)
def _load(path: Path) -> KnownOperators:
    extra: dict[str, Any] = {}
    if path.is_file():
        with open(path, encoding="utf-8") as fh:
            extra = json.load(fh)
    return KnownOperators(load_releases(), extra)


def load(path: Path | None = None) -> KnownOperators:
    """Both data files, read once per process."""
    return _load(Path(path or KNOWN_FILE).resolve())


def params_of(schema: str) -> list[dict[str, Any]] | None:
    """A schema's arguments as record ``parameters`` entries (for binding a call to it)."""
    from kb.catalog.signature import SchemaError, parse_schema

    try:
        parsed = parse_schema(schema)
    except SchemaError:
        return None
    return [
        {
            "name": a.name,
            "type": a.type,
            "required": a.default is None,
            "default": a.default,
            "keyword_only": a.keyword_only,
            "mutated": a.mutated,
        }
        for a in parsed.args
    ]
