"""``kb verify ORIGINAL PORTED``: both sides at a tiny size on the CPU, one set of random
weights, the port under :mod:`kb.emulate`; every stage and module measured.

Each stage of the port (``_kb_stage`` in the ported file) is measured where it runs:
the probe computes the original code and the fused call on the same tensors and keeps
the worst error, then hands the fused result on, so a stage's error is its own and a
module's error is what the stages inside it add up to.  Modules are compared by
:func:`kb.emulate.compare` (forward hooks on both models).  A stage over its dtype's
tolerance names the mapping and the argument it suspects.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.port import positions
from kb.port.build import CannotBuild, build, inputs, load_config, load_module, shrink
from kb.port.judging import chose_on_close_inputs, routes_near_tie, tolerance
from kb.port.package import forget_copies, reaches
from kb.vocab.phases import INFERENCE_PHASES

#: ``--dtypes`` as a user types it: full precision, and the half type ports run in
DEFAULT_DTYPES = "float32,bfloat16"
DTYPES = tuple(DEFAULT_DTYPES.split(","))
#: what a forward calls the keys and values of earlier steps
CACHE_ARGS = ("past_key_values", "cache", "past_key_value", "kv_cache")
PHASES = INFERENCE_PHASES


class VerifyError(Exception):
    """Input kb verify cannot use, or what it could not import (the message says which)."""


@dataclass
class StageRun:
    """One stage's worst error over every call in one run."""

    stage: str
    info: dict[str, Any]
    calls: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    passed: bool = True
    note: str = ""
    #: the fused call refused these inputs (a dtype its kernel does not take): not measured
    rejected: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "rejected": self.rejected,
            "mapping": self.info.get("mapping"),
            "file": self.info.get("file"),  # a ported package file's stage: that file
            "covers": self.info.get("covers", []),
            "operator": self.info.get("operator"),
            "modules": self.info.get("modules"),
            "args": self.info.get("args"),
            "calls": self.calls,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "passed": self.passed,
            "note": self.note,
        }


@dataclass
class Run:
    """One class, dtype and phase."""

    cls: str
    dtype: str
    phase: str
    stages: list[StageRun] = field(default_factory=list)
    comparison: dict[str, Any] = field(default_factory=dict)
    not_run: str = ""

    @property
    def passed(self) -> bool:
        return not self.not_run and all(s.passed for s in self.stages) and not self.failing_modules

    @property
    def failing_modules(self) -> list[dict[str, Any]]:
        """Modules where an error starts: over tolerance elementwise and, relative to the
        output's largest magnitude, over the dtype's rtol, having got the original's inputs
        (the whole output always counts).  A module fed other inputs inherits its error,
        and a loop's module fed other rows (experts a near tie routed otherwise) cannot be
        compared call by call; the stages compare those on the same inputs.  Likewise a
        module that routes (a router stage's operator runs inside it) fed inputs that are
        close but not equal: a near tie may pick other experts there, and both the router
        and the experts stages are compared on the same inputs."""
        routers = {
            str(s.info.get("operator"))
            for s in self.stages
            if str(s.info.get("mapping", "")).startswith("router")
        }
        return [
            m
            for m in self.comparison.get("modules", [])
            if not m["passed"]
            and m["max_rel"] > m["tolerance"]["rtol"]
            and (m["inputs_match"] or m["name"] == "(output)")
            and (m["name"] == "(output)" or not routes_near_tie(m, routers))
            and (m["name"] == "(output)" or not chose_on_close_inputs(m))
        ]

    def as_dict(self) -> dict[str, Any]:
        mods = self.comparison.get("modules", [])
        starts = {m["name"] for m in self.failing_modules}
        return {
            "class": self.cls,
            "dtype": self.dtype,
            "phase": self.phase,
            "passed": self.passed if not self.not_run else None,
            "not_run": self.not_run,
            "stages": [s.as_dict() for s in self.stages],
            "modules": [
                {
                    **{k: m[k] for k in ("name", "max_abs", "max_rel", "passed", "inputs_match")},
                    "error_starts": m["name"] in starts,
                }
                for m in mods
            ],
        }


