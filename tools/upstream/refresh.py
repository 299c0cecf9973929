"""Bring the fact fields of an existing record up to date with upstream.

Only facts move: the signature, each parameter's type/required/default/keyword_only/
mutated, the dtypes and formats a page lists (added, never removed — a person may have
narrowed or derived them), products (the page's, plus those ``evidence`` names), PyTorch
versions and the upstream reference.  Summaries, descriptions, rules, constraints, examples, keywords and shapes are never
read or written here, and the file keeps its layout (see :mod:`yamltext`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kb.catalog.consistency import evidenced_values, replacement_operator
from kb.catalog.models import Deprecation, Operator, Parameter, Upstream, Versions
from tools.upstream.drafts import parameter_facts, upstream_block
from tools.upstream.facts import OperatorFacts
from tools.upstream.yamltext import PatchError, update_text

ORDERS: dict[tuple[Any, ...], Sequence[str]] = {
    (): [f.alias or n for n, f in Operator.model_fields.items()],
    ("parameters", "*"): list(Parameter.model_fields),
    ("upstream",): list(Upstream.model_fields),
    ("upstream", "deprecation"): list(Deprecation.model_fields),
    ("versions",): list(Versions.model_fields),
}
LIST_KEYS = {("parameters",): "name"}
#: Keys of ``upstream:`` only the importer writes: removed when upstream stops saying them.
IMPORTER_OWNED = ("deprecation", "unsupported_products")
#: Schema fields of a parameter and the model's default for each.
SCHEMA_FIELDS = (
    ("type", None),
    ("required", True),
    ("default", None),
    ("keyword_only", False),
    ("mutated", False),
)


@dataclass
class Refresh:
    name: str
    data: dict[str, Any]
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _merge(have: list[Any] | None, add: list[str]) -> list[Any]:
    out = list(have or [])
    for item in add:
        if item not in out:
            out.append(item)
    return out


def refreshed(
    data: dict[str, Any], facts: OperatorFacts, commit: str | None, known: set[str] | None = None
) -> Refresh:
    """The record's data with upstream facts applied; ``data`` itself is not changed.

    ``known`` are the operator names that have records: ``superseded_by`` is set to the
    replacement deprecated.yaml names only when it is one of them."""
    new = copy.deepcopy(data)
    result = Refresh(facts.name, new)
    parsed = facts.parsed
    if facts.schema is not None and parsed is not None:
        if new.get("signature") != facts.schema.text:
            result.changes.append("signature")
            new["signature"] = facts.schema.text
        old_params = [p for p in (new.get("parameters") or []) if isinstance(p, dict)]
        by_name = {p.get("name"): p for p in old_params}
        params = []
        for arg in parsed.args:
            param = by_name.get(arg.name)
            if param is None:
                param = parameter_facts(arg, facts.params.get(arg.name))
                result.changes.append(f"parameters.{arg.name} added")
                params.append(param)
                continue
            want = {
                "type": arg.type,
                "required": arg.required,
                "default": arg.default,
                "keyword_only": arg.keyword_only,
                "mutated": arg.mutated,
            }
            for attr, model_default in SCHEMA_FIELDS:
                value = want[attr]
                if attr in param:
                    if param[attr] != value:
                        result.changes.append(f"parameters.{arg.name}.{attr}")
                        if value is None:
                            del param[attr]
                        else:
                            param[attr] = value
                elif value != model_default:
                    result.changes.append(f"parameters.{arg.name}.{attr}")
                    param[attr] = value
            page = facts.params.get(arg.name)
            if page is not None and arg.type.startswith("Tensor"):
                for key, listed in (("dtypes", page.dtypes), ("formats", page.formats)):
                    merged = _merge(param.get(key), listed)
                    if merged != list(param.get(key) or []):
                        result.changes.append(f"parameters.{arg.name}.{key}")
                        param[key] = merged
            params.append(param)
        dropped = [n for n in by_name if n not in {a.name for a in parsed.args}]
        for name in dropped:
            result.changes.append(f"parameters.{name} removed (not in the schema any more)")
        if (params or "parameters" in new) and (params != old_params or dropped):
            new["parameters"] = params
        returns = new.get("returns") or []
        if returns and len(returns) != len(parsed.returns):
            result.warnings.append(
                f"returns: the record lists {len(returns)}, the schema has {len(parsed.returns)};"
                " a person has to reconcile them"
            )
    if facts.products is not None:
        # products evidence names (a newer kernel reference, say) stay next to the page's
        kept = evidenced_values(new.get("evidence"), "products")
        have = list(new.get("products") or [])
        products = list(facts.products)
        products += [p for p in have if p in kept and p not in products]
        if set(products) != set(have):
            result.changes.append("products")
            new["products"] = products
    # x marks add to unsupported_products; entries stated from source code stay
    gone = [
        p
        for p in facts.unsupported_products or []
        if p not in (new.get("unsupported_products") or [])
    ]
    if gone:
        result.changes.append("unsupported_products")
        new["unsupported_products"] = _merge(new.get("unsupported_products"), gone)
    if facts.versions:
        versions = new.get("versions")
        if not isinstance(versions, dict):
            versions = {}
        if versions.get("pytorch") != facts.versions:
            result.changes.append("versions.pytorch")
            versions = dict(versions)
            versions["pytorch"] = list(facts.versions)
            new["versions"] = versions
    want_up = upstream_block(facts, commit)
    up = new.get("upstream")
    up = dict(up) if isinstance(up, dict) else {}
    changed = [k for k, v in want_up.items() if up.get(k) != v]
    stale = [k for k in IMPORTER_OWNED if k in up and k not in want_up]
    if changed or stale:
        for k in changed:
            up[k] = want_up[k]
        for k in stale:
            del up[k]
        result.changes += [f"upstream.{k}" for k in changed]
        result.changes += [f"upstream.{k} removed" for k in stale]
        new["upstream"] = up
    named = replacement_operator(facts.replacement) if facts.status == "deprecated" else None
    wanted = named and named != facts.name and (known is None or named in known)
    if wanted and new.get("superseded_by") != named:
        result.changes.append("superseded_by")
        new["superseded_by"] = named
    return result


def refresh_text(text: str, refresh: Refresh) -> str:
    """The record file's text edited to hold ``refresh.data``; raises PatchError."""
    if not refresh.changes:
        return text
    return update_text(text, refresh.data, ORDERS, LIST_KEYS)


__all__ = ["ORDERS", "PatchError", "Refresh", "refresh_text", "refreshed"]
