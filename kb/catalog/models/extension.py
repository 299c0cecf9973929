"""The extension record: operators a public kernel package registers beside torch_npu.

Serving engines import kernel packages (sgl-kernel-npu, an engine's own compiled
``_C_ascend`` library, MindIE's ``mie_ops``) that register operators with the PyTorch
dispatcher, some under ``torch.ops.npu`` itself.  They are not torch_npu operators and
no torch_npu record describes them; ``kb scan`` reads these records so a call of one is
named for what it is ("registered by PACKAGE") and checked against the schema the package
registered, instead of being an unknown torch_npu operator.  A maintainer script harvests
the records from the package's source tree at one commit (``scripts/harvest_extensions.py``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kb.catalog.models.base import Name, Strict, Text
from kb.vocab import Product

_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"


class ExtensionOperator(Strict):
    """One operator the package registers: where, under which namespace, with which schema."""

    name: str = Field(pattern=_IDENT)
    namespace: str = Field(
        pattern=_IDENT, description="the torch.ops namespace it is registered in"
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="the schema string exactly as registered (None: registered by name only)",
    )
    path: str = Field(min_length=1, description="the file of the registration, in the repository")
    lines: str = Field(pattern=r"^\d+(?:-\d+)?$", description="the line(s) of the registration")
    not_built: list[Product] = Field(
        default_factory=list,
        description="the products whose build of the package leaves it out (empty: every build has it)",
    )
    condition: str | None = Field(
        default=None,
        description="the preprocessor condition it is compiled under (its builds may lack it)",
    )
    off_by_default: bool = Field(
        default=False,
        description="the condition needs a build option that is OFF by default: only a build "
        "that turns it on has the operator, on any product",
    )

    @model_validator(mode="after")
    def _conditions_are_stated(self) -> ExtensionOperator:
        if (self.not_built or self.off_by_default) and not self.condition:
            raise ValueError(
                f"{self.name}: not_built / off_by_default need the condition that decides them"
            )
        return self

    @model_validator(mode="after")
    def _schema_names_the_operator(self) -> ExtensionOperator:
        if self.schema_ is not None:
            head = self.schema_.split("(", 1)[0].strip().split(".", 1)[0]
            if head != self.name or "->" not in self.schema_:
                raise ValueError(f"schema {self.schema_!r} is not a schema of {self.name!r}")
        return self


class Extension(Strict):
    kind: Literal["extension"] = "extension"
    name: Name = Field(description="the package's distribution name")
    summary: Text
    imports: list[str] = Field(
        min_length=1, description="Python modules whose import registers the operators"
    )
    namespaces: list[str] = Field(
        min_length=1, description="the torch.ops namespaces it registers in"
    )
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$", description="owner/name")
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    licence: str = Field(min_length=1, description="SPDX identifier of the package's licence")
    products: list[Product] = Field(
        default_factory=list,
        description="products the package says it builds for (empty: not stated)",
    )
    operators: list[ExtensionOperator] = Field(min_length=1)

    @field_validator("imports")
    @classmethod
    def _module_paths(cls, v: list[str]) -> list[str]:
        bad = [m for m in v if not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", m)]
        if bad:
            raise ValueError(f"not Python module paths: {bad}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Extension:
        seen: set[tuple[str, str, str]] = set()
        for op in self.operators:
            if op.namespace not in self.namespaces:
                raise ValueError(
                    f"operator {op.name!r} is in namespace {op.namespace!r}, "
                    f"not one of {self.namespaces}"
                )
            key = (op.namespace, op.name, op.schema_ or "")
            if key in seen:
                raise ValueError(
                    f"operator {op.namespace}::{op.name} is listed twice with one schema"
                )
            seen.add(key)
        return self
