"""Load, validate and cross-check the record tree.

This is the slow, thorough path (PyYAML + pydantic): ``kb validate`` runs it, and the
compiled cache (:mod:`kb.catalog.compiled`) runs it once per change of the records.  Problems
are collected, never raised, so one run reports every broken record as
``file:line:col: field: what is wrong``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kb.catalog.models import MODELS, DecisionTree, Operator, Playbook, ReferenceChain
from kb.catalog.parsed import ParsedFiles
from kb.catalog.recordfiles import MAX_RECORD_BYTES, Problem, discover
from kb.core import yamlpos
from kb.core.paths import NotRegularFile, is_utf8, read_regular_file


@dataclass
class Loaded:
    """A validated record with the positions of its source file."""

    record: BaseModel
    file: str
    located: yamlpos.Located
    #: The key of its own checks (kb.catalog.parsed), "" when not known.
    checks: str = ""


@dataclass
class StoreResult:
    records: dict[str, Loaded]
    names: dict[str, str]  # every spelling (name, call path, alias) → record name
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems


def record_files(root: Path) -> list[Path]:
    return discover(root)[0]


def _loc_to_path(loc: Iterable[Any]) -> tuple[Any, ...]:
    # pydantic uses the alias in loc when validating by alias, which is our YAML key.
    return tuple(x for x in loc if not (isinstance(x, str) and x.startswith("function-")))


_format_field = yamlpos.dotted


def _describe(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        import difflib

        expected = str(err.get("ctx", {}).get("expected", ""))
        allowed = [x.strip(" '") for x in expected.replace(" or ", ", ").split(",")]
        value = err.get("input")
        from kb.vocab import scheme_meanings

        close = difflib.get_close_matches(str(value), allowed, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
        shared = [m for m in scheme_meanings(value) if m in allowed]
        if len(shared) > 1:  # ``w8a8``: a spelling of several schemes, not a typo of one
            hint = f"; it names more than one scheme, write one of {', '.join(shared)}"
        return f"{value!r} is not an allowed value{hint}"
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def validate_file(
    path: Path, rel: str, parsed: ParsedFiles | None = None
) -> tuple[Loaded | None, list[Problem]]:
    """One record file, parsed (or its parse restored from ``parsed``) and validated."""
    try:
        raw = read_regular_file(path, MAX_RECORD_BYTES + 1, confined=False)  # kb's own files
        located = parsed.located(raw) if parsed is not None else None
        if located is None:
            located = yamlpos.load_bytes(raw, max_bytes=MAX_RECORD_BYTES)
            if parsed is not None:
                parsed.keep(raw, located)
    except yamlpos.YamlError as exc:
        return None, [Problem(rel, exc.line, exc.column, "", exc.message)]
    except NotRegularFile as exc:
        return None, [Problem(rel, 1, 1, "", f"is {exc.kind}, not a record file")]
    except OSError as exc:
        return None, [Problem(rel, 1, 1, "", f"cannot read: {exc.strerror or exc}")]
    data = located.data
    if not isinstance(data, dict):
        return None, [Problem(rel, 1, 1, "", "a record is a YAML mapping")]
    kind = data.get("kind", "operator")
    model = MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        line, col = located.where(("kind",))
        allowed = ", ".join(MODELS)
        return None, [Problem(rel, line, col, "kind", f"{kind!r} is not a record kind ({allowed})")]
    try:
        record = model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = _loc_to_path(err["loc"])
            is_key = err.get("type") in ("extra_forbidden",)
            line, col = located.where(loc, key=is_key)
            problems.append(Problem(rel, line, col, _format_field(loc), _describe(dict(err))))
        return None, problems
    checks = parsed.check_key(parsed.key(raw)) if parsed is not None else ""
    return Loaded(record, rel, located, checks), []


def _check_references(result: StoreResult) -> None:
    """Every name a record points at must exist (and be of the right kind)."""
    recs = result.records

    def resolve(name: str) -> str | None:
        return result.names.get(name)

    def need(loaded: Loaded, path: tuple[Any, ...], target: str, kinds: tuple[str, ...]) -> None:
        real = resolve(target)
        if real is None:
            hint = _suggest(target, result.names)
            msg = f"{target!r} names no record" + (f" (did you mean {hint}?)" if hint else "")
        elif recs[real].record.kind not in kinds:  # type: ignore[attr-defined]
            msg = f"{target!r} is a {recs[real].record.kind}, expected {' or '.join(kinds)}"  # type: ignore[attr-defined]
        else:
            return
        line, col = loaded.located.where(path)
        result.problems.append(Problem(loaded.file, line, col, _format_field(path), msg))

    for loaded in recs.values():
        rec = loaded.record
        if isinstance(rec, Operator):
            if rec.superseded_by:
                need(loaded, ("superseded_by",), rec.superseded_by, ("operator",))
            for i, name in enumerate(rec.supersedes):
                need(loaded, ("supersedes", i), name, ("operator",))
            for i, name in enumerate(rec.related):
                need(loaded, ("related", i), name, ("operator", "chain", "tree"))
        elif isinstance(rec, ReferenceChain):
            for i, stage in enumerate(rec.stages):
                if stage.operator != "plain-torch":
                    need(loaded, ("stages", i, "operator"), stage.operator, ("operator",))
            for i, name in enumerate(rec.related):
                need(loaded, ("related", i), name, ("operator", "chain", "tree"))
            if rec.variant_of:
                need(loaded, ("variant_of",), rec.variant_of, ("chain",))
        elif isinstance(rec, Playbook):
            for i, name in enumerate(rec.related):
                need(loaded, ("related", i), name, ("operator", "chain", "tree"))
        elif isinstance(rec, DecisionTree):
            for n_i, node in enumerate(rec.nodes):
                for o_i, opt in enumerate(node.options):
                    base = ("nodes", n_i, "options", o_i)
                    if opt.chain:
                        need(loaded, base + ("chain",), opt.chain, ("chain",))
                    for k, alt in enumerate(opt.alternatives):
                        need(loaded, base + ("alternatives", k, "chain"), alt.chain, ("chain",))
                    for k, op in enumerate(opt.operators):
                        need(loaded, base + ("operators", k), op, ("operator",))


def _reachable_chains(tree: DecisionTree) -> set[str]:
    """The chains an option names (its own or an alternative) on a node the root reaches."""
    nodes = {n.id: n for n in tree.nodes}
    named: set[str] = set()
    todo, seen = [tree.root], set()
    while todo:
        node = nodes.get(todo.pop())
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        for opt in node.options:
            named.update([opt.chain] if opt.chain else [])
            named.update(a.chain for a in opt.alternatives)
            if opt.goto:
                todo.append(opt.goto)
    return named


def _check_question_paths(result: StoreResult) -> None:
    """With decision trees in the store, every chain is named on some question path: the
    selector fits a chain only where a path leads to it, so a chain no tree reaches is
    advice nobody can be given.  (A store without trees - a records-only fixture - has no
    question order to hold chains to.)"""
    trees = [ld.record for ld in result.records.values() if isinstance(ld.record, DecisionTree)]
    if not trees:
        return
    reached: set[str] = set()
    for tree in trees:
        reached |= _reachable_chains(tree)
    for name, loaded in result.records.items():
        if isinstance(loaded.record, ReferenceChain) and name not in reached:
            line, col = loaded.located.where(("name",))
            result.problems.append(
                Problem(
                    loaded.file,
                    line,
                    col,
                    "name",
                    f"chain {name!r} is on no question path: no option reached from a tree's "
                    "root names it (as its chain or an alternative); name it in a tree",
                )
            )


def _check_signature(loaded: Loaded) -> list[Problem]:
    """The structured parameters must say what the schema string says."""
    from kb.catalog.signature import SchemaError, parse_schema

    rec = loaded.record
    if not isinstance(rec, Operator) or not rec.signature:
        return []
    problems: list[Problem] = []

    def add(path: tuple[Any, ...], msg: str) -> None:
        line, col = loaded.located.where(path)
        problems.append(Problem(loaded.file, line, col, _format_field(path), msg))

    try:
        schema = parse_schema(rec.signature)
    except SchemaError as exc:
        add(("signature",), str(exc))
        return problems
    if schema.name != rec.name and rec.name not in rec.aliases:
        add(("signature",), f"schema names {schema.name!r}, record is {rec.name!r}")
    by_name = {p.name: (i, p) for i, p in enumerate(rec.parameters)}
    expected = [a.name for a in schema.args]
    if [p.name for p in rec.parameters] != expected:
        missing = [n for n in expected if n not in by_name]
        extra = [p.name for p in rec.parameters if p.name not in expected]
        detail = []
        if missing:
            detail.append(f"missing {missing}")
        if extra:
            detail.append(f"not in the schema {extra}")
        if not detail:
            detail.append("order differs from the schema")
        add(("parameters",), "parameters disagree with signature: " + "; ".join(detail))
    for arg in schema.args:
        if arg.name not in by_name:
            continue
        i, p = by_name[arg.name]
        want = {
            "type": arg.type,
            "required": arg.required,
            "default": arg.default,
            "keyword_only": arg.keyword_only,
            "mutated": arg.mutated,
        }
        for attr, value in want.items():
            if getattr(p, attr) != value:
                add(("parameters", i, attr), f"is {getattr(p, attr)!r}, the schema says {value!r}")
    if rec.returns and len(rec.returns) != len(schema.returns):
        add(
            ("returns",), f"{len(rec.returns)} returns listed, the schema has {len(schema.returns)}"
        )
    return problems


def _check_consistency(result: StoreResult, parsed: ParsedFiles | None = None) -> None:
    """Cross-field checks of operator records (:mod:`kb.catalog.consistency`).  A record
    whose bytes passed its own checks with the same code is not checked again."""
    from kb.catalog.consistency import Report, check_lineage, check_operator

    def report_for(name: str) -> Report:
        loaded = result.records[name]

        def report(path: tuple[Any, ...], msg: str) -> None:
            line, col = loaded.located.where(path)
            result.problems.append(Problem(loaded.file, line, col, _format_field(path), msg))

        return report

    ops = {n: ld.record for n, ld in result.records.items() if isinstance(ld.record, Operator)}
    for name, rec in ops.items():
        key = result.records[name].checks
        if parsed is not None and parsed.passed(key):
            continue
        before = len(result.problems)
        check_operator(rec, report_for(name))
        if parsed is not None and len(result.problems) == before:
            parsed.passes(key)
    check_lineage(ops, report_for)


def _suggest(name: str, names: dict[str, str]) -> str | None:
    from kb.core.fuzzy import suggest

    hits = suggest(name, list(names), limit=1)
    return hits[0] if hits else None


def spellings(rec: BaseModel) -> list[str]:
    """Every way a user may spell a record's name (name, call paths, aliases)."""
    name = rec.name  # type: ignore[attr-defined]
    out = [name]
    if isinstance(rec, Operator):
        out += rec.calls + rec.aliases
    return out


