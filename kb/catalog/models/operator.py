"""The operator record: its signature, modes, support, versions and evidence."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kb.catalog.models.base import EVIDENCE_ABOUT, Keywords, Name, Scalar, Strict, Text
from kb.catalog.models.binding import Discrepancy, WrapperCheck
from kb.catalog.models.kernel import Kernel
from kb.catalog.models.parameters import Constraint, Parameter, Return, Rule
from kb.catalog.signature import SchemaError, parse_schema
from kb.vocab import (
    KV_SCHEMES,
    Category,
    Dtype,
    Phase,
    Product,
    QuantRole,
    QuantScheme,
    Status,
    Step,
)


class QuantMode(Strict):
    """One quantization mode of an operator, mapped onto a scheme of :data:`kb.vocab.SCHEMES`."""

    scheme: QuantScheme
    kv: QuantScheme | None = Field(
        default=None, description="KV-cache modifier (kv-int8, kv-fp8, kv-hif8) of this mode"
    )
    partial: bool = Field(
        default=False, description="only some of the operator's weights are quantized"
    )
    select: dict[str, Scalar] = Field(default_factory=dict, description="argument settings")
    tensors: dict[str, list[Dtype]] = Field(default_factory=dict, description="tensor → dtypes")
    products: list[Product] = Field(default_factory=list)
    notes: str = ""

    @field_validator("kv")
    @classmethod
    def _kv_modifier(cls, v: str | None) -> str | None:
        if v is not None and v not in KV_SCHEMES:
            raise ValueError(f"kv is a KV-cache scheme ({', '.join(KV_SCHEMES)}), not {v!r}")
        return v

    @property
    def expression(self) -> str:
        return f"{self.scheme}+{self.kv}" if self.kv else self.scheme


class GraphMode(Strict):
    aclgraph: Literal["supported", "unsupported", "unknown"] = "unknown"
    torchair: Literal["supported", "unsupported", "unknown"] = "unknown"
    notes: str = ""


class SignatureChange(Strict):
    release: str
    schema_: str = Field(alias="schema")


class Versions(Strict):
    first: str | None = Field(default=None, description="first torch_npu release that has it")
    last: str | None = Field(default=None, description="last release that has it, if removed")
    releases: list[str] = Field(default_factory=list)
    changes: list[SignatureChange] = Field(default_factory=list)
    pytorch: list[str] = Field(default_factory=list, description="PyTorch lines upstream lists")


#: A name the first assignment of which ``small`` replaces, or an integer literal.
_SMALL_KEY = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|-?\d+)$")


class Example(Strict):
    title: str
    code: str = Field(min_length=1)
    phase: Phase | None = None
    small: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict,
        description="what the example runs with under kb.emulate when its realistic sizes are "
        "too big for a CPU test, or it asks a process group for its rank: a variable name maps "
        "to the value its first assignment gets instead (rank 0 of a one-rank group), an "
        "integer literal (as text) to the integer that replaces it everywhere",
    )

    @field_validator("small")
    @classmethod
    def _small_keys(cls, v: dict[str, Scalar | list[Scalar]]) -> dict[str, Scalar | list[Scalar]]:
        bad = [k for k in v if not _SMALL_KEY.match(k)]
        if bad:
            raise ValueError(f"small keys are variable names or integer literals, not {bad}")
        return v


class Overload(Strict):
    """Another overload upstream defines beside ``signature`` (``.out`` writes into
    tensors the caller gives; ``.acl_format`` takes a code where the default takes a
    tensor).  The schema is the upstream string, character for character."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="the name after the dot")
    schema_: str = Field(alias="schema", min_length=1, description="exact upstream schema string")
    source: str = Field(min_length=1, description="the file the schema comes from")


class Deprecation(Strict):
    """Upstream's own word that the operator is deprecated, as the importer read it.

    ``kb validate`` holds ``status`` and ``superseded_by`` to it, so a successor can
    neither be invented nor drift away from ``deprecated.yaml``.
    """

    listed_in: list[Literal["deprecated.yaml", "page"]] = Field(min_length=1)
    replace: str | None = Field(
        default=None,
        description="the replacement exactly as deprecated.yaml (else the page) names it",
    )


