"""Controlled vocabularies shared by records, the checker, the scanner and the site.

One module per vocabulary, each a table with one row per value holding every
spelling, code, size and attribute (``SchemeDef`` is the pattern); the ``Literal``
types (so pydantic rejects unknown values and the JSON Schema lists the allowed ones)
and the lookup dicts are derived from the rows.  A second list of these values
anywhere else is a bug waiting to disagree; ``tests/test_vocabulary_tables.py``
looks for one.  Records must use canonical ids; user input (candidate lists, CLI
filters) goes through :func:`normalize`.

This package must stay import-light: ``kb show`` and ``kb check`` use it on the hot path.
"""

from __future__ import annotations

from kb.vocab.call_paths import (
    CALL_PATHS,
    CALL_PREFIXES,
    LOOSE_CALL_PREFIXES,
    NAMESPACE_PATHS,
    PYTHON_NAMESPACES,
    CallPathDef,
    bare_operator,
)
from kb.vocab.dtypes import (
    DTYPE_ALIASES,
    DTYPE_BYTES,
    DTYPE_CODES,
    DTYPE_CONSTANT_PREFIXES,
    DTYPE_NAMES,
    DTYPE_SHORT,
    DTYPES,
    TORCH_DTYPE_ATTRS,
    TORCH_NPU_DTYPE_ATTRS,
    Dtype,
    DtypeDef,
)
from kb.vocab.formats import FORMAT_ALIASES, FORMAT_NAMES, FORMATS, Format, FormatDef
from kb.vocab.graph_modes import (
    CAPTURED_GRAPH_MODES,
    GRAPH_MODE_ROWS,
    GRAPH_MODES,
    GraphModeDef,
    GraphModeName,
)
from kb.vocab.namespaces import TORCH_NAMESPACE_ROWS, TORCH_NAMESPACES, TorchNamespaceDef
from kb.vocab.normalize import ALIAS_TABLES, CANONICAL, normalize, normalize_scheme
from kb.vocab.phases import (
    BOTH,
    CANDIDATE_PHASES,
    INFERENCE_PHASES,
    PHASE_ALIASES,
    PHASE_CODE_WORDS,
    PHASE_ROWS,
    PHASES,
    STAGE_PHASES,
    Phase,
    PhaseDef,
    StagePhase,
)
from kb.vocab.products import (
    PRODUCT_ALIASES,
    PRODUCT_CODE_WORDS,
    PRODUCT_FAMILY,
    PRODUCT_IDS,
    PRODUCT_LABELS,
    PRODUCT_OFFICIAL_NAMES,
    PRODUCTS,
    Product,
    ProductDef,
    collapse_products,
    product_family,
    product_from_official,
    product_members,
    product_support,
    products_from_official,
)
from kb.vocab.scheme_roles import quantized_roles, scheme_roles, schemes_compatible
from kb.vocab.schemes import (
    COMPUTE_DTYPES,
    KV_SCHEMES,
    QUANT_ALIASES,
    QUANT_LABELS,
    QUANT_ROLES,
    SCHEME_NAMES,
    SCHEMES,
    QuantRole,
    QuantScheme,
    SchemeDef,
)
from kb.vocab.statuses import (
    OFFICIAL_STATUSES,
    STATUS_MEANINGS,
    STATUS_PRIOR,
    STATUS_RANK,
    STATUS_ROWS,
    STATUSES,
    Status,
    StatusDef,
)
from kb.vocab.taxonomy import Category, Kind, Step

__all__ = [
    "ALIAS_TABLES",
    "BOTH",
    "CALL_PATHS",
    "CALL_PREFIXES",
    "CANDIDATE_PHASES",
    "CANONICAL",
    "CAPTURED_GRAPH_MODES",
    "COMPUTE_DTYPES",
    "DTYPES",
    "DTYPE_ALIASES",
    "DTYPE_BYTES",
    "DTYPE_CODES",
    "DTYPE_CONSTANT_PREFIXES",
    "DTYPE_NAMES",
    "DTYPE_SHORT",
    "FORMATS",
    "FORMAT_ALIASES",
    "FORMAT_NAMES",
    "GRAPH_MODES",
    "GRAPH_MODE_ROWS",
    "INFERENCE_PHASES",
    "KV_SCHEMES",
    "LOOSE_CALL_PREFIXES",
    "NAMESPACE_PATHS",
    "OFFICIAL_STATUSES",
    "PHASES",
    "PHASE_ALIASES",
    "PHASE_CODE_WORDS",
    "PHASE_ROWS",
    "PRODUCTS",
    "PRODUCT_ALIASES",
    "PRODUCT_CODE_WORDS",
    "PRODUCT_FAMILY",
    "PRODUCT_IDS",
    "PRODUCT_LABELS",
    "PRODUCT_OFFICIAL_NAMES",
    "PYTHON_NAMESPACES",
    "QUANT_ALIASES",
    "QUANT_LABELS",
    "QUANT_ROLES",
    "SCHEMES",
    "SCHEME_NAMES",
    "STAGE_PHASES",
    "STATUSES",
    "STATUS_MEANINGS",
    "STATUS_PRIOR",
    "STATUS_RANK",
    "STATUS_ROWS",
    "TORCH_DTYPE_ATTRS",
    "TORCH_NAMESPACES",
    "TORCH_NAMESPACE_ROWS",
    "TORCH_NPU_DTYPE_ATTRS",
    "CallPathDef",
    "Category",
    "Dtype",
    "DtypeDef",
    "Format",
    "FormatDef",
    "GraphModeDef",
    "GraphModeName",
    "Kind",
    "Phase",
    "PhaseDef",
    "Product",
    "ProductDef",
    "QuantRole",
    "QuantScheme",
    "SchemeDef",
    "StagePhase",
    "Status",
    "StatusDef",
    "Step",
    "TorchNamespaceDef",
    "bare_operator",
    "collapse_products",
    "normalize",
    "normalize_scheme",
    "product_family",
    "product_from_official",
    "product_members",
    "product_support",
    "products_from_official",
    "quantized_roles",
    "scheme_roles",
    "schemes_compatible",
]
