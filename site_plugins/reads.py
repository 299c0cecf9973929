"""What a generated page read of the records, so it is regenerated only when that changed.

The page generators get the records through :class:`~site_plugins.common.SiteData`, whose
buckets (operators, chains, trees, playbooks) are :class:`Bucket` dicts: while a page is
being generated each one notes what is asked of it.  Getting one record by name reads that
record; asking whether a name is there, iterating or counting reads the bucket's names;
``values()`` and ``items()`` read, of every record of the kind, the fields the page reads
of any of them (every field when one is used whole: iterated, copied, compared).  A
page's stored Markdown is reused while each of its reads gives the same digest, so a
one-word edit of one operator's description regenerates that operator's page and the few
that get it by name, and an edit of its summary also the pages that list every
operator's summary (indexes), not the other three hundred.  Any other way into a bucket (``json.dumps`` of
it, say) reaches the plain dict and is not noted: generators read records through the
methods above.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from site_plugins.build_cache import _Fields, _Usage

#: (record | names | fields | all | derived, kind or question, name, fields or argument)
Read = tuple[str, str, str]


class Reads:
    """The reads of the page being generated (None between pages)."""

    current: set[Read] | None = None
    #: Per kind iterated, ``(kind, "")``: the fields the page reads of its records;
    #: None between pages.
    fields: dict[tuple[str, str], _Usage] | None = None

    def noted(self) -> set[Read]:
        """What the page read: ``current`` and its field reads, as reads."""
        out = set(self.current or ())
        for (kind, _), usage in (self.fields or {}).items():
            if usage.whole:
                out.add(("all", kind, ""))
            else:
                out.add(("fields", kind, json.dumps(sorted(usage.names))))
        return out


class Bucket(dict):  # type: ignore[type-arg]
    """The records of one kind by name, noting reads while a page is generated."""

    def __init__(self, kind: str, reads: Reads) -> None:
        super().__init__()
        self.kind = kind
        self._reads = reads

    def _note(self, what: str, name: str = "") -> None:
        if self._reads.current is not None:
            self._reads.current.add((what, self.kind, name))

    def _each(self, name: str) -> Any:
        """The record ``name`` as one of the kind's records iterated, noting the fields
        read of it (for the kind: the page reads those fields of every record)."""
        rec = dict.__getitem__(self, name)
        fields = self._reads.fields
        if fields is None or not isinstance(rec, dict):
            self._note("record", name)
            return rec
        usage = fields.get((self.kind, ""))
        if usage is None:
            usage = fields[(self.kind, "")] = _Usage()
        return _Fields(rec, usage)

    def __getitem__(self, name: str) -> Any:
        self._note("record", name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        self._note("record", name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self._note("names")
        return super().__contains__(name)

    def __iter__(self) -> Iterator[str]:
        self._note("names")
        return super().__iter__()

    def __len__(self) -> int:
        self._note("names")
        return super().__len__()

    def keys(self) -> Any:
        self._note("names")
        return super().keys()

    def values(self) -> Any:
        if self._reads.current is None:
            return super().values()
        self._note("names")
        return [self._each(name) for name in dict.keys(self)]

    def items(self) -> Any:
        if self._reads.current is None:
            return super().items()
        self._note("names")
        return [(name, self._each(name)) for name in dict.keys(self)]


def _chains_using(buckets: dict[str, dict[str, Any]], operator: str) -> list[str]:
    return [
        name
        for name, chain in sorted(dict.items(buckets["chain"]))
        if any(s.get("operator") == operator for s in chain.get("stages", []))
    ]


def _trees_naming(buckets: dict[str, dict[str, Any]], name: str) -> list[str]:
    return [
        tree_name
        for tree_name, tree in sorted(dict.items(buckets["tree"]))
        if any(
            o.get("chain") == name or name in o.get("operators", [])
            for node in tree.get("nodes", [])
            for o in node.get("options", [])
        )
    ]


def _successors(buckets: dict[str, dict[str, Any]], name: str) -> list[str]:
    return [
        op_name
        for op_name, op in sorted(dict.items(buckets["operator"]))
        if name in op.get("supersedes", [])
    ]


#: Questions a page asks of every record of a kind whose answer is a few records: the
#: page depends on the answer (those records' content), not on every record.
DERIVED: dict[str, tuple[str, Callable[[dict[str, dict[str, Any]], str], list[str]]]] = {
    "chains_using": ("chain", _chains_using),
    "trees_naming": ("tree", _trees_naming),
    "successors": ("operator", _successors),
}


def _every_answer(
    buckets: dict[str, dict[str, Any]], question: str
) -> dict[object, list[str]] | None:
    """``question``'s answer for every argument it can have, in one pass over the records
    (what :data:`DERIVED`'s functions give one argument at a time, in the same order);
    None for a question asked one argument at a time."""
    found: dict[object, dict[str, None]] = {}

    def note(arg: object, name: str) -> None:
        # an unhashable value is not a name (malformed record): no question asks for it
        with contextlib.suppress(TypeError):
            found.setdefault(arg, {})[name] = None

    if question == "chains_using":
        for name, chain in sorted(dict.items(buckets["chain"])):
            for stage in chain.get("stages", []):
                note(stage.get("operator"), name)
    elif question == "trees_naming":
        for name, tree in sorted(dict.items(buckets["tree"])):
            for node in tree.get("nodes", []):
                for option in node.get("options", []):
                    note(option.get("chain"), name)
                    for operator in option.get("operators", []):
                        note(operator, name)
    elif question == "successors":
        for name, op in sorted(dict.items(buckets["operator"])):
            for old in op.get("supersedes", []):
                note(old, name)
    else:
        return None
    return {arg: list(names) for arg, names in found.items()}


def derived(data: Any, question: str, arg: str) -> list[str]:
    """The names ``question`` answers for ``arg``, noted as one read of ``data``."""
    if data.reads.current is not None:
        data.reads.current.add(("derived", question, arg))
    return DERIVED[question][1](data.buckets(), arg)


def _digest(value: object) -> str:
    from site_plugins.build_cache import digest

    return digest(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))


class Generation:
    """Generated Markdown reused by what it read; ``load`` and ``keep`` reach the store."""

    def __init__(
        self,
        buckets: dict[str, dict[str, Any]],
        reads: Reads,
        base: str,
        load: Callable[[str], dict[str, Any] | None],
        keep: Callable[[str, dict[str, Any]], None],
        digests: dict[str, str] | None = None,
    ) -> None:
        self.buckets = buckets
        #: Record name → digest of its body (the catalog's row digests), when known.
        self.digests = digests or {}
        self.reads = reads
        self.base = base
        self._load = load
        self._keep = keep
        self._digests: dict[Read, str] = {}
        self._columns: dict[tuple[str, str], str] = {}
        self._answers: dict[str, dict[object, list[str]] | None] = {}
        self.made: list[str] = []  # pages generated afresh in this build

    def digest_of(self, read: Read) -> str:
        if read not in self._digests:
            what, kind, name = read
            bucket = self.buckets.get(kind, {})
            if what == "derived":  # (derived, question, argument)
                home, answer = DERIVED[kind]
                if kind not in self._answers:  # the buckets do not change during a build
                    self._answers[kind] = _every_answer(self.buckets, kind)
                every = self._answers[kind]
                names = every.get(name, []) if every is not None else answer(self.buckets, name)
                value: object = [[n, self._record(self.buckets[home], n)] for n in names]
            elif what == "record":
                value = self._record(bucket, name)
            elif what == "fields":  # (fields, kind, fields): of every record of the kind
                value = [self._column(kind, field) for field in json.loads(name)]
            elif what == "names":
                value = sorted(dict.keys(bucket))
            else:
                value = [[n, self._record(bucket, n)] for n in sorted(dict.keys(bucket))]
            self._digests[read] = _digest(value)
        return self._digests[read]

    def _column(self, kind: str, field: str) -> str:
        """The digest of ``field`` of every record of ``kind`` (with their names),
        computed once per build: pages ask for many sets of the same fields."""
        key = (kind, field)
        if key not in self._columns:
            bucket = self.buckets.get(kind, {})
            self._columns[key] = _digest(
                [[n, rec[field]] if field in rec else [n] for n, rec in sorted(dict.items(bucket))]
            )
        return self._columns[key]

    def _record(self, bucket: dict[str, Any], name: str) -> object:
        """A record as compared: its catalog digest, else its body (None: no such record)."""
        if not dict.__contains__(bucket, name):
            return None
        return self.digests.get(name) or dict.get(bucket, name)

    def _still(self, reads: object) -> bool:
        """Does every stored read give the digest it gave?"""
        if not isinstance(reads, list):
            return False
        try:
            return all(self.digest_of((str(w), str(k), str(n))) == d for w, k, n, d in reads)
        except (TypeError, ValueError, KeyError):
            return False

    def page(self, path: str, make: Callable[[], str]) -> str:
        """``make()``'s text for ``path``, reused while everything it read is the same."""
        from site_plugins.build_cache import digest

        key = digest("generated", self.base, path)
        stored = self._load(key)
        if stored is not None and self._still(stored.get("reads")):
            return str(stored.get("text", ""))
        outer, self.reads.current = self.reads.current, set()
        outer_fields, self.reads.fields = self.reads.fields, {}
        try:
            text = make()
            seen = self.reads.noted()
        finally:
            self.reads.current, self.reads.fields = outer, outer_fields
        if outer is not None:
            outer |= seen
        self._keep(key, {"reads": [[*r, self.digest_of(r)] for r in sorted(seen)], "text": text})
        self.made.append(path)
        return text