class _Probe:
    """``KB_PORT_PROBE``: both sides of a stage on the same tensors, worst error kept."""

    def __init__(
        self, stages: dict[str, dict[str, Any]], tolerance: dict[Any, Any], dtype: Any = None
    ) -> None:
        self.info = stages
        self.tolerance = tolerance
        self.dtype = dtype
        self.runs: dict[str, StageRun] = {}

    def __call__(self, stage: str, fused: Any, unfused: Any) -> Any:
        import torch

        from kb.emulate.comparison import diff
        from kb.emulate.errors import CallRejected

        want = unfused()
        run = self.runs.setdefault(stage, StageRun(stage, self.info.get(stage, {})))
        try:
            got = fused()
        except CallRejected as exc:  # the kernel does not take this dtype or shape
            run.rejected = str(exc)
            return want
        except Exception as exc:  # the port passes what the call cannot take
            run.passed = False
            run.note = run.note or f" (the fused call raised {type(exc).__name__}: {exc})"
            return want
        d = diff(stage, _tensors(want), _tensors(got), self.tolerance, self.dtype)
        run.calls += 1
        run.max_abs, run.max_rel = max(run.max_abs, d.max_abs), max(run.max_rel, d.max_rel)
        run.rtol, run.atol = d.rtol, d.atol
        if not d.passed:
            run.passed = False
            run.note = run.note or d.note
        del torch
        return got


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value.detach()]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise VerifyError(
            "kb verify could not import torch: install the [emulate] extra (torch==2.13.0)"
        ) from None
    return torch


def written_args(ported: str, stage: str) -> dict[str, str]:
    """The keyword arguments the ported file's fused call of ``stage`` passes, as written
    (the user may have edited them since kb port wrote them)."""
    try:
        tree = ast.parse(Path(ported).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "_kb_stage"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == stage
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Lambda)
        ):
            out: dict[str, str] = {}
            for call in ast.walk(node.args[1].body):
                if isinstance(call, ast.Call):
                    for kw in call.keywords:
                        if kw.arg:
                            out[kw.arg] = ast.unparse(kw.value)
                    rotary = isinstance(call.func, ast.Name) and call.func.id == "_kb_rotary"
                    if rotary and len(call.args) > 3:
                        out["rotary_mode"] = ast.unparse(call.args[3])
            return out
    return {}


def suspects(ported: str, s: StageRun) -> str:
    """The argument a failing stage most likely gets wrong: one written differently from
    what the plan derived, else every argument the plan derived for it."""
    derived = s.info.get("args") or {}
    written = written_args(str(s.info.get("file") or ported), s.stage)
    changed = [
        f"{k}={written[k]} where the plan derives {v!r} (from {_why(s.info, k)})"
        for k, v in derived.items()
        if k in written
        and _norm(written[k]) != _norm(repr(v))
        and _norm(written[k]) != _norm(str(v))
    ]
    if changed:
        return "; ".join(changed)
    if derived:
        return (
            "the arguments the plan derived: "
            + ", ".join(f"{k}={v!r}" for k, v in derived.items())
            + (
                " (or the order of the operands the port concatenates)"
                if s.info.get("mapping") in ("swiglu", "geglu")
                else ""
            )
        )
    return "the operands the port passes (the row's inputs, in its order)"


def row_words(mapping: str) -> str:
    """What the pattern table says the row computes and how its arguments are meant."""
    from kb.reference.mappings import MAPPINGS

    row = next((m for m in MAPPINGS if m.id == mapping), None)
    return f"; the row {mapping} computes {row.unfused} as {row.arguments}" if row else ""


def _norm(text: str) -> str:
    return text.replace('"', "'").replace(" ", "")


