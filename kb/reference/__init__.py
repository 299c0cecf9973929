"""Executable semantics: numpy references of the fused operators the plans propose.

``run(name, *args, **kwargs)`` computes what ``torch_npu.<name>`` computes, taking the
binding's parameter names and defaults from the operator record and returning what the
operator returns (a tuple in the same order).  numpy and ml_dtypes (the ``[reference]``
extra) are imported only when an operator runs, so listing and describing are free.
"""

from __future__ import annotations

import importlib
from _thread import _local  # threading.local itself; threading would cost kb show ~1 ms
from typing import Any

from kb.reference.errors import NotModelled, OverCap, ReferenceInputError
from kb.reference.registry import IMPLEMENTATIONS

__all__ = [
    "NotModelled",
    "OverCap",
    "ReferenceInputError",
    "available",
    "limit",
    "record",
    "run",
    "run_record",
]


def available() -> list[str]:
    """Record names of the operators that have a reference."""
    return sorted(IMPLEMENTATIONS)


_LOCAL = _local()


def _catalog() -> Any:
    """This thread's catalog (a sqlite connection serves only the thread that opened it:
    the MCP server runs tools on worker threads)."""
    catalog = getattr(_LOCAL, "catalog", None)
    if catalog is None:
        from kb.catalog.compiled import open_catalog

        catalog = _LOCAL.catalog = open_catalog()
    return catalog


def record(name: str, catalog: Any = None) -> dict[str, Any]:
    """The operator record a name (bare, ``torch_npu.x`` or ``torch.ops.npu.x``) means,
    from ``catalog`` (a long-running caller passes its own, kept fresh) or this thread's."""
    rec = (catalog or _catalog()).get(name) if isinstance(name, str) else None
    if rec is None or rec.get("kind") != "operator":
        raise ReferenceInputError(f"no operator record named {name!r}")
    if rec["name"] not in IMPLEMENTATIONS:
        raise ReferenceInputError(
            f"{rec['name']} has no numpy reference; available: {', '.join(available())}"
        )
    return rec  # type: ignore[no-any-return]


def run(name: str, *args: Any, **kwargs: Any) -> Any:
    """Compute ``name`` on numpy arrays; ReferenceInputError for input it refuses."""
    return run_record(record(name), *args, **kwargs)


def run_record(rec: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """:func:`run` for a record already looked up (see :func:`record`)."""
    from kb.reference.binding import bind
    from kb.reference.checks import check

    module, function = IMPLEMENTATIONS[rec["name"]].split(":")
    impl = getattr(importlib.import_module(f"kb.reference.{module}"), function)
    bound = bind(rec, args, kwargs)
    check(rec, bound)
    try:
        return impl(bound)
    except ReferenceInputError:
        raise
    except (ValueError, IndexError, TypeError, ZeroDivisionError) as exc:
        # shapes the record allows one by one but not together (numpy says so first)
        raise ReferenceInputError(
            f"{rec['name']}: the reference cannot run on these arguments "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def limit(max_bytes: int | None) -> Any:
    """A context manager capping the work (outputs and intermediates, estimated from the
    shapes before anything is allocated) of every call in this thread; None lifts the cap."""
    from kb.reference.checks import limit as _limit

    return _limit(max_bytes)
