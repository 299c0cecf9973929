"""Calls of operators torch_npu does not define: the tree's own, extension packages', unknown.

Three sources say who registers an operator, in this order:

* the scanned tree itself (:mod:`kb.scan.registrations`: C++ ``TORCH_LIBRARY`` blocks,
  Python ``torch.library`` definitions and ``custom_op`` decorators) -- the call is the
  tree's own API and is checked against the registered schema (errors, as Python would
  raise them);
* an extension record (``kb/records/extensions/``): a public kernel package's operator,
  reported as info naming the package and checked against the schema the package
  registered at the recorded commit (warnings: the engine may pin another version);
* nobody in sight: in a namespace that is not torch_npu's (``torch.ops.<ns>`` for any
  ``ns`` but torch_npu's and PyTorch's own), or in ``torch.ops.npu`` when the file
  imports code that may register operators there, the call is info ("not a torch_npu
  operator; registered by X?"), never an error.

*Code that may register operators* is, for a file: a module an extension record lists as
registering ones; a module imported only for its side effects (its bound name appears
nowhere else in the file but in availability tests: the ``import pkg  # noqa: F401`` idiom
by which compiled extensions are loaded, or ``try: import pkg`` / ``except ImportError:
pkg = None`` / ``if pkg is None``); or a run-time loader (``torch.ops.load_library`` and kin, see
:data:`kb.scan.callsites.LOADERS`).  Standard-library modules, torch and torch_npu never
count.  A name in a torch_npu namespace with none of these is an unknown torch_npu operator
(KB101), whose did-you-mean lists only operators whose schema accepts the call.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from kb.lint.findings import Finding
from kb.scan import rules
from kb.scan.binding import bind
from kb.scan.registrations import KERNEL_NAMESPACE, Registration, kernel_key
from kb.scan.sites import CallSite
from kb.vocab import NAMESPACE_PATHS, TORCH_NAMESPACES

#: torch_npu's own scanner namespaces (``torch_npu``, ``npu``, ``atb``, ``torch.npu``).
TORCH_NPU_NAMESPACES = frozenset(NAMESPACE_PATHS)
#: Top-level modules whose import registers nothing foreign.
_OWN_MODULES = frozenset({"torch", "torch_npu", "__future__"}) | frozenset(sys.stdlib_module_names)
UNKNOWN_ARGUMENT = "KB104"
UNKNOWN_OPERATOR = "KB101"


@dataclass
class Registry:
    """Who registers which operator: the tree (all files) and the extension records."""

    tree: dict[tuple[str | None, str], list[Registration]] = field(default_factory=dict)
    packages: dict[tuple[str, str], list[Registration]] = field(default_factory=dict)
    #: import path -> package name (extension records)
    imports: dict[str, str] = field(default_factory=dict)
    #: namespace -> names of the packages (records) and files (tree) registering in it
    namespaces: dict[str, list[str]] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: kernel key -> a kernel the tree builds (``OP_ADD``), see :func:`kernel_key`
    kernels: dict[str, Registration] = field(default_factory=dict)

    @classmethod
    def build(
        cls, registrations: Iterable[Registration], extensions: Iterable[dict[str, Any]]
    ) -> Registry:
        out = cls()
        for reg in sorted(registrations, key=lambda r: (r.file, r.line, r.name)):
            if reg.namespace == KERNEL_NAMESPACE:
                out.kernels.setdefault(kernel_key(reg.name), reg)
                continue
            out.tree.setdefault((reg.namespace, reg.name), []).append(reg)
            if reg.namespace is not None:
                _add(out.namespaces, reg.namespace, f"{reg.file} (scanned)")
        for rec in extensions:
            pkg = str(rec["name"])
            out.records[pkg] = rec
            for imp in rec.get("imports") or []:
                out.imports[imp] = pkg
            for ns in rec.get("namespaces") or []:
                _add(out.namespaces, ns, pkg)
            for op in rec.get("operators") or []:
                reg = Registration(
                    op["namespace"],
                    op["name"],
                    op.get("schema"),
                    op["path"],
                    int(str(op["lines"]).split("-")[0]),
                    package=pkg,
                    condition=tuple(filter(None, [op.get("condition")])),
                    not_built=tuple(op.get("not_built") or ()),
                )
                out.packages.setdefault((op["namespace"], op["name"]), []).append(reg)
        return out

    def in_tree(self, namespace: str, name: str) -> list[Registration]:
        """Registrations of the tree; one whose namespace is a macro matches any foreign one."""
        exact = self.tree.get((namespace, name), [])
        if namespace in TORCH_NPU_NAMESPACES:
            return exact
        return exact + self.tree.get((None, name), [])

    def in_packages(self, namespace: str, name: str) -> list[Registration]:
        return self.packages.get((namespace, name), [])

    def package_of(self, module: str) -> str | None:
        """The extension record whose import path ``module`` is (or is under)."""
        parts = module.split(".")
        for i in range(len(parts), 0, -1):
            pkg = self.imports.get(".".join(parts[:i]))
            if pkg is not None:
                return pkg
        return None


def _add(table: dict[str, list[str]], key: str, value: str) -> None:
    values = table.setdefault(key, [])
    if value not in values:
        values.append(value)


#: A dotted name, and what follows it when that only tests it for availability
#: (``pkg is None``, ``pkg is not None``, ``pkg = None``).
_DOTTED = re.compile(r"([A-Za-z_][\w.]*)(\s*(?:is\s+(?:not\s+)?None\b|=\s*None\b))?")


def registering_imports(
    imports: list[tuple[str, str, int]], text: str, registry: Registry, loads: bool
) -> list[str]:
    """What in a file may register operators (module docstring): packages, modules, loaders.

    A module's bound name (its dotted path for ``import a.b``) used only by its import
    statement marks a side-effect import; an availability test (``pkg = None`` in an
    ``except ImportError``, ``if pkg is None``) uses none of its API and is not counted.
    Uses are counted in one pass over the text.
    """
    out: list[str] = []
    uses: Counter[str] | None = None
    for dotted, bound, _line in imports:
        pkg = registry.package_of(dotted)
        if pkg is not None:
            if pkg not in out:
                out.append(pkg)
            continue
        if dotted.split(".")[0] in _OWN_MODULES or dotted in out:
            continue
        if uses is None:
            uses = _uses(text, {_used(d, b) for d, b, _l in imports})
        if uses[_used(dotted, bound)] <= 1:
            out.append(dotted)
    if loads:
        out.append("a library loaded at run time")
    return out


def _used(dotted: str, bound: str) -> str:
    """The name an import's uses are written as: its bound name, or ``a.b`` of ``import a.b``."""
    return bound if bound != dotted or "." not in dotted else dotted


