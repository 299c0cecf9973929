"""Safe YAML loading that remembers where every key and value came from.

Records and candidate lists are both reported as ``file:line:col``: a finding must
point at the ``weight_dq`` line, not at the top of the candidate.  We compose the YAML
node graph with the safe (C when available) loader and build plain Python values
ourselves, recording the position of each path.  Building by hand also lets us refuse
alias bombs (alias expansion is counted), binary or oversized input, out-of-range
numbers and characters YAML forbids, each at its own line and column.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from kb.core.gcpause import collector_paused
from kb.core.linebreaks import YAML_BREAKS

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

MAX_BYTES = 4 * 1024 * 1024
#: Nodes an honest document may add through aliases (``*a``) on top of what it spells.
MAX_ALIAS_NODES = 100_000
MAX_DEPTH = 64
#: Integers are bounded like a signed 64-bit value: nothing kb reads needs more, and
#: unbounded ones make later arithmetic slow or raise (int↔str limits, float overflow).
MAX_INT = 2**63 - 1
MAX_NUMBER_CHARS = 64

Path = tuple[Any, ...]

#: Characters YAML does not allow in a stream (what PyYAML's reader refuses).
_NON_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
#: Line breaks as YAML counts them (see kb.core.linebreaks).
LINE_BREAKS = YAML_BREAKS
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_EXPLICIT_SPECIALS = re.compile(r"^[-+]?\.(inf|Inf|INF|nan|NaN|NAN)$")


class YamlError(Exception):
    """Input that cannot become data: carries a 1-based line and column."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass
class Located:
    """A loaded document plus the 1-based (line, column) of every path in it.

    Positions are looked up on demand in the composed node graph (a long list has
    hundreds of thousands of values and only its findings need a position).
    ``where(path)`` gives where the value at ``path`` starts; with ``key=True``, where
    its mapping key is written; a path that does not exist falls back to its nearest
    ancestor.  ``hash_spans`` are the (start, end) positions, 0-based (line, column),
    of scalars whose text holds a ``#``: a ``#`` inside one is data, not a comment.
    A document restored from a cache of parsed files (``kb.catalog.parsed``) keeps its
    ``text`` instead of the node graph, composed again only when a position is asked for.
    """

    data: Any
    root: yaml.Node | None = None
    hash_spans: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)
    text: str | None = None
    _tables: dict[int, dict[Any, tuple[yaml.Node, yaml.Node]]] = field(default_factory=dict)

    def _child(self, node: yaml.Node, part: Any) -> tuple[yaml.Node | None, yaml.Node] | None:
        if isinstance(node, yaml.MappingNode):
            table = self._tables.get(id(node))
            if table is None:
                table = {key: (k, v) for key, k, v in _pairs(node)}
                self._tables[id(node)] = table
            return table.get(part)
        if (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and not isinstance(part, bool)
        ):
            return (None, node.value[part]) if 0 <= part < len(node.value) else None
        return None

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """Best position for ``path``: the exact node, else its nearest ancestor."""
        node = self.root
        if node is None and self.text is not None:
            node = self.root = _compose(self.text)
            self.text = None
        if node is None:
            return (1, 1)
        key_node: yaml.Node | None = None
        for part in path:
            found = self._child(node, part)
            if found is None:
                break  # the nearest ancestor answers (its key, when a key was asked for)
            key_node, node = found
        if key and key_node is not None:
            return _mark(key_node)
        return _mark(node)

    def in_scalar(self, line: int, column: int) -> bool:
        """True when 1-based (line, column) falls inside a scalar that holds a ``#``."""
        pos = (line - 1, column - 1)
        i = bisect.bisect_right(self.hash_spans, (pos, (math.inf, math.inf))) - 1  # type: ignore[arg-type]
        return i >= 0 and self.hash_spans[i][0] <= pos < self.hash_spans[i][1]


_TYPED_FIRST = frozenset(k for k in _Loader.yaml_implicit_resolvers if k)
_base_resolve = yaml.resolver.BaseResolver.resolve


