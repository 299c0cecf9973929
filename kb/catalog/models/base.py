"""Shared building blocks of the record models: strict models, texts, names and values."""

from __future__ import annotations

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
