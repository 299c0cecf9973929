"""Running the real ``kb`` against hostile input, for the tests/test_faults_*.py suite.

Every attack runs the CLI in a fresh process (``python -m kb``) with its own cache and
record directories, and checks what a user would see: the exit code, one clear message,
never a traceback.  ``KB_FAULTS_CODE=/path/to/checkout`` points the processes at
another checkout of kb (e.g. an older main) to show that the attacks fail there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import operator_yaml

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("KB_FAULTS_CODE") or REPO)
CHECK_RECORDS = REPO / "tests" / "fixtures" / "check_records"
HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"
#: A weight-heavy prefetch point that passes every KB4xx rule, to vary one field at a time.
POINT = (
    "  - kind: prefetch\n    module: model.layers.0.mlp\n    phase: decode\n"
    "    target: down_proj\n    target_op: matmul\n"
    "    weight: {shape: [18432, 7168], dtype: bfloat16}\n"
    "    dependency: {name: swiglu output, op: swiglu}\n"
    "    max_size: 64MiB\n    switch: enable_prefetch\n    switch_default: false\n"
)


@dataclass
class Run:
    rc: int | None  # None: killed after the timeout (a hang)
    out: str
    err: str

    @property
    def clean(self) -> bool:
        """Ended by itself without a Python traceback."""
        return self.rc is not None and "Traceback" not in self.err


def env_for(tmp: Path, records: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env["PYTHONPATH"] = str(CODE)
    env["KB_CACHE_DIR"] = str(tmp / "cache")
    env["KB_RECORDS_DIR"] = str(records or CHECK_RECORDS)
    env.update(extra)
    return env


def kb(
    tmp: Path,
    *args: str,
    records: Path | None = None,
    stdin: bytes | None = None,
    timeout: float = 60,
    **extra: str,
) -> Run:
    """Run ``kb ARGS`` in ``tmp`` (its cwd) and return what it printed."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kb", *args],
            cwd=tmp,
            input=stdin,
            capture_output=True,
            env=env_for(tmp, records, **extra),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Run(None, "", "")
    return Run(
        proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    )


def shell(tmp: Path, command: str, records: Path | None = None, timeout: float = 60) -> Run:
    """Run a bash command line in which ``KB`` is the kb command (for redirections)."""
    line = f'KB="{sys.executable} -m kb"; {command}'
    try:
        proc = subprocess.run(
            ["bash", "-c", line],
            cwd=tmp,
            capture_output=True,
            env=env_for(tmp, records),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Run(None, "", "")
    return Run(
        proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    )


def tree(root: Path, files: dict[str, str]) -> Path:
    """A record tree under ``root`` holding ``files``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def one_operator(root: Path, text: str | None = None, name: str = "npu_test_op") -> Path:
    return tree(root, {f"operators/{name}.yaml": text or operator_yaml(name)})
