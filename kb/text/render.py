"""Plain-text rendering of records for an 80-column terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kb.api.recordview import release_span, text_in
from kb.catalog.kernelfacts import kernel_only_products
from kb.catalog.wording import TEXT, when_words
from kb.emulate.names import in_words
from kb.text.binding import discrepancy_texts
from kb.text.width import terminal_width
from kb.text.wrapping import wrap_words

WIDTH = terminal_width()  # min(terminal width, 80), read once per process


def wrap(text: str, indent: str = "  ", width: int = WIDTH, hang: str = "") -> list[str]:
    """Wrap to ``width``; continuation lines get ``hang`` extra indent (for list items)."""
    return wrap_words(str(text), width, indent, indent + hang)


def field(label: str, value: Any, indent: str = "  ") -> list[str]:
    if value in (None, "", [], {}):
        return []
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    return wrap_words(str(value), WIDTH, f"{indent}{label}: ", indent + "    ")


def section(title: str) -> list[str]:
    return ["", *wrap(title, "")]


def _signature(sig: str) -> list[str]:
    """Break a long schema string after commas, keeping every character."""
    lines: list[str] = []
    cur = "  "
    for piece in sig.replace(", ", ",\x00").split("\x00"):
        if len(cur) + len(piece) > WIDTH and cur.strip():
            lines.append(cur.rstrip())
            cur = "    "
        cur += piece + " "
    if cur.strip():
        lines.append(cur.rstrip())
    return lines


def _param(p: dict[str, Any]) -> list[str]:
    head = f"  {p['name']}: {p['type']}"
    if not p.get("required", True):
        head += f" = {p.get('default')}"
    flags = [f for f in ("keyword_only", "mutated", "reserved", "undocumented") if p.get(f)]
    if flags:
        head += "  [" + ", ".join(f.replace("_", "-") for f in flags) + "]"
    out = [head]
    out += wrap(p.get("description", ""), "      ")
    out += field("dtypes", "any" if p.get("any_dtype") else p.get("dtypes"), "      ")
    out += field("formats", p.get("formats"), "      ")
    for shape in p.get("shapes") or []:
        when = f" when {shape['when']}" if shape.get("when") else ""
        out += field("shape", f"{shape['dims']}{when}", "      ")
    if p.get("allowed") is not None:
        out += field(
            "allowed", [repr(v) if isinstance(v, str) else v for v in p["allowed"]], "      "
        )
    rng = p.get("range")
    if rng:
        lo, hi = rng.get("min"), rng.get("max")
        bounds = f"{'(' if rng.get('min_open') else '['}{'' if lo is None else lo}, "
        bounds += f"{'' if hi is None else hi}{')' if rng.get('max_open') else ']'}"
        bounds += "".join(f", {v:g}" for v in rng.get("also") or [])
        out += field("range", bounds + (f" {rng['note']}" if rng.get("note") else ""), "      ")
    return out


def rule_line(r: dict[str, Any]) -> str:
    when = when_words(r, TEXT) or "always"
    effects = []
    if r.get("require"):
        effects.append("requires " + ", ".join(r["require"]))
    if r.get("forbid"):
        effects.append("forbids " + ", ".join(r["forbid"]))
    for key, word in (("dtypes", "dtype in"), ("formats", "format in"), ("values", "in")):
        effects += [f"{t} {word} {d}" for t, d in (r.get(key) or {}).items()]
    if r.get("ranges"):
        # the candidate-list reader (and YAML behind it) loads only for a rule with ranges
        from kb.check.conditions import range_text

        effects += [f"{a} in {range_text(g)}" for a, g in r["ranges"].items()]
    if r.get("products"):
        effects.append("only on " + ", ".join(r["products"]))
    return f"when {when}: {'; '.join(effects)}"


def _release_lines(releases: list[str]) -> str:
    """``2.7.1.post2/4/6, 2.8.0+post2/4``: every release, one unbroken token per line."""
    groups: list[tuple[str, bool, list[str]]] = []
    for rel in releases:
        line, _, post = rel.partition(".post")
        if not groups or groups[-1][0] != line:
            groups.append((line, not post, []))
        if post:
            groups[-1][2].append(post)
    out = []
    for line, base, posts in groups:
        tail = "/".join(posts)
        out.append(line + (f"+post{tail}" if base and posts else f".post{tail}" if posts else ""))
    return ", ".join(out)


def _versions(rec: dict[str, Any]) -> list[str]:
    """Release runs (gaps shown) and the releases that ship the operator (compile time)."""
    versions = rec.get("versions") or {}
    out: list[str] = []
    span = release_span(versions)
    if span:
        releases = versions.get("releases") or []
        if releases:
            span += f"  ({len(releases)} harvested release{'s' if len(releases) != 1 else ''})"
        out += field("torch_npu", span)
        out += field("releases", _release_lines(releases))
    out += field("pytorch", versions.get("pytorch"))
    return out


def _pack(phrases: list[str], first: str, rest: str, tail: str = "") -> list[str]:
    """Lines of ``; ``-joined phrases, breaking between phrases rather than inside one.

    A phrase too long for a line of its own is wrapped at spaces like any text.
    """
    pieces = [p + (";" if i < len(phrases) - 1 else "") for i, p in enumerate(phrases)]
    pieces += [tail] if tail else []
    lines = [first]
    for piece in pieces:
        if len(rest) + len(piece) > WIDTH:
            import textwrap  # a phrase longer than a line: rare

            words = textwrap.wrap(piece, width=WIDTH - len(rest), break_on_hyphens=False)
        else:
            words = [piece]
        for word in words:
            if lines[-1].strip() and len(lines[-1]) + 1 + len(word) > WIDTH:
                lines.append(rest)
            lines[-1] += ("" if lines[-1].endswith(" ") else " ") + word
    return lines


def _signature_history(rec: dict[str, Any]) -> list[str]:
    """Each release from which a schema holds, as a change against the one before.

    Release lines are maintained in parallel, so a later line may return to an
    earlier schema ("as in …").  The entry equal to the record's signature is marked.
    """
    changes = (rec.get("versions") or {}).get("changes") or []
    if not changes:
        return []
    from kb.catalog.releases import normalize_schema, schema_diff

    current = normalize_schema(rec.get("signature") or "")
    if len(changes) == 1 and normalize_schema(changes[0]["schema"]) == current:
        return []
    out = section("Signature history (torch_npu wheels)")
    seen: dict[str, str] = {}
    prev: str | None = None
    for ch in changes:
        schema = normalize_schema(ch["schema"])
        if prev is None:
            phrases = ["first schema"]
        elif schema in seen:
            phrases = [f"as in {seen[schema]}"]
        else:
            phrases = schema_diff(prev, schema) or ["unchanged"]
        tail = "[= signature above]" if schema == current else ""
        out += _pack(phrases, f"  {ch['release']:<13} ", " " * 16, tail)
        seen.setdefault(schema, ch["release"])
        prev = schema
    if current and current not in seen:
        out += wrap("The signature above is not in any harvested release (newer upstream?).")
    return out


# --------------------------------------------------------------------------- sections
# A record prints as a header and then its sections in order.  Each section is keyed by
# the record field it shows, so ``kb show NAME --section FIELD`` prints exactly what
# the full view prints for it; fields without a renderer of their own print generically.

Rec = dict[str, Any]
Lines = list[str]


def _description(rec: Rec, lang: str) -> Lines:
    text = rec.get("description_zh") if lang == "zh" and rec.get("description_zh") else None
    body = wrap(text or rec.get("description", ""))
    return section("Description") + body if body else []


def _signature_section(rec: Rec, lang: str) -> Lines:
    return section("Signature") + _signature(rec["signature"]) if rec.get("signature") else []


def _history(rec: Rec, lang: str) -> Lines:
    return _signature_history(rec)


def _versions_section(rec: Rec, lang: str) -> Lines:
    """``--section versions``: what the header says of releases, and the history."""
    lines = _versions(rec)
    return (section("torch_npu releases") + lines if lines else []) + _signature_history(rec)


def _parameters(rec: Rec, lang: str) -> Lines:
    out: Lines = section("Parameters") if rec.get("parameters") else []
    for p in rec.get("parameters") or []:
        out += _param(p)
    return out


def _returns(rec: Rec, lang: str) -> Lines:
    out: Lines = section("Returns") if rec.get("returns") else []
    for r in rec.get("returns") or []:
        out += [f"  {r['name']}: {r.get('type', 'Tensor')}"]
        out += wrap(r.get("description", ""), "      ")
        out += field("dtypes", r.get("dtypes"), "      ")
        for shape in r.get("shapes") or []:
            when = f" when {shape['when']}" if shape.get("when") else ""
            out += field("shape", f"{shape['dims']}{when}", "      ")
    return out


def _reference(rec: Rec, lang: str) -> Lines:
    """``--section reference``: the formula in words, its sources, what they leave open."""
    from kb.api.reference import semantics

    sem = semantics(rec)
    if sem is None:
        return []
    out = section("What it computes") + wrap(sem["computes"])
    out += _listed("Sources", sem["sources"], lambda s: f"- {s['label']}: {s['says']}")
    out += _listed("Left open by the sources", sem["unstated"], lambda u: "- " + u)
    out += _listed("Not modelled by the reference", sem["limits"], lambda m: "- " + m)
    return out + ["", *wrap(f"Run it: {sem['run']} (the [reference] extra)", "  ")]


def _quantization(rec: Rec, lang: str) -> Lines:
    if rec["kind"] != "operator":
        return field("quantization", rec.get("quantization"))
    out: Lines = section("Quantization") if rec.get("quantization") else []
    for q in rec.get("quantization") or []:
        sel = ", ".join(f"{k}={v}" for k, v in (q.get("select") or {}).items())
        out += wrap(f"{q['scheme']}" + (f"  ({sel})" if sel else ""), "  ")
        for t, d in (q.get("tensors") or {}).items():
            out += field(t, d, "      ")
        out += field("products", q.get("products"), "      ")
        out += wrap(q.get("notes", ""), "      ")
    return out


def _listed(title: str, items: list[Any] | None, line: Callable[[Any], str]) -> Lines:
    """A titled list, one wrapped entry per item; nothing at all for no items."""
    out: Lines = section(title) if items else []
    for item in items or []:
        out += wrap(line(item), "  ", hang="  ")
    return out


def _constraints(rec: Rec, lang: str) -> Lines:
    return _listed("Constraints", rec.get("constraints"), lambda c: "- " + c["text"])


def _rules(rec: Rec, lang: str) -> Lines:
    return _listed("Checked rules", rec.get("rules"), lambda r: f"{r['id']}: {rule_line(r)}")


def _graph_mode(rec: Rec, lang: str) -> Lines:
    gm = rec.get("graph_mode") or {}
    if not (gm.get("notes") or gm.get("aclgraph") != "unknown" or gm.get("torchair") != "unknown"):
        return []
    out = section("Graph mode")
    out += [f"  aclgraph: {gm.get('aclgraph')}   torchair: {gm.get('torchair')}"]
    return out + wrap(gm.get("notes", ""), "  ")


def _changes(rec: Rec, lang: str) -> Lines:
    body = wrap(rec.get("changes", ""))
    return section("Changes from the previous version") + body if body else []


def _examples(rec: Rec, lang: str) -> Lines:
    out: Lines = []
    for ex in rec.get("examples") or []:
        out += section(f"Example: {ex['title']}")
        out += ["  " + line if line else "" for line in ex["code"].rstrip().splitlines()]
    return out


def _related(rec: Rec, lang: str) -> Lines:
    return section("Related") + wrap(", ".join(rec["related"])) if rec.get("related") else []


def _seen_in(rec: Rec, lang: str) -> Lines:
    out: Lines = section("Seen in shipping code") if rec.get("seen_in") else []
    for repo in rec.get("seen_in") or []:
        out += wrap(f"{repo['repo']} @ {repo['commit']}", "  ")
        for site in repo["sites"]:
            where = f"{site['path']}:{site['line']}"
            scope = ", ".join([*site.get("products", []), *site.get("phases", [])])
            args = ", ".join(f"{k}={v}" for k, v in (site.get("args") or {}).items())
            text = where + (f" ({scope})" if scope else "") + (f": {args}" if args else "")
            out += wrap(text, "    ", hang="    ")
    return out


def _upstream(rec: Rec, lang: str) -> Lines:
    up = rec.get("upstream") or {}
    if not (up.get("url") or up.get("path")):
        return []
    return (
        section("Upstream")
        + field("page", up.get("url") or up.get("path"))
        + field("commit", up.get("commit"))
    )


def _models(rec: Rec, lang: str) -> Lines:
    return (
        section("Models that use it") + wrap(", ".join(rec["models"])) if rec.get("models") else []
    )


def _stages(rec: Rec, lang: str) -> Lines:
    out = section("Stages")
    for i, st in enumerate(rec["stages"], 1):
        args = ", ".join(f"{k}={v}" for k, v in (st.get("args") or {}).items())
        line = f"{i:>2}. [{st['phase']}] {st['stage']}: {st['operator']}"
        out += wrap(line + (f" ({args})" if args else ""), "  ", hang="    ")
        if st.get("torch"):
            out += wrap(st["torch"], "        ")
        if st.get("notes"):
            out += wrap(st["notes"], "        ")
    return out


def _prerequisites(rec: Rec, lang: str) -> Lines:
    return _listed("Prerequisites", rec.get("prerequisites"), lambda p: f"- {p['id']}: {p['text']}")


def _differences(rec: Rec, lang: str) -> Lines:
    body = wrap(rec.get("differences", ""))
    return section("Prefill vs decode") + body if body else []


def _nodes(rec: Rec, lang: str) -> Lines:
    """The tree as an outline; a node reached from two answers is printed under both."""
    nodes = {n["id"]: n for n in rec["nodes"]}
    out: Lines = [""]

    def walk(node_id: str, depth: int, path: tuple[str, ...]) -> None:
        node = nodes[node_id]
        pad = "  " * depth
        question = text_in(node["question"], lang)
        out.extend(wrap(f"? {question}  (--{node['key']})", pad + "  ", hang="  "))
        if node_id in path:  # a loop (kb validate rejects these; never recurse forever)
            return
        for opt in node["options"]:
            lead = []
            if opt.get("chain"):
                lead.append(f"chain {opt['chain']}")
            if opt.get("operators"):
                lead.append(", ".join(opt["operators"]))
            tail = f" -> {'; '.join(lead)}" if lead else ""
            out.extend(wrap(f"- {opt['value']}: {opt['label']}{tail}", pad + "    ", hang="  "))
            if opt.get("note"):
                out.extend(wrap(opt["note"], pad + "        "))
            if opt.get("goto"):
                walk(opt["goto"], depth + 2, (*path, node_id))

    walk(rec["root"], 0, ())
    return out


def _op_classes(rec: Rec, lang: str) -> Lines:
    out = section("Op classes (target / window)")
    for c in rec["op_classes"]:
        target = "weight-heavy target" if c["weight_heavy"] else "not a target"
        out += wrap(f"{c['id']}: {target}; window {c['window']}", "  ")
        out += wrap(", ".join(c["names"]), "      ")
        out += wrap(c["why"], "      ")
    return out


def _extension_ops(rec: Rec, lang: str) -> Lines:
    """An extension package's operators: the call, its registered schema and its place."""
    out = section("Operators (registered by the package, not torch_npu)")
    for op in rec["operators"]:
        out += wrap(f"torch.ops.{op['namespace']}.{op['name']}  ({op['path']}:{op['lines']})", "  ")
        out += wrap(op.get("schema") or "(registered by name only)", "      ")
        if op.get("condition"):
            out += wrap(_build_note(op), "      ")
    return out


