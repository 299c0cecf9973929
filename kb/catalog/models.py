"""The record contract: pydantic models for operators, reference chains and trees.

Every artefact of the project (index, site pages, checker knowledge, JSON Schema) is
derived from records validated by these models.  ``extra="forbid"`` everywhere: a
misspelt field is an error, never silently ignored.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kb.vocab import (
    KV_SCHEMES,
    Category,
    Dtype,
    Format,
    Phase,
    Product,
    QuantRole,
    QuantScheme,
    Status,
    Step,
    normalize,
)

Name = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$", max_length=120)]
Scalar = bool | int | float | str | None
#: An allowed value: a scalar, or a whole list for list-typed parameters (``perm_x1``).
Value = Scalar | list[Scalar]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True)


class Text(Strict):
    """A short text in English with a Chinese counterpart (both written by us)."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)


class Keywords(Strict):
    en: list[str] = Field(default_factory=list)
    zh: list[str] = Field(default_factory=list)


class Shape(Strict):
    """One admissible shape, optionally tied to a layout or mode (``when``)."""

    dims: str = Field(description="e.g. '[T, He]' or '[B, S, N, D]'")
    when: str | None = Field(default=None, description="layout or condition, e.g. 'TND'")


class Range(Strict):
    min: float | None = None
    max: float | None = None
    note: str | None = None


class Parameter(Strict):
    name: Name
    type: str = Field(description="schema type exactly as upstream: Tensor, Tensor?, int[]?, …")
    required: bool = True
    default: str | None = Field(default=None, description="schema literal, e.g. '1e-05'")
    keyword_only: bool = False
    mutated: bool = False
    reserved: bool = Field(default=False, description="in the schema but reserved upstream: pass the default")
    undocumented: bool = Field(default=False, description="in the schema, absent from the official page")
    description: str = ""
    dtypes: list[Dtype] = Field(default_factory=list)
    any_dtype: bool = Field(default=False, description="upstream accepts every dtype (e.g. npu_prefetch)")
    formats: list[Format] = Field(default_factory=list)
    shapes: list[Shape] = Field(default_factory=list)
    allowed: list[Value] | None = Field(
        default=None,
        description="closed set of values; for a list-typed parameter either whole lists "
        "(the list must equal one) or scalars (every element must be one)",
    )
    also_accepted: list[Value] = Field(
        default_factory=list,
        description="legacy spellings upstream still maps to an allowed value (not errors)",
    )
    range: Range | None = None
    takes: Literal["dtype"] | None = Field(
        default=None,
        description="the int/ScalarType argument names a dtype: the binding accepts a "
        "torch.dtype, a torch_npu dtype constant or its integer code; allowed values are "
        "canonical dtype names",
    )
    python_name: str | None = Field(
        default=None,
        description="keyword the torch_npu Python binding uses when it differs from the "
        "schema name (schema 'self' is 'input' in Python)",
    )

    @property
    def is_tensor(self) -> bool:
        return self.type.startswith("Tensor")

    @model_validator(mode="after")
    def _canonical_dtypes(self) -> Parameter:
        if self.takes != "dtype":
            return self
        for value in self.allowed or []:
            if value is None or isinstance(value, list):
                continue
            canon = normalize("dtype", value)
            if canon is None:
                raise ValueError(f"{value!r} is not a dtype (allowed values of a dtype "
                                 "argument are dtype names such as bfloat16)")  # fmt: skip
            if canon != value:
                raise ValueError(f"write the dtype {value!r} as {canon!r}")
        return self


class Return(Strict):
    name: str
    type: str = "Tensor"
    description: str = ""
    dtypes: list[Dtype] = Field(default_factory=list)
    formats: list[Format] = Field(default_factory=list)
    shapes: list[Shape] = Field(default_factory=list)


