"""Every command of the README's short tour works on a fresh clone, as written.

The tour runs in a copy of the tracked files (what a clone has), with the ``kb`` of
this environment on PATH.  A command exits 0 unless its comment says ``(exit N)`` or
``(exit N or M)``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parent.parent
_EXIT = re.compile(r"\(exit (\d(?: or \d)*)\)")


def tour() -> list[tuple[str, set[int]]]:
    """(command, allowed exit codes) for each ``kb`` line of the tour block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## A short tour", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        if not line.startswith("kb "):
            continue
        command, _, comment = line.partition("  #")
        m = _EXIT.search(comment)
        codes = {int(c) for c in m.group(1).split(" or ")} if m else {0}
        out.append((command.strip(), codes))
    return out


def test_the_tour_is_there() -> None:
    verbs = {shlex.split(c)[1] for c, _ in tour()}
    assert {"search", "show", "check", "tree", "advise", "mcp", "doctor"} <= verbs


def test_the_tour_writes_only_beside_itself() -> None:
    """No fixed path outside the checkout (a shared /tmp/plan.yaml collides between users
    and runs): what the tour writes lands in the directory it runs in."""
    absolute = [a for c, _ in tour() for a in shlex.split(c) if a.startswith(("/", "~"))]
    assert absolute == []


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files only, as a fresh clone would have them."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know the tracked files")
    listed = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    dest = tmp_path_factory.mktemp("clone")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.parametrize("command,codes", tour(), ids=[c for c, _ in tour()])
def test_tour_command(command: str, codes: set[int], clone: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(
        shlex.split(command),
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert proc.returncode in codes, f"{command} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip() or proc.stderr.strip(), f"{command} printed nothing"
