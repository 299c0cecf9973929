"""Harvest the torch_npu release matrix from the published wheels into kb/data/releases.json.

A maintainer step (never run by CI or the tests): every ``torch-npu`` release on the
package index ships ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`` with
the schemas of its operators and ``torch_npu/_op_plugin_docs.py`` with their
docstrings.  This script downloads one wheel per release (``pip download --no-deps``,
Linux x86_64, aarch64 when x86_64 has none), reads both files straight from the zip
(no install, no import of torch_npu, no NPU) and writes, for every operator, the
releases that have it and its schema in each: its distinct schema strings once, and
runs ``[first, last, schema index]`` over consecutive harvested releases.

Guarantees:
- deterministic: the output depends only on the wheels' contents (sorted keys,
  version order, no timestamps), so a rerun on the same wheels is byte-identical;
- all or nothing: if any release cannot be downloaded or read, the failures are
  reported, the script exits 1 and the previous data file is left untouched (the
  new file is written to a temporary file and renamed only after every release
  succeeded).  Wheels already downloaded stay in the cache, so a rerun is cheap;
- a release whose index entry has no Linux wheel at all is not a failure: it is
  recorded under ``no_wheel`` with the reason.

Usage::

    python scripts/harvest_releases.py                  # ask the index, download, write
    python scripts/harvest_releases.py --offline        # only the wheels in the cache
    python scripts/harvest_releases.py --versions 2.7.1 2.8.0 --out /tmp/r.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kb.catalog.releases import (
    DATA_FILE,
    DATA_FORMAT,
    DOCS_MEMBER,
    SCHEMA_MEMBER,
    SCHEMA_SECTION,
    read_documented,
    read_schemas,
    release_key,
    sort_releases,
)

PACKAGE = "torch-npu"
DEFAULT_CACHE = Path(
    os.environ.get("KB_WHEEL_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kb" / "wheels"
)
#: Platform tag sets tried in order; pip gets all tags of one set at once.
PLATFORMS = (
    ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"),
    ("manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"),
)
#: Python versions tried in order (old releases stop at 3.10, new ones start at 3.9).
PYTHONS = ("3.11", "3.10", "3.9", "3.8", "3.12", "3.13")
_NOT_FOUND = ("No matching distribution found", "Could not find a version that satisfies")
_UNREACHABLE = (
    "from versions: none",
    "Retrying (Retry(",
    "NewConnectionError",
    "Max retries exceeded",
    "Read timed out",
    "ConnectionError",
)


class DownloadError(Exception):
    """A release could not be fetched (network, disk, pip): the run must not write."""


class NoWheel(DownloadError):
    """The index lists the release but has no wheel for any platform we try."""


Downloader = Callable[[str, Path], Path]


@dataclass(frozen=True)
class ReleaseFacts:
    """What one wheel says: its operators' schemas and which of them are documented."""

    version: str
    wheel: str
    sha256: str
    schemas: dict[str, str]
    documented: frozenset[str]


