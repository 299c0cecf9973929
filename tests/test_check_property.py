"""No input makes ``kb check`` crash: random text, random bytes and random candidate-list
structures give a list of well-formed findings, or a clean InputError for bytes that
are not text.  Hypothesis shrinks any counter-example to a small file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.api.check import Finding, InputError, check_paths, check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.check.parse import FUSION_FIELDS, PREFETCH_FIELDS, TARGET_FIELDS, TENSOR_FIELDS
from kb.rules import BY_CODE

FIXTURE_RECORDS = Path(__file__).parent / "fixtures" / "check_records"
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_CATALOG: list[Catalog] = []


def catalog() -> Catalog:
    if not _CATALOG:
        _CATALOG.append(open_catalog(FIXTURE_RECORDS))
    return _CATALOG[0]


def assert_well_formed(findings: list[Finding], text: str, candidates: int | None = None) -> None:
    lines = len(re.split(r"\r\n|\r|\n|\x85|\u2028|\u2029", text))  # line breaks as YAML counts them
    for f in findings:
        assert f.code in BY_CODE and BY_CODE[f.code].severity == f.severity
        assert 1 <= f.line <= lines + 1 and f.column >= 1
        assert isinstance(f.message, str) and f.message
        assert f.candidate is None or (isinstance(f.candidate, int) and f.candidate >= 0)
        if candidates is not None and f.candidate is not None:
            assert f.candidate < candidates


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "npu_rms_norm",
            "npu_mla_prolog_v3",
            "npu_prefetch",
            "bf16",
            "nz",
            "PA_NZ",
            "atlas-a3",
            "A2",
            "decode",
            "both",
            "prefetch",
            "128MiB",
            "-1",
            "2.9.1",
            "mla-absorb-decode",
            "matmul",
            "swiglu",
            "all_reduce",
            "needs-prerequisite",
            "not-applicable",
            "w8a8",
            "torch.bfloat16",
            "int8",
            "FRACTAL_NZ",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def fields(names: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


tensor_specs = st.dictionaries(
    st.sampled_from(
        ["self", "gamma", "token_x", "weight_dq", "x", "block_table", "cache_index", "bogus"]
    ),
    st.one_of(st.none(), fields(TENSOR_FIELDS), values),
    max_size=3,
)
fusion = fields(FUSION_FIELDS).flatmap(
    lambda d: st.fixed_dictionaries({"tensors": tensor_specs}).map(lambda t: {**d, **t})
)
prefetch = fields(PREFETCH_FIELDS).map(lambda d: {**d, "kind": "prefetch"})
documents = st.fixed_dictionaries(
    {"candidates": st.lists(st.one_of(fusion, prefetch, values), max_size=6)},
    optional={
        "version": values,
        "target": st.one_of(fields(TARGET_FIELDS), values),
        "model": values,
        "bogus": values,
    },
)


@SETTINGS
@given(st.text(max_size=400))
def test_random_text_gives_findings_not_exceptions(text: str) -> None:
    findings = check_text(text, catalog=catalog())
    assert_well_formed(findings, text)


@SETTINGS
@given(documents)
def test_random_candidate_structures_give_findings(doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    findings = check_text(text, catalog=catalog())
    candidates = doc["candidates"]
    assert_well_formed(findings, text, len(candidates))


@SETTINGS
@given(documents)
def test_random_structures_as_json(doc: dict[str, Any]) -> None:
    import json

    try:
        text = json.dumps(doc, allow_nan=False)
    except ValueError:
        return  # JSON has no NaN/Infinity; YAML covers those
    assert_well_formed(check_text(text, catalog=catalog()), text, len(doc["candidates"]))


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_give_findings_or_a_clean_input_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("bytes") / "list.yaml"
    path.write_bytes(data)
    try:
        findings = check_paths([path], catalog=catalog())
    except InputError as exc:
        assert exc.message and str(path) in str(exc)
        return
    assert_well_formed(findings, data.decode("utf-8-sig", errors="replace"))


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            [
                "version: 1",
                "target:",
                "  product: atlas-a3",
                "candidates:",
                "  - module: m",
                "    operator: npu_rms_norm",
                "    args: {",
                "    tensors:",
                "      self: {dtype: bf16}",
                "  - kind: prefetch",
                "    max_size: 0",
                "    dependency:",
                "&a [*a]",
                "- *x",
                "'",
                "  # kb: ignore[KB1]",
                "\t- x",
                "...",
                "---",
                "? [a]",
                ": b",
            ]
        ),
        max_size=20,
    )
)
def test_random_line_soups(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    assert_well_formed(check_text(text, catalog=catalog()), text)