def _why(info: dict[str, Any], arg: str) -> str:
    facts = info.get("facts") or {}
    source = {"rotary_mode": "rope", "sparse_mode": "causal", "approximate": "activation"}.get(arg)
    if source and source in facts:
        return f"{source}={facts[source]!r}"
    return "the module's facts"


def _classes(mod: Any, wanted: list[str], stages: dict[str, dict[str, Any]]) -> list[str]:
    """The classes to run: those named, else the file's outermost module classes (not
    built by another class of the file), else the classes the port rewrote."""
    torch = _import_torch()
    mine = {
        n: c
        for n, c in vars(mod).items()
        if inspect.isclass(c) and issubclass(c, torch.nn.Module) and c.__module__ == mod.__name__
    }
    if wanted:
        missing = [w for w in wanted if w not in mine]
        if missing:
            raise VerifyError(f"no module class {', '.join(missing)} in {mod.__file__}")
        return wanted
    builds = {
        n: {o for o in mine if o != n and f"{o}(" in inspect.getsource(c)} for n, c in mine.items()
    }
    used = set().union(*builds.values()) if builds else set()
    abstract = torch.nn.Module.forward
    roots = [n for n in mine if n not in used and getattr(mine[n], "forward", None) is not abstract]
    reach = reaches(mod.__file__)  # through the package files the classes import
    roots.sort(key=lambda n: (-len(_inside(n, builds)), -len(reach.get(n, ()))))  # outermost first
    planned = sorted({m for s in stages.values() for m in s.get("modules", [])})
    return roots + [p for p in planned if p in mine and p not in roots]


def _inside(name: str, builds: dict[str, set[str]]) -> set[str]:
    """The classes ``name`` builds, directly or through the classes it builds."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for o in builds.get(todo.pop(), set()) - seen:
            seen.add(o)
            todo.append(o)
    return seen


def verify(
    original: str,
    ported: str,
    model_config: str,
    *,
    modules: list[str] | None = None,
    phases: tuple[str, ...] = PHASES,
    dtypes: tuple[str, ...] = DTYPES,
    product: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The ``kb verify`` document (see the module doc)."""
    _import_torch()
    for p in (original, ported, model_config):
        if not Path(p).is_file():
            raise VerifyError(f"{p}: no such file")
    from kb.emulate import install, uninstall
    from kb.port import standins

    stand = standins.install()  # flash-attn / xformers on the CPU, for both sides
    try:
        # the original and what it imports first, with no torch_npu in sight: a library
        # that probes for torch_npu would otherwise take its device paths in the original
        cfg = shrink(load_config(model_config))
        orig = load_module(original)
        install(product)
    except BaseException as exc:
        stand.undo()
        if isinstance(exc, CannotBuild):
            raise VerifyError(str(exc)) from None
        raise
    try:
        port = load_module(ported, alias=Path(original).stem + "__kb_port", beside=original)
        try:
            return _verify(
                original,
                ported,
                model_config,
                orig,
                port,
                cfg,
                modules,
                phases,
                dtypes,
                product,
                seed,
            )
        finally:  # the ported package files: loaded afresh by the next verify (edited since)
            forget_copies(port)
    except CannotBuild as exc:
        raise VerifyError(str(exc)) from None
    finally:
        uninstall()
        stand.undo()


