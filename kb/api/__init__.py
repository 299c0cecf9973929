"""The api layer: one module per verb (``kb.api.search``, ``show``, ``list``, ``check``,
``scan``, ``rules``, ``tree``, ``advise``, ``prefetch_size``, ``validate``, ``doctor``),
plain functions returning the documents the CLI prints with ``--format json``, the MCP
tools return and the site renders.  :mod:`kb.api.errors` holds ``UsageError`` and the
exit codes.  Light on import: each verb's module imports what it needs."""
