"""``kb check`` at its edges: malformed input becomes findings with positions, unreadable
input exits 2, output formats keep their promised shapes, exit codes, select/ignore and
inline ignores behave as documented.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb.api.check import InputError, check_paths, check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.cli import main

HERE = Path(__file__).parent
FIXTURE_RECORDS = HERE / "fixtures" / "check_records"
CANDIDATES = HERE / "fixtures" / "candidates"
HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog(FIXTURE_RECORDS)


@pytest.fixture
def fixture_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the CLI at the fixture records (the session cache comes from conftest)."""
    monkeypatch.setenv("KB_RECORDS_DIR", str(FIXTURE_RECORDS))


def found(text: str, catalog: Catalog) -> list[tuple[int, int, str]]:
    return [(f.line, f.column, f.code) for f in check_text(textwrap.dedent(text), catalog=catalog)]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# -- structure -----------------------------------------------------------------------


def test_yaml_that_does_not_parse_is_a_finding_with_its_line(catalog: Catalog) -> None:
    text = HEAD + "  - module: a\n    operator: npu_rms_norm\n      phase: decode\n"
    assert found(text, catalog) == [(6, 12, "KB001")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]\n", [(1, 1, "KB002")]),
        ("version: 1\ntarget: atlas-a3\ncandidates: []\n", [(2, 9, "KB002")]),
        (HEAD.replace("candidates:\n", "candidates: 5\n"), [(3, 13, "KB002")]),
        (HEAD + "  - npu_rms_norm\n", [(4, 5, "KB002")]),
        (HEAD + "  - {module: m, operator: npu_rms_norm, args: [epsilon]}\n", [(4, 47, "KB002")]),
        (
            HEAD + "  - {module: m, operator: npu_rms_norm, tensors: {self: bf16}}\n",
            [(4, 57, "KB002")],
        ),
        (
            HEAD + "  - {module: m, operator: npu_rms_norm, args: {epsilon: {a: 1}}}\n",
            [(4, 57, "KB002")],
        ),
        (HEAD + "  - {module: 7, operator: npu_rms_norm}\n", [(4, 14, "KB002")]),
        (
            HEAD + "  - {module: m, operator: npu_rms_norm, prerequisites: rope}\n",
            [(4, 56, "KB002")],
        ),
        (
            HEAD + "  - {kind: prefetch, module: m, target: t, switch: s, max_size: [1]}\n",
            [(4, 65, "KB002")],
        ),
        (
            HEAD + "  - {kind: prefetch, module: m, target: t, switch: s, max_size: 5 lots}\n",
            [(4, 65, "KB002")],
        ),
        (
            HEAD + "  - {kind: prefetch, module: m, target: t, switch: s, validated: maybe}\n",
            [(4, 66, "KB002")],
        ),
        (
            "version: 1\ntarget: {product: a3, parallel: {tp: 0}}\ncandidates: []\n",
            [(2, 38, "KB002")],
        ),
    ],
)
def test_wrong_types_point_at_the_value(
    text: str, expected: list[tuple[int, int, str]], catalog: Catalog
) -> None:
    assert found(text, catalog) == expected


def test_unknown_fields_point_at_the_key_and_suggest(catalog: Catalog) -> None:
    text = """\
        version: 1
        target: {product: atlas-a3, grpah_mode: eager}
        candidates:
          - module: m
            operator: npu_rms_norm
            prerequisite: [rope-precompute]
            tensors:
              self: {dtype: bf16, fromat: ND}
          - module: m2
            operator: npu_rms_norm
            max_size: 1MiB
        extra: 1
    """
    findings = check_text(textwrap.dedent(text), catalog=catalog)
    assert [(f.line, f.column, f.code) for f in findings] == [
        (2, 29, "KB003"),
        (6, 5, "KB003"),
        (8, 27, "KB003"),
        (11, 5, "KB003"),
        (12, 1, "KB003"),
    ]
    messages = [f.message for f in findings]
    assert "did you mean 'graph_mode'" in messages[0]
    assert "did you mean 'prerequisites'" in messages[1]
    assert "did you mean 'format'" in messages[2]
    assert "other kind of candidate" in messages[3]