class _FastLoader(_Loader):  # type: ignore[misc, valid-type]
    """The safe loader with a shortcut for the common case: a plain scalar whose first
    character no implicit type can start with is text (same tags, far fewer steps)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        #: Plain scalar text → its tag: a long list repeats the same few words
        #: (``npu_rms_norm``, ``float16``, ``ND``) tens of thousands of times.
        self._tags: dict[str, str] = {}

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        """Nothing to track: kb registers no path resolvers (the composer calls this for
        every node)."""

    def ascend_resolver(self) -> None:
        """See ``descend_resolver``."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            if not implicit[0]:
                return _STR_TAG
            tag = self._tags.get(value)
            if tag is None:
                if value and value[0] not in _TYPED_FIRST:
                    tag = _STR_TAG
                else:
                    tag = _base_resolve(self, kind, value, implicit)
                self._tags[value] = tag
            return tag
        return "tag:yaml.org,2002:map" if kind is yaml.MappingNode else "tag:yaml.org,2002:seq"


class _Constructor(yaml.constructor.SafeConstructor):
    """The safe constructor, except that dates and times stay the text they were.

    Records and candidate lists never need datetime objects, and building one is
    where ``2024-13-45`` used to fail with a traceback.
    """


_Constructor.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:timestamp", _Constructor.construct_yaml_str
)
_constructor = _Constructor()


def position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of character ``index``, counting YAML's line breaks."""
    line, start = 1, 0
    for m in LINE_BREAKS.finditer(text, 0, index):
        line += 1
        start = m.end()
    return line, index - start + 1


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _scalar(node: yaml.ScalarNode) -> Any:
    text = node.value
    if node.tag == _STR_TAG:  # most scalars: nothing to construct
        return text
    if node.tag in (_INT_TAG, _FLOAT_TAG) and len(text) > MAX_NUMBER_CHARS:
        raise YamlError(
            f"number {text[:20]}… is {len(text)} characters long; kb reads numbers of "
            f"at most {MAX_NUMBER_CHARS}",
            *_mark(node),
        )
    try:
        value = _constructor.construct_object(node, deep=True)
    except Exception as exc:  # any constructor failure: bad base64, unknown tag, …
        detail = getattr(exc, "problem", None) or str(exc)
        raise YamlError(f"bad scalar {text[:40]!r}: {detail}", *_mark(node)) from None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise YamlError(
            f"integer {text[:20]}{'…' if len(text) > 20 else ''} is out of range "
            "(kb reads integers up to 2**63-1)",
            *_mark(node),
        )
    if isinstance(value, float) and not math.isfinite(value) and not _EXPLICIT_SPECIALS.match(text):
        raise YamlError(f"number {text[:20]!r} is out of range", *_mark(node))
    return value


def decode(raw: bytes, *, max_bytes: int = MAX_BYTES) -> str:
    """Bytes → text, refusing what is not a text file of sane size."""
    if len(raw) > max_bytes:
        raise YamlError(f"file is {len(raw)} bytes, larger than the {max_bytes} byte limit")
    nul = raw.find(b"\x00", 0, 8192)
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        column = len(raw[raw.rfind(b"\n", 0, nul) + 1 : nul].decode("utf-8", "replace")) + 1
        raise YamlError("binary file (NUL bytes), expected YAML or JSON text", line, column)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        line = position(before, len(before))[0]  # YAML's breaks, CR-only files included
        raise YamlError(f"not UTF-8 text (byte {exc.start})", line) from None
    return text


def _refuse_control_characters(text: str) -> None:
    m = _NON_PRINTABLE.search(text)
    if m:
        char = m.group()
        raise YamlError(
            f"control character U+{ord(char):04X} is not allowed in YAML; remove it "
            "or write it as an escape inside double quotes",
            *position(text, m.start()),
        )


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=_FastLoader)  # type: ignore[no-any-return]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or str(exc)
        raise YamlError(f"YAML does not parse: {problem}", line, col) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"YAML does not parse: {exc}") from None
    except RecursionError:
        raise YamlError("document nests too deeply") from None


def _key(k_node: yaml.Node) -> Any:
    if k_node.tag == "tag:yaml.org,2002:merge":
        raise YamlError("merge keys (<<) are not supported", *_mark(k_node))
    if not isinstance(k_node, yaml.ScalarNode):
        raise YamlError("mapping keys must be plain scalars", *_mark(k_node))
    key = _scalar(k_node)
    if not isinstance(key, (str, int, float, bool)):
        raise YamlError("mapping keys must be plain scalars", *_mark(k_node))
    return key