def _build_note(op: Rec) -> str:
    """Which builds of the package have a conditionally compiled operator."""
    note = f"compiled only under {op['condition']}"
    if op.get("not_built"):
        note += f"; the builds for {', '.join(op['not_built'])} leave it out"
    if op.get("off_by_default"):
        note += (
            "; a build option it needs is OFF by default, so only builds that turn it on have it"
        )
    return note


def _sizing(rec: Rec, lang: str) -> Lines:
    out = section("Sizing")
    out += field("conservative factor", rec["conservative_factor"])
    out += field("ladder", rec["ladder"])
    for f in rec.get("formulas") or []:
        out += wrap(f"{f['id']} ({f['applies_to']}): {f['formula']}", "  ", hang="    ")
        out += wrap(f["explanation"], "      ")
    return out


def _success(rec: Rec, lang: str) -> Lines:
    return _listed("Success looks like", rec.get("success"), lambda s: "- " + s)


def _failures(rec: Rec, lang: str) -> Lines:
    return _listed(
        "Failure signals", rec.get("failures"), lambda f: f"- {f['signal']} -> {f['action']}"
    )


Renderer = Callable[[Rec, str], Lines]

#: The sections of the full view, in print order, by the record field they show.
SECTIONS: dict[str, dict[str, Renderer]] = {
    "operator": {
        "description": _description,
        "signature": _signature_section,
        "versions": _history,
        "parameters": _parameters,
        "returns": _returns,
        "reference": _reference,
        "quantization": _quantization,
        "constraints": _constraints,
        "rules": _rules,
        "discrepancies": lambda r, _: _listed("Page versus binding", discrepancy_texts(r), str),
        "graph_mode": _graph_mode,
        "changes": _changes,
        "examples": _examples,
        "related": _related,
        "seen_in": _seen_in,
        "upstream": _upstream,
    },
    "chain": {
        "description": _description,
        "stages": _stages,
        "prerequisites": _prerequisites,
        "differences": _differences,
        "models": _models,
        "related": _related,
    },
    "tree": {"description": _description, "nodes": _nodes},
    "playbook": {
        "description": _description,
        "op_classes": _op_classes,
        "formulas": _sizing,
        "success": _success,
        "failures": _failures,
    },
    "extension": {"operators": _extension_ops},
}
#: Sections whose full-view part lives partly in the header (shown whole on their own).
_SECTION_ONLY: dict[str, Renderer] = {"versions": _versions_section}
#: Sections another one prints already (shown with it, not twice).
_COVERED = {
    "description_zh": "description",
    "conservative_factor": "formulas",
    "ladder": "formulas",
}