class Upstream(Strict):
    path: str | None = None
    commit: str | None = None
    url: str | None = None
    schema_source: str | None = Field(
        default=None, description="where the schema string comes from (file name)"
    )
    deprecation: Deprecation | None = Field(
        default=None, description="written by the importer from deprecated.yaml and the page"
    )
    unsupported_products: list[Product] = Field(
        default_factory=list, description="written by the importer: products the page marks x"
    )


class Evidence(Strict):
    """Where a fact comes from when the official page does not state it: a file of a
    public repository at a commit (op-plugin source or tests, deprecated.yaml, a page of
    another revision, shipping code).  ``kind`` says whether only code supports it."""

    about: list[str] = Field(min_length=1, description="the record fields it backs")
    values: list[Scalar] = Field(
        default_factory=list, description="the values it backs (products, phases …); empty: all"
    )
    kind: Literal["page", "source", "test", "config", "docstring", "shipping-code"]
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$", description="owner/name")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$")
    path: str = Field(min_length=1)
    lines: str | None = Field(default=None, pattern=r"^\d+(?:-\d+)?$")
    says: str = Field(min_length=1, description="what the file establishes, in our words")

    @field_validator("about")
    @classmethod
    def _known_fields(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if not EVIDENCE_ABOUT.match(a)]
        if bad:
            raise ValueError(
                f"evidence cannot be about {bad}: name superseded_by, "
                "unsupported_products, phase_limit, parameters.<name>[.<field>], "
                "rules.<id>, quantization, products, calls, returns or constraints"
            )
        return v


class ReferenceSource(Strict):
    """A source the numpy reference (:mod:`kb.reference`) follows: a page's formula, a
    golden test function or a kernel document, at a commit."""

    kind: Literal["page", "test", "source", "docstring"]
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$", description="owner/name")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$")
    path: str = Field(min_length=1)
    lines: str | None = Field(default=None, pattern=r"^\d+(?:-\d+)?$")
    says: str = Field(min_length=1, description="what the reference takes from it, in our words")


class Reference(Strict):
    """What the operator computes, as ``kb.reference`` executes it, and on what authority."""

    computes: str = Field(min_length=1, description="the formula in words")
    sources: list[ReferenceSource] = Field(min_length=1)
    unstated: list[str] = Field(
        default_factory=list,
        description="what the sources leave open (rounding order, ties) and the reference's choice",
    )
    limits: list[str] = Field(
        default_factory=list, description="argument values the reference refuses (not modelled)"
    )


class Site(Strict):
    """One call of the operator in shipping code: where, and what it passed.

    ``args`` keeps the literal values written at the call (facts, not code);
    ``passed`` names the arguments given a non-literal value (a variable).
    """

    path: str = Field(min_length=1)
    line: int = Field(ge=1)
    products: list[Product] = Field(default_factory=list, description="when the code says")
    phases: list[Phase] = Field(default_factory=list, description="when the code says")
    args: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    passed: list[str] = Field(default_factory=list)
    note: str = ""
    defect: str = Field(
        default="",
        description="why this shipping call is itself wrong, with evidence; such a site does "
        "not count against the record",
    )


class SeenIn(Strict):
    """Practice as evidence: call sites of the operator in one public repository."""

    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$", description="owner/name")
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$")
    sites: list[Site] = Field(min_length=1)


_RELEASE = re.compile(r"^\d+\.\d+(\.\d+)?(\.post\d+)?(rc\d+)?$")