class Condition(Strict):
    """One clause of a rule's ``when``: all clauses must hold for the rule to apply.

    Exactly one subject: ``arg`` (a scalar argument's value), ``tensor`` (a tensor
    argument's dtype or format), ``product``, ``quantization`` or ``present`` (an
    argument is given).  A clause whose subject the candidate does not state is
    *unknown* and the rule does not fire.
    """

    arg: str | None = None
    tensor: str | None = None
    present: str | None = None
    absent: str | None = None
    product: list[Product] | None = None
    quantization: list[QuantScheme] | None = None
    equals: Scalar = None
    in_: list[Scalar] | None = Field(default=None, alias="in")
    not_in: list[Scalar] | None = None
    dtype_in: list[Dtype] | None = None
    format_in: list[Format] | None = None

    @model_validator(mode="after")
    def _one_subject(self) -> Condition:
        subjects = [
            s
            for s in ("arg", "tensor", "present", "absent", "product", "quantization")
            if getattr(self, s) is not None
        ]
        if len(subjects) != 1:
            raise ValueError(
                "a condition names exactly one of arg, tensor, present, absent, product, "
                f"quantization (got {subjects or 'none'})"
            )
        if self.arg is not None and self.equals is None and self.in_ is None and not self.not_in:
            raise ValueError("an 'arg' condition needs equals, in or not_in")
        if self.tensor is not None and not (self.dtype_in or self.format_in):
            raise ValueError("a 'tensor' condition needs dtype_in or format_in")
        return self


class Rule(Strict):
    """A declarative, checkable constraint: when all ``when`` clauses hold, then …"""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    when: list[Condition] = Field(default_factory=list)
    require: list[str] = Field(default_factory=list, description="arguments that must be given")
    forbid: list[str] = Field(default_factory=list, description="arguments that must be absent")
    dtypes: dict[str, list[Dtype]] = Field(default_factory=dict, description="tensor → dtypes")
    formats: dict[str, list[Format]] = Field(default_factory=dict, description="tensor → formats")
    values: dict[str, list[Scalar]] = Field(default_factory=dict, description="arg → values")
    products: list[Product] = Field(default_factory=list, description="only on these products")
    severity: Literal["error", "warning"] = Field(
        default="error",
        description="warning when upstream shows the setting is ignored rather than refused "
        "(the call runs, the setting has no effect)",
    )
    message: str = Field(min_length=1, description="what to do, in English")

    @model_validator(mode="after")
    def _has_effect(self) -> Rule:
        if not (self.require or self.forbid or self.dtypes or self.formats or self.values
                or self.products):  # fmt: skip
            raise ValueError("a rule needs an effect: require, forbid, dtypes, formats, values or products")
        return self


class Constraint(Strict):
    """A constraint in prose for people; ``rule`` links it to a checkable rule id."""

    text: str = Field(min_length=1)
    rule: str | None = None


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


class Example(Strict):
    title: str
    code: str = Field(min_length=1)
    phase: Phase | None = None


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