#: String literals and comments (triple-quoted first), whose words are not uses.
_PROSE = re.compile(
    r'"""[\s\S]*?(?:"""|$)|\'\'\'[\s\S]*?(?:\'\'\'|$)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*'
)


def _uses(text: str, wanted: set[str]) -> Counter[str]:
    """How often each of ``wanted`` is written in code as a name or dotted prefix (``a``,
    ``a.b`` of ``a.b.c``), availability tests, strings and comments left out; words
    starting with no wanted name are passed over."""
    heads = {name.split(".", 1)[0] for name in wanted}
    out: Counter[str] = Counter()
    for word, test in _DOTTED.findall(_PROSE.sub(" ", text)):
        parts = word.rstrip(".").split(".")
        if test or parts[0] not in heads:
            continue
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in wanted:
                out[prefix] += 1
    return out


def may_be_foreign(op: Any, ctx: Any) -> bool:
    """Whether judging a call may ask what its file imports: a foreign namespace, or a name
    of ``torch.ops.npu`` no record has."""
    if op.namespace not in TORCH_NPU_NAMESPACES:
        return op.namespace not in TORCH_NAMESPACES
    return op.namespace == "npu" and ctx.operator(op.spelled) is None


def check_schema(
    site: CallSite, regs: list[Registration], severity: str, codes: set[str]
) -> list[Finding]:
    """Findings of a call against the schemas registered for it: none when one accepts it,
    or when one is a definition by name only (``m.def("x", &fn)``: it takes anything as far
    as the reader knows).  Exclusive builds are told apart by path: a registration built for
    another backend (``csrc/cpu/…``, a ROCm source) is not an NPU build's, so the call is
    judged against the others; against it alone, what it rejects is only info."""
    defs = [r for r in regs if r.defines]
    npu = [r for r in defs if r.other_build is None]
    pool = npu or defs
    if any(r.parameters() is None for r in pool):
        return []
    found = _first_rejection(site, pool, severity, codes)
    if npu:
        return found
    return [
        replace(
            f,
            severity="info",
            message=f"{f.message}; that is a {defs[0].other_build} build's "
            "registration, the NPU build may register it otherwise",
        )
        for f in found
    ]