def _header(rec: Rec, lang: str) -> Lines:
    kind = rec["kind"]
    tag = {
        "operator": f"{rec.get('status')}, {rec.get('category')}",
        "chain": f"chain, {rec.get('module')}; {', '.join(rec.get('phases') or [])}",
        "tree": "decision tree",
        "playbook": "playbook",
        "extension": f"extension package, {rec.get('repo')}@{str(rec.get('commit'))[:12]}",
    }[kind]
    out = [f"{rec['name']}  [{tag}]"]
    if rec.get("title"):
        out += wrap(text_in(rec["title"], lang), "  ")
    out += wrap(text_in(rec.get("summary"), lang), "  ")
    if kind == "operator":
        out += field("calls", rec.get("calls"))
        out += field("products", rec.get("products"))
        out += field("kernel only", kernel_only_products(rec))
        out += field("phases", rec.get("phases"))
        out += field("fuses", rec.get("fuses"))
        out += field("emulated", in_words(rec["name"]))
        out += field("superseded by", rec.get("superseded_by"))
        out += field("replacement", rec.get("replacement_note"))
        out += field("supersedes", rec.get("supersedes"))
        out += _versions(rec)
    elif kind == "chain":
        out += field("quantization", rec.get("quantization"))
        out += field("products", rec.get("products"))
    elif kind == "extension":
        out += field("imports", rec.get("imports"))
        out += field("namespaces", rec.get("namespaces"))
        out += field("licence", rec.get("licence"))
        out += field("products", rec.get("products"))
    return out


