"""The record contract: pydantic models for operators, reference chains and trees.

Every artefact of the project (index, site pages, checker knowledge, JSON Schema) is
derived from records validated by these models.  ``extra="forbid"`` everywhere: a
misspelt field is an error, never silently ignored.  One module per record kind, plus
the shared building blocks (``base``) and an operator's signature (``parameters``).
"""

from __future__ import annotations

from pydantic import BaseModel

from kb.catalog.models.base import (
    EVIDENCE_ABOUT,
    Keywords,
    Name,
    Scalar,
    Strict,
    Text,
    Value,
)
from kb.catalog.models.binding import (
    Discrepancy,
    DiscrepancySource,
    Interval,
    WrapperCheck,
)
from kb.catalog.models.chain import (
    Citation,
    PlainTorch,
    Prerequisite,
    ReferenceChain,
    Stage,
    StageTensor,
    Waiver,
)
from kb.catalog.models.extension import Extension, ExtensionOperator
from kb.catalog.models.kernel import (
    Kernel,
    KernelConfig,
    KernelTensor,
    WrapperLink,
)
from kb.catalog.models.operator import (
    Deprecation,
    Evidence,
    Example,
    GraphMode,
    Operator,
    QuantMode,
    SeenIn,
    SignatureChange,
    Site,
    Upstream,
    Versions,
)
from kb.catalog.models.parameters import (
    Condition,
    Constraint,
    Parameter,
    Range,
    Return,
    Rule,
    Shape,
)
from kb.catalog.models.playbook import (
    OpClass,
    Playbook,
    Signal,
    SizeFormula,
)
from kb.catalog.models.tree import (
    Alternative,
    DecisionTree,
    Denial,
    Node,
    Option,
)

Record = Operator | ReferenceChain | DecisionTree | Playbook | Extension
MODELS: dict[str, type[BaseModel]] = {
    "operator": Operator,
    "chain": ReferenceChain,
    "tree": DecisionTree,
    "playbook": Playbook,
    "extension": Extension,
}

__all__ = [
    "EVIDENCE_ABOUT",
    "MODELS",
    "Alternative",
    "Citation",
    "Condition",
    "Constraint",
    "DecisionTree",
    "Denial",
    "Deprecation",
    "Discrepancy",
    "DiscrepancySource",
    "Evidence",
    "Example",
    "Extension",
    "ExtensionOperator",
    "GraphMode",
    "Interval",
    "Kernel",
    "KernelConfig",
    "KernelTensor",
    "Keywords",
    "Name",
    "Node",
    "OpClass",
    "Operator",
    "Option",
    "Parameter",
    "PlainTorch",
    "Playbook",
    "Prerequisite",
    "QuantMode",
    "Range",
    "Record",
    "ReferenceChain",
    "Return",
    "Rule",
    "Scalar",
    "SeenIn",
    "Shape",
    "Signal",
    "SignatureChange",
    "Site",
    "SizeFormula",
    "Stage",
    "StageTensor",
    "Strict",
    "Text",
    "Upstream",
    "Value",
    "Versions",
    "Waiver",
    "WrapperCheck",
    "WrapperLink",
]
