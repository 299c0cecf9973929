"""What reading one file yields: torch_npu call sites, custom operator mounts, bodies.

The interpreter fills a :class:`FileScan`; the engine binds its call sites to records
and the fusion detectors read its function bodies.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kb.scan.registrations import Registration
from kb.scan.values import Cond, Entry, Op, Where


@dataclass
class CallSite:
    """One torch_npu call, in one combination of argument alternatives."""

    file: str
    op: Op
    where: Where  # the call expression
    func_where: Where  # the callee expression
    end_line: int
    positional: list[Entry]
    keywords: dict[str, Entry]
    star_args: bool
    open_kwargs: bool
    cond: Cond
    scope: str  # qualified name of the enclosing function or class
    node_id: int  # the call node; variants of one call share it
    variant: int = 0
    path_cond: Cond = frozenset()  # the branch conditions enclosing the call itself

    @property
    def joint(self) -> bool:
        """True when this variant combines arms of two or more separate conditions.

        Each arm alone may run, but whether they run together the code does not say;
        a finding seen only in joint variants is reported as a warning.
        """
        return len({atom for atom, _t in self.cond - self.path_cond}) >= 2


@dataclass
class FileScan:
    """What one file yields: call sites, custom operator mounts, function bodies."""

    path: str
    calls: list[CallSite] = field(default_factory=list)
    #: (namespace, name) assigned onto torch_npu or torch.ops by this file (mocks, shims):
    #: they change what the name means in this file only
    mounts: set[tuple[str, str]] = field(default_factory=set)
    #: operators this file registers with the dispatcher (tree-wide facts)
    registrations: set[Registration] = field(default_factory=set)
    #: (dotted path, bound name, line) of every absolute import (``from a import b``: ``a.b``)
    imports: list[tuple[str, str, int]] = field(default_factory=list)
    #: names a file that loads a compiled extension mentions (possible custom operators)
    extension_names: set[str] = field(default_factory=set)
    functions: list[tuple[str, ast.AST]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
