"""``kb rules`` as functions: the rule reference, read from the rule units themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.lint.unit import RuleUnit

#: What a rule's document holds, in this order.
FIELDS = ("code", "name", "severity", "summary", "why", "fail", "fix", "fronts", "language")


def as_dict(rule: Any) -> dict[str, Any]:
    """One rule as JSON: code, severity, what it checks, why, a failing and a fixed snippet."""
    return {k: getattr(rule, k) if k != "fronts" else list(rule.fronts) for k in FIELDS}


def select(code: str | None = None) -> list[RuleUnit]:
    """Every rule, or those a code (KB406), prefix (KB4) or name means; empty for none."""
    from kb.rules import RULES, get

    if not code:
        return list(RULES)
    one = get(code)
    return [one] if one else [r for r in RULES if r.code.startswith(code.upper())]


def document(code: str | None = None) -> dict[str, Any]:
    """The ``--format json`` document: the rule itself when ``code`` names exactly one,
    else ``{"rules": [...]}`` (empty when nothing matches)."""
    from kb.rules import get

    one = get(code) if code else None
    return as_dict(one) if one else {"rules": [as_dict(r) for r in select(code)]}


def rules(code: str | None = None) -> dict[str, Any]:
    """``{"rules": [...]}`` always a list; UsageError when ``code`` matches no rule."""
    from kb.api.errors import UsageError
    from kb.rules import RULES

    chosen = select(code)
    if not chosen:
        raise UsageError(f"no rule {code!r}; codes run KB001 to {RULES[-1].code}")
    return {"rules": [as_dict(r) for r in chosen]}


def suggestions(code: str) -> list[str]:
    """Rule codes and names close to one that matched nothing."""
    from kb.core.fuzzy import suggest
    from kb.rules import RULES

    return suggest(code, [r.code for r in RULES] + [r.name for r in RULES])
