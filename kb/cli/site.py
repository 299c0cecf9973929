"""``kb site build`` / ``kb site serve``: the documentation site from the records.

A build goes to a fresh directory next to the target and replaces the target only
when it succeeded, so a failed (or interrupted) build never leaves a half-built site.
MkDocs and its theme are an optional extra; without them the command says how to
install them instead of failing with an import error.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib.util
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from kb.api.errors import UsageError

#: Import name → distribution, for the "not installed" message.
SITE_PACKAGES = {
    "mkdocs": "mkdocs",
    "material": "mkdocs-material",
    "pymdownx": "pymdown-extensions",
    "jieba": "jieba",
    "nh3": "nh3",
    "minify_html": "minify-html",
}
INSTALL_HINT = "pip install '.[site]'"
#: Size budgets of a built site (issue 13): the whole site and the median operator
#: page's HTML.  Tests hold the real build to them; build time is the benchmark's
#: business (scripts/benchmark.py), never the build's own message to the user.
BUDGET_SITE_MB = 25.0
BUDGET_OPERATOR_PAGE_KB = 60.0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "site",
        help="build or serve the documentation site",
        description="Build the documentation site (MkDocs Material) from the records, or "
        "serve it with live reload. Needs the site extra: " + INSTALL_HINT + ".",
    )
    actions = p.add_subparsers(dest="site_action", metavar="ACTION")

    build = actions.add_parser(
        "build",
        help="build the site into a directory (default: site/)",
        description="Build the site with strict checks (broken links, anchors and warnings "
        "fail the build). The previous site is replaced only after a successful build.",
    )
    _common(build)
    build.add_argument(
        "--site-dir", type=Path, help="output directory (default: mkdocs.yml's site_dir)"
    )
    build.add_argument("--no-strict", action="store_true", help="report warnings without failing")
    build.add_argument("-q", "--quiet", action="store_true", help="print only warnings and errors")
    build.set_defaults(func=run_build)

    serve = actions.add_parser(
        "serve",
        help="serve the site locally and rebuild on changes",
        description="Serve the site with live reload; edits to docs/ or to the records "
        "rebuild it. Stop with Ctrl-C.",
    )
    _common(serve)
    serve.add_argument(
        "--dev-addr",
        default="127.0.0.1:8000",
        metavar="HOST:PORT",
        help="address to serve on (default: %(default)s)",
    )
    serve.set_defaults(func=run_serve)

    def no_action(args: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return 2

    p.set_defaults(func=no_action)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--records", type=Path, help="records directory (default: the shipped ones)")
    p.add_argument(
        "-f",
        "--config-file",
        type=Path,
        help="mkdocs.yml to use (default: ./mkdocs.yml, else the repository's)",
    )


def missing_packages() -> list[str]:
    return [dist for mod, dist in SITE_PACKAGES.items() if importlib.util.find_spec(mod) is None]


def _prepare(args: argparse.Namespace) -> Path:
    """Check the environment and return mkdocs.yml; raise UsageError when unusable."""
    missing = missing_packages()
    if missing:
        raise UsageError(
            f"the site needs {', '.join(missing)}, which is not installed: {INSTALL_HINT}"
        )
    config = _config_file(args.config_file)
    if args.records is not None and not args.records.is_dir():
        raise UsageError(f"records directory {args.records} does not exist")
    # Material prints a banner about its own future on import; not actionable here.
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    return config


def _config_file(given: Path | None) -> Path:
    if given is not None:
        if not given.is_file():
            raise UsageError(f"{given} does not exist")
        return given.resolve()
    from kb.core.paths import PACKAGE_DIR

    for candidate in (Path.cwd() / "mkdocs.yml", PACKAGE_DIR.parent / "mkdocs.yml"):
        if candidate.is_file():
            return candidate.resolve()
    raise UsageError("no mkdocs.yml here: run from the repository root or pass --config-file")


class _MkDocsLog:
    """Show MkDocs' log on stderr while it runs (its CLI would set this up)."""

    def __init__(self, level: int) -> None:
        self.handler = logging.StreamHandler(sys.stderr)
        self.handler.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
        self.logger = logging.getLogger("mkdocs")
        self.level = level

    def __enter__(self) -> None:
        self.saved = self.logger.level
        self.logger.addHandler(self.handler)
        self.logger.setLevel(self.level)

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.saved)


def _check_target(target: Path, config_file: Path, docs_dir: Path) -> None:
    """Refuse to replace a directory that is not a previous build."""
    if target in (
        config_file.parent,
        docs_dir,
        Path.home(),
        Path(target.anchor),
    ) or docs_dir.is_relative_to(target):
        raise UsageError(f"refusing to build into {target}: it holds the sources")
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise UsageError(
            f"refusing to replace {target}: it does not look like a built site "
            f"(no {MARKER} file, which kb site build writes); remove it yourself "
            "or choose another --site-dir"
        )


#: Written into every site kb builds: only a directory holding it is ever replaced.
MARKER = ".kb-site"
_STAGES = ("building", "old")


def _stage_prefix(target: Path, stage: str) -> str:
    """Staging names carry the builder's pid, so a later build can tell a dead one's."""
    return f".{target.name}.{stage}-{os.getpid()}-"


def _sweep_stale(target: Path) -> None:
    """Remove staging dirs of builds that died (``kill -9``) beside ``target``.

    A pid-tagged one goes when its process no longer exists; an untagged one (older
    kb) when it is over an hour old.  Live builds' dirs are left alone.
    """
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        for stage in _STAGES:
            head = f".{target.name}.{stage}-"
            if (
                entry.name.startswith(head)
                and _is_stale(entry.name[len(head) :], entry)
                and entry.is_dir()
                and not entry.is_symlink()
            ):
                shutil.rmtree(entry, ignore_errors=True)


