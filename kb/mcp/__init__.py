"""``kb mcp``: the knowledge base as Model Context Protocol tools for coding agents.

:mod:`kb.mcp.tools` holds the tools as plain functions listed in one table (their
signatures are the published schemas), :mod:`kb.mcp.prompts` the workflow prompts,
:mod:`kb.mcp.state` the records and index kept open between calls, :mod:`kb.mcp.limits`
what one call may ask for, :mod:`kb.mcp.workers` and :mod:`kb.mcp.child` the child
processes long calls run in, and :mod:`kb.mcp.server` wires them into the official
``mcp`` SDK (an optional extra: ``pip install '.[mcp]'``) over :mod:`kb.mcp.stdio`.
Only ``server`` and ``stdio`` import the SDK, so the tools can be called and tested
without it.
"""