def _pairs(node: yaml.MappingNode) -> Iterator[tuple[Any, yaml.Node, yaml.Node]]:
    """(key, key node, value node) of a mapping, keys as the loaded data has them.

    ``1``, ``1.0`` and ``true`` are different keys even though Python's dict would
    merge them: a later one that collides is kept under its source text.
    """
    seen: set[Any] = set()
    written: set[tuple[type, Any]] = set()
    for k_node, v_node in node.value:
        key = _key(k_node)
        if (type(key), key) in written:
            raise YamlError(f"duplicate key {key!r}", *_mark(k_node))
        written.add((type(key), key))
        if key in seen:
            key = k_node.value
            if key in seen:
                raise YamlError(f"key {key!r} collides with another key", *_mark(k_node))
        seen.add(key)
        yield key, k_node, v_node


def load(text: str, *, max_alias_nodes: int = MAX_ALIAS_NODES) -> Located:
    """Parse one YAML (or JSON) document into data with positions."""
    _refuse_control_characters(text)
    with collector_paused():  # a node graph has no cycles; see kb.core.gcpause
        return _load(text, max_alias_nodes)


def _load(text: str, max_alias_nodes: int) -> Located:
    node = _compose(text)
    located = Located(data=None, root=node)
    if node is None:
        return located
    budget = [max_alias_nodes]
    built: set[int] = set()
    spans = located.hash_spans

    def span(n: yaml.Node) -> None:
        spans.append(
            ((n.start_mark.line, n.start_mark.column), (n.end_mark.line, n.end_mark.column))
        )

    def build(n: yaml.Node, depth: int, aliased: bool) -> Any:
        if not aliased:
            if id(n) in built:  # a second visit of a node is alias expansion
                aliased = True
            else:
                built.add(id(n))
        if aliased:
            budget[0] -= 1
            if budget[0] < 0:
                raise YamlError(
                    f"aliases expand to more than {max_alias_nodes} nodes (YAML alias bomb?)",
                    *_mark(n),
                )
        if depth > MAX_DEPTH:
            raise YamlError("document nests too deeply", *_mark(n))
        if isinstance(n, yaml.ScalarNode):
            if not aliased and "#" in n.value:
                span(n)
            return _scalar(n)
        if isinstance(n, yaml.SequenceNode):
            return [build(item, depth + 1, aliased) for item in n.value]
        assert isinstance(n, yaml.MappingNode)
        out: dict[Any, Any] = {}
        for key, k_node, v_node in _pairs(n):
            if not aliased and "#" in k_node.value:
                span(k_node)
            out[key] = build(v_node, depth + 1, aliased)
        return out

    try:
        if "&" in text:
            located.data = build(node, 0, False)
        else:  # no anchor, so no alias: every node is built once (see _build_unaliased)
            located.data = _build_unaliased(node, span)
    except RecursionError:
        raise YamlError("document nests too deeply") from None
    spans.sort()
    return located


def _build_unaliased(root: yaml.Node, span: Callable[[yaml.Node], None]) -> Any:
    """``build`` for a document that defines no anchor (so holds no alias: composing
    refuses an undefined one): no expansion to count, and mappings whose keys are all
    plain text, as nearly all are, skip the key conversions."""
    scalar_node, sequence_node = yaml.ScalarNode, yaml.SequenceNode

    def build(n: yaml.Node, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise YamlError("document nests too deeply", *_mark(n))
        if isinstance(n, scalar_node):
            if "#" in n.value:
                span(n)
            return n.value if n.tag == _STR_TAG else _scalar(n)
        if isinstance(n, sequence_node):
            return [build(item, depth + 1) for item in n.value]
        assert isinstance(n, yaml.MappingNode)
        out: dict[Any, Any] = {}
        pairs = n.value
        if all(k.tag == _STR_TAG and isinstance(k, scalar_node) for k, _ in pairs):
            for k_node, v_node in pairs:
                key = k_node.value
                if key in out:
                    raise YamlError(f"duplicate key {key!r}", *_mark(k_node))
                if "#" in key:
                    span(k_node)
                out[key] = build(v_node, depth + 1)
            return out
        for key, k_node, v_node in _pairs(n):
            if "#" in k_node.value:
                span(k_node)
            out[key] = build(v_node, depth + 1)
        return out

    return build(root, 0)


def load_bytes(raw: bytes, *, max_bytes: int = MAX_BYTES) -> Located:
    return load(decode(raw, max_bytes=max_bytes))


def dotted(path: tuple[Any, ...]) -> str:
    """A document path as people write it: ``candidates[0].args.eps`` ("" for the root)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
