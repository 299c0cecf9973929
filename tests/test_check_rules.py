"""Every checker rule's own snippets are its tests: the failing one finds exactly that
code, the fixed one finds nothing — against the fixture records and the shipped ones.
Each runs with only its own rule selected (ruff's habit), so a new rule never breaks
another rule's examples; a failure names each finding (line, code, message).

Also the registry's promises to the site and ``kb rules``: stable, unique codes grouped
by prefix, and every documentation attribute filled in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.api.check import check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.cli import main
from kb.core.paths import PACKAGE_DIR
from kb.lint.findings import SEVERITIES
from kb.lint.unit import RuleUnit
from kb.rules import RULES, expand, get

FIXTURE_RECORDS = Path(__file__).parent / "fixtures" / "check_records"
#: Rules whose snippets are candidate lists; the scan rules' Python snippets are scanned
#: in tests/test_scan_rules.py.
CHECK_RULES = [r for r in RULES if r.language == "yaml"]
IDS = [r.code for r in CHECK_RULES]


@pytest.fixture(scope="module")
def fixture_catalog() -> Catalog:
    return open_catalog(FIXTURE_RECORDS)


@pytest.fixture(scope="module")
def shipped_catalog() -> Catalog:
    return open_catalog(PACKAGE_DIR / "records")


def _named(findings: list[Any]) -> str:
    return "\n".join(f"  line {f.line}: {f.code} {f.severity}: {f.message}" for f in findings)


def _assert_fails_with_exactly(rule: RuleUnit, catalog: Catalog) -> None:
    findings = check_text(rule.fail, "fail.yaml", catalog=catalog, select=[rule.code])
    assert findings, f"{rule.code}: the failing snippet produced no {rule.code} finding"
    assert {f.code for f in findings} == {rule.code}, (
        f"{rule.code}: the failing snippet (only {rule.code} selected) found:\n" + _named(findings)
    )
    wrong = [f for f in findings if f.severity != rule.severity]
    assert not wrong, f"{rule.code} is a {rule.severity}, but:\n" + _named(wrong)


def _assert_fix_is_clean(rule: RuleUnit, catalog: Catalog) -> None:
    findings = check_text(rule.fix, "fix.yaml", catalog=catalog, select=[rule.code])
    assert findings == [], (
        f"{rule.code}: the fixed snippet (only {rule.code} selected) still finds:\n"
        + _named(findings)
    )


def test_a_selected_rule_is_the_only_one_that_reports() -> None:
    """What the tests above rely on: with one rule selected, no other rule reports."""
    text = (
        "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"
        "  - module: m\n    phase: decode\n    operator: npu_no_such_operator_here\n"
    )
    catalog = open_catalog(FIXTURE_RECORDS)
    everything = {f.code for f in check_text(text, "x.yaml", catalog=catalog)}
    assert "KB101" in everything
    only = check_text(text, "x.yaml", catalog=catalog, select=["KB101"])
    assert {f.code for f in only} == {"KB101"}
    assert check_text(text, "x.yaml", catalog=catalog, select=["KB104"]) == []


@pytest.mark.parametrize("rule", CHECK_RULES, ids=IDS)
def test_fail_snippet_fixture_records(rule: RuleUnit, fixture_catalog: Catalog) -> None:
    _assert_fails_with_exactly(rule, fixture_catalog)


@pytest.mark.parametrize("rule", CHECK_RULES, ids=IDS)
def test_fix_snippet_fixture_records(rule: RuleUnit, fixture_catalog: Catalog) -> None:
    _assert_fix_is_clean(rule, fixture_catalog)


def _names_missing(snippet: str, catalog: Catalog, rule: RuleUnit) -> list[str]:
    """Operators and chains a snippet relies on that the shipped records lack (yet)."""
    try:
        data = yaml.safe_load(snippet)
    except yaml.YAMLError:
        return []
    missing = []
    for cand in (data or {}).get("candidates") or []:
        if not isinstance(cand, dict):
            continue
        op, chain = cand.get("operator"), cand.get("chain")
        if op and rule.code != "KB101" and catalog.get(op) is None:
            missing.append(op)
        if chain and rule.code != "KB303" and catalog.get(chain) is None:
            missing.append(chain)
    return missing


@pytest.mark.parametrize("rule", CHECK_RULES, ids=IDS)
def test_fail_snippet_shipped_records(rule: RuleUnit, shipped_catalog: Catalog) -> None:
    missing = _names_missing(rule.fail, shipped_catalog, rule)
    if missing:
        pytest.skip(f"shipped records lack {missing} (the snippet is checked on the fixtures)")
    _assert_fails_with_exactly(rule, shipped_catalog)


@pytest.mark.parametrize("rule", CHECK_RULES, ids=IDS)
def test_fix_snippet_shipped_records(rule: RuleUnit, shipped_catalog: Catalog) -> None:
    missing = _names_missing(rule.fix, shipped_catalog, rule)
    if missing:
        pytest.skip(f"shipped records lack {missing} (the snippet is checked on the fixtures)")
    _assert_fix_is_clean(rule, shipped_catalog)


def test_codes_are_unique_stable_and_grouped() -> None:
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    assert codes == sorted(codes)
    assert all(re.fullmatch(r"KB[0-6]\d\d", c) for c in codes)
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n) for n in names)
    groups = {c[:3] for c in codes}
    assert {"KB0", "KB1", "KB2", "KB3", "KB4", "KB5"} <= groups


@pytest.mark.parametrize("rule", CHECK_RULES, ids=IDS)
def test_rule_documentation_is_complete(rule: RuleUnit) -> None:
    assert rule.severity in SEVERITIES
    assert rule.summary.endswith(".") and len(rule.summary) <= 130
    assert len(rule.why) > 60 and rule.why.endswith(".")
    assert rule.fail != rule.fix
    for snippet in (rule.fail, rule.fix):
        assert snippet.endswith("\n")
        assert snippet.startswith("version: 1\n")
    yaml.safe_load(rule.fix)  # every fixed snippet is valid YAML


def test_every_rule_class_is_registered() -> None:
    def subclasses(cls: type[RuleUnit]) -> list[type[RuleUnit]]:
        out: list[type[RuleUnit]] = []
        for sub in cls.__subclasses__():
            out += [sub, *subclasses(sub)]
        return out

    defined = {c.code for c in subclasses(RuleUnit) if c.code}
    assert defined == {r.code for r in RULES}


def test_checks_named_by_the_product_design_exist() -> None:
    """PRODUCT.md's list of checks, each mapped to the rule that does it."""
    needed = {
        "unknown-operator",
        "deprecated-operator",
        "product-not-supported",
        "unknown-argument",
        "value-not-allowed",
        "dtype-not-supported",
        "format-not-supported",
        "operator-rule",
        "quantization-not-supported",
        "torch-npu-too-old",
        "not-applicable-without-evidence",
        "needs-prerequisite-without-prerequisites",
        "unknown-chain",
        "operator-outside-chain",
        "duplicate-candidate",
        "prefetch-target-not-weight-heavy",
        "prefetch-unsafe-window",
        "prefetch-max-size-not-positive",
        "prefetch-max-size-above-weight",
        "prefetch-max-size-above-conservative",
        "prefetch-missing-switch",
        "prefetch-switch-defaults-on",
        "prefetch-graph-mode-without-dependency",
        "prefetch-several-unvalidated",
        "syntax",
        "wrong-type",
        "unknown-field",
        "missing-field",
    }
    assert needed <= {r.name for r in RULES}