def test_missing_fields(catalog: Catalog) -> None:
    assert found("", catalog) == [(1, 1, "KB004")]
    assert found("version: 1\ncandidates: []\n", catalog) == [(1, 1, "KB004")]
    assert found("version: 1\ntarget: {torch_npu: '2.9.0'}\ncandidates: []\n", catalog) == [
        (2, 1, "KB004")
    ]
    text = HEAD + "  - phase: decode\n  - module: m\n    target: down_proj\n    max_size: 1MiB\n"
    findings = check_text(text, catalog=catalog)
    assert [(f.line, f.column, f.code) for f in findings] == [
        (4, 5, "KB004"),
        (4, 5, "KB004"),
        (5, 5, "KB004"),
        (6, 5, "KB003"),
        (7, 5, "KB003"),
    ]
    assert any("write kind: prefetch" in f.message for f in findings)
    assert found(HEAD + "  - {kind: prefetch, module: m, switch: s}\n", catalog) == [
        (4, 5, "KB004")
    ]


def test_vocabularies_accept_aliases_and_reject_the_rest(catalog: Catalog) -> None:
    ok = HEAD.replace("atlas-a3", "A3") + textwrap.dedent("""\
          - module: m
            phase: incremental
            operator: torch.ops.npu.npu_rms_norm
            status: Needs_Prerequisite
            prerequisites: [x]
            tensors:
              self: {dtype: torch.bfloat16, format: nd}
              gamma: {dtype: fp32}
        """)
    assert found(ok, catalog) == []
    bad = textwrap.dedent("""\
        version: 2
        target: {product: atlas-a3, torch_npu: banana, quantization: w9a9, graph_mode: jit}
        candidates:
          - module: m
            kind: fusionn
          - module: m
            operator: npu_rms_norm
            phase: deocde
            status: maybe
            tensors:
              self: {dtype: bfloat61, format: NZZ}
        """)
    codes = found(bad, catalog)
    assert [c for c in codes if c[2] != "KB005"] == []
    assert [(line, col) for line, col, _ in codes] == [
        (1, 10),
        (2, 40),
        (2, 62),
        (2, 80),
        (5, 11),
        (8, 12),
        (9, 13),
        (11, 21),
        (11, 39),
    ]


def test_json_input_with_tabs(catalog: Catalog) -> None:
    text = (
        '{\n\t"version": 1,\n\t"target": {"product": "atlas-a3"},\n\t"candidates": [\n'
        '\t\t{"module": "m", "operator": "npu_rms_nrom"}\n\t]\n}\n'
    )
    assert found(text, catalog) == [(5, 31, "KB101")]


def test_alias_bomb_is_refused_as_a_finding(catalog: Catalog) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    findings = check_text("\n".join(lines) + "\n", catalog=catalog)
    assert [f.code for f in findings] == ["KB001"]
    assert "alias bomb" in findings[0].message


def test_merge_keys_and_deep_nesting_are_findings(catalog: Catalog) -> None:
    merge = "base: &b {product: atlas-a3}\ntarget:\n  <<: *b\ncandidates: []\n"
    assert [c for _, _, c in found(merge, catalog)] == ["KB001"]
    deep = "x: " + "[" * 200 + "]" * 200 + "\n"
    assert [c for _, _, c in found(deep, catalog)] == ["KB001"]


