"""``kb scan``: Python model code → call sites → candidates → the same rule units as ``kb check``.

One rule engine, two readers: every torch_npu call becomes a candidate (its literal
arguments under ``args``, passed tensors under ``tensors``, variables under ``passed``)
and is judged by the operator and product/release rules of ``kb check``; what only
Python can get wrong (positional binding, missing arguments, keyword spellings) is the
KB5xx family, and unfused PyTorch patterns are the KB6xx family.
"""

from __future__ import annotations

import ast
import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from kb.core.linebreaks import python_lines
from kb.core.yamlpos import Located
from kb.lint.context import Context
from kb.lint.engine import active_rules, rules_for
from kb.lint.findings import Finding
from kb.lint.model import Candidate, Document, Target
from kb.lint.suppress import BAD_IGNORE_CODE
from kb.lint.unit import RuleUnit
from kb.scan import context, foreign, hints, overloads, pool
from kb.scan.binding import Bound
from kb.scan.config import Config, ConfigError, Settings, check_model_config, with_options
from kb.scan.config import load as load_config
from kb.scan.ignores import bad_ignore_comments, ignore_comments
from kb.scan.interp import CallSite, FileScan, Interpreter
from kb.scan.model import forget_trees
from kb.scan.registrations import Registration
from kb.scan.rules import SOURCE_UNREADABLE as UNREADABLE
from kb.scan.sources import (
    Skipped,
    Source,
    SourceError,
    discover,
    from_text,
    native_text,
    read,
    touches_npu,
    within_root,
)
from kb.scan.variants import Variant, merge_variants, settle, site_product, suppressed
from kb.vocab import NAMESPACE_PATHS

#: The scanner's names for the call-path namespaces records live under.
OPERATOR_NAMESPACES = tuple(NAMESPACE_PATHS)
#: Severity a rule has in scanned code when it differs from a candidate list's: a
#: deprecated operator in working code is a note about its successor, not a warning.
SCAN_SEVERITY = {"KB102": "info"}


@dataclass
class _Positions(Located):
    """Positions of Python call sites for the candidate rules, which speak YAML paths:
    a table filled by the scanner, answered like :meth:`Located.where` (the exact path,
    else its nearest ancestor)."""

    keys: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)
    values: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)

    def where(self, path: tuple[Any, ...], *, key: bool = False) -> tuple[int, int]:
        tables = (self.keys, self.values) if key else (self.values, self.keys)
        p = tuple(path)
        while True:
            for table in tables:
                if p in table:
                    return table[p]
            if not p:
                return (1, 1)
            p = p[:-1]

    def in_scalar(self, line: int, column: int) -> bool:
        return False


@dataclass
class ScanOptions:
    product: str | None = None
    torch_npu: str | None = None
    graph_mode: str | None = None
    quantization: str | None = None
    parallel: str | None = None  # kb.vocab.parallel: the deployment the plan targets
    model_config: str | None = None  # the checkpoint's hyper-parameters (a JSON file)
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    custom_ops: list[str] = field(default_factory=list)
    config: Path | None = None  # an explicit pyproject.toml
    use_config: bool = True
    fusion: bool = True  # report fusion opportunities (KB6xx)
    inventory: bool = True  # read the module inventory and plan (with fusion; not for findings)
    jobs: int | None = None  # processes reading files (None: KB_SCAN_JOBS, else the cores)


@dataclass
class SiteInfo:
    """One call of a torch_npu operator as the scan saw it (all variants merged)."""

    file: str
    line: int
    column: int
    end_line: int
    spelled: str
    record: str | None
    custom: bool
    scope: str
    products: list[str]
    phase: str | None
    args: dict[str, Any]
    passed: list[str]


@dataclass
class ScanReport:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    sites: list[SiteInfo] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    opportunities: list[Any] = field(default_factory=list)
    config: Path | None = None
    inventory: list[Any] = field(default_factory=list)  # kb.scan.model.entry.Module per module
    plan: list[dict[str, Any]] = field(default_factory=list)  # kb.scan.model.plan entries
    unread: list[Any] = field(default_factory=list)  # files the model reader did not read

    @property
    def calls(self) -> int:
        return len(self.sites)

    @property
    def ops(self) -> int:
        return len({s.record or s.spelled for s in self.sites})

    @property
    def candidates(self) -> int:
        return len(self.sites)

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)


