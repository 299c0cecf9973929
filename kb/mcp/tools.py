"""The MCP tools: one small function each, listed in :data:`TOOLS`.

Each tool takes JSON-schema'd arguments (the type hints and ``Field`` descriptions are
the schema) and returns the document the matching CLI verb prints with ``--format
json`` (``docs/cli.md``), built by the same code.  A caller's mistake (an unknown name,
a value outside a vocabulary, a missing answer) raises :class:`ToolInputError` or one of
the library's own input errors (:data:`CALLER_ERRORS`); the server turns those into a
tool error the agent can read, and stays up.

Nothing here imports the ``mcp`` SDK, so the tools can be called directly.
To add a tool: write the function, then add a :class:`ToolSpec` line to :data:`TOOLS`.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from kb.catalog.compiled import StoreInvalid
from kb.check.parse import InputError
from kb.cli import UsageError
from kb.mcp.state import state


class ToolInputError(ValueError):
    """Arguments a tool cannot use; the message says what would work."""


def _records_invalid(exc: StoreInvalid) -> ToolInputError:
    shown = "; ".join(str(p) for p in exc.problems[:5])
    more = f" (and {len(exc.problems) - 5} more)" if len(exc.problems) > 5 else ""
    return ToolInputError(f"the records do not validate: {shown}{more}; run 'kb validate'")


#: Exceptions that mean "the arguments (or the records) are wrong", not "the server broke".
CALLER_ERRORS: tuple[type[Exception], ...] = (ToolInputError, UsageError, InputError, ValueError)

Kind = Literal["operator", "chain", "tree", "playbook"]
Lang = Literal["en", "zh"]


def _current() -> Any:
    try:
        return state().current()
    except StoreInvalid as exc:
        raise _records_invalid(exc) from None


# --------------------------------------------------------------------------- outputs


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


class RulesResult(TypedDict):
    rules: list[Rule]


class PrefetchSizeResult(TypedDict):
    playbook: str
    results: list[dict[str, Any]]


# --------------------------------------------------------------------------- tools


def search(
    query: Annotated[str, Field(description="names, task phrases ('moe routing'), or Chinese",
                                min_length=1, max_length=500)],
    limit: Annotated[int, Field(ge=1, le=100, description="at most this many results")] = 10,
    kind: Annotated[Kind | None, Field(description="only records of this kind")] = None,
    torch_npu: Annotated[str | None, Field(description="only operators shipped in this "
                                           "torch_npu release, e.g. 2.7.1")] = None,
) -> SearchResult:
    """Search operators, reference chains, decision trees and the prefetch playbook, best
    first: exact names, partial or misspelt names, English task phrases, Chinese.
    Same result as `kb search QUERY --format json`."""
    from kb.cli.search import payload

    snap = _current()
    return payload(snap.catalog, query, limit=limit, kind=kind, torch_npu=torch_npu,  # type: ignore[return-value]
                   session=snap.session())  # fmt: skip


def show(
    name: Annotated[str, Field(description="record name, call path (torch_npu.npu_rms_norm) "
                               "or alias", min_length=1, max_length=200)],
    section: Annotated[str | None, Field(description="only this record field, e.g. parameters, "
                                         "constraints, versions, examples, stages, nodes")] = None,
    brief: Annotated[bool, Field(description="a summary card instead: call, products, torch_npu "
                                 "releases with gaps, quantization schemes")] = False,
    lang: Annotated[Lang, Field(description="language of the card's summary")] = "en",
) -> dict[str, Any]:
    """One record with every validated field (as `kb show NAME --format json`), one section
    of it ({kind, name, SECTION}), or its brief card."""
    from kb.api.recordview import brief as card
    from kb.api.recordview import section as cut
    from kb.api.recordview import section_key, section_names
    from kb.core.fuzzy import suggest

    catalog = _current().catalog
    rec = catalog.get(name)
    if rec is None:
        hits = suggest(name, catalog.names())
        hint = f"; did you mean: {', '.join(hits)}?" if hits else "; try the search tool"
        raise ToolInputError(f"no record named {name!r}{hint}")
    if brief and section:
        raise ToolInputError("give section or brief, not both")
    if brief:
        return card(rec, lang)
    if section:
        key = section_key(rec, section)
        if key is None:
            raise ToolInputError(f"{rec['name']} has no section {section!r}; sections: "
                                 f"{', '.join(section_names(rec))}")  # fmt: skip
        return cut(rec, key)
    return rec  # type: ignore[no-any-return]


def list_records(
    kind: Annotated[Kind | None, Field(description="only records of this kind")] = None,
    category: Annotated[str | None, Field(description="operator category: attention, moe, "
                                          "mla, norm, rope, quantization ...")] = None,
    product: Annotated[str | None, Field(description="supported on this product, e.g. atlas-a3 "
                                         "or A2")] = None,
    status: Annotated[str | None, Field(description="stable, beta, deprecated or "
                                        "undocumented")] = None,
    fuses: Annotated[str | None, Field(description="operators that fuse this step, e.g. rope, "
                                       "rms_norm, kv_cache_write")] = None,
    torch_npu: Annotated[str | None, Field(description="only operators shipped in this "
                                           "torch_npu release")] = None,
) -> ListResult:
    """Records filtered by kind, category, product, status, fused step and torch_npu
    release (filters combine). Same result as `kb list ... --format json`."""
    from kb.cli.list import payload

    return payload(_current().catalog, kind=kind, category=category, product=product,  # type: ignore[return-value]
                   status=status, fuses=fuses, torch_npu=torch_npu)  # fmt: skip


def check(
    text: Annotated[str | None, Field(description="a candidate list as YAML or JSON text "
                                      "(format: docs/candidate-list.md)")] = None,
    path: Annotated[str | None, Field(description="or a candidate list file on the server's "
                                      "machine (relative to its working directory)")] = None,
    select: Annotated[list[str] | None, Field(description="run only these rules: codes, "
                                              "prefixes (KB4) or names")] = None,
    ignore: Annotated[list[str] | None, Field(description="skip these rules")] = None,
) -> CheckResult:
    """Lint a candidate list (fusion candidates, prefetch points) against the records:
    findings with line, column, rule code, severity and what to do. Same result as
    `kb check FILE --format json`; `rules` explains a code."""
    from kb.api.check import checker as make_checker
    from kb.check.parse import read_source
    from kb.core import yamlpos
    from kb.text.findings import payload

    if (text is None) == (path is None):
        raise ToolInputError("give either text (the candidate list) or path (a file), not both")
    if path is not None:
        if path.strip() == "-":
            raise ToolInputError("path '-' would read the server's standard input; pass text")
        file, body = read_source(path)
    else:
        file, body = "<text>", text or ""
        if len(body.encode("utf-8")) > yamlpos.MAX_BYTES:
            raise ToolInputError(f"the text is larger than the {yamlpos.MAX_BYTES} byte limit")
    checker = make_checker(_current().catalog, select=select, ignore=ignore)
    return payload(checker.check_sources([(file, body)]))  # type: ignore[return-value]


def scan(
    path: Annotated[str | None, Field(description="a .py file or a directory on the server's "
                                      "machine (relative to its working directory)")] = None,
    text: Annotated[str | None, Field(description="or Python source to scan (one file)")] = None,
    product: Annotated[str | None, Field(description="target product, e.g. atlas-a3")] = None,
    torch_npu: Annotated[str | None, Field(description="target torch_npu release, e.g. 2.7.1")] = None,
    select: Annotated[list[str] | None, Field(description="run only these rules")] = None,
    ignore: Annotated[list[str] | None, Field(description="skip these rules")] = None,
    fusion: Annotated[bool, Field(description="also report fusion opportunities (KB6xx)")] = True,
) -> ScanResult:
    """Lint Python model code without running it: every torch_npu call judged against the
    records (operator, keywords, binding, values, product, release) and unfused PyTorch
    patterns named with the fused operator that replaces them. Same result as
    `kb scan PATH --format json`."""
    from pathlib import Path as _Path

    from kb.api.scan import scanner as make_scanner
    from kb.scan.engine import ScanError, ScanOptions
    from kb.text.scan import payload
    from kb.vocab import normalize

    if (text is None) == (path is None):
        raise ToolInputError("give either path (a file or directory) or text (Python source)")
    canon = normalize("product", product) if product else None
    if product and canon is None:
        raise ToolInputError(f"unknown product {product!r}")
    options = ScanOptions(product=canon, torch_npu=torch_npu, select=list(select or []),
                          ignore=list(ignore or []), fusion=fusion,
                          use_config=path is not None)  # fmt: skip
    scanner = make_scanner(_current().catalog, options)
    try:
        if path is not None:
            if not _Path(path).exists():
                raise ToolInputError(f"{path}: no such file or directory")
            report = scanner.scan([path])
        else:
            body = text or ""
            if len(body.encode("utf-8")) > 4 * 1024 * 1024:
                raise ToolInputError("the text is larger than the 4 MiB limit")
            report = scanner.scan_text(body, "<text>")
    except ScanError as exc:
        raise ToolInputError(str(exc)) from None
    return payload(report)  # type: ignore[return-value]


def advise(
    tree: Annotated[str, Field(description="decision tree: attention, moe, kv-cache, "
                               "prefetch-placement (the tree tool lists them)")],
    answers: Annotated[dict[str, str | int], Field(description="flag -> value, e.g. "
                                                   "{'arch': 'mla', 'phase': 'decode'}")] = {},  # noqa: B006
) -> dict[str, Any]:
    """Walk a decision tree with the answers known so far. When the walk is complete the
    result is `kb advise TREE --FLAG VALUE ... --format json` (chains with their stages,
    operators with products and key dtypes, prerequisites) plus complete=true; when an
    answer is still needed, complete=false and `needed` names the next question, its
    flag and the values it accepts: ask it (or read it from the code) and call again."""
    from kb.advice.advise import AdviceError, advice, walk

    catalog = _current().catalog
    rec = catalog.get(tree)
    if rec is None or rec["kind"] != "tree":
        raise ToolInputError(f"no decision tree named {tree!r}; trees: "
                             f"{', '.join(catalog.names('tree'))}")  # fmt: skip
    given = {k.removeprefix("--"): str(v) for k, v in answers.items()}

    class Needed(Exception):
        def __init__(self, node: dict[str, Any], steps: list[Any]) -> None:
            self.node, self.steps = node, steps

    def ask(node: dict[str, Any], steps: list[Any]) -> str:
        raise Needed(node, list(steps))

    try:
        walked = walk(rec, given, ask=ask)
    except Needed as stop:
        node = stop.node
        return {
            "tree": rec["name"],
            "complete": False,
            "answers": {f"--{s.key}": s.value for s in stop.steps},
            "path": [s.as_dict() for s in stop.steps],
            "needed": [{"flag": f"--{node['key']}", "key": node["key"],
                        "question": node["question"]["en"],
                        "options": [{"value": o["value"], "label": o["label"]}
                                    for o in node["options"]]}],
        }
    except AdviceError as exc:
        raise ToolInputError(str(exc)) from None
    return {**advice(walked, catalog.get), "complete": True, "needed": []}


def tree(
    name: Annotated[str | None, Field(description="tree name; omit to list the trees with "
                                      "their flags")] = None,
) -> dict[str, Any]:
    """A decision tree record (questions, answers, the chains they lead to), or every tree
    with its flags. Same result as `kb tree [NAME] --format json`."""
    from kb.cli.tree import payload

    return payload(_current().catalog, name)


def prefetch_size(
    shape: Annotated[list[int] | None, Field(description="weight shape, e.g. [7168, 18432]",
                                             min_length=1, max_length=8)] = None,
    dtype: Annotated[str, Field(description="weight dtype: bf16, fp16, fp32, int8, int4, fp8 "
                                "...")] = "bf16",
    hidden: Annotated[int | None, Field(ge=1, description="hidden size")] = None,
    intermediate: Annotated[int | None, Field(ge=1, description="dense MLP intermediate size "
                                              "(with hidden)")] = None,
    gate_up: Annotated[bool, Field(description="the weight is a merged gate_up_proj")] = False,
    moe: Annotated[bool, Field(description="size MoE grouped-matmul expert weights")] = False,
    moe_intermediate: Annotated[int | None, Field(ge=1, description="MoE expert intermediate "
                                                  "size")] = None,
    experts_per_rank: Annotated[int | None, Field(ge=1, description="routed experts held by "
                                                  "one rank")] = None,
    moe_tp: Annotated[int, Field(ge=1, description="MoE TP size")] = 1,
    gmm: Annotated[Literal[1, 2] | None, Field(description="1 = gate+up (w13), 2 = down (w2); "
                                               "both when omitted")] = None,
    factor: Annotated[float | None, Field(gt=0, le=1, description="override the playbook's "
                                          "conservative factor")] = None,
) -> PrefetchSizeResult:
    """Theoretical bytes of a weight and the conservative max_size to start npu_prefetch
    with, from the prefetch playbook's formulas (give shape, or hidden [+ intermediate
    [+ gate_up]], or moe with its sizes). Same result as `kb prefetch-size ... --format
    json`."""
    argv = ["prefetch-size", "--format", "json", "--dtype", dtype, "--moe-tp", str(moe_tp)]
    for flag, value in (("--shape", "x".join(map(str, shape)) if shape else None),
                        ("--hidden", hidden), ("--intermediate", intermediate),
                        ("--moe-intermediate", moe_intermediate),
                        ("--experts-per-rank", experts_per_rank), ("--gmm", gmm),
                        ("--factor", factor)):  # fmt: skip
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--gate-up"] * gate_up + ["--moe"] * moe
    return run_verb(argv)  # type: ignore[no-any-return]


def rules(
    code: Annotated[str | None, Field(description="a rule code (KB406), prefix (KB4) or name; "
                                      "omit for all")] = None,
) -> RulesResult:
    """The checker's rules: code, severity, what each checks, why, and a failing and a fixed
    candidate-list snippet (`kb rules [CODE] --format json`, always as a list)."""
    from kb.cli.rules import as_dict
    from kb.rules import RULES, get

    chosen = list(RULES)
    if code:
        one = get(code)
        chosen = [one] if one else [r for r in RULES if r.code.startswith(code.upper())]
        if not chosen:
            raise ToolInputError(f"no rule {code!r}; codes run KB001 to {RULES[-1].code}")
    return {"rules": [as_dict(r) for r in chosen]}  # type: ignore[misc]


# --------------------------------------------------------------------------- helpers


def run_verb(argv: list[str]) -> Any:
    """Run a ``kb`` verb in this process with ``--format json`` and return its document.

    For verbs whose arguments are flags (``prefetch-size``): the verb's own parser and
    code run, so the result is the CLI's by construction.  Output is captured, never
    written to this process's stdout (the MCP channel).
    """
    from kb.cli import build_parser

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = build_parser((argv[0].replace("-", "_"),)).parse_args(argv)
            code = int(args.func(args) or 0)
        except UsageError as exc:
            raise ToolInputError(str(exc)) from None
        except SystemExit as exc:  # argparse or a verb ending the process
            code = exc.code if isinstance(exc.code, int) else 2
    if code not in (0, 1) or not out.getvalue().strip():
        problem = err.getvalue().strip().splitlines()
        raise ToolInputError(problem[-1] if problem else f"kb {argv[0]} exited {code}")
    return json.loads(out.getvalue())


@dataclass(frozen=True)
class ToolSpec:
    """One row of the tool table: the MCP name, a title, and the function."""

    name: str
    title: str
    fn: Callable[..., Any]


#: Every tool the server offers, in the order agents see them.
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search", "Search the torch_npu knowledge base", search),
    ToolSpec("show", "Show one record (or a section, or a brief card)", show),
    ToolSpec("list", "List records by kind, category, product, status, release", list_records),
    ToolSpec("check", "Lint a candidate list against the records", check),
    ToolSpec("scan", "Lint Python model code's torch_npu calls and fusion opportunities", scan),
    ToolSpec("advise", "Walk a decision tree to chains and operators", advise),
    ToolSpec("tree", "A decision tree, or the list of trees", tree),
    ToolSpec("prefetch_size", "npu_prefetch max_size for a weight", prefetch_size),
    ToolSpec("rules", "Explain the checker's rules", rules),
)