# -- unreadable input ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"version: 1\n\x00\x01binary", "binary file"),
        (b"version: 1\nmodel: caf\xe9\n", "not UTF-8"),
        (b"version: 1\nmodel: " + b"x" * (4 * 1024 * 1024 + 10) + b"\n", "byte limit"),
    ],
)
def test_unreadable_files_exit_2_with_a_clear_message(
    payload: bytes,
    why: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fixture_records: None,
    catalog: Catalog,
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(payload)
    rc, out, err = run(["check", str(bad), str(CANDIDATES / "clean.yaml")], capsys)
    assert rc == 2
    assert why in err and "Traceback" not in err
    assert "no findings in 1 file, 6 candidates" in out  # the readable file is still checked
    with pytest.raises(InputError, match=why):
        check_paths([bad], catalog=catalog)


def test_missing_file_and_directory_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture_records: None
) -> None:
    rc, out, err = run(["check", str(tmp_path / "nope.yaml"), str(tmp_path)], capsys)
    assert rc == 2 and out == ""
    assert "nope.yaml: cannot read" in err and "is a directory" in err


def test_records_that_do_not_validate_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.yaml").write_text("kind: operator\nname: x\n", encoding="utf-8")
    monkeypatch.setenv("KB_RECORDS_DIR", str(tmp_path))
    rc, _, err = run(["check", str(CANDIDATES / "clean.yaml")], capsys)
    assert rc == 2 and "records do not validate" in err


def test_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fixture_records: None
) -> None:
    data = (HEAD + "  - {module: m, operator: npu_rms_nrom}\n").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    rc, out, _ = run(["check", "-"], capsys)
    assert rc == 1
    assert out.startswith("<stdin>:4:27: KB101 error: unknown operator 'npu_rms_nrom'")
    rc, _, err = run(["check", "-", "-"], capsys)
    assert rc == 2 and "standard input" in err


def test_stdin_in_a_real_process(tmp_path: Path) -> None:
    env = dict(os.environ, KB_RECORDS_DIR=str(FIXTURE_RECORDS))
    proc = subprocess.run(
        [sys.executable, "-m", "kb", "check", "--format", "json", "-"],
        input=(CANDIDATES / "seeded.json").read_bytes(),
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)
    assert [f["code"] for f in payload["findings"]] == ["KB108", "KB005"]
    assert {f["file"] for f in payload["findings"]} == {"<stdin>"}
    assert b"\x1b[" not in proc.stdout


# -- exit codes, selection, ignores ------------------------------------------------------


def test_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture_records: None
) -> None:
    assert run(["check", str(CANDIDATES / "clean.yaml")], capsys)[0] == 0
    warn = tmp_path / "warn.yaml"
    warn.write_text(HEAD + "  - {module: m, phase: decode, operator: npu_mla_prolog_v2}\n")
    rc, out, _ = run(["check", str(warn)], capsys)
    assert rc == 0 and "KB102 warning" in out and "0 errors, 1 warning, 0 info" in out
    assert run(["check", str(CANDIDATES / "seeded_fusion.yaml")], capsys)[0] == 1
    with pytest.raises(SystemExit) as exc:
        main(["check"])
    assert exc.value.code == 2


def test_select_and_ignore(capsys: pytest.CaptureFixture[str], fixture_records: None) -> None:
    path = str(CANDIDATES / "seeded_fusion.yaml")
    rc, out, _ = run(["check", "--format", "json", "--select", "KB3", path], capsys)
    codes = [f["code"] for f in json.loads(out)["findings"]]
    assert rc == 1 and codes == ["KB301", "KB302", "KB303", "KB304", "KB307", "KB305", "KB306"]
    rc, out, _ = run(
        [
            "check",
            "--format",
            "json",
            "--select",
            "KB1,KB2",
            "--ignore",
            "KB101",
            "--ignore",
            "dtype-not-supported",
            path,
        ],
        capsys,
    )
    codes = [f["code"] for f in json.loads(out)["findings"]]
    assert codes and all(c[:3] in ("KB1", "KB2") for c in codes)
    assert "KB101" not in codes and "KB107" not in codes
    rc, _, err = run(["check", "--ignore", "KB999", path], capsys)
    assert rc == 2 and "KB999" in err


