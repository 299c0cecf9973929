"""torch_npu release facts harvested from the published wheels (``kb/data/releases.json``).

Every ``torch-npu`` wheel carries its own operator schemas, so "which release first
shipped an operator" and "when did its arguments change" are derived facts, written
once by ``scripts/harvest_releases.py``.  They reach the records at compile time
(:func:`enrich`), so ``kb show`` never loads the data file; only ``--torch-npu``
filters, the checker's version rule and ``kb doctor`` read it, and then only once.

Release matching (:func:`ReleaseData.match`), the rule for a version the user types:

1. a harvested release written exactly (``2.7.1.post4``) is that release;
2. otherwise the *line* is the harvested releases sharing major.minor.patch
   (``2.7.1`` → 2.7.1, 2.7.1.post2, …), or sharing major.minor when the user wrote
   two parts or no release of that patch line was harvested;
3. within the line: the newest harvested release not newer than the version typed
   (``2.7.1.post5`` → ``2.7.1.post4``; ``2.7`` → the newest 2.7.x), else the oldest of
   the line (``2.5.1rc1`` → ``2.5.1``); such a match is marked inexact;
4. a version whose major.minor line was never harvested matches nothing (None).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from kb.core.paths import PACKAGE_DIR

DATA_FILE = PACKAGE_DIR / "data" / "releases.json"
DATA_FORMAT = 1
#: Members of a torch_npu wheel (or installed package) the facts are read from.
SCHEMA_MEMBER = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
DOCS_MEMBER = "torch_npu/_op_plugin_docs.py"
#: The section of the schema file that holds torch_npu's own operators (the others
#: re-implement ATen operators for the NPU backend).
SCHEMA_SECTION = "custom"

_VERSION = re.compile(
    r"^v?(\d{1,9})\.(\d{1,9})(?:\.(\d{1,9}))?(?:\.?post(\d{1,9}))?(?:\.?rc(\d{1,9}))?$", re.I
)
_DOCSTR = re.compile(r"""_add_torch_npu_docstr\(\s*["']([A-Za-z0-9_.]+)["']""")

VersionKey = tuple[int, int, int, int, int, int]


def release_key(text: str) -> VersionKey | None:
    """A sort key for a torch_npu version: 2.1.0.post8 < 2.1.0.post10 < 2.2.0rc1 < 2.2.0.

    None for text that is not a release number.  A missing patch counts as 0.
    """
    m = _VERSION.match(text.strip())
    if not m:
        return None
    major, minor, patch, post, rc = m.groups()
    final = 0 if rc is not None else 1
    return (int(major), int(minor), int(patch or 0), final, int(rc or 0), int(post or 0))


def _order(text: str) -> VersionKey:
    """``release_key`` for sorting; unreadable text sorts first."""
    return release_key(text) or (0, 0, 0, 0, 0, 0)


def sort_releases(releases: Iterable[str]) -> list[str]:
    """Version order (not string order); unreadable versions raise ValueError."""
    items = list(releases)
    bad = [r for r in items if release_key(r) is None]
    if bad:
        raise ValueError(f"not torch_npu release numbers: {bad}")
    return sorted(items, key=_order)


def normalize_schema(schema: str) -> str:
    """Whitespace-insensitive form of a schema string (the only liberty taken with it)."""
    return " ".join(schema.split())


def read_schemas(yaml_text: str) -> dict[str, str]:
    """torch_npu's own operators in a ``npu_native_functions_by_codegen.yaml``.

    Keys are schema names: ``npu_format_cast`` for the default overload and
    ``npu_format_cast.Tensor`` for others.  ``.out`` overloads are left out: they
    mirror the functional form and no one calls them through ``torch_npu.``.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(yaml_text, Loader=loader)
    if not isinstance(doc, dict) or not isinstance(doc.get(SCHEMA_SECTION), list):
        raise ValueError(f"no {SCHEMA_SECTION!r} section: not a torch_npu schema file")
    out: dict[str, str] = {}
    for entry in doc[SCHEMA_SECTION]:
        func = entry.get("func") if isinstance(entry, dict) else None
        if not isinstance(func, str) or "(" not in func:
            continue
        key = func.split("(", 1)[0].strip()
        if key.endswith(".out"):
            continue
        out.setdefault(key, normalize_schema(func))
    return out


def read_documented(docs_text: str) -> set[str]:
    """Operators that ``_op_plugin_docs.py`` documents (read as text, never executed)."""
    return set(_DOCSTR.findall(docs_text))


_BACKWARD = re.compile(r"(^|_)(backward|grad)(_|$)|bk$")


def is_public(name: str) -> bool:
    """A forward operator people call: no leading underscore, not a backward/grad kernel."""
    base = name.split(".", 1)[0]
    return not (base.startswith("_") or _BACKWARD.search(base))


def schema_diff(old: str, new: str) -> list[str]:
    """What changed from schema ``old`` to ``new`` in short phrases: ``+ int? x=None``, ``- y``."""
    from kb.catalog.signature import SchemaArg, SchemaError, parse_schema

    try:
        a, b = parse_schema(old), parse_schema(new)
    except SchemaError:
        return [] if normalize_schema(old) == normalize_schema(new) else ["schema text changed"]

    def decl(x: SchemaArg) -> str:
        typ = f"{x.type}(!)" if x.mutated else x.type
        return f"{typ} {x.name}" + (f"={x.default}" if x.default is not None else "")

    before = {x.name: x for x in a.args}
    after = {x.name: x for x in b.args}
    out = [f"+ {decl(x)}" for x in b.args if x.name not in before]
    out += [f"- {x.name}" for x in a.args if x.name not in after]
    for x in b.args:
        y = before.get(x.name)
        if y is None or y == x:
            continue
        if decl(y) != decl(x):
            out.append(f"{decl(y)} -> {decl(x)}")
        if y.keyword_only != x.keyword_only:
            out.append(f"{x.name} now {'keyword-only' if x.keyword_only else 'positional'}")
    if a.returns != b.returns:
        out.append(f"returns ({', '.join(a.returns)}) -> ({', '.join(b.returns)})")
    if not out and [x.name for x in a.args] != [x.name for x in b.args]:
        out.append("argument order changed")
    if not out and normalize_schema(old) != normalize_schema(new):
        out.append("schema text changed")
    return out


class Segment(NamedTuple):
    """Consecutive harvested releases (``first``..``last``) sharing one schema."""

    first: str
    last: str
    schema: str


class Match(NamedTuple):
    """A user's version matched to a harvested release; ``exact`` when typed as harvested."""

    release: str
    exact: bool


class OperatorHistory(NamedTuple):
    """One operator across the harvested releases: where it is, with which schema."""

    name: str
    segments: list[Segment]
    releases: list[str]
    documented: list[str]

    @property
    def first(self) -> str:
        return self.releases[0]

    @property
    def last(self) -> str:
        return self.releases[-1]

    def changes(self) -> list[tuple[str, str]]:
        """``(release, schema)`` from which each schema holds, the first one included."""
        out: list[tuple[str, str]] = []
        for seg in self.segments:
            if not out or out[-1][1] != seg.schema:
                out.append((seg.first, seg.schema))
        return out


class ReleaseData:
    """The harvested matrix: the ordered releases and each operator's history."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        if raw.get("format") != DATA_FORMAT:
            raise ValueError(f"release data format {raw.get('format')!r}, expected {DATA_FORMAT}")
        self.releases: list[str] = list(raw["releases"])
        self.no_wheel: dict[str, str] = dict(raw.get("no_wheel", {}))
        self._index = {r: i for i, r in enumerate(self.releases)}
        self._raw_ops: Mapping[str, Any] = raw["operators"]
        self._ops: dict[str, OperatorHistory] = {}

    @property
    def latest(self) -> str:
        return self.releases[-1]

    def operators(self) -> list[str]:
        return sorted(self._raw_ops)

    def history(self, op: str) -> OperatorHistory | None:
        """One operator's history (schema name, e.g. ``npu_format_cast.Tensor``)."""
        if op in self._ops:
            return self._ops[op]
        raw = self._raw_ops.get(op)
        if raw is None:
            return None
        schemas = raw["schemas"]
        segs = [Segment(a, b, schemas[k]) for a, b, k in raw["runs"]]
        hist = OperatorHistory(
            op,
            segs,
            self._expand((s.first, s.last) for s in segs),
            self._expand(raw.get("documented", [])),
        )
        self._ops[op] = hist
        return hist

    def _expand(self, spans: Iterable[Iterable[str]]) -> list[str]:
        out: list[str] = []
        for a, b in spans:
            out.extend(self.releases[self._index[a] : self._index[b] + 1])
        return out

    def has(self, op: str, release: str) -> bool:
        hist = self.history(op)
        return hist is not None and release in hist.releases

    def schema_in(self, op: str, release: str) -> str | None:
        """The schema ``op`` has in ``release`` (a harvested release), None when absent."""
        hist = self.history(op)
        if hist is None or release not in self._index:
            return None
        i = self._index[release]
        for seg in hist.segments:
            if self._index[seg.first] <= i <= self._index[seg.last]:
                return seg.schema
        return None

    def match(self, text: str) -> Match | None:
        """The harvested release a typed version stands for (rule in the module doc)."""
        text = text.strip()
        if text in self._index:
            return Match(text, True)
        key = release_key(text)
        if key is None:
            return None
        two_parts = text.lstrip("vV").split(".post")[0].split("rc")[0].count(".") == 1
        keyed = [(release_key(r), r) for r in self.releases]
        line = [] if two_parts else [(k, r) for k, r in keyed if k and k[:3] == key[:3]]
        if not line:
            line = [(k, r) for k, r in keyed if k and k[:2] == key[:2]]
        if not line:
            return None
        if two_parts:
            return Match(line[-1][1], False)
        older = [r for k, r in line if k and k <= key]
        return Match(older[-1] if older else line[0][1], False)


def resolve(text: str, data: ReleaseData | None = None) -> Match:
    """The harvested release for a version the user typed; ValueError says what exists."""
    data = data or load()
    got = data.match(text)
    if got is None:
        lines = sorted({".".join(r.split(".")[:2]) for r in data.releases}, key=_order)
        raise ValueError(
            f"torch_npu {text!r} is not a harvested release; harvested lines: "
            f"{', '.join(lines)} ({data.releases[0]} .. {data.latest})"
        )
    return got


@lru_cache(maxsize=4)
def _load(path: Path) -> ReleaseData:
    with open(path, encoding="utf-8") as fh:
        return ReleaseData(json.load(fh))


def load(path: Path | None = None) -> ReleaseData:
    """The harvested data (read once per process)."""
    return _load(Path(path or DATA_FILE).resolve())


def _empty(versions: Mapping[str, Any] | None) -> bool:
    v = versions or {}
    return not (v.get("first") or v.get("last") or v.get("releases") or v.get("changes"))


def _lookup_name(body: Mapping[str, Any], data: ReleaseData) -> str | None:
    """The schema name of a record: its own name, else the bare name of a call path."""
    from kb.vocab import CALL_PREFIXES

    candidates = [body.get("name", "")]
    for call in body.get("calls") or []:
        for prefix in CALL_PREFIXES:
            if call.startswith(prefix):
                candidates.append(call[len(prefix) :])
    for name in candidates:
        if name and data.history(name) is not None:
            return str(name)
    return None


def versions_for(op: str, data: ReleaseData) -> dict[str, Any] | None:
    """The record ``versions`` fields for a harvested operator, None if never shipped.

    ``last`` is set only when the newest harvested release lacks the operator;
    ``changes`` lists the schema from each release on which it holds, the first
    schema (at ``first``) included, so the history reads on without the data file.
    """
    hist = data.history(op)
    if hist is None:
        return None
    return {
        "first": hist.first,
        "last": None if hist.last == data.latest else hist.last,
        "releases": list(hist.releases),
        "changes": [{"release": r, "schema": s} for r, s in hist.changes()],
    }


def enrich(body: dict[str, Any], data: ReleaseData | None = None) -> None:
    """Fill an operator record's empty ``versions`` from the harvested data, in place.

    A record that states any of first/last/releases/changes itself is left alone
    (curated facts win); ``pytorch`` is kept as written.
    """
    if body.get("kind") != "operator" or not _empty(body.get("versions")):
        return
    data = data or load()
    name = _lookup_name(body, data)
    if name is None:
        return
    facts = versions_for(name, data)
    if facts is not None:
        body["versions"] = {**(body.get("versions") or {}), **facts}
    versions = body.get("versions") or {}
    if versions.get("releases"):
        versions["ranges"] = [list(r) for r in release_ranges(versions["releases"], data)]


def release_ranges(
    releases: Iterable[str], data: ReleaseData | None = None
) -> list[tuple[str, str | None]]:
    """Runs of consecutive harvested releases that ship an operator, gaps kept.

    ``(first, last)`` per run; ``last`` is None when the run reaches the newest
    harvested release ("2.6.0+").  FIA v2 ships in 2.1.0.post17 and again from
    2.6.0.post3, so it has two runs, not one misleading "2.1.0.post17 ..".
    Releases the harvest does not know are kept as runs of their own.
    """
    data = data or load()
    index = {r: i for i, r in enumerate(data.releases)}
    known = sorted({r for r in releases if r in index}, key=index.__getitem__)
    runs: list[tuple[str, str | None]] = []
    start = prev = None
    for rel in known:
        if start is None or index[rel] != index[prev] + 1:  # type: ignore[index]
            if start is not None:
                runs.append((start, prev))
            start = rel
        prev = rel
    if start is not None:
        runs.append((start, None if prev == data.latest else prev))
    runs += [(r, r) for r in releases if r not in index]
    return runs


def format_ranges(ranges: Iterable[Iterable[str | None]]) -> str:
    """``2.1.0.post17, 2.6.0.post3+`` — one run per item, a single release as itself."""
    parts = []
    for first, last in ranges:
        if last is None:
            parts.append(f"{first}+")
        elif first == last:
            parts.append(str(first))
        else:
            parts.append(f"{first} .. {last}")
    return ", ".join(parts)


# Questions about one record, answered from its (compiled) versions fields, so the
# checker and the filters need the data file only to match the version typed.


def record_has(rec: Mapping[str, Any], release: str) -> bool | None:
    """Whether the record's operator is in a harvested ``release``; None when unknown."""
    v = rec.get("versions") or {}
    if v.get("releases"):
        return release in v["releases"]
    first, key = release_key(v.get("first") or ""), release_key(release)
    if first is None or key is None:
        return None
    last = release_key(v.get("last") or "")
    return first <= key and (last is None or key <= last)


def record_schema_in(rec: Mapping[str, Any], release: str) -> str | None:
    """The schema the record's history gives for ``release`` (None: absent or unknown)."""
    if not record_has(rec, release):
        return None
    key = release_key(release)
    schema = None
    for ch in (rec.get("versions") or {}).get("changes") or []:
        ck = release_key(ch["release"])
        if ck is not None and key is not None and ck <= key:
            schema = ch["schema"]
    return schema


def first_release(rec: Mapping[str, Any]) -> str | None:
    v = rec.get("versions") or {}
    return v.get("first") or (v.get("releases") or [None])[0]


class Availability(NamedTuple):
    """Whether a record's operator is in the torch_npu release a user names, and how."""

    asked: str
    release: str | None  # the harvested release matched (None: line never harvested)
    exact: bool
    has: bool | None  # None: no release facts for the record or the version
    schema: str | None  # its schema in that release, from the record's history
    first: str | None  # the oldest harvested release that has it
    upgrade: str | None  # the oldest harvested release newer than ``release`` that has it


def availability(
    rec: Mapping[str, Any], asked: str, data: ReleaseData | None = None
) -> Availability:
    """Answer "is this operator in torch_npu X?" for the checker (loads the data once).

    Release lines are maintained in parallel (2.7.1.post2 ships operators 2.8.0
    lacks), so presence is decided by the record's ``releases`` list, never by
    comparing with ``first`` alone.
    """
    first = first_release(rec)
    try:
        match = resolve(asked, data)
    except ValueError:
        return Availability(asked, None, False, None, None, first, None)
    has = record_has(rec, match.release)
    key = release_key(match.release)
    later = [
        r
        for r in (rec.get("versions") or {}).get("releases") or []
        if key is not None and (release_key(r) or key) > key
    ]
    schema = record_schema_in(rec, match.release) if has else None
    return Availability(
        asked,
        match.release,
        match.exact,
        has,
        schema,
        first,
        min(later, key=_order) if later else None,
    )


def args_missing(schema: str, names: Iterable[str]) -> list[str]:
    """The argument names in ``names`` that ``schema`` does not have (order kept)."""
    from kb.catalog.signature import SchemaError, parse_schema

    try:
        known = {a.name for a in parse_schema(schema).args}
    except SchemaError:
        return []
    return [n for n in names if n not in known]
