"""``kb scan PATH...``: lint Python model code's torch_npu calls and find fusion opportunities.

Exit codes: 0 no errors (warnings and info allowed), 1 at least one error finding,
2 usage error, unusable settings, nothing readable to scan, or records that do not validate.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from kb.vocab import GRAPH_MODES
from kb.vocab.parallel import PARALLEL_MODES


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "scan",
        help="lint Python model code: torch_npu calls and fusion opportunities",
        description="Read .py files (directories recursively, honouring .gitignore and "
        "--exclude; nothing is imported or run), resolve every torch_npu call (aliases, "
        "functools.partial, **kwargs dicts, both arms of conditional values) and judge it "
        "against the records like a candidate: operator, keywords, positional binding, "
        "values, dtypes, product and torch_npu release. Unfused PyTorch patterns "
        "(hand-written RMSNorm, rotate_half RoPE, silu(gate)*up, softmax+topk routers, "
        "written-out attention ...) are reported as KB6xx info findings naming the fused "
        "operator from the records. Settings may come from [tool.kb] in the scanned "
        "project's pyproject.toml. A '# kb: ignore[CODE]' comment silences a finding on its "
        "line (on a call's first line: the whole call).",
        epilog="Exit status: 0 no errors, 1 errors found, 2 usage error or nothing scannable.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help=".py file or directory")
    p.add_argument(
        "--product", help="target product (atlas-a3, ascend-950, atlas-a2-inference, ...)"
    )
    p.add_argument(
        "--torch-npu",
        dest="torch_npu",
        metavar="VERSION",
        help="target torch_npu release, e.g. 2.7.1",
    )
    p.add_argument(
        "--quant",
        dest="quantization",
        metavar="SCHEME",
        help="quantization scheme the plan targets (bf16, w8a8-static, w8a8-dynamic, ...)",
    )
    p.add_argument(
        "--plan",
        action="store_true",
        help="print the module inventory and the per-module, per-phase plan instead of findings",
    )
    p.add_argument(
        "--model-config",
        metavar="FILE",
        help="the checkpoint's hyper-parameters (config.json, params.json or any JSON object): "
        "the plan decides what the code leaves to them (activation, heads, router scoring)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="with --plan and --model-config: port each planned file to a scratch folder, "
        "run it against the original on the CPU (kb verify) and mark every stage passed, "
        "failed or not run (needs the [emulate] and [port] extras and the model's imports)",
    )
    p.add_argument("--graph-mode", choices=GRAPH_MODES, help="the graph mode the code runs under")
    p.add_argument(
        "--parallel",
        metavar="MODE",
        help=f"how the model is deployed: {', '.join(PARALLEL_MODES)} (default: none, one "
        "device); chains built for a deployment not asked for are named, not planned",
    )
    p.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODE",
        help="run only these rules (codes, prefixes, names; repeatable)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE",
        help="skip these rules (codes, prefixes, names; repeatable)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="gitignore-style pattern of paths to skip (repeatable)",
    )
    p.add_argument(
        "--custom-op",
        action="append",
        default=[],
        dest="custom_ops",
        metavar="NAME",
        help="an operator this project defines itself (not checked against records)",
    )
    p.add_argument(
        "--no-fusion", action="store_true", help="do not report fusion opportunities (KB6xx)"
    )
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.kb] from this file")
    p.add_argument("--no-config", action="store_true", help="ignore [tool.kb] settings")
    p.add_argument(
        "--jobs",
        "-j",
        type=_jobs,
        metavar="N",
        help="processes reading files (default: KB_SCAN_JOBS, else the cores; 1: one process)",
    )
    p.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text")
    p.add_argument(
        "--emit-candidates",
        metavar="FILE",
        help="also write a draft candidate list (format v1) for what was found",
    )
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also say which calls are custom operators and what was not checked",
    )
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.set_defaults(
        func=run, path_args=("paths", "model_config", "config", "emit_candidates", "exclude")
    )


def run(args: argparse.Namespace) -> int:
    from kb.api.errors import UsageError
    from kb.api.scan import scanner as make_scanner
    from kb.catalog.compiled import StoreInvalid
    from kb.scan.engine import ScanError, ScanOptions
    from kb.text.escape import printable
    from kb.text.scan import render
    from kb.vocab import ambiguous_scheme_message, normalize

    product = None
    if args.product:
        product = normalize("product", args.product)
        if product is None:
            raise UsageError(f"unknown product {args.product!r} ('kb list --help' names them)")
    if args.torch_npu:
        from kb.core.releasenumber import release_text

        if release_text(args.torch_npu) is None:
            raise UsageError(f"--torch-npu {args.torch_npu[:40]!r} is not a release such as 2.7.1")
    quantization = None
    if args.quantization:
        quantization = normalize("quantization", args.quantization)
        if quantization is None:
            shared = ambiguous_scheme_message(args.quantization)
            raise UsageError(
                f"--quant {shared}"
                if shared
                else f"unknown quantization scheme {args.quantization[:40]!r}"
            )
    if args.verify and not (args.plan and args.model_config):
        raise UsageError("--verify proves the plan: give it with --plan and --model-config FILE")
    _check_excludes(args.exclude)
    if args.emit_candidates:
        from kb.core.paths import record_reads

        _check_emit_target(args.emit_candidates, args.paths)
        record_reads()  # the draft may replace no file the scan reads (checked before writing)
    parallel = normalize("parallel", args.parallel) if args.parallel else None
    if args.parallel and parallel is None:
        raise UsageError(f"--parallel {args.parallel[:40]!r}: one of {', '.join(PARALLEL_MODES)}")
    options = ScanOptions(
        product=product,
        torch_npu=args.torch_npu,
        graph_mode=args.graph_mode,
        quantization=quantization,
        parallel=parallel,
        model_config=args.model_config,
        select=args.select,
        ignore=args.ignore,
        exclude=args.exclude,
        custom_ops=args.custom_ops,
        use_config=not args.no_config,
        config=Path(args.config) if args.config else None,
        fusion=not args.no_fusion or bool(args.emit_candidates) or args.plan,
        # named model files: their modules are listed with the findings (a tree is not read
        # as a model unless the plan is asked for)
        inventory=args.plan
        or bool(args.emit_candidates)
        or args.format == "json"
        or (args.format == "text" and all(os.path.isfile(p) for p in args.paths)),
        jobs=args.jobs,
    )
    try:
        scanner = make_scanner(options=options)
        gc.disable()  # a scan leaves next to no cyclic garbage (a handful of objects over the
        try:  # 202 corpus files) and the collector's passes over its growing heap cost ~10 %
            report = scanner.scan(args.paths)
        finally:
            gc.enable()
    except ScanError as exc:
        raise UsageError(str(exc)) from None
    except StoreInvalid as exc:
        for problem in exc.problems[:10]:
            print(printable(str(problem)), file=sys.stderr)
        print(
            f"kb scan: the records do not validate ({len(exc.problems)} problem(s)); run "
            "'kb validate'",
            file=sys.stderr,
        )
        return 2
    if args.no_fusion:
        report.findings = [f for f in report.findings if not f.code.startswith("KB6")]
    if report.files == 0:  # nothing was scanned: say why, not "no findings in 0 files"
        for skipped in report.skipped:
            print(printable(f"kb scan: {skipped.path}: skipped: {skipped.reason}"), file=sys.stderr)
        print("kb scan: no Python files found", file=sys.stderr)
        if args.format != "text":  # a tool reading stdout still gets its (empty) document
            sys.stdout.write(render(report, args.format, color=False, verbose=args.verbose))
        return 2
    color = args.color == "always" or (
        args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    )
    verified = None
    if args.verify:
        from kb.port.planverify import verify_plan

        verified = verify_plan(
            report.plan,
            args.model_config,
            product=product,
            quantization=quantization,
            parallel=parallel,
        )
    if args.plan and args.format == "text":
        from kb.text.scan import plan_text

        sys.stdout.write(plan_text(report))
    else:
        sys.stdout.write(render(report, args.format, color=color, verbose=args.verbose))
    sys.stdout.flush()
    if args.format != "text":
        for skipped in report.skipped:
            print(printable(f"kb scan: {skipped.path}: skipped: {skipped.reason}"), file=sys.stderr)
    if args.emit_candidates:
        _emit(args, report, product)
    missing = [s.path for s in report.skipped if s.named]
    if missing:
        print(
            printable(f"kb scan: cannot scan {', '.join(missing)} (named on the command line)"),
            file=sys.stderr,
        )
        return 2
    if verified is not None:
        print(
            f"kb scan: verified on the CPU: {verified['passed']} stage(s) passed, "
            f"{verified['failed']} failed, {verified['not run']} not run",
            file=sys.stderr,
        )
    return 1 if report.count("error") or (verified and verified["failed"]) else 0


def _jobs(text: str) -> int:
    """``--jobs``: a whole number of processes, at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a number of processes (1 or more)")
    return n


