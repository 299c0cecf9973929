"""Reliability round 4 (issue 35), the classes outside the agent server's own tests:

- B. ``--emit-candidates`` refuses every file the scan read (pyproject.toml, .gitignore,
  a C++ source with registrations, the model config, a module the reader followed),
  however the target is spelled, and leaves it untouched.
- A (reads). Every file the scan reads is confined under ``kb mcp --root``, READMEs too,
  and none blocks on a FIFO.

Every attack runs the real CLI in a fresh process (``tests/fault_helpers.py``);
``KB_FAULTS_CODE=/path/to/checkout`` runs it from another checkout to show the attack
fails there.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fault_helpers import CHECK_RECORDS, CODE, kb

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

MODEL = (
    "import torch_npu\n\n\ndef f(x, g):\n    return torch_npu.npu_rms_norm(x, g, epsilon=1e-6)\n"
)
CPP = 'TORCH_LIBRARY(mylib, m) {\n  m.def("blend(Tensor x) -> Tensor");\n}\n'
PYPROJECT = '[tool.kb]\nproduct = "atlas-a3"\n'


def _project(tmp: Path) -> Path:
    proj = tmp / "proj"
    (proj / "csrc").mkdir(parents=True)
    (proj / "m.py").write_text(MODEL, encoding="utf-8")
    (proj / "csrc" / "ops.cpp").write_text(CPP, encoding="utf-8")
    (proj / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (proj / ".gitignore").write_text("build/\n", encoding="utf-8")
    (tmp / "cfg.json").write_text('{"hidden_act": "silu"}', encoding="utf-8")
    return proj


def _inputs(tmp: Path) -> dict[Path, bytes]:
    """Every file of the project and beside it (the cache aside)."""
    return {
        p: p.read_bytes()
        for p in tmp.rglob("*")
        if p.is_file() and "cache" not in p.relative_to(tmp).parts
    }


# -- B. --emit-candidates never overwrites an input ---------------------------------


@pytest.mark.parametrize(
    "target",
    ["proj/pyproject.toml", "proj/.gitignore", "proj/csrc/ops.cpp", "cfg.json", "alias.toml"],
)
def test_emit_candidates_refuses_every_file_the_scan_read(tmp_path: Path, target: str) -> None:
    proj = _project(tmp_path)
    os.symlink(proj / "pyproject.toml", tmp_path / "alias.toml")  # another spelling of it
    before = _inputs(tmp_path)
    run = kb(
        tmp_path,
        "scan",
        "proj",
        "--model-config",
        "cfg.json",
        "--emit-candidates",
        target,
        timeout=60,
    )
    assert run.clean and run.rc == 2, (run.rc, run.err[-600:])
    assert "refusing to overwrite" in run.err and "read by the scan" in run.err, run.err[-600:]
    assert _inputs(tmp_path) == before  # nothing written, no temp file left beside the target


def test_emit_candidates_refuses_a_module_the_reader_followed(tmp_path: Path) -> None:
    """The scanned file imports a sibling package's layers; the reader read it, so the
    draft may not replace it, though it is no file named on the command line."""
    (tmp_path / "pkg" / "models").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "models" / "__init__.py").write_text("", encoding="utf-8")
    layers = tmp_path / "pkg" / "layers.py"
    layers.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Norm(nn.Module):\n"
        "    def __init__(self, d):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.ones(d))\n\n"
        "    def forward(self, x):\n"
        "        v = x.pow(2).mean(-1, keepdim=True)\n"
        "        return self.weight * (x * torch.rsqrt(v + 1e-6))\n",
        encoding="utf-8",
    )
    model = tmp_path / "pkg" / "models" / "net.py"
    model.write_text(
        "from torch import nn\nfrom ..layers import Norm\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.norm = Norm(64)\n\n"
        "    def forward(self, x):\n        return self.norm(x)\n",
        encoding="utf-8",
    )
    before = layers.read_bytes()
    run = kb(
        tmp_path,
        "scan",
        "pkg/models/net.py",
        "--product",
        "atlas-a3",
        "--emit-candidates",
        "pkg/layers.py",
    )
    assert run.clean and run.rc == 2, (run.rc, run.err[-600:])
    assert "read by the scan" in run.err
    assert layers.read_bytes() == before


# -- A. every read the scan makes is confined ----------------------------------------

SERVING = Path(__file__).parent / "fixtures" / "scan" / "falsefree" / "context" / "serving"


def test_a_readme_outside_the_root_decides_nothing(tmp_path: Path) -> None:
    """A README symlinked out of ``kb mcp --root`` is not read: what it states (products)
    would otherwise turn the target's errors into warnings, an answer decided by a file
    outside the root.  The README inside the root still decides (the control)."""
    from kb.api.scan import ScanOptions, scan_paths
    from kb.core.paths import confine_reads

    root, outside = tmp_path / "root", tmp_path / "outside"
    shutil.copytree(SERVING, root / "serving")
    outside.mkdir()
    shutil.move(root / "serving" / "README.md", outside / "README.md")

    def severities() -> list[str]:
        options = ScanOptions(fusion=False, use_config=False, product="atlas-inference")
        confine_reads(str(root.resolve()))
        try:
            report = scan_paths([str(root / "serving")], options)
        finally:
            confine_reads(None)
        return sorted(f.severity for f in report.findings if f.code == "KB201")

    os.symlink(outside / "README.md", root / "serving" / "README.md")
    assert severities() == ["error"]
    (root / "serving" / "README.md").unlink()
    shutil.copy(outside / "README.md", root / "serving" / "README.md")
    assert severities() == ["warning"]


PLAN = Path(__file__).parent / "fixtures" / "modelplan"


def test_the_plan_follows_no_import_out_of_the_server_root(tmp_path: Path) -> None:
    """Two models import their configuration from outside ``--root``: one from above it
    (``from ...outside``), one through a sibling symlinked out of it.  Unconfined, the
    reader takes the activation from that file; the server neither reads it nor answers
    with its value."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from kb.api.scan import scan
    from tests.test_faults_mcp import RawServer

    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    text = (PLAN / "configuration_dense.py").read_text(encoding="utf-8")
    (outside / "configuration_dense.py").write_text(
        text.replace('"silu"', '"gelu"'), encoding="utf-8"
    )
    model = (PLAN / "modeling_dense_gqa.py").read_text(encoding="utf-8")
    for pkg in ("up", "link"):
        (root / pkg).mkdir(parents=True)
    for folder in (root, root / "up", root / "link", outside):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    up = model.replace("from .configuration_dense", "from ...outside.configuration_dense")
    (root / "up" / "modeling.py").write_text(up, encoding="utf-8")
    (root / "link" / "modeling.py").write_text(model, encoding="utf-8")
    os.symlink(outside / "configuration_dense.py", root / "link" / "configuration_dense.py")

    def activation(doc: dict[str, Any]) -> str:
        return next(m for m in doc["inventory"] if m["module"] == "DenseMLP")["facts"]["activation"]

    for pkg in ("up", "link"):  # unconfined, the reader does follow both
        assert activation(scan(path=str(root / pkg / "modeling.py"), plan=True)) == "gelu"

    server = RawServer("--root", str(root), cwd=root, KB_CACHE_DIR=str(tmp_path / "cache"))
    try:
        server.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        server.reply(60)
        server.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for n, pkg in enumerate(("up", "link"), start=2):
            arguments = {"path": f"{pkg}/modeling.py", "plan": True}
            server.request(n, "tools/call", {"name": "scan", "arguments": arguments})
            doc = server.reply(120)["result"]["structuredContent"]
            assert activation(doc) != "gelu" and "gelu" not in json.dumps(doc), pkg
    finally:
        server.proc.kill()
        server.proc.wait()


