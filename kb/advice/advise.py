"""Walking a decision tree from answers, and turning the walk into advice.

A tree's node ``key`` is the flag name (``--arch``) and an option's ``value`` the flag
value (``mla``).  Every option chosen on the path may name a chain and operators; the
advice is all of them in path order.  When the walk ends on an option that names
neither (only a note), the outcome is a *stop*: the note is the verdict ("not a
prefetch target", "convert the cache first") and no chain applies.  When the path
answered a node keyed ``phase``, chain stages of the other phase are left out, so a
chain shared by prefill and decode shows what the asked phase runs.

Everything here works on the plain record dicts of :mod:`kb.catalog.compiled`; nothing imports
pydantic, so ``kb advise`` stays as fast as ``kb show``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kb.catalog.answers import (  # noqa: F401 - the advice side's names for them
    MAX_COUNT_DIGITS,
    AdviceError,
    describe_options,
    match,
)
from kb.vocab import CAPTURED_GRAPH_MODES, DTYPE_SHORT, INFERENCE_PHASES, SCHEME_FLAG

if TYPE_CHECKING:
    from kb.advice.select import Selection

Record = dict[str, Any]
#: Vocabularies whose aliases an answer may use (``--product A2``, ``--phase incremental``).


class MissingAnswer(AdviceError):
    """A node the answers do not reach and nothing assumes: the walk so far stops here."""

    def __init__(self, message: str, node: Record, steps: list[Step]) -> None:
        super().__init__(message)
        self.node, self.steps = node, steps


@dataclass(frozen=True)
class Step:
    """One answered question on the path."""

    node: str
    key: str
    question: str
    value: str
    label: str
    note: str = ""
    chain: str | None = None
    operators: tuple[str, ...] = ()
    stop: bool | None = None
    assumed: bool = False
    when: str = ""
    alternatives: tuple[tuple[str, str], ...] = ()  # (chain, what decides for it)
    skipped: bool = False  # not asked: every answer leads to the same chains

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "flag": f"--{self.key}",
            "question": self.question,
            "answer": self.value,
            "label": self.label,
            "note": self.note,
            "chain": self.chain,
            "operators": list(self.operators),
            "assumed": self.assumed,
            "skipped": self.skipped,
            "alternatives": [c for c, _ in self.alternatives],
        }


@dataclass
class Walk:
    tree: str
    steps: list[Step] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def stop(self) -> bool:
        """The walk ended on a verdict: an option marked stop, or (unmarked) one naming only a note."""
        last = self.steps[-1] if self.steps else None
        if last is None:
            return False
        if last.stop is not None:
            return last.stop
        return last.chain is None and not last.operators

    @property
    def assumed(self) -> list[Step]:
        """Steps answered by the tree's common case, not by the caller."""
        return [s for s in self.steps if s.assumed]

    @property
    def phase(self) -> str | None:
        return next((s.value for s in self.steps if s.key == "phase"), None)

    @property
    def scheme(self) -> str | None:
        """The quantization scheme the path answered (a node keyed ``quant``), if any."""
        return next((s.value for s in self.steps if s.key == SCHEME_FLAG), None)

    def chains(self) -> list[str]:
        if self.stop:
            return []
        return _unique(s.chain for s in self.steps if s.chain)

    def operators(self) -> list[str]:
        if self.stop:
            return []
        return _unique(op for s in self.steps for op in s.operators)


def _unique(items: Any) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def flags(tree: Record) -> dict[str, list[str]]:
    """Every flag the tree can ask, with all values it accepts somewhere."""
    out: dict[str, list[str]] = {}
    for node in tree["nodes"]:
        values = out.setdefault(node["key"], [])
        values += [o["value"] for o in node["options"] if o["value"] not in values]
    return out


