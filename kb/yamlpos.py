"""Safe YAML loading that remembers where every key and value came from.

Records and candidate lists are both reported as ``file:line:col``: a finding must
point at the ``weight_dq`` line, not at the top of the candidate.  We compose the YAML
node graph with the safe (C when available) loader and build plain Python values
ourselves, recording the position of each path.  Building by hand also lets us refuse
alias bombs (expansion is counted) and binary or oversized input with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000
MAX_DEPTH = 64

Path = tuple[Any, ...]


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

    ``keys`` holds where a mapping key is written, ``values`` where its value starts;
    a finding about a value points at the value, one about a missing or unknown key
    at the key.
    """

    data: Any
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """Best position for ``path``: the exact node, else its nearest ancestor."""
        table = (self.keys, self.values) if key else (self.values, self.keys)
        p = tuple(path)
        while True:
            for t in table:
                if p in t:
                    return t[p]
            if not p:
                return (1, 1)
            p = p[:-1]


_constructor = yaml.constructor.SafeConstructor()


def _scalar(node: yaml.ScalarNode) -> Any:
    try:
        return _constructor.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        mark = node.start_mark
        raise YamlError(f"bad scalar: {exc}", mark.line + 1, mark.column + 1) from None


def decode(raw: bytes, *, max_bytes: int = MAX_BYTES) -> str:
    """Bytes → text, refusing what is not a text file of sane size."""
    if len(raw) > max_bytes:
        raise YamlError(f"file is {len(raw)} bytes, larger than the {max_bytes} byte limit")
    if b"\x00" in raw[:8192]:
        raise YamlError("binary file (NUL bytes), expected YAML or JSON text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise YamlError(f"not UTF-8 text (byte {exc.start})", line) from None
    return text


def load(text: str, *, max_nodes: int = MAX_NODES) -> Located:
    """Parse one YAML (or JSON) document into data with positions."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or str(exc)
        raise YamlError(f"YAML does not parse: {problem}", line, col) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"YAML does not parse: {exc}") from None
    located = Located(data=None)
    if node is None:
        return located
    budget = [max_nodes]

    def build(n: yaml.Node, path: Path, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise YamlError(
                f"document expands to more than {max_nodes} nodes (YAML alias bomb?)",
                n.start_mark.line + 1,
                n.start_mark.column + 1,
            )
        if depth > MAX_DEPTH:
            raise YamlError("document nests too deeply", n.start_mark.line + 1, n.start_mark.column + 1)
        located.values.setdefault(path, (n.start_mark.line + 1, n.start_mark.column + 1))
        if isinstance(n, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for k_node, v_node in n.value:
                if k_node.tag == "tag:yaml.org,2002:merge":
                    raise YamlError(
                        "merge keys (<<) are not supported", k_node.start_mark.line + 1,
                        k_node.start_mark.column + 1,
                    )  # fmt: skip
                key = build(k_node, path + ("<key>",), depth + 1) if not isinstance(
                    k_node, yaml.ScalarNode) else _scalar(k_node)  # fmt: skip
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    raise YamlError(
                        "mapping keys must be plain scalars",
                        k_node.start_mark.line + 1,
                        k_node.start_mark.column + 1,
                    )
                if key in out:
                    raise YamlError(
                        f"duplicate key {key!r}", k_node.start_mark.line + 1,
                        k_node.start_mark.column + 1,
                    )  # fmt: skip
                child = path + (key,)
                located.keys[child] = (k_node.start_mark.line + 1, k_node.start_mark.column + 1)
                out[key] = build(v_node, child, depth + 1)
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(item, path + (i,), depth + 1) for i, item in enumerate(n.value)]
        assert isinstance(n, yaml.ScalarNode)
        return _scalar(n)

    located.data = build(node, (), 0)
    return located


def load_bytes(raw: bytes, *, max_bytes: int = MAX_BYTES) -> Located:
    return load(decode(raw, max_bytes=max_bytes))
