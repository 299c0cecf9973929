"""Reading files on several processes (kb.scan.pool) changes nothing but the time taken.

The forking runs in fresh interpreters (``python -c``): a pytest process may have threads
left by other tests, and forking a threaded process is what the pool itself refuses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kb.scan import pool

REPO = Path(__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")

#: A small tree with what a scan carries across files and what it reports per file: a
#: call with a misspelt keyword, written-out RMSNorm and RoPE, a decoder module for the
#: inventory and plan, an operator registered in one file and called in another, an
#: ignore comment (one well-formed, one not), a syntax error and a non-UTF-8 file.
TREE = {
    "pkg/norms.py": """
        import torch
        import torch_npu


        def rms_norm(x, weight, eps=1e-6):
            variance = x.pow(2).mean(-1, keepdim=True)
            return weight * (x * torch.rsqrt(variance + eps))


        def fused(x, weight):
            return torch_npu.npu_rms_norm(x, weight, epsilon=1e-6, epsilonn=2)  # kb: ignore[KB999]
        """,
    "pkg/layer.py": """
        import torch
        from torch import nn
        import torch_npu


        def swap_halves(t):
            left, right = torch.chunk(t, 2, -1)
            return torch.cat([right.neg(), left], -1)


        class SelfAttn(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                width = cfg.dim
                self.wq = nn.Linear(width, width, bias=False)
                self.wk = nn.Linear(width, width, bias=False)
                self.wv = nn.Linear(width, width, bias=False)
                self.wo = nn.Linear(width, width, bias=False)

            def forward(self, h, cos, sin):
                q = self.wq(h) * cos + swap_halves(self.wq(h)) * sin
                k = self.wk(h) * cos + swap_halves(self.wk(h)) * sin
                probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)
                return self.wo(torch.matmul(probs, self.wv(h)))


        def decode(q, k, v, n):
            return torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=n, input_layout="BNSD")
        """,
    "pkg/ops/register.py": """
        import torch

        lib = torch.library.Library("myops", "DEF")
        lib.define("scale(Tensor x, float f) -> Tensor")
        """,
    "pkg/ops/use.py": """
        import torch


        def f(x):
            return torch.ops.myops.scale(x, 2.0)  # kb: ignore KB101
        """,
    "pkg/broken.py": "def f(:\n    pass\n",
}


def _tree(root: Path) -> Path:
    for name, text in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    (root / "pkg" / "latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")
    return root / "pkg"


_RUN = """
import sys
from kb.scan import pool
pool.MIN_BYTES = 0  # the fixture is small: use the pool anyway when asked
chosen = []
real = pool.run_ordered
def spy(work, sizes, processes):
    chosen.append(processes)
    return real(work, sizes, processes)
pool.run_ordered = spy
from kb.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
print("PROCESSES", chosen, file=sys.stderr)
raise SystemExit(rc)
"""


def _kb(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("KB_SCAN_JOBS", None)
    return subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_parallel_scan_is_byte_identical_to_serial(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    emit = ["--product", "atlas-a3", "--emit-candidates"]
    for extra in (
        ["--format", "json"],
        ["--format", "sarif"],
        ["--format", "github"],
        [],
        ["--plan", "--product", "atlas-a3"],
        ["--format", "json", "-v", *emit],
        [*emit],
    ):
        outs = {}
        for jobs in ("1", "3"):
            emitted = tmp_path / f"emit-{jobs}.yaml"
            emitted.unlink(missing_ok=True)
            args = [*extra, str(emitted)] if "--emit-candidates" in extra else extra
            run = _kb(["scan", str(tree), "--jobs", jobs, *args], tmp_path)
            assert run.returncode == 1, run.stderr[-2000:]  # the misspelt keyword is an error
            assert f"PROCESSES [{jobs}]" in run.stderr
            outs[jobs] = (
                run.stdout,
                emitted.read_text(encoding="utf-8") if emitted.exists() else "",
                run.stderr.replace(f"PROCESSES [{jobs}]", "").replace(str(emitted), "E"),
            )
        assert outs["1"] == outs["3"], extra
        assert "--emit-candidates" not in extra or "candidates:" in outs["3"][1]
    outs = {}
    for jobs in ("1", "3"):
        outs[jobs] = _kb(["scan", str(tree), "--jobs", jobs, "--format", "json"], tmp_path).stdout
    doc = json.loads(outs["3"])
    codes = {f["code"] for f in doc["findings"]}
    assert {"KB500", "KB601"} <= codes, codes  # the broken file; the written-out RMSNorm
    assert doc["inventory"], "the fixture's attention module is read"


_POOL = """
import os, sys, time
from kb.scan import pool
parent = os.getpid()

