"""Issue 24, files: side reads, glob patterns, output targets, named paths (classes B, C,
G and the file parts of E and J).

Attacks that could hang run ``kb`` in a child process with a timeout (a hang is a
``rc is None``); the rest run in-process.  Tests run as root, so an unreadable directory
is simulated by a ``os.scandir`` that raises.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kb.check.source import read_source
from kb.cli import main
from kb.scan import sources
from kb.scan.globs import PatternError, PatternSet, compile_pattern
from tests.fault_helpers import REPO, env_for, kb

MODEL = "import torch\n\n\ndef f(x):\n    return torch.relu(x)\n"
TOOL_KB = '[tool.kb]\nproduct = "atlas-a3"\n'


def _project(tmp: Path, pyproject: str | None = TOOL_KB) -> Path:
    proj = tmp / "proj"
    proj.mkdir()
    (proj / "m.py").write_text(MODEL, encoding="utf-8")
    if pyproject is not None:
        (proj / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return proj


def _scan(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["scan", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# -- B. side reads go through the safe reader -----------------------------------------


def test_fifo_as_discovered_pyproject_does_not_block(tmp_path: Path) -> None:
    proj = _project(tmp_path, pyproject=None)
    os.mkfifo(proj / "pyproject.toml")
    run = kb(tmp_path, "scan", "proj", timeout=30)
    assert run.rc == 0 and run.clean, run  # not a file: not a configuration, never opened


def test_fifo_as_config_and_gitignore_do_not_block(tmp_path: Path) -> None:
    proj = _project(tmp_path, pyproject=None)
    os.mkfifo(tmp_path / "cfg.toml")
    run = kb(tmp_path, "scan", "--config", "cfg.toml", "proj", timeout=30)
    assert run.rc == 2 and run.clean and "cfg.toml" in run.err, run
    os.mkfifo(proj / ".gitignore")
    run = kb(tmp_path, "scan", "--no-config", "proj", timeout=30)
    assert run.rc == 0 and run.clean, run
    assert ".gitignore: skipped: not used: is a FIFO" in run.out


#: Address-space cap of the children that read huge inputs: a reader that loads the
#: whole input dies of MemoryError here instead of taking the machine's memory.
MEMORY_CAP = 2 << 30


def _capped_python(tmp: Path, code: str) -> subprocess.CompletedProcess[str]:
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=env_for(tmp),
        timeout=60,
        check=False,
        preexec_fn=cap,
    )


def test_dev_zero_as_config_is_refused(tmp_path: Path) -> None:
    _project(tmp_path, pyproject=None)
    proc = _capped_python(
        tmp_path,
        "import sys\nfrom kb.cli import main\n"
        "sys.exit(main(['scan', '--config', '/dev/zero', 'proj']))\n",
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "/dev/zero" in proc.stderr and "character device" in proc.stderr


def test_sparse_gigabyte_pyproject_is_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    proj = _project(tmp_path, pyproject=None)
    with open(proj / "pyproject.toml", "wb") as fh:
        fh.truncate(1 << 30)  # sparse: no disk used
    # VmHWM, not ru_maxrss: Linux carries the forking parent's peak (pytest's, hundreds of
    # MB late in a full run) into the child's ru_maxrss across exec; VmHWM is this process's
    probe = (
        "import re, sys\nfrom kb.cli import main\nrc = main(['scan', 'proj'])\n"
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())\n"
        "print(hwm.group(1), file=sys.stderr)\nsys.exit(rc)\n"
    )
    proc = _capped_python(tmp_path, probe)  # its subprocess bound ends a hang
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "larger than the 1048576 byte limit" in proc.stderr
    peak_kb = int(proc.stderr.strip().splitlines()[-1])
    assert peak_kb < 400 * 1024  # reading the file would have taken over 1 GB


def test_non_utf8_pyproject_is_a_message_not_a_traceback(tmp_path: Path, capsys) -> None:
    proj = _project(tmp_path, pyproject=None)
    (proj / "pyproject.toml").write_bytes(b'[tool.kb]\nproduct = "atlas-a3\xff"\n')
    rc, _out, err = _scan(capsys, str(proj))
    assert rc == 2 and f"{proj / 'pyproject.toml'}:2: not UTF-8 text" in err


def test_emit_target_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    _project(tmp_path)
    os.mkfifo(tmp_path / "draft.yaml")
    run = kb(tmp_path, "scan", "proj", "--emit-candidates", "draft.yaml", timeout=30)
    assert run.rc == 2 and run.clean and "not a regular file" in run.err, run


# -- C. glob patterns: compiled one by one, matched in linear time ------------------------


@pytest.mark.parametrize("pattern", ["\\", "!", "[z-a]", "a/b\\"])
def test_bad_exclude_pattern_is_a_usage_error_naming_it(pattern: str, capsys) -> None:
    rc, _out, err = _scan(capsys, "--exclude", pattern, str(REPO / "examples"))
    assert rc == 2 and "--exclude" in err and repr(pattern) in err, err


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (
            '[tool.kb.per-file-ignores]\n"[z-a].py" = ["KB6"]\n',
            "per-file-ignores: bad glob '[z-a].py'",
        ),
        (
            '[[tool.kb.overrides]]\nfiles = ["!"]\nproduct = "atlas-a3"\n',
            "overrides[0] files: bad glob '!'",
        ),
        ('[tool.kb]\nexclude = ["tests\\\\"]\n', "exclude: bad glob 'tests\\\\'"),
    ],
)
def test_bad_glob_in_tool_kb_names_the_key(tmp_path: Path, table: str, key: str, capsys) -> None:
    proj = _project(tmp_path, pyproject=table)
    rc, _out, err = _scan(capsys, "--product", "atlas-a3", str(proj))
    assert rc == 2 and key in err and "Traceback" not in err, err


def test_bad_gitignore_lines_are_skipped_as_git_does(tmp_path: Path, capsys) -> None:
    proj = _project(tmp_path, pyproject=None)
    (proj / "skip_me.py").write_text(MODEL, encoding="utf-8")
    (proj / "sub").mkdir()
    (proj / "sub" / ".gitignore").write_bytes(b"[z-a]\n\\\n!\n\xff\xfe*.py\n")
    (proj / "sub" / "kept.py").write_text(MODEL, encoding="utf-8")
    (proj / ".gitignore").write_text("[z-a]\n\\\n!\nskip_me.py\n", encoding="utf-8")
    files, skipped = sources.discover([str(proj)])
    assert sorted(p.name for p in files) == ["kept.py", "m.py"] and not skipped
    rc, _out, err = _scan(capsys, "--no-config", str(proj))
    assert rc == 0 and "Traceback" not in err


def test_backtracking_pattern_matches_in_linear_time(tmp_path: Path) -> None:
    """A backtracking matcher takes years on this pattern and name; a linear one, well
    under a second.  The subprocess's generous bound only ends a hang: no speed is
    asserted (timings belong to the benchmark)."""
    hostile = "a*a*a*a*a*a*a*b"
    assert PatternSet.from_lines([hostile]).match("x/" + "a" * 50 + "b")
    probe = (
        "from kb.scan.globs import PatternSet\n"
        f"assert not PatternSet.from_lines([{hostile!r}]).match('a' * 100_000 + '.py')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, timeout=120)
    assert done.returncode == 0
    proj = _project(tmp_path, pyproject=None)
    (proj / ".gitignore").write_text(hostile + "\n", encoding="utf-8")
    (proj / ("a" * 200 + ".py")).write_text(MODEL, encoding="utf-8")
    run = kb(tmp_path, "scan", "--no-config", "proj", timeout=30)
    assert run.rc == 0 and run.clean, run  # pathspec's regex: minutes


def test_glob_semantics_follow_gitignore() -> None:
    spec = PatternSet.from_lines(
        [
            "build/",
            "*.egg-info/",
            "/top.py",
            "docs/*",
            "x/**",
            "[!a]x.py",
            "a\\*b.py",
            "**/deep/z.py",
            "!keep.py",
            "*.py",
            "!keep.py",
        ]
    )
    assert spec.match("src/build", is_dir=True) and spec.match("src/build/y.txt")
    assert not spec.match("build") and spec.match("p.egg-info/s.txt")
    assert spec.match("top.py") and spec.match("docs/a/b.txt") and spec.match("x/y.txt")
    assert not spec.match("keep.py") and spec.match("q/deep/z.py")
    assert PatternSet.from_lines(["a\\*b.py"]).match("a*b.py")
    assert not PatternSet.from_lines(["a\\*b.py"]).match("aXb.py")
    assert PatternSet.from_lines(["[!a]x.py"]).match("bx.py")
    assert not PatternSet.from_lines(["[!a]x.py"]).match("ax.py")
    assert not PatternSet.from_lines(["/top.py"]).match("sub/top.py")
    with pytest.raises(PatternError):
        compile_pattern("[z-a]")


def test_glob_matcher_agrees_with_pathspec_on_good_patterns() -> None:
    """Good input keeps its meaning: the old matcher (pathspec's GitIgnoreSpec) and the
    linear one agree on every pair of these patterns, for files and directories."""
    pathspec = pytest.importorskip("pathspec")
    import itertools

    patterns = [
        ".git/",
        "build/",
        "*.egg-info/",
        "tools/*.py",
        "model/_310p/**",
        "*.py",
        "a/**/b.py",
        "/top.py",
        "top.py",
        "**/x/y.py",
        "foo",
        "docs/*",
        "[ab]*.py",
        "?.py",
        "!keep.py",
        "!foo",
        "*",
        "!*.py",
        "x/*/",
        "!x/**",
        "**/",
        "x/**/",
    ]
    paths = [
        "a.py",
        "top.py",
        "sub/top.py",
        "build",
        "src/build/y.py",
        "foo/bar.py",
        "x/foo",
        "x/foo/g.py",
        "a/c/d/b.py",
        "tools/s/a.py",
        "model/_310p/m.py",
        "docs/a/b.py",
        "q/x/y.py",
        "keep.py",
        "p.egg-info/s.py",
        "x",
        "bq.py",
    ]
    for pair in itertools.combinations(patterns, 2):
        old, new = pathspec.GitIgnoreSpec.from_lines(pair), PatternSet.from_lines(pair)
        for path in paths:
            for is_dir in (False, True):
                want = old.match_file(path + "/" if is_dir else path)
                assert new.match(path, is_dir) == want, (pair, path, is_dir)


# -- G. output targets -----------------------------------------------------------------


def test_emit_candidates_may_not_overwrite_scanned_source(tmp_path: Path, capsys) -> None:
    proj = _project(tmp_path)
    rc, _out, err = _scan(capsys, str(proj / "m.py"), "--emit-candidates", str(proj / "m.py"))
    assert rc == 2 and "refusing to overwrite a scanned file" in err
    rc, _out, err = _scan(capsys, str(proj), "--emit-candidates", str(proj / "new.py"))
    assert rc == 2 and "refusing to overwrite a scanned file" in err
    assert (proj / "m.py").read_text(encoding="utf-8") == MODEL and not (proj / "new.py").exists()
    rc, _out, err = _scan(capsys, str(proj), "--emit-candidates", str(tmp_path / "draft.yaml"))
    assert rc == 0 and "version: 1" in (tmp_path / "draft.yaml").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft.yaml", "proj"]  # no temp left


def _tiny_site(tmp: Path, slow: bool = False) -> Path:
    """A one-page mkdocs.yml (fast to build); ``slow`` adds a hook that sleeps."""
    pytest.importorskip("mkdocs")
    docs = tmp / "docs"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text("# Tiny\n", encoding="utf-8")
    text = f"site_name: tiny\ndocs_dir: {docs}\n"
    if slow:
        (tmp / "slow.py").write_text(
            "import time\n\n\ndef on_pre_build(config):\n    time.sleep(60)\n", encoding="utf-8"
        )
        text += f"hooks:\n  - {tmp / 'slow.py'}\n"
    config = tmp / ("slow.yml" if slow else "mkdocs.yml")
    config.write_text(text, encoding="utf-8")
    return config


def _site_build(*argv: str) -> int:
    return main(["site", "build", "-q", *argv])


def test_site_dir_not_marked_by_kb_is_not_replaced(tmp_path: Path, capsys) -> None:
    config = _tiny_site(tmp_path / "cfg")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "index.html").write_text("my notes")
    (notes / "todo.txt").write_text("keep me")
    assert _site_build("-f", str(config), "--site-dir", str(notes)) == 2
    assert "does not look like a built site" in capsys.readouterr().err
    assert sorted(p.name for p in notes.iterdir()) == ["index.html", "todo.txt"]
    site = tmp_path / "site"
    assert _site_build("-f", str(config), "--site-dir", str(site)) == 0
    assert (site / ".kb-site").is_file()
    (site / "stale.html").write_text("old")
    assert _site_build("-f", str(config), "--site-dir", str(site)) == 0  # a kb build: replaced
    assert not (site / "stale.html").exists()


def test_read_only_site_parent_is_a_message(tmp_path: Path, monkeypatch, capsys) -> None:
    config = _tiny_site(tmp_path / "cfg")
    import tempfile

    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    assert _site_build("-f", str(config), "--site-dir", str(tmp_path / "ro" / "site")) == 2
    err = capsys.readouterr().err
    assert "cannot write in" in err and "Permission denied" in err and "Traceback" not in err


def _start_slow_build(tmp: Path, site: Path) -> tuple[subprocess.Popen[bytes], Path]:
    config = _tiny_site(tmp / "slowcfg", slow=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kb",
            "site",
            "build",
            "-q",
            "-f",
            str(config),
            "--site-dir",
            str(site),
        ],
        cwd=tmp,
        env=env_for(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        staging = [p for p in site.parent.iterdir() if p.name.startswith(".site.building-")]
        if staging:
            return proc, staging[0]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=10)
    pytest.fail(f"no staging dir appeared: {proc.stderr.read() if proc.stderr else ''!r}")


def test_sigterm_during_a_build_removes_the_staging_dir(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    proc, staging = _start_slow_build(tmp_path, out / "site")
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=20)
    assert rc != 0 and not staging.exists() and list(out.iterdir()) == []


def test_staging_left_by_a_killed_build_is_swept(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    proc, staging = _start_slow_build(tmp_path, out / "site")
    proc.kill()  # kill -9: nothing of kb runs
    proc.wait(timeout=20)
    assert staging.exists()
    legacy = out / ".site.old-abc123"  # an older kb's, untouched for hours
    legacy.mkdir()
    os.utime(legacy, (time.time() - 7200, time.time() - 7200))
    config = _tiny_site(tmp_path / "cfg")
    assert _site_build("-f", str(config), "--site-dir", str(out / "site")) == 0
    assert sorted(p.name for p in out.iterdir()) == ["site"]


# -- E. exceptions outside the handled set (files) ----------------------------------------


def test_symlink_loops_near_pyproject_are_no_traceback(tmp_path: Path, capsys) -> None:
    proj = _project(tmp_path, pyproject=None)
    (proj / "pyproject.toml").symlink_to(proj / "pyproject.toml")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    rc, _out, err = _scan(capsys, str(proj))
    assert rc == 0, err
    rc, _out, err = _scan(capsys, str(tmp_path / "a"), str(proj))
    assert rc == 2 and str(tmp_path / "a") in err and "Traceback" not in err


# -- J. exits and named paths (files) -----------------------------------------------------


def test_missing_named_path_exits_2_naming_it(tmp_path: Path) -> None:
    _project(tmp_path)
    run = kb(tmp_path, "scan", "nope.py", "proj/m.py", timeout=60)
    assert run.rc == 2 and run.clean and "nope.py" in run.err, run
    assert "m.py" not in run.err.split("nope.py", 1)[0]


def test_unlistable_subdirectory_is_reported(tmp_path: Path, monkeypatch) -> None:
    proj = _project(tmp_path, pyproject=None)
    (proj / "locked").mkdir()
    (proj / "locked" / "hidden.py").write_text(MODEL, encoding="utf-8")
    real = os.scandir

    def scandir(path: object = ".") -> object:
        if os.fspath(path).endswith("locked"):  # type: ignore[call-overload]
            raise PermissionError(13, "Permission denied", os.fspath(path))  # type: ignore[call-overload]
        return real(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", scandir)
    files, skipped = sources.discover([str(proj)])
    assert [p.name for p in files] == ["m.py"]
    assert len(skipped) == 1 and skipped[0].path.endswith("locked")
    assert "Permission denied" in skipped[0].reason


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_candidate_list_with_bom_is_read(tmp_path: Path, encoding: str) -> None:
    text = "version: 1\ntarget: {product: atlas-a3}\ncandidates: []\n"
    path = tmp_path / "list.yaml"
    bom = {"utf-16-be": b"\xfe\xff"}.get(encoding, b"")
    path.write_bytes(bom + text.encode(encoding))
    assert read_source(path) == (str(path), text)
