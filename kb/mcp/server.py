"""The MCP server: the tool, prompt and resource tables wired into the ``mcp`` SDK.

Where a call runs depends on what it may cost (:attr:`kb.mcp.tools.ToolSpec.long`):

- **Quick calls** (search, show, list, advise, tree, rules, prefetch sizes, a short
  candidate list, prompts, resources) are answered on the event loop's own thread with
  its warm records and index: no hop to another thread or process, so an answer costs
  the protocol and the lookup, a few milliseconds.  Their work is bounded by their
  arguments' limits.  After a record edit, the slow part of reopening the records
  (validation, indexing) runs on a helper thread within the time budget, once for
  every call waiting on it (:func:`snapshot`).
- **Long calls** (scan, reference, a large candidate list) run in a child process
  (:mod:`kb.mcp.workers`) that their time budget kills, so a slow scan never blocks a
  search and an abandoned call gives back its slot and its memory at once.

A caller's mistake, an unknown argument included, becomes a tool error (``isError``)
with the message; a call over its budget, one saying so; any other exception is logged
on stderr with its traceback and reported as a tool error naming its type: every tool
error says why, and the server stays up.  The wire goes through :mod:`kb.mcp.stdio`,
which answers the requests the SDK cannot parse or must not see.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, Resource, TextContent, ToolAnnotations

from kb import __version__
from kb.catalog.compiled import Catalog, StoreInvalid
from kb.mcp import confine, stdio, workers
from kb.mcp.calls import by_name, records_invalid
from kb.mcp.prompts import PROMPTS
from kb.mcp.state import CURRENT, Snapshot, Warm, prepare, state
from kb.mcp.tools import CALLER_ERRORS, TOOLS, ToolSpec
from kb.vocab.taxonomy import KINDS

#: URI scheme of the records: kb://operator/NAME, kb://chain/NAME, ...
RESOURCE_KINDS = KINDS
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
INSTRUCTIONS = """\
Validated facts about torch_npu fused operators for Ascend NPUs: signatures, parameter
dtypes/formats/shapes, products, torch_npu releases, quantization schemes, constraints;
reference operator chains, decision trees and the weight-prefetch playbook.
Find with `search`, read with `show` (brief, or one section), walk the fusion
decision trees with `advise`, lint a replacement plan with `check`, size npu_prefetch
with `prefetch_size`. The `fusion` and `prefetch` prompts walk the two workflows."""

log = logging.getLogger("kb.mcp")


async def snapshot() -> Snapshot:
    """The loop thread's records as they are now.  After an edit, what is slow to redo
    (validation, the index) is built on a helper thread first, within the time budget;
    the loop then opens what was built.  StoreInvalid when the records do not validate."""
    warm = state()
    for _ in range(3):  # edited again while being prepared: prepare that too
        if not warm.stale():
            return warm.current(look=False)
        seen = warm.changes
        warm.prepared(await _prepared(warm))
        warm.stale()  # notes an edit made while it was being prepared
        if warm.changes == seen:
            break
    return warm.current(look=False)


_PENDING: dict[int, asyncio.Future[Any]] = {}


async def _prepared(warm: Warm) -> Any:
    """:func:`kb.mcp.state.prepare` of ``warm``'s tree on a helper thread, shared by every
    call waiting for it; OverBudget when it outlasts the budget (it still completes)."""
    key = id(warm)
    pending = _PENDING.get(key)
    if pending is None or pending.get_loop() is not asyncio.get_running_loop():
        pending = asyncio.get_running_loop().run_in_executor(None, prepare, warm.root)
        _PENDING[key] = pending
        pending.add_done_callback(lambda _f: _PENDING.pop(key, None))
    budget = workers.budget()
    try:
        return await asyncio.wait_for(asyncio.shield(pending), budget)
    except asyncio.TimeoutError:
        raise workers.OverBudget(budget) from None


def tool_call(spec: ToolSpec) -> Callable[..., Any]:
    """The async function the SDK calls for ``spec``: quick calls on the loop with its
    snapshot, long ones in a child process; whatever goes wrong becomes a ToolError."""
    name = spec.name

    @functools.wraps(spec.fn)
    async def call(**given: Any) -> Any:
        kwargs = by_name(spec.fn, given)
        try:
            if spec.long(kwargs):
                if isinstance(kwargs.get("path"), str):
                    confine.inside(kwargs["path"])  # refused here, before any process starts
                doc = await workers.jobs().run(name, kwargs, workers.budget())
            else:
                doc = await on_loop(spec.fn, kwargs)
            return answer(doc)
        except workers.CallerError as exc:
            raise ToolError(str(exc)) from None
        except workers.CallFailed as exc:
            log.error("%s failed in its process:\n%s", name, exc.detail or exc)
            raise ToolError(str(exc)) from None
        except Exception as exc:
            raise _tool_error(name, exc) from None

    return call


def answer(doc: Any) -> CallToolResult:
    """The result of a call whose document is ``doc``: structured, and as JSON text.

    Built here rather than by the SDK, which would turn the document into JSON values
    twice more (for the text and the structured copy) before serialising the reply: a
    large record took three passes.  The SDK still checks it against the output schema.
    """
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)


async def on_loop(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` on this thread with the current snapshot."""
    try:
        snap = await snapshot()
    except StoreInvalid as exc:
        raise records_invalid(exc) from None
    token = CURRENT.set(snap)
    try:
        return fn(**kwargs)
    finally:
        CURRENT.reset(token)


