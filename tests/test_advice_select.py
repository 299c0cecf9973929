"""One chain selector under ``kb advise`` and ``kb scan --plan`` (issue 31, items 1-2).

For every chain record the facts it declares - the first question path that names it
(read from the trees) completed with the chain's own phase, product and scheme - are put
to ``kb advise`` and, through a minimal inventory module with the same facts, to the
planner: both must choose through :func:`kb.advice.select.select`, name the chain as
fitting and pick the same chain for that question.  Then the product as a fact (an
operator whose record lacks the product rules its chain out, with the reason) and the
ranking by practice, on records written here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kb.advice.select import Situation, select, situations
from kb.api.advise import advise
from kb.catalog.compiled import open_catalog
from kb.scan.model.entry import Module
from kb.scan.model.records import Target

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

CATALOG = open_catalog()
PATHS, _NODES = situations(CATALOG)
CHAINS = CATALOG.names("chain")


def declared(name: str) -> tuple[Situation | None, dict[str, str]]:
    """The first question path naming the chain (its own option before an alternative)
    and the facts it declares, completed from the chain record."""
    chain = CATALOG.get(name)
    assert chain is not None
    paths = PATHS.get(name, [])
    sit = min(paths, key=lambda s: (s.rank, s.tree, s.order)) if paths else None
    facts = sit.flags() if sit else {}
    facts.setdefault("phase", chain["phases"][0])
    if chain.get("products"):
        facts.setdefault("product", chain["products"][0])
    if chain.get("quantization"):
        facts.setdefault("quant", chain["quantization"][0])
    return sit, facts


def advised(tree: str, facts: dict[str, str]) -> dict[str, Any]:
    """``kb advise TREE --no-input`` with the facts; a question the facts leave open (a
    later question of the same path) takes the first completion's answers."""
    answers = dict(facts)
    for _ in range(4):
        result = advise(CATALOG, CATALOG.get(tree) or {}, answers)
        if result["outcome"] != "completions":
            return result
        first = result["completions"][0]["adds"]
        answers.update({k.removeprefix("--"): v for k, v in first.items()})
    raise AssertionError(f"advise {tree} {answers} never completes")


def chosen_at(result: dict[str, Any], node: str) -> list[str]:
    """The chains advise gives for one question, best first."""
    entries = result["chains"] + result["alternatives"]
    return [e["name"] for e in entries if e.get("question") == node]


def fixture_module(
    chain: dict[str, Any], sit: Situation | None, facts: dict[str, str]
) -> Module | None:
    """A minimal inventory module with the facts (the kind from the module facts, the
    tree answers as module facts); None for a chain no inventory module is planned with
    (runtime, prefetch, communication, whole-model quantization, cache layouts)."""
    extra: dict[str, Any] = {k: v for k, v in facts.items() if k not in ("product", "quant")}
    module = chain["module"]
    arch = facts.get("arch")
    if module == "attention" and arch in ("gqa", "mha"):
        cache = facts.get("cache", "slot")  # a cache the code keeps, organised as the port says
        body = {"cache": cache, "causal": True, "sinks": facts.get("sinks") == "yes"}
        if facts.get("window") == "yes":
            body["sliding_window"] = 4096
        return _module(f"attention.{arch}", {**extra, **body})
    if module == "attention" and arch == "mla":
        indexer = facts.get("indexer", "no") != "no"
        return _module(
            "attention.mla", {**extra, "indexer": indexer, "rope": "interleave", "cache": "slot"}
        )
    if module == "attention" and arch == "linear":
        if facts.get("variant", "gated-delta-rule") != "gated-delta-rule":
            return None  # the inventory names no per-channel-decay (KDA) variant yet
        return _module("attention.linear", {**extra, "variant": "gated-delta-rule"})
    if module == "attention" and arch == "encoder":
        kind = {"vision": "attention.vision", "dit": "attention.dit"}.get(
            facts.get("model", ""), "attention.bidirectional"
        )
        return _module(kind, {**extra, "cache": "none", "causal": False})
    if module == "moe" and sit is not None and sit.node in ("gate", "routed-experts"):
        gate = facts.get("gate", "softmax")
        router = {
            "scoring": "sigmoid" if gate == "sigmoid" else "softmax",
            "bias": gate in ("sigmoid", "softmax-bias"),
            "groups": "config.n_group" if gate == "sigmoid" else 1,
            "order": "score_then_topk",
        }
        return _module("moe.router", {**extra, **router})
    if module == "moe":
        act = facts.get("activation", "swiglu")
        clamped = act.startswith("clamped")
        experts = {
            "activation": "gelu" if act in ("geglu", "gelu-no-mul") else "silu",
            "clamped_glu": clamped,
            "form": "loop over masks",
        }
        if act == "gelu-no-mul":
            experts["glu"] = "none"  # one projection in, the whole width activated
        elif act == "clamped-halves":
            experts["glu"] = "first"
        return _module("moe.experts", {**extra, **experts})
    if module == "ffn":
        act = facts.get("activation", "swiglu")
        if act in ("swiglu", "geglu"):
            gated = {
                "activation": "silu" if act == "swiglu" else "gelu",
                "glu": "first",
                "merged": True,
            }
            return _module("mlp.glu", {**extra, **gated})
        plain = "quick_gelu" if act == "fast-gelu" else "gelu_tanh"
        return _module("mlp.plain", {**extra, "activation": plain})
    return None


