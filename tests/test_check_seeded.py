"""Candidate lists with seeded defects: every defect found on its line and column with
the right code and severity, nothing else; a sound list finds nothing.

The lists live in tests/fixtures/candidates/ (each defect is commented with the code
it must produce) and are judged against the small fixture records, so these
expectations do not move while the shipped records grow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.api.check import Finding, check_paths
from kb.catalog.compiled import Catalog, open_catalog
from kb.core.paths import PACKAGE_DIR

HERE = Path(__file__).parent
FIXTURE_RECORDS = HERE / "fixtures" / "check_records"
CANDIDATES = HERE / "fixtures" / "candidates"

Expected = list[tuple[int, int, str, str, int | None]]

SEEDED_FUSION: Expected = [
    (12, 15, "KB101", "error", 0),
    (15, 15, "KB102", "warning", 1),
    (18, 15, "KB109", "error", 2),
    (20, 19, "KB106", "error", 2),
    (21, 26, "KB109", "error", 2),
    (22, 7, "KB207", "error", 2),
    (23, 7, "KB104", "error", 2),
    (25, 44, "KB108", "error", 2),
    (29, 12, "KB105", "warning", 3),
    (31, 21, "KB107", "error", 3),
    (36, 15, "KB106", "error", 4),
    (42, 18, "KB204", "error", 5),
    (46, 13, "KB301", "error", 6),
    (50, 13, "KB302", "error", 7),
    (51, 12, "KB303", "error", 7),
    (52, 24, "KB110", "info", 7),
    (55, 15, "KB304", "error", 8),
    (61, 25, "KB307", "warning", 9),
    (64, 15, "KB101", "error", 10),
    (64, 15, "KB305", "warning", 10),
    (70, 15, "KB103", "info", 12),
    (71, 24, "KB306", "error", 12),
    (76, 12, "KB205", "warning", 14),
]

SEEDED_PREFETCH: Expected = [
    (9, 16, "KB401", "error", 0),
    (22, 45, "KB402", "error", 1),
    (28, 13, "KB410", "warning", 2),
    (31, 42, "KB403", "warning", 2),
    (32, 15, "KB405", "warning", 2),
    (34, 21, "KB408", "error", 2),
    (36, 5, "KB409", "error", 3),
    (42, 15, "KB404", "error", 3),
    (43, 13, "KB407", "error", 3),
    (45, 5, "KB407", "error", 4),
    (51, 17, "KB409", "error", 4),
    (52, 15, "KB406", "warning", 4),
]

SEEDED_JSON: Expected = [
    (6, 64, "KB108", "error", 0),
    (8, 35, "KB005", "error", 1),
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return open_catalog(FIXTURE_RECORDS)


def _shape(findings: list[Finding]) -> Expected:
    return [(f.line, f.column, f.code, f.severity, f.candidate) for f in findings]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("seeded_fusion.yaml", SEEDED_FUSION),
        ("seeded_prefetch.yaml", SEEDED_PREFETCH),
        ("seeded.json", SEEDED_JSON),
    ],
)
def test_every_seeded_defect_is_found_exactly(
    name: str, expected: Expected, catalog: Catalog
) -> None:
    path = CANDIDATES / name
    findings = check_paths([path], catalog=catalog)
    assert _shape(findings) == expected
    assert {f.file for f in findings} == {str(path)}


def _message(findings: list[Finding], line: int, code: str) -> str:
    (hit,) = [f for f in findings if f.line == line and f.code == code]
    return hit.message


def test_messages_say_what_to_do(catalog: Catalog) -> None:
    found = check_paths([CANDIDATES / "seeded_fusion.yaml"], catalog=catalog)
    assert "did you mean npu_rms_norm" in _message(found, 12, "KB101")
    assert "use npu_mla_prolog_v3" in _message(found, 15, "KB102")
    assert "only ascend-950" in _message(found, 18, "KB109")
    assert "PA_BSND, PA_NZ" in _message(found, 20, "KB106")
    assert "torch_npu 2.10.0.post4 has it" in _message(found, 22, "KB207")
    assert "did you mean cache_index" in _message(found, 23, "KB104")
    assert "npu_format_cast" in _message(found, 25, "KB108")
    assert "above the maximum 1024" in _message(found, 36, "KB106")
    assert "did you mean mla-absorb-decode" in _message(found, 51, "KB303")
    assert "candidate on line 10" in _message(found, 64, "KB305")
    assert "on line 65" in _message(found, 71, "KB306")
    assert "sparse_mode=0" in _message(found, 61, "KB307")

    prefetch = check_paths([CANDIDATES / "seeded_prefetch.yaml"], catalog=catalog)
    assert "252 MiB" in _message(prefetch, 32, "KB405")
    assert "start at 112 MiB" in _message(prefetch, 52, "KB406")
    assert "first is on line 16" in _message(prefetch, 28, "KB410")
    assert "norm class" in _message(prefetch, 9, "KB401")


def test_candidate_level_ignore_silences_only_its_codes(catalog: Catalog) -> None:
    found = check_paths([CANDIDATES / "seeded_fusion.yaml"], catalog=catalog)
    ignored = [f for f in found if f.candidate == 13]
    assert ignored == []  # KB102 ignored on the candidate's first line, phases do not restrict
    unlisted = check_paths([CANDIDATES / "seeded_fusion.yaml"], catalog=catalog, select=["KB102"])
    assert [f.line for f in unlisted] == [15]  # the ignored one stays silent under --select
    unignored = check_paths([CANDIDATES / "seeded_fusion.yaml"], catalog=catalog, ignore=["KB2"])
    assert not any(f.code.startswith("KB2") for f in unignored)


def test_not_applicable_candidates_are_not_judged_on_fit(catalog: Catalog) -> None:
    found = check_paths([CANDIDATES / "seeded_fusion.yaml"], catalog=catalog)
    assert [f.code for f in found if f.candidate == 6] == ["KB301"]  # no KB205 for re_routing


def test_clean_list_has_no_findings_on_fixture_records(catalog: Catalog) -> None:
    assert check_paths([CANDIDATES / "clean.yaml"], catalog=catalog) == []


def test_clean_list_has_no_errors_or_warnings_on_shipped_records() -> None:
    shipped = open_catalog(PACKAGE_DIR / "records")
    found = check_paths([CANDIDATES / "clean.yaml"], catalog=shipped)
    assert [f for f in found if f.severity != "info"] == []