def _tool_error(name: str, exc: Exception) -> ToolError:
    """The tool error for an exception raised in the server: the caller's, or a bug."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, workers.OverBudget):
        return ToolError(str(exc))
    if isinstance(exc, CALLER_ERRORS):
        return ToolError(
            str(exc).strip()
            or f"the arguments were refused ({type(exc).__name__}, no detail given)"
        )
    if isinstance(exc, RecursionError):
        return ToolError("the input nests too deeply to be read; give a flatter one")
    log.error("%s failed", name, exc_info=exc)  # a bug or the machine: logged, and said
    return ToolError(
        f"{name} failed inside the server ({type(exc).__name__}); its log "
        "(standard error) has the details"
    )


class KbServer(MCPServer[Any]):
    """MCPServer whose resource list is the current records (edits show up at once),
    whose tools refuse arguments they do not have, served on standard input/output
    through :mod:`kb.mcp.stdio`."""

    async def run_stdio_async(self) -> None:
        """The SDK's own stdio loop, on streams that answer every request it drops."""
        from mcp.server.stdio import stdio_server

        with stdio.claimed() as (raw_in, raw_out):
            # the fork server starts now that descriptor 1 no longer reaches the client
            threading.Thread(target=workers.warm_up, name="kb-warm", daemon=True).start()
            async with (
                stdio.streams(raw_in, raw_out) as (stdin, stdout),
                stdio_server(stdin, stdout) as (read_stream, write_stream),  # type: ignore[arg-type]
            ):
                lowlevel = self._lowlevel_server
                await lowlevel.run(
                    read_stream, write_stream, lowlevel.create_initialization_options()
                )

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The SDK's call, after refusing arguments the tool does not take (the SDK
        would drop them silently, and the agent would believe them applied)."""
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            known = tool.parameters.get("properties", {})
            unknown = [k for k in arguments if k not in known]
            if unknown:
                raise ToolError(
                    f"{name} has no argument {', '.join(repr(k[:60]) for k in unknown[:10])}; "
                    f"its arguments are {', '.join(known) or 'none'}"
                )
        return await super().call_tool(name, arguments, context)

    async def list_resources(self) -> list[Resource]:
        try:
            catalog = (await snapshot()).catalog
        except StoreInvalid as exc:  # the tools report the problems; list nothing meanwhile
            log.warning("records do not validate (%d problems)", len(exc.problems))
            return []
        return [
            Resource(
                uri=f"kb://{rec['kind']}/{rec['name']}",
                name=rec["name"],
                description=rec["summary"]["en"],
                mime_type="application/json",
            )
            for rec in catalog.records()
        ]


def _reader(kind: str) -> Callable[[str], Any]:
    async def read(name: str) -> str:
        rec = (await _catalog()).get(name)
        if rec is None or rec["kind"] != kind:
            raise ResourceNotFoundError(f"no {kind} record named {name!r}")
        return json.dumps(rec, ensure_ascii=False, indent=2)

    read.__name__ = f"read_{kind}"
    return read


async def _catalog() -> Catalog:
    try:
        return (await snapshot()).catalog
    except StoreInvalid as exc:
        raise ResourceError(
            f"the records do not validate ({len(exc.problems)} problems, the "
            f"first: {exc.problems[0]}); run 'kb validate'"
        ) from None


def _prompt(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def get(**kwargs: Any) -> Any:
        try:
            return await on_loop(fn, kwargs)
        except Exception as exc:
            raise _tool_error(name, exc) from None

    return get


def build() -> KbServer:
    server = KbServer(
        "torch-npu-kb",
        title="torch_npu knowledge base",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )
    for spec in TOOLS:
        server.add_tool(
            tool_call(spec),
            name=spec.name,
            title=spec.title,
            annotations=READ_ONLY,
            structured_output=True,
        )
        registered = server._tool_manager.get_tool(spec.name)
        if registered is None or registered.fn_metadata.wrap_output:
            raise RuntimeError(f"tool {spec.name} must return a JSON object (see answer())")
        registered.parameters["additionalProperties"] = False  # what call_tool enforces
    for kind in RESOURCE_KINDS:
        server.resource(
            f"kb://{kind}/{{name}}",
            name=f"{kind} record",
            description=f"One {kind} record as JSON (all validated fields)",
            mime_type="application/json",
        )(_reader(kind))
    for prompt in PROMPTS:
        server.prompt(name=prompt.name, title=prompt.title)(_prompt(prompt.fn, prompt.name))
    return server


def serve(
    root: str | None = None,
    budget: float = workers.DEFAULT_BUDGET,
    memory_mib: int = workers.DEFAULT_MEMORY_MIB,
) -> None:
    """Open the records and the index, then serve over stdio until the client leaves.

    ``root`` (default: the working directory) is the directory the path-taking tools
    may read; ``budget`` the seconds one call may take; ``memory_mib`` the memory one
    long call may allocate.  Records that do not validate do not stop the server: every
    call reports them until they are fixed, and the fix is picked up without a restart.
    """
    confine.set_root(root)
    workers.configure(budget, memory_mib)
    _warm()  # on this thread, which runs the event loop: its warm state is the loop's
    build().run("stdio")


def _warm() -> None:
    """Open what the first calls read: the index, and every record (resources/list)."""
    try:
        snap = state().current()
        snap.session()
        for _ in snap.catalog.records():
            pass
    except StoreInvalid as exc:
        log.warning(
            "the records do not validate (%d problems); run 'kb validate'", len(exc.problems)
        )
