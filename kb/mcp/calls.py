"""What every tool shares: its error type, the api's errors raised as it, the warm records.

A tool raises :class:`ToolInputError` (or one of the library's own input errors,
:data:`CALLER_ERRORS`) for the caller's mistakes; the server turns those into a tool
error the agent can read.  :func:`current` is the snapshot of the records the call
works on: the one the server opened for it (:data:`kb.mcp.state.CURRENT`) or this
thread's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from kb.api.check import InputError
from kb.api.errors import UsageError
from kb.catalog.compiled import Catalog, StoreInvalid
from kb.mcp.state import CURRENT, Snapshot, state

F = TypeVar("F", bound=Callable[..., Any])


class ToolInputError(UsageError, ValueError):
    """Arguments a tool cannot use; the message says what would work."""


def tool(fn: F) -> F:
    """The api's UsageError raised as ToolInputError (still a UsageError), so a tool fails
    with one type whichever layer found the mistake."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        _check_text(kwargs)
        try:
            return fn(*args, **kwargs)
        except ToolInputError:
            raise
        except UsageError as exc:
            raise ToolInputError(str(exc)) from None

    return cast(F, call)


def _check_text(kwargs: dict[str, Any]) -> None:
    """Every text argument is Unicode a UTF-8 lookup can encode: a lone surrogate (a
    JSON ``\\udcff``) is the caller's mistake, said as such (the CLI refuses bytes that
    are not UTF-8 the same way)."""
    from kb.core.paths import is_utf8
    from kb.text.escape import printable

    for name, value in kwargs.items():
        for one in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(one, str) and not is_utf8(one):
                raise ToolInputError(
                    f"{name} '{printable(one[:80])}' is not valid Unicode text (it holds a "
                    "lone surrogate); send names, queries and paths as UTF-8 text"
                )


def records_invalid(exc: StoreInvalid) -> ToolInputError:
    shown = "; ".join(str(p) for p in exc.problems[:5])
    more = f" (and {len(exc.problems) - 5} more)" if len(exc.problems) > 5 else ""
    return ToolInputError(f"the records do not validate: {shown}{more}; run 'kb validate'")


#: Exceptions that mean "the arguments (or the records) are wrong", not "the server broke".
CALLER_ERRORS: tuple[type[Exception], ...] = (ToolInputError, UsageError, InputError, ValueError)


def current() -> Snapshot:
    snap = CURRENT.get()
    if snap is not None:
        return snap
    try:
        return state().current()
    except StoreInvalid as exc:
        raise records_invalid(exc) from None


def catalog() -> Catalog:
    """The warm catalog; handed to the api uncalled where the arguments are checked first."""
    return current().catalog


def by_name(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` keyed by ``fn``'s parameter names where the schema gives an argument
    another name (``Field(alias=...)``: ``model_config`` is pydantic's own word)."""
    renamed = aliases(fn)
    return {renamed.get(k, k): v for k, v in kwargs.items()}


@functools.lru_cache(maxsize=64)
def aliases(fn: Callable[..., Any]) -> dict[str, str]:
    """Schema name -> parameter name, for the parameters of ``fn`` with an alias."""
    from typing import get_type_hints

    from pydantic.fields import FieldInfo

    out: dict[str, str] = {}
    for name, hint in get_type_hints(fn, include_extras=True).items():
        for meta in getattr(hint, "__metadata__", ()):
            if isinstance(meta, FieldInfo) and meta.alias and meta.alias != name:
                out[meta.alias] = name
    return out
