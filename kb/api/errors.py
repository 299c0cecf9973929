"""Exit codes and the one error every verb raises for input it cannot use.

Both the command line and the MCP server sit on the api layer, so the error a verb
raises lives here, below both: the CLI turns it into exit 2, the MCP server into a
tool error.  Nothing here imports anything.
"""

from __future__ import annotations

#: Exit codes, the same for every verb (docs/cli.md): success, findings or a name that
#: does not exist, unusable input.
OK, FOUND, UNUSABLE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2."""


class NotFound(UsageError):
    """A name no record (tree, rule) has: exit code 1, as ``kb show NAME`` gives; the
    MCP server reports it as a tool error like any UsageError."""