def slow(i):
    time.sleep(0.02)
    return (i, os.getpid())

got = pool.run_ordered(slow, [1] * 40, 2)
assert [i for i, _ in got] == list(range(40)), got
assert len({p for _, p in got}) == 2, "both processes took files"

def failing(i):
    if i in (3, 7):
        raise ValueError(f"file {i}")
    return i

try:
    pool.run_ordered(failing, [1] * 12, 2)
except ValueError as exc:
    assert str(exc) == "file 3", exc  # the first failure in file order, as a serial loop
else:
    raise AssertionError("no error")

def dying(i):
    time.sleep(0.01)
    if os.getpid() != parent:
        os._exit(3)  # a worker killed mid-scan
    return i * i

assert pool.run_ordered(dying, [1] * 10, 2) == [i * i for i in range(10)]
print("ok")
"""


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_pool_keeps_file_order_first_error_and_survives_a_dead_worker() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", _POOL], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_small_scans_and_explicit_serial_stay_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = [pool.MIN_BYTES] * 4
    assert pool.processes_for(None, [100, 200]) == 1  # too little source to pay for a fork
    assert pool.processes_for(1, big) == 1
    assert pool.processes_for(8, [pool.MIN_BYTES * 2]) == 1  # one file
    monkeypatch.setenv(pool.JOBS_ENV, "1")
    assert pool.processes_for(None, big) == 1
    monkeypatch.setenv(pool.JOBS_ENV, "two")
    assert pool.jobs_wanted(None) == 1  # an unreadable setting is the safe one
    monkeypatch.setenv(pool.JOBS_ENV, "3")
    assert pool.jobs_wanted(None) == 3
    assert pool.jobs_wanted(2) == 2  # --jobs wins over the environment


def test_a_machine_without_an_idle_core_scans_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(pool.JOBS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(pool, "others_running", lambda: 7)
    assert pool.jobs_wanted(None) == 1
    assert pool.jobs_wanted(2) == 2  # asked for: forked all the same
    monkeypatch.setattr(pool, "others_running", lambda: 2)
    assert pool.jobs_wanted(None) == 1  # two others on two cores: none idle
    monkeypatch.setattr(pool, "others_running", lambda: 1)
    assert pool.jobs_wanted(None) == 2
    monkeypatch.setattr(pool, "others_running", lambda: None)
    assert pool.jobs_wanted(None) == 2


def test_others_running_reads_the_kernels_count() -> None:
    others = pool.others_running()
    assert others is None or others >= 0


def test_no_pool_from_a_thread_as_under_the_mcp_server() -> None:
    seen: list[int] = []
    worker = threading.Thread(
        target=lambda: seen.append(pool.processes_for(4, [pool.MIN_BYTES] * 4))
    )
    worker.start()
    worker.join()
    assert seen == [1]
    assert not pool.can_fork() or threading.active_count() == 1


def test_jobs_option_rejects_what_is_not_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    from kb.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["scan", ".", "--jobs", "0"])
    assert exc.value.code == 2
    assert "not a number of processes" in capsys.readouterr().err
