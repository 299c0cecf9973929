"""Practice as evidence: where shipping code calls each operator (``seen_in``).

:func:`harvest` scans a checkout of a public repository with ``kb scan``'s reader and
returns, per operator record, the call sites with the literal arguments they pass
(never the code itself).  :func:`contradictions` turns every recorded site back into a
candidate and runs the operator rules on it: a record whose own constraints reject a
call that ships is wrong until upstream evidence says otherwise, so ``kb validate``
fails until the record (or the evidence) is resolved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Directories that hold tests, not shipping code (harvested only when asked).
TEST_PARTS = ("tests", "test", "testing", "examples", "benchmarks")


@dataclass(frozen=True)
class SiteFact:
    record: str
    path: str
    line: int
    products: tuple[str, ...]
    phases: tuple[str, ...]
    args: dict[str, Any]
    passed: tuple[str, ...]


def _is_test(rel: str, shipping: Sequence[str] = ()) -> bool:
    """Test or example code, unless a maintainer named the subtree as shipping code (a
    package kept under ``examples/``, as MindIE-LLM keeps its model library)."""
    rel = rel.replace(os.sep, "/")
    for sub in (s.strip("/") for s in shipping):
        if rel.startswith(sub + "/"):
            rel = rel[len(sub) + 1 :]  # below it, tests are still tests
            break
    parts = rel.split("/")
    return any(p in TEST_PARTS or p.startswith("test_") for p in parts)


def harvest(
    root: Path, *, include_tests: bool = False, catalog: Any = None, shipping: Sequence[str] = ()
) -> list[SiteFact]:
    """Every torch_npu operator call under ``root`` that a record knows, as facts.

    ``shipping`` names subtrees (relative to ``root``) that hold shipping code although a
    part of their path reads like tests or examples."""
    from kb.rules import RULES
    from kb.scan.engine import Scanner, ScanOptions

    scanner = Scanner(catalog, ScanOptions(fusion=False, use_config=False), rules=RULES)
    report = scanner.scan([str(root)])
    out: list[SiteFact] = []
    base = root.resolve()
    for site in report.sites:
        if site.record is None or site.custom:
            continue
        try:
            rel = Path(site.file).resolve().relative_to(base).as_posix()
        except ValueError:
            rel = site.file
        if not include_tests and _is_test(rel, shipping):
            continue
        args = {k: v for k, v in site.args.items() if _plain(v)}
        out.append(
            SiteFact(
                site.record,
                rel,
                site.line,
                tuple(site.products),
                (site.phase,) if site.phase else (),
                args,
                tuple(site.passed),
            )
        )
    return out


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, list) and all(_plain(v) and not isinstance(v, list) for v in value)


def seen_in_entry(
    repo: str,
    commit: str,
    facts: Iterable[SiteFact],
    keep: dict[tuple[str, int], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``seen_in`` item of one repository for one record (sites in path/line order).

    ``keep`` maps (path, line) of the previous harvest to its site: the curated ``note``
    and ``defect`` texts carry over to the same call.
    """
    sites = []
    for f in sorted(facts, key=lambda f: (f.path, f.line)):
        site: dict[str, Any] = {"path": f.path, "line": f.line}
        if f.products:
            site["products"] = list(f.products)
        if f.phases:
            site["phases"] = list(f.phases)
        if f.args:
            site["args"] = dict(sorted(f.args.items()))
        if f.passed:
            site["passed"] = sorted(f.passed)
        old = (keep or {}).get((f.path, f.line), {})
        for curated in ("note", "defect"):
            if old.get(curated):
                site[curated] = old[curated]
        sites.append(site)
    return {"repo": repo, "commit": commit, "sites": sites}


def candidate_list(record: dict[str, Any]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Candidate lists (YAML text) with one candidate per recorded call site, grouped by the
    product the site names, each with the (repo index, site index) of its candidates."""
    import yaml

    groups: dict[str, list[tuple[tuple[int, int], dict[str, Any]]]] = {}
    for ri, repo in enumerate(record.get("seen_in") or []):
        for si, site in enumerate(repo.get("sites") or []):
            if site.get("defect"):
                continue  # a known defect of the shipping code, documented on the site
            cand: dict[str, Any] = {
                "module": f"{repo['repo']}:{site['path']}:{site['line']}",
                "operator": record["name"],
                "status": "replaced",
            }
            phases = site.get("phases") or []
            if len(phases) == 1:
                cand["phase"] = phases[0]
            if site.get("args"):
                cand["args"] = site["args"]
            if site.get("passed"):
                cand["passed"] = site["passed"]
            product = (site.get("products") or [""])[0]
            groups.setdefault(product, []).append(((ri, si), cand))
    out = []
    for product, items in sorted(groups.items()):
        target: dict[str, Any] = {"product": product} if product else {}
        text = yaml.safe_dump(
            {"version": 1, "target": target, "candidates": [c for _, c in items]},
            sort_keys=False,
            allow_unicode=True,
        )
        out.append((text, [where for where, _ in items]))
    return out


#: The operator rules a shipping call must pass (what the record claims about calls).
JUDGED = ("KB104", "KB106", "KB109")


@dataclass(frozen=True)
class Contradiction:
    record: str
    repo: int  # index in seen_in
    site: int  # index in that entry's sites
    message: str


def contradictions(catalog: Any, names: Sequence[str] | None = None) -> list[Contradiction]:
    """Every recorded call site its own record rejects (KB104/KB106/KB109 errors)."""
    from kb.check.engine import Checker
    from kb.rules import RULES

    checker = Checker(catalog, rules=RULES, select=list(JUDGED))
    out: list[Contradiction] = []
    for rec in catalog.records("operator"):
        if names is not None and rec["name"] not in names:
            continue
        for text, where in candidate_list(rec):
            for f in checker.check_text(f"seen_in:{rec['name']}", text):
                if f.severity == "error" and f.candidate is not None:
                    ri, si = where[f.candidate]
                    site = rec["seen_in"][ri]["sites"][si]
                    out.append(
                        Contradiction(
                            rec["name"],
                            ri,
                            si,
                            f"{rec['seen_in'][ri]['repo']} calls it at "
                            f"{site['path']}:{site['line']}, but {f.code}: "
                            f"{f.message}",
                        )
                    )
    return out