def load_store(root: Path) -> StoreResult:
    result = StoreResult(records={}, names={}, problems=[])
    if not root.is_dir():
        result.problems.append(Problem(str(root), 1, 1, "", "records directory not found"))
        return result
    if not is_utf8(str(root)):
        message = "the records directory's path is not valid UTF-8; give a UTF-8 path"
        result.problems.append(Problem(str(root), 1, 1, "", message))
        return result
    files, result.problems = discover(root)
    parsed = ParsedFiles(root)
    try:
        _load_checked(root, files, result, parsed)
    finally:
        parsed.close()
    result.problems.sort(key=lambda p: (p.file, p.line, p.column))
    return result


def _load_checked(root: Path, files: list[Path], result: StoreResult, parsed: ParsedFiles) -> None:
    parsed.start_checks()
    for path in files:
        _load_file(root, path, result, parsed)
    for name, loaded in result.records.items():
        for spelling in spellings(loaded.record):
            owner = result.names.get(spelling)
            if owner is not None and owner != name:
                line, col = loaded.located.where(("calls",))
                msg = f"{spelling!r} already names {owner!r}"
                result.problems.append(Problem(loaded.file, line, col, "calls", msg))
                continue
            result.names[spelling] = name
    _check_references(result)
    _check_question_paths(result)
    _check_consistency(result, parsed)


def _load_file(root: Path, path: Path, result: StoreResult, parsed: ParsedFiles) -> None:
    rel = str(path.relative_to(root))
    loaded, problems = validate_file(path, rel, parsed)
    result.problems += problems
    if loaded is None:
        return
    name = loaded.record.name  # type: ignore[attr-defined]
    if name in result.records:
        line, col = loaded.located.where(("name",))
        other = result.records[name].file
        result.problems.append(
            Problem(rel, line, col, "name", f"{name!r} is also defined in {other}")
        )
        return
    expected_stem = name
    if path.stem != expected_stem:
        line, col = loaded.located.where(("name",))
        msg = f"file name should be {expected_stem}{path.suffix} (one record per file, named by it)"
        result.problems.append(Problem(rel, line, col, "name", msg))
    result.records[name] = loaded
    result.problems += _check_signature(loaded)