def _is_stale(tail: str, entry: Path) -> bool:
    pid, sep, _rest = tail.partition("-")
    if sep and pid.isdigit():
        return not _alive(int(pid))
    try:
        return time.time() - entry.lstat().st_mtime > 3600
    except OSError:
        return False


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's live process (or an absurd number: not ours)
    except OSError:
        return True
    return True


class _TermAsInterrupt:
    """SIGTERM during a build raises KeyboardInterrupt, so the staging dir is removed
    and kb exits as it does on Ctrl-C (not killed mid-write with the staging left)."""

    def __enter__(self) -> None:
        import signal
        import threading

        self.saved: Any = None
        if threading.current_thread() is threading.main_thread():
            self.saved = signal.signal(signal.SIGTERM, _raise_interrupt)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.saved is not None:
            signal.signal(signal.SIGTERM, self.saved)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _swap(built: Path, target: Path) -> None:
    """Put the new build in place of the old one (two renames on one file system)."""
    old = None
    (built / MARKER).write_text(
        "built by kb site build; kb replaces this directory only when this file is here\n",
        encoding="utf-8",
    )
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=_stage_prefix(target, "old"), dir=target.parent))
        old.rmdir()
        target.rename(old)
    try:
        built.rename(target)
    except OSError:
        if old is not None:
            old.rename(target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class SiteFigures(NamedTuple):
    """What a built site weighs: the numbers the budgets are about."""

    pages: int
    total_mb: float
    operator_page_kb: float  # median HTML of the operator pages (0 without any)


def measure(site: Path) -> SiteFigures:
    files = [p for p in site.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    pages = sum(1 for p in files if p.suffix == ".html")
    ops = [p.stat().st_size for p in (site / "operators").glob("*/index.html")]
    median = statistics.median(ops) / 1000 if ops else 0.0
    return SiteFigures(pages, total / 1e6, median)


def report(site: Path, seconds: float) -> str:
    """The build-log line with the site's figures."""
    fig = measure(site)
    return (
        f"site built in {site} in {seconds:.1f} s: {fig.pages} pages, {fig.total_mb:.1f} MB, "
        f"median operator page {fig.operator_page_kb:.0f} KB"
    )


def run_build(args: argparse.Namespace) -> int:
    config_file = _prepare(args)
    started = time.perf_counter()
    # What a build leaves is garbage once the process ends: its last collections need
    # not walk it (they took a few tenths of a second after every build, a one-record
    # rebuild included).  Objects are still freed; only the search for cycles stops.
    atexit.register(gc.freeze)
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    with _MkDocsLog(logging.WARNING if args.quiet else logging.INFO):
        try:
            config = load_config(str(config_file), strict=not args.no_strict)
        except MkDocsException as exc:
            print(f"kb site: {exc}", file=sys.stderr)
            return 1
        if args.records is not None:
            _records_option(config, args.records)
        target = args.site_dir.resolve() if args.site_dir else Path(config.site_dir).resolve()
        _check_target(target, config_file, Path(config.docs_dir).resolve())
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _sweep_stale(target)
            staging = Path(
                tempfile.mkdtemp(prefix=_stage_prefix(target, "building"), dir=target.parent)
            )
        except OSError as exc:
            raise UsageError(
                f"cannot build into {target}: cannot write in {target.parent}: "
                f"{exc.strerror or exc}"
            ) from None
        config.site_dir = str(staging)
        try:
            with _TermAsInterrupt():
                config.plugins.on_startup(command="build", dirty=False)
                try:
                    build(config)
                finally:
                    config.plugins.on_shutdown()
                try:
                    _swap(staging, target)
                except OSError as exc:
                    raise UsageError(
                        f"cannot replace {target}: {exc.strerror or exc}; it was left as it was"
                    ) from None
        except MkDocsException as exc:
            print(f"kb site: build failed: {exc}; {target} was left as it was", file=sys.stderr)
            return 1
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    if not args.quiet:
        print(report(target, time.perf_counter() - started))
    return 0


def _records_option(config: Any, records: Path) -> None:
    """Point the kb-records plugin of a loaded config at another record tree."""
    plugin = config.plugins.get("kb-records")
    if plugin is None:
        raise UsageError("--records needs the kb-records plugin in mkdocs.yml")
    plugin.config.records = str(records.resolve())


def run_serve(args: argparse.Namespace) -> int:
    config_file = _prepare(args)
    if args.records is not None:
        # serve loads the config itself (and again on every rebuild): tell the plugin
        # through the environment of this process, which exists only to serve.
        os.environ["KB_RECORDS_DIR"] = str(args.records.resolve())
    if not os.environ.get("KB_SITE_URL"):
        # site_url must be the address served: Material's instant navigation follows only
        # links of the sitemap's origin, and canonical URLs would point at another port
        host = args.dev_addr if "://" in args.dev_addr else f"http://{args.dev_addr}"
        os.environ["KB_SITE_URL"] = host.rstrip("/") + "/"
    from mkdocs.commands.serve import serve
    from mkdocs.exceptions import MkDocsException

    options: dict[str, Any] = {"dev_addr": args.dev_addr}
    with _MkDocsLog(logging.INFO):
        try:
            serve(config_file=str(config_file), livereload=True, **options)
        except MkDocsException as exc:
            print(f"kb site: {exc}", file=sys.stderr)
            return 1
    return 0