#: What an evidence entry may back: a top-level fact field, one parameter (or one of its
#: fields), one rule, or a return value.
EVIDENCE_ABOUT = re.compile(
    r"^(?:superseded_by|unsupported_products|products|phase_limit|phases|quantization"
    r"|quant_roles|constraints|returns(?:\.[A-Za-z_]\w*)?|graph_mode|signature"
    r"|parameters\.[A-Za-z_]\w*(?:\.(?:dtypes|formats|shapes|allowed|also_accepted"
    r"|python_name|range|default|reserved))?|rules\.[a-z0-9][a-z0-9\-]*)$"
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
            raise ValueError(f"evidence cannot be about {bad}: name superseded_by, "
                             "unsupported_products, phase_limit, parameters.<name>[.<field>], "
                             "rules.<id>, quantization, products, returns or constraints")  # fmt: skip
        return v


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
            mentioned |= set(rule.formats) | set(rule.values)
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
                raise ValueError(f"quantization {q.scheme!r} names unknown parameters {sorted(bad)}")
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


PlainTorch = Literal["plain-torch"]
_ARG = r"^[A-Za-z_][A-Za-z0-9_]*$"
_CODE = r"^KB\d{3}$"


class StageTensor(Strict):
    """What a port is known to pass as one tensor argument (dtype, format)."""

    dtype: Dtype | None = None
    format: Format | None = None


class Waiver(Strict):
    """A ``kb check`` finding a stage is known to raise although the port runs it.

    The cross-check in ``kb validate`` reports a waiver that no longer matches a
    finding, so waivers disappear once the checker or the record is fixed.
    """

    code: str = Field(pattern=_CODE, description="the checker rule code, e.g. KB201")
    product: Product | None = Field(default=None, description="only on this product")
    reason: str = Field(min_length=1, description="why the finding is wrong for this stage")


class Stage(Strict):
    stage: str = Field(description="norm, q_projection, rope, cache_write, attention, …")
    operator: str = Field(description="an operator name, or 'plain-torch'")
    phase: Literal["prefill", "decode", "both"] = "both"
    args: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="literal argument values as the port writes them"
    )
    passed: dict[Annotated[str, Field(pattern=_ARG)], str] = Field(
        default_factory=dict,
        description="arguments given a runtime value: name -> the expression passed",
    )
    tensors: dict[Annotated[str, Field(pattern=_ARG)], StageTensor] = Field(
        default_factory=dict, description="known dtype/format of tensor arguments"
    )
    quantization: list[QuantScheme] = Field(
        default_factory=list, description="only under these schemes (empty: every scheme)"
    )
    torch: str = Field(default="", description="the torch code when operator is plain-torch")
    notes: str = ""
    waivers: list[Waiver] = Field(default_factory=list)

    @model_validator(mode="after")
    def _arguments_once(self) -> Stage:
        both = sorted(set(self.args) & set(self.passed))
        if both:
            raise ValueError(f"{both} given both a literal value (args) and an expression (passed)")
        nones = sorted(k for k, v in self.passed.items() if v.strip() == "None")
        if nones:
            raise ValueError(f"{nones} passed as None: write them under args with the value null")
        if self.operator == "plain-torch" and (self.args or self.passed or self.tensors):
            raise ValueError("a plain-torch stage writes its call in 'torch', not in args/passed/tensors")
        return self


