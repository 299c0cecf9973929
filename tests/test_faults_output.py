"""Fault injection, what kb prints and how it counts (issue 24, classes E, F, H/I).

Hostile file names must not forge GitHub workflow commands or drive the terminal;
SARIF URIs are percent-encoded; a cache that sqlite cannot use is worked around;
numeric options are bounded; lines are split the way Python and YAML split them; and a
malformed ``# kb: ignore`` silences nothing, in ``kb check`` and ``kb scan`` alike.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fault_helpers import HEAD, env_for, kb

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

FORGED = "evil\n::warning file=x,line=1::FORGED"
ESCAPE = "esc\x1b[31mred\x9b2J"
PY_CALL = "import torch_npu\ntorch_npu.npu_rms_norm(x, 1e-6, bogus=1)\n"
YAML_BAD = HEAD + "  - module: m\n    operator: nope_op\n"


def _hostile_files(tmp: Path, suffix: str, text: str) -> list[str]:
    names = [FORGED + suffix, ESCAPE + suffix, "sp ace%:,é" + suffix]
    for name in names:
        (tmp / name).write_text(text, encoding="utf-8")
    return names


def _no_forged_lines(out: str) -> None:
    """No line is a workflow command but kb's own annotations; no terminal controls."""
    for line in out.split("\n"):
        assert not line.startswith("::") or line.startswith("::error file="), line
    assert "\x1b" not in out and "\x9b" not in out, repr(out)


# -- F: file names in text, GitHub and SARIF output -----------------------------------------


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_check_output_escapes_hostile_file_names(tmp_path: Path, fmt: str) -> None:
    names = _hostile_files(tmp_path, ".yaml", YAML_BAD)
    run = kb(tmp_path, "check", "--format", fmt, "--color", "never", *names, timeout=30)
    assert run.clean and run.rc == 1, run.err
    _no_forged_lines(run.out)
    if fmt == "text":
        assert "evil\\n::warning file=x,line=1::FORGED.yaml:5:15: KB101" in run.out
        assert "esc\\x1b[31mred\\x9b2J.yaml:5:15:" in run.out
        assert "sp ace%:,é.yaml:5:15:" in run.out  # ordinary characters stay as they are
    else:
        assert (
            "::error file=evil%0A%3A%3Awarning file=x%2Cline=1%3A%3AFORGED.yaml,line=5" in run.out
        )
        assert "::error file=sp ace%25%3A%2Cé.yaml,line=5" in run.out


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_scan_output_escapes_hostile_file_names(tmp_path: Path, fmt: str) -> None:
    _hostile_files(tmp_path, ".py", PY_CALL)
    run = kb(
        tmp_path, "scan", "--no-config", "--format", fmt, "--color", "never", "-v", ".", timeout=60
    )
    assert run.clean and run.rc == 1, run.err
    _no_forged_lines(run.out)
    if fmt == "text":
        assert "evil\\n::warning file=x,line=1::FORGED.py:2:33: KB104" in run.out


@pytest.mark.parametrize("verb", ["check", "scan"])
def test_stderr_escapes_hostile_names_of_unreadable_paths(tmp_path: Path, verb: str) -> None:
    """The stderr lines (a named path that cannot be read, the emit target) quote file
    names too: they are escaped like the findings, so no line of stderr can start a
    workflow command or carry a terminal control."""
    missing = FORGED + ESCAPE + (".yaml" if verb == "check" else ".py")
    (tmp_path / "real.py").write_text(PY_CALL, encoding="utf-8")
    extra = ["--no-config", "real.py"] if verb == "scan" else []
    run = kb(tmp_path, verb, *extra, missing, timeout=60)
    assert run.clean and run.rc == 2, run.err
    _no_forged_lines(run.err)
    assert "evil\\n::warning file=x,line=1::FORGEDesc\\x1b[31mred\\x9b2J" in run.err, run.err


