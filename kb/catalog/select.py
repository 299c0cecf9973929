"""One chain selector: situation facts in, every fitting chain out, ranked by practice.

``kb advise`` (facts from its flags) and the planner of ``kb scan --plan`` (facts from
the module inventory) both choose chains here, so for the same facts they cannot
disagree.  A fact is a key of the decision trees' vocabulary (``arch``, ``phase``,
``cache``, ``history``, ``gate``, ``activation``, ``quant`` ...) or one of
:data:`RECORD_FACTS` (``product``, ``release``, ``parallel``, ``mode``), which every
chain is held to through its records whatever a tree asks.

A chain fits when

* its **records** allow the facts: the phase is one of the chain's phases, the scheme
  one of its schemes, every operator of its stages lists the product (or its kernels
  are built for it), ships in the release, runs in the graph mode, and no stage takes a
  communication group the deployment does not have; and
* some **question path** that names it (:func:`situations`, read from the trees - the
  trees are the question order and the documentation of what decides a branch) agrees
  with the facts: every answer on the path is given and equal, or assumed (the node's
  common case), or still open (the fit then says which answer it needs).

Fitting chains are ranked: fewer open answers first, then by practice - ports' own
product, the number of code bases that call every operator of the chain (``seen_in``
and the chain's citations), documented operators before undocumented ones, the newer
release - and last the trees' order.  The chains that do not fit are returned with the
reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Record = dict[str, Any]
TORCH = "plain-torch"
#: facts every chain is held to through its records, asked by no tree node or by some
RECORD_FACTS = ("product", "release", "parallel", "mode")
#: facts ``kb advise`` takes on every tree, asked there or not (the selector reads them)
ADVISE_FACTS = (*RECORD_FACTS, "phase", "quant")
#: facts the records decide for every chain: a question path asking one (the moe tree's
#: ``--product``, every tree's ``--phase``) documents the question order, the chain's
#: and its operators' records say where it runs
DECIDED_BY_RECORDS = ("product", "phase", "parallel")
#: support values of an operator's product lists that let it run (kb.scan.model.records)
_USABLE = ("yes", "partial", "kernel")


class Catalog(Protocol):
    def get(self, spelling: str) -> Record | None: ...

    def records(self, kind: str | None = None) -> Iterable[Record]: ...


@dataclass(frozen=True)
class Situation:
    """One question path that names a chain: the answers from the root to the option."""

    tree: str
    node: str  # the node whose option names the chain
    answers: tuple[tuple[str, str, str], ...]  # (node id, key, value) in the order asked
    rank: int  # 1: the option's chain; 2, 3 ...: its alternatives in the tree's order
    when: str
    order: int  # position in the tree's depth-first order

    def flags(self) -> dict[str, str]:
        return {k: v for _n, k, v in self.answers}


@dataclass
class Fit:
    """A chain that fits, why, and what is still open."""

    chain: str
    situation: Situation | None
    why: list[str]
    open: dict[str, str] = field(default_factory=dict)  # answers the path still needs
    assumed: dict[str, str] = field(default_factory=dict)
    key: tuple[Any, ...] = ()
    practice: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        s = self.situation
        return {
            "chain": self.chain,
            "why": self.why,
            "open": {f"--{k}": v for k, v in self.open.items()},
            "assumed": {f"--{k}": v for k, v in self.assumed.items()},
            "tree": s.tree if s else None,
            "node": s.node if s else None,
            "when": s.when if s else "",
            "practice": self.practice,
        }


@dataclass
class Misfit:
    """A chain that does not fit, with every reason; ``parallel`` when a missing
    communication group is one (the mode it needs)."""

    chain: str
    reasons: list[str]
    situation: Situation | None = None
    parallel: str = ""
    conflicts: int = 0  # reasons that are answers of its question path (not its records)

    def as_dict(self) -> dict[str, Any]:
        return {"chain": self.chain, "reasons": self.reasons}


@dataclass
class Selection:
    facts: dict[str, str]
    fitting: list[Fit]
    rejected: list[Misfit]

    @property
    def chains(self) -> list[str]:
        return [f.chain for f in self.fitting]

    def at(self, node: str) -> tuple[list[Fit], list[Misfit]]:
        """The fits and misfits a tree node names (one question's candidates)."""
        return (
            [f for f in self.fitting if f.situation and f.situation.node == node],
            [m for m in self.rejected if m.situation and m.situation.node == node],
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "facts": {f"--{k}": v for k, v in self.facts.items()},
            "fitting": [f.as_dict() for f in self.fitting],
            "not_fitting": [m.as_dict() for m in self.rejected],
        }


# ------------------------------------------------------------------------ question paths

_SITUATIONS: dict[int, tuple[Any, dict[str, list[Situation]], dict[str, dict[str, Record]]]] = {}


def situations(catalog: Catalog) -> tuple[dict[str, list[Situation]], dict[str, dict[str, Record]]]:
    """Every question path naming each chain, and each tree's nodes by id (read once per
    catalog)."""
    cached = _SITUATIONS.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        return cached[1], cached[2]
    out: dict[str, list[Situation]] = {}
    nodes_of: dict[str, dict[str, Record]] = {}
    for tree in catalog.records("tree"):
        nodes_of[tree["name"]] = {n["id"]: n for n in tree["nodes"]}
        for sit in _paths(tree["name"], nodes_of[tree["name"]], tree["root"]):
            out.setdefault(sit[0], []).append(sit[1])
    _SITUATIONS[id(catalog)] = (catalog, out, nodes_of)
    return out, nodes_of


def _paths(tree: str, nodes: Mapping[str, Record], root: str) -> list[tuple[str, Situation]]:
    """(chain, situation) for every option naming a chain, depth first from the root."""
    found: list[tuple[str, Situation]] = []
    todo: list[tuple[str, tuple[tuple[str, str, str], ...], frozenset[str]]] = [
        (root, (), frozenset())
    ]
    while todo:
        node_id, path, seen = todo.pop(0)
        if node_id in seen or node_id not in nodes:
            continue
        node = nodes[node_id]
        later = []
        for opt in node["options"]:
            here = (*path, (node_id, node["key"], opt["value"]))
            named = [(opt["chain"], opt.get("when", ""))] if opt.get("chain") else []
            named += [(a["chain"], a.get("when", "")) for a in opt.get("alternatives") or ()]
            for rank, (chain, when) in enumerate(named, 1):
                found.append((chain, Situation(tree, node_id, here, rank, when, len(found))))
            if opt.get("goto"):
                later.append((opt["goto"], here, seen | {node_id}))
        todo[:0] = later  # depth first, options in the tree's order
    return found


# ------------------------------------------------------------------------ record facts


def normalized(facts: Mapping[str, Any]) -> dict[str, str]:
    """Facts with vocabulary aliases resolved (``A2``, ``incremental``, ``w8a8_dynamic``);
    empty values dropped."""
    from kb.vocab import SCHEME_FLAG, normalize, normalize_scheme
    from kb.vocab.parallel import PARALLEL_ALIASES, PARALLEL_BY_NAME

    out: dict[str, str] = {}
    for key, value in facts.items():
        if value is None or value == "":
            continue
        text = str(value).strip()
        key = key.removeprefix("--")
        if key == "product":
            text = normalize("product", text) or text
        elif key == "phase":
            text = normalize("phase", text) or text
        elif key == SCHEME_FLAG:
            text = normalize_scheme(text) or text
        elif key == "parallel":
            low = text.lower()
            text = PARALLEL_ALIASES.get(low, low if low in PARALLEL_BY_NAME else text)
        out[key] = text
    return out


def operators(chain: Record) -> list[str]:
    return list(
        dict.fromkeys(s["operator"] for s in chain.get("stages") or [] if s["operator"] != TORCH)
    )


def product_support(rec: Record, product: str) -> str:
    """How an operator record covers a product: yes / partial / kernel / no / undocumented."""
    from kb.catalog.kernelfacts import kernel_products
    from kb.vocab import product_support as cover

    listed = list(rec.get("products") or ())
    page = (
        cover(product, listed, list(rec.get("unsupported_products") or ()))
        if listed
        else "undocumented"
    )
    if page == "undocumented" and cover(product, kernel_products(rec)) != "undocumented":
        return "kernel"
    return page


def _in_release(rec: Record, release: str) -> bool:
    try:
        from kb.catalog.releases import load, record_has

        match = load().match(release)
    except (OSError, ValueError, KeyError):
        return True
    return match is None or record_has(rec, match.release) is not False


def _scheme_fits(scheme: str, listed: list[str]) -> bool:
    return (
        not listed
        or scheme in listed
        or scheme.split("+")[0] in listed
        or (scheme == "bf16" and "fp16" in listed)
    )


def record_reasons(
    chain: Record,
    facts: Mapping[str, str],
    get: Callable[[str], Record | None],
    paths: Iterable[Situation] = (),
) -> tuple[list[str], str, list[str]]:
    """Why the chain's records refuse the facts (empty: they allow them), the parallel mode
    a refusal needs, and what the records say for the chain (its ``why``).  A scheme a
    question path of the chain answers is that path's to decide (the tree names a bf16
    FFN beside statically quantized linears)."""
    from kb.vocab import SCHEME_FLAG
    from kb.vocab.parallel import PARALLEL_BY_NAME, PARALLEL_OF_PREREQUISITE

    reasons: list[str] = []
    why: list[str] = []
    phase = facts.get("phase")
    if phase:
        if phase not in (chain.get("phases") or []):
            reasons.append(
                f"phase {phase}: the chain runs in {', '.join(chain.get('phases') or [])}"
            )
        else:
            why.append(f"runs in {phase}")
    scheme = facts.get(SCHEME_FLAG)
    listed = list(chain.get("quantization") or [])
    asked = any(k == SCHEME_FLAG for p in paths for _n, k, _v in p.answers)
    if scheme and not asked and not _scheme_fits(scheme, listed):
        reasons.append(f"--{SCHEME_FLAG} {scheme}: the chain is written for {', '.join(listed)}")
    elif scheme and listed:
        why.append(f"written for {scheme}")
    recs = [(name, get(name)) for name in operators(chain)]
    product = facts.get("product")
    if product:
        refused = [
            (name, rec)
            for name, rec in recs
            if rec is not None and product_support(rec, product) not in _USABLE
        ]
        for name, rec in refused:
            reasons.append(
                f"{name}'s record does not list {product} (it lists {', '.join(rec.get('products') or []) or 'none'})"
            )
        if not refused:
            why.append(f"every operator lists {product}")
    release = facts.get("release")
    if release:
        missing = [name for name, rec in recs if rec is not None and not _in_release(rec, release)]
        reasons += [f"{name} is not in torch_npu {release}" for name in missing]
    mode = facts.get("mode")
    if mode and mode != "eager":
        for name, op in recs:
            if op is not None and ((op.get("graph_mode") or {}).get(mode)) == "no":
                reasons.append(f"{name} does not run under {mode}")
    parallel = facts.get("parallel")
    needs = ""
    if parallel:
        modes = {
            PARALLEL_OF_PREREQUISITE[p["id"]]
            for p in chain.get("prerequisites") or []
            if p.get("id") in PARALLEL_OF_PREREQUISITE
        } - {parallel}
        for m in sorted(modes):
            args = set(PARALLEL_BY_NAME[m].group_args)
            takes = [
                name
                for name, rec in recs
                if rec is not None and args & {p["name"] for p in rec.get("parameters") or []}
            ]
            if takes:
                needs = m
                reasons.append(
                    f"needs {PARALLEL_BY_NAME[m].label} (--parallel {m}): {', '.join(takes)} takes its group"
                )
    return reasons, needs, why


def _release_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))


