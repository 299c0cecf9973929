"""Under ``--format json`` every verb prints a JSON document on stdout, whatever the exit
code (issue 21): a name nothing has (exit 1) and bad input (exit 2) give
``{"error": ..., "exit": ...}``; verbs with a document of their own keep it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

CASES = [
    (("show", "npu_no_such_op"), 1, "error"),
    (("rules", "KB999"), 1, "error"),
    (("tree", "no-such-tree"), 1, "error"),
    (("advise", "no-such-tree"), 1, "error"),
    (("list", "--category", "no-such-category"), 2, "error"),
    (("prefetch-size", "--shape", "7168x", "--dtype", "bf16"), 2, "error"),
    (("scan", "/nonexistent/dir"), 2, "summary"),
    (("check", "/nonexistent/list.yaml"), 2, "summary"),
    (("search", "zzzzqqqxxx"), 1, "results"),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the first case compiles the records (and ``search`` builds
    the index) cold, the others reuse them; what is tested is the shape of stdout."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize(("args", "rc", "key"), CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_json_output_is_never_empty(
    tmp_path: Path, cache: Path, args: tuple[str, ...], rc: int, key: str
) -> None:
    env = {
        "PYTHONPATH": str(REPO),
        "KB_CACHE_DIR": str(cache),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "kb", *args, "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == rc, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert key in doc, doc
    if key == "error":
        assert doc["error"] and doc.get("exit", rc) == rc
        assert doc["error"] in proc.stderr or doc["error"][:40] in proc.stderr  # the same words
