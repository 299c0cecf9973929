"""The MCP server: the tool, prompt and resource tables wired into the ``mcp`` SDK.

Tools and prompts run on worker threads (:mod:`kb.mcp.workers`), each call within a
time budget, so a slow one never holds up the next; resources, a dictionary lookup,
stay on the event loop.  A caller's mistake becomes a tool error (``isError``) with
the message; a call over its budget, one saying so; any other exception is logged on
stderr with its traceback and reported as a tool error naming its type: every tool
error says why, and the server stays up.  The wire goes through :mod:`kb.mcp.stdio`,
which answers the requests the SDK cannot parse.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import Resource, ToolAnnotations

from kb import __version__
from kb.catalog.compiled import Catalog, StoreInvalid
from kb.mcp import confine, stdio, workers
from kb.mcp.prompts import PROMPTS
from kb.mcp.state import state
from kb.mcp.tools import CALLER_ERRORS, TOOLS

#: URI scheme of the records: kb://operator/NAME, kb://chain/NAME, ...
RESOURCE_KINDS = ("operator", "chain", "tree", "playbook")
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


def on_worker(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """An async wrapper running ``fn`` on a worker within the time budget; whatever goes
    wrong becomes a ToolError with a reason."""

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> Any:
        try:
            return await workers.pool().run(functools.partial(fn, **kwargs), workers.budget())
        except CALLER_ERRORS as exc:
            raise ToolError(
                str(exc).strip()
                or f"the arguments were refused ({type(exc).__name__}, no detail given)"
            ) from None
        except workers.OverBudget as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # a bug or the machine: logged, and the call says so
            log.error("%s failed", name, exc_info=exc)
            raise ToolError(
                f"{name} failed inside the server ({type(exc).__name__}); its log "
                "(standard error) has the details"
            ) from None

    return call


class KbServer(MCPServer[Any]):
    """MCPServer whose resource list is the current records (edits show up at once), served
    on standard input/output through :mod:`kb.mcp.stdio`."""

    async def run_stdio_async(self) -> None:
        """The SDK's own stdio loop, on streams that answer every request it drops."""
        from mcp.server.stdio import stdio_server

        with stdio.claimed() as (raw_in, raw_out):
            stdin, stdout = stdio.streams(raw_in, raw_out)
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):
                lowlevel = self._lowlevel_server
                await lowlevel.run(
                    read_stream, write_stream, lowlevel.create_initialization_options()
                )

    async def list_resources(self) -> list[Resource]:
        try:
            catalog = state().current().catalog
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
        rec = _catalog().get(name)
        if rec is None or rec["kind"] != kind:
            raise ResourceNotFoundError(f"no {kind} record named {name!r}")
        return json.dumps(rec, ensure_ascii=False, indent=2)

    read.__name__ = f"read_{kind}"
    return read


def _catalog() -> Catalog:
    try:
        return state().current().catalog
    except StoreInvalid as exc:
        raise ResourceError(
            f"the records do not validate ({len(exc.problems)} problems, the "
            f"first: {exc.problems[0]}); run 'kb validate'"
        ) from None


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
            on_worker(spec.fn, spec.name),
            name=spec.name,
            title=spec.title,
            annotations=READ_ONLY,
            structured_output=True,
        )
    for kind in RESOURCE_KINDS:
        server.resource(
            f"kb://{kind}/{{name}}",
            name=f"{kind} record",
            description=f"One {kind} record as JSON (all validated fields)",
            mime_type="application/json",
        )(_reader(kind))
    for prompt in PROMPTS:
        server.prompt(name=prompt.name, title=prompt.title)(on_worker(prompt.fn, prompt.name))
    return server


def serve(root: str | None = None, budget: float = workers.DEFAULT_BUDGET) -> None:
    """Open the records and the index, then serve over stdio until the client leaves.

    ``root`` (default: the working directory) is the directory the path-taking tools
    may read; ``budget`` the seconds one call may take.  Records that do not validate
    do not stop the server: every call reports them until they are fixed, and the fix
    is picked up without a restart.
    """
    confine.set_root(root)
    workers.configure(budget)
    workers.pool().submit(_warm).result()  # the first worker opens them before any call
    build().run("stdio")


def _warm() -> None:
    try:
        state().current().session()
    except StoreInvalid as exc:
        log.warning(
            "the records do not validate (%d problems); run 'kb validate'", len(exc.problems)
        )