def _module(kind: str, facts: dict[str, Any]) -> Module:
    return Module("Fixture", kind, "fixture.py", 1, 20, facts)


def _ctx() -> Any:
    from kb.api.scan import scanner
    from kb.scan.engine import ScanOptions

    return scanner(options=ScanOptions(use_config=False)).ctx


CTX = _ctx()


def planned(m: Module, facts: dict[str, str]) -> tuple[str | None, list[str]]:
    """The chain ``kb scan --plan`` plans for the module, and the entry's notes."""
    from kb.scan.model.plan import plan_module

    target = Target(facts.get("product"), None, facts.get("quant"), facts.get("parallel", "none"))
    entries = plan_module(CTX, m, target, [facts["phase"]])
    assert entries, m
    return entries[0].get("chain"), entries[0].get("notes", [])


# ------------------------------------------------------------------------ parity


@pytest.mark.parametrize("name", CHAINS)
def test_advise_and_plan_choose_the_same_chain_for_the_facts_a_chain_declares(name: str) -> None:
    chain = CATALOG.get(name)
    assert chain is not None
    sit, facts = declared(name)
    if sit is None:
        # named on no question path: only its records decide, and they must let it fit
        fit = select(CATALOG, facts, module=chain["module"])
        assert name in fit.chains, [m.as_dict() for m in fit.rejected if m.chain == name]
        return
    result = advised(sit.tree, facts)
    facts = {**facts, **{k.removeprefix("--"): v for k, v in result["answers"].items()}}
    assert result["outcome"] == "advice", result.get("verdict")
    offered = chosen_at(result, sit.node)
    assert name in offered, (facts, offered, result.get("not_fitting"))
    m = fixture_module(chain, sit, facts)
    if m is None:
        # no inventory module plans this category: the selector the planner calls agrees
        own = select(CATALOG, {**facts}, tree=sit.tree)
        assert [f.chain for f in own.at(sit.node)[0]] == offered
        return
    chain_planned, notes = planned(m, facts)
    # one question may name chains of several modules (the quantization tree's MXFP4 answer:
    # a linear and an MoE-expert chain); the planner plans the module's own, best first
    offered = [c for c in offered if (CATALOG.get(c) or {}).get("module") == chain["module"]]
    if chain_planned == offered[0]:
        return
    # the planner may pass the selector's choice over only when that chain's stages do not
    # compute the module, and then it says so
    passed = f"{offered[0]} (what kb advise gives for these facts) is not planned: "
    assert any(n.startswith(passed) for n in notes), (facts, offered, chain_planned, notes)