def _check_excludes(patterns: list[str]) -> None:
    """Every ``--exclude`` compiles alone; a bad one is a usage error naming it."""
    from kb.api.errors import UsageError
    from kb.scan.globs import PatternError, compile_pattern

    for pattern in patterns:
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise UsageError(f"--exclude {pattern!r} is not a usable pattern: {exc}") from None


def _resolved(path: str) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return Path(os.path.abspath(path))


def _check_emit_target(target: str, paths: list[str]) -> None:
    """The draft may not overwrite what is scanned: a named file or a .py under a named
    directory; and it must be a regular file (or not exist yet)."""
    from kb.api.errors import UsageError

    out = _resolved(target)
    for raw in paths:
        scanned = _resolved(raw)
        same = out == scanned or (out.exists() and scanned.exists() and _same_file(out, scanned))
        inside = out.suffix == ".py" and scanned.is_dir() and out.is_relative_to(scanned)
        if same or inside:
            raise UsageError(
                f"--emit-candidates {target}: refusing to overwrite a scanned "
                f"file (it is {'under ' if inside else ''}{raw}); write the draft "
                "to a .yaml file"
            )
    if os.path.lexists(target) and not os.path.isfile(target):
        raise UsageError(f"--emit-candidates {target}: exists and is not a regular file")


