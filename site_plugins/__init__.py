"""MkDocs glue that turns the knowledge records into site pages at build time.

``records`` is the plugin MkDocs loads; ``pages`` and its siblings are plain functions
from record dicts to Markdown, so they are tested without running MkDocs.
"""
