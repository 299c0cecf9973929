"""Draft records for operators that have none yet: every fact filled, no words.

A script cannot write summaries or descriptions (and must never copy upstream
sentences), so those fields get an explicit ``TODO:`` placeholder that ``kb validate``
accepts and :func:`needs_words` finds.  Categories are a first guess from the name.
"""

from __future__ import annotations

import re
from typing import Any

from kb.catalog.consistency import replacement_operator
from kb.catalog.signature import SchemaArg
from tools.upstream import PLACEHOLDER
from tools.upstream.facts import OperatorFacts
from tools.upstream.pages import ParamFacts
from tools.upstream.yamltext import dump_record

#: First match wins; the order settles overlaps (``npu_moe_distribute_*`` is MoE,
#: ``npu_mm_all_reduce_base`` is communication, ``npu_quant_matmul`` is matmul).
CATEGORY_RULES: tuple[tuple[str, str], ...] = (
    ("mla", r"mla"),
    (
        "kv-cache",
        r"kv_cache|kvcache|rope_cache|reshape_and_cache|pa_cache|paged_cache|scatter_update|scatter_nd_update|quant_scatter",
    ),
    ("moe", r"moe_distribute"),
    (
        "communication",
        r"all_gather|all_reduce|reduce_scatter|all_to_all|alltoall|attention_to_ffn|ffn_to_attention|worker|distribute_barrier",
    ),
    ("moe", r"moe|group_topk|topk_div|finalize_routing"),
    ("attention", r"attention|flash|lightning_indexer|attn|nsa_|softmax_lse|masked_softmax"),
    ("linear-attention", r"gated_delta|causal_conv1d"),
    ("sampling", r"top_k_top_p|sample|exponential|random_choice"),
    ("loss", r"cross_entropy|_loss|max_sum"),
    ("rope", r"rope|rotary"),
    ("matmul", r"matmul|bmm|(?:^|_)mm(?:_|$)|gmm|linear|(?:^|_)ffn$"),
    ("quantization", r"quant|int4pack|ifmr"),
    ("norm", r"norm"),
    ("activation", r"gelu|glu|silu|swish|mish|softmax"),
    ("memory", r"prefetch|memory|empty_with|stream|device_limit|npugraph"),
    (
        "format",
        r"format|dtype_cast|transpose|reshape|broadcast|contiguous|view_copy|stride_|slice|(?:^|_)pad$|indexing|one_hot",
    ),
    (
        "vision",
        r"nms|iou|roi|box|anchor|conv|yolo|rotated|deformable|grid_assign|sub_sample|normalize_batch|sign_bits|masked_fill",
    ),
    ("training", r"adam|dropout|lstm|gru|float_status"),
)


def guess_category(name: str) -> str:
    lowered = name.lower()
    for category, pattern in CATEGORY_RULES:
        if re.search(pattern, lowered):
            return category
    return "utility"


def placeholder_words(facts: OperatorFacts) -> dict[str, Any]:
    """Fields only a person can write, marked so nobody mistakes them for content."""
    if facts.page is not None:
        where = "the official page is the reference"
    elif facts.docstring:
        where = "no official page; the wheel docstring is the reference"
    else:
        where = "no official page and no docstring; only the schema is known"
    return {
        "summary": {"en": f"{PLACEHOLDER} summary", "zh": f"{PLACEHOLDER} 摘要"},
        "description": f"{PLACEHOLDER} description ({where})",
    }


def needs_words(data: dict[str, Any]) -> list[str]:
    """Dotted paths of the texts of a record that still hold the placeholder."""
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, str) and value.startswith(PLACEHOLDER):
            found.append(path)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(data, "")
    return found


def parameter_facts(arg: SchemaArg, page: ParamFacts | None) -> dict[str, Any]:
    """Schema facts of one argument, plus dtypes/formats/values the page states."""
    out: dict[str, Any] = {"name": arg.name, "type": arg.type}
    if not arg.required:
        out["required"] = False
        out["default"] = arg.default
    if arg.keyword_only:
        out["keyword_only"] = True
    if arg.mutated:
        out["mutated"] = True
    if page is not None:
        if arg.type.startswith("Tensor"):
            if page.dtypes:
                out["dtypes"] = list(page.dtypes)
            if page.formats:
                out["formats"] = list(page.formats)
        else:
            allowed = page.allowed(arg.type)
            if allowed:
                out["allowed"] = allowed
    return out


def _page_only_parameters(facts: OperatorFacts) -> list[dict[str, Any]]:
    """Without a schema, the page prototype is the best list of arguments."""
    assert facts.page is not None
    proto = facts.page.prototypes.get(facts.name, "")
    out = []
    for name in facts.page.prototype_args(facts.name):
        page = facts.page.params.get(name)
        entry: dict[str, Any] = {
            "name": name,
            "type": (page.type_text if page and page.type_text else "object"),
        }
        m = re.search(rf"\b{re.escape(name)}\s*=\s*([^,)]+)", proto)
        if m:
            entry["required"] = False
            entry["default"] = m.group(1).strip()
        if page is not None and entry["type"].startswith("Tensor"):
            if page.dtypes:
                entry["dtypes"] = list(page.dtypes)
            if page.formats:
                entry["formats"] = list(page.formats)
        out.append(entry)
    return out


