"""Shared building blocks of the record models: strict models, texts, names and values."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

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


#: What an evidence entry (or a discrepancy) may be about: a top-level fact field, one
#: parameter (or one of its fields), one rule, or a return value.
EVIDENCE_ABOUT = re.compile(
    r"^(?:superseded_by|unsupported_products|products|phase_limit|phases|quantization|calls"
    r"|quant_roles|constraints|returns(?:\.[A-Za-z_]\w*)?|graph_mode|signature"
    r"|parameters\.[A-Za-z_]\w*(?:\.(?:dtypes|formats|shapes|allowed|also_accepted"
    r"|python_name|range|default|reserved))?|rules\.[a-z0-9][a-z0-9\-]*)$"
)