def practice_key(
    chain: Record, facts: Mapping[str, str], get: Callable[[str], Record | None]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Rank of a fitting chain by practice (lower first) and what it was read from."""
    from kb.catalog.practice import _operators, engines, releases
    from kb.vocab import product_support as cover
    from kb.vocab.parallel import PARALLEL_DISTANCE, PARALLEL_OF_PREREQUISITE

    ops = _operators(chain, get)
    calls = [
        e["repo"]
        for e in engines(chain, ops)
        if e["operators_seen"] >= e["operators"] > 0 or e["cited"]
    ]
    undocumented = [r["name"] for r in ops if r.get("status") == "undocumented"]
    common = releases(ops)
    product = facts.get("product")
    ported = (
        not product or not chain.get("products") or cover(product, list(chain["products"])) == "yes"
    )
    parallel = facts.get("parallel")
    distance = 0
    if parallel:
        modes = {
            PARALLEL_OF_PREREQUISITE[p["id"]]
            for p in chain.get("prerequisites") or []
            if p.get("id") in PARALLEL_OF_PREREQUISITE
        }
        distance = sum(PARALLEL_DISTANCE[m] for m in modes if m != parallel)
    newest = _release_key(common[-1]) if common else ()
    info = {
        "code_bases": calls,
        "undocumented": undocumented,
        "newest_release": common[-1] if common else None,
        "ported_on_product": ported,
    }
    return (not ported, distance, -len(calls), len(undocumented), tuple(-x for x in newest)), info


# ------------------------------------------------------------------------ the selector


def _against(
    sit: Situation, facts: Mapping[str, str], nodes: Mapping[str, Record], off: list[str]
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Conflicts of a question path with the facts, the answers still open, those assumed;
    ``off`` collects the answers the records decide that differ from the path's (the chain
    still fits by its records, after the chains whose paths agree)."""
    from kb.catalog.answers import AdviceError, match

    conflicts: list[str] = []
    open_: dict[str, str] = {}
    assumed: dict[str, str] = {}
    for node_id, key, value in sit.answers:
        node = nodes[node_id]
        if key in DECIDED_BY_RECORDS:
            if key in facts and (match(node, facts[key]) or {}).get("value") != value:
                off.append(f"the question path names it for --{key} {value}")
            continue
        if key in facts:
            try:
                opt = match(node, facts[key])
            except AdviceError:
                opt = None  # an ambiguous family: this question stays open
                open_[key] = value
                continue
            if opt is None or opt["value"] != value:
                conflicts.append(f"--{key} {facts[key]}: the chain is for --{key} {value}")
        elif node.get("assume") is not None:
            if node["assume"] != value:
                conflicts.append(
                    f"--{key} assumed {node['assume']} (the common case): the chain is for --{key} {value}"
                )
            else:
                assumed[key] = value
        else:
            open_[key] = value
    return conflicts, open_, assumed


def select(
    catalog: Catalog,
    facts: Mapping[str, Any],
    tree: str | None = None,
    module: str | None = None,
) -> Selection:
    """Every chain whose records and some question path fit ``facts``, ranked; the others
    with the reasons.  ``tree`` keeps to the chains that tree names (``kb advise TREE``);
    ``module`` to the chains of one module category (the planner's need)."""
    given = normalized(facts)
    paths, nodes_of = situations(catalog)
    read: dict[str, Any] = {}

    def get(name: str) -> Any:
        """A record by name, decoded once per call: each chain's stage operators are
        read for its product, release, scheme and practice facts, the same ones many
        times over (nothing here writes to a record)."""
        if name not in read:
            read[name] = catalog.get(name)
        return read[name]

    fitting: list[Fit] = []
    rejected: list[Misfit] = []
    for chain in catalog.records("chain"):
        name = chain["name"]
        if module is not None and chain.get("module") != module:
            continue
        mine = [s for s in paths.get(name, []) if tree is None or s.tree == tree]
        if tree is not None and not mine:
            continue
        reasons, needs, said = record_reasons(chain, given, get, mine)
        best: tuple[Any, ...] | None = None
        chosen: tuple[Situation | None, list[str], dict[str, str], dict[str, str]] = (
            None,
            [],
            {},
            {},
        )
        off: list[str] = []
        agree = 0
        for path in mine:
            aside: list[str] = []
            conflicts, open_, assumed = _against(path, given, nodes_of[path.tree], aside)
            hits = sum(
                1 for _n, k, _v in path.answers if k in given and k not in DECIDED_BY_RECORDS
            )
            key = (len(conflicts), len(aside), -hits, len(open_), path.rank, path.order)
            if best is None or key < best:
                best, chosen, off, agree = key, (path, conflicts, open_, assumed), aside, hits
        sit, conflicts, open_, assumed = chosen
        if conflicts or reasons:
            rejected.append(Misfit(name, conflicts + reasons, sit, needs, len(conflicts)))
            continue
        why = []
        if sit is not None:
            asked = [f"--{k} {v}" for _n, k, v in sit.answers if k in given]
            if asked:
                why.append(
                    f"{sit.tree} tree: {' '.join(asked)} leads to it"
                    + (" (an alternative)" if sit.rank > 1 else "")
                )
            if sit.when:
                why.append(sit.when)
        else:
            why.append("no question path names it: held to its records alone")
        rank, info = practice_key(chain, given, get)
        why += said
        if info["code_bases"]:
            why.append(
                f"called in {len(info['code_bases'])} code base(s): {', '.join(info['code_bases'])}"
            )
        if info["undocumented"]:
            why.append(f"undocumented operator(s): {', '.join(info['undocumented'])}")
        why += [f"{o} (its records allow this one)" for o in off]
        order = (sit.rank, sit.order) if sit else (99, 0)
        # a path answering more of the facts is the closer match (another tree naming
        # the chain for a question the facts do not reach says less); then practice
        key = (bool(off), -agree, *rank, len(open_), *order, name)
        fitting.append(Fit(name, sit, why, open_, assumed, key, info))
    fitting.sort(key=lambda f: f.key)
    return Selection(given, fitting, rejected)