class Operator(Strict):
    kind: Literal["operator"] = "operator"
    name: Name
    calls: list[str] = Field(min_length=1, description="torch_npu.x, torch.ops.npu.x, …")
    aliases: list[str] = Field(default_factory=list)
    status: Status
    category: Category
    summary: Text
    description: str = Field(min_length=1)
    description_zh: str = ""
    keywords: Keywords = Field(default_factory=Keywords)
    fuses: list[Step] = Field(default_factory=list)
    signature: str | None = Field(default=None, description="exact upstream schema string")
    overloads: list[Overload] = Field(
        default_factory=list, description="other overloads of the operator, exact schemas"
    )
    parameters: list[Parameter] = Field(default_factory=list)
    returns: list[Return] = Field(default_factory=list)
    products: list[Product] = Field(
        default_factory=list, description="documented as supported (√ in the product table)"
    )
    unsupported_products: list[Product] = Field(
        default_factory=list,
        description="documented as not supported (x in the product table, or stated in the source)",
    )
    phases: list[Phase] = Field(default_factory=list, description="documented for")
    phase_limit: list[Phase] = Field(
        default_factory=list,
        description="upstream restricts the operator to these phases (empty: no restriction)",
    )
    graph_mode: GraphMode = Field(default_factory=GraphMode)
    versions: Versions = Field(default_factory=Versions)
    quantization: list[QuantMode] = Field(default_factory=list)
    cache_layout: Literal["paged", "contiguous"] | None = Field(
        default=None,
        description="the KV-cache organisation the operator always writes or reads, when its "
        "arguments do not choose one (npu_scatter_pa_kv_cache writes blocks in every mode)",
    )
    quant_roles: list[QuantRole] | None = Field(
        default=None,
        description="what the operator's quantization modes decide (weights, activations, "
        "kv_cache); when absent, the roles its schemes quantize",
    )
    constraints: list[Constraint] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    seen_in: list[SeenIn] = Field(default_factory=list, description="calls in shipping code")
    evidence: list[Evidence] = Field(
        default_factory=list, description="citations for facts the official page does not state"
    )
    discrepancies: list[Discrepancy] = Field(
        default_factory=list,
        description="where the page says one thing and what runs another: the field holds "
        "what runs, the entry keeps the page's claim and the file that settles it",
    )
    kernels: list[Kernel] = Field(
        default_factory=list,
        description="kernel registrations the wrapper reaches (scripts/harvest_kernels.py); "
        "products they are built for that the page omits are kernel-only support",
    )
    wrapper_checks: list[WrapperCheck] = Field(
        default_factory=list,
        description="unconditional checks of op-plugin's wrapper, read exactly "
        "(scripts/audit_wrappers.py --write); kb validate holds the fields to them",
    )
    reference: Reference | None = Field(
        default=None, description="executable semantics: what kb.reference computes, cited"
    )
    upstream: Upstream = Field(default_factory=Upstream)
    superseded_by: str | None = None
    supersedes: list[str] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)
    changes: str = Field(default="", description="what changed relative to the predecessor")
    replacement_note: str = Field(default="", description="for deprecated: what to use instead")

    @model_validator(mode="after")
    def _consistent(self) -> Operator:
        names = [p.name for p in self.parameters]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate parameters: {sorted(dup)}")
        known = set(names)
        for rule in self.rules:
            mentioned = set(rule.require) | set(rule.forbid) | set(rule.dtypes)
            mentioned |= set(rule.formats) | set(rule.values) | set(rule.ranges)
            for cond in rule.when:
                mentioned |= {x for x in (cond.arg, cond.tensor, cond.present, cond.absent) if x}
            unknown = mentioned - known
            if unknown:
                raise ValueError(f"rule {rule.id!r} names unknown parameters {sorted(unknown)}")
        ids = [r.id for r in self.rules]
        if len(ids) != len(set(ids)):
            raise ValueError("rule ids must be unique within a record")
        for c in self.constraints:
            if c.rule is not None and c.rule not in ids:
                raise ValueError(f"constraint links to unknown rule {c.rule!r}")
        for q in self.quantization:
            bad = (set(q.select) | set(q.tensors)) - known
            if bad:
                raise ValueError(
                    f"quantization {q.scheme!r} names unknown parameters {sorted(bad)}"
                )
        for o in self.overloads:
            if not o.schema_.startswith(f"{self.name}.{o.name}("):
                raise ValueError(
                    f"overload {o.name!r}: its schema must start with '{self.name}.{o.name}('"
                )
            try:
                parse_schema(o.schema_)
            except SchemaError as exc:
                raise ValueError(f"overload {o.name!r}: {exc}") from None
        if self.status == "deprecated" and not (self.superseded_by or self.replacement_note):
            raise ValueError("a deprecated operator names superseded_by or a replacement_note")
        return self

    @field_validator("versions")
    @classmethod
    def _release_format(cls, v: Versions) -> Versions:
        for rel in [v.first, v.last, *v.releases, *(c.release for c in v.changes)]:
            if rel is not None and not _RELEASE.match(rel):
                raise ValueError(f"release {rel!r} is not like 2.7.1 or 2.1.0.post8")
        return v