def _first_rejection(
    site: CallSite, regs: list[Registration], severity: str, codes: set[str]
) -> list[Finding]:
    first: list[Finding] | None = None
    for reg in regs:
        params = reg.parameters()
        if params is None:
            continue
        found = _bind(site, reg, params, severity, codes)
        if not found:
            return []
        first = first if first is not None else found
    return first or []


def _bind(
    site: CallSite, reg: Registration, params: list[dict[str, Any]], severity: str, codes: set[str]
) -> list[Finding]:
    where = f"{reg.package} at {reg.where}" if reg.package else reg.where
    bound = bind(site, {"name": site.op.name, "parameters": params})
    out = [
        Finding(
            site.file,
            p.where.line,
            p.where.column,
            p.code,
            severity,  # type: ignore[arg-type]
            f"{p.message} (schema registered at {where})",
            None,
        )
        for p in bound.problems
        if p.code in codes
    ]
    names = {p["name"] for p in params}
    if UNKNOWN_ARGUMENT in codes and site.op.overload in (None, "default"):
        for kw, entry in site.keywords.items():
            if kw not in names:
                at = entry.key_where or entry.where
                out.append(
                    Finding(
                        site.file,
                        at.line,
                        at.column,
                        UNKNOWN_ARGUMENT,
                        severity,  # type: ignore[arg-type]
                        f"{site.op.spelled} has no parameter {kw!r} in the schema "
                        f"registered at {where}",
                        None,
                    )
                )
    return out


def compatible(site: CallSite, record: dict[str, Any]) -> bool:
    """Whether a record's schema accepts the call as written (arity and keywords)."""
    params = record.get("parameters") or []
    if bind(site, record).problems:
        return False
    from kb.catalog.binding import python_name

    accepted = {p["name"] for p in params} | {python_name(p) for p in params}
    return all(kw in accepted for kw in site.keywords)


def info(site: CallSite, message: str) -> Finding:
    return rules.FOREIGN_OPERATOR.finding(
        site.file, site.func_where.line, site.func_where.column, message
    )


def who(site: CallSite, registry: Registry, registering: list[str]) -> str:
    """The likely registrars of an unknown foreign name, for the info message."""
    names = list(registry.namespaces.get(site.op.namespace, []))
    names += [m for m in registering if m not in names]
    if not names:
        return "code outside the scanned tree?"
    return f"{' or '.join(names[:3])}?"


def package_message(site: CallSite, regs: list[Registration], registry: Registry) -> str:
    reg = regs[0]
    rec = registry.records.get(reg.package or "", {})
    imports = ", ".join(rec.get("imports") or [])
    at = f"{rec.get('repo', '?')}@{str(rec.get('commit', ''))[:12]}"
    return (
        f"{site.op.spelled} is not a torch_npu operator: the {reg.package} package registers "
        f"{reg.namespace}::{reg.name} (import {imports}; {at} {reg.file}:{reg.line})"
    )


