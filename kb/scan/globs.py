"""Gitignore-style patterns, compiled one at a time and matched in linear time.

``--exclude``, ``[tool.kb]`` (``exclude``, ``per-file-ignores``, ``overrides``) and the
``.gitignore`` files of a scanned tree all use git's pattern syntax.  A regex translation
(pathspec's) backtracks: ``a*a*a*a*a*a*a*b`` against a long name takes minutes, and a
hostile repository controls its ``.gitignore``.  Here a pattern is a list of path
segments; a segment is matched against one path component by the greedy
last-star algorithm (``O(len(segment) * len(name))``, no backtracking blow-up) and the
segments against the components by a set-of-states walk (``**`` included), so every
match costs at most the product of the two lengths.

:func:`compile_pattern` raises :class:`PatternError` for a pattern git would not use
(a lone ``!``, a trailing backslash, a reversed range such as ``[z-a]``); callers name
the option or file.  A ``.gitignore`` line that does not compile is skipped, as git does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# A token of one segment is (kind, class): a literal character (a one-character kind),
# any one character, any run, or a character class (negated, ranges as (low, high)).
_Class = tuple[bool, tuple[tuple[str, str], ...]]
_STAR, _ANY, _CLASS = "<*>", "<?>", "<[]>"
_DEEP = "**"  # a whole segment: zero or more path components


class PatternError(ValueError):
    """A pattern that cannot be used; the message says why."""


@dataclass(frozen=True)
class Segment:
    """One path component's glob: a literal (fast path) or tokens."""

    literal: str | None
    tokens: tuple[tuple[str, _Class | None], ...]
    suffix: str | None = None  # "*.ext" and the like: a star, then literals

    def matches(self, name: str) -> bool:
        if self.literal is not None:
            return name == self.literal
        if self.suffix is not None:
            return name.endswith(self.suffix)
        return _match_tokens(self.tokens, name)


@dataclass(frozen=True)
class Pattern:
    """One compiled line: its segments, and how it applies."""

    text: str
    segments: tuple[Segment | None, ...]  # None is "**"
    negated: bool
    dir_only: bool
    deep_tail: bool = False  # "dir/**": whatever is inside dir (and dir as a directory)

    def matches(self, parts: Sequence[str], is_dir: bool) -> bool:
        """Whether the pattern matches the path or one of its parent directories."""
        return self.match_kind(parts, is_dir) > 0

    def match_kind(self, parts: Sequence[str], is_dir: bool) -> int:
        """0 no match, 1 through a parent directory (or a directory itself), 2 the file.

        The kinds follow pathspec's GitIgnoreSpec, kb's matcher before this one: "*"
        and "dir/**" match as files (2) whatever they meet.
        """
        if self.deep_tail:
            kind = self._kind(parts, is_dir)
            return 2 if kind == 1 or (kind and is_dir) else 0
        return self._kind(parts, is_dir)

    def _kind(self, parts: Sequence[str], is_dir: bool) -> int:
        segs = self.segments
        direct = 1 if is_dir else 2
        if self.text.strip().lstrip("!") in ("*", "**", "/**"):
            return 2 if parts else 0  # pathspec's "everything": no directory mark
        if len(segs) == 2 and segs[0] is None and segs[1] is not None:  # "name": any level
            only = segs[1]
            if any(only.matches(p) for p in parts[:-1]):
                return 1
            hit = bool(parts) and only.matches(parts[-1]) and (is_dir or not self.dir_only)
            return direct if hit else 0
        states = _closure({0}, segs)
        for j, name in enumerate(parts):
            if len(segs) in states and j > 0:
                return 1  # matched a parent directory: everything below it too
            nxt: set[int] = set()
            for i in states:
                if i == len(segs):
                    continue
                seg = segs[i]
                if seg is None:
                    nxt.add(i)
                elif seg.matches(name):
                    nxt.add(i + 1)
            states = _closure(nxt, segs)
            if not states:
                return 0
        return direct if len(segs) in states and (is_dir or not self.dir_only) else 0


def _closure(states: set[int], segs: Sequence[Segment | None]) -> set[int]:
    """Add the states reachable by letting a ``**`` match no component."""
    out = set(states)
    todo = list(states)
    while todo:
        i = todo.pop()
        if i < len(segs) and segs[i] is None and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return out


def _match_tokens(tokens: Sequence[tuple[str, _Class | None]], name: str) -> bool:
    """Greedy glob match with backtracking only to the last ``*`` (linear per star)."""
    t = n = 0
    star_t = -1
    star_n = 0
    while n < len(name):
        if t < len(tokens):
            kind, cls = tokens[t]
            if kind == _STAR:
                star_t, star_n = t, n
                t += 1
                continue
            if _one(kind, cls, name[n]):
                t += 1
                n += 1
                continue
        if star_t < 0:
            return False
        star_n += 1
        n = star_n
        t = star_t + 1
    while t < len(tokens) and tokens[t][0] == _STAR:
        t += 1
    return t == len(tokens)


def _one(kind: str, cls: _Class | None, ch: str) -> bool:
    if kind == _ANY:
        return True
    if cls is not None:
        negated, ranges = cls
        inside = any(lo <= ch <= hi for lo, hi in ranges)
        return inside != negated
    return kind == ch


