"""Inventory entries from the patterns found: one per module class and kind, with each
fact proven (the file and line that show it) or stated unknown.

A pattern belongs to the deepest module whose code computes all of it (a processor's
attention belongs to the module that holds the processor).  Instances of one class built
with different arguments may compute different things: a fact they agree on is the
class's fact; one they disagree on is said per caller (causality) or unknown.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Any

from kb.scan.model import mapping_ids as ids
from kb.scan.model.dataflow import Graph, owner_module
from kb.scan.model.entry import Module
from kb.scan.model.graph import Inst
from kb.scan.model.kinds import router_mapping
from kb.scan.model.match_attention import PATH_FACTS, UNTRACED, attention_matches
from kb.scan.model.match_dense import (
    Fact,
    Match,
    activations,
    feed_forwards,
    modulations,
    norm_matches,
    norms,
    residual_norms,
)
from kb.scan.model.match_moe import experts, routers
from kb.scan.model.needs import router_facts
from kb.scan.model.reader import Reading


@dataclass
class Found:
    """The patterns one class computes, per kind, over all its instances."""

    cls_name: str
    file: str
    line: int
    end_line: int
    kind: str
    facts: list[dict[str, Fact]] = field(default_factory=list)  # one per instance
    by_instance: dict[int, list[dict[str, Fact]]] = field(default_factory=dict)
    alone: set[int] = field(default_factory=set)  # instances built on their own


def matches(reading: Reading) -> list[tuple[Match, Inst | None]]:
    """Every pattern of the reading with the module instance that computes it; a norm that is
    part of a larger pattern of its module (the q/k norm of its attention, the norm its
    adaptive modulation scales) is said there, not as a module of its own."""
    graph = Graph(reading.interp.nodes)
    acts = activations(graph)
    norms_found = norms(graph)
    mlps = feed_forwards(graph, acts)
    found: list[Match] = []
    found += attention_matches(graph, norms_found)
    found += mlps
    found += norm_matches(norms_found)
    found += modulations(graph, norms_found)
    found += residual_norms(graph, norms_found)
    found += routers(graph)
    found += experts(graph, mlps)
    pairs = [(m, owner_module(m.nodes)) for m in found]
    used: set[tuple[int, int]] = set()  # (owner, norm node) a larger pattern includes
    for m, owner in pairs:
        if m.kind != "norm" and owner is not None:
            used |= {(id(owner), n.id) for n in (*m.nodes, *m.parts)}
    return [
        (m, owner)
        for m, owner in pairs
        if not (m.kind == "norm" and owner is not None and (id(owner), m.nodes[0].id) in used)
    ]


def _class_of(inst: Inst) -> tuple[str, str, int, int] | None:
    if inst.cls is None:
        return None
    node = inst.cls.node
    return node.name, inst.cls.file, node.lineno, node.end_lineno or node.lineno


def group(pairs: list[tuple[Match, Inst | None]]) -> list[Found]:
    """Patterns per (class, kind), in the order the classes appear."""
    by_key: dict[tuple[int, str], Found] = {}
    order: list[tuple[int, str]] = []
    for m, owner in pairs:
        if owner is None:
            continue
        where = _class_of(owner)
        if where is None:
            continue
        key = (id(owner.cls.node), m.kind)  # type: ignore[union-attr]
        if key not in by_key:
            by_key[key] = Found(where[0], where[1], where[2], where[3], m.kind)
            order.append(key)
        by_key[key].by_instance.setdefault(id(owner), []).append(m.facts)
        if owner.ancestors()[-1].standalone:
            by_key[key].alone.add(id(owner))
    for found in by_key.values():
        built = {i: a for i, a in found.by_instance.items() if i not in found.alone}
        alone = [_alternatives(a) for i, a in found.by_instance.items() if i in found.alone]
        blind = {i for i, alts in built.items() if all(UNTRACED in a for a in alts)}
        found.facts = [_alternatives(alts) for alts in (built or found.by_instance).values()]
        for i, facts in zip(built, found.facts if built else [], strict=False):
            if i not in blind:
                continue
            # its callers handed q and k in from code not run: the class read on its own
            # shows how they are rotated and normalised
            for name in PATH_FACTS:
                shown = {repr(f[name].value): f[name] for f in alone if name in f}
                if name not in facts and len(shown) == 1:
                    facts[name] = next(iter(shown.values()))
        for facts in (*found.facts, *alone):
            facts.pop(UNTRACED, None)
        if built:  # the class on its own adds what its callers did not exercise (a cache)
            extra = next((f["cache"] for f in alone if "cache" in f), None)
            if extra is not None and not any("cache" in f for f in found.facts):
                for f in found.facts:
                    f["cache"] = extra
                    if "causal" in f:  # decoding with a cache: each query sees the keys before it
                        f["causal"] = Fact(
                            True, extra.file, extra.line, "a cache that grows over calls"
                        )
    return sorted((by_key[k] for k in order), key=lambda f: (f.file, f.line))


def _alternatives(alts: list[dict[str, Fact]]) -> dict[str, Fact]:
    """One instance computing a pattern in several branches: what any branch shows (a cache
    written on one path is a cache), values that differ joined (the form) or unknown."""
    out: dict[str, Fact] = {}
    for facts in alts:
        for key, fact in facts.items():
            if key not in out:
                out[key] = fact
            elif repr(out[key].value) != repr(fact.value):
                if key == "form":
                    out[key] = Fact(
                        f"{out[key].value} | {fact.value}", out[key].file, out[key].line
                    )
                elif key == "causal" and True in (out[key].value, fact.value):
                    out[key] = out[key] if out[key].value is True else fact
                else:
                    out[key] = Fact(
                        "unknown",
                        out[key].file,
                        out[key].line,
                        f"branches differ ({out[key].value!r}, {fact.value!r})",
                    )
    return out


def agreed(
    found: Found,
) -> tuple[dict[str, Any], dict[str, str], list[str], dict[str, tuple[Any, ...]]]:
    """(facts, where each is proven, what stays unknown, the values an undecided fact can
    take) over a class's instances."""
    keys: list[str] = []
    for facts in found.facts:
        keys += [k for k in facts if k not in keys]
    values: dict[str, Any] = {}
    proven: dict[str, str] = {}
    unknown: list[str] = []
    cached = any("cache" in f for f in found.facts)
    for key in keys:
        seen = [f[key] for f in found.facts if key in f]
        if key == "cache" or (key == "causal" and cached):
            # a cache written when the caller hands one is the class's cache, and it proves
            # causality for the instances that decode with it
            seen = [f[key] for f in found.facts if "cache" in f and key in f] or seen
            found_facts = [f for f in found.facts if "cache" in f]
        else:
            found_facts = found.facts
        decided = [f for f in seen if f.value != "unknown"]
        if decided and len(decided) < len(seen) and key not in _EVERY:
            # an instance built where the reader could not follow the configuration (a
            # sub-config of a multimodal one) says nothing against the others
            seen = decided
        distinct = {repr(f.value) for f in seen}
        if (len(distinct) == 1 and len(seen) == len(found_facts)) or (
            len(distinct) == 1 and key not in _EVERY
        ):
            fact = seen[0]
            values[key] = fact.value
            if fact.line:
                proven[key] = f"{os.path.basename(fact.file)}:{fact.line}" + (
                    f" ({fact.why})" if fact.why else ""
                )
        elif key in _WHERE_RUN and len(distinct) == 1:
            # a rotation or q/k norm some instances run and others skip (a self-attention
            # with RoPE beside a cross-attention without, one class): the fused stage
            # replaces the code where it runs, so the class keeps it, saying where
            fact = seen[0]
            values[key] = fact.value
            where = f"{os.path.basename(fact.file)}:{fact.line} " if fact.line else ""
            proven[key] = (
                f"{where}(in {len(seen)} of {len(found_facts)} instances; the others skip it)"
            )
        elif key == "causal":
            values[key] = "caller"
            unknown.append("causal: instances differ (the caller's mask or flag decides)")
        else:
            values[key] = "unknown"
            unknown.append(f"{key}: instances differ ({', '.join(sorted(distinct))})")
    options: dict[str, tuple[Any, ...]] = {}
    for key, value in values.items():
        if value == "unknown" and not any(u.startswith(f"{key}:") for u in unknown):
            fact = next(f[key] for f in found.facts if key in f)
            unknown.append(f"{key}: {fact.why or 'not decided by the code'}")
            if fact.options:
                options[key] = fact.options
        if (
            value == "caller"
            and key == "causal"
            and not any(u.startswith("causal:") for u in unknown)
        ):
            unknown.append("causal: the caller's mask or flag decides")
    return values, proven, unknown, options