def test_patterns_expand_codes_prefixes_and_names() -> None:
    assert expand(["kb4", "unknown-operator", "KB201,KB3"]) == ("KB4", "KB101", "KB201", "KB3")
    with pytest.raises(ValueError, match="KB9"):
        expand(["KB9"])
    assert get("kb104") is get("unknown-argument") is not None
    assert get("KB999") is None


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_kb_rules_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["rules"], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == len(RULES)
    assert lines[0].startswith("KB001  error") and "syntax" in lines[0]


def test_kb_rules_explains_one(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["rules", "KB104"], capsys)
    assert rc == 0
    rule = get("KB104")
    assert rule is not None
    assert out.startswith("KB104  unknown-argument  (error)")
    for part in ("Why:", "Fails:", "Fixed:", "args: {eps: 1.0e-6}", "args: {epsilon: 1.0e-6}"):
        assert part in out


def test_kb_rules_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["rules", "--format", "json"], capsys)
    listing: dict[str, Any] = json.loads(out)
    assert rc == 0 and [r["code"] for r in listing["rules"]] == [r.code for r in RULES]
    assert set(listing["rules"][0]) == {
        "code",
        "name",
        "severity",
        "summary",
        "why",
        "fail",
        "fix",
        "fronts",
        "language",
    }
    scan_only = [r["code"] for r in listing["rules"] if r["fronts"] == ["scan"]]
    assert scan_only and all(c.startswith(("KB5", "KB6")) for c in scan_only)
    rc, out, _ = _run(["rules", "prefetch-missing-switch", "--format", "json"], capsys)
    assert rc == 0 and json.loads(out)["code"] == "KB407"


def test_kb_rules_prefix_and_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["rules", "KB4"], capsys)
    assert rc == 0
    assert out.count("Fails:") == sum(1 for r in RULES if r.code.startswith("KB4"))
    rc, _, err = _run(["rules", "KB41O"], capsys)
    assert rc == 1 and "no rule 'KB41O'" in err and "did you mean" in err