def _segment(text: str, source: str) -> Segment | None:
    """Tokens of one segment (``**`` alone → None); a lone backslash is an error."""
    if text == _DEEP:
        return None
    tokens: list[tuple[str, _Class | None]] = []
    i = 0
    plain = True
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 == len(text):
                raise PatternError(f"{source!r} ends with a lone backslash")
            tokens.append((text[i + 1], None))
            i += 2
        elif ch == "*":
            plain = False
            if not tokens or tokens[-1][0] != _STAR:  # "a**b" is "a*b", as in git
                tokens.append((_STAR, None))
            i += 1
        elif ch == "?":
            plain = False
            tokens.append((_ANY, None))
            i += 1
        elif ch == "[":
            parsed = _char_class(text, i, source)
            if parsed is None:  # no closing "]": a literal "[" (pathspec and fnmatch agree)
                tokens.append(("[", None))
                i += 1
            else:
                cls, i = parsed
                plain = False
                tokens.append((_CLASS, cls))
        else:
            tokens.append((ch, None))
            i += 1
    if plain:
        return Segment("".join(k for k, _ in tokens), ())
    rest = tokens[1:]
    if tokens[0][0] == _STAR and all(len(k) == 1 for k, _ in rest):
        return Segment(None, tuple(tokens), "".join(k for k, _ in rest))
    return Segment(None, tuple(tokens))


def _char_class(text: str, start: int, source: str) -> tuple[_Class, int] | None:
    """The class opening at ``text[start] == '['`` and the index after it, or None."""
    i = start + 1
    negated = i < len(text) and text[i] in "!^"
    if negated:
        i += 1
    chars: list[str] = []
    first = True
    while i < len(text):
        ch = text[i]
        if ch == "]" and not first:
            break
        if ch == "\\" and i + 1 < len(text):
            i += 1
            ch = text[i]
        chars.append(ch)
        i += 1
        first = False
    else:
        return None
    ranges: list[tuple[str, str]] = []
    k = 0
    while k < len(chars):
        if k + 2 < len(chars) and chars[k + 1] == "-":
            lo, hi = chars[k], chars[k + 2]
            if lo > hi:
                raise PatternError(f"{source!r} has the reversed range [{lo}-{hi}]")
            ranges.append((lo, hi))
            k += 3
        else:
            ranges.append((chars[k], chars[k]))
            k += 1
    return (negated, tuple(ranges)), i + 1


def compile_pattern(line: str) -> Pattern | None:
    """One gitignore line compiled; None for a blank line or a comment."""
    text = line.rstrip("\n\r")
    if not text.strip() or text.startswith("#"):
        return None
    # Trailing spaces are dropped unless escaped ("a\ " keeps one).
    while text.endswith(" ") and not text.endswith("\\ "):
        text = text[:-1]
    negated = text.startswith("!")
    if negated:
        text = text[1:]
    if not text:
        raise PatternError(f"{line!r} negates nothing")
    dir_only = text.endswith("/") and not text.endswith("\\/")
    body = text.rstrip("/") if dir_only else text
    if not body:
        raise PatternError(f"{line!r} matches no path")
    anchored = "/" in body
    parts = [p for p in body.split("/") if p]
    if not parts:
        raise PatternError(f"{line!r} matches no path")
    segments = [_segment(p, line) for p in parts]
    if not anchored:
        segments.insert(0, None)
    deep_tail = len(segments) > 1 and segments[-1] is None and anchored and not dir_only
    if deep_tail:  # "dir/**": what dir holds
        segments.pop()
    elif segments[-1] is None and not anchored:  # "**/": any directory
        segments.append(Segment(None, ((_STAR, None),)))
    return Pattern(line, tuple(segments), negated, dir_only, deep_tail)


class PatternSet:
    """Patterns applied in order; the last one that matches decides (gitignore rules)."""

    def __init__(self, patterns: Iterable[Pattern]) -> None:
        self.patterns = tuple(patterns)
        # Without negations any match decides, so plain names ("build/", ".git/", the
        # usual ignore lines) become set look-ups and only the rest is walked.
        self._names: frozenset[str] = frozenset()
        self._dir_names: frozenset[str] = frozenset()
        self._rest = self.patterns
        self._any_decides = not any(p.negated for p in self.patterns)
        if self._any_decides:
            names: set[str] = set()
            dir_names: set[str] = set()
            rest: list[Pattern] = []
            for p in self.patterns:
                segs = p.segments
                if (
                    len(segs) == 2
                    and segs[0] is None
                    and segs[1] is not None
                    and segs[1].literal is not None
                    and not p.deep_tail
                ):
                    (dir_names if p.dir_only else names).add(segs[1].literal)
                else:
                    rest.append(p)
            self._names, self._dir_names = frozenset(names), frozenset(dir_names)
            self._rest = tuple(rest)

    @classmethod
    def from_lines(cls, lines: Iterable[str], *, strict: bool = True) -> PatternSet:
        """Compile each line alone; ``strict=False`` skips the lines that do not compile."""
        out = []
        for line in lines:
            try:
                pattern = compile_pattern(line)
            except PatternError:
                if strict:
                    raise
                continue
            if pattern is not None:
                out.append(pattern)
        return cls(out)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, rel: str, is_dir: bool = False) -> bool:
        """Whether ``rel`` (``/``-separated, relative to the patterns' base) is matched."""
        if not self.patterns:
            return False
        parts = [p for p in rel.split("/") if p]
        if self._any_decides:
            names, dir_names = self._names, self._dir_names
            for k, part in enumerate(parts):
                if part in names or ((k < len(parts) - 1 or is_dir) and part in dir_names):
                    return True
            return any(p.matches(parts, is_dir) for p in self._rest)
        # Precedence as pathspec's GitIgnoreSpec (kb's matcher before) has it: a match
        # of the path itself beats one through a parent directory ("*.py" then "!pkg"
        # still ignores pkg/m.py); among equals the later pattern wins.
        result, priority = False, 0
        for pattern in self.patterns:
            kind = pattern.match_kind(parts, is_dir)
            if kind and kind >= priority:
                result, priority = not pattern.negated, kind
        return result