# -- C. scan workers die with their parent -------------------------------------------

POOL_SCRIPT = """
import os, sys, time
from kb.scan import pool
print(os.getpid(), flush=True)
pool.run_ordered(lambda i: time.sleep(60), [1, 1, 1, 1], 3)
"""


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers through /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_scan_workers_die_with_their_parent(tmp_path: Path, sig: signal.Signals) -> None:
    """A scan's parent stopped by SIGTERM or SIGHUP (a closed terminal, a CI timeout)
    takes its workers with it: none is left running its share of the files."""
    proc = subprocess.Popen(
        [sys.executable, "-c", POOL_SCRIPT],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(CODE)},
    )
    workers: set[int] = set()
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        deadline = time.monotonic() + 30
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = _children(pid)
            time.sleep(0.05)
        assert len(workers) == 2, workers
        time.sleep(0.3)  # the workers are in their share of the work
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if _alive(w)], "workers outlived their parent"
    finally:
        proc.kill()
        for w in workers:
            with contextlib.suppress(OSError):
                os.kill(w, signal.SIGKILL)


# -- E. the cache and the index --------------------------------------------------------

VERBS = (("show", "npu_rms_norm"), ("search", "rms norm"))


def _cache_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def test_a_cache_file_replaced_by_a_fifo_hangs_no_verb(tmp_path: Path) -> None:
    """Each file of the compiled records and of the search index in turn becomes a FIFO
    (nobody writes to it): every verb still answers, the answer unchanged."""
    want = {verb: kb(tmp_path, *verb).out for verb in VERBS}
    assert all(want.values())
    files = _cache_files(tmp_path / "cache")
    assert any(p.suffix == ".sqlite" for p in files) and len(files) > 3
    for victim in files:
        if not victim.is_file():  # gone with a rebuild after an earlier victim
            continue
        victim.unlink()
        os.mkfifo(victim)
        for verb in VERBS:
            run = kb(tmp_path, *verb, timeout=60)  # a hang, not a slow machine
            assert run.rc is not None, f"{' '.join(verb)} hung on a FIFO at {victim.name}"
            assert run.clean and run.rc == 0 and run.out == want[verb], (victim.name, run.err)
        if victim.exists() and not victim.is_file():
            victim.unlink()