def return_facts(facts: OperatorFacts) -> list[dict[str, Any]]:
    parsed = facts.parsed
    if parsed is None:
        return []
    page_returns = facts.returns if len(facts.returns) == len(parsed.returns) else []
    out = []
    for i, ret in enumerate(parsed.returns):
        pieces = ret.split()
        rtype = re.sub(r"\(\w+!?\)", "", pieces[0]) if pieces else "Tensor"
        if page_returns:
            name = page_returns[i].name
        elif len(pieces) > 1:
            name = pieces[-1]
        else:
            name = "out" if len(parsed.returns) == 1 else f"out{i}"
        entry: dict[str, Any] = {"name": name}
        if rtype != "Tensor":
            entry["type"] = rtype
        if page_returns and page_returns[i].dtypes and rtype.startswith("Tensor"):
            entry["dtypes"] = list(page_returns[i].dtypes)
        out.append(entry)
    return out


def upstream_block(facts: OperatorFacts, commit: str | None) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if facts.upstream_path:
        block["path"] = facts.upstream_path
    if commit and (facts.upstream_path or facts.schema):
        block["commit"] = commit
    if facts.url:
        block["url"] = facts.url
    if facts.schema_source:
        block["schema_source"] = facts.schema_source
    dep = deprecation_block(facts)
    if dep:
        block["deprecation"] = dep
    if facts.unsupported_products:
        block["unsupported_products"] = list(facts.unsupported_products)
    return block


def deprecation_block(facts: OperatorFacts) -> dict[str, Any] | None:
    """``upstream.deprecation``: where upstream deprecates the operator and the
    replacement it names, exactly as written (``kb validate`` holds superseded_by to it)."""
    if facts.status != "deprecated" or not facts.deprecated_in:
        return None
    out: dict[str, Any] = {"listed_in": list(facts.deprecated_in)}
    if facts.replacement:
        out["replace"] = facts.replacement
    return out


def deprecation_fields(facts: OperatorFacts, known: set[str]) -> dict[str, Any]:
    """``superseded_by`` when upstream names one operator we know, else a placeholder
    note that carries the replacement upstream names (a fact) for the writer."""
    if facts.status != "deprecated":
        return {}
    replacement = facts.replacement
    named = replacement_operator(replacement)
    if named and named in known and named != facts.name:
        return {"superseded_by": named}
    if replacement:
        return {
            "replacement_note": f"{PLACEHOLDER} say what to use instead (upstream names {replacement})"
        }
    return {
        "replacement_note": f"{PLACEHOLDER} upstream names no replacement; say what to use instead"
    }


def build_draft(facts: OperatorFacts, commit: str | None, known: set[str]) -> dict[str, Any]:
    """A draft record (plain data, model field order) for ``facts``."""
    data: dict[str, Any] = {
        "kind": "operator",
        "name": facts.name,
        "calls": list(facts.calls),
        "status": facts.status,
        "category": guess_category(facts.name),
    }
    data.update(placeholder_words(facts))
    parsed = facts.parsed
    if facts.schema is not None and parsed is not None:
        data["signature"] = facts.schema.text
        data["parameters"] = [parameter_facts(a, facts.params.get(a.name)) for a in parsed.args]
        returns = return_facts(facts)
        if returns:
            data["returns"] = returns
    elif facts.page is not None:
        params = _page_only_parameters(facts)
        if params:
            data["parameters"] = params
    if facts.products:
        data["products"] = list(facts.products)
    if facts.unsupported_products:
        data["unsupported_products"] = list(facts.unsupported_products)
    if facts.versions:
        data["versions"] = {"pytorch": list(facts.versions)}
    cited = docstring_evidence(facts, data, commit)
    if cited:
        data["evidence"] = [cited]
    up = upstream_block(facts, commit)
    if up:
        data["upstream"] = up
    data.update(deprecation_fields(facts, known))
    return data


DOCSTRING_SOURCE = ("Ascend/op-plugin", "codegen/templates/_op_plugin_docs.py")
"""Where op-plugin keeps the docstrings the wheel ships (``help(torch_npu.npu_x)``)."""


def docstring_evidence(
    facts: OperatorFacts, data: dict[str, Any], commit: str | None
) -> dict[str, Any] | None:
    """The citation ``kb validate`` wants for facts of a page-less operator that came from
    its docstring: which fields, and the file op-plugin keeps docstrings in."""
    if facts.page is not None or not facts.docstring or not commit:
        return None
    about = [
        f"parameters.{p['name']}"
        for p in data.get("parameters") or []
        if any(p.get(k) for k in ("dtypes", "formats", "allowed"))
    ]
    if data.get("products"):
        about.append("products")
    if not about:
        return None
    repo, path = DOCSTRING_SOURCE
    return {
        "about": about,
        "kind": "docstring",
        "repo": repo,
        "commit": commit,
        "path": path,
        "says": f"the docstring of {facts.name} lists these dtypes, formats, values and products",
    }


def draft_text(data: dict[str, Any]) -> str:
    return dump_record(data)
