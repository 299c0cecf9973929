"""Dicts built up for ``**kwargs``: item assignment, ``update``, ``setdefault``, ``pop``.

A tracked dict is a :class:`~kb.scan.values.DictV` per alternative; a mutation the
scanner cannot read (a computed key) leaves the dict *open* -- unknown keys may exist,
so a missing argument is not reported for a call that spreads it.  A dict past
:data:`~kb.scan.scopes.MAX_KEYS` keys becomes UNKNOWN (open, never judged) and later
mutations of it are no-ops, so each statement costs at most the budget.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TypeVar

from kb.scan.expressions import Evaluator
from kb.scan.scopes import Env, capped, dedupe
from kb.scan.syntax import const_str
from kb.scan.values import Alt, Cond, DictV, Entry, Lit, consistent

T = TypeVar("T")


class KwargsTracking(Evaluator):
    """Follows the statements that change a dict bound to a name."""

    collect: bool = False  # the pass: False learns ``self.x`` bindings, True records calls

    def map_dict(self, name: str, env: Env, fn: Callable[[DictV], DictV]) -> None:
        """Apply ``fn`` to every dict alternative of ``name``."""
        alts = env.lookup(name)
        if not alts:
            return
        env.vars[name] = dedupe(Alt(c, fn(v) if isinstance(v, DictV) else v) for c, v in alts)

    def map_dict_alts(
        self, name: str, env: Env, key: str, entries: list[Entry], values: list[Alt]
    ) -> None:
        """``name[key] = value`` for each alternative of the value that can hold with the dict's."""
        # no entries: the caller found no dict alternative to store into (past the key
        # budget), so there is nothing to pair
        pairs = [(vc, e) for (vc, _v), e in zip(values, entries, strict=True)] if entries else []
        self.map_dict_each(name, env, pairs, lambda d, e: capped(d.set(key, e)))

    def map_dict_each(
        self,
        name: str,
        env: Env,
        pairs: list[tuple[Cond, T]],
        fn: Callable[[DictV, T], DictV],
    ) -> None:
        """``fn(dict, x)`` for every dict alternative of ``name`` and every ``(cond, x)``
        whose condition can hold with that alternative's."""
        alts = env.lookup(name)
        if not alts:
            return
        out = []
        for c, v in alts:
            if not isinstance(v, DictV):
                out.append(Alt(c, v))
                continue
            for xc, x in pairs:
                merged = consistent(c, xc)
                if merged is not None:
                    out.append(Alt(merged, fn(v, x)))
        env.vars[name] = dedupe(out)

    def mutation(self, expr: ast.expr, env: Env, cond: Cond) -> None:
        """``kw.update(...)``, ``kw.setdefault(k, v)``, ``kw.pop(k)`` on a tracked dict;
        ``self.kw.pop(k)`` on a dict attribute."""
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "pop"
            and expr.args
        ):
            self.drop_self_key(expr.func.value, expr.args[0])
        if not (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and isinstance(expr.func.value, ast.Name)
        ):
            return
        name, method = expr.func.value.id, expr.func.attr
        if method == "update":
            self.update_dict(name, list(expr.args), list(expr.keywords), env, cond)
        elif method == "setdefault" and expr.args:
            key = const_str(expr.args[0])
            alts = env.lookup(name) or []
            if key is not None and any(
                isinstance(v, DictV) and not dict(v.entries).get(key) for _c, v in alts
            ):
                value = expr.args[1] if len(expr.args) > 1 else ast.Constant(None)
                vals = self.ev(value, env, cond)
                self.map_dict_alts(
                    name, env, key, [self.entry(value, v, expr.args[0]) for _c, v in vals], vals
                )
        elif method in ("pop", "__delitem__") and expr.args:
            self.drop_key(name, expr.args[0], env, cond)
        elif method == "clear":
            self.map_dict(name, env, lambda d: DictV())

    def drop_key(self, name: str, key: ast.expr, env: Env, cond: Cond) -> None:
        """``del kw[key]`` / ``kw.pop(key)``: a literal key, or a name bound to one (each
        alternative of it drops its key where it holds); an unreadable key leaves the
        dict open."""
        text = const_str(key)
        if text is not None:
            self.map_dict(name, env, lambda d: d.drop(text))
            return
        keys = self.ev(key, env, cond)
        if not keys or not all(isinstance(v, Lit) and isinstance(v.value, str) for _c, v in keys):
            self.map_dict(name, env, lambda d: DictV(d.entries, True))
            return
        names = [(kc, str(k.value)) for kc, k in keys]  # type: ignore[attr-defined]
        self.map_dict_each(name, env, names, lambda d, k: d.drop(k))

    def drop_self_key(self, target: ast.expr, key: ast.expr) -> None:
        """``self.kw.pop("k")`` / ``del self.kw["k"]`` in a method (learnt in the first pass,
        with the attribute's assignments): the key is taken out of ``self.kw``'s dicts."""
        text = const_str(key)
        if (
            self.collect
            or self.cls is None
            or text is None
            or not isinstance(target, ast.Attribute)
            or not isinstance(target.value, ast.Name)
            or target.value.id != "self"
        ):
            return
        self.attr_drops.setdefault(self.cls, {}).setdefault(target.attr, set()).add(text)

    def drop_each(self, name: str, keys: list[str], env: Env) -> None:
        """Every key of a loop over literal keys dropped (``for k in ("a", "b"): kw.pop(k)``)."""

        def drop(d: DictV) -> DictV:
            for key in keys:
                d = d.drop(key)
            return d

        self.map_dict(name, env, drop)

    def update_dict(
        self, name: str, args: list[ast.expr], keywords: list[ast.keyword], env: Env, cond: Cond
    ) -> None:
        """``kw.update(...)`` and ``kw |= {...}``."""
        alts = env.lookup(name)
        if not alts:
            return
        if not any(isinstance(v, DictV) for _c, v in alts):
            env.vars[name] = dedupe(alts)  # nothing tracked (or past the key budget): no work
            return
        adds = self.dict_call(args, keywords, env, cond)
        out = []
        for c, v in alts:
            if not isinstance(v, DictV):
                out.append(Alt(c, v))
                continue
            for ac, add in adds:
                merged = consistent(c, ac)
                if merged is None:
                    continue
                out.append(
                    Alt(
                        merged,
                        capped(v.merged(add)) if isinstance(add, DictV) else DictV(v.entries, True),
                    )
                )
        env.vars[name] = dedupe(out)
