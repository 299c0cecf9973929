"""What rules may ask about the records, answered from the compiled catalog.

Lookups are memoised: a 500-candidate list names a dozen operators, and decoding a
record's JSON once per name keeps ``kb check`` inside its time budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kb.lint.model import Candidate, Path
from kb.vocab import LOOSE_CALL_PREFIXES

if TYPE_CHECKING:
    from kb.catalog.knownops import KnownOperator

Record = dict[str, Any]
#: The operator a prefetch point calls when it does not name one.
PREFETCH_OPERATOR = "npu_prefetch"
PLAYBOOK = "prefetch"


class Context:
    """Read-only access to records for one ``kb check`` run."""

    def __init__(self, catalog: Any, *, codes: tuple[str, ...] = ()) -> None:
        self.catalog = catalog
        #: Every rule code the registry knows (a suppression naming another is a typo).
        self.codes = codes
        self._records: dict[str, Record | None] = {}
        self._operators: dict[str, Record | None] = {}
        self._names: dict[str, list[str]] = {}
        self._classes: dict[str, Record] | None = None
        self._playbook: Record | bool | None = False
        self.memo: dict[Any, Any] = {}

    def record(self, spelling: str) -> Record | None:
        """Any record by name, call path or alias."""
        if spelling not in self._records:
            self._records[spelling] = self.catalog.get(spelling)
        return self._records[spelling]

    def operator(self, spelling: str | None) -> Record | None:
        """The operator record a spelling names (asked by most rules for every candidate)."""
        if not spelling:
            return None
        try:
            return self._operators[spelling]
        except KeyError:
            rec = self.record(spelling)
            found = rec if rec is not None and rec.get("kind") == "operator" else None
            self._operators[spelling] = found
            return found

    def chain(self, spelling: str | None) -> Record | None:
        if not spelling:
            return None
        rec = self.record(spelling)
        return rec if rec is not None and rec.get("kind") == "chain" else None

    def known(self, spelling: str | None) -> KnownOperator | None:
        """The torch_npu operator a name means when no record has it, from the generated
        schema data (``kb/data``): real code, so not an unknown operator."""
        if not spelling or self.operator(spelling) is not None:
            return None
        key = ("known", spelling)
        if key not in self.memo:
            from kb.catalog.knownops import load

            try:
                self.memo[key] = load().get(spelling)
            except (OSError, ValueError, KeyError):
                self.memo[key] = None
        return self.memo[key]  # type: ignore[no-any-return]

    def parameters(self, rec: Record) -> dict[str, dict[str, Any]]:
        """A record's parameters by name, built once per record: a dozen rules ask for
        every candidate, and 10,000 candidates name the same few operators."""
        key = ("parameters", id(rec))
        hit = self.memo.get(key)
        if hit is None or hit[0] is not rec:  # the record is kept, so its id stays its own
            hit = (rec, {p["name"]: p for p in rec.get("parameters") or []})
            self.memo[key] = hit
        return hit[1]  # type: ignore[no-any-return]

    def names(self, kind: str) -> list[str]:
        if kind not in self._names:
            self._names[kind] = list(self.catalog.names(kind))
        return self._names[kind]

    def operator_of(self, cand: Candidate) -> tuple[Record | None, Path]:
        """The operator record a candidate uses and the path of the value naming it.

        A prefetch point that names no operator calls ``npu_prefetch``; its findings
        point at the candidate's ``kind``.
        """
        if cand.operator:
            return self.operator(cand.operator), cand.path + ("operator",)
        if cand.kind == "prefetch":
            return self.operator(PREFETCH_OPERATOR), cand.path + ("kind",)
        return None, cand.path

    # -- the prefetch playbook ------------------------------------------------------
    def playbook(self) -> Record | None:
        if self._playbook is False:
            rec = self.record(PLAYBOOK)
            self._playbook = rec if rec is not None and rec.get("kind") == "playbook" else None
        return self._playbook  # type: ignore[return-value]

    def op_class(self, op: str | None) -> Record | None:
        """The playbook's op class for an op spelling (``matmul``, ``torch_npu.npu_swiglu``)."""
        if not op:
            return None
        if self._classes is None:
            self._classes = {}
            book = self.playbook() or {}
            for cls in book.get("op_classes", []):
                for name in cls.get("names", []):
                    self._classes[name.lower()] = cls
        key = op.strip().lower()
        for prefix in LOOSE_CALL_PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix) :]
                break
        return self._classes.get(key)

    # -- torch_npu releases (harvested wheels, kb/data/releases.json) ----------------
    def release(self, typed: str) -> tuple[str | None, bool]:
        """The harvested release a typed version stands for, and whether it was exact."""
        key = ("release", typed)
        if key not in self.memo:
            try:
                from kb.catalog.releases import load

                match = load().match(typed)
            except (OSError, ValueError, KeyError):
                match = None
            self.memo[key] = (match.release, match.exact) if match else (None, False)
        return self.memo[key]  # type: ignore[no-any-return]

    def record_has(self, rec: Record, release: str) -> bool | None:
        from kb.catalog.releases import record_has

        return record_has(rec, release)

    def signature_names(self, rec: Record, release: str) -> set[str] | None:
        """Argument names of the operator's schema in ``release``; None when unknown."""
        key = ("signature", rec.get("name"), release)
        if key not in self.memo:
            from kb.catalog.releases import record_schema_in
            from kb.catalog.signature import SchemaError, parse_schema

            schema = record_schema_in(rec, release)
            try:
                self.memo[key] = {a.name for a in parse_schema(schema).args} if schema else None
            except SchemaError:
                self.memo[key] = None
        return self.memo[key]  # type: ignore[no-any-return]

    def release_with_argument(self, rec: Record, arg: str, after: str) -> str | None:
        """The first release after ``after`` whose recorded schema has ``arg``."""
        from kb.catalog.releases import release_key
        from kb.catalog.signature import SchemaError, parse_schema

        start = release_key(after)
        for change in (rec.get("versions") or {}).get("changes") or []:
            key = release_key(change.get("release", ""))
            if key is None or start is None or key <= start:
                continue
            try:
                if arg in {a.name for a in parse_schema(change["schema"]).args}:
                    return str(change["release"])
            except SchemaError:
                continue
        return None

    def conservative_factor(self) -> float | None:
        book = self.playbook()
        value = book.get("conservative_factor") if book else None
        return float(value) if isinstance(value, (int, float)) else None
