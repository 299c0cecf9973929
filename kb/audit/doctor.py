"""Compare the torch_npu installed here with what the knowledge base documents.

People run the torch_npu their CANN stack allows, not the newest, and an operator's
arguments differ between releases.  The installed package carries its own schemas
(``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml``), so this reads that
file and the package metadata as plain files: torch_npu is never imported, so
neither torch, an NPU nor CANN is needed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.catalog.releases import (
    SCHEMA_MEMBER,
    Match,
    is_public,
    normalize_schema,
    read_schemas,
    record_has,
    record_schema_in,
    schema_diff,
)
from kb.vocab import CALL_PREFIXES

_PACKAGE = "torch_npu"
_SCHEMA_IN_PACKAGE = SCHEMA_MEMBER.removeprefix(f"{_PACKAGE}/")
_VERSION_PY = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


class NotInstalled(Exception):
    """No usable torch_npu where we looked; the message says where that was."""


@dataclass(frozen=True)
class Install:
    """A torch_npu package found on disk."""

    package_dir: Path
    version: str | None
    metadata: Path | None  # the dist-info/egg-info directory the version came from

    @property
    def schema_file(self) -> Path:
        return self.package_dir / _SCHEMA_IN_PACKAGE


def _distribution_version(site: Path) -> tuple[str | None, Path | None]:
    """Version from the ``torch_npu-*.dist-info`` (or egg-info) next to the package.

    When stale metadata directories linger, the one whose RECORD lists the package
    wins, then the newest version.
    """
    from kb.catalog.releases import release_key

    found: list[tuple[bool, tuple[int, ...], str, Path]] = []
    for meta in [*site.glob(f"{_PACKAGE}-*.dist-info"), *site.glob(f"{_PACKAGE}-*.egg-info")]:
        for name in ("METADATA", "PKG-INFO"):
            try:
                text = (meta / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            m = re.search(r"^Version:\s*(\S{1,64})\s*$", text, re.M)  # longer: not a version
            if m:
                try:
                    record = (meta / "RECORD").read_text(encoding="utf-8", errors="replace")
                except OSError:
                    record = ""
                key = release_key(m.group(1).split("+", 1)[0]) or ()
                found.append((f"{_PACKAGE}/__init__.py" in record, key, m.group(1), meta))
                break
    if not found:
        return None, None
    _, _, version, meta = max(found, key=lambda f: (f[0], f[1], str(f[3])))
    return version, meta


def _package_version(package_dir: Path) -> str | None:
    """Fallback for source trees without metadata: ``torch_npu/version.py`` read as text."""
    try:
        m = _VERSION_PY.search((package_dir / "version.py").read_text(encoding="utf-8"))
    except OSError:
        return None
    return m.group(1) if m else None


def _install_at(package_dir: Path) -> Install:
    version, metadata = _distribution_version(package_dir.parent)
    if version is None:
        version = _package_version(package_dir)
    return Install(package_dir, version, metadata)


def find_install(path: Path | None = None, search_path: Iterable[str] | None = None) -> Install:
    """The torch_npu in ``path`` (a site-packages or the package itself), else on sys.path.

    Like ``import`` would, the first ``sys.path`` entry holding ``torch_npu/`` wins.
    Raises NotInstalled with the places looked at.
    """
    if path is not None:
        path = path.expanduser().resolve()
        for candidate in (path / _PACKAGE, path):
            if (candidate / _SCHEMA_IN_PACKAGE).is_file():
                return _install_at(candidate)
        if (path / _PACKAGE).is_dir() or path.name == _PACKAGE:
            pkg = path / _PACKAGE if (path / _PACKAGE).is_dir() else path
            raise NotInstalled(
                f"{pkg} has no {_SCHEMA_IN_PACKAGE}: not a torch_npu release "
                "package (or a damaged one)"
            )
        raise NotInstalled(
            f"no torch_npu package in {path} (give a site-packages directory "
            "or the torch_npu package directory)"
        )
    entries = list(sys.path if search_path is None else search_path)
    for entry in entries:
        pkg = Path(entry or ".") / _PACKAGE
        if pkg.is_dir():
            if not (pkg / _SCHEMA_IN_PACKAGE).is_file():
                raise NotInstalled(
                    f"{pkg} has no {_SCHEMA_IN_PACKAGE}: not a torch_npu release "
                    "package (or a damaged one)"
                )
            return _install_at(pkg.resolve())
    raise NotInstalled(
        f"no torch_npu in this Python environment ({sys.executable}); install "
        "it (pip install torch-npu==X --no-deps is enough) or pass --path "
        "SITE_PACKAGES"
    )


@dataclass
class Differs:
    operator: str
    documented: str  # the record's signature
    installed: str
    changes: list[str]  # installed → documented, as schema_diff phrases
    release_schema: bool | None  # the record's release history gives this schema for the release


@dataclass
class Missing:
    operator: str
    first: str | None
    in_release: bool | None  # the record's history says the release ships it


@dataclass
class Report:
    install: Install
    release: Match | None
    installed: dict[str, str]
    kb_operators: int = 0
    matching: list[str] = field(default_factory=list)
    differs: list[Differs] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    not_in_kb: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        """True when every KB operator is installed with the documented signature."""
        return not (self.differs or self.missing)

    def as_json(self) -> dict[str, Any]:
        return {
            "torch_npu": {
                "version": self.install.version,
                "release": self.release.release if self.release else None,
                "exact": self.release.exact if self.release else None,
                "package_dir": str(self.install.package_dir),
                "metadata": str(self.install.metadata) if self.install.metadata else None,
                "schema_file": str(self.install.schema_file),
            },
            "summary": {
                "installed_operators": len(self.installed),
                "kb_operators": self.kb_operators,
                "matching": len(self.matching),
                "differs": len(self.differs),
                "missing": len(self.missing),
                "not_in_kb": len(self.not_in_kb),
                "consistent": self.consistent,
            },
            "differs": [d.__dict__ for d in self.differs],
            "missing": [m.__dict__ for m in self.missing],
            "not_in_kb": self.not_in_kb,
        }


def _installed_name(rec: Mapping[str, Any], installed: Mapping[str, str]) -> str | None:
    names = [rec["name"]]
    for call in rec.get("calls") or []:
        for prefix in CALL_PREFIXES:
            if call.startswith(prefix):
                names.append(call[len(prefix) :])
    return next((n for n in names if n in installed), None)


def compare(install: Install, records: Iterable[Mapping[str, Any]], resolve: Any = None) -> Report:
    """Read the install's schemas and compare them with the operator records.

    ``resolve`` maps a spelling to a record name (the catalog's), so an installed
    operator known under an alias is not reported as missing from the KB.
    """
    try:
        text = install.schema_file.read_text(encoding="utf-8")
        installed = read_schemas(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise NotInstalled(f"cannot read {install.schema_file}: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError without importing yaml here
        raise NotInstalled(f"cannot parse {install.schema_file}: {exc}") from exc
    release = _match(install.version)
    report = Report(install, release, installed)
    described: set[str] = set()
    for rec in records:
        if rec.get("kind") != "operator":
            continue
        report.kb_operators += 1
        name = _installed_name(rec, installed)
        if name is None:
            has = record_has(rec, release.release) if release else None
            first = (rec.get("versions") or {}).get("first")
            report.missing.append(Missing(rec["name"], first, has))
            continue
        described.add(name)
        documented = rec.get("signature")
        schema = installed[name]
        if not documented or normalize_schema(documented) == schema:
            report.matching.append(rec["name"])
            continue
        expected = record_schema_in(rec, release.release) if release else None
        same = None if expected is None else normalize_schema(expected) == schema
        report.differs.append(
            Differs(
                rec["name"],
                normalize_schema(documented),
                schema,
                schema_diff(schema, documented),
                same,
            )
        )
    for name in sorted(installed):
        if "." in name or not is_public(name) or name in described:
            continue
        if resolve is not None and resolve(name) is not None:
            continue
        report.not_in_kb.append(name)
    return report


def _match(version: str | None) -> Match | None:
    """The harvested release of the installed version (``2.7.1+git…`` → ``2.7.1``)."""
    if not version:
        return None
    from kb.catalog.releases import load

    try:
        return load().match(version.split("+", 1)[0])
    except (OSError, ValueError):
        return None
