"""scripts/setup.sh runs pip only when something changed (serve.sh starts fast).

The test runs the real script in a scratch copy whose ``.venv/bin/python`` is a stub
that records its arguments, so no network and no real install are involved.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "kb").mkdir()
    (tmp_path / "site_plugins").mkdir()
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    stub = bin_dir / "python"
    stub.write_text(
        f'#!/bin/sh\necho "$@" >> "{tmp_path}/pip-calls.log"\n'
        f'touch "{bin_dir}/kb"; chmod +x "{bin_dir}/kb"\n'
    )
    stub.chmod(0o755)
    return tmp_path


def setup(project: Path, extras: str) -> list[str]:
    """Run setup.sh; return the pip calls it made."""
    log = project / "pip-calls.log"
    before = log.read_text().splitlines() if log.exists() else []
    proc = subprocess.run(
        ["bash", "scripts/setup.sh", extras],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    after = log.read_text().splitlines() if log.exists() else []
    return after[len(before) :]


def test_pip_runs_only_when_something_changed(project: Path) -> None:
    first = setup(project, "site,test")
    assert len(first) == 1 and "-e .[site,test]" in first[0] and "--quiet --quiet" in first[0]
    assert setup(project, "site,test") == []  # nothing changed
    assert setup(project, "site") == []  # a subset of what is installed
    more = setup(project, "site,mcp")  # an extra that is not installed yet
    assert len(more) == 1 and "-e .[mcp,site,test]" in more[0]  # keeps what it had
    with (project / "pyproject.toml").open("a") as fh:
        fh.write("\n# changed\n")
    assert len(setup(project, "site")) == 1  # pyproject.toml changed
    (project / "kb_extra").mkdir()
    assert len(setup(project, "site")) == 1  # the package list changed
    (project / ".venv" / "bin" / "kb").unlink()
    assert len(setup(project, "site")) == 1  # the install is gone