def list_versions(pre: bool = False) -> list[str]:
    """Releases of torch-npu on the index (``pip index versions``), oldest first."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", PACKAGE]
    if pre:
        cmd.append("--pre")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise DownloadError(f"cannot list {PACKAGE} releases: {proc.stderr.strip()[-500:]}")
    return sort_releases(v.strip() for v in m.group(1).split(",") if v.strip())


def _wheel_rank(path: Path) -> tuple[int, str]:
    """Prefer x86_64 over aarch64, then the file name: a stable pick among cached wheels."""
    return (0 if "x86_64" in path.name else 1, path.name)


def cached_wheel(cache: Path, version: str) -> Path | None:
    found = sorted(cache.glob(f"torch_npu-{version}-*.whl"), key=_wheel_rank)
    return found[0] if found else None


def pip_download(version: str, cache: Path) -> Path:
    """Download one wheel of ``version`` into ``cache``; NoWheel when none exists."""
    cache.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for platforms in PLATFORMS:
        for py in PYTHONS:
            with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
                cmd = [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    f"{PACKAGE}=={version}",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--python-version",
                    py,
                    "-d",
                    tmp,
                    "--quiet",
                ]
                for plat in platforms:
                    cmd += ["--platform", plat]
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                got = sorted(Path(tmp).glob("torch_npu-*.whl"))
                if proc.returncode == 0 and got:
                    target = cache / got[0].name
                    os.replace(got[0], target)  # same file system: the cache
                    return target
                errors.append(proc.stderr)
    if all(
        any(s in e for s in _NOT_FOUND) and not any(s in e for s in _UNREACHABLE) for e in errors
    ):
        raise NoWheel(f"no Linux x86_64 or aarch64 wheel for Python {', '.join(PYTHONS)}")
    tail = next((e for e in reversed(errors) if not any(s in e for s in _NOT_FOUND)), errors[-1])
    raise DownloadError(tail.strip()[-500:] or "pip download failed")


def read_wheel(path: Path, version: str) -> ReleaseFacts:
    """Schemas and documented names straight from the archive (nothing is executed)."""
    try:
        with zipfile.ZipFile(path) as zf:
            schemas = read_schemas(zf.read(SCHEMA_MEMBER).decode("utf-8"))
            try:
                docs = read_documented(zf.read(DOCS_MEMBER).decode("utf-8"))
            except KeyError:
                docs = set()
    except (OSError, KeyError, zipfile.BadZipFile, ValueError, UnicodeDecodeError) as exc:
        raise DownloadError(f"cannot read {path.name}: {exc}") from exc
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return ReleaseFacts(version, path.name, digest, schemas, frozenset(docs & set(schemas)))


def _runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in indices:
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def build_data(facts: list[ReleaseFacts], no_wheel: dict[str, str]) -> dict[str, object]:
    """The data file's content: releases in version order, operators run-length encoded.

    Per operator: ``schemas``, its distinct schema strings in order of first release,
    and ``runs``, ``[first, last, i]`` = schemas[i] in the consecutive harvested
    releases first..last.  A release without the operator ends a run.
    """
    facts = sorted(facts, key=lambda f: release_key(f.version) or ())
    releases = [f.version for f in facts]
    operators: dict[str, dict[str, object]] = {}
    for name in sorted({n for f in facts for n in f.schemas}):
        schemas: list[str] = []
        runs: list[list[object]] = []
        prev = -2
        for i, f in enumerate(facts):
            schema = f.schemas.get(name)
            if schema is None:
                continue
            if schema not in schemas:
                schemas.append(schema)
            k = schemas.index(schema)
            if runs and prev == i - 1 and runs[-1][2] == k:
                runs[-1][1] = releases[i]
            else:
                runs.append([releases[i], releases[i], k])
            prev = i
        entry: dict[str, object] = {"schemas": list(schemas), "runs": runs}
        documented = [i for i, f in enumerate(facts) if name in f.documented]
        if documented:
            entry["documented"] = [[releases[a], releases[b]] for a, b in _runs(documented)]
        operators[name] = entry
    return {
        "format": DATA_FORMAT,
        "package": PACKAGE,
        "generated_by": "scripts/harvest_releases.py",
        "source": {
            "schemas": f"{SCHEMA_MEMBER} (section {SCHEMA_SECTION!r}, .out overloads left out)",
            "docs": DOCS_MEMBER,
        },
        "releases": releases,
        "wheels": {f.version: {"file": f.wheel, "sha256": f.sha256} for f in facts},
        "no_wheel": dict(sorted(no_wheel.items(), key=lambda kv: release_key(kv[0]) or ())),
        "operators": operators,
    }


def _format(value: object, indent: str = "") -> str:
    """JSON, one item per line unless the item fits on a short line (readable diffs)."""
    flat = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(indent) + len(flat) <= 100 or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = indent + " "
    if isinstance(value, dict):
        items = [
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_format(value[k], inner)}"
            for k in sorted(value)
        ]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    items = [inner + _format(v, inner) for v in value]
    return "[\n" + ",\n".join(items) + f"\n{indent}]"


def dump(data: dict[str, object]) -> str:
    return _format(data) + "\n"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a committed file is not
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def harvest(
    versions: list[str],
    cache: Path,
    out: Path,
    download: Downloader | None = pip_download,
    log: Callable[[str], None] = print,
) -> int:
    """Fetch (or reuse) one wheel per version and write ``out``; 1 and no write on failure.

    ``download`` None means offline: a version without a cached wheel is a failure.
    """
    facts: list[ReleaseFacts] = []
    no_wheel: dict[str, str] = {}
    failures: dict[str, str] = {}
    for version in sort_releases(versions):
        wheel = cached_wheel(cache, version)
        try:
            if wheel is None:
                if download is None:
                    raise DownloadError("not in the cache (offline)")
                log(f"{version}: downloading")
                wheel = download(version, cache)
            facts.append(read_wheel(wheel, version))
            log(f"{version}: {wheel.name}: {len(facts[-1].schemas)} operators")
        except NoWheel as exc:
            no_wheel[version] = str(exc)
            log(f"{version}: no wheel: {exc}")
        except DownloadError as exc:
            failures[version] = str(exc)
            log(f"{version}: FAILED: {exc}")
    if failures:
        log(
            f"{len(failures)} release(s) failed ({', '.join(failures)}); "
            f"{out} left untouched. Rerun to retry: cached wheels are reused."
        )
        return 1
    if not facts:
        log(f"no release could be read; {out} left untouched")
        return 1
    text = dump(build_data(facts, no_wheel))
    write_atomic(out, text)
    log(
        f"wrote {out}: {len(facts)} releases ({facts[0].version} .. "
        f"{max(facts, key=lambda f: release_key(f.version) or ()).version}), "
        f"{len(text) // 1024} KiB"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"wheel cache outside the repository (default {DEFAULT_CACHE})",
    )
    parser.add_argument("--out", type=Path, default=DATA_FILE, help="data file to write")
    parser.add_argument(
        "--versions",
        nargs="+",
        metavar="V",
        help="these releases instead of every release on the index",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="no network: the releases are the wheels already cached",
    )
    parser.add_argument("--pre", action="store_true", help="include pre-releases (rc)")
    args = parser.parse_args(argv)
    cache: Path = args.cache.expanduser()
    if args.versions:
        versions = args.versions
    elif args.offline:
        names = (p.name.split("-")[1] for p in cache.glob("torch_npu-*.whl"))
        versions = sorted({v for v in names if args.pre or "rc" not in v})
    else:
        try:
            versions = list_versions(pre=args.pre)
        except DownloadError as exc:
            print(exc, file=sys.stderr)
            return 1
    try:
        versions = sort_releases(versions)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return harvest(versions, cache, args.out, None if args.offline else pip_download)


if __name__ == "__main__":
    sys.exit(main())
