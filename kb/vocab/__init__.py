"""Controlled vocabularies shared by records, the checker, the scanner and the site.

One module per vocabulary, each a table with one row per value holding every
spelling, code, size and attribute (``SchemeDef`` is the pattern); the ``Literal``
types (so pydantic rejects unknown values and the JSON Schema lists the allowed ones)
and the lookup dicts are derived from the rows.  A second list of these values
anywhere else is a bug waiting to disagree; ``tests/test_vocabulary_tables.py``
looks for one.  Records must use canonical ids; user input (candidate lists, CLI
filters) goes through :func:`normalize`.

This package must stay import-light: ``kb show`` and ``kb check`` use it on the hot path.
So a name is imported from its module when first asked for (``kb show`` of an operator
needs only the product table, not the dtype, scheme and status tables behind
:func:`normalize`); the block under ``TYPE_CHECKING`` says where each name lives.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.vocab.call_paths import (
        CALL_PATHS,
        CALL_PREFIXES,
        LOOSE_CALL_PREFIXES,
        NAMESPACE_PATHS,
        PYTHON_NAMESPACES,
        CallPathDef,
        bare_operator,
        call_path,
        missing_call_path,
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
    from kb.vocab.formats import (
        BASE_FORMATS,
        FORMAT_ALIASES,
        FORMAT_CODES,
        FORMAT_NAMES,
        FORMATS,
        Format,
        FormatDef,
    )
    from kb.vocab.graph_modes import (
        CAPTURED_GRAPH_MODES,
        GRAPH_MODE_ROWS,
        GRAPH_MODES,
        GraphModeDef,
        GraphModeName,
    )
    from kb.vocab.namespaces import TORCH_NAMESPACE_ROWS, TORCH_NAMESPACES, TorchNamespaceDef
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
        INFERENCE_ONLY_PRODUCTS,
        NPU_BACKEND_WORDS,
        OTHER_BACKEND_WORDS,
        PRODUCT_ALIASES,
        PRODUCT_CODE_WORDS,
        PRODUCT_FAMILY,
        PRODUCT_FEATURE_WORDS,
        PRODUCT_IDS,
        PRODUCT_LABELS,
        PRODUCT_OFFICIAL_NAMES,
        PRODUCT_SOCS,
        PRODUCTS,
        SOC_ID_PRODUCTS,
        SOC_NAME_PRODUCTS,
        Product,
        ProductDef,
        collapse_products,
        product_family,
        product_from_official,
        product_members,
        product_support,
        products_from_official,
        sub_series_in,
    )
    from kb.vocab.roles import quantized_roles, scheme_roles, schemes_compatible
    from kb.vocab.schemes import (
        AMBIGUOUS_SCHEMES,
        COMPUTE_DTYPES,
        KV_SCHEMES,
        QUANT_ALIASES,
        QUANT_LABELS,
        QUANT_ROLES,
        SCHEME_FLAG,
        SCHEME_NAMES,
        SCHEMES,
        QuantRole,
        QuantScheme,
        SchemeDef,
    )
    from kb.vocab.spellings import (
        ALIAS_TABLES,
        CANONICAL,
        ambiguous_scheme_message,
        normalize,
        normalize_scheme,
        scheme_family,
        scheme_meanings,
        scheme_members,
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
    "AMBIGUOUS_SCHEMES",
    "BASE_FORMATS",
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
    "FORMAT_CODES",
    "FORMAT_NAMES",
    "GRAPH_MODES",
    "GRAPH_MODE_ROWS",
    "INFERENCE_ONLY_PRODUCTS",
    "INFERENCE_PHASES",
    "KV_SCHEMES",
    "LOOSE_CALL_PREFIXES",
    "NAMESPACE_PATHS",
    "NPU_BACKEND_WORDS",
    "OFFICIAL_STATUSES",
    "OTHER_BACKEND_WORDS",
    "PHASES",
    "PHASE_ALIASES",
    "PHASE_CODE_WORDS",
    "PHASE_ROWS",
    "PRODUCTS",
    "PRODUCT_ALIASES",
    "PRODUCT_CODE_WORDS",
    "PRODUCT_FAMILY",
    "PRODUCT_FEATURE_WORDS",
    "PRODUCT_IDS",
    "PRODUCT_LABELS",
    "PRODUCT_OFFICIAL_NAMES",
    "PRODUCT_SOCS",
    "PYTHON_NAMESPACES",
    "QUANT_ALIASES",
    "QUANT_LABELS",
    "QUANT_ROLES",
    "SCHEMES",
    "SCHEME_FLAG",
    "SCHEME_NAMES",
    "SOC_ID_PRODUCTS",
    "SOC_NAME_PRODUCTS",
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
    "ambiguous_scheme_message",
    "bare_operator",
    "call_path",
    "collapse_products",
    "missing_call_path",
    "normalize",
    "normalize_scheme",
    "product_family",
    "product_from_official",
    "product_members",
    "product_support",
    "products_from_official",
    "quantized_roles",
    "scheme_family",
    "scheme_meanings",
    "scheme_members",
    "scheme_roles",
    "schemes_compatible",
    "sub_series_in",
]


#: The modules behind the names above, the ones the hot paths ask for first; each name is
#: defined in exactly one of them (tests/test_cold_path.py checks the two lists agree).
_MODULES = (
    "products",
    "call_paths",
    "statuses",
    "taxonomy",
    "dtypes",
    "formats",
    "phases",
    "schemes",
    "graph_modes",
    "namespaces",
    "spellings",
    "roles",
)


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` from the module that defines it, imported on first use."""
    if name in __all__:
        for module in _MODULES:
            found = importlib.import_module(f"{__name__}.{module}").__dict__
            if name in found:
                globals()[name] = found[name]
                return found[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