def _check_not_read(target: str) -> None:
    """The draft replaces no file the scan read: a configuration, an ignore file, a C++
    source with registrations, a module the reader followed, however the target names it."""
    from kb.api.errors import UsageError
    from kb.core.paths import files_read

    try:
        st = os.stat(target)
    except (OSError, ValueError):
        return  # nothing there (or nothing statable): it was not read
    source = files_read().get((st.st_dev, st.st_ino))
    if source is not None:
        raise UsageError(
            f"--emit-candidates {target}: refusing to overwrite a file read by the scan "
            f"({source}); write the draft to a new .yaml file"
        )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _write_atomically(target: str, text: str) -> None:
    """Write ``text`` to a new file beside ``target``, then rename it over ``target``:
    never a half-written draft, and a FIFO swapped in is replaced, not opened."""
    import tempfile

    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".kb-emit-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _emit(args: argparse.Namespace, report: object, product: str | None) -> None:
    from kb.api.errors import UsageError
    from kb.scan.emit import document
    from kb.vocab import normalize

    target: dict[str, object] = {}
    cfg_product = product
    if cfg_product is None and report.config is not None:  # type: ignore[attr-defined]
        from kb.scan.config import load

        cfg_product = load(report.config).base.product  # type: ignore[attr-defined]
    if cfg_product is None:
        raise UsageError(
            "--emit-candidates needs a target product: pass --product (or set product in [tool.kb])"
        )
    target["product"] = cfg_product
    if args.torch_npu:
        target["torch_npu"] = args.torch_npu
    if args.graph_mode:
        target["graph_mode"] = args.graph_mode
    if args.quantization:
        target["quantization"] = normalize("quantization", args.quantization)
    model = os.path.basename(os.path.abspath(args.paths[0])) or "model"
    text = document(report, target, model)  # type: ignore[arg-type]
    _check_not_read(args.emit_candidates)
    try:
        _write_atomically(args.emit_candidates, text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.emit_candidates}: {exc.strerror or exc}") from None
    from kb.text.escape import printable

    print(printable(f"kb scan: wrote {args.emit_candidates}"), file=sys.stderr)
