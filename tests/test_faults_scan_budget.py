"""Issue 24, class D (the scanner's part): analysis cost bounded by the input's size.

A generated ``**kwargs`` dict of 20,000 keys -- a literal, ``kw[k] = v`` stores or one
``update`` -- costs a bounded amount per key (past ``MAX_KEYS`` it is UNKNOWN: open,
never judged), and a scan holds one file's AST at a time, not every file's.  A parser
that runs out of memory gives a reason, not an empty "cannot parse:".
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import ScanOptions, scanner
from kb.scan.values import DictV

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("KB_FAULTS_CODE") or REPO)
KEYS = 20_000
#: Dict entries copied per key tracked, at most (a quadratic tracker copies ~KEYS / 2).
COPIES_PER_KEY = 20


@pytest.fixture(scope="module")
def sc() -> Any:
    return scanner(None, ScanOptions(use_config=False))


def _module(body: str) -> str:
    return (
        "import torch_npu\n\n\ndef f(x, g):\n"
        + textwrap.indent(body, "    ")
        + "    return torch_npu.npu_rms_norm(x, g, **kw)\n"
    )


def _counted(monkeypatch: pytest.MonkeyPatch, budget: int) -> list[int]:
    """Count the dict entries ``DictV.set`` copies; stop the scan once past ``budget``."""
    copied = [0]
    real = DictV.set

    def counting_set(self: DictV, key: str, entry: Any) -> DictV:
        copied[0] += len(self.entries)
        if copied[0] > budget:
            raise AssertionError(f"dict tracking copied over {budget} entries: not linear")
        return real(self, key, entry)

    monkeypatch.setattr(DictV, "set", counting_set)
    return copied


BIG_DICTS = {
    "literal": "kw = {" + ", ".join(f'"k{i}": {i}' for i in range(KEYS)) + "}\n",
    "literal, one key a line": "kw = {\n"
    + "".join(f'    "k{i}": {i},\n' for i in range(KEYS))
    + "}\n",
    "item stores": "kw = {}\n" + "".join(f'kw["k{i}"] = {i}\n' for i in range(KEYS)),
    "update": "kw = {}\nkw.update(" + ", ".join(f"k{i}={i}" for i in range(KEYS)) + ")\n",
    # half the keys: each statement is a call the scan walks, the slowest of these to read
    "update in pieces": "kw = {}\n"
    + "".join(f'kw.update({{"k{i}": {i}}})\n' for i in range(KEYS // 2)),
}


@pytest.mark.parametrize("body", BIG_DICTS.values(), ids=BIG_DICTS.keys())
def test_a_20000_key_kwargs_dict_is_traced_in_linear_time(
    sc: Any, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _module(body)
    copied = _counted(monkeypatch, COPIES_PER_KEY * KEYS)
    report = sc.scan_text(text, "big_kwargs.py")
    # linear by count, not by clock (timings belong to the benchmark): the dict is copied
    # a bounded number of times per key, where a quadratic trace copies it per statement
    assert copied[0] <= COPIES_PER_KEY * KEYS
    # past the key budget the dict is open: its keys are not judged, and nothing fails
    assert [s.record for s in report.sites] == ["npu_rms_norm"]
    assert not [f for f in report.findings if f.severity == "error"], report.findings[:3]


def test_a_small_kwargs_dict_binds_as_before(sc: Any) -> None:
    body = 'kw = {"epsilom": 1e-6}\nkw["eps"] = 2\nkw.update(epsilon=1e-5)\n'
    report = sc.scan_text(_module(body), "m.py")
    assert [(f.line, f.code, f.message) for f in report.findings] == [
        (5, "KB104", "npu_rms_norm has no parameter 'epsilom' (did you mean epsilon?)"),
        (6, "KB104", "npu_rms_norm has no parameter 'eps' (did you mean epsilon?)"),
    ]
    assert report.sites[0].args == {"epsilom": 1e-06, "eps": 2, "epsilon": 1e-05}


# -- one AST at a time ----------------------------------------------------------------------

FILES = 6
_MEASURE = """
import ast, sys, tracemalloc
from pathlib import Path
from kb.api.scan import ScanOptions, scanner
files = sorted(Path(sys.argv[1]).glob("*.py"))
sc = scanner(None, ScanOptions(use_config=False))
sc.scan([str(files[0])])  # catalog opened and memos warm: only the scan is measured
tracemalloc.start()
report = sc.scan([str(p) for p in files])
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
tracemalloc.start()
tree = ast.parse(files[0].read_text())
print(len(report.sites), peak, tracemalloc.get_traced_memory()[0])
"""


def test_a_scan_holds_one_files_ast_at_a_time(tmp_path: Path) -> None:
    for k in range(FILES):
        rows = "".join(
            f"T{r} = [" + ", ".join(str(j % 10) for j in range(200)) + "]\n" for r in range(40)
        )
        (tmp_path / f"m{k}.py").write_text(_module('kw = {"epsilon": 1e-6}\n') + rows)
    env = {**os.environ, "PYTHONPATH": str(CODE)}
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    sites, peak, tree_bytes = (int(x) for x in run.stdout.split())
    assert sites == FILES
    # keeping every tree peaks above FILES trees (about 7.5 here); one at a time, below 3
    # (a tree, the parser's transient copy of it, the file's text and lines)
    assert peak < 4 * tree_bytes, f"peak {peak / tree_bytes:.1f} trees of one file"


def test_out_of_memory_while_parsing_says_so(sc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(*_a: object, **_k: object) -> ast.Module:
        raise MemoryError()

    monkeypatch.setattr(ast, "parse", no_memory)
    report = sc.scan_text("import torch_npu\n", "m.py")
    assert [(f.code, f.message) for f in report.findings] == [
        ("KB500", "cannot parse: out of memory while parsing")
    ]
