"""``kb mcp``: the knowledge base as Model Context Protocol tools for coding agents.

:mod:`kb.mcp.tools` holds the tools as plain functions listed in one table,
:mod:`kb.mcp.prompts` the workflow prompts, :mod:`kb.mcp.state` the records and index
kept open between calls, and :mod:`kb.mcp.server` wires them into the official ``mcp``
SDK (an optional extra: ``pip install '.[mcp]'``).  Only ``server`` imports the SDK,
so the tools can be called and tested without it.
"""
