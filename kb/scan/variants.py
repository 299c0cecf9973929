"""How the scanner settles a call it saw under several branch conditions.

A call inside ``if``/``else`` branches is interpreted once per combination of the
alternatives it depends on (its variants).  Here the variants become one summary of
the call (what holds in every one of them), the product a call is judged on, one
finding per problem (an error that needs conditions the code does not promise to hold
together becomes a warning naming them), and the ``# kb: ignore`` comments applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from kb.lint.findings import Finding
from kb.lint.suppress import matches
from kb.scan.interp import CallSite, FileScan
from kb.vocab import product_family

if TYPE_CHECKING:
    from kb.scan.engine import SiteInfo


def settle(found: list[tuple[Finding, CallSite]], scan: FileScan) -> list[Finding]:
    """One finding per problem across a call's variants; joint-only errors become warnings.

    A branch atom is *relevant* to a finding when the call has variants with both truths
    of it but the finding appears under one truth only.  A finding with two or more
    relevant atoms (beyond the branches enclosing the call) needs separate conditions to
    hold together, which the code does not promise: it is reported as a warning that
    names them.
    """
    variants: dict[int, list[CallSite]] = {}
    for site in scan.calls:
        variants.setdefault(site.node_id, []).append(site)
    occurrences: dict[Finding, list[CallSite]] = {}
    for finding, site in found:
        occurrences.setdefault(finding, []).append(site)
    out: list[Finding] = []
    for finding, sites in occurrences.items():
        if finding.severity != "error":
            out.append(finding)
            continue
        node = sites[0].node_id
        truths: dict[str, set[bool]] = {}
        for v in variants.get(node, []):
            for atom, truth in v.cond - v.path_cond:
                truths.setdefault(atom, set()).add(truth)
        seen: dict[str, set[bool]] = {}
        for v in (s for s in sites if s.node_id == node):
            for atom, truth in v.cond - v.path_cond:
                seen.setdefault(atom, set()).add(truth)
        relevant = [
            a
            for a, both in truths.items()
            if len(both) == 2
            and len(seen.get(a, both)) == 1
            and all(a in {x for x, _ in v.cond} for v in sites if v.node_id == node)
        ]
        if len(relevant) >= 2:
            when = " and ".join(
                f"{'' if next(iter(seen[a])) else 'not '}{a}" for a in sorted(relevant)
            )
            out.append(
                Finding(
                    finding.file,
                    finding.line,
                    finding.column,
                    finding.code,
                    "warning",
                    f"{finding.message} (only when {when}; the code does not say "
                    "whether these hold together)",
                    None,
                )
            )
        else:
            out.append(finding)
    return out


class Variant(NamedTuple):
    """What one combination of a call's argument alternatives passes."""

    args: dict[str, Any]
    passed: set[str]
    only: frozenset[str]
    phase: str | None


def merge_variants(info: SiteInfo, variants: list[Variant]) -> None:
    """Fill a call's summary with what holds in *every* variant of it.

    An argument keeps its literal only when all variants agree on it; otherwise it is
    merely passed (a value the scan cannot pin down).  Products and phase count only
    when every variant names them.  Mixing one branch's layout with another branch's
    sequence lengths would describe a call the code never makes.
    """
    if not variants:
        return
    first = variants[0].args
    agreed = {
        name: value
        for name, value in first.items()
        if all(name in v.args and v.args[name] == value for v in variants[1:])
    }
    named: set[str] = set()
    for v in variants:
        named |= set(v.args) | v.passed
    info.args = agreed
    info.passed = sorted(named - set(agreed))
    only = frozenset.intersection(*(v.only for v in variants))
    info.products = sorted(only)
    phases = {v.phase for v in variants}
    info.phase = phases.pop() if len(phases) == 1 else None


def site_product(target: str | None, only: set[str], never: set[str]) -> str | None:
    """The product a call is judged on: the target, unless the code says the call runs elsewhere.

    A path the code keeps for several products (``is_Ascend910()``: the 910 generations,
    A2 and A3) is not judged against an arbitrary one of them when the target is not
    among them.
    """
    if only:
        if target is not None and (target in only or product_family(target) in only):
            return target
        # a path for one other product is judged there; one for several, on none of them
        return next(iter(only)) if len(only) == 1 else None
    if target is not None and (target in never or product_family(target) in never):
        return None
    return target


def suppressed(
    findings: list[Finding], comments: dict[int, tuple[str, ...]], scan: FileScan
) -> list[Finding]:
    if not comments:
        return findings
    spans = sorted({(c.where.line, c.end_line) for c in scan.calls})
    kept = []
    for f in findings:
        codes = list(comments.get(f.line, ()))
        for start, end in spans:
            if start <= f.line <= end and start != f.line:
                codes += comments.get(start, ())
        if codes and matches(f.code, codes):
            continue
        kept.append(f)
    return kept