def test_stderr_escapes_the_emit_target_name(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(PY_CALL, encoding="utf-8")
    target = "plan\n::warning file=x::FORGED.yaml"
    run = kb(
        tmp_path,
        "scan",
        "--no-config",
        "--product",
        "atlas-a3",
        "--emit-candidates",
        target,
        "m.py",
        timeout=60,
    )
    assert run.clean and run.rc in (0, 1), run.err
    _no_forged_lines(run.err)
    assert (tmp_path / target).is_file()
    assert "wrote plan\\n::warning" in run.err, run.err


def test_sarif_uris_are_percent_encoded(tmp_path: Path) -> None:
    _hostile_files(tmp_path, ".py", PY_CALL)
    (tmp_path / "ok.py").write_text(PY_CALL, encoding="utf-8")
    run = kb(tmp_path, "scan", "--no-config", "--format", "sarif", ".", timeout=60)
    assert run.clean and run.rc == 1, run.err
    doc = json.loads(run.out)
    uris = sorted(
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in doc["runs"][0]["results"]
        for loc in r["locations"]
    )
    assert uris == sorted(
        [
            "evil%0A%3A%3Awarning%20file=x,line=1%3A%3AFORGED.py",
            "esc%1B%5B31mred%C2%9B2J.py",
            "sp%20ace%25%3A,%C3%A9.py",
            "ok.py",
        ]
    )


# -- E: an unusable cache, unbounded numbers ------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "directory", "read-only"])
def test_unusable_record_cache_is_worked_around(tmp_path: Path, damage: str) -> None:
    assert kb(tmp_path, "show", "npu_rms_norm").rc == 0
    (db,) = (tmp_path / "cache").glob("records-*.sqlite")
    db.unlink()
    if damage == "garbage":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    elif damage == "directory":
        db.mkdir()
    else:
        db.write_bytes(b"not a database")
        db.chmod(0o444)
        (tmp_path / "cache").chmod(0o555)
    try:
        for verb in (["show", "npu_rms_norm"], ["search", "rms norm"], ["list"]):
            run = kb(tmp_path, *verb)
            assert run.clean and run.rc == 0 and "npu_rms_norm" in run.out, (verb, run.err)
    finally:
        (tmp_path / "cache").chmod(0o755)


_DISK_FULL = """
import sqlite3, sys
real = sqlite3.connect
def full(target, *a, **k):
    if str(target) != ":memory:":
        raise sqlite3.OperationalError("database or disk is full")
    return real(target, *a, **k)
sqlite3.connect = full
from kb.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_full_disk_under_the_cache_is_worked_around(tmp_path: Path) -> None:
    for verb in (["show", "npu_rms_norm"], ["search", "rms norm"], ["check", "c.yaml"]):
        (tmp_path / "c.yaml").write_text(YAML_BAD, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-c", _DISK_FULL, *verb],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env_for(tmp_path),
            timeout=60,
            check=False,
        )
        assert "Traceback" not in proc.stderr and "OperationalError" not in proc.stderr, proc.stderr
        assert proc.returncode in (0, 1), proc.stderr
        assert (
            "database or disk is full" in proc.stderr and "working without a cache" in proc.stderr
        )


def test_sqlite_errors_building_the_cache_fall_back_to_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.catalog import compiled

    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    real = sqlite3.connect

    def full(target: object, *args: object, **kwargs: object) -> sqlite3.Connection:
        if str(target) != ":memory:":
            raise sqlite3.OperationalError("database or disk is full")
        return real(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compiled.sqlite3, "connect", full)
    catalog = compiled.open_catalog(rebuild=True)
    assert catalog.in_memory and catalog.get("npu_rms_norm") is not None


BIG = "1" + "0" * 400
HUGE = "9" * 5000  # past the 4,300-digit int <-> str limit


@pytest.mark.parametrize(
    "args",
    [
        ["--hidden", BIG],
        ["--hidden", HUGE],
        ["--hidden", "²"],
        ["--shape", f"{HUGE}x2"],
        ["--shape", f"{BIG}x2"],
        ["--shape", "100000000000000x100000000000000x100000"],
        ["--hidden", "99999999999", "--intermediate", "99999999999", "--gate-up"],
        ["--moe", "--hidden", "7168", "--moe-intermediate", "2048", "--experts-per-rank", BIG],
        [
            "--moe",
            "--hidden",
            "8",
            "--moe-intermediate",
            "8",
            "--experts-per-rank",
            "2",
            "--moe-tp",
            HUGE,
        ],
        ["--hidden", "7168", "--window-us", "1e308", "--bandwidth", "1e308"],
        ["--hidden", "7168", "--window-us", HUGE, "--bandwidth", "1"],
        ["--hidden", "7168", "--tp", BIG],
    ],
)
def test_prefetch_size_numbers_are_bounded(tmp_path: Path, args: list[str]) -> None:
    run = kb(tmp_path, "prefetch-size", *args, timeout=30)
    assert run.clean and run.rc == 2, run.err[-500:]
    assert run.err.startswith("kb prefetch-size: ") and len(run.err) < 400, run.err[:500]


def test_search_limit_is_bounded(tmp_path: Path) -> None:
    for limit in (BIG, HUGE):
        run = kb(tmp_path, "search", "rms", "--limit", limit)
        assert run.clean and run.rc == 2, run.err[-300:]


def test_one_release_grammar_for_the_command_line_and_the_config() -> None:
    from kb.core.releasenumber import release_text

    assert [release_text(v) for v in ("2.7.1", "2.7", 2.7, "2.7.1rc1", "2.7.1.post2")] == [
        "2.7.1",
        "2.7",
        "2.7",
        "2.7.1rc1",
        "2.7.1.post2",
    ]
    assert [
        release_text(v) for v in (float("inf"), 1e400, "inf", "nan", 2, True, None, "9" * 50)
    ] == [None] * 8


def test_scan_refuses_a_release_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(PY_CALL, encoding="utf-8")
    run = kb(tmp_path, "scan", "--no-config", "--torch-npu", "inf", "m.py")
    assert run.clean and run.rc == 2 and "is not a release" in run.err


# -- H: lines as Python and YAML count them ---------------------------------------------------

STRAY = "\x0c\x85\u2028\u2029\x0b\x1c\x1d\x1e"


def test_stray_line_separators_in_python_do_not_shift_positions(tmp_path: Path) -> None:
    body = 'x = "é"; torch_npu.npu_rms_norm(x, 1e-6, bogus=1)\n'
    (tmp_path / "a.py").write_text(f"import torch_npu\n# a{STRAY}b\n\n{body}", encoding="utf-8")
    (tmp_path / "b.py").write_text(f"import torch_npu\n# ab\n\n{body}", encoding="utf-8")
    run = kb(tmp_path, "scan", "--no-config", "--format", "json", "a.py", "b.py")
    assert run.clean, run.err
    found = {
        (f["file"], f["line"], f["column"], f["code"]) for f in json.loads(run.out)["findings"]
    }
    assert found == {("a.py", 4, 42, "KB104"), ("b.py", 4, 42, "KB104")}


def test_python_lines_match_ast_numbering() -> None:
    import ast

    from kb.core.linebreaks import python_lines

    src = f"a = 1  # {STRAY}\r\nb = 2\rc = 3\n"
    lines = python_lines(src)
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Name):
            assert lines[node.lineno - 1].startswith(node.id)
    assert python_lines("a\nb\n") == "a\nb\n".splitlines() and python_lines("") == []


def test_yaml_positions_count_what_pyyaml_counts() -> None:
    import yaml

    from kb.core.yamlpos import load, position

    for sep in ("\n", "\r\n", "\r", "\x85", "\u2028", "\u2029"):
        text = f"a: 1{sep}b: [1, x]\n"
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        mark = node.value[1][1].value[1].start_mark  # the 'x'
        assert position(text, mark.index) == (mark.line + 1, mark.column + 1), repr(sep)
        assert load(text).where(("b", 1)) == (mark.line + 1, mark.column + 1), repr(sep)


def test_decode_errors_count_yaml_line_breaks() -> None:
    from kb.core.yamlpos import YamlError, decode

    with pytest.raises(YamlError) as err:
        decode(b"a: 1\rb: 2\rc: \xff\n")
    assert err.value.line == 3


# -- I: a strict ignore-comment grammar ------------------------------------------------------

MALFORMED = [
    "# kb: ignore[KB104",
    "# kb: ignore KB104",
    "# kb: ignore",
    "# kb: ignore[KB1O4]",
    "# kb: ignore[]",
    "# kb: ignore[KB104 because]",
]


@pytest.mark.parametrize("comment", MALFORMED)
def test_a_malformed_ignore_comment_silences_nothing_in_scan(tmp_path: Path, comment: str) -> None:
    (tmp_path / "m.py").write_text(
        f"import torch_npu\ntorch_npu.npu_rms_norm(x, 1e-6, bogus=1)  {comment}\n", encoding="utf-8"
    )
    run = kb(tmp_path, "scan", "--no-config", "--format", "json", "m.py")
    assert run.clean and run.rc == 1, run.err
    codes = [(f["line"], f["code"]) for f in json.loads(run.out)["findings"]]
    assert codes == [(2, "KB104"), (2, "KB006")], codes


@pytest.mark.parametrize("comment", MALFORMED)
def test_a_malformed_ignore_comment_silences_nothing_in_check(tmp_path: Path, comment: str) -> None:
    (tmp_path / "c.yaml").write_text(
        HEAD + f"  - module: m  {comment}\n    operator: nope_op\n", encoding="utf-8"
    )
    run = kb(tmp_path, "check", "--format", "json", "c.yaml")
    assert run.clean and run.rc == 1, run.err
    codes = sorted((f["line"], f["code"]) for f in json.loads(run.out)["findings"])
    assert (5, "KB101") in codes and (4, "KB006") in codes, codes


def test_well_formed_ignore_comments_still_silence(tmp_path: Path) -> None:
    lines = [
        "# kb: ignore[KB104]",
        "# kb: ignore[KB104] tuned on purpose",
        "#kb:ignore[kb1]",
        "# KB: Ignore [KB104, KB107]",
    ]
    src = "import torch_npu\n" + "".join(
        f"torch_npu.npu_rms_norm(x, 1e-6, bogus=1)  {c}\n" for c in lines
    )
    (tmp_path / "m.py").write_text(src, encoding="utf-8")
    run = kb(tmp_path, "scan", "--no-config", "--format", "json", "m.py")
    assert run.clean and run.rc == 0 and json.loads(run.out)["findings"] == [], run.out