def walk(
    tree: Record,
    answers: Mapping[str, str],
    ask: Callable[[Record, list[Step]], str] | None = None,
    assume: bool = False,
) -> Walk:
    """Follow the tree from its root using ``answers`` (flag name → value).

    A node without an answer is put to ``ask`` (a prompt) when given; else, with
    ``assume``, a node that names its common case (``assume``) takes it and the step is
    marked assumed; otherwise it is a MissingAnswer naming the flag and its values.
    Answers for flags the path never asks are reported in ``Walk.ignored`` rather than
    silently dropped.
    """
    nodes = {n["id"]: n for n in tree["nodes"]}
    known = flags(tree)
    unknown = [k for k in answers if k not in known]
    if unknown:
        raise AdviceError(
            f"tree {tree['name']!r} has no flag {', '.join('--' + k for k in unknown)}; "
            f"it asks: {', '.join('--' + k for k in known)}"
        )
    result = Walk(tree=tree["name"])
    used: set[str] = set()
    node_id: str | None = tree["root"]
    seen: set[str] = set()
    while node_id is not None:
        if node_id in seen:
            raise AdviceError(f"tree {tree['name']!r} loops back to node {node_id!r}")
        seen.add(node_id)
        node = nodes[node_id]
        key = node["key"]
        assumed = skipped = False
        notes: list[str] = []
        same = None if key in answers else indifferent(node, nodes)
        if key in answers:
            answer = answers[key]
            used.add(key)
        elif same is not None:
            answer, skipped = same["value"], True
            notes = [f"--{key} {o['value']}: {o['note']}" for o in node["options"] if o.get("note")]
        elif ask is not None:
            answer = ask(node, result.steps)
        elif assume and node.get("assume") is not None:
            answer, assumed = node["assume"], True
        else:
            so_far = " ".join(f"--{s.key} {s.value}" for s in result.steps)
            after = f" after {so_far}" if so_far else ""
            raise MissingAnswer(
                f"missing --{key}{after}: {node['question']['en']}{describe_options(node)}",
                node,
                list(result.steps),
            )
        opt = match(node, answer)
        if opt is None:
            raise AdviceError(
                f"--{key} {answer!r} is not an answer to {node['question']['en']!r}; "
                f"use one of:{describe_options(node)}"
            )
        result.steps.append(
            Step(
                node=node_id,
                key=key,
                question=node["question"]["en"],
                value=opt["value"],
                label=opt["label"],
                note=" ".join(notes) if skipped else opt.get("note", ""),
                chain=opt.get("chain"),
                operators=tuple(opt.get("operators") or ()),
                stop=opt.get("stop"),
                assumed=assumed,
                when=opt.get("when", ""),
                alternatives=tuple((a["chain"], a["when"]) for a in opt.get("alternatives") or ()),
                skipped=skipped,
            )
        )
        node_id = opt.get("goto")
    result.ignored = [k for k in answers if k not in used]
    return result


def _outcome(opt: Record, nodes: Mapping[str, Record], seen: frozenset[str]) -> frozenset[str]:
    """Every chain, operator and verdict an option can lead to (its own and, through its
    ``goto``, every later option's)."""
    out = {f"chain:{opt['chain']}"} if opt.get("chain") else set()
    out |= {f"chain:{a['chain']}" for a in opt.get("alternatives") or ()}
    out |= {f"op:{o}" for o in opt.get("operators") or ()}
    target = opt.get("goto")
    if target and target in nodes and target not in seen:
        for later in nodes[target]["options"]:
            out |= _outcome(later, nodes, seen | {target})
    elif (not opt.get("chain") and not opt.get("operators")) or opt.get("stop"):
        out.add(f"stop:{opt['value']}")  # a verdict is its own outcome
    return frozenset(out)


def indifferent(node: Record, nodes: Mapping[str, Record]) -> Record | None:
    """The option to take without asking when every answer leads to the same chains,
    operators and verdicts (and the same next question); None when the answer matters."""
    from kb.catalog.select import ADVISE_FACTS

    options = node["options"]
    first = options[0]
    if node["key"] in ADVISE_FACTS:
        return None  # phase, scheme, product ...: the records and the stages read them
    if any(o.get("goto") != first.get("goto") for o in options):
        return None
    here = frozenset({node["id"]})
    outcomes = {_outcome(o, nodes, here) for o in options}
    return first if len(outcomes) == 1 else None


# --------------------------------------------------------------------------- advice

_KEY_TENSORS = 6


def one_line(text: str) -> str:
    """Whitespace folded to single spaces; never shortened (a cut constraint misleads)."""
    return " ".join(str(text).split())


