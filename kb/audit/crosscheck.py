"""Chains and trees judged by the operator records, through the checker's own rules.

Advice that contradicts the operator records is worse than none, so ``kb validate``
turns every chain stage into a candidate of the candidate-list contract - operator,
literal ``args``, the tensors it passes, its phase, the chain, one target per product
the chain claims - and runs the real ``kb check`` rules on it.  An error (what makes
``kb check`` fail) is a problem unless the stage waives that code with a reason (a
known checker false positive); a waiver that matches nothing is a problem too, so
waivers die with the bug.  The record rules' ``require`` lists are checked against
what the stage passes (reported as KB110, waivable the same way).

A chain that claims a product vouches for every stage on it, so the product-documentation
warnings of ``kb check`` (KB208: the operator's products do not mention it; KB209: only
its kernel is compiled for it) are problems too, on the products the chain names - one
judgement, the checker's own rules, never a second copy of them.  Every stage counts,
whatever phase or scheme it is limited to: the chain claims its products for each of its
branches.  These are not waivable: the operator record gains the product with a cited
source (``evidence``, ``about: [products]``), or the chain drops the product.

Trees are judged the same way: a chain reached on a path must serve the product and
phase the path answered, an operator leaf must pass ``kb check`` there, and every call
a verdict ``denies`` must be rejected by ``kb check`` - a verdict may not deny what an
operator record allows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.catalog.models import DecisionTree, Denial, ReferenceChain, Stage, StageTensor
from kb.catalog.store import Loaded, Problem, StoreResult
from kb.check.rules.target import ProductKernelOnly, ProductNotDocumented
from kb.vocab import INFERENCE_PHASES

#: Rules that judge a whole candidate list, not one call: a chain legitimately runs
#: an operator twice (two grouped matmuls) and lists several prefetch points.
CHAIN_IGNORES = ("KB305", "KB410")
#: A finding at these severities makes a stage wrong (kb check passes with warnings).
FAILING = ("error",)
#: Warnings that still make a stage wrong on a product its chain claims: the operator is
#: not documented there (KB208) or only compiled there (KB209).  Not waivable.
UNDOCUMENTED_PRODUCT = (ProductNotDocumented.code, ProductKernelOnly.code)
#: The checker code whose meaning a missing required argument has (rule-requires-argument).
GAP_CODE = "KB110"
#: Target used for a denial or leaf when neither it nor its record names a product.
FALLBACK_PRODUCT = "atlas-a3"


@dataclass
class _Candidate:
    """One candidate of a generated list and where its facts come from in a record."""

    entry: dict[str, Any]
    path: tuple[Any, ...]
    passed: set[str] = field(default_factory=set)


def _tensors(
    op: dict[str, Any] | None, passed: dict[str, str], known: dict[str, StageTensor]
) -> dict[str, dict[str, str]]:
    """Tensor arguments a call passes: its expressions naming tensors, with known facts."""
    params = {p["name"]: p for p in (op or {}).get("parameters") or []}
    out: dict[str, dict[str, str]] = {}
    for name in passed:
        if str(params.get(name, {}).get("type", "")).startswith("Tensor"):
            out[name] = {}
    for name, spec in known.items():
        facts = {k: v for k, v in (("dtype", spec.dtype), ("format", spec.format)) if v}
        out.setdefault(name, {}).update(facts)
    return out


def _document(product: str, candidates: list[_Candidate], model: str) -> str:
    data = {
        "version": 1,
        "model": model,
        "target": {"product": product},
        "candidates": [c.entry for c in candidates],
    }
    return json.dumps(data, ensure_ascii=False, indent=1)


def _stage_phase(stage: Stage, chain: ReferenceChain) -> str:
    if stage.phase != "both":
        return stage.phase
    phases = [p for p in chain.phases if p in INFERENCE_PHASES]
    return phases[0] if len(phases) == 1 else "both"


def _stage_candidates(chain: ReferenceChain, catalog: Any) -> list[_Candidate]:
    out = []
    for i, stage in enumerate(chain.stages):
        if stage.operator == "plain-torch":
            continue
        op = catalog.get(stage.operator)
        entry: dict[str, Any] = {
            "module": f"chain.{chain.name}",
            "phase": _stage_phase(stage, chain),
            "operator": stage.operator,
            "chain": chain.name,
        }
        if stage.args:
            entry["args"] = stage.args
        tensors = _tensors(op, stage.passed, stage.tensors)
        if tensors:
            entry["tensors"] = tensors
        out.append(_Candidate(entry, ("stages", i), set(stage.passed)))
    return out


class _Lists:
    """The kb check engine (the rules ``kb.check.check_text`` runs), reused for many lists.

    Every list gets its own file name: the engine memoises per (file, candidate), so two
    generated lists under one name would share results.
    """

    def __init__(self, catalog: Any, ignore: tuple[str, ...]) -> None:
        from kb.check.engine import Checker
        from kb.rules import RULES

        self.engine = Checker(catalog, rules=RULES, ignore=list(ignore))
        self.count = 0

    def check_text(self, file: str, text: str) -> list[Any]:
        self.count += 1
        findings: list[Any] = self.engine.check_text(f"{file}#{self.count}", text)
        return findings


def _checker(catalog: Any, ignore: tuple[str, ...]) -> _Lists:
    return _Lists(catalog, ignore)


def _problem(loaded: Loaded, path: tuple[Any, ...], message: str) -> Problem:
    from kb.catalog.store import _format_field

    line, col = loaded.located.where(path)
    return Problem(loaded.file, line, col, _format_field(path), message)


def _gaps(text: str, candidates: list[_Candidate], catalog: Any) -> Iterator[tuple[int, str]]:
    """(candidate index, message) for arguments a fired record rule requires but nobody passes."""
    from kb.check.conditions import fires, stated
    from kb.check.parse import parse

    doc, _ = parse("<chain>", text)
    for cand in doc.candidates:
        rec = catalog.get(cand.operator or "")
        if rec is None or rec.get("kind") != "operator" or cand.index >= len(candidates):
            continue
        given = candidates[cand.index].passed
        for rule in rec.get("rules") or []:
            if not rule.get("require") or not fires(rule, cand, doc.target):
                continue
            missing = [n for n in rule["require"] if stated(cand, n) is None and n not in given]
            if missing:
                yield (
                    cand.index,
                    (
                        f"{rec['name']} requires {', '.join(missing)} here (record rule "
                        f"{rule.get('id')}: {rule.get('message', '')}); pass it in "
                        "args or passed"
                    ),
                )


#: What a chain can do about an operator its product is not documented for.
_CLAIM = (
    "; the chain claims {product}: cite a source for {product} in the operator record "
    "(evidence, about: [products]) or drop {product} from the chain's products"
)


def _fails(finding: Any, product: str, chain: ReferenceChain) -> bool:
    """Whether a kb check finding on a stage makes the chain wrong on ``product``."""
    if finding.severity in FAILING:
        return True
    return finding.code in UNDOCUMENTED_PRODUCT and product in chain.products


def _waiver(stage: Stage, code: str, product: str) -> int | None:
    """The index of the stage's waiver for this finding, if any."""
    return next(
        (j for j, w in enumerate(stage.waivers) if w.code == code and w.product in (None, product)),
        None,
    )