@pytest.mark.parametrize("odd", ["c?mode=rw", "c#x", "c%41", "c?a#b%2F"])
def test_a_cache_dir_named_like_a_uri_is_a_plain_path(tmp_path: Path, odd: str) -> None:
    """SQLite reads ``file:`` names as URIs: a cache directory holding ``?``, ``#`` or
    ``%`` is still that directory, so the store is built once, read back, and nothing
    appears beside it."""
    cache = tmp_path / odd
    first = kb(tmp_path, "show", "npu_rms_norm", KB_CACHE_DIR=str(cache))
    assert first.clean and first.rc == 0, first.err
    (store,) = cache.glob("records-*.sqlite")
    built = store.stat().st_mtime_ns, store.stat().st_ino
    again = kb(tmp_path, "show", "npu_rms_norm", KB_CACHE_DIR=str(cache))
    assert again.clean and again.rc == 0 and again.out == first.out, again.err
    assert "working without a cache" not in again.err
    assert (store.stat().st_mtime_ns, store.stat().st_ino) == built  # read, not rebuilt
    for _ in range(2):
        found = kb(tmp_path, "search", "rms norm", KB_CACHE_DIR=str(cache))
        assert found.clean and found.rc == 0 and "npu_rms_norm" in found.out, found.err
        assert "working without a cache" not in found.err
    assert [p.name for p in tmp_path.iterdir()] == [odd]  # no stray file beside it


# -- F. the command line ---------------------------------------------------------------

FF = os.fsdecode(b"\xff")  # the byte 0xff as Python decodes an argument holding it
SHIPPED = CODE / "kb" / "records"
#: A walk that reaches the numeric question "how many routed experts".
COUNT = ("advise", "moe", "--moe", "yes", "--gate", "sigmoid", "--no-input", "--routed-experts")