def test_the_parity_covers_most_chains_through_the_planner() -> None:
    through = [
        n
        for n in CHAINS
        if (d := declared(n))[0] is not None and fixture_module(CATALOG.get(n) or {}, *d)
    ]
    assert len(through) >= 35, len(through)


# ------------------------------------------------------------------------ product as a fact


def test_an_operator_that_does_not_list_the_product_rules_its_chain_out(capsys) -> None:
    """Atlas 300I DUO (atlas-inference) decode on a paged cache: FA v2's record does not list
    the product, so gqa-decode-paged is named as not fitting with that reason - by the
    selector, by ``kb advise`` (JSON) and by the planner, never staged."""
    from kb.cli import main

    facts = {"arch": "gqa", "phase": "decode", "cache": "paged", "product": "atlas-inference"}
    chosen = select(CATALOG, facts, tree="attention")
    assert "gqa-decode-paged" not in chosen.chains
    (miss,) = [m for m in chosen.rejected if m.chain == "gqa-decode-paged"]
    assert any(
        r.startswith("npu_fused_infer_attention_score_v2's record does not list atlas-inference")
        for r in miss.reasons
    ), miss.reasons
    argv = ["advise", "attention", "--format", "json", "--no-input"]
    argv += [x for k, v in facts.items() for x in (f"--{k}", v)]
    main(argv)
    result = json.loads(capsys.readouterr().out)
    staged = {c["name"] for c in result["chains"] + result["alternatives"]}
    assert "gqa-decode-paged" not in staged
    named = {m["chain"]: m["reasons"] for m in result["not_fitting"]}
    assert any("does not list atlas-inference" in r for r in named["gqa-decode-paged"])
    plan_chain, _notes = planned(
        _module("attention.gqa", {"cache": "paged", "causal": True}), {**facts, "quant": "bf16"}
    )
    assert plan_chain != "gqa-decode-paged"


class _Records:
    """A catalog of records written here (select reads ``get`` and ``records``)."""

    def __init__(self, *records: dict[str, Any]) -> None:
        self.by_name = {r["name"]: r for r in records}

    def get(self, spelling: str) -> dict[str, Any] | None:
        return self.by_name.get(spelling)

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        return iter([r for r in self.by_name.values() if kind is None or r["kind"] == kind])


def _op(
    name: str, products: list[str], seen: int, status: str = "stable", releases: int = 3
) -> dict[str, Any]:
    return {
        "kind": "operator",
        "name": name,
        "status": status,
        "products": products,
        "parameters": [{"name": "x", "type": "Tensor"}],
        "seen_in": [{"repo": f"org/port{i}", "commit": "0" * 40} for i in range(seen)],
        "versions": {"pytorch": [f"2.{i}" for i in range(1, releases + 1)]},
    }


def _chain(name: str, op: str, products: list[str] | None = None) -> dict[str, Any]:
    return {
        "kind": "chain",
        "name": name,
        "module": "attention",
        "phases": ["decode"],
        "quantization": ["bf16"],
        "products": products or [],
        "stages": [{"stage": "core", "operator": op}],
        "prerequisites": [],
        "sources": [],
    }


_TREE = {
    "kind": "tree",
    "name": "core",
    "root": "cache",
    "nodes": [
        {
            "id": "cache",
            "key": "cache",
            "question": {"en": "Which cache?"},
            "options": [
                {
                    "value": "paged",
                    "label": "paged",
                    "chain": "first-in-tree",
                    "alternatives": [{"chain": "second-in-tree", "when": "another port"}],
                },
                {"value": "contiguous", "label": "contiguous", "chain": "other-branch"},
            ],
        }
    ],
}