def _verify(
    original: str,
    ported: str,
    model_config: str,
    orig: Any,
    port: Any,
    cfg: dict[str, Any],
    modules: list[str] | None,
    phases: tuple[str, ...],
    dtypes: tuple[str, ...],
    product: str | None,
    seed: int,
) -> dict[str, Any]:
    torch = _import_torch()
    from kb.port.package import stages_of

    stages = stages_of(port)  # the port's and its ported package files'
    if not stages and not hasattr(port, "_kb_stage"):
        raise VerifyError(f"{ported}: not written by kb port (no _kb_stage in it)")
    runs: list[Run] = []
    reach = reaches(orig.__file__)
    for name in _classes(orig, list(modules or []), stages):
        reached = {s.stage for r in runs if not r.not_run for s in r.stages}
        missing = {m for sid in set(stages) - reached for m in stages[sid].get("modules", [])}
        # a class of the file, or one it builds from the package's other files
        if (
            not modules
            and any(not r.not_run for r in runs)
            and not missing & (reach.get(name, set()) | {name})
        ):
            continue  # after a class that ran, only the classes of stages it did not reach
        for dt in dtypes:
            dtype = getattr(torch, dt)
            for phase in phases:
                runs.append(_run(orig, port, name, cfg, dtype, phase, product, seed, stages))
        # the outermost class that runs covers the classes inside it; one that ran but
        # left stages unmeasured (an MLP class nothing builds, beside the experts) does not
        reached = {s.stage for r in runs if not r.not_run for s in r.stages}
        ran = any(r.cls == name and not r.not_run for r in runs)
        if not modules and ran and reached >= set(stages):
            break
    return _document(original, ported, model_config, runs, stages)


def _run(
    orig: Any,
    port: Any,
    name: str,
    cfg: dict[str, Any],
    dtype: Any,
    phase: str,
    product: str | None,
    seed: int,
    stages: dict[str, dict[str, Any]],
) -> Run:
    import torch

    from kb.emulate import compare
    from kb.port.package import set_probe

    run = Run(name, str(dtype).removeprefix("torch."), phase)
    fwd = inspect.signature(getattr(orig, name).forward).parameters
    cache_arg = next((c for c in CACHE_ARGS if c in fwd), "")
    hf = bool(cache_arg and "use_cache" in fwd)
    # a cache handed in by the caller is not one positions alone can drive
    drive = None if cache_arg else positions.reader(getattr(orig, name))
    if phase == "decode" and not (hf or drive):
        run.not_run = positions.why_not(cache_arg, fwd)
        return run
    try:
        with positions.default_dtype(dtype if drive else None):
            torch.manual_seed(seed)
            a = build(getattr(orig, name), cfg, orig).to(dtype).eval()
            torch.manual_seed(seed)
            b = build(getattr(port, name), cfg, port).to(dtype).eval()
        _perturb(a, seed)
        b.load_state_dict(a.state_dict())
        options = inputs(a, cfg, dtype, seed + 1)
    except CannotBuild as exc:
        run.not_run = str(exc)
        return run
    except Exception as exc:  # the model's own code refusing the tiny size
        run.not_run = f"building {name} at the tiny size failed: {type(exc).__name__}: {exc}"
        return run
    if drive and not positions.keeps_cache(a, drive):
        if phase == "decode":
            run.not_run = positions.no_cache(drive)
            return run
        drive = None  # positions, but no cache to write: prefill as any class
    last = ""
    table = tolerance(dtype)
    if phase == "decode" and not drive:
        set_probe(port, _Probe(stages, table, dtype))  # a call the kernel refuses runs unfused
        try:
            a, b, options = _decoders(a, b, options[0][0], seed, cache_arg)
        except Exception as exc:
            run.not_run = f"the prefill before decoding failed: {type(exc).__name__}: {exc}"
            return run
        finally:
            set_probe(port, None)
    calls = (
        positions.attempts(a, b, options, drive, phase, dtype, seed)
        if drive
        else [lambda o=o: _split(o) for o in options]
    )
    for call in calls:
        probe = _Probe(stages, table, dtype)
        try:
            args, named = call()
            set_probe(port, probe)
            result = compare(a, b, tuple(args), named, tolerance=table, product=product)
        except positions.CannotDrive as exc:
            run.not_run = str(exc)
            return run
        except Exception as exc:
            last = f"{type(exc).__name__}: {exc}"
            continue
        finally:
            set_probe(port, None)
        run.stages = list(probe.runs.values())
        run.comparison = result.as_dict()
        return run
    how = f" (driven by {drive.describe()})" if drive else ""
    run.not_run = f"running {name}{how} failed: {last}"
    return run


