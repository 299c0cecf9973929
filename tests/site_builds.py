"""Site builds shared by every site test: the real site and the fixture site, once each.

A strict build of the real records takes seconds; building it once per test session
(not once per module) keeps CI fast.  Build time is measured by scripts/benchmark.py,
never by a timed test.  The fixture site is built in a child process with a private,
empty TMPDIR and cache dir, so the tests can see what a build writes outside the site
(nothing into TMPDIR).  Under pytest-xdist each site is still built once per run: the
first worker that needs it builds it under a file lock in the run's shared temp dir, and
the others wait for it and read the same files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from kb.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "site_records"


def fixture_config(tmp: Path) -> Path:
    """mkdocs.yml of the repository, but with a docs dir that links to no real record."""
    docs = tmp / "docs"
    shutil.copytree(ROOT / "docs" / "assets", docs / "assets")
    (docs / "index.md").write_text("# Fixture site\n\nSee `npu_fixture_norm`.\n", encoding="utf-8")
    (docs / "cli.md").write_text("# CLI\n\n<!-- kb:cli-reference -->\n", encoding="utf-8")
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "\ndocs_dir: docs\n" in text
    config = tmp / "mkdocs.yml"
    config.write_text(text.replace("\ndocs_dir: docs\n", f"\ndocs_dir: {docs}\n"), encoding="utf-8")
    return config


def build(*argv: str) -> int:
    return main(["site", "build", "-q", *argv])


def free_port() -> int:
    """A port free now, for a site built for that address and served there later.

    Material's instant navigation follows only links whose origin matches the
    sitemap's, so the browser test serves each site at the ``site_url`` it was built for.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Built = TypeVar("Built")


def once_per_run(
    factory: pytest.TempPathFactory, name: str, kind: type[Built], make: Callable[[Path], Built]
) -> Built:
    """``make(dir)`` once per test run, in a fresh ``dir``: once per session without xdist,
    once for all workers with it (``kind``'s fields are paths and ints)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return make(factory.mktemp(name))
    from filelock import FileLock

    shared = factory.getbasetemp().parent  # pytest-N/, above every worker's popen-gwK/
    done = shared / f"{name}.json"
    with FileLock(str(shared / f"{name}.lock")):
        if done.exists():
            saved = json.loads(done.read_text(encoding="utf-8"))
            return kind(**{k: Path(v) if isinstance(v, str) else v for k, v in saved.items()})
        built = make(factory.mktemp(name))
        fields = dataclasses.asdict(built)  # type: ignore[call-overload]
        text = json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in fields.items()})
        done.write_text(text, encoding="utf-8")
        return built


@dataclass
class RealSite:
    path: Path
    port: int  # the site was built for http://127.0.0.1:PORT/


@dataclass
class FixtureSite:
    path: Path
    tmpdir: Path  # the TMPDIR the build ran with (empty before)
    cache: Path  # the KB_CACHE_DIR the build ran with
    port: int


def build_real_site(tmp: Path) -> RealSite:
    site = tmp / "site"
    port = free_port()
    saved = os.environ.get("KB_SITE_URL")
    os.environ["KB_SITE_URL"] = f"http://127.0.0.1:{port}/"
    try:
        assert build("--site-dir", str(site)) == 0
    finally:
        if saved is None:
            os.environ.pop("KB_SITE_URL", None)
        else:
            os.environ["KB_SITE_URL"] = saved
    return RealSite(site, port)


@pytest.fixture(scope="session")
def real_site(tmp_path_factory: pytest.TempPathFactory) -> RealSite:
    return once_per_run(tmp_path_factory, "real", RealSite, build_real_site)


def build_fixture_site(tmp: Path) -> FixtureSite:
    site, tmpdir, cache = tmp / "site", tmp / "tmpdir", tmp / "cache"
    tmpdir.mkdir()
    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmpdir), "KB_CACHE_DIR": str(cache)}
    env["KB_SITE_URL"] = f"http://127.0.0.1:{port}/"
    env.pop("KB_RECORDS_DIR", None)
    cmd = [sys.executable, "-m", "kb", "site", "build", "-q", "-f", str(fixture_config(tmp))]
    cmd += ["--records", str(FIXTURES), "--site-dir", str(site)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return FixtureSite(site, tmpdir, cache, port)


@pytest.fixture(scope="session")
def fixture_site(tmp_path_factory: pytest.TempPathFactory) -> FixtureSite:
    return once_per_run(tmp_path_factory, "fixture", FixtureSite, build_fixture_site)