@pytest.fixture(scope="module")
def shipped_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One cache of the shipped records for the attacks that only read them."""
    return str(tmp_path_factory.mktemp("shipped-cache"))


@pytest.mark.parametrize(
    "args",
    [
        ("show", FF),
        ("show", FF, "--format", "json"),
        ("tree", FF),
        ("advise", FF),
        ("search", FF),
        ("list", "--product", f"a3{FF}"),
        (*COUNT, FF),
    ],
)
def test_an_argument_that_is_not_utf8_is_a_usage_error(
    tmp_path: Path, shipped_cache: str, args: tuple[str]
) -> None:
    run = kb(tmp_path, *args, records=SHIPPED, KB_CACHE_DIR=shipped_cache)
    assert run.clean and run.rc == 2, (run.rc, run.err[-500:])
    assert "not valid UTF-8" in run.err and "\\xff" in run.err, run.err
    if "json" in args:
        assert '"exit": 2' in run.out


def test_non_utf8_paths_still_work(tmp_path: Path) -> None:
    """File and directory names may hold any byte: a scanned file and the cache
    directory named so are used as they are."""
    (tmp_path / f"m{FF}.py").write_text(MODEL, encoding="utf-8")
    run = kb(tmp_path, "scan", f"m{FF}.py", "--product", "atlas-a3")
    assert run.clean and run.rc == 0 and "1 file" in run.out, run.err
    for _ in range(2):
        run = kb(tmp_path, "show", "npu_rms_norm", KB_CACHE_DIR=str(tmp_path / f"c{FF}"))
        assert run.clean and run.rc == 0 and "npu_rms_norm" in run.out, run.err[-500:]
        assert not run.err


@pytest.mark.parametrize("there", [True, False])
def test_a_records_dir_whose_path_is_not_utf8_is_a_clear_error(tmp_path: Path, there: bool) -> None:
    """The records' paths are stored and shown as text: a records directory whose path
    is not UTF-8 is refused with its name escaped, whether it exists or not."""
    records = tmp_path / f"records{FF}"
    if there:
        shutil.copytree(CHECK_RECORDS, records)
    verbs = (("show", "npu_rms_norm"), ("search", "rms"), ("validate",))
    for verb in (*verbs, ("validate", "--format", "json")):
        run = kb(tmp_path, *verb, KB_RECORDS_DIR=str(records))
        assert run.clean and run.rc == 2, (verb, run.rc, run.err[-500:])
        assert "\\xff" in run.err + run.out or "json" in verb, (run.out, run.err)
        assert "not valid UTF-8" in run.err + run.out or not there, (run.out, run.err)
    if there:
        assert "\\udcff" in run.out and json.loads(run.out)["problems"], run.out


@pytest.mark.parametrize("answer", ["²", "٣٢", "3" * 5000, "1" * 40])
def test_advise_counts_are_ascii_digits_within_bounds(
    tmp_path: Path, shipped_cache: str, answer: str
) -> None:
    """A count is ASCII digits of a sane length (``256`` picks its option, ``160`` the
    catch-all: tests/test_advise.py); a superscript, another script's digits or 5,000
    digits are refused with the question named, never a ValueError."""
    run = kb(tmp_path, *COUNT, answer, records=SHIPPED, KB_CACHE_DIR=shipped_cache)
    assert run.clean and run.rc == 2, (run.rc, run.err[-500:])
    assert "--routed-experts" in run.err and len(run.err) < 2000, run.err[-500:]


# -- I. the server's scans hold a bounded set of trees -----------------------------------

LAYERS = (
    "import torch\nfrom torch import nn\n\n\nclass Norm(nn.Module):\n"
    "    def __init__(self, d):\n        super().__init__()\n"
    "        self.weight = nn.Parameter(torch.ones(d))\n\n"
    "    def forward(self, x):\n        v = x.pow(2).mean(-1, keepdim=True)\n"
    "        return self.weight * (x * torch.rsqrt(v + 1e-6))\n"
)
NET = (
    "from torch import nn\nfrom .layers import Norm\n\n\nclass Net(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        self.norm = Norm(64)\n\n"
    "    def forward(self, x):\n        return self.norm(x)\n"
)


def test_a_tree_scan_keeps_a_bounded_set_of_parsed_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MCP ``scan`` tool reads the modules of a tree (the inventory): every model
    imports its package's 700 KB layers module.  The trees of the modules it follows
    are kept for the next model, within a bound: never all of them at once (on a tree
    of 17 MB that was 520 MB), and none once the scan has answered."""
    import weakref

    from kb.api.scan import scan
    from kb.scan.model import resolve

    padding = "TABLE = '" + "x" * 700_000 + "'\n"  # a large module, cheap to parse
    packages = 10
    for n in range(packages):
        pkg = tmp_path / "tree" / f"pkg{n}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("", encoding="utf-8")
        (pkg / "layers.py").write_text(LAYERS + padding, encoding="utf-8")
        (pkg / "net.py").write_text(NET, encoding="utf-8")
    size = (tmp_path / "tree" / "pkg0" / "layers.py").stat().st_size
    trees: list[weakref.ref[Any]] = []
    peak = [0]
    parse = resolve.parse_text

    def counted(path: str, text: str) -> Any:
        got = parse(path, text)
        if isinstance(got, resolve.Parsed):
            trees.append(weakref.ref(got.tree))
            peak[0] = max(peak[0], sum(1 for t in trees if t() is not None))
        return got

    monkeypatch.setattr(resolve, "parse_text", counted)
    monkeypatch.setenv("KB_SCAN_JOBS", "1")  # one process: what a server's call does
    doc = scan(
        path=str(tmp_path / "tree"), root=str(tmp_path), use_config=False, exclude=["layers.py"]
    )
    assert sum(m["module"] == "Norm" for m in doc["inventory"]) == packages, doc["inventory"]
    assert len(trees) == packages  # each layers module was read
    assert peak[0] * size <= 8 * 1024 * 1024 and peak[0] < packages, (peak[0], size)
    gc.collect()
    assert [t for t in trees if t() is not None] == []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("show", {"name": "\udcff"}), ("tree", {"name": "\udcff"}), ("search", {"query": "x\udcff"})],
)
def test_a_tool_argument_with_a_lone_surrogate_is_a_caller_error(
    tool: str, arguments: dict[str, str]
) -> None:
    """JSON can spell a lone surrogate (``"\\udcff"``): the MCP tools refuse it as the
    CLI refuses bytes that are not UTF-8, a tool error saying so, not a codec's."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from kb.mcp.calls import ToolInputError
    from kb.mcp.tools import tool_named

    with pytest.raises(ToolInputError, match="not valid Unicode text"):
        tool_named(tool).fn(**arguments)
