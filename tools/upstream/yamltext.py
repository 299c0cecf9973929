"""Write YAML the way records are hand-written, and edit it without reformatting.

Records are curated by people: their comments, folded descriptions and flow lists
must survive a refresh.  :func:`update_text` therefore never re-dumps a file; it
composes the node graph (which knows where every value starts and ends), replaces
only the values that changed, inserts missing keys next to their neighbours, and
checks that the edited text loads to exactly the intended data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

Path = tuple[Any, ...]


class PatchError(Exception):
    """The text could not be edited into the intended data; nothing is written."""


def _loads(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return _Invalid


_Invalid = object()


def scalar(value: Any, *, flow: bool = False, quote: bool = False) -> str:
    """One scalar as YAML: plain when that reads back unchanged, else double-quoted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        if e and "." not in mantissa:  # YAML 1.1 reads 1e-20 as text; 1.0e-20 is a float
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if not quote and text and text == text.strip() and "\n" not in text:
        probe = f"[{text}]" if flow else f"k: {text}"
        expect = [text] if flow else {"k": text}
        if _loads(probe) == expect and not text.startswith(("*", "&", "!", "%", "@", "`")):
            return text
    return json.dumps(text, ensure_ascii=False)


def flow(value: Any) -> str:
    """A value in flow style: ``[a, b]``, ``{k: v}`` or a scalar."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(k, flow=True)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return scalar(value, flow=True)


#: Keys whose string values are always double-quoted (schema literals such as "1e-06").
QUOTED_KEYS = {"default"}
#: Lists of mappings written in flow style inside a block (short, structured items).
FLOW_ITEM_KEYS = {"shapes", "when"}
#: Small mappings written in flow style when they fit on one line, as records are written.
FLOW_MAP_KEYS = {"select", "tensors", "values", "dtypes", "formats", "range"}
FLOW_WIDTH = 110


def block(value: dict[str, Any], indent: int = 0) -> list[str]:
    """Lines of a block mapping: nested mappings in block, scalar lists in flow,
    lists of mappings as block sequences."""
    pad = " " * indent
    lines: list[str] = []
    for key, val in value.items():
        lines += _entry(key, val, pad)
    return lines


def _entry(key: str, val: Any, pad: str) -> list[str]:
    head = f"{pad}{scalar(key)}:"
    if isinstance(val, dict) and val:
        inline = f"{head} {flow(val)}"
        if key in FLOW_MAP_KEYS and len(inline) <= FLOW_WIDTH:
            return [inline]
        return [head] + block(val, len(pad) + 2)
    if (
        isinstance(val, list)
        and val
        and all(isinstance(v, dict) for v in val)
        and key not in FLOW_ITEM_KEYS
    ):
        lines = [head]
        for item in val:
            lines += sequence_item(item, len(pad) + 2)
        return lines
    if isinstance(val, str) and key in QUOTED_KEYS:
        return [f"{head} {scalar(val, quote=True)}"]
    literal = (
        (_literal(val, len(pad) + 2) or _folded(val, len(pad) + 2))
        if isinstance(val, str)
        else None
    )
    if literal is not None:
        return [f"{head} {literal[0]}", *literal[1:]]
    return [f"{head} {flow(val) if isinstance(val, (list, dict)) else scalar(val)}"]


def _folded(text: str, indent: int, width: int = 92) -> list[str] | None:
    """A long one-paragraph string ending in a newline as a folded block (``>``), wrapped
    at word boundaries the way records are hand-written; None when it would not read
    back unchanged."""
    body = text[:-1]
    if not text.endswith("\n") or "\n" in body or len(body) < width - indent:
        return None
    if body != body.strip() or "  " in body or "\t" in body:
        return None
    lines, line = [], ""
    for word in body.split(" "):
        if line and len(line) + 1 + len(word) > width - indent:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    pad = " " * indent
    out = [">"] + [pad + ln for ln in lines]
    probe = "k: " + "\n".join([">"] + ["  " + ln for ln in lines]) + "\n"
    return out if _loads(probe) == {"k": text} else None


def _literal(text: str, indent: int) -> list[str] | None:
    """A multi-line string as a literal block (``|`` or ``|-``), as people write example
    code; None when a literal block would not read back unchanged."""
    if "\n" not in text.rstrip("\n") or "\t" in text or text[:1] in (" ", "\n"):
        return None
    body = text[:-1] if text.endswith("\n") else text
    if body.endswith("\n") or any(line != line.rstrip() for line in body.split("\n")):
        return None
    pad = " " * indent
    lines = ["|" if text.endswith("\n") else "|-"]
    lines += [pad + line if line else "" for line in body.split("\n")]
    probe = (
        "k: "
        + "\n".join(lines[:1] + [line[indent - 2 :] if line else "" for line in lines[1:]])
        + "\n"
    )
    return lines if _loads(probe) == {"k": text} else None


def sequence_item(item: dict[str, Any], indent: int) -> list[str]:
    """One ``- key: value`` item of a block sequence whose dashes sit at ``indent``."""
    inner = block(item, indent + 2)
    if not inner:
        return [" " * indent + "- {}"]
    inner[0] = " " * indent + "- " + inner[0][indent + 2 :]
    return inner


def dump_record(data: dict[str, Any]) -> str:
    return "\n".join(block(data)) + "\n"


# -- editing ---------------------------------------------------------------------------


def _end(node: yaml.Node, text: str) -> int:
    """Index just after the last character that belongs to ``node``'s content.

    Block scalars (``|``, ``>``) end after their trailing line breaks; those are
    trimmed so that an insertion lands right after the content, not one line late.
    """
    if isinstance(node, yaml.ScalarNode):
        end = int(node.end_mark.index)
        if node.style in ("|", ">"):
            while end > node.start_mark.index and text[end - 1] in " \t\n":
                end -= 1
        return end
    if _flow(node):
        return int(node.end_mark.index)
    if isinstance(node, yaml.MappingNode) and node.value:
        return _end(node.value[-1][1], text)
    if isinstance(node, yaml.SequenceNode) and node.value:
        return _end(node.value[-1], text)
    return int(node.end_mark.index)


def _flow(node: yaml.Node | None) -> bool:
    return bool(getattr(node, "flow_style", False))


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    """Index just after the newline that ends the line holding ``index``."""
    nl = text.find("\n", index)
    return len(text) if nl < 0 else nl + 1


class _Editor:
    def __init__(self, text: str) -> None:
        self.text = text
        self.root = yaml.compose(text, Loader=_Loader)
        self.edits: list[tuple[int, int, str]] = []

    def node(self, path: Path) -> tuple[yaml.Node | None, yaml.Node | None, bool]:
        """(key node, value node, parent is flow) for ``path``."""
        key_node: yaml.Node | None = None
        node: yaml.Node | None = self.root
        parent_flow = False
        for part in path:
            if isinstance(node, yaml.MappingNode):
                parent_flow = bool(_flow(node))
                for k, v in node.value:
                    if k.value == part:
                        key_node, node = k, v
                        break
                else:
                    return None, None, parent_flow
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                parent_flow = bool(_flow(node))
                if part >= len(node.value):
                    return None, None, parent_flow
                key_node, node = None, node.value[part]
            else:
                return None, None, parent_flow
        return key_node, node, parent_flow

    def replace(self, path: Path, value: Any) -> None:
        key_node, node, parent_flow = self.node(path)
        if node is None:
            raise PatchError(f"no value at {path}")
        if isinstance(node, yaml.ScalarNode) and not isinstance(value, (list, dict)):
            if isinstance(value, str) and node.style == '"':
                text = json.dumps(value, ensure_ascii=False)
            elif isinstance(value, str) and node.style == "'" and "\n" not in value:
                text = "'" + value.replace("'", "''") + "'"
            else:
                quote = isinstance(value, str) and bool(path) and path[-1] in QUOTED_KEYS
                text = scalar(value, flow=parent_flow, quote=quote)
            self.edits.append((node.start_mark.index, node.end_mark.index, text))
            return
        if key_node is None or parent_flow or _flow(node) or isinstance(node, yaml.ScalarNode):
            self.edits.append((node.start_mark.index, _end(node, self.text), flow(value)))
            return
        if isinstance(value, dict) or (
            isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        ):
            # a block collection stays a block collection (seen_in, quantization ...)
            start = _line_start(self.text, key_node.start_mark.index)
            pad = " " * key_node.start_mark.column
            lines = _entry(str(key_node.value), value, pad)
            end = _end(node, self.text)
            self.edits.append((start, end, "\n".join(lines)))
            return
        colon = self.text.index(":", key_node.end_mark.index)
        self.edits.append((colon + 1, _end(node, self.text), " " + flow(value)))

    def insert(self, path: Path, entries: list[tuple[str, Any]], after: str | None) -> None:
        """Add ``entries`` (in order) to the mapping at ``path``, right after ``after``."""
        _, node, _ = self.node(path)
        if not isinstance(node, yaml.MappingNode):
            raise PatchError(f"no mapping at {path} to add {[k for k, _ in entries]} to")
        if _flow(node):
            close = node.end_mark.index - 1
            sep = ", " if node.value else ""
            added = ", ".join(f"{scalar(k)}: {flow(v)}" for k, v in entries)
            self.edits.append((close, close, sep + added))
            return
        if not node.value:
            raise PatchError(f"empty block mapping at {path}")
        indent = node.value[0][0].start_mark.column
        lines = [line for k, v in entries for line in _entry(k, v, " " * indent)]
        anchor = None
        for k, v in node.value:
            if k.value == after:
                anchor = v
        if anchor is None:  # before the first key
            at = node.value[0][0].start_mark.index
            lines[0] = lines[0][indent:]
            self.edits.append((at, at, "\n".join(lines) + "\n" + " " * indent))
            return
        at = _line_end(self.text, _end(anchor, self.text))
        lead = "" if at > 0 and self.text[at - 1] == "\n" else "\n"
        self.edits.append((at, at, lead + "\n".join(lines) + "\n"))

    def delete(self, path: Path) -> None:
        key_node, node, parent_flow = self.node(path)
        if key_node is None or node is None:
            return
        if parent_flow:
            self.edits.append((node.start_mark.index, node.end_mark.index, "null"))
            return
        start = _line_start(self.text, key_node.start_mark.index)
        if self.text[start : key_node.start_mark.index].strip():
            raise PatchError(f"cannot delete {path}: it shares a line with a sequence dash")
        self.edits.append((start, _line_end(self.text, _end(node, self.text)), ""))

    def rebuild_sequence(
        self, path: Path, old: list[Any], items: list[dict[str, Any]], key: str
    ) -> None:
        """Reorder, drop or add items of a block sequence of mappings, reusing the
        text of every item that stays (its comments and layout included)."""
        key_node, node, parent_flow = self.node(path)
        if not isinstance(node, yaml.SequenceNode) or key_node is None:
            raise PatchError(f"no sequence at {path}")
        chunks: dict[Any, str] = {}
        if node.value and not _flow(node) and not parent_flow:
            starts = [_line_start(self.text, item.start_mark.index) for item in node.value]
            ends = starts[1:] + [_line_end(self.text, _end(node.value[-1], self.text))]
            for item_data, s, e in zip(old, starts, ends, strict=False):
                if isinstance(item_data, dict):
                    chunks[item_data.get(key)] = self.text[s:e]
            first = node.value[0]
            indent = first.start_mark.column - 2
            if indent < 0:
                raise PatchError(f"unusual sequence layout at {path}")
            span_start, span_end = starts[0], ends[-1]
            out = []
            for item in items:
                chunk = chunks.get(item.get(key))
                out.append(
                    chunk if chunk is not None else "\n".join(sequence_item(item, indent)) + "\n"
                )
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"
            self.edits.append((span_start, span_end, "".join(out)))
            return
        self.block_sequence(path, items)

    def splice_sequence(self, path: Path, old: list[Any], new: list[dict[str, Any]]) -> None:
        """Rewrite a block sequence of mappings whose items were added, removed or
        changed, reusing the text of each item that is unchanged."""
        _, node, parent_flow = self.node(path)
        if (
            not isinstance(node, yaml.SequenceNode)
            or not node.value
            or _flow(node)
            or parent_flow
            or len(node.value) != len(old)
        ):
            self.block_sequence(path, new)
            return
        starts = [_line_start(self.text, item.start_mark.index) for item in node.value]
        ends = starts[1:] + [_line_end(self.text, _end(node.value[-1], self.text))]
        indent = node.value[0].start_mark.column - 2
        if indent < 0:
            raise PatchError(f"unusual sequence layout at {path}")
        unused = list(
            zip(old, (self.text[s:e] for s, e in zip(starts, ends, strict=True)), strict=True)
        )
        out = []
        for item in new:
            hit = next((i for i, (o, _) in enumerate(unused) if o == item), None)
            if hit is not None:
                out.append(unused.pop(hit)[1])
            else:
                out.append("\n".join(sequence_item(item, indent)) + "\n")
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        self.edits.append((starts[0], ends[-1], "".join(out)))

    def block_sequence(self, path: Path, items: list[dict[str, Any]]) -> None:
        """Write a sequence of mappings in block style under its key (items re-rendered)."""
        key_node, node, _ = self.node(path)
        if key_node is None or node is None:
            raise PatchError(f"no sequence at {path}")
        indent = key_node.start_mark.column + 2
        colon = self.text.index(":", key_node.end_mark.index)
        lines = [line for item in items for line in sequence_item(item, indent)]
        self.edits.append(
            (colon + 1, _end(node, self.text), "\n" + "\n".join(lines) if lines else " []")
        )

    def result(self) -> str:
        text = self.text
        last = len(text) + 1
        for start, end, new in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            if end > last:
                raise PatchError("overlapping edits")
            text = text[:start] + new + text[end:]
            last = start
        return text


def _named_list(value: Any, key: str) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and key in v for v in value)


def update_text(
    text: str,
    new: dict[str, Any],
    orders: dict[Path, Sequence[str]],
    list_keys: dict[Path, str] | None = None,
) -> str:
    """Edit ``text`` so that it loads to ``new``, touching only what differs.

    ``orders`` gives, per mapping path (indices replaced by ``"*"``), the canonical
    key order used to place inserted keys; ``list_keys`` names the identity key of
    sequences of mappings (``parameters`` items are matched by ``name``).
    """
    list_keys = list_keys or {}
    old = _loads(text)
    if old is _Invalid or not isinstance(old, dict):
        raise PatchError("the record does not load as a YAML mapping")
    if old == new:
        return text
    # pass 1: sequences whose items changed identity or order get rebuilt from chunks
    editor = _Editor(text)
    staged = False
    for path, id_key in list_keys.items():
        old_list = _get(old, path)
        new_list = _get(new, path)
        if not (_named_list(old_list, id_key) and _named_list(new_list, id_key)):
            continue
        old_ids = [v[id_key] for v in old_list]
        new_ids = [v[id_key] for v in new_list]
        if old_ids == new_ids:
            continue
        by_id = {v[id_key]: v for v in old_list}
        editor.rebuild_sequence(
            path,
            old_list,
            [by_id.get(i, n) for i, n in zip(new_ids, new_list, strict=True)],
            id_key,
        )
        staged = True
    if staged:
        text = editor.result()
        old = _loads(text)
        if old is _Invalid:
            raise PatchError("rebuilding a sequence broke the YAML")
    # pass 2: values
    editor = _Editor(text)
    _sync(editor, (), old, new, orders)
    result = editor.result()
    if _loads(result) != new:
        raise PatchError("the edited text does not load to the intended record")
    return result


def _get(data: Any, path: Path) -> Any:
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _order_for(orders: dict[Path, Sequence[str]], path: Path) -> Sequence[str]:
    generic = tuple("*" if isinstance(p, int) else p for p in path)
    return orders.get(generic, ())


def _sync(
    editor: _Editor, path: Path, old: Any, new: Any, orders: dict[Path, Sequence[str]]
) -> None:
    if old == new:
        return
    _, node, _ = editor.node(path)
    if isinstance(old, dict) and isinstance(new, dict) and isinstance(node, yaml.MappingNode):
        order = list(_order_for(orders, path))
        present = list(old)
        groups: dict[str | None, list[tuple[str, Any]]] = {}
        for key, value in new.items():
            if key in old:
                _sync(editor, path + (key,), old[key], value, orders)
                continue
            groups.setdefault(_anchor(key, present, order), []).append((key, value))
        rank = {k: i for i, k in enumerate(order)}
        for after, entries in groups.items():
            entries.sort(key=lambda kv: rank.get(kv[0], len(rank)))
            editor.insert(path, entries, after)
        for key in old:
            if key not in new:
                editor.delete(path + (key,))
        return
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and len(old) == len(new)
        and isinstance(node, yaml.SequenceNode)
        and not _flow(node)
        and all(isinstance(v, dict) for v in old + new)
    ):
        for i, (o, n) in enumerate(zip(old, new, strict=True)):
            _sync(editor, path + (i,), o, n, orders)
        return
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and new
        and isinstance(node, yaml.SequenceNode)
        and node.value
        and not _flow(node)
        and all(isinstance(v, dict) for v in old + new)
    ):
        # items added or removed: keep the block layout people wrote, and the text of
        # every item that stays as it was
        editor.splice_sequence(path, old, new)
        return
    editor.replace(path, new)


def _anchor(key: str, present: list[str], order: list[str]) -> str | None:
    """The existing key a new ``key`` goes after: its nearest predecessor in ``order``
    that the mapping has, else the last key (unknown order)."""
    if key in order:
        before = order[: order.index(key)]
        for candidate in reversed(before):
            if candidate in present:
                return candidate
        return None
    return present[-1] if present else None
