"""What one tool call may ask of the server, checked before anything is built.

An agent's arguments are data from outside: a path of 5,000 characters, 3,000 levels
of directories, a ``shape`` whose product overflows 64 bits, nested lists a thousand
deep, ``null`` where an operator needs a tensor.  Each is refused here with a message
naming the argument, before a file is opened or an array allocated; the numbers are
the ones :mod:`kb.api.reference` states for its own checks.  What a reference computes
from valid inputs (broadcasts, products, expanded rows) is bounded by the reference's
own work cap where the installed kb has one (:data:`WORK_CAP_BYTES`), and in any case
by the call's memory budget in its child process (:mod:`kb.mcp.workers`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

from kb.api.errors import UsageError

#: Longest path a tool takes, longest name in it, most parts (Linux's PATH_MAX,
#: NAME_MAX, and far more levels than any project has).
MAX_PATH_CHARS, MAX_NAME_CHARS, MAX_PATH_PARTS = 4096, 255, 256
#: Bytes of outputs and intermediates one reference call may cause.
WORK_CAP_BYTES = 64 * 2**20
#: Elements a reference call may send back in all (its outputs and mutated caches).
MAX_OUTPUT_ELEMENTS = 1 << 20


def check_path(name: str, path: str) -> None:
    """A path argument a file system can take; UsageError naming ``name`` otherwise."""
    if "\0" in path:
        raise UsageError(f"{name}: the path holds a NUL character")
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if len(parts) > MAX_PATH_PARTS:
        raise UsageError(f"{name}: the path has {len(parts)} levels; at most {MAX_PATH_PARTS}")
    if len(path) > MAX_PATH_CHARS:
        raise UsageError(
            f"{name}: the path is {len(path)} characters long; at most {MAX_PATH_CHARS}"
        )
    longest = max((len(p.encode("utf-8", "surrogatepass")) for p in parts), default=0)
    if longest > MAX_NAME_CHARS:
        raise UsageError(
            f"{name}: a name in the path is {longest} bytes long; at most {MAX_NAME_CHARS}"
        )


# --------------------------------------------------------------------------- reference


def reference_inputs(args: list[Any], kwargs: dict[str, Any]) -> int:
    """Elements the JSON arrays of a call would hold, counted without building them;
    UsageError past the per-array or per-call bound, or past the most dimensions."""
    from kb.api.reference import MAX_DIMS, MAX_ELEMENTS, MAX_TOTAL

    total = 0
    for where, value in [*((f"args[{i}]", v) for i, v in enumerate(args)), *kwargs.items()]:
        for spot, spec in _arrays(where, value):
            n = _elements(spot, spec, MAX_DIMS)
            if n > MAX_ELEMENTS:
                raise UsageError(f"{spot}: {n} elements; at most {MAX_ELEMENTS} elements per array")
            total += n
            if total > MAX_TOTAL:
                raise UsageError(f"at most {MAX_TOTAL} elements in all arrays of one call")
    return total


def _arrays(where: str, value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The array objects of an argument: itself, or the objects of a list of tensors."""
    if isinstance(value, dict):
        yield where, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):
                yield f"{where}[{i}]", item


def _elements(where: str, spec: dict[str, Any], most_dims: int) -> int:
    if "data" in spec:
        return _leaves(where, spec["data"], most_dims)
    shape = spec.get("shape")
    if shape is None:
        return 0  # not an array object: the reference's own reader says what is wrong
    if not isinstance(shape, list) or len(shape) > most_dims:
        raise UsageError(f"{where}: shape is a list of at most {most_dims} integers")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise UsageError(f"{where}: shape is a list of non-negative integers")
    return math.prod(shape)  # Python integers: no overflow to a small number


def _leaves(where: str, data: Any, most_dims: int) -> int:
    """Numbers in a nested list, walked level by level (no recursion), at most
    ``most_dims`` levels deep."""
    level, depth, count = [data], 0, 0
    while level:
        nested = [v for v in level if isinstance(v, list)]
        count += len(level) - len(nested)
        if nested:
            depth += 1
            if depth > most_dims:
                raise UsageError(f"{where}: data nests more than {most_dims} levels deep")
        level = [item for v in nested for item in v]
    return count


def required_tensors(rec: dict[str, Any], args: list[Any], kwargs: dict[str, Any]) -> None:
    """A required tensor argument given as ``null``, ``[]``, a number or a string is a
    caller error naming the argument (the reference would fail inside on it)."""
    from kb.catalog.binding import python_name

    params = rec.get("parameters") or []
    positional = [p for p in params if not p.get("keyword_only")]
    given: dict[str, tuple[str, Any]] = {}
    for i, (p, value) in enumerate(zip(positional, args, strict=False)):
        given[p["name"]] = (f"args[{i}] ({python_name(p)})", value)
    by_keyword = {python_name(p): p for p in params}
    for key, value in kwargs.items():
        p = by_keyword.get(key)
        if p is not None:
            given.setdefault(p["name"], (key, value))
    for p in params:
        kind = str(p.get("type") or "")
        if not p.get("required", True) or not kind.startswith("Tensor") or kind.endswith("?"):
            continue
        if p["name"] not in given:
            continue  # missing altogether: the binding names it
        where, value = given[p["name"]]
        if value is None or value == [] or isinstance(value, (bool, int, float, str)):
            raise UsageError(
                f"{rec['name']}: {where} is a required tensor; give an array "
                "{'data': [...], 'dtype': ...} or {'shape': [...], 'dtype': ...}, "
                f"not {value!r:.40}"
            )


def output_elements(doc: Any) -> int:
    """Numbers in a reference document's outputs (and mutated caches)."""
    total = 0
    stack = [doc.get("outputs"), doc.get("mutated")] if isinstance(doc, dict) else []
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "shape" in item and "data" in item:
                total += math.prod(item["shape"]) if isinstance(item["shape"], list) else 0
            else:
                stack += list(item.values())
        elif isinstance(item, list):
            stack += item
    return total


def work_cap() -> contextlib.AbstractContextManager[Any]:
    """The reference's own cap on the work of a call, where the installed kb has one
    (``kb.reference.limit``); without it, the child's memory budget alone bounds it."""
    from kb import reference

    limit = getattr(reference, "limit", None)
    return limit(WORK_CAP_BYTES) if callable(limit) else contextlib.nullcontext()
