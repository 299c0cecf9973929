"""The api layer: one function per verb, returning the documents the CLI, the MCP server
and the site render.  Light on import: each verb's module imports what it needs."""