def test_a_chain_whose_operator_lacks_the_product_is_named_with_the_reason() -> None:
    records = _Records(
        _TREE,
        _chain("first-in-tree", "op_a"),
        _chain("second-in-tree", "op_b"),
        _chain("other-branch", "op_a"),
        _op("op_a", ["atlas-a2", "atlas-a3"], 2),
        _op("op_b", ["atlas-a2", "atlas-inference"], 1),
    )
    chosen = select(records, {"cache": "paged", "phase": "decode", "product": "atlas-inference"})
    assert chosen.chains == ["second-in-tree"]
    reasons = {m.chain: m.reasons for m in chosen.rejected}
    assert reasons["first-in-tree"] == [
        "op_a's record does not list atlas-inference (it lists atlas-a2, atlas-a3)"
    ]
    assert "--cache paged: the chain is for --cache contiguous" in reasons["other-branch"]
    # the product a family member names is the family's: A2 inference runs what lists A2
    assert select(records, {"cache": "paged", "product": "atlas-a2-inference"}).chains == [
        "first-in-tree",
        "second-in-tree",
    ]


# ------------------------------------------------------------------------ ranking by practice


def _ranked(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    records = _Records(
        _TREE, _chain("first-in-tree", "op_a"), _chain("second-in-tree", "op_b"), a, b
    )
    return select(records, {"cache": "paged", "phase": "decode"}).chains


def test_fitting_chains_rank_by_practice_before_the_trees_order() -> None:
    # more code bases calling every operator first, whatever the tree lists first
    assert _ranked(_op("op_a", [], 1), _op("op_b", [], 3)) == ["second-in-tree", "first-in-tree"]
    # as many code bases: documented before undocumented
    assert _ranked(_op("op_a", [], 2, "undocumented"), _op("op_b", [], 2)) == [
        "second-in-tree",
        "first-in-tree",
    ]
    # as many and both documented: the newer release
    assert _ranked(_op("op_a", [], 2, releases=2), _op("op_b", [], 2, releases=5)) == [
        "second-in-tree",
        "first-in-tree",
    ]
    # nothing tells them apart: the tree's order
    assert _ranked(_op("op_a", [], 2), _op("op_b", [], 2)) == ["first-in-tree", "second-in-tree"]


def test_a_chain_ported_on_the_product_ranks_before_practice_elsewhere() -> None:
    records = _Records(
        _TREE,
        _chain("first-in-tree", "op_a", ["atlas-a3"]),
        _chain("second-in-tree", "op_b", ["atlas-a2"]),
        _op("op_a", ["atlas-a2", "atlas-a3"], 1),
        _op("op_b", ["atlas-a2", "atlas-a3"], 4),
    )
    facts = {"cache": "paged", "phase": "decode"}
    assert select(records, {**facts, "product": "atlas-a2"}).chains[0] == "second-in-tree"
    assert select(records, {**facts, "product": "atlas-a3"}).chains[0] == "first-in-tree"


def test_advise_lists_the_same_ranking_the_selector_gives(capsys) -> None:
    """On the real records: kb advise's chains and alternatives for one question are the
    selector's fits there, in its order, each with why it fits."""
    from kb.cli import main

    main(
        [
            "advise",
            "attention",
            "--format",
            "json",
            "--no-input",
            "--arch",
            "gqa",
            "--phase",
            "decode",
            "--cache",
            "paged",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    given = [c["name"] for c in result["chains"] + result["alternatives"]]
    facts = {k.removeprefix("--"): v for k, v in result["answers"].items()}
    assert given == [
        f.chain for f in select(CATALOG, facts, tree="attention").at("gqa-decode-cache")[0]
    ]
    assert all(c["why"] for c in result["chains"] + result["alternatives"])


def test_an_unknown_product_is_a_usage_error_not_a_silent_misfit(capsys) -> None:
    from kb.cli import main

    argv = ["advise", "attention", "--arch", "gqa", "--phase", "decode", "--cache", "paged"]
    assert main([*argv, "--product", "atlas-z9", "--no-input"]) == 2
    err = capsys.readouterr().err
    assert "--product 'atlas-z9' is not a product" in err and "atlas-a3" in err
    assert "Traceback" not in err
