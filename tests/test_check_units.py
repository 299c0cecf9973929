"""The checker's small pieces: byte sizes, versions, three-valued rule conditions,
ignore comments and the prefetch weight arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.check.conditions import fires, holds, same, violations
from kb.check.rules.prefetch import weight_bytes
from kb.check.values import SizeError, parse_size, parse_version, version_before
from kb.lint.model import Candidate, Target, TensorSpec, Weight
from kb.lint.suppress import ignore_comments


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (128, 128),
        (1.0e3, 1000),
        ("128MiB", 128 * 2**20),
        ("18 MB", 18_000_000),
        ("64M", 64 * 2**20),
        ("1.5GiB", 3 * 2**29),
        ("2kb", 2000),
        ("4KiB", 4096),
        ("1_024", 1024),
        ("7168*18432*2", 264241152),
        ("16 * 1MiB", 16 * 2**20),
        ("-5", -5),
        ("0", 0),
        ("1e3", 1000),
        ("18432 * 7168 * 2 // 4", 18432 * 7168 * 2 // 4),
        ("64 * MiB", 64 * 2**20),
        ("(7168*18432*2)//2", 7168 * 18432),
        ("2 * (1 GiB - 512 MiB)", 2**30),
        ("3 * K + B", 3073),
        ("- (4 + 4) * KB", -8000),
        ("1 + 2 * 3", 7),
        ("100 // 7 * 7", 98),
    ],
)
def test_parse_size(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "text", ["MAX_PREFETCH_BYTES", "2 * MAX_PREFETCH_BYTES // 4", "cfg_size * MiB", "lots", "m * 2"]
)
def test_names_make_a_size_unknown_not_wrong(text: str) -> None:
    assert parse_size(text) is None


@pytest.mark.parametrize(
    "text",
    [
        True,
        "5 lots",
        "12 parsecs",
        1.5,
        float("inf"),
        [1],
        None,
        "1e400",
        "1/2",
        "7 // 0",
        "(1 + 2",
        "1 +",
        "1.5 B",
        "9" * 21,
        2**63,
        "*".join(["7168"] * 100_000),
        "(" * 40 + "1" + ")" * 40,
        "7168x18432",
        "2 ** 10",
    ],
)
def test_parse_size_refuses(text: object) -> None:
    with pytest.raises(SizeError):
        parse_size(text)


def test_versions() -> None:
    assert parse_version("2.7.1") == ((2, 7, 1, 1, 0, 0), 3)
    assert parse_version("v2.7") == ((2, 7, 0, 1, 0, 0), 2)
    assert parse_version("2.1.0.post8+cpu") == ((2, 1, 0, 1, 0, 8), 3)
    assert parse_version("banana") is None
    assert version_before("2.7.1rc1", "2.7.1") and version_before("2.7.1", "2.7.1.post2")
    assert version_before("2.1.0.post8", "2.1.0.post10")  # not string order
    assert version_before("2.7", "2.7.1") is False  # two parts compare on two parts
    assert version_before("2.6", "2.7.1") is True
    assert version_before("x", "2.7.1") is None


def cand(**kw: object) -> Candidate:
    c = Candidate(index=0, kind="fusion")
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def test_conditions_are_three_valued() -> None:
    t = Target(product="atlas-a2")
    c = cand(args={"mode": 2, "flag": None}, tensors={"w": TensorSpec(dtype="int8"), "z": None})
    assert holds({"arg": "mode", "equals": 2}, c, t) is True
    assert holds({"arg": "mode", "in": [0, 1]}, c, t) is False
    assert holds({"arg": "mode", "not_in": [0, 1]}, c, t) is True
    assert holds({"arg": "other", "equals": 2}, c, t) is None  # not stated
    assert holds({"arg": "flag", "equals": 2}, c, t) is None  # null: the default, unknown
    assert holds({"tensor": "w", "dtype_in": ["int8"]}, c, t) is True
    assert holds({"tensor": "w", "dtype_in": ["int8"], "format_in": ["ND"]}, c, t) is None
    assert holds({"tensor": "z", "dtype_in": ["int8"]}, c, t) is False  # not passed
    assert holds({"present": "w"}, c, t) is True and holds({"present": "q"}, c, t) is None
    assert holds({"absent": "z"}, c, t) is True and holds({"absent": "w"}, c, t) is False
    assert holds({"product": ["atlas-a2"]}, c, t) is True
    assert holds({"product": ["atlas-a2"]}, c, Target()) is None
    assert holds({"quantization": ["w8a8-dynamic"]}, c, Target(quantization="w8a8-dynamic")) is True
    rule = {"when": [{"arg": "mode", "equals": 2}, {"arg": "other", "equals": 1}]}
    assert not fires(rule, c, t)  # one clause unknown: silent
    assert fires({"when": []}, c, t)


def test_same_means_what_a_user_means() -> None:
    assert same(2, 2.0) and same("2", 2) and same("1e-6", 1e-6)
    assert not same(True, 1) and not same("PA_NZ", "pa_nz")


def test_violations_of_a_fired_rule() -> None:
    record = {
        "rules": [
            {
                "id": "r",
                "when": [{"arg": "mode", "equals": 2}],
                "require": ["s1", "s2", "s3"],
                "forbid": ["f"],
                "dtypes": {"w": ["int8"]},
                "values": {"q": [1]},
                "products": ["ascend-950"],
                "message": "m",
            }
        ]
    }
    c = cand(
        args={"mode": 2, "q": 0, "f": 1, "s1": None},
        tensors={"w": TensorSpec(dtype="bfloat16"), "s2": TensorSpec()},
    )
    kinds = sorted(v.kind for v in violations(record, c, Target(product="atlas-a3")))
    assert kinds == ["dtype", "forbid", "product", "require-null", "require-unstated", "value"]
    unstated = [v for v in violations(record, c, Target()) if v.kind == "require-unstated"]
    assert unstated[0].path == ("args", "mode") and "s3" in unstated[0].detail


def test_ignore_comments() -> None:
    text = "a: 1  # kb: ignore[KB101, kb2]\nb: 2 # KB: Ignore[KB4]\nc: '# not a comment'\n# kb: ignore\n"
    got = [(i.line, i.codes) for i in ignore_comments(text)]
    assert got == [(1, ("KB101", "KB2")), (2, ("KB4",)), (4, ())]
    assert ignore_comments("a: 1\n") == []


def test_weight_bytes() -> None:
    def pt(shape: list[object], dtype: str | None) -> Candidate:
        return cand(kind="prefetch", weight=Weight(shape=shape, dtype=dtype))

    assert weight_bytes(pt([18432, 7168], "bfloat16")) == 264241152
    assert weight_bytes(pt([7168, 4096], "int4")) == 7168 * 2048
    assert weight_bytes(pt(["H", 7168], "bfloat16")) is None  # symbolic: unknown
    assert weight_bytes(pt([18432, 7168], None)) is None
    assert weight_bytes(cand(kind="prefetch")) is None


FIXTURE_RECORDS = Path(__file__).parent / "fixtures" / "check_records"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("2.1.0", "first ships in torch_npu 2.7.1; the target is 2.1.0 (read as 2.1.0.post8)"),
        (
            "2.8.0.post2",
            "missing from torch_npu 2.8.0.post2 (it ships from 2.7.1): use torch_npu 2.9.0",
        ),
        ("2.9", None),  # the newest harvested 2.9.x has it
        ("9.9.9", None),  # a line never harvested: judged on first/last only
        ("2.9.1", None),
    ],
)
def test_release_matching_for_the_version_rule(typed: str, expected: str | None) -> None:
    from kb.api.check import check_text
    from kb.catalog.compiled import open_catalog

    text = (
        f'version: 1\ntarget: {{product: atlas-a3, torch_npu: "{typed}"}}\ncandidates:\n'
        "  - {module: m, operator: npu_mla_prolog_v3}\n"
    )
    found = check_text(text, catalog=open_catalog(FIXTURE_RECORDS), select=["KB202"])
    assert [f.message for f in found if expected is None] == []
    if expected is not None:
        assert len(found) == 1 and expected in found[0].message
