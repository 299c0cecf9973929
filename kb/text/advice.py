"""``kb advise`` as text for a terminal: assumptions first, chains ranked, completions.

The JSON document (:func:`kb.api.advise.advise`) is the contract; this only lays it out.
"""

from __future__ import annotations

import textwrap
from typing import Any

from kb.text.width import terminal_width

#: Constraints printed per operator in text; JSON carries all of them, each whole.
_FIRST_CONSTRAINTS = 3
#: Completions printed in text; JSON carries up to kb.advice.partial.LIMIT of them.
_FIRST_COMPLETIONS = 12


def _wrap(text: str, indent: str, hang: int = 0, *, spaced: bool = False) -> list[str]:
    """Wrap to the terminal (at most 80 columns, :func:`kb.text.width.terminal_width`);
    ``hang`` indents continuation lines under the item's text; ``spaced`` keeps runs of
    spaces inside a line (a header's gap before its phases)."""
    return textwrap.wrap(
        text if spaced else " ".join(text.split()),
        width=terminal_width(),
        initial_indent=indent,
        subsequent_indent=indent + " " * hang,
        break_on_hyphens=False,
    )


def _assumed(adv: dict[str, Any]) -> list[str]:
    if not adv.get("assumed"):
        return []
    given = ", ".join(f"{a['flag']} {a['answer']}" for a in adv["assumed"])
    out = ["", *_wrap(f"ASSUMED (not given; the common case): {given}", "", 4)]
    for a in adv["assumed"]:
        out += _wrap(f"{a['flag']} {a['answer']}: {a['label']}", "  ", 4)
    out += ["  Pass the flag to answer otherwise (--strict assumes nothing)."]
    return out


def _practice(chain: dict[str, Any]) -> list[str]:
    out: list[str] = []
    prac = chain.get("practice") or {}
    full = [e for e in prac.get("engines") or [] if e["operators_seen"] == e["operators"]]
    some = [e for e in prac.get("engines") or [] if 0 < e["operators_seen"] < e["operators"]]
    if full or some:
        shown = [e["repo"] + (" (cited)" if e["cited"] else "") for e in full]
        shown += [
            f"{e['repo']} ({e['operators_seen']}/{e['operators']} operators)" for e in some[:4]
        ]
        out += _wrap("practiced in: " + ", ".join(shown), "  ", 4)
    rel = prac.get("releases") or []
    if rel:
        out += _wrap(f"torch_npu for PyTorch {rel[0]} .. {rel[-1]}", "  ")
    return out


def _chain(chain: dict[str, Any], adv: dict[str, Any], head: str) -> list[str]:
    if chain.get("missing"):
        return ["", f"{head} {chain['name']}: no such record"]
    out = [
        "",
        *_wrap(f"{head} {chain['name']}  [{', '.join(chain['phases'])}]", "", 4, spaced=True),
    ]
    out += _wrap(chain["title"], "  ")
    out += _wrap(chain["summary"], "  ")
    if chain.get("when"):
        out += _wrap("when: " + chain["when"], "  ", 4)
    if chain["products"] or (chain.get("practice") or {}).get("products"):
        out += _wrap(
            "products: " + ", ".join(chain["products"] or chain["practice"]["products"]), "  "
        )
    out += _practice(chain)
    omitted = (
        f"; {chain['stages_omitted']} stage(s) of another phase or scheme left out"
        if chain["stages_omitted"]
        else ""
    )
    asked = ", ".join(x for x in (adv.get("phase"), adv.get("quantization")) if x)
    out += _wrap(f"stages{' (' + asked + omitted + ')' if asked or omitted else ''}:", "  ", 4)
    for i, st in enumerate(chain["stages"], 1):
        split = len(chain["phases"]) > 1 and st.get("phase", "both") != "both"
        tag = f" [{st['phase']}]" if split else ""
        only = st.get("quantization") or []
        tag += f" [{'/'.join(only)} only]" if only else ""
        out += _wrap(f"{i:>2}. {st['stage']}{tag}: {st['operator']}", "    ", 4)
        out += _wrap(st["call"], "          ", 4)
        if st.get("notes"):
            out += _wrap(st["notes"], "          ")
    for c in chain.get("composed") or []:
        out += _wrap(
            f"{c['stage']}: run by {c['done_by']} on this path, not repeated here", "    ", 4
        )
    if chain["differences"]:
        out += _wrap("prefill vs decode: " + chain["differences"], "  ")
    if chain["models"]:
        out += _wrap("reference models: " + ", ".join(chain["models"]), "  ")
    for src in chain.get("sources") or []:
        out += _wrap(
            f"seen in {src['model']}: {src['repo']}@{src['commit'][:10]} "
            f"{src['path']}:{src['lines']} - {src['shows']}",
            "  ",
            4,
        )
    return out


