"""Plain-text rendering of records for an 80-column terminal."""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 80


def wrap(text: str, indent: str = "  ", width: int = WIDTH, hang: str = "") -> list[str]:
    """Wrap to ``width``; continuation lines get ``hang`` extra indent (for list items)."""
    text = " ".join(str(text).split())
    if not text:
        return []
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + hang,
                         break_long_words=True, break_on_hyphens=False)  # fmt: skip


def field(label: str, value: Any, indent: str = "  ") -> list[str]:
    if value in (None, "", [], {}):
        return []
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    head = f"{indent}{label}: "
    lines = textwrap.wrap(" ".join(str(value).split()), width=WIDTH, initial_indent=head,
                          subsequent_indent=indent + "    ", break_on_hyphens=False)  # fmt: skip
    return lines


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
        out += field("allowed", [repr(v) if isinstance(v, str) else v for v in p["allowed"]], "      ")
    rng = p.get("range")
    if rng:
        bounds = f"[{rng.get('min', '')}, {rng.get('max', '')}]"
        out += field("range", bounds + (f" {rng['note']}" if rng.get("note") else ""), "      ")
    return out


def _condition(c: dict[str, Any]) -> str:
    if c.get("arg"):
        if c.get("equals") is not None:
            return f"{c['arg']} == {c['equals']!r}"
        if c.get("in") is not None:
            return f"{c['arg']} in {c['in']}"
        return f"{c['arg']} not in {c.get('not_in')}"
    if c.get("tensor"):
        what = c.get("dtype_in") or c.get("format_in")
        return f"{c['tensor']} {'dtype' if c.get('dtype_in') else 'format'} in {what}"
    for key in ("present", "absent"):
        if c.get(key):
            return f"{c[key]} {'given' if key == 'present' else 'not given'}"
    if c.get("product"):
        return f"product in {c['product']}"
    return f"quantization in {c.get('quantization')}"


def rule_line(r: dict[str, Any]) -> str:
    when = " and ".join(_condition(c) for c in r.get("when", [])) or "always"
    effects = []
    if r.get("require"):
        effects.append("requires " + ", ".join(r["require"]))
    if r.get("forbid"):
        effects.append("forbids " + ", ".join(r["forbid"]))
    for t, d in (r.get("dtypes") or {}).items():
        effects.append(f"{t} dtype in {d}")
    for t, f in (r.get("formats") or {}).items():
        effects.append(f"{t} format in {f}")
    for a, v in (r.get("values") or {}).items():
        effects.append(f"{a} in {v}")
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
    """Release range and the releases that ship the operator (filled at compile time)."""
    versions = rec.get("versions") or {}
    out: list[str] = []
    if versions.get("first"):
        span = versions["first"] + (f" .. {versions['last']}" if versions.get("last") else " ..")
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
    from kb.releases import normalize_schema, schema_diff

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


def operator_text(rec: dict[str, Any]) -> list[str]:
    out = [f"{rec['name']}  [{rec['status']}, {rec['category']}]"]
    out += wrap(rec["summary"]["en"], "  ")
    out += wrap(rec["summary"]["zh"], "  ")
    out += field("calls", rec.get("calls"))
    out += field("products", rec.get("products"))
    out += field("phases", rec.get("phases"))
    out += field("fuses", rec.get("fuses"))
    if rec.get("superseded_by"):
        out += field("superseded by", rec["superseded_by"])
    out += field("replacement", rec.get("replacement_note"))
    out += field("supersedes", rec.get("supersedes"))
    out += _versions(rec)
    out += section("Description")
    out += wrap(rec["description"])
    out += wrap(rec.get("description_zh", ""))
    if rec.get("signature"):
        out += section("Signature")
        out += _signature(rec["signature"])
    out += _signature_history(rec)
    if rec.get("parameters"):
        out += section("Parameters")
        for p in rec["parameters"]:
            out += _param(p)
    if rec.get("returns"):
        out += section("Returns")
        for r in rec["returns"]:
            out += [f"  {r['name']}: {r.get('type', 'Tensor')}"]
            out += wrap(r.get("description", ""), "      ")
            out += field("dtypes", r.get("dtypes"), "      ")
            for shape in r.get("shapes") or []:
                when = f" when {shape['when']}" if shape.get("when") else ""
                out += field("shape", f"{shape['dims']}{when}", "      ")
    if rec.get("quantization"):
        out += section("Quantization")
        for q in rec["quantization"]:
            sel = ", ".join(f"{k}={v}" for k, v in (q.get("select") or {}).items())
            out += wrap(f"{q['scheme']}" + (f"  ({sel})" if sel else ""), "  ")
            for t, d in (q.get("tensors") or {}).items():
                out += field(t, d, "      ")
            out += field("products", q.get("products"), "      ")
            out += wrap(q.get("notes", ""), "      ")
    if rec.get("constraints"):
        out += section("Constraints")
        for c in rec["constraints"]:
            out += wrap("- " + c["text"], "  ")
    if rec.get("rules"):
        out += section("Checked rules")
        for r in rec["rules"]:
            out += wrap(f"{r['id']}: {rule_line(r)}", "  ")
    gm = rec.get("graph_mode") or {}
    if gm.get("notes") or gm.get("aclgraph") != "unknown" or gm.get("torchair") != "unknown":
        out += section("Graph mode")
        out += [f"  aclgraph: {gm.get('aclgraph')}   torchair: {gm.get('torchair')}"]
        out += wrap(gm.get("notes", ""), "  ")
    if rec.get("changes"):
        out += section("Changes from the previous version")
        out += wrap(rec["changes"])
    for ex in rec.get("examples") or []:
        out += section(f"Example: {ex['title']}")
        out += ["  " + line if line else "" for line in ex["code"].rstrip().splitlines()]
    if rec.get("related"):
        out += section("Related")
        out += wrap(", ".join(rec["related"]))
    up = rec.get("upstream") or {}
    if up.get("url") or up.get("path"):
        out += section("Upstream")
        out += field("page", up.get("url") or up.get("path"))
        out += field("commit", up.get("commit"))
    return out


