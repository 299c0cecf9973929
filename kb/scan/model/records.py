"""What the planner reads of the records: chains, what an operator fuses, its parameters
and their allowed values, where it runs and since which release, and the target a plan
is for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kb.catalog.kernelfacts import kernel_products
from kb.lint.context import Context
from kb.vocab import product_support
from kb.vocab.parallel import DEFAULT_PARALLEL

TORCH = "plain-torch"


# -- reading the records ---------------------------------------------------------------------


def chains(ctx: Context) -> list[dict[str, Any]]:
    key = ("plan_chains",)
    if key not in ctx.memo:
        ctx.memo[key] = list(ctx.catalog.records("chain"))
    return ctx.memo[key]  # type: ignore[no-any-return]


def fuses(ctx: Context, op: str) -> frozenset[str]:
    key = ("plan_fuses", op)
    if key not in ctx.memo:
        rec = ctx.operator(op) if op != TORCH else None
        ctx.memo[key] = frozenset(rec.get("fuses") or ()) if rec is not None else frozenset()
    return ctx.memo[key]  # type: ignore[no-any-return]


def params(ctx: Context, op: str) -> set[str]:
    rec = ctx.operator(op)
    return {p.get("name") for p in (rec.get("parameters") or [])} if rec is not None else set()  # type: ignore[misc]


def param_type(ctx: Context, op: str, name: str) -> str:
    return str(param(ctx, op, name).get("type") or "")


def spells(ctx: Context, op: str, implied: dict[str, Any]) -> bool:
    """Whether ``op`` accepts every implied value it takes as written (a closed list of
    strings that lacks one is another spelling or another mode; a numeric code is noted
    by :func:`kb.scan.model.stages.stage`, not refused here)."""
    return all(
        v in (param(ctx, op, k).get("allowed") or [v])
        for k, v in implied.items()
        if param_type(ctx, op, k).startswith("str")
    )


def param(ctx: Context, op: str, name: str) -> dict[str, Any]:
    rec = ctx.operator(op)
    for p in (rec.get("parameters") or []) if rec is not None else []:
        if p.get("name") == name:
            return p  # type: ignore[no-any-return]
    return {}


#: Support levels a plan may build on (kernel-only support is reported, not refused).
USABLE = ("yes", "partial", "kernel")


def support(ctx: Context, op: str, product: str | None) -> str:
    rec = ctx.operator(op)
    if rec is None or not product:
        return "yes"
    products = list(rec.get("products") or ())
    page = (
        product_support(product, products, list(rec.get("unsupported_products") or ()))
        if products
        else "undocumented"
    )
    if page == "undocumented" and product_support(product, kernel_products(rec)) != "undocumented":
        return "kernel"  # built for it, not documented on it (KB209): a usable, weaker fit
    return page


def in_release(ctx: Context, op: str, release: str | None) -> bool:
    rec = ctx.operator(op)
    if rec is None or not release:
        return True
    known, _exact = ctx.release(release)
    return known is None or ctx.record_has(rec, known) is not False


@dataclass
class Target:
    product: str | None
    torch_npu: str | None
    quantization: str | None
    parallel: str = DEFAULT_PARALLEL  # kb.vocab.parallel: how the model is deployed