def _operators(adv: dict[str, Any]) -> list[str]:
    out = ["", "Operators"]
    for name, brief in adv["operators"].items():
        if brief.get("missing"):
            out += _wrap(f"{name}: no operator record yet", "  ", 4)
            continue
        out += _wrap(f"{name}  [{brief['status']}] {brief['summary']}", "  ", 4)
        if brief["products"]:
            out += _wrap("products: " + ", ".join(brief["products"]), "      ")
        if brief["tensors"]:
            out += _wrap("tensors: " + "; ".join(brief["tensors"]), "      ", 9)
        graph = brief.get("graph_mode") or {}
        if "--mode" in adv["answers"] or "unsupported" in (
            graph.get("aclgraph"),
            graph.get("torchair"),
        ):
            out += _wrap(
                f"graph mode: aclgraph {graph.get('aclgraph')}, torchair {graph.get('torchair')}"
                + (f" - {graph['notes']}" if graph.get("notes") else ""),
                "      ",
                12,
            )
        shown = brief["constraints"][:_FIRST_CONSTRAINTS]
        for c in shown:
            out += _wrap("- " + c, "      ", 2)
        rest = len(brief["constraints"]) - len(shown)
        if rest > 0:
            out += _wrap(f"({rest} more constraint(s): kb show {name})", "      ", 1)
    return out


def _completions(adv: dict[str, Any]) -> list[str]:
    need = adv["needed"][0]
    out = [
        "",
        *_wrap(
            f"NOT ENOUGH ANSWERS: {need['flag']} changes the operators ({need['question']})", "", 4
        ),
        *_wrap(f"Every completion, most common first ({adv['completions_total']} in all):", "", 4),
    ]
    for c in adv["completions"][:_FIRST_COMPLETIONS]:
        adds = " ".join(f"{k} {v}" for k, v in c["adds"].items())
        if c["outcome"] == "stop":
            reach = "verdict: " + c["verdict"]
        else:
            reach = (
                ", ".join(
                    ch["name"]
                    + (f" (or {', '.join(ch['alternatives'])})" if ch["alternatives"] else "")
                    for ch in c["chains"]
                )
                or ", ".join(c["operators"])
                or "no chain"
            )
        out += _wrap(f"{c['rank']:>2}. {adds} -> {reach}", "  ", 6)
        if c["assumed"]:
            out += _wrap(
                "assumes " + " ".join(f"{k} {v}" for k, v in c["assumed"].items()), "      "
            )
    left = adv["completions_total"] - min(len(adv["completions"]), _FIRST_COMPLETIONS)
    if left > 0:
        out += _wrap(f"({left} more; answer {need['flag']} to narrow)", "  ", 1)
    out += _wrap(
        f"Answer {need['flag']} (kb advise {adv['tree']} ... {need['flag']} VALUE) for the whole "
        "advice.",
        "",
        4,
    )
    return out


def _command(adv: dict[str, Any]) -> list[str]:
    """The walk as a command to paste: wrapped between flags, never inside a flag and its
    value, continuation lines joined with a trailing backslash."""
    words = [f"kb\0advise\0{adv['tree']}", *(f"{k}\0{v}" for k, v in adv["answers"].items())]
    width = terminal_width()
    lines = textwrap.wrap(
        " ".join(words),
        width=width - 2,
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [
        ln.replace("\0", " ") + (" \\" if i < len(lines) - 1 else "") for i, ln in enumerate(lines)
    ]


def render(adv: dict[str, Any]) -> str:
    """Advice as text for a terminal."""
    out = _command(adv)
    for step in adv["path"]:
        if step.get("skipped"):
            out += _wrap(
                f"{step['flag']} not asked: every answer leads to the same chains", "  ", 4
            )
            continue
        mark = " (assumed)" if step.get("assumed") else ""
        out += _wrap(f"{step['flag']} {step['answer']}{mark}: {step['label']}", "  ", 4)
    out += _assumed(adv)
    if adv["outcome"] == "completions":
        return "\n".join(out + _completions(adv)) + "\n"
    if adv["outcome"] == "stop":
        out += ["", "Verdict: no chain applies on this path."]
        out += _wrap(adv["verdict"], "  ")
        return "\n".join(out + _not_fitting(adv)) + "\n"
    for chain in adv["chains"]:
        out += _chain(chain, adv, "Chain")
    if adv.get("alternatives"):
        out += ["", *_wrap("Alternatives other engines ship for the same answers (ranked):", "", 4)]
        for alt in adv["alternatives"]:
            out += _chain(alt, adv, f"Alternative {alt['rank']} to {alt['instead_of']}:")
    if adv["prerequisites"]:
        out += ["", "Prerequisites"]
        for p in adv["prerequisites"]:
            out += _wrap(f"- {p['id']}: {p['text']}", "  ", 2)
    if adv["operators"]:
        out += _operators(adv)
    if adv["notes"]:
        out += ["", "Notes"]
        for n in adv["notes"]:
            out += _wrap("- " + n, "  ", 2)
    out += _not_fitting(adv)
    if adv["ignored"]:
        out += ["", *_wrap("Not asked on this path (ignored): " + ", ".join(adv["ignored"]), "", 4)]
    return "\n".join(out) + "\n"


def _not_fitting(adv: dict[str, Any]) -> list[str]:
    """The chains this path's questions name that the records refuse, with the reasons."""
    if not adv.get("not_fitting"):
        return []
    out = ["", "Not fitting (the records refuse them for these facts)"]
    for m in adv["not_fitting"]:
        out += _wrap(f"- {m['chain']}: {'; '.join(m['reasons'])}", "  ", 2)
    return out
