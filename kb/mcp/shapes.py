"""What each MCP tool returns: the documents of the CLI's ``--format json``, typed.

The SDK turns these into each tool's published output schema and checks every result
against it; :mod:`kb.mcp.tools` names them as its functions' return types.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict


class ReleaseMatch(TypedDict):
    asked: str
    release: str
    exact: bool


class SearchHit(TypedDict):
    kind: str
    name: str
    score: float
    summary: str


class SearchResult(TypedDict):
    query: str
    results: list[SearchHit]
    torch_npu: NotRequired[ReleaseMatch]


class ListItem(TypedDict):
    kind: str
    name: str
    category: str | None
    status: str | None
    summary: str


class ListResult(TypedDict):
    results: list[ListItem]
    torch_npu: NotRequired[ReleaseMatch]


class Finding(TypedDict):
    file: str
    line: int
    column: int
    code: str
    severity: Literal["error", "warning", "info"]
    message: str
    candidate: int | None


class CheckSummary(TypedDict):
    files: int
    candidates: int
    errors: int
    warnings: int


class CheckResult(TypedDict):
    findings: list[Finding]
    summary: CheckSummary


class Rule(TypedDict):
    code: str
    name: str
    severity: str
    summary: str
    why: str
    fail: str
    fix: str
    fronts: list[str]  # which front ends run it: check (candidate lists), scan (Python)
    language: str  # of the fail/fix snippets: yaml (candidate list) or python


class ScanSummary(TypedDict):
    files: int
    calls: int
    ops: int
    candidates: int
    errors: int
    warnings: int


class Skipped(TypedDict):
    path: str
    reason: str


class ScanResult(TypedDict):
    findings: list[Finding]
    summary: ScanSummary
    skipped: list[Skipped]
    inventory: list[dict[str, Any]]  # the modules read (kind, lines, facts, unknown, not_proposed)
    # per module and phase: chain, stages with args and mapping, prerequisites
    plan: list[dict[str, Any]]
    not_followed: list[Skipped]  # files the model reader meant to follow and did not read
    # with port_diff: each rewritten file's stages, notes and unified diff (kb port --diff)
    port: NotRequired[dict[str, Any]]


class RulesResult(TypedDict):
    rules: list[Rule]


class PrefetchSizeResult(TypedDict):
    playbook: str
    results: list[dict[str, Any]]