class Prerequisite(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    text: str


class Citation(Strict):
    """Where a chain runs in a public port: the code its stages were read from."""

    model: str = Field(min_length=1, description="the model the code serves, e.g. DeepSeek-R1")
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$", description="owner/name")
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    path: str = Field(min_length=1)
    lines: str = Field(pattern=r"^[1-9][0-9]*(-[1-9][0-9]*)?$", description="'120' or '120-184'")
    shows: str = Field(min_length=1, description="what these lines show, in our words")

    @property
    def span(self) -> tuple[int, int]:
        first, _, last = self.lines.partition("-")
        return int(first), int(last or first)

    @model_validator(mode="after")
    def _ordered(self) -> Citation:
        first, last = self.span
        if last < first:
            raise ValueError(f"lines {self.lines!r} end before they start")
        return self


class ReferenceChain(Strict):
    kind: Literal["chain"] = "chain"
    name: Name
    title: Text
    summary: Text
    description: str = ""
    module: Literal["attention", "moe", "ffn", "norm", "rope", "kv-cache", "prefetch",
                    "quantization", "communication", "runtime", "other"]  # fmt: skip
    phases: list[Phase] = Field(min_length=1)
    quantization: list[QuantScheme] = Field(default_factory=list)
    products: list[Product] = Field(default_factory=list)
    stages: list[Stage] = Field(min_length=1)
    prerequisites: list[Prerequisite] = Field(default_factory=list)
    differences: str = Field(default="", description="prefill vs decode")
    models: list[str] = Field(default_factory=list)
    sources: list[Citation] = Field(
        default_factory=list, description="the public port code the chain was read from"
    )
    keywords: Keywords = Field(default_factory=Keywords)
    related: list[str] = Field(default_factory=list)
    variant_of: str | None = None


class Denial(Strict):
    """A call a verdict says does not work; the cross-check asks ``kb check`` to agree."""

    operator: str
    args: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    tensors: dict[Annotated[str, Field(pattern=_ARG)], StageTensor] = Field(default_factory=dict)
    product: Product | None = None
    phase: Phase | None = None


class Option(Strict):
    value: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$", description="flag value for kb advise")
    label: str
    goto: str | None = Field(default=None, description="next node id")
    chain: str | None = None
    operators: list[str] = Field(default_factory=list)
    note: str = ""
    denies: list[Denial] = Field(
        default_factory=list, description="calls the note rules out; kb check must reject each"
    )
    stop: bool | None = Field(
        default=None,
        description="ends the walk with a verdict (no chain applies); default: a final option "
        "naming only a note is a stop",
    )

    @model_validator(mode="after")
    def _leads_somewhere(self) -> Option:
        if not (self.goto or self.chain or self.operators or self.note):
            raise ValueError("an option leads to a node, a chain, operators or a note")
        if self.denies and not self.note:
            raise ValueError("an option that denies calls says why in its note")
        if self.stop and (self.goto or self.chain or self.operators):
            raise ValueError("a stop option leads nowhere: drop goto, chain and operators")
        return self


class Node(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    key: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$", description="flag name for kb advise")
    question: Text
    options: list[Option] = Field(min_length=2)


class DecisionTree(Strict):
    kind: Literal["tree"] = "tree"
    name: Name
    title: Text
    summary: Text
    description: str = ""
    root: str
    nodes: list[Node] = Field(min_length=1)
    keywords: Keywords = Field(default_factory=Keywords)

    @model_validator(mode="after")
    def _nodes_resolve(self) -> DecisionTree:
        ids = [n.id for n in self.nodes]
        if len(ids) != len(set(ids)):
            raise ValueError("node ids must be unique")
        if self.root not in ids:
            raise ValueError(f"root {self.root!r} is not a node id")
        for n in self.nodes:
            for o in n.options:
                if o.goto is not None and o.goto not in ids:
                    raise ValueError(f"node {n.id!r} option {o.value!r} goes to unknown node {o.goto!r}")
        return self


class OpClass(Strict):
    """A class of operators as the prefetch workflow sees them."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    names: list[str] = Field(min_length=1, description="op spellings that belong to the class")
    weight_heavy: bool = Field(description="reads a large weight: worth prefetching for")
    window: Literal["safe", "output-only", "unsafe"] = Field(
        description="as the dependency window: safe, only once its output exists, or never"
    )
    why: str


class SizeFormula(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    applies_to: str
    formula: str
    explanation: str


class Signal(Strict):
    signal: str
    action: str


class Playbook(Strict):
    kind: Literal["playbook"] = "playbook"
    name: Name
    title: Text
    summary: Text
    description: str = ""
    op_classes: list[OpClass] = Field(min_length=1)
    conservative_factor: float = Field(gt=0, le=1)
    ladder: list[float] = Field(min_length=1, description="max_size factors to try, in order")
    formulas: list[SizeFormula] = Field(default_factory=list)
    success: list[str] = Field(default_factory=list)
    failures: list[Signal] = Field(default_factory=list)
    keywords: Keywords = Field(default_factory=Keywords)
    related: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> Playbook:
        seen: dict[str, str] = {}
        for cls in self.op_classes:
            for n in cls.names:
                if n in seen:
                    raise ValueError(f"op {n!r} is in classes {seen[n]!r} and {cls.id!r}")
                seen[n] = cls.id
        return self


Record = Operator | ReferenceChain | DecisionTree | Playbook
MODELS: dict[str, type[BaseModel]] = {
    "operator": Operator,
    "chain": ReferenceChain,
    "tree": DecisionTree,
    "playbook": Playbook,
}
