"""The decision-tree record: questions whose answers lead to chains and operators."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from kb.catalog.models.base import Keywords, Name, Scalar, Strict, Text
from kb.catalog.models.chain import _ARG, StageTensor
from kb.vocab import SCHEME_FLAG, Phase, Product, ambiguous_scheme_message, normalize_scheme


class Denial(Strict):
    """A call a verdict says does not work; the cross-check asks ``kb check`` to agree."""

    operator: str
    args: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    tensors: dict[Annotated[str, Field(pattern=_ARG)], StageTensor] = Field(default_factory=dict)
    product: Product | None = None
    phase: Phase | None = None


class Alternative(Strict):
    """Another chain ports ship for the same answers, and what decides for it."""

    chain: str
    when: str = Field(min_length=1, description="what decides for this chain over the option's own")


class Option(Strict):
    value: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$", description="flag value for kb advise")
    label: str
    goto: str | None = Field(default=None, description="next node id")
    chain: str | None = None
    operators: list[str] = Field(default_factory=list)
    when: str = Field(
        default="", description="what decides for this option's chain over its alternatives"
    )
    alternatives: list[Alternative] = Field(
        default_factory=list,
        description="other practiced chains for these answers, ranked after the option's own",
    )
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
        if self.alternatives and not self.chain:
            raise ValueError(
                "alternatives rank after the option's own chain: name that chain first"
            )
        names = [self.chain] + [a.chain for a in self.alternatives]
        if len(names) != len(set(names)):
            raise ValueError("an alternative repeats a chain already named on this option")
        return self


class Node(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    key: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$", description="flag name for kb advise")
    question: Text
    options: list[Option] = Field(min_length=2)
    assume: str | None = Field(
        default=None,
        description="the common-case answer kb advise --no-input assumes (and reports) when none is given",
    )

    @model_validator(mode="after")
    def _assumes_an_option(self) -> Node:
        if self.assume is not None and self.assume not in [o.value for o in self.options]:
            raise ValueError(f"assume {self.assume!r} is not one of this node's option values")
        if self.key == SCHEME_FLAG:  # answers are scheme ids: the same words as records and checks
            for o in self.options:
                if normalize_scheme(o.value) != o.value:
                    why = ambiguous_scheme_message(o.value)
                    canon = normalize_scheme(o.value)
                    raise ValueError(
                        why
                        or (
                            f"option {o.value!r} of a --{SCHEME_FLAG} question is "
                            f"not a canonical scheme id" + (f"; write {canon!r}" if canon else "")
                        )
                    )
        return self


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
                    raise ValueError(
                        f"node {n.id!r} option {o.value!r} goes to unknown node {o.goto!r}"
                    )
        return self