def check_chain(loaded: Loaded, catalog: Any, checker: Any = None) -> list[Problem]:
    """Problems of one chain: each stage, as a candidate, through the kb check rules."""
    chain = loaded.record
    assert isinstance(chain, ReferenceChain)
    candidates = _stage_candidates(chain, catalog)
    if not candidates:
        return []
    problems: list[Problem] = []
    used: set[tuple[int, int]] = set()
    checker = checker or _checker(catalog, CHAIN_IGNORES)
    products: list[str] = list(chain.products) or [FALLBACK_PRODUCT]
    for product in products:
        text = _document(product, candidates, chain.name)
        found = [
            (
                f.candidate,
                f.code,
                f"{f.code} on {product} for stage {{stage}}: {f.message}"
                + (_CLAIM.format(product=product) if f.code in UNDOCUMENTED_PRODUCT else ""),
            )
            for f in checker.check_text(loaded.file, text)
            if f.candidate is not None and _fails(f, product, chain)
        ]
        found += [
            (index, GAP_CODE, f"{GAP_CODE} on {product}: {message}")
            for index, message in _gaps(text, candidates, catalog)
        ]
        for index, code, message in found:
            path = candidates[index].path
            stage = chain.stages[path[1]]
            waiver = None if code in UNDOCUMENTED_PRODUCT else _waiver(stage, code, product)
            if waiver is not None:
                used.add((path[1], waiver))
                continue
            problems.append(_problem(loaded, path, message.replace("{stage}", repr(stage.stage))))
    for i, stage in enumerate(chain.stages):
        for j, w in enumerate(stage.waivers):
            if w.code in UNDOCUMENTED_PRODUCT:
                problems.append(
                    _problem(
                        loaded,
                        ("stages", i, "waivers", j),
                        f"{w.code} cannot be waived: a chain claims only products "
                        "its operators are documented for",
                    )
                )
            elif (i, j) not in used:
                problems.append(
                    _problem(
                        loaded,
                        ("stages", i, "waivers", j),
                        f"waiver {w.code} matches no finding any more; remove it",
                    )
                )
    return sorted(set(problems), key=lambda p: (p.line, p.column, p.message))


def _paths(tree: DecisionTree) -> Iterator[list[tuple[int, int]]]:
    """Every root-to-leaf path as (node index, option index) pairs."""
    index = {n.id: i for i, n in enumerate(tree.nodes)}

    def go(node_id: str, seen: list[tuple[int, int]]) -> Iterator[list[tuple[int, int]]]:
        n_i = index[node_id]
        if any(n == n_i for n, _ in seen):
            return  # a loop; kb advise reports it when walked
        for o_i, opt in enumerate(tree.nodes[n_i].options):
            here = seen + [(n_i, o_i)]
            if opt.goto:
                yield from go(opt.goto, here)
            else:
                yield here

    yield from go(tree.root, [])


