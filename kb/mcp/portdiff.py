"""The ``port_diff`` of the ``scan`` tool: the port ``kb port --diff`` shows, read
inside the server's root (the model reader's imports included) and written nowhere."""

from __future__ import annotations

from typing import Any

from kb.mcp import confine
from kb.mcp.calls import ToolInputError


def port_diff(
    path: str | None, product: str | None, quant: str | None, parallel: str | None, cfg: Any
) -> dict[str, Any]:
    """What ``kb port PATH --diff`` shows, read inside the server's root, written nowhere."""
    import tempfile

    from kb.api.errors import UsageError
    from kb.api.port import port

    if path is None:
        raise ToolInputError("port_diff needs a path: the port of pasted text has no file")
    with tempfile.TemporaryDirectory(prefix="kb-mcp-port-") as scratch:
        try:
            doc = port(
                path,
                scratch,
                product=product,
                quantization=quant,
                parallel=parallel,
                model_config=cfg,
                write=False,
                within=confine.root(),
            )
        except UsageError as exc:
            raise ToolInputError(str(exc)) from None
    for entry in doc["files"]:
        entry.pop("target", None)  # a scratch folder that is gone
    return doc
