"""``kb verify ORIGINAL PORTED --model-config F`` (the parser lives beside ``kb port``'s)."""

from __future__ import annotations

from kb.cli.port import add_verify_parser as add_parser

__all__ = ["add_parser"]