def unknown_in_namespace(
    site: CallSite, registry: Registry, registering: list[str], shadows: bool
) -> str:
    """Info text for a name nobody in sight registers."""
    op = site.op
    msg = f"{op.spelled} is not a torch_npu operator; registered by {who(site, registry, registering)}"
    if shadows:
        msg += (
            f" (torch_npu's {op.name} is another operator: torch.ops.{op.namespace} is not a "
            "torch_npu namespace, so its record does not apply)"
        )
    return msg


def suggestions(site: CallSite, ctx: Any) -> str:
    """KB101's did-you-mean: close names whose schema accepts the call as written."""
    from kb.core.fuzzy import suggest

    hits = [
        n
        for n in suggest(site.op.name, ctx.names("operator"), limit=6)
        if (rec := ctx.operator(n)) is not None and compatible(site, rec)
    ]
    return f" (did you mean {', '.join(hits[:3])}?)" if hits else ""


def unknown_operator(site: CallSite, ctx: Any) -> Finding:
    msg = (
        f"unknown operator {site.op.spelled!r}{suggestions(site, ctx)}; check the spelling "
        "with 'kb search'"
    )
    return Finding(
        site.file,
        site.func_where.line,
        site.func_where.column,
        UNKNOWN_OPERATOR,
        "error",
        msg,
        None,
    )


@dataclass
class FileView:
    """What judging a call needs to know of its file."""

    mounts: set[tuple[str, str]]  # this file's assignments onto torch_npu / torch.ops
    tree_mounts: set[tuple[str, str]]  # every file's (they add names torch_npu lacks)
    registering: list[str]  # what in the file may register operators (module docstring)
    loaded: set[str]  # names a file that loads a compiled extension mentions
    custom: set[str]  # [tool.kb] custom-ops and --custom-op
    codes: set[str]  # the active rule codes


class Verdict(NamedTuple):
    """How the engine goes on with one call."""

    judged: bool  # judge it against its torch_npu record as usual
    custom: bool  # the tree's (or a package's) own operator
    findings: list[Finding]
    note: str | None = None
    skip: bool = False  # not an operator call worth a site (torch.npu device API, PyTorch's own)


def not_built(
    site: CallSite, regs: list[Registration], product: str | None, codes: set[str]
) -> list[Finding]:
    """A package operator every registration of which the target product's build leaves out."""
    if product is None or rules.NOT_BUILT.code not in codes or not regs:
        return []
    from kb.vocab import product_family

    if not all(product in r.not_built or product_family(product) in r.not_built for r in regs):
        return []
    reg = regs[0]
    return [
        rules.NOT_BUILT.finding(
            site.file,
            site.func_where.line,
            site.func_where.column,
            f"{site.op.spelled}: the {reg.package} package compiles {reg.namespace}::{reg.name} only "
            f"under {reg.condition[0] if reg.condition else 'a build condition'}, which its build for "
            f"{product} leaves out ({reg.file}:{reg.line}); guard the call or use another operator "
            "on this product",
        )
    ]