def operator_brief(rec: Record | None, name: str) -> dict[str, Any]:
    """What a stage's operator demands: products, phases, graph modes, key tensors, constraints."""
    if rec is None:
        return {"name": name, "missing": True}
    tensors = []
    for p in rec.get("parameters") or []:
        if not p["type"].startswith("Tensor") or p["type"].startswith("Tensor?"):
            continue
        if not (p.get("dtypes") or p.get("formats")):
            continue
        dtypes = "/".join(DTYPE_SHORT.get(d, d) for d in p.get("dtypes") or [])
        formats = [f for f in p.get("formats") or [] if f != "ND"]
        tensors.append(f"{p['name']} {dtypes}" + (f" [{'/'.join(formats)}]" if formats else ""))
    graph = rec.get("graph_mode") or {}
    graph_mode = {mode: graph.get(mode, "unknown") for mode in CAPTURED_GRAPH_MODES}
    graph_mode["notes"] = one_line(graph.get("notes", ""))
    return {
        "name": rec["name"],
        "status": rec.get("status"),
        "summary": rec["summary"]["en"],
        "products": rec.get("products") or [],
        "phases": rec.get("phases") or [],
        "graph_mode": graph_mode,
        "tensors": tensors[:_KEY_TENSORS],
        "constraints": [one_line(c["text"]) for c in rec.get("constraints") or []],
    }


def _in_scheme(stage: Record, scheme: str | None) -> bool:
    only = stage.get("quantization") or []
    if scheme is None or not only:
        return True
    from kb.vocab import normalize_scheme

    canon = normalize_scheme(scheme) or scheme
    return bool({canon, canon.split("+")[0]} & set(only))


def _stages(
    chain: Record, walked: Walk, get: Callable[[str], Record | None]
) -> tuple[list[Record], int]:
    """The stages the answered phase and scheme run, each with its complete call line."""
    from kb.advice.stagecall import arguments, call_line

    phase, scheme = walked.phase, walked.scheme
    keep, dropped = [], 0
    for st in chain["stages"]:
        wrong_phase = phase in INFERENCE_PHASES and st.get("phase", "both") not in (phase, "both")
        if wrong_phase or not _in_scheme(st, scheme):
            dropped += 1
            continue
        rec = None if st["operator"] == "plain-torch" else get(st["operator"])
        shown = dict(st)
        shown["call"] = call_line(st, rec)
        shown["arguments"] = (
            [] if st["operator"] == "plain-torch" else [a.as_dict() for a in arguments(st, rec)]
        )
        keep.append(shown)
    return keep, dropped


def _chain_entry(
    chain: Record, walked: Walk, get: Callable[[str], Record | None]
) -> dict[str, Any]:
    from kb.catalog.practice import practice

    stages, dropped = _stages(chain, walked, get)
    return {
        "name": chain["name"],
        "title": chain["title"]["en"],
        "summary": chain["summary"]["en"],
        "phases": chain["phases"],
        "products": chain.get("products") or [],
        "quantization": chain.get("quantization") or [],
        "stages": stages,
        "stages_omitted": dropped,
        "differences": chain.get("differences", ""),
        "models": chain.get("models") or [],
        "sources": chain.get("sources") or [],
        "practice": practice(chain, get),
    }


def _compose(chains: list[Record]) -> None:
    """Path chains that both write a step (the same stage name - the routing chain's
    expert matmuls and activation beside the expert chain the activation question chose):
    the narrower chain (fewer stages) keeps it, the broader one leaves it out and says
    which chain runs it, so the advice never stages a step twice."""
    sized = sorted((e for e in chains if e.get("stages")), key=lambda e: len(e["stages"]))
    owner: dict[str, str] = {}
    for entry in sized:
        kept = []
        for st in entry["stages"]:
            done_by = owner.get(st["stage"])
            if done_by is None or done_by == entry["name"]:
                kept.append(st)
            else:
                entry.setdefault("composed", []).append({"stage": st["stage"], "done_by": done_by})
        entry["stages"] = kept
        for st in kept:
            owner.setdefault(st["stage"], entry["name"])