def test_line_level_ignore_and_bad_ignore_comments(catalog: Catalog) -> None:
    text = HEAD + textwrap.dedent("""\
          - module: m
            operator: npu_rms_norm
            args: {eps: 1.0e-6}          # kb: ignore[KB104]
            tensors:
              self: {dtype: int8}        # kb: ignore[KB1O7]
              gamma: {dtype: int8}       # kb: ignore
        """)
    findings = check_text(text, catalog=catalog)
    assert [(f.line, f.code, f.severity) for f in findings] == [
        (8, "KB107", "error"),
        (8, "KB006", "warning"),
        (9, "KB107", "error"),
        (9, "KB006", "warning"),
    ]


# -- output formats ------------------------------------------------------------------------


def test_json_output_shape(capsys: pytest.CaptureFixture[str], fixture_records: None) -> None:
    rc, out, _ = run(
        [
            "check",
            "--format",
            "json",
            str(CANDIDATES / "seeded_prefetch.yaml"),
            str(CANDIDATES / "clean.yaml"),
        ],
        capsys,
    )
    payload = json.loads(out)
    assert rc == 1 and set(payload) == {"findings", "summary"}
    assert payload["summary"] == {"files": 2, "candidates": 13, "errors": 8, "warnings": 4}
    first = payload["findings"][0]
    assert list(first) == ["file", "line", "column", "code", "severity", "message", "candidate"]
    assert first["file"].endswith("seeded_prefetch.yaml")
    assert (first["line"], first["column"], first["code"], first["candidate"]) == (
        9,
        16,
        "KB401",
        0,
    )
    assert all(f["severity"] in ("error", "warning", "info") for f in payload["findings"])


def test_github_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture_records: None
) -> None:
    odd = tmp_path / "a,b:c.yaml"
    odd.write_text(
        HEAD + "  - {module: m, operator: npu_fused_infer_attention_score}\n"
        "  - {module: m, operator: npu_rms_nrom}\n"
    )
    rc, out, _ = run(["check", "--format", "github", str(odd)], capsys)
    lines = out.splitlines()
    assert rc == 1 and len(lines) == 2
    esc = str(odd).replace(",", "%2C").replace(":", "%3A")
    assert lines[0].startswith(f"::notice file={esc},line=4,col=27,title=KB103::")
    assert lines[1].startswith(f"::error file={esc},line=5,col=27,title=KB101::unknown operator")


def test_github_escapes_message_data() -> None:
    from kb.check.engine import Report
    from kb.lint.findings import Finding
    from kb.text.findings import github

    report = Report([Finding("f.yaml", 1, 2, "KB101", "warning", "50% done\nnext")], 1, 1)
    assert github(report) == "::warning file=f.yaml,line=1,col=2,title=KB101::50%25 done%0Anext\n"


def test_text_output_groups_by_file_and_colours_only_on_request(
    capsys: pytest.CaptureFixture[str],
    fixture_records: None,
) -> None:
    args = ["check", str(CANDIDATES / "seeded.json"), str(CANDIDATES / "seeded_prefetch.yaml")]
    rc, out, _ = run(args, capsys)
    blocks = out.split("\n\n")
    assert rc == 1 and len(blocks) == 3
    assert all(line.startswith(str(CANDIDATES / "seeded.json")) for line in blocks[0].splitlines())
    assert blocks[2] == "10 errors, 4 warnings, 0 info in 2 files, 9 candidates\n"
    assert "\x1b[" not in out  # capsys is not a terminal
    _, coloured, _ = run([*args, "--color", "always"], capsys)
    assert "\x1b[1;31mKB401\x1b[0m" in coloured


def test_pre_commit_hook_matches_candidate_files() -> None:
    import re

    import yaml

    hooks = yaml.safe_load((HERE.parent / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    (hook,) = [h for h in hooks if h["id"] == "kb-check"]
    assert hook["entry"] == "kb check" and hook["language"] == "python"
    files = re.compile(hook["files"])
    assert files.search("candidates.yaml") and files.search("plans/candidates-dsv3.yml")
    assert files.search("candidates.json") and not files.search("kb/records/x.yaml")