class ScanError(Exception):
    """The scan cannot start: bad configuration or an unknown rule pattern."""


_Parsed = tuple[FileScan | None, Finding | None, ast.Module | None, str]
#: One file read: its KB500 finding (if any) and what judging needs of it (if readable).
_Outcome = tuple[Finding | None, "_Read | None"]


def parse_file(path: Path) -> _Parsed:
    """Read and interpret one file; a file that cannot be read yields one KB500 finding."""
    try:
        source = read(path)
    except SourceError as exc:
        return None, UNREADABLE.finding(str(path), exc.line, exc.column, exc.message), None, ""
    return parse_source(source)


def parse_text(text: str, shown_as: str) -> _Parsed:
    """:func:`parse_file` for source given as text: nothing is written or read."""
    try:
        source = from_text(text, shown_as)
    except SourceError as exc:
        return None, UNREADABLE.finding(shown_as, exc.line, exc.column, exc.message), None, ""
    return parse_source(source)


def parse_source(source: Source) -> _Parsed:
    """Parse and interpret source text; a syntax error yields one KB500 finding."""
    scan = FileScan(source.path, lines=python_lines(source.text))
    try:
        with warnings.catch_warnings():  # the scanned code's own warnings (invalid escapes
            warnings.simplefilter("ignore")  # in its strings) are not kb's to print
            tree = ast.parse(source.text, filename=source.path)
    except SyntaxError as exc:
        found = UNREADABLE.finding(
            source.path, exc.lineno or 1, exc.offset or 1, f"Python syntax error: {exc.msg}"
        )
        if not touches_npu(source.text):  # a template or py2 script: nothing of ours is missed
            found = replace(
                found,
                severity="warning",
                message=f"{found.message} (the file never names torch_npu)",
            )
        return None, found, None, ""
    except MemoryError:
        return _unreadable(source.path, "cannot parse: out of memory while parsing")
    except (ValueError, RecursionError) as exc:
        return _unreadable(source.path, f"cannot parse: {str(exc) or type(exc).__name__}")
    try:
        Interpreter(scan, tree).run()
    except RecursionError:
        return _unreadable(source.path, "nesting too deep to analyse")
    except MemoryError:
        return _unreadable(source.path, "out of memory while analysing")
    return scan, None, tree, source.text


def _unreadable(path: str, why: str) -> _Parsed:
    return None, UNREADABLE.finding(path, 1, 1, why), None, ""


