"""The reference-chain record: a proven sequence of stages for one model part."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from kb.catalog.models.base import Keywords, Name, Scalar, Strict, Text
from kb.vocab import Dtype, Format, Phase, Product, QuantScheme, StagePhase

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
    overload: str = Field(
        default="",
        pattern=r"^([a-z][a-z_]*)?$",
        description="the overload a port calls, e.g. 'out' for op.out under graph capture",
    )
    phase: StagePhase = "both"
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
            raise ValueError(
                "a plain-torch stage writes its call in 'torch', not in args/passed/tensors"
            )
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
    module: Literal[
        "attention",
        "moe",
        "ffn",
        "norm",
        "rope",
        "kv-cache",
        "prefetch",
        "quantization",
        "communication",
        "runtime",
        "other",
    ]
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