def verdict(
    site: CallSite,
    record: dict[str, Any] | None,
    ctx: Any,
    registry: Registry,
    view: FileView,
    product: str | None = None,
) -> Verdict:
    """Who registers the called operator, and what that means for the call (module docstring);
    ``product`` is the one the call is judged on (a package may not build it there)."""
    op, codes = site.op, view.codes
    info_on = rules.FOREIGN_OPERATOR.code in codes
    if op.namespace not in TORCH_NPU_NAMESPACES:
        if op.namespace in TORCH_NAMESPACES:
            return Verdict(False, False, [], skip=True)
        regs = registry.in_tree(op.namespace, op.name)
        if regs:
            return Verdict(
                False, True, check_schema(site, regs, "error", codes), _tree_note(site, regs)
            )
        pkg = registry.in_packages(op.namespace, op.name)
        if pkg:
            shown = [info(site, package_message(site, pkg, registry))] if info_on else []
            shown += not_built(site, pkg, product, codes)
            return Verdict(False, True, shown + check_schema(site, pkg, "warning", codes))
        text = unknown_in_namespace(
            site, registry, view.registering, ctx.operator(op.name) is not None
        )
        return Verdict(False, True, [info(site, text)] if info_on else [])
    added = {(op.namespace, op.name), (op.namespace, "*")} & view.tree_mounts
    if (
        (op.namespace, op.name) in view.mounts
        or op.name in view.custom
        or op.spelled in view.custom
        or (record is None and added)
    ):
        return Verdict(
            False,
            True,
            [],
            f"{_at(site)}: {op.spelled} is a custom operator in this file "
            "(or declared in [tool.kb] custom-ops); not checked against the official record "
            "of that name",
        )
    regs = registry.in_tree(op.namespace, op.name)
    if regs:
        return Verdict(
            False, True, check_schema(site, regs, "error", codes), _tree_note(site, regs)
        )
    if record is not None:
        return Verdict(True, False, [])
    if ctx.known(op.spelled) is not None:
        return Verdict(
            True, False, []
        )  # torch_npu defines it without a record: KB120, bound to its schema
    if op.namespace == "torch.npu":
        return Verdict(False, False, [], skip=True)  # torch.npu is mostly device API, not operators
    kernel = registry.kernels.get(kernel_key(op.name))
    if kernel is not None and op.name.startswith("npu_"):
        text = (
            f"{op.spelled} is not a torch_npu operator: this tree builds its kernel "
            f"(OP_ADD({kernel.name}) at {kernel.where}); not checked against torch_npu"
        )
        return Verdict(False, True, [info(site, text)] if info_on else [])
    pkg = registry.in_packages(op.namespace, op.name)
    if pkg:
        shown = [info(site, package_message(site, pkg, registry))] if info_on else []
        shown += not_built(site, pkg, product, codes)
        return Verdict(False, True, shown + check_schema(site, pkg, "warning", codes))
    if op.name in view.loaded:
        return Verdict(
            False,
            True,
            [],
            f"{_at(site)}: {op.spelled} is named by a file of this tree that "
            "loads a compiled extension; not checked",
        )
    if op.namespace == "npu" and view.registering:
        text = (
            f"{op.spelled} is not a torch_npu operator; registered by "
            f"{' or '.join(view.registering[:3])}?{suggestions(site, ctx)}"
        )
        return Verdict(False, True, [info(site, text)] if info_on else [])
    return Verdict(False, False, [unknown_operator(site, ctx)] if UNKNOWN_OPERATOR in codes else [])


def _at(site: CallSite) -> str:
    return f"{site.file}:{site.where.line}:{site.where.column}"


def _tree_note(site: CallSite, regs: list[Registration]) -> str:
    schema = (
        "checked against its schema"
        if any(r.parameters() is not None for r in regs)
        else "registered by name only, not checked"
    )
    return (
        f"{_at(site)}: {site.op.spelled} is registered by this tree ({regs[0].where}); "
        f"{schema}, not against a torch_npu record"
    )


def extensions(ctx: Any, catalog: Any) -> list[dict[str, Any]]:
    """The extension records (public kernel packages' operators), read once per context."""
    if "extensions" not in ctx.memo:
        records = getattr(catalog, "records", None)
        ctx.memo["extensions"] = list(records("extension")) if records else []
    return ctx.memo["extensions"]  # type: ignore[no-any-return]


def packages(ctx: Any, catalog: Any) -> Registry:
    """The extension records alone (what a file's imports are matched against)."""
    if "packages" not in ctx.memo:
        ctx.memo["packages"] = Registry.build((), extensions(ctx, catalog))
    return ctx.memo["packages"]  # type: ignore[no-any-return]
