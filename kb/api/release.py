"""The ``torch_npu`` filter ``search`` and ``list`` share: a release asked for, and the
operators that ship in it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.releases import Match


def torch_npu_release(text: str) -> Match:
    """The harvested release for ``--torch-npu``; an unknown line is a usage error.

    A release matched to its nearest harvested neighbour is said on stderr, the one
    channel every caller leaves free (the MCP server's stdout is its protocol).
    """
    import sys

    from kb.api.errors import UsageError
    from kb.catalog.releases import resolve

    if len(text) > 40:
        raise UsageError(
            f"--torch-npu {text[:20]}… ({len(text)} characters) is not a torch_npu "
            "release number such as 2.7.1"
        )
    try:
        got = resolve(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not got.exact:
        print(
            f"kb: torch_npu {text} read as {got.release} (nearest harvested release)",
            file=sys.stderr,
        )
    return got


def shipped_in(rec: dict[str, Any], release: str) -> bool:
    """Operators whose version facts place them in ``release``; other kinds drop out."""
    from kb.catalog.releases import record_has

    return rec.get("kind") == "operator" and bool(record_has(rec, release))


def release_doc(asked: str, release: Match) -> dict[str, Any]:
    """The ``torch_npu`` member of a filtered document: what was asked, what it meant."""
    return {"asked": asked, "release": release.release, "exact": release.exact}
