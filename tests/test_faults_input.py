"""Fault injection, hostile input: numbers, YAML scalars, streams, special files, text
that only looks like a comment, absurd shapes and sizes.  Each attack once ended in a
traceback, a hang or a wrong answer (issue 14); each must now end with one clear
message, at its file:line:col when it has one, and the documented exit code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.fault_helpers import HEAD, POINT, REPO, kb, shell

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

H = "7" * 5000  # more digits than Python converts by default
BIG = "1" + "0" * 400  # overflows a float


def check(tmp: Path, text: str, *args: str) -> tuple[int | None, str, str]:
    (tmp / "c.yaml").write_text(text, encoding="utf-8")
    run = kb(tmp, "check", "c.yaml", *args)
    assert run.clean, run.err
    return run.rc, run.out, run.err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (HEAD.replace("version: 1", f"version: {H}"), "c.yaml:1:10: KB001"),
        (
            f"version: 1\ntarget: {{product: atlas-a3, parallel: {{tp: {H}}}}}\ncandidates: []\n",
            "c.yaml:2:44: KB001",
        ),
        (HEAD + POINT.replace("max_size: 64MiB", f"max_size: {H}"), "c.yaml:11:15: KB001"),
        (
            f"version: 1\ntarget: {{product: atlas-a3, torch_npu: {H}}}\ncandidates: []\n",
            "c.yaml:2:40: KB001",
        ),
        (HEAD + POINT.replace("max_size: 64MiB", f"max_size: {BIG}"), "c.yaml:11:15: KB001"),
        (
            HEAD + POINT.replace("shape: [18432, 7168]", f"shape: [{BIG}, 7168]"),
            "c.yaml:9:22: KB001",
        ),
        (
            HEAD
            + f"  - {{module: m, operator: npu_moe_gating_top_k_softmax, args: {{k: {BIG}}}}}\n",
            "c.yaml:4:67: KB001",
        ),
        (HEAD.replace("version: 1", f"version: '{H}'"), "c.yaml:1:10: KB002"),
        (
            f"version: 1\ntarget: {{product: atlas-a3, torch_npu: '2.{H}'}}\ncandidates: []\n",
            "c.yaml:2:40: KB005",
        ),
        # YAML 1.1 reads 1.0e400 (no exponent sign) as text; as a float it would be inf
        (
            HEAD + "  - {module: m, operator: npu_rms_norm, args: {epsilon: 1.0e400}}\n",
            "c.yaml:4:57: KB106",
        ),
    ],
    ids=[
        "version",
        "tp",
        "max_size",
        "torch_npu",
        "max_size-10**400",
        "shape-10**400",
        "args-10**400",
        "version-text",
        "torch_npu-text",
        "float-text-overflow",
    ],
)
def test_unbounded_numbers_are_findings_at_their_position(
    tmp_path: Path, text: str, where: str
) -> None:
    rc, out, _ = check(tmp_path, text)
    assert rc == 1 and out.startswith(where), out[:300]
    assert max(len(line) for line in out.splitlines()) < 400, "the number is not echoed whole"


def test_a_huge_torch_npu_flag_is_a_usage_error(tmp_path: Path) -> None:
    run = kb(tmp_path, "list", "--torch-npu", f"2.{H}")
    assert run.clean and run.rc == 2
    assert "is not a torch_npu release number" in run.err and "sys.set_int" not in run.err
    assert len(run.err) < 300


def test_doctor_reads_a_huge_metadata_version_as_unknown(tmp_path: Path) -> None:
    site = tmp_path / "site"
    schemas = site / "torch_npu" / "csrc" / "aten"
    schemas.mkdir(parents=True)
    (schemas / "npu_native_functions_by_codegen.yaml").write_text(
        "custom:\n  - func: npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)\n"
    )
    meta = site / "torch_npu-2.5.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Name: torch_npu\nVersion: 2.{H}\n")
    run = kb(tmp_path, "doctor", "--path", str(site))
    assert run.clean and run.rc in (0, 1), run.err
    assert "torch_npu (version unknown)" in run.out


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("version: 1\nmodel: 2024-13-45\ntarget: {product: atlas-a3}\ncandidates: []\n", None),
        (
            "version: 1\nmodel: !!binary 'a'\ntarget: {product: atlas-a3}\ncandidates: []\n",
            "c.yaml:2:8: KB001 error: bad scalar",
        ),
        (
            "version: 1\nmodel: !!python/name:os.system x\ntarget: {product: atlas-a3}\ncandidates: []\n",
            "c.yaml:2:8: KB001",
        ),
        (
            HEAD + "  - {module: m, operator: npu_rms_norm, args: {epsilon: 1.0e+999}}\n",
            "c.yaml:4:57: KB001",
        ),
    ],
    ids=["bad-date", "bad-base64", "python-tag", "float-overflow"],
)
def test_yaml_scalars_never_raise(tmp_path: Path, text: str, where: str | None) -> None:
    rc, out, _ = check(tmp_path, text)
    if where is None:  # dates stay text: a model named 2024-13-45 is just a name
        assert rc == 0 and "no findings" in out
    else:
        assert rc == 1 and out.startswith(where), out[:300]


def test_nul_and_control_characters_are_reported_where_they_are(tmp_path: Path) -> None:
    late_nul = (
        HEAD
        + "  - module: m\n    operator: npu_rms_norm\n"
        + "# pad\n" * 2000
        + "  - module: x\x00\n"
    )
    rc, out, _ = check(tmp_path, late_nul)
    assert rc == 1 and out.startswith("c.yaml:2006:14: KB001 error: control character U+0000")
    rc, out, _ = check(tmp_path, HEAD + "  - module: m\n    notes: a\x07b\n")
    assert rc == 1 and out.startswith("c.yaml:5:13: KB001 error: control character U+0007")


def test_output_to_a_full_disk_ends_cleanly(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(HEAD + "  - {module: m, operator: nope_op}\n")
    run = shell(tmp_path, "$KB check c.yaml > /dev/full")
    assert run.clean and run.rc == 2
    assert run.err.strip() == "kb check: cannot write the output: No space left on device"


def test_closed_stdin_and_stdout_end_cleanly(tmp_path: Path) -> None:
    run = shell(tmp_path, "$KB check - <&-")
    assert run.clean and run.rc == 2 and "standard input is closed" in run.err
    run = shell(tmp_path, "$KB rules >&-")
    assert run.clean and run.rc == 2 and "standard output is closed" in run.err


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    run = shell(tmp_path, "$KB rules | head -c 10 > /dev/null; echo ${PIPESTATUS[0]}")
    assert run.clean and run.out.strip() == "0", run.err


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_special_files_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    # a FIFO without a writer would block forever: the subprocess bound ends that hang
    run = kb(tmp_path, "check", "pipe.yaml", "/dev/zero", timeout=120)
    assert run.rc == 2, "a FIFO without a writer must not block"
    assert "pipe.yaml: is a FIFO (named pipe)" in run.err
    assert "/dev/zero: is a character device" in run.err


def test_ignore_words_inside_values_are_data_not_comments(tmp_path: Path) -> None:
    for value in ("'x # kb: ignore[KB]'", '"x # kb: ignore[KB101]"'):
        # on the candidate's first line, a real comment would silence the whole candidate
        rc, out, _ = check(tmp_path, HEAD + f"  - module: {value}\n    operator: nope_op\n")
        assert rc == 1 and "KB101 error: unknown operator 'nope_op'" in out, value
    block = "  - operator: nope_op  # kb: ignore[KB999]\n    module: |\n      x # kb: ignore[KB]\n"
    rc, out, _ = check(tmp_path, HEAD + block)
    assert "KB006" in out and "4:" in out and "6:" not in out, out
    # a real comment still works
    rc, out, _ = check(
        tmp_path, HEAD + "  - operator: nope_op  # kb: ignore[KB101]\n    module: m\n"
    )
    assert rc == 0, out


@pytest.mark.parametrize("shape", ["[-18432, 7168]", "[0, 7168]", "[18432, -1]"])
def test_zero_or_negative_dimensions_are_findings(tmp_path: Path, shape: str) -> None:
    rc, out, _ = check(tmp_path, HEAD + POINT.replace("[18432, 7168]", shape))
    assert rc == 1 and "KB002 error: candidates[0].weight.shape[" in out
    assert "a dimension is a positive integer" in out
    rc, out, _ = check(
        tmp_path,
        HEAD + "  - module: m\n    operator: npu_rms_norm\n"
        f"    tensors:\n      self: {{dtype: bfloat16, shape: {shape}}}\n",
    )
    assert rc == 1 and "candidates[0].tensors.self.shape[" in out


def test_keys_1_and_true_are_different_keys(tmp_path: Path) -> None:
    rc, out, _ = check(
        tmp_path,
        HEAD + "  - {module: m, operator: npu_moe_gating_top_k_softmax, args: {1: a, true: b}}\n",
    )
    assert "duplicate key" not in out
    rc, out, _ = check(
        tmp_path, HEAD + "  - {module: m, operator: npu_rms_norm, args: {1: a, 1: b}}\n"
    )
    assert rc == 1 and "KB001 error: duplicate key 1" in out


def test_a_giant_size_expression_is_refused_at_once(tmp_path: Path) -> None:
    factors = "*".join(["7168"] * 100_000)
    # evaluated, the product has 400,000 digits: refused before, within kb()'s hang bound
    rc, out, _ = check(tmp_path, HEAD + POINT.replace("max_size: 64MiB", f"max_size: '{factors}'"))
    assert rc == 1 and "KB002 error: max_size:" in out


def test_size_arithmetic_and_unknown_names(tmp_path: Path) -> None:
    ok = HEAD + POINT.replace("max_size: 64MiB", "max_size: '(7168 * 18432 * 2) // 2 // 2'")
    assert check(tmp_path, ok)[0] == 0
    unknown = HEAD + POINT.replace("max_size: 64MiB", "max_size: 2 * MAX_PREFETCH_BYTES")
    rc, out, _ = check(tmp_path, unknown)
    assert rc == 0 and "KB40" not in out, "an unknown size is not a finding"
    above = HEAD + POINT.replace("max_size: 64MiB", "max_size: 18432 * 7168 * 2 + GiB")
    rc, out, _ = check(tmp_path, above)
    assert "KB405 warning" in out


def test_ten_thousand_candidates_are_checked_not_refused(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_check import detailed_candidate_list

    text = detailed_candidate_list(10_000)
    assert len(text) > 3_000_000
    rc, out, _ = check(tmp_path, text, "--select", "KB001")
    assert rc == 0 and "in 1 file, 10000 candidates" in out, out[-300:]


def test_aliases_are_still_counted(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for name, prev in zip("bcdefgh", "abcdefg", strict=True):
        bomb += f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    rc, out, _ = check(tmp_path, bomb)
    assert rc == 1 and "alias bomb" in out


def test_show_of_a_huge_name_answers_at_once(tmp_path: Path) -> None:
    # a quadratic "did you mean" over 100,000 characters would outlast kb()'s hang bound
    run = kb(tmp_path, "show", ("npu_mla_prolog_" * 7000)[:100_000])
    assert run.clean and run.rc == 1 and "no record named" in run.err
    assert len(run.err) < 300, "the name is not echoed whole"
