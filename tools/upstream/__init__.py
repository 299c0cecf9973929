"""Upstream importer and drift report.

Reads the facts (schemas, parameters, dtypes, formats, products, deprecations,
PyTorch versions) out of an op-plugin checkout and a torch_npu wheel, writes draft
records for operators that have none, refreshes the fact fields of existing records
without touching their words, and reports drift between records and upstream.

Data flows one way: ``sources`` (read-only, passed as arguments) → :mod:`facts` →
{:mod:`drafts`, :mod:`refresh`, :mod:`drift`}.  Nothing here is imported by the
``kb`` command-line hot path.
"""

from __future__ import annotations

PLACEHOLDER = "TODO:"
"""Prefix of every text the importer cannot write itself (summaries, descriptions).

Drafts carry it so ``kb validate`` accepts them while a reviewer (and
:func:`tools.upstream.drafts.needs_words`) can still find what a person must write.
"""
