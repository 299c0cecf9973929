"""All upstream facts of one operator, merged from pages, schemas, deprecations, wheel.

This is the single place that decides what upstream *says*: drafts, refresh and the
drift report all read :class:`OperatorFacts`, so they cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kb.catalog.signature import Schema, SchemaError, parse_schema
from tools.upstream import schemas as sch
from tools.upstream.docstrings import parse_docstring
from tools.upstream.pages import Page, ParamFacts, load_pages
from tools.upstream.wheel import read_wheel

CONFIG_DIRS = ("op_plugin/config", "config")


@dataclass
class OperatorFacts:
    name: str
    calls: list[str]
    status: str  # stable | beta | deprecated | undocumented
    page: Page | None
    schema: sch.SchemaEntry | None
    params: dict[str, ParamFacts]  # keyed by schema argument name
    returns: list[ParamFacts]
    products: list[str] | None  # None: upstream states no product list
    versions: list[str]
    deprecation: sch.Deprecation | None
    beta: bool = False
    docstring: bool = False
    unknown_products: list[str] = field(default_factory=list)
    unsupported_products: list[str] | None = None  # None: upstream states no product table
    deprecated_in: list[str] = field(default_factory=list)  # deprecated.yaml and/or page

    @property
    def upstream_path(self) -> str | None:
        return self.page.upstream_path if self.page else None

    @property
    def url(self) -> str | None:
        return self.page.url if self.page else None

    @property
    def schema_source(self) -> str | None:
        return self.schema.source if self.schema else None

    @property
    def parsed(self) -> Schema | None:
        if self.schema is None:
            return None
        try:
            return parse_schema(self.schema.text)
        except SchemaError:
            return None

    @property
    def replacement(self) -> str | None:
        if self.deprecation and self.deprecation.replacement:
            return self.deprecation.replacement
        return self.page.replacement_hint if self.page else None


@dataclass
class Exclusion:
    name: str
    reason: str


#: Why a ``npu_*`` / ``_npu_*`` schema without a page is not an operator a model calls.
EXCLUSION_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("backward or gradient kernel", re.compile(r"backward|(?:^|_)grad(?:_|$)|bk$")),
    ("out variant", re.compile(r"_out$")),
    ("_functional twin of an in-place operator", re.compile(r"_functional$")),
    ("graph-mode helper (output-shape inference)", re.compile(r"_infer_output$")),
)
#: Workspace helpers (``*_get_workspace``, ``*_get_max_workspace``) stay in: model code
#: calls them to size the scratch buffer of a graph-captured attention call.

#: Public torch_npu functions without the ``npu_`` prefix that shipping code calls
#: (vllm-ascend reads tensor formats with get_npu_format); the rest of that name space
#: (aten overrides, internal helpers) is not an operator a model picks.
EXTRA_PUBLIC = frozenset({"get_npu_format"})
#: torch_npu calls these itself; model code never does.
INTERNAL = {
    "_npu_silent_check": "torch_npu internal (silent data corruption check)",
    "_npu_silent_check_v2": "torch_npu internal (silent data corruption check)",
    "_npu_silent_check_v3": "torch_npu internal (silent data corruption check)",
    "_npu_matmul_abft_verify": "torch_npu internal (ABFT verification behind matmul_checksum)",
    "npu_change_data_ptr": "torch_npu internal (storage pointer swap)",
}
_PUBLIC_PREFIX = re.compile(r"^_?npu_")


def find_config(op_plugin: Path) -> Path | None:
    for rel in CONFIG_DIRS:
        if (op_plugin / rel / sch.OP_PLUGIN_FUNCTIONS).is_file():
            return op_plugin / rel
    for rel in CONFIG_DIRS:
        if (op_plugin / rel).is_dir():
            return op_plugin / rel
    return None


@dataclass
class Upstream:
    pages: list[Page]
    schemas: sch.SchemaIndex
    deprecated: dict[str, sch.Deprecation]
    atb_ops: list[str]
    docstrings: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    _apis: dict[str, tuple[Page, str]] | None = field(default=None, init=False, repr=False)

    def page_apis(self) -> dict[str, tuple[Page, str]]:
        """API name → (page, name); a page that documents several APIs appears once each."""
        if self._apis is None:
            out: dict[str, tuple[Page, str]] = {}
            for page in self.pages:
                for api in page.apis:
                    out.setdefault(api, (page, api))
            self._apis = out
        return self._apis

    def facts(self, name: str) -> OperatorFacts | None:
        """Facts for any name upstream knows: a page API or a schema."""
        apis = self.page_apis()
        page = apis[name][0] if name in apis else None
        schema = self.schemas.choose(name)
        if page is None and schema is None:
            return None
        parsed = None
        if schema is not None:
            try:
                parsed = parse_schema(schema.text)
            except SchemaError:
                self.warnings.append(f"{name}: schema does not parse: {schema.text}")
        arg_names = [a.name for a in parsed.args] if parsed else []
        dep = self.deprecated.get(name)
        deprecated_in = (["deprecated.yaml"] if dep is not None else []) + (
            ["page"] if page is not None and page.deprecated else []
        )
        deprecated = bool(deprecated_in)
        if deprecated and dep is None:
            dep = sch.Deprecation(name, page.replacement_hint if page else None)
        calls: list[str] = []
        docstring = name in self.docstrings
        unknown: list[str] = []
        if page is not None:
            calls.append(page.call(name))
            params = _map_page_params(page, name, arg_names) if arg_names else dict(page.params)
            returns = page.returns
            products: list[str] | None = page.products if page.has_product_table else None
            unsupported = page.unsupported_products if page.has_product_table else None
            unknown = page.unknown_products
            status = "deprecated" if deprecated else ("beta" if page.beta else "stable")
        else:
            calls.append(f"torch_npu.{name}")
            doc = parse_docstring(self.docstrings.get(name, ""), arg_names)
            params = doc.params
            returns = []
            products = doc.products or None
            unsupported = None
            unknown = doc.unknown_products
            status = "deprecated" if deprecated else "undocumented"
        if schema is not None:
            # ATB kernels register in the torch.ops.atb namespace, the rest in torch.ops.npu
            namespace = "atb" if schema.source == sch.ATB_SCHEMAS else "npu"
            if f"torch.ops.{namespace}.{name}" not in calls:
                calls.append(f"torch.ops.{namespace}.{name}")
        versions = self.schemas.versions(name, schema.overload) if schema else []
        return OperatorFacts(
            name=name,
            calls=calls,
            status=status,
            page=page,
            schema=schema,
            params=params,
            returns=returns,
            products=products,
            versions=versions,
            deprecation=dep if deprecated else None,
            beta=bool(page and page.beta),
            docstring=docstring,
            unknown_products=unknown,
            unsupported_products=unsupported,
            deprecated_in=deprecated_in,
        )

    def documented(self) -> dict[str, OperatorFacts]:
        out = {}
        for name in self.page_apis():
            facts = self.facts(name)
            if facts is not None:
                out[name] = facts
        return out

    def undocumented(self) -> tuple[dict[str, OperatorFacts], list[Exclusion]]:
        """Forward ``npu_*``/``_npu_*`` operators with a schema and no page, and the
        rest of that name space with the rule that left each one out."""
        documented = set(self.page_apis())
        known = documented | self.schemas.names()
        candidates = sorted(
            n
            for n in self.schemas.names() | set(self.atb_ops)
            if (_PUBLIC_PREFIX.match(n) or n in EXTRA_PUBLIC) and n not in documented
        )
        included: dict[str, OperatorFacts] = {}
        excluded: list[Exclusion] = []
        for name in candidates:
            reason = _exclusion(name, known)
            if reason is None and self.schemas.choose(name) is None:
                has_any = bool(self.schemas.by_source(name))
                reason = (
                    "only an out overload has a schema"
                    if has_any
                    else ("registered in atb_ops.yaml, but no schema string is published")
                )
            if reason is not None:
                excluded.append(Exclusion(name, reason))
                continue
            facts = self.facts(name)
            if facts is not None:
                included[name] = facts
        return included, excluded

    def all_operators(self) -> dict[str, OperatorFacts]:
        ops = self.documented()
        ops.update(self.undocumented()[0])
        return ops


def _exclusion(name: str, known: set[str]) -> str | None:
    if name in INTERNAL:
        return INTERNAL[name]
    for reason, pattern in EXCLUSION_RULES:
        if pattern.search(name):
            return reason
    if name.startswith("_npu_") and name[1:] in known:
        return f"private twin of {name[1:]}"
    return None


def _map_page_params(page: Page, api: str, arg_names: list[str]) -> dict[str, ParamFacts]:
    """Page parameters keyed by schema name.  When the page renames an argument
    (``input`` for ``self``), the same position in the page prototype decides, but
    only if neither name occurs anywhere in the other list."""
    out = {n: page.params[n] for n in arg_names if n in page.params}
    proto = page.prototype_args(api)
    for page_name, arg in zip(proto, arg_names, strict=False):
        renamed = page_name not in arg_names and arg not in proto
        if renamed and arg not in out and page_name in page.params:
            out[arg] = page.params[page_name]
    return out


def load_upstream(op_plugin: Path, wheel: Path | None = None) -> Upstream:
    """Everything upstream states, from an op-plugin tree and optionally a wheel."""
    if not op_plugin.is_dir():
        raise FileNotFoundError(f"{op_plugin}: op-plugin directory not found")
    warnings: list[str] = []
    pages = load_pages(op_plugin)
    index = sch.SchemaIndex()
    deprecated: dict[str, sch.Deprecation] = {}
    atb_ops: list[str] = []
    config = find_config(op_plugin)
    if config is None:
        warnings.append(f"{op_plugin}: no config folder (op_plugin/config/ or config/)")
    else:
        opf = config / sch.OP_PLUGIN_FUNCTIONS
        if opf.is_file():
            entries, versions = sch.parse_op_plugin_functions(opf.read_text(encoding="utf-8-sig"))
            index.entries += entries
            index.all_versions = versions
        else:
            warnings.append(f"{opf}: missing")
        dep = config / "deprecated.yaml"
        if dep.is_file():
            deprecated = sch.parse_deprecated(dep.read_text(encoding="utf-8-sig"))
        atb = config / sch.ATB_SCHEMAS
        if atb.is_file():
            index.entries += sch.parse_atb_schemas(atb.read_text(encoding="utf-8-sig"))
        ops = config / "atb_ops.yaml"
        if ops.is_file():
            atb_ops = sch.parse_atb_ops(ops.read_text(encoding="utf-8-sig"))
    docstrings: dict[str, str] = {}
    if wheel is not None:
        contents = read_wheel(wheel)
        if contents.codegen_yaml is not None:
            index.entries += sch.parse_codegen(contents.codegen_yaml)
        else:
            warnings.append(f"{wheel}: no npu_native_functions_by_codegen.yaml")
        docstrings = contents.docstrings
    # keep the priority order stable whatever order the files were read in
    rank = {s: i for i, s in enumerate(sch.SOURCE_PRIORITY)}
    index.entries.sort(key=lambda e: rank.get(e.source, len(rank)))
    return Upstream(pages, index, deprecated, atb_ops, docstrings, warnings)