#: facts that hold only when every instance shows them (a rotation or a q/k norm seen in
#: one instance of a class and not another is not the class's)
_EVERY = frozenset({"causal", "rope", "qk_norm"})
#: of those, the facts a fused stage keeps where the code runs them (not a mask's choice)
_WHERE_RUN = frozenset({"rope", "qk_norm"})


def class_lines(node: ast.ClassDef) -> tuple[int, int]:
    return node.lineno, node.end_lineno or node.lineno


#: the inventory kind of each pattern kind (a function of the facts where they decide it)
def kind_of(pattern: str, facts: dict[str, Any]) -> str | None:
    if pattern == "attention":
        if facts.get("causal") is False and not facts.get("cache"):
            return "attention.bidirectional"  # every query sees every key, one pass per call
        return "attention.gqa" if facts.get("gqa") else "attention.mha"
    if pattern == "mlp":
        glu = facts.get("glu") in ("first", "second", "even", "odd")
        return "mlp.glu" if glu else "mlp.plain"
    if pattern == "norm":
        return f"norm.{facts.get('norm', 'unknown')}"
    return {
        "adaln": "norm.adaln",
        "residual_norm": "layer.decoder",
        "router": "moe.router",
        "experts": "moe.experts",
    }.get(pattern)


def modules(reading: Reading, entry: str) -> list[Module]:
    """The inventory entries the dataflow proves, in source order."""
    out: list[Module] = []
    groups = group(matches(reading))
    with_experts = {(f.file, f.line) for f in groups if f.kind == "experts"}
    for found in groups:
        if found.kind == "mlp" and (found.file, found.line) in with_experts:
            continue  # the experts' own MLP: planned as the experts
        values, proven, unknown, options = agreed(found)
        kind = kind_of(found.kind, values)
        if kind is None:
            continue
        own = os.path.abspath(found.file) == os.path.abspath(entry)
        # the scanned file as the caller spelled it (the class-facts reader's entries and
        # the findings use that spelling); a file the imports led to, as it was resolved
        file = entry if own else found.file
        m = Module(found.cls_name, kind, file, found.line, found.end_line, facts=values)
        m.proven = proven
        m.unknown = unknown
        m.options = options
        if kind == "moe.router":
            m.mappings.append(router_mapping(router_facts(values)))
        m.mappings += [x for x in _mapping(kind, values) if x not in m.mappings]
        if not own:
            m.facts["imported"] = True
        out.append(m)
    return out


def _mapping(kind: str, f: dict[str, Any]) -> list[str]:
    """The fusion mapping the facts name (the planner reads the chains for the rest)."""
    act = f.get("activation")
    if kind == "mlp.glu" and act in ("silu", "gelu", "gelu_tanh"):
        return [ids.SWIGLU if act == "silu" else ids.GEGLU]
    if kind == "mlp.plain" and act in ("gelu", "gelu_tanh"):
        return [ids.GELU_TANH if act == "gelu_tanh" else ids.GELU]
    if kind == "norm.rms":
        return [ids.RMS_NORM_ONE_PLUS_W if f.get("weight") == "1 + weight" else ids.RMS_NORM]
    if kind == "norm.layer":
        return [ids.LAYER_NORM]
    if kind == "layer.decoder" and f.get("norm") == "rms":
        return [ids.ADD_RMS_NORM]
    return []