def _split(option: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """(positional arguments, keyword arguments) of one candidate input list."""
    named = option[-1] if option and isinstance(option[-1], dict) else {}
    return (option[:-1] if named else option), named


def _perturb(model: Any, seed: int) -> None:
    """Vectors (norm weights, biases) moved off their initial values: a norm weight of
    ones would hide a port that drops it."""
    import torch

    gen = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1 and p.is_floating_point():
                noise = torch.randn(p.shape, generator=gen) * 0.2
                p.add_(noise.to(p.dtype))


def _decoders(a: Any, b: Any, prompt: Any, seed: int, arg: str) -> tuple[Any, Any, list[Any]]:
    """Each side after its own prefill of ``prompt`` (with its own cache), as a module
    that takes one next token; the one next token for both."""
    import torch

    class Step(torch.nn.Module):
        """One decode step on a cache the prefill filled."""

        def __init__(self, model: Any, cache: Any) -> None:
            super().__init__()
            self.model = model
            self.cache = cache

        def forward(self, ids: Any) -> Any:
            return self.model(ids, **{arg: self.cache}, use_cache=True)

    def cache_of(out: Any) -> Any:
        for name in (arg, "past_key_values", "cache"):
            found = getattr(out, name, None)
            if found is not None:
                return found
        raise ValueError(f"the prefill returned no cache ({arg})")

    with torch.no_grad():
        ca = cache_of(a(prompt.clone(), use_cache=True))
        cb = cache_of(b(prompt.clone(), use_cache=True))
    gen = torch.Generator().manual_seed(seed + 2)
    nxt = torch.randint(0, int(prompt.max()) + 1, (prompt.shape[0], 1), generator=gen)
    return Step(a, ca), Step(b, cb), [[nxt]]


def _document(
    original: str, ported: str, model_config: str, runs: list[Run], stages: dict[str, Any]
) -> dict[str, Any]:
    failures = []
    for r in runs:
        for s in r.stages:
            if not s.passed:
                failures.append(
                    {
                        "class": r.cls,
                        "dtype": r.dtype,
                        "phase": r.phase,
                        "stage": s.stage,
                        "mapping": s.info.get("mapping"),
                        "message": (
                            f"stage {s.stage} ({s.info.get('operator')}, mapping "
                            f"{s.info.get('mapping')}) in {', '.join(s.info.get('modules', []))}: "
                            f"max abs {s.max_abs:.3g}, max rel {s.max_rel:.3g} over the {r.dtype} "
                            f"tolerance (rtol {s.rtol:g}, atol {s.atol:g}){s.note}; suspect: "
                            f"{suspects(ported, s)}{row_words(str(s.info.get('mapping', '')))}"
                        ),
                    }
                )
        bad = r.failing_modules
        if bad and all(s.passed for s in r.stages):
            m = next((x for x in bad if x["inputs_match"]), bad[0])
            inside = ", ".join(sorted(s.stage for s in r.stages)) or "none"
            failures.append(
                {
                    "class": r.cls,
                    "dtype": r.dtype,
                    "phase": r.phase,
                    "stage": None,
                    "mapping": None,
                    "message": (
                        f"module {m['name']} differs: max abs {m['max_abs']:.3g}, max rel "
                        f"{m['max_rel']:.3g} over the {r.dtype} tolerance{m.get('note', '')}; "
                        f"every stage matches its original code alone (stages: {inside}), so "
                        "the difference is in the code around them (a step the port dropped "
                        "or changed outside a stage)"
                    ),
                }
            )
    ran = [r for r in runs if not r.not_run]
    return {
        "original": original,
        "ported": ported,
        "model_config": model_config,
        "passed": bool(ran) and not failures,
        "runs": [r.as_dict() for r in runs],
        "stages_planned": sorted(stages),
        "stages_not_reached": sorted(set(stages) - {s.stage for r in ran for s in r.stages}),
        "failures": failures,
    }
