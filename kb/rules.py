"""The registry: every rule unit of both front ends, in code order.

The only module that knows both readers (candidate lists in :mod:`kb.check`, Python in
:mod:`kb.scan`); the engines below take the units as values.  The site, ``kb rules``,
the api layer and the tests read this.

Each entry has ``code``, ``name``, ``severity`` (error | warning | info), ``summary``,
``why``, ``fail`` and ``fix`` (candidate-list YAML).  Codes are stable once published:
retire a code rather than reuse it.
"""

from __future__ import annotations

from kb.check.rules import (
    known,
    operator,
    prefetch,
    quantization,
    scalars,
    settings,
    structure,
    target,
    workflow,
)
from kb.lint.engine import expand as _expand
from kb.lint.unit import RuleUnit
from kb.scan import patterns as scan_patterns
from kb.scan import rules as scan_rules

RULES: tuple[RuleUnit, ...] = tuple(
    sorted(
        (
            *structure.RULES,
            *operator.RULES,
            *scalars.RULES,
            *settings.RULES,
            *known.RULES,
            *target.RULES,
            *quantization.RULES,
            *workflow.RULES,
            *prefetch.RULES,
            *scan_rules.RULES,
            *scan_patterns.RULES,
        ),
        key=lambda r: r.code,
    )
)
BY_CODE: dict[str, RuleUnit] = {r.code: r for r in RULES}


def family(rule: RuleUnit) -> tuple[str, str]:
    """(``KB1xx``, title) of a rule's family: the module that defines it says the title."""
    import sys

    title = getattr(sys.modules[type(rule).__module__], "FAMILY", "Other rules")
    return f"{rule.code[:3]}xx", str(title)


def get(code: str) -> RuleUnit | None:
    """A rule by code (case-insensitive) or by name."""
    wanted = code.strip()
    hit = BY_CODE.get(wanted.upper())
    if hit is not None:
        return hit
    return next((r for r in RULES if r.name == wanted.lower()), None)


def expand(patterns: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Normalise --select/--ignore values against the registry (see :func:`kb.lint.engine.expand`).

    Raises ValueError naming a pattern that matches no rule.
    """
    return _expand(RULES, patterns)
