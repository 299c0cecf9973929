"""Standard input and output for the SDK's stdio transport, with a reply for every request.

The SDK drops a line it cannot validate as a JSON-RPC message (``params`` that are not
an object, ``jsonrpc: "1.0"``, nesting deeper than its parser takes, a lone surrogate
escape): a request with an id then never gets an answer and the client waits forever.
:class:`Input` reads the lines before the SDK does, passes on the ones it accepts and
answers the others itself with a JSON-RPC error carrying their id (``null`` when the
line is not JSON at all); :class:`Output` is the one writer of the wire, so those
replies and the SDK's never interleave.

While serving, file descriptors 0 and 1 point at the null device and at standard
error (as the SDK does for its own streams), so nothing a tool prints or reads can
reach the wire.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, BinaryIO

import anyio
import mcp_types

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
#: Longest line read (a 4 MiB scan text, JSON-escaped, fits easily).
MAX_LINE = 64 * 1024 * 1024

Reply = tuple[Any, int, str]  # (id, code, message) of one JSON-RPC error reply


class Output:
    """The wire's writer: whole lines, one at a time, flushed."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._lock = threading.Lock()

    def _put(self, text: str) -> None:
        with self._lock:
            self._raw.write(text.encode("utf-8", "backslashreplace"))
            self._raw.flush()

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._put, text)

    async def flush(self) -> None:
        """Every write is flushed already (the SDK calls this after each line)."""

    async def reply_error(self, id: Any, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
        await self.write(json.dumps(error, separators=(",", ":")) + "\n")


class Input:
    """The lines of standard input the SDK can read; the others answered on ``out``."""

    def __init__(self, raw: BinaryIO, out: Output) -> None:
        self._raw = raw
        self._out = out

    def _skip_line(self) -> None:
        while True:
            chunk = self._raw.readline(MAX_LINE)
            if not chunk or chunk.endswith(b"\n"):
                return

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            raw = await anyio.to_thread.run_sync(self._raw.readline, MAX_LINE)
            if not raw:
                return
            line = raw.decode("utf-8", "replace")  # what the SDK's own reader does
            if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
                await anyio.to_thread.run_sync(self._skip_line)
                await self._out.reply_error(
                    top_level_id(line[:65536]),
                    INVALID_REQUEST,
                    f"the message is longer than {MAX_LINE} bytes",
                )
                continue
            if not line.strip():
                continue
            replies = refused(line)
            if replies is None:
                yield line
                continue
            for id, code, message in replies:
                await self._out.reply_error(id, code, message)


def refused(line: str) -> list[Reply] | None:
    """None for a line the SDK accepts; else the error replies it needs: one per request
    id it carries, ``null`` for a line that is not JSON, none for a broken notification
    or response."""
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        reason = _reason(exc)
    try:
        data = json.loads(line)
    except RecursionError:  # JSON nested deeper than Python's parser goes
        id = top_level_id(line)
        return (
            []
            if id is None
            else [(id, INVALID_REQUEST, "invalid request: the message nests too deeply")]
        )
    except ValueError:
        return [(top_level_id(line), PARSE_ERROR, "parse error: the line is not valid JSON")]
    if isinstance(data, list):  # a batch: JSON-RPC 2.0 has them, MCP does not
        return [
            (
                m["id"],
                INVALID_REQUEST,
                "invalid request: batches are not supported; send one message a line",
            )
            for m in data
            if _wants_reply(m)
        ]
    if not isinstance(data, dict):
        return [(None, INVALID_REQUEST, "invalid request: a message is a JSON object")]
    if _wants_reply(data):
        if data.get("jsonrpc") != "2.0":
            reason = 'jsonrpc must be "2.0"'
        return [(data["id"], INVALID_REQUEST, f"invalid request: {reason}")]
    if "id" in data and "method" in data:
        return [(None, INVALID_REQUEST, "invalid request: the id must be a string or an integer")]
    return []


def _wants_reply(message: Any) -> bool:
    """A request (not a response) with a usable id."""
    return (
        isinstance(message, dict)
        and _usable_id(message.get("id"))
        and "result" not in message
        and "error" not in message
    )


def _usable_id(id: Any) -> bool:
    return isinstance(id, str) or (isinstance(id, int) and not isinstance(id, bool))


def _reason(exc: ValueError) -> str:
    """The first thing pydantic found wrong, briefly."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except (IndexError, TypeError, ValueError):
        first = None
    if not first:
        return "not a valid JSON-RPC message"
    msg = str(first.get("msg") or "not a valid JSON-RPC message")
    field = [str(p) for p in first.get("loc", ()) if not str(p).startswith("JSONRPC")]
    return f"{msg} ({'.'.join(field)})" if field else msg


def top_level_id(line: str) -> Any:
    """The ``id`` member of the outermost JSON object in ``line`` when it is a string or
    an integer, else None: one flat pass tracking depth and strings (any nesting)."""
    decoder = json.JSONDecoder()
    depth, i, n = 0, 0, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            try:
                key, end = json.decoder.scanstring(line, i + 1)  # type: ignore[attr-defined]
            except ValueError:
                return None
            j = _blank_end(line, end)
            if depth == 1 and key == "id" and line.startswith(":", j):
                try:
                    value, _ = decoder.raw_decode(line, _blank_end(line, j + 1))
                except (ValueError, RecursionError):
                    return None
                return value if _usable_id(value) else None
            i = end
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return None


def _blank_end(line: str, i: int) -> int:
    while i < len(line) and line[i] in " \t\r\n":
        i += 1
    return i


@contextmanager
def claimed() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """Private copies of the wire's descriptors, with 0 and 1 diverted meanwhile."""
    try:
        wire_in, wire_out = os.dup(0), os.dup(1)
    except OSError:  # no descriptors to copy: serve the streams in place
        yield sys.stdin.buffer, sys.stdout.buffer
        return
    diversions: dict[int, Callable[[], int]] = {
        0: lambda: os.open(os.devnull, os.O_RDONLY),
        1: lambda: os.dup(2),
    }
    diverted: list[tuple[int, int]] = []  # (fd, the wire copy to put back)
    try:
        for fd, divert in diversions.items():
            try:
                spare = divert()
                os.dup2(spare, fd)
                os.close(spare)
            except OSError:
                continue
            diverted.append((fd, wire_in if fd == 0 else wire_out))
        yield os.fdopen(wire_in, "rb", closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        for fd, wire in diverted:
            with suppress(OSError):
                os.dup2(wire, fd)


def streams(raw_in: BinaryIO, raw_out: BinaryIO) -> tuple[Any, Any]:
    """(stdin, stdout) to hand to the SDK's ``stdio_server``."""
    out = Output(raw_out)
    return Input(raw_in, out), out