def chain_text(rec: dict[str, Any]) -> list[str]:
    out = [f"{rec['name']}  [chain, {rec['module']}; {', '.join(rec['phases'])}]"]
    out += wrap(rec["title"]["en"], "  ")
    out += wrap(rec["summary"]["en"], "  ")
    out += wrap(rec["summary"]["zh"], "  ")
    out += field("quantization", rec.get("quantization"))
    out += field("products", rec.get("products"))
    out += wrap(rec.get("description", ""))
    out += section("Stages")
    for i, st in enumerate(rec["stages"], 1):
        args = ", ".join(f"{k}={v}" for k, v in (st.get("args") or {}).items())
        line = f"{i:>2}. [{st['phase']}] {st['stage']}: {st['operator']}"
        out += wrap(line + (f" ({args})" if args else ""), "  ")
        if st.get("torch"):
            out += wrap(st["torch"], "        ")
        if st.get("notes"):
            out += wrap(st["notes"], "        ")
    if rec.get("prerequisites"):
        out += section("Prerequisites")
        for p in rec["prerequisites"]:
            out += wrap(f"- {p['id']}: {p['text']}", "  ")
    if rec.get("differences"):
        out += section("Prefill vs decode")
        out += wrap(rec["differences"])
    out += field("models", rec.get("models"))
    out += field("related", rec.get("related"))
    return out


def tree_text(rec: dict[str, Any]) -> list[str]:
    nodes = {n["id"]: n for n in rec["nodes"]}
    out = [f"{rec['name']}  [decision tree]"]
    out += wrap(rec["title"]["en"], "  ")
    out += wrap(rec["summary"]["en"], "  ")
    out += [""]
    seen: set[str] = set()

    def walk(node_id: str, depth: int) -> None:
        node = nodes[node_id]
        pad = "  " * depth
        out.extend(wrap(f"? {node['question']['en']}  (--{node['key']})", pad + "  "))
        if node_id in seen:
            return
        seen.add(node_id)
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
                walk(opt["goto"], depth + 2)

    walk(rec["root"], 0)
    return out


def playbook_text(rec: dict[str, Any]) -> list[str]:
    out = [f"{rec['name']}  [playbook]"]
    out += wrap(rec["title"]["en"], "  ")
    out += wrap(rec["summary"]["en"], "  ")
    out += wrap(rec["summary"]["zh"], "  ")
    out += section("Description")
    out += wrap(rec.get("description", ""))
    out += section("Op classes (target / window)")
    for c in rec["op_classes"]:
        target = "weight-heavy target" if c["weight_heavy"] else "not a target"
        out += wrap(f"{c['id']}: {target}; window {c['window']}", "  ")
        out += wrap(", ".join(c["names"]), "      ")
        out += wrap(c["why"], "      ")
    out += section("Sizing")
    out += field("conservative factor", rec["conservative_factor"])
    out += field("ladder", rec["ladder"])
    for f in rec.get("formulas") or []:
        out += wrap(f"{f['id']} ({f['applies_to']}): {f['formula']}", "  ")
        out += wrap(f["explanation"], "      ")
    if rec.get("success"):
        out += section("Success looks like")
        for s in rec["success"]:
            out += wrap("- " + s)
    if rec.get("failures"):
        out += section("Failure signals")
        for f in rec["failures"]:
            out += wrap(f"- {f['signal']} -> {f['action']}")
    return out


def record_text(rec: dict[str, Any]) -> str:
    kind = rec["kind"]
    render = {"operator": operator_text, "chain": chain_text, "tree": tree_text,
              "playbook": playbook_text}[kind]  # fmt: skip
    return "\n".join(render(rec)) + "\n"