def _denial_products(denial: Denial, catalog: Any) -> list[str]:
    if denial.product:
        return [denial.product]
    rec = catalog.get(denial.operator) or {}
    return list(rec.get("products") or [FALLBACK_PRODUCT])


def _call(operator: str, args: dict[str, Any], tensors: dict[str, Any]) -> str:
    shown = [f"{k}={v!r}" for k, v in args.items()] + list(tensors)
    return f"{operator}({', '.join(shown)})"


def check_tree(loaded: Loaded, catalog: Any, checker: Any = None) -> list[Problem]:
    """Problems of one tree: chains fit the path's answers, leaves pass, denials are rejected."""
    checker = checker or _checker(catalog, ())
    tree = loaded.record
    assert isinstance(tree, DecisionTree)
    problems: set[Problem] = set()
    seen: set[tuple[int, int, str | None, str | None]] = set()
    for path in _paths(tree):
        answers = {tree.nodes[n].key: tree.nodes[n].options[o].value for n, o in path}
        product, phase = answers.get("product"), answers.get("phase")
        for n_i, o_i in path:
            if (n_i, o_i, product, phase) in seen:
                continue  # many paths share an option; judge it once per context
            seen.add((n_i, o_i, product, phase))
            opt = tree.nodes[n_i].options[o_i]
            where = ("nodes", n_i, "options", o_i)
            named: list[tuple[str, tuple[Any, ...]]] = (
                [(opt.chain, where + ("chain",))] if opt.chain else []
            )
            # an alternative must fit the path too
            named += [
                (alt.chain, where + ("alternatives", k, "chain"))
                for k, alt in enumerate(opt.alternatives)
            ]
            for name, at in named:
                chain = catalog.get(name)
                if (
                    chain is not None
                    and product
                    and chain.get("products")
                    and product not in chain["products"]
                ):
                    problems.add(
                        _problem(
                            loaded,
                            at,
                            f"the path answers --product {product}, but chain {name} "
                            f"is for {', '.join(chain['products'])}",
                        )
                    )
                if chain is not None and phase in INFERENCE_PHASES and phase not in chain["phases"]:
                    problems.add(
                        _problem(
                            loaded,
                            at,
                            f"the path answers --phase {phase}, but chain {name} "
                            f"covers {', '.join(chain['phases'])}",
                        )
                    )
            for k, op in enumerate(opt.operators):
                entry: dict[str, Any] = {"module": f"tree.{tree.name}", "operator": op}
                if phase in INFERENCE_PHASES:
                    entry["phase"] = phase
                # an unanswered product: judge on a product the record claims, not a guess
                target = (
                    product or ((catalog.get(op) or {}).get("products") or [FALLBACK_PRODUCT])[0]
                )
                text = json.dumps(
                    {"version": 1, "target": {"product": target}, "candidates": [entry]}
                )
                for f in checker.check_text(loaded.file, text):
                    if f.severity == "error":
                        problems.add(
                            _problem(
                                loaded,
                                where + ("operators", k),
                                f"{f.code} on this path: {f.message}",
                            )
                        )
    for n_i, node in enumerate(tree.nodes):
        for o_i, opt in enumerate(node.options):
            for k, denial in enumerate(opt.denies):
                problems |= set(
                    _judge_denial(
                        loaded,
                        ("nodes", n_i, "options", o_i, "denies", k),
                        denial,
                        catalog,
                        checker,
                    )
                )
    return sorted(problems, key=lambda p: (p.line, p.column, p.message))


def _judge_denial(
    loaded: Loaded, path: tuple[Any, ...], denial: Denial, catalog: Any, checker: Any
) -> Iterator[Problem]:
    op = catalog.get(denial.operator)
    entry: dict[str, Any] = {"module": "tree.denial", "operator": denial.operator}
    if denial.phase:
        entry["phase"] = denial.phase
    if denial.args:
        entry["args"] = denial.args
    tensors = _tensors(op, {}, denial.tensors)
    if tensors:
        entry["tensors"] = tensors
    for product in _denial_products(denial, catalog):
        text = json.dumps({"version": 1, "target": {"product": product}, "candidates": [entry]})
        errors = [f for f in checker.check_text(loaded.file, text) if f.severity == "error"]
        if not errors:
            yield _problem(
                loaded,
                path,
                f"the note denies {_call(denial.operator, denial.args, tensors)} on "
                f"{product}, but the operator record allows it (kb check finds no "
                "error): correct the verdict, or put the missing fact into the record",
            )


def crosscheck(result: StoreResult, root: Path) -> list[Problem]:
    """Problems of every chain and tree against the records under ``root`` (already valid)."""
    from kb.catalog.compiled import open_catalog

    catalog = open_catalog(root)
    chains, trees = _checker(catalog, CHAIN_IGNORES), _checker(catalog, ())
    problems: list[Problem] = []
    for loaded in result.records.values():
        if isinstance(loaded.record, ReferenceChain):
            problems += check_chain(loaded, catalog, chains)
        elif isinstance(loaded.record, DecisionTree):
            problems += check_tree(loaded, catalog, trees)
    return sorted(problems, key=lambda p: (p.file, p.line, p.column, p.message))
