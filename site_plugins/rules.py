"""Checker rule pages, generated from the same rule units the checker runs.

Each unit (``kb.rules.RULES``) carries its code, name, severity, one-line
summary, why it matters, and a failing and a fixed candidate-list snippet; the page
shows exactly those, so the documentation cannot drift from the checker.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from typing import Any

from site_plugins import build_cache, md
from site_plugins.common import RuleUnit, badge, h1, join_sections, rule_path

REGISTRY = "kb.rules"
log = logging.getLogger("mkdocs.plugins.kb-records")


def load_rules(module: str = REGISTRY) -> list[RuleUnit]:
    """The checker's rule units; none while the checker is not part of this tree."""
    try:
        registry = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return []
        raise
    return list(registry.RULES)


def check_examples(
    rules: Sequence[RuleUnit], catalog: Any, records: Sequence[dict[str, Any]] | None = None
) -> dict[str, str]:
    """What ``kb check`` (candidate lists) or ``kb scan`` (Python) prints for each rule's
    failing example, run at build time.

    Shown on the rule page, so the example output is the tool's, not a copy of it.  A
    report is reused from the last build while the code, the snippet and every record
    it read are the same (:mod:`site_plugins.build_cache`); while the catalog's whole
    content is what the stored reports were last proven against, no read is compared.
    ``records``: every body of the catalog, when the caller has them decoded already.
    """
    if not rules:
        return {}
    name = build_cache.examples_name(catalog)
    stored = build_cache.load(name)
    proven = stored.get("content") == catalog.content
    before = stored.get("entries")
    if not isinstance(before, dict):
        before = {}
    reads = build_cache.ReadDigests(catalog, records)
    entries: dict[str, dict[str, Any]] = {}
    for rule in rules:
        front = "scan" if _scan_only(rule) else "check"
        key = build_cache.example_key(rule.code, front, rule.fail)
        entry = before.get(rule.code)
        if (
            isinstance(entry, dict)
            and entry.get("key") == key
            and isinstance(entry.get("text"), str)
            and (proven or reads.still(entry.get("reads")))
        ):
            entries[rule.code] = entry
            continue
        reading = build_cache.ReadLog(catalog)
        try:
            text = (
                _scan_example(rule.fail, reading, rule.code)
                if front == "scan"
                else _check_example(rule.fail, reading, rule.code)
            )
        except Exception as exc:  # a checker bug must not hide the rest of the site
            log.warning(f"kb check/scan failed on the failing example of {rule.code}: {exc!r}")
            continue
        entries[rule.code] = {"key": key, "reads": reads.of(reading.reads), "text": text}
    # every entry kept is proven against this content: the next build with the same
    # content compares nothing
    payload = {"content": catalog.content, "entries": entries}
    if payload != stored:
        build_cache.store(name, payload)
    return {code: str(entry["text"]) for code, entry in entries.items()}


def _check_example(text: str, catalog: Any, code: str) -> str:
    """``kb check --select CODE candidates.yaml`` on a snippet (a checker of its own: its
    lookups are memoised, and each example's reads must reach the catalog to be logged).
    Only the page's rule runs, so a new rule never rewrites another rule's page."""
    from kb.api.check import checker
    from kb.text.findings import text as findings_text

    report = checker(catalog, select=[code]).check_sources([("candidates.yaml", text)])
    return findings_text(report)


def _scan_only(rule: RuleUnit) -> bool:
    return "check" not in getattr(rule, "fronts", ("check",))


def _scan_example(source: str, catalog: Any, code: str) -> str:
    """``kb scan --select CODE model.py`` on a snippet."""
    from kb.api.scan import scanner
    from kb.scan.engine import ScanOptions
    from kb.text.scan import text

    options = ScanOptions(use_config=False, select=[code])
    return text(scanner(catalog, options).scan_text(source, "model.py"))


def rule_family(rule: RuleUnit) -> str:
    """``KB1xx Operator calls``: the navigation section of a rule page."""
    try:
        from kb.rules import family
    except ImportError:
        return f"{rule.code[:3]}xx"
    code, title = family(rule)  # type: ignore[arg-type]
    return f"{code} {title}"


def rule_title(rule: RuleUnit) -> str:
    return f"{rule.code} {rule.name}"


def rule_page(rule: RuleUnit, report: str | None = None) -> str:
    here = rule_path(rule.code)
    language = getattr(rule, "language", "yaml")
    verb, file = ("scan", "model.py") if _scan_only(rule) else ("check", "candidates.yaml")
    command = f"kb {verb} {file}"
    selected = f"kb {verb} --select {rule.code} {file}"
    shown = (
        f"{md.code(selected)} on the failing example prints:\n\n" + md.code_block(report, "text")
        if report
        else ""
    )
    fronts = " and ".join(f"`kb {f}`" for f in getattr(rule, "fronts", ("check",)))
    return join_sections(
        h1(rule_title(rule)),
        badge(rule.severity, None, here, f"severity-{rule.severity}")
        + f" · {md.code(rule.code)} · run by {fronts}",
        "## What it checks\n\n" + md.block(rule.summary),
        "## Why it matters\n\n" + md.block(rule.why),
        "## Failing example\n\n" + md.code_block(rule.fail, language),
        shown,
        "## Fixed example\n\n" + md.code_block(rule.fix, language),
        f"Run {md.code(command)} to apply every rule to "
        + ("your model code" if _scan_only(rule) else "a candidate list")
        + "; the finding names this code.",
    )


def rules_index(rules: Sequence[RuleUnit]) -> str:
    here = "rules/index.md"
    intro = (
        "Every rule `kb check` applies to a candidate list and `kb scan` to Python model "
        "code (KB5xx and KB6xx are scan's own). Codes are stable: a finding's code always "
        "leads to the same page."
    )
    if not rules:
        return join_sections(
            "# Checker rules", intro, "No checker rules are registered in this build."
        )
    rows = [
        [
            md.link(md.code(r.code), md.rel(rule_path(r.code), here)),
            md.inline(r.name),
            md.inline(r.severity),
            md.inline(r.summary),
        ]
        for r in rules
    ]
    table = md.table(["Code", "Name", "Severity", "What it checks"], rows)
    return join_sections("# Checker rules", intro, table)
