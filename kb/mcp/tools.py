"""The MCP tools: one small function each, listed in :data:`TOOLS`.

Each tool takes JSON-schema'd arguments (the type hints and ``Field`` descriptions are
the schema) and returns the document the matching CLI verb prints with ``--format
json`` (``docs/cli.md``), built by the same :mod:`kb.api` function.  A caller's mistake (an unknown name,
a value outside a vocabulary, a missing answer) raises :class:`ToolInputError` or one of
the library's own input errors (:data:`CALLER_ERRORS`); the server turns those into a
tool error the agent can read, and stays up.

Nothing here imports the ``mcp`` SDK, so the tools can be called directly.
To add a tool: write the function, then add a :class:`ToolSpec` line to :data:`TOOLS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from kb.mcp import confine, limits
from kb.mcp.calls import CALLER_ERRORS as CALLER_ERRORS  # the server's and tests' name
from kb.mcp.calls import ToolInputError as ToolInputError
from kb.mcp.calls import catalog as _catalog
from kb.mcp.calls import current as _current
from kb.mcp.calls import tool as _tool
from kb.mcp.shapes import (
    CheckResult,
    ListResult,
    PrefetchSizeResult,
    RulesResult,
    ScanResult,
    SearchResult,
)
from kb.vocab import GRAPH_MODES
from kb.vocab.taxonomy import Kind

Lang = Literal["en", "zh"]


# --------------------------------------------------------------------------- tools


@_tool
def search(
    query: Annotated[
        str,
        Field(
            description="names, task phrases ('moe routing'), or Chinese",
            min_length=1,
            max_length=500,
        ),
    ],
    limit: Annotated[int, Field(ge=1, le=100, description="at most this many results")] = 10,
    kind: Annotated[Kind | None, Field(description="only records of this kind")] = None,
    torch_npu: Annotated[
        str | None,
        Field(description="only operators shipped in this torch_npu release, e.g. 2.7.1"),
    ] = None,
) -> SearchResult:
    """Search operators, reference chains, decision trees and the prefetch playbook, best
    first: exact names, partial or misspelt names, English task phrases, Chinese.
    Same result as `kb search QUERY --format json`."""
    from kb.api.search import search as ranked

    snap = _current()
    return ranked(
        snap.catalog,
        query,
        limit=limit,
        kind=kind,
        torch_npu=torch_npu,  # type: ignore[return-value]
        session=snap.session(),
    )


@_tool
def show(
    name: Annotated[
        str,
        Field(
            description="record name, call path (torch_npu.npu_rms_norm) or alias",
            min_length=1,
            max_length=200,
        ),
    ],
    section: Annotated[
        str | None,
        Field(
            description="only this record field, e.g. parameters, "
            "constraints, versions, examples, stages, nodes"
        ),
    ] = None,
    brief: Annotated[
        bool,
        Field(
            description="a summary card instead: call, products, torch_npu "
            "releases with gaps, quantization schemes"
        ),
    ] = False,
    lang: Annotated[Lang, Field(description="language of the card's summary")] = "en",
) -> dict[str, Any]:
    """One record with every validated field (as `kb show NAME --format json`), one section
    of it ({kind, name, SECTION}), or its brief card."""
    from kb.api.show import known_without_record, suggestions, view

    catalog = _catalog()
    rec = catalog.get(name)
    if rec is None:
        known = known_without_record(name)
        if known is not None:
            schemas = " | ".join(known["schemas"]) or "no published schema"
            raise ToolInputError(
                f"no record named {name!r}; torch_npu defines it (known from "
                f"{known['known_from']}): {schemas}"
            )
        hits = suggestions(catalog, name)
        hint = f"; did you mean: {', '.join(hits)}?" if hits else "; try the search tool"
        raise ToolInputError(f"no record named {name!r}{hint}")
    return view(rec, section=section, brief=brief, lang=lang)


@_tool
def list_records(
    kind: Annotated[Kind | None, Field(description="only records of this kind")] = None,
    category: Annotated[
        str | None,
        Field(description="operator category: attention, moe, mla, norm, rope, quantization ..."),
    ] = None,
    product: Annotated[
        str | None, Field(description="supported on this product, e.g. atlas-a3 or A2")
    ] = None,
    status: Annotated[
        str | None, Field(description="stable, beta, deprecated or undocumented")
    ] = None,
    fuses: Annotated[
        str | None,
        Field(description="operators that fuse this step, e.g. rope, rms_norm, kv_cache_write"),
    ] = None,
    torch_npu: Annotated[
        str | None, Field(description="only operators shipped in this torch_npu release")
    ] = None,
) -> ListResult:
    """Records filtered by kind, category, product, status, fused step and torch_npu
    release (filters combine). Same result as `kb list ... --format json`."""
    from kb.api.list import list_records as listed

    return listed(
        _catalog(),
        kind=kind,
        category=category,
        product=product,  # type: ignore[return-value]
        status=status,
        fuses=fuses,
        torch_npu=torch_npu,
    )


@_tool
def check(
    text: Annotated[
        str | None,
        Field(description="a candidate list as YAML or JSON text (format: docs/candidate-list.md)"),
    ] = None,
    path: Annotated[
        str | None,
        Field(
            description="or a candidate list file inside the server's "
            "root (relative to it; its working directory unless "
            "started with --root)"
        ),
    ] = None,
    select: Annotated[
        list[str] | None, Field(description="run only these rules: codes, prefixes (KB4) or names")
    ] = None,
    ignore: Annotated[list[str] | None, Field(description="skip these rules")] = None,
) -> CheckResult:
    """Lint a candidate list (fusion candidates, prefetch points) against the records:
    findings with line, column, rule code, severity and what to do. Same result as
    `kb check FILE --format json`; `rules` explains a code."""
    from kb.api.check import check as linted

    if path is not None and path.strip() != "-":  # '-' gets the api's own message
        path = confine.inside(path)
    return linted(
        _catalog,
        text=text,
        path=path,
        select=select,
        ignore=ignore,  # type: ignore[return-value]
        guard=True,
    )


@_tool
def scan(
    path: Annotated[
        str | None,
        Field(
            description="a .py file or a directory inside the "
            "server's root (relative to it; its working directory "
            "unless started with --root)"
        ),
    ] = None,
    text: Annotated[str | None, Field(description="or Python source to scan (one file)")] = None,
    product: Annotated[str | None, Field(description="target product, e.g. atlas-a3")] = None,
    torch_npu: Annotated[
        str | None, Field(description="target torch_npu release, e.g. 2.7.1")
    ] = None,
    quant: Annotated[
        str | None,
        Field(description="quantization scheme the plan targets: bf16, w8a8-static, ..."),
    ] = None,
    graph_mode: Annotated[
        str | None,
        Field(description=f"the graph mode the code runs under: {', '.join(GRAPH_MODES)}"),
    ] = None,
    parallel: Annotated[
        str | None,
        Field(description="deployment the plan targets: none (one device, the default), tp or ep"),
    ] = None,
    model_config_path: Annotated[
        str | None,
        Field(
            alias="model_config",  # pydantic reserves the name for itself
            description="the checkpoint's config.json or params.json inside the server's "
            "root (the CLI's --model-config): decides config-dependent facts of the plan",
        ),
    ] = None,
    plan: Annotated[
        bool,
        Field(description="the module inventory and plan even without fusion findings"),
    ] = False,
    select: Annotated[list[str] | None, Field(description="run only these rules")] = None,
    ignore: Annotated[list[str] | None, Field(description="skip these rules")] = None,
    exclude: Annotated[
        list[str] | None, Field(description="gitignore-style patterns of paths to skip")
    ] = None,
    custom_ops: Annotated[
        list[str] | None,
        Field(description="operators this project defines itself (not checked against records)"),
    ] = None,
    config: Annotated[
        str | None,
        Field(description="read [tool.kb] from this pyproject.toml (inside the server's root)"),
    ] = None,
    use_config: Annotated[
        bool, Field(description="false: ignore [tool.kb] settings (the CLI's --no-config)")
    ] = True,
    fusion: Annotated[bool, Field(description="also report fusion opportunities (KB6xx)")] = True,
    port_diff: Annotated[
        bool,
        Field(
            description="also return the port kb port would write for the path (each "
            "rewritten file's stages, notes and unified diff; nothing is written)"
        ),
    ] = False,
) -> ScanResult:
    """Lint Python model code without running it: every torch_npu call judged against the
    records (operator, keywords, binding, values, product, release) and unfused PyTorch
    patterns named with the fused operator that replaces them; with fusion (or plan),
    also the module inventory (nn.Module classes and their kinds) and the plan per module
    and phase read from the chain records. Same result as `kb scan PATH --format json`."""
    import os

    from kb.api.scan import scan as scanned

    if path is not None:
        path = confine.inside(path)
        if os.path.isfile(path) and not path.endswith(".py"):
            raise ToolInputError(
                f"{path}: scan reads Python source; give a .py file or a directory"
            )
    extra: dict[str, Any] = {
        "quantization": quant,
        "graph_mode": graph_mode,
        "exclude": exclude,
        "custom_ops": custom_ops,
        "config": confine.inside(config, "config") if config is not None else None,
        "use_config": use_config,
        "plan": plan,
        "model_config": (
            confine.inside(model_config_path, "model_config")
            if model_config_path is not None
            else None
        ),
    }
    result = scanned(
        _catalog,
        path=path,
        text=text,
        product=product,
        torch_npu=torch_npu,
        parallel=parallel,
        select=select,
        ignore=ignore,
        fusion=fusion,
        root=confine.root() if path is not None else None,
        **supported(scanned, extra, {"use_config": True, "plan": False}),
    )
    if port_diff:
        from kb.mcp.portdiff import port_diff as diffs

        result["port"] = diffs(path, product, quant, parallel, extra["model_config"])
    return result  # type: ignore[return-value]


def supported(
    fn: Callable[..., Any], extra: dict[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """The keyword arguments of ``extra`` that ``fn`` takes.  One it does not take is
    dropped when left at its default (None unless ``defaults`` says otherwise) and is a
    tool error naming it when asked for: an option a newer kb adds is never ignored."""
    import inspect

    params = inspect.signature(fn).parameters
    asked = [k for k, v in extra.items() if k not in params and v != defaults.get(k)]
    if asked:
        raise ToolInputError(
            f"{', '.join(asked)}: not supported by this kb version's {fn.__name__}; "
            "leave it out or upgrade kb"
        )
    return {k: v for k, v in extra.items() if k in params}


@_tool
def advise(
    tree: Annotated[
        str,
        Field(
            description="decision tree: attention, moe, kv-cache, "
            "prefetch-placement (the tree tool lists them)"
        ),
    ],
    answers: Annotated[
        dict[str, str | int],
        Field(description="flag -> value, e.g. {'arch': 'mla', 'phase': 'decode'}"),
    ] = {},  # noqa: B006
    strict: Annotated[
        bool,
        Field(description="assume nothing: a missing answer is a tool error (the CLI's --strict)"),
    ] = False,
) -> dict[str, Any]:
    """Walk a decision tree with the answers known so far; the result is the document of
    `kb advise TREE --FLAG VALUE ... --no-input --format json`. Common-case answers not
    given are assumed and listed under `assumed`. complete=true: chains with their
    stages (ranked `alternatives` other engines ship beside them), operators with
    products and key dtypes, prerequisites. complete=false: a question that changes the
    operators is open; `needed` names it and `completions` lists every way to finish,
    ranked, each with the answers it adds and the chains it reaches - pick one from the
    code (or ask) and call again."""
    from kb.api.advise import advise_step

    return advise_step(_catalog(), tree, answers, strict=strict)


@_tool
def tree(
    name: Annotated[
        str | None, Field(description="tree name; omit to list the trees with their flags")
    ] = None,
) -> dict[str, Any]:
    """A decision tree record (questions, answers, the chains they lead to), or every tree
    with its flags. Same result as `kb tree [NAME] --format json`."""
    from kb.api.tree import tree as tree_doc

    return tree_doc(_catalog(), name)


@_tool
def prefetch_size(
    shape: Annotated[
        list[int] | None,
        Field(description="weight shape, e.g. [7168, 18432]", min_length=1, max_length=8),
    ] = None,
    dtype: Annotated[
        str, Field(description="weight dtype: bf16, fp16, fp32, int8, int4, fp8 ...")
    ] = "bf16",
    hidden: Annotated[int | None, Field(ge=1, description="hidden size")] = None,
    intermediate: Annotated[
        int | None, Field(ge=1, description="dense MLP intermediate size (with hidden)")
    ] = None,
    gate_up: Annotated[bool, Field(description="the weight is a merged gate_up_proj")] = False,
    moe: Annotated[bool, Field(description="size MoE grouped-matmul expert weights")] = False,
    moe_intermediate: Annotated[
        int | None, Field(ge=1, description="MoE expert intermediate size")
    ] = None,
    experts_per_rank: Annotated[
        int | None, Field(ge=1, description="routed experts held by one rank")
    ] = None,
    moe_tp: Annotated[int, Field(ge=1, description="MoE TP size")] = 1,
    tp: Annotated[
        int, Field(ge=1, description="TP degree a dense weight is sharded by; sizes per rank")
    ] = 1,
    gmm: Annotated[
        Literal[1, 2] | None,
        Field(description="1 = gate+up (w13), 2 = down (w2); both when omitted"),
    ] = None,
    factor: Annotated[
        float | None, Field(gt=0, le=1, description="override the playbook's conservative factor")
    ] = None,
    window_us: Annotated[
        float | None,
        Field(gt=0, description="window duration in microseconds (with bandwidth): a cap"),
    ] = None,
    bandwidth: Annotated[
        float | None,
        Field(gt=0, description="bandwidth for the prefetch in GB/s (with window_us)"),
    ] = None,
    l2: Annotated[
        str | None,
        Field(description="L2 capacity the prefetch may use, bytes or e.g. 96MiB: a cap"),
    ] = None,
) -> PrefetchSizeResult:
    """Theoretical bytes of a weight and the conservative max_size to start npu_prefetch
    with, from the prefetch playbook's formulas (give shape, or hidden [+ intermediate
    [+ gate_up]], or moe with its sizes). Same result as `kb prefetch-size ... --format
    json`."""
    from kb.api.prefetch_size import PlaybookMissing, document, request, sizes

    req = request(
        shape=shape,
        dtype=dtype,
        hidden=hidden,
        intermediate=intermediate,
        gate_up=gate_up,
        moe=moe,
        moe_intermediate=moe_intermediate,
        experts_per_rank=experts_per_rank,
        moe_tp=moe_tp,
        gmm=gmm,
        tp=tp,
        factor=factor,
        window_us=window_us,
        bandwidth=bandwidth,
        l2=l2,
    )
    try:
        _, found = sizes(_catalog(), req)
    except PlaybookMissing as exc:
        raise ToolInputError(f"kb prefetch-size: {exc}") from None
    return document(found)  # type: ignore[return-value]


@_tool
def rules(
    code: Annotated[
        str | None, Field(description="a rule code (KB406), prefix (KB4) or name; omit for all")
    ] = None,
) -> RulesResult:
    """The checker's rules: code, severity, what each checks, why, and a failing and a fixed
    candidate-list snippet (`kb rules [CODE] --format json`, always as a list)."""
    from kb.api.rules import rules as explained

    return explained(code)  # type: ignore[return-value]


@_tool
def reference(
    name: Annotated[
        str | None,
        Field(
            description="operator to run (npu_rms_norm or a call path); "
            "omit to list the operators and the fusion mappings",
            max_length=200,
        ),
    ] = None,
    args: Annotated[
        list[Any],
        Field(
            description="positional arguments; an array is "
            "{'data': nested list, 'dtype': 'bfloat16'} or {'shape': "
            "[2, 8], 'dtype': 'float16', 'fill': 0}",
            max_length=32,
        ),
    ] = [],  # noqa: B006
    kwargs: Annotated[
        dict[str, Any],
        Field(
            description="keyword arguments by the torch_npu binding's names, e.g. {'epsilon': 1e-6}"
        ),
    ] = {},  # noqa: B006
) -> dict[str, Any]:
    """Run a fused operator's numpy reference on small arrays (at most 4096 elements each,
    65536 in all) and return its outputs in the operator's return order, with what it
    computes and the sources it follows; caches an operator updates in place come back
    under `mutated`. Without a name: the operators it can run and the fusion mappings,
    each with the operator it maps to."""
    from kb.api.reference import run_json, semantics

    if name is None:
        from kb.reference import available
        from kb.reference.mappings import MAPPINGS

        return {
            "operators": available(),
            "mappings": [
                {"id": m.id, "unfused": m.unfused, "target": m.target, "arguments": m.arguments}
                for m in MAPPINGS
            ],
        }
    limits.reference_inputs(args, kwargs)
    catalog = _catalog()
    rec = catalog.get(name)
    if rec is not None:
        limits.required_tensors(rec, args, kwargs)
    with limits.work_cap():
        doc = run_json(name, args, kwargs, catalog)
    sent = limits.output_elements(doc)
    if sent > limits.MAX_OUTPUT_ELEMENTS:
        raise ToolInputError(
            f"{name}: the outputs hold {sent} elements; at most "
            f"{limits.MAX_OUTPUT_ELEMENTS} come back in one call; ask for smaller arrays"
        )
    rec = catalog.get(doc["operator"])
    doc["semantics"] = semantics(rec) if rec else None
    return doc


#: A candidate list up to this size is checked on the event loop (tens of milliseconds);
#: a larger one goes to a child process like a scan.
QUICK_CHECK_BYTES = 16 * 1024


def _always(kwargs: dict[str, Any]) -> bool:
    return True


def _never(kwargs: dict[str, Any]) -> bool:
    return False


def _large_check(kwargs: dict[str, Any]) -> bool:
    """A candidate list too large to check on the loop (text, or a file by its size)."""
    import os

    text, path = kwargs.get("text"), kwargs.get("path")
    if isinstance(text, str) and len(text) > QUICK_CHECK_BYTES // 4:
        return len(text.encode("utf-8", "surrogatepass")) > QUICK_CHECK_BYTES
    if isinstance(path, str) and path.strip() != "-":
        try:  # only a size to route by: the tool itself confines and reads it
            return os.stat(os.path.join(confine.root(), path)).st_size > QUICK_CHECK_BYTES
        except (OSError, ValueError):
            return False  # the tool itself says what is wrong with it
    return False


@dataclass(frozen=True)
class ToolSpec:
    """One row of the tool table: the MCP name, a title, the function, and whether a
    call with these arguments may run long (then it runs in a child process that its
    budget can stop; otherwise on the server's event loop)."""

    name: str
    title: str
    fn: Callable[..., Any]
    long: Callable[[dict[str, Any]], bool] = _never


#: Every tool the server offers, in the order agents see them.
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search", "Search the torch_npu knowledge base", search),
    ToolSpec("show", "Show one record (or a section, or a brief card)", show),
    ToolSpec("list", "List records by kind, category, product, status, release", list_records),
    ToolSpec("check", "Lint a candidate list against the records", check, _large_check),
    ToolSpec(
        "scan", "Lint Python model code's torch_npu calls and fusion opportunities", scan, _always
    ),
    ToolSpec("advise", "Walk a decision tree to chains and operators", advise),
    ToolSpec("tree", "A decision tree, or the list of trees", tree),
    ToolSpec("prefetch_size", "npu_prefetch max_size for a weight", prefetch_size),
    ToolSpec("rules", "Explain the checker's rules", rules),
    ToolSpec(
        "reference",
        "Run a fused operator's numpy reference on small arrays",
        reference,
        _always,
    ),
)


def tool_named(name: str) -> ToolSpec:
    """The row of :data:`TOOLS` called ``name``."""
    for spec in TOOLS:
        if spec.name == name:
            return spec
    raise KeyError(name)