class Scanner:
    """Scans Python files with one catalog and the rule units it is handed.

    ``rules`` is the whole registry (:data:`kb.rules.RULES`); each file's settings pick
    the codes that run, and the ``scan`` front end keeps the units meant for it.
    """

    def __init__(
        self, catalog: Any = None, options: ScanOptions | None = None, *, rules: Sequence[RuleUnit]
    ) -> None:
        if catalog is None:
            from kb.catalog.compiled import open_catalog

            catalog = open_catalog()
        self.catalog = catalog
        self.rules = tuple(rules)
        self.ctx = Context(catalog, codes=tuple(r.code for r in self.rules))
        self.options = options or ScanOptions()
        self._docs: context.Documentation | None = None  # READMEs of the scanned trees

    # -- configuration -----------------------------------------------------------------
    def _config(self, paths: Sequence[str]) -> Config:
        start = Path(paths[0]) if paths else Path.cwd()
        try:
            check_model_config(self.options.model_config)
            return load_config(start, self.options.config) if self.options.use_config else Config()
        except ConfigError as exc:
            raise ScanError(str(exc)) from None

    def _settings(self, config: Config, file: Path) -> Settings:
        return with_options(config.settings_for(file), self.options)

    # -- the scan ------------------------------------------------------------------------
    def scan_text(self, text: str, shown_as: str) -> ScanReport:
        """Scan Python source given as text (one file), reported under ``shown_as``."""
        return self.scan_source(text, shown_as)

    def scan_source(self, text: str, shown_as: str) -> ScanReport:
        """Scan source held in memory exactly as a file named ``shown_as`` holding it.

        Nothing touches the file system: ``shown_as`` is only a label (findings, sites
        and the path hints read it; a model config option is read).  No ``[tool.kb]``.
        """
        try:
            check_model_config(self.options.model_config)
        except ConfigError as exc:
            raise ScanError(str(exc)) from None
        report = ScanReport(files=1)
        try:
            outcome = self._outcome(Path(shown_as), parse_text(text, shown_as), Config())
        finally:
            forget_trees()
        self._judge_all([outcome], Config(), report)
        return report

    def scan(self, paths: Sequence[str], within: str | None = None) -> ScanReport:
        """Scan files and directories; ``within`` (a resolved directory) keeps every file
        read, Python or C++, inside it (a symlink out of it is skipped, never read)."""
        roots = [Path(p) if Path(p).is_dir() else Path(p).parent for p in paths]
        self._docs = context.Documentation(roots)
        config = self._config(paths)
        report = ScanReport(config=config.path)
        native: list[Path] = []
        files, skipped = discover(paths, [*config.exclude, *self.options.exclude], native=native)
        if within is not None:
            files, outside = within_root(files, within)
            native, outside_native = within_root(native, within)
            skipped += outside + outside_native
        report.skipped = skipped
        report.files = len(files)
        from kb.scan.registrations import native_registrations

        regs = []
        for path in native:
            shown, text = native_text(path)
            regs += native_registrations(text, shown)
        sizes = [_size(path) for path in files]
        processes = pool.processes_for(self.options.jobs, sizes)
        try:
            outcomes = pool.run_ordered(
                lambda i: self._outcome(files[i], parse_file(files[i]), config), sizes, processes
            )
        finally:
            forget_trees()  # the modules the reader followed: no tree outlives the scan
        self._judge_all(outcomes, config, report, regs)
        return report

    def _outcome(self, path: Path, parsed: _Parsed, config: Config) -> _Outcome:
        """One file read: its KB500 finding, or what judging needs of it.

        Each file is parsed, interpreted and searched for fusion patterns while its AST
        is alive, and only a :class:`_Read` (no AST, no source text) outlives it: a scan
        holds one tree at a time, not all of them (in each process reading files).
        """
        scan, problem, tree, text = parsed
        if scan is None or tree is None:
            return problem, None
        return problem, self._read(path, scan, tree, text, config)

    def _judge_all(
        self,
        outcomes: Sequence[_Outcome],
        config: Config,
        report: ScanReport,
        native: Sequence[Registration] = (),
    ) -> None:
        """Judge the call sites of every file read, in file order, once all are read.

        Registered operators, loaded extensions and mounts that add names torch_npu lacks
        are tree-wide facts, so the call sites wait for the last file; a mount replacing a
        torch_npu operator (``torch_npu.npu_x = mock``) changes that file only.
        """
        reads: list[_Read] = []
        for problem, one in outcomes:
            if problem is not None:
                report.findings.append(problem)
            if one is not None:
                reads.append(one)
        registry = foreign.Registry.build(
            [*native, *(g for r in reads for g in r.scan.registrations)],
            foreign.extensions(self.ctx, self.catalog),
        )
        loaded = {n for r in reads for n in r.scan.extension_names}
        mounts = {m for r in reads for m in r.scan.mounts}
        custom = set(config.custom_ops) | set(self.options.custom_ops)
        for r in reads:
            view = foreign.FileView(r.scan.mounts, mounts, r.registering, loaded, custom, r.codes)
            found = self._judge(r.scan, r.settings, view, registry, report)
            report.opportunities += r.opportunities
            report.inventory += r.modules
            report.plan += r.plan
            report.unread += r.unread
            found += [o.finding for o in r.opportunities if o.finding.code in r.codes]
            report.findings += suppressed(found, r.comments, r.scan)
            report.findings += r.bad_ignores
        report.findings = sorted(set(report.findings), key=Finding.sort_key)
        report.unread = list(dict.fromkeys(report.unread))

    def _read(
        self, path: Path, scan: FileScan, tree: ast.Module, text: str, config: Config
    ) -> _Read:
        """What judging needs of one interpreted file; its bodies and lines are let go."""
        settings = self._settings(config, path)
        try:
            codes = set(active_rules(self.rules, settings.select or None, settings.ignore or None))
        except ValueError as exc:
            raise ScanError(str(exc)) from None
        opps: list[Any] = []
        modules: list[Any] = []
        planned: list[dict[str, Any]] = []
        unread: list[Any] = []
        if self.options.fusion:
            from kb.scan.offers import opportunities

            opps = opportunities(scan, tree, self.ctx, settings)
        if self.options.fusion and self.options.inventory:
            from kb.scan.model.run import read_and_plan

            modules, planned, unread = read_and_plan(tree, scan.path, self.ctx, settings)
        scan.functions, scan.lines = [], []  # the AST nodes and the text: not needed to judge
        bad = (
            bad_ignore_comments(text, scan.path, self.ctx.codes) if BAD_IGNORE_CODE in codes else []
        )
        registering: list[str] = []
        if any(foreign.may_be_foreign(c.op, self.ctx) for c in scan.calls):
            registering = foreign.registering_imports(
                scan.imports,
                text,
                foreign.packages(self.ctx, self.catalog),
                bool(scan.extension_names),
            )
        return _Read(
            scan,
            settings,
            codes,
            opps,
            ignore_comments(text),
            bad,
            registering,
            modules,
            planned,
            unread,
        )

    def _judge(
        self,
        scan: FileScan,
        settings: Settings,
        view: foreign.FileView,
        registry: foreign.Registry,
        report: ScanReport,
    ) -> list[Finding]:
        codes = view.codes
        by_product: dict[str | None, list[tuple[CallSite, Bound, Candidate]]] = {}
        infos: dict[int, SiteInfo] = {}
        seen: dict[int, list[Variant]] = {}
        found: list[tuple[Finding, CallSite]] = []
        doc, doc_where = self._documented(scan.path)
        for site in scan.calls:
            op = site.op
            record = self.ctx.operator(op.spelled) if op.namespace in OPERATOR_NAMESPACES else None
            only, never = hints.products(site.cond, [*site.scope.split("."), op.name])
            product = site_product(settings.product, only, never)
            verdict = foreign.verdict(site, record, self.ctx, registry, view, product)
            found += [(f, site) for f in verdict.findings]
            if verdict.note and site.variant == 0:
                report.notes.append(verdict.note)
            if verdict.skip or op.namespace not in OPERATOR_NAMESPACES:
                continue
            phase = hints.phase(site.cond, site.scope.split("."))
            if not only and product == settings.product:
                product = context.docked(product, doc, doc_where, phase)
            shown = only or (doc if doc_where == "its path" else set())
            info = infos.get(site.node_id)
            if info is None:
                info = SiteInfo(
                    scan.path,
                    site.where.line,
                    site.where.column,
                    site.end_line,
                    op.spelled,
                    record["name"] if record else None,
                    verdict.custom,
                    site.scope,
                    sorted(shown),
                    phase,
                    {},
                    [],
                )
                infos[site.node_id] = info
                seen[site.node_id] = []
            if not verdict.judged:
                continue
            schemas = self._schemas(record, settings) if record else []
            bound = overloads.bind_call(site, self.ctx, record, schemas)
            seen[site.node_id].append(
                Variant(
                    dict(bound.args), bound.passed | set(bound.tensors), frozenset(shown), phase
                )
            )
            for problem in bound.problems:
                if problem.code in codes:
                    found.append((problem.finding(scan.path), site))
            cand = Candidate(
                index=0,
                kind="fusion",
                operator=op.spelled,
                phase=phase,
                args=dict(bound.args),
                tensors=dict(bound.tensors),
                passed=set(bound.passed),
                stated={"module", "operator", "args", "tensors"},
            )
            by_product.setdefault(product, []).append((site, bound, cand))
        for k, variants in seen.items():
            merge_variants(infos[k], variants)
        report.sites += [infos[k] for k in sorted(infos)]
        rules = rules_for(self.rules, "scan", codes)
        for product, items in by_product.items():
            if not product or not product.startswith(context.DOCKED):
                found += self._run_rules(scan, settings, product, items, rules)
                continue  # what only the target causes: a warning saying what the code is for
            plain = [(a, b, copy.deepcopy(c)) for a, b, c in items]  # the rules mark candidates
            without = self._run_rules(scan, settings, None, plain, rules)
            on_target = self._run_rules(scan, settings, settings.product, items, rules)
            found += context.demote_target_only(
                on_target, without, product.removeprefix(context.DOCKED)
            )
        return settle(context.demote_off_npu(found), scan)

    def _documented(self, path: str) -> tuple[set[str], str]:
        """Products a file's path or nearest README documents (:mod:`kb.scan.context`)."""
        if self._docs is None:
            return context.path_products(path), "its path"
        return self._docs.for_file(path)

    def _schemas(self, record: dict[str, Any], settings: Settings) -> list[tuple[str, str]]:
        """The schemas a call may meet: the target release's, else every harvested one."""
        key = ("schemas", record["name"], settings.torch_npu)
        if key in self.ctx.memo:
            return self.ctx.memo[key]  # type: ignore[no-any-return]
        changes = [
            (c["release"], c["schema"]) for c in (record.get("versions") or {}).get("changes") or []
        ]
        out = changes
        if settings.torch_npu:
            release, _exact = self.ctx.release(settings.torch_npu)
            from kb.catalog.releases import record_schema_in

            schema = record_schema_in(record, release) if release else None
            out = [(release, schema)] if release and schema else []
        distinct: dict[str, str] = {}
        for rel, schema in out:
            distinct.setdefault(" ".join(schema.split()), rel)
        self.ctx.memo[key] = [(rel, schema) for schema, rel in distinct.items()]
        return self.ctx.memo[key]  # type: ignore[no-any-return]

    def _run_rules(
        self,
        scan: FileScan,
        settings: Settings,
        product: str | None,
        items: list[tuple[CallSite, Bound, Candidate]],
        rules: list[Any],
    ) -> list[tuple[Finding, CallSite]]:
        located = _Positions(data=None)
        doc = Document(
            file=scan.path,
            text="",
            located=located,
            target=Target(
                product=product,
                torch_npu=settings.torch_npu,
                quantization=settings.quantization,
                graph_mode=settings.graph_mode,
                graph_modes=dict(settings.graph_modes),
            ),
        )
        doc.target_stated = True
        for i, (site, bound, cand) in enumerate(items):
            cand.index = i
            base = ("candidates", i)
            at = (site.where.line, site.where.column)
            fn = (site.func_where.line, site.func_where.column)
            located.values[base] = at
            for key in ("operator", "phase", "kind", "quantization", "status", "chain"):
                located.values[base + (key,)] = fn
                located.keys[base + (key,)] = fn
            for name, entry in bound.entries.items():
                section = "tensors" if name in bound.tensors else "args"
                located.values[base + (section, name)] = (entry.where.line, entry.where.column)
                kw = entry.key_where or entry.where
                located.keys[base + (section, name)] = (kw.line, kw.column)
                for other in ("args", "tensors", "passed"):
                    located.values.setdefault(
                        base + (other, name), (entry.where.line, entry.where.column)
                    )
                    located.keys.setdefault(base + (other, name), (kw.line, kw.column))
            doc.candidates.append(cand)
        out: list[tuple[Finding, CallSite]] = []
        for rule in rules:
            for f in rule.check(doc, self.ctx):
                severity = SCAN_SEVERITY.get(f.code, f.severity)
                site = items[f.candidate][0] if f.candidate is not None else items[0][0]
                out.append(
                    (
                        Finding(
                            f.file,
                            f.line,
                            f.column,
                            f.code,
                            severity,  # type: ignore[arg-type]
                            f.message,
                            None,
                        ),
                        site,
                    )
                )
        return out


def _size(path: Path) -> int:
    """Bytes of a file to read (0 when it cannot be stat'ed: reading it says why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _Read(NamedTuple):
    """One file as judging needs it, once its AST is gone."""

    scan: FileScan  # call sites, mounts and extension names (no function bodies, no lines)
    settings: Settings
    codes: set[str]
    opportunities: list[Any]
    comments: dict[int, tuple[str, ...]]  # line -> codes of its ``# kb: ignore`` comments
    bad_ignores: list[Finding]  # KB006: malformed ignore comments
    registering: list[str]  # what in the file may register operators (kb.scan.foreign)
    modules: list[Any]  # the module inventory (kb.scan.model)
    plan: list[dict[str, Any]]  # the plan of those modules
    unread: list[Any]  # kb.scan.model.files.Refusal: files the reader meant to follow, not read
