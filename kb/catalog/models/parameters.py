"""An operator's signature in the records: parameters, returns, conditions and rules."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kb.catalog.models.base import Name, Scalar, Strict, Value
from kb.vocab import Dtype, Format, Product, QuantScheme, normalize


class Shape(Strict):
    """One admissible shape, optionally tied to a layout or mode (``when``)."""

    dims: str = Field(description="e.g. '[T, He]' or '[B, S, N, D]'")
    when: str | None = Field(default=None, description="layout or condition, e.g. 'TND'")


class Range(Strict):
    min: float | None = None
    max: float | None = None
    min_open: bool = Field(default=False, description="min itself is refused: (min, …")
    max_open: bool = Field(default=False, description="max itself is refused: …, max)")
    also: list[float] = Field(
        default_factory=list, description="single values accepted outside [min, max] (3072, 4096 …)"
    )
    note: str | None = None


class Parameter(Strict):
    name: Name
    type: str = Field(description="schema type exactly as upstream: Tensor, Tensor?, int[]?, …")
    required: bool = True
    default: str | None = Field(default=None, description="schema literal, e.g. '1e-05'")
    keyword_only: bool = False
    mutated: bool = False
    reserved: bool = Field(
        default=False, description="in the schema but reserved upstream: pass the default"
    )
    undocumented: bool = Field(
        default=False, description="in the schema, absent from the official page"
    )
    description: str = ""
    dtypes: list[Dtype] = Field(default_factory=list)
    any_dtype: bool = Field(
        default=False, description="upstream accepts every dtype (e.g. npu_prefetch)"
    )
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
                raise ValueError(
                    f"{value!r} is not a dtype (allowed values of a dtype "
                    "argument are dtype names such as bfloat16)"
                )
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
    ranges: dict[str, Range] = Field(
        default_factory=dict, description="arg → the numeric range it must fall in here"
    )
    products: list[Product] = Field(default_factory=list, description="only on these products")
    severity: Literal["error", "warning"] = Field(
        default="error",
        description="warning when upstream shows the setting is ignored rather than refused "
        "(the call runs, the setting has no effect)",
    )
    message: str = Field(min_length=1, description="what to do, in English")

    @model_validator(mode="after")
    def _has_effect(self) -> Rule:
        if not (
            self.require
            or self.forbid
            or self.dtypes
            or self.formats
            or self.values
            or self.ranges
            or self.products
        ):
            raise ValueError(
                "a rule needs an effect: require, forbid, dtypes, formats, values, ranges or products"
            )
        return self


class Constraint(Strict):
    """A constraint in prose for people; ``rule`` links it to a checkable rule id."""

    text: str = Field(min_length=1)
    rule: str | None = None
