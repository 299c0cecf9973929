"""Standard input and output for the SDK's stdio transport, with a reply for every request.

The SDK drops a line it cannot validate as a JSON-RPC message (``params`` that are not
an object, ``jsonrpc: "1.0"``, nesting deeper than its parser takes, a lone surrogate
escape), and takes a request whose id is a float, a boolean, an array or an object for
a notification: either way the client waits forever for an answer.  :class:`Input`
reads the lines before the SDK does and checks each envelope strictly
(:func:`refused`): it passes on the ones it accepts and answers the others itself with
a JSON-RPC error, carrying the request's id when that id is a string or an integer and
``null`` otherwise, as JSON-RPC 2.0 asks.  :class:`Output` is the one writer of the
wire, so those replies and the SDK's never interleave.

When the wire is a pipe or a socket (what an agent's client gives), both ends are read
and written by the event loop itself, with no thread in between: a request costs one
wake-up of the server, not three.  Other files (a terminal, a regular file) are read
and written on helper threads.

While serving, file descriptors 0 and 1 point at the null device and at standard
error (as the SDK does for its own streams), so nothing a tool prints or reads can
reach the wire.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import stat
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
#: Lines read ahead of the SDK before reading pauses.
READ_AHEAD = 64

Reply = tuple[Any, int, str]  # (id, code, message) of one JSON-RPC error reply


def _is_pipe(raw: BinaryIO) -> bool:
    """A pipe or socket the event loop can watch (not a terminal or a regular file)."""
    try:
        mode = os.fstat(raw.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Drain(asyncio.Protocol):
    """Flow control of the writing pipe: wait while the client is not reading."""

    def __init__(self) -> None:
        self._resumed: asyncio.Event | None = None
        self.lost = False

    def pause_writing(self) -> None:
        self._resumed = asyncio.Event()

    def resume_writing(self) -> None:
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drain(self) -> None:
        if self._resumed is not None and not self.lost:
            await self._resumed.wait()


class Output:
    """The wire's writer: whole lines, one at a time, flushed."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._lock = threading.Lock()
        self._transport: asyncio.WriteTransport | None = None
        self._drain: _Drain | None = None
        self._fd = -1

    async def open(self) -> None:
        """Write through the event loop when the wire is a pipe or socket."""
        if _is_pipe(self._raw):
            loop = asyncio.get_running_loop()
            self._fd = self._raw.fileno()
            transport, protocol = await loop.connect_write_pipe(_Drain, self._raw)
            self._transport, self._drain = transport, protocol

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()  # closes the file object, not the descriptor
            with suppress(OSError):
                os.set_blocking(self._fd, True)  # shared with whoever else holds the pipe

    def _put(self, data: bytes) -> None:
        with self._lock:
            self._raw.write(data)
            self._raw.flush()

    async def write(self, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")
        if self._transport is None or self._drain is None:
            await anyio.to_thread.run_sync(self._put, data)
        elif not self._drain.lost:
            self._transport.write(data)
            await self._drain.drain()

    async def flush(self) -> None:
        """Every write is flushed already (the SDK calls this after each line)."""

    async def reply_error(self, id: Any, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
        await self.write(json.dumps(error, separators=(",", ":")) + "\n")


class TooLong(bytes):
    """The start of a line longer than :data:`MAX_LINE` (the rest was skipped)."""


class _Lines(asyncio.Protocol):
    """Lines of a pipe read by the event loop; reading pauses while many are unread."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._lines: collections.deque[bytes] = collections.deque()
        self._skipping = False  # inside a line that was too long
        self._ended = False
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
            else:
                self._buffer += data[start : end + 1]
                self._lines.append(bytes(self._buffer))
                self._buffer.clear()
            start = end + 1
        if start < len(data) and not self._skipping:
            self._buffer += data[start:]
            if len(self._buffer) >= MAX_LINE:
                self._lines.append(TooLong(self._buffer[:65536]))
                self._buffer.clear()
                self._skipping = True
        if len(self._lines) >= READ_AHEAD and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self._ended:
            self._ended = True
            if self._buffer and not self._skipping:
                self._lines.append(bytes(self._buffer))
            self._buffer.clear()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self) -> bytes | None:
        """The next line (with its newline), None at the end."""
        while not self._lines:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        if self._paused and len(self._lines) <= READ_AHEAD // 4 and self._transport is not None:
            self._transport.resume_reading()
            self._paused = False
        return self._lines.popleft()


class Input:
    """The lines of standard input the SDK can read; the others answered on ``out``."""

    def __init__(self, raw: BinaryIO, out: Output) -> None:
        self._raw = raw
        self._out = out
        self._pipe: _Lines | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._fd = -1

    async def open(self) -> None:
        """Read through the event loop when the wire is a pipe or socket."""
        if _is_pipe(self._raw):
            loop = asyncio.get_running_loop()
            self._fd = self._raw.fileno()
            self._transport, self._pipe = await loop.connect_read_pipe(_Lines, self._raw)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            with suppress(OSError):
                os.set_blocking(self._fd, True)

    def _read_line(self) -> bytes:
        raw = self._raw.readline(MAX_LINE)
        if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
            while True:  # skip the rest of the line
                chunk = self._raw.readline(MAX_LINE)
                if not chunk or chunk.endswith(b"\n"):
                    break
            return TooLong(raw[:65536])
        return raw

    async def _next(self) -> bytes | None:
        if self._pipe is not None:
            return await self._pipe.next()
        raw = await anyio.to_thread.run_sync(self._read_line)
        return raw or None

    async def __aiter__(self) -> AsyncIterator[str]:
        while (raw := await self._next()) is not None:
            line = raw.decode("utf-8", "replace")  # what the SDK's own reader does
            if isinstance(raw, TooLong):
                await self._out.reply_error(
                    top_level_id(line)[1],
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


#: The members each kind of message may have (JSON-RPC 2.0).
REQUEST_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})
RESPONSE_MEMBERS = frozenset({"jsonrpc", "id", "result", "error"})


def refused(line: str) -> list[Reply] | None:
    """None for a line to pass to the SDK; else the error replies it needs: one per
    request (the id when it is a string or an integer, else ``null``), ``null`` for a
    line that is not JSON, none for a notification or response the SDK would drop."""
    try:
        data = json.loads(line)
    except RecursionError:  # JSON nested deeper than Python's parser goes
        found, id = top_level_id(line)
        if not found:
            return []
        return [(id, INVALID_REQUEST, "invalid request: the message nests too deeply")]
    except ValueError:
        return [(top_level_id(line)[1], PARSE_ERROR, "parse error: the line is not valid JSON")]
    if isinstance(data, list):  # a batch: JSON-RPC 2.0 has them, MCP does not
        said = "invalid request: batches are not supported; send one message a line"
        replies = [(_id_or_null(m), INVALID_REQUEST, said) for m in data if _is_request(m)]
        return replies if data else [(None, INVALID_REQUEST, said)]
    if not isinstance(data, dict):
        return [(None, INVALID_REQUEST, "invalid request: a message is a JSON object")]
    problem = envelope_problem(data)
    if problem is None:
        try:
            mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            return None
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            problem = _reason(exc)
    if "method" in data or ("id" in data and not _is_response(data)):
        return [(_id_or_null(data), INVALID_REQUEST, f"invalid request: {problem}")]
    return []  # a broken response: nothing to answer


def envelope_problem(data: dict[str, Any]) -> str | None:
    """What makes ``data`` not a JSON-RPC 2.0 message MCP takes, or None."""
    if data.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "id" in data and not _usable_id(data["id"]):
        shown = json.dumps(data["id"], ensure_ascii=False)
        return f"the id must be a string or an integer, not {shown[:40]}"
    if "method" in data:
        if not isinstance(data["method"], str):
            return "method must be a string"
        members = REQUEST_MEMBERS
    elif _is_response(data):
        members = RESPONSE_MEMBERS
        if "result" in data and "error" in data:
            return "a response has result or error, not both"
    else:
        return "a message is a request (with method) or a response (with result or error)"
    extra = sorted(k for k in data if k not in members)
    if extra:
        return f"unknown member {', '.join(repr(k[:40]) for k in extra[:5])}"
    return None


def _is_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message


def _is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


def _id_or_null(message: Any) -> Any:
    id = message.get("id") if isinstance(message, dict) else None
    return id if _usable_id(id) else None


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


def top_level_id(line: str) -> tuple[bool, Any]:
    """Whether the outermost JSON object in ``line`` has an ``id`` member, and its value
    when that is a string or an integer (else None): one flat pass tracking depth and
    strings, so any nesting and a line cut short are read."""
    decoder = json.JSONDecoder()
    depth, i, n = 0, 0, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            try:
                key, end = json.decoder.scanstring(line, i + 1)  # type: ignore[attr-defined]
            except ValueError:
                return False, None
            j = _blank_end(line, end)
            if depth == 1 and key == "id" and line.startswith(":", j):
                try:
                    value, _ = decoder.raw_decode(line, _blank_end(line, j + 1))
                except (ValueError, RecursionError):
                    return True, None
                return True, value if _usable_id(value) else None
            i = end
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return False, None


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


@contextlib.asynccontextmanager
async def streams(raw_in: BinaryIO, raw_out: BinaryIO) -> AsyncIterator[tuple[Input, Output]]:
    """(stdin, stdout) to hand to the SDK's ``stdio_server``, open while in use."""
    out = Output(raw_out)
    stdin = Input(raw_in, out)
    await out.open()
    await stdin.open()
    try:
        yield stdin, out
    finally:
        stdin.close()
        out.close()