def _generic(rec: Rec, key: str, lang: str) -> Lines:
    """A field without a renderer of its own: its value, flattened for reading."""
    value = rec[key]
    if isinstance(value, dict) and value and set(value) <= {"en", "zh"}:
        value = value.get(lang) or value.get("en")
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return section(key) + [
            line for item in value for line in wrap(_flat(item), "  ", hang="  ")
        ]
    if isinstance(value, dict):
        return section(key) + [line for k, v in value.items() for line in field(k, _flat(v))]
    return field(key, _flat(value) if value not in (None, "", [], {}) else "(none)")


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(
            f"{k}: {_flat(v)}" for k, v in value.items() if v not in (None, "", [], {})
        )
    if isinstance(value, list):
        return ", ".join(_flat(v) for v in value)
    return str(value)


def section_text(rec: Rec, key: str, lang: str = "en") -> str:
    """One section (a record field) as the full view prints it."""
    key = _COVERED.get(key, key)
    render = _SECTION_ONLY.get(key) if rec["kind"] == "operator" else None
    render = render or SECTIONS[rec["kind"]].get(key)
    lines = render(rec, lang) if render else _generic(rec, key, lang)
    while lines and not lines[0]:
        lines = lines[1:]
    head = f"{rec['name']}  [{rec['kind']}]"
    return "\n".join([head, *(lines or [f"  ({key}: nothing recorded)"])]) + "\n"


def record_text(rec: Rec, lang: str = "en") -> str:
    """The full view: header, then every section the record has, in order."""
    out = _header(rec, lang)
    for render in SECTIONS[rec["kind"]].values():
        out += render(rec, lang)
    return "\n".join(out) + "\n"