def _ranked(walked: Walk, selection: Selection | None) -> list[tuple[str, int, str, str | None]]:
    """(chain, rank, what decides, the chain it stands beside) in path order.  With a
    selection (:func:`kb.advice.select.select`) each question that names chains takes
    the chains the selector fits there, best first, the others after it; without one,
    the tree's own order (the option's chain, then its alternatives)."""
    out: list[tuple[str, int, str, str | None]] = []
    if walked.stop:
        return out
    for s in walked.steps:
        if not (s.chain or s.alternatives):
            continue
        if selection is not None:
            fits, _misfits = selection.at(s.node)
            if fits:
                first = fits[0].chain
                out += [
                    (f.chain, k, f.situation.when if f.situation else "", None if k == 1 else first)
                    for k, f in enumerate(fits, 1)
                ]
            continue
        if s.chain:
            out.append((s.chain, 1, s.when, None))
            out += [(c, k, when, s.chain) for k, (c, when) in enumerate(s.alternatives, 2)]
    return out


def _not_fitting(walked: Walk, selection: Selection | None) -> list[dict[str, Any]]:
    """The chains the path's questions name that the records refuse, with the reasons."""
    if selection is None or walked.stop:
        return []
    out: list[dict[str, Any]] = []
    for s in walked.steps:
        for m in selection.at(s.node)[1]:
            if not m.conflicts and all(e["chain"] != m.chain for e in out):
                out.append(m.as_dict())
    return out


def advice(
    walked: Walk, get: Callable[[str], Record | None], selection: Selection | None = None
) -> dict[str, Any]:
    """The JSON-ready advice for a walk; ``get`` looks records up by name.

    ``chains`` are the path's own chains (rank 1); ``alternatives`` the other chains
    ports ship for the same answers, ranked, each with what decides for it.  Operators,
    prerequisites and notes cover the chains only: an alternative is a whole other
    answer, read from its own entry.
    """
    out: dict[str, Any] = {
        "tree": walked.tree,
        "answers": {f"--{s.key}": s.value for s in walked.steps if not s.skipped},
        "assumed": [
            {"flag": f"--{s.key}", "answer": s.value, "label": s.label} for s in walked.assumed
        ],
        "skipped": [f"--{s.key}" for s in walked.steps if s.skipped],
        "path": [s.as_dict() for s in walked.steps],
        "outcome": "stop" if walked.stop else "advice",
        "verdict": walked.steps[-1].note if walked.stop and walked.steps else "",
        "ignored": [f"--{k}" for k in walked.ignored],
        "phase": walked.phase,
        "quantization": walked.scheme,
        "chains": [],
        "alternatives": [],
        "prerequisites": [],
        "operators": {},
    }
    names: list[str] = []
    prereqs: dict[str, str] = {}
    done: set[str] = set()
    for chain_name, rank, when, beside in _ranked(walked, selection):
        if chain_name in done:
            continue
        done.add(chain_name)
        chain = get(chain_name)
        entry: dict[str, Any] = (
            {"name": chain_name, "missing": True}
            if chain is None
            else _chain_entry(chain, walked, get)
        )
        entry.update({"rank": rank, "when": when})
        fit = (
            next((f for f in selection.fitting if f.chain == chain_name), None)
            if selection
            else None
        )
        if fit is not None:
            entry["why"] = fit.why
            entry["question"] = fit.situation.node if fit.situation else None
        if beside is not None:
            out["alternatives"].append({**entry, "instead_of": beside})
            continue
        out["chains"].append(entry)
        if chain is None:
            continue
        for p in chain.get("prerequisites") or []:
            prereqs.setdefault(p["id"], p["text"])
    _compose(out["chains"])
    for entry in out["chains"]:
        names += [
            st["operator"] for st in entry.get("stages") or [] if st["operator"] != "plain-torch"
        ]
    names += walked.operators()
    out["not_fitting"] = _not_fitting(walked, selection)
    if selection is not None and not walked.stop and not out["chains"] and walked.chains():
        out["outcome"] = "stop"
        out["verdict"] = (
            "no chain in the records fits these facts: "
            + ", ".join(m["chain"] for m in out["not_fitting"])
            + " (each under not_fitting with the reasons)"
        )
    out["prerequisites"] = [{"id": k, "text": v} for k, v in prereqs.items()]
    out["operators"] = {n: operator_brief(get(n), n) for n in _unique(names)}
    out["notes"] = [
        s.note for s in walked.steps if s.note and not (walked.stop and s is walked.steps[-1])
    ]
    return out
