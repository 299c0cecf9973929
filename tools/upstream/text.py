"""Pull facts (dtype lists, format lists, closed value sets) out of upstream prose.

Upstream pages and wheel docstrings state facts inside Chinese sentences such as
"数据类型支持`bfloat16`、`int8`，数据格式支持ND".  Only the list right after such a
trigger counts; a list followed by "时" ("when …") is a condition, not a support
statement, and is ignored.  Everything returned is a canonical vocabulary id, so the
records never see upstream spellings.
"""

from __future__ import annotations

import re

from kb.vocab import normalize

Scalar = int | str

_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>|~$])")
_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"[^\"]*\"\s*>\s*</a>")


def clean_markdown(text: str) -> str:
    """BOM, Markdown backslash escapes and empty HTML anchors removed; CRLF → LF."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    text = _ANCHOR.sub("", text)
    return _ESCAPE.sub(r"\1", text)


def strip_tags(text: str) -> str:
    """Inline HTML removed (``<term>``, ``<strong>``, ``<br>``, table cells …)."""
    text = re.sub(r"<br\s*/?>", " ", text)
    return re.sub(r"<[^>]+>", "", text)


# A support statement starts with one of these; the list must follow directly.
_DTYPE_TRIGGER = re.compile(
    r"(?:支持的)?(?:数据类型|dtype)(?:仅|只|均)?(?:支持|为|是|包括|可以是|可为|固定为)?\s*[:：]?\s*",
    re.I,
)
#: "支持的数据类型如下：" followed by one nested bullet per product: "- <term>…</term>：`a`、`b`"
_LIST_BELOW = re.compile(
    r"(?:数据类型|dtype)(?:组合)?如下\s*[:：]?[^\n]*\n((?:[ \t]+[-*][^\n]*\n?)+)", re.I
)
_BULLET_VALUE = re.compile(r"[:：]\s*(?=[`A-Za-z])")
_FORMAT_TRIGGER = re.compile(
    r"(?:(?:支持的)?数据格式(?:仅|只|均)?(?:支持|为|是|包括|要求为|可为)?|(?<!数据)格式)\s*[:：]?\s*"
)
_SEPARATORS = " \t`、，,和或及与/$\"'*[]"
_WORD = re.compile(r"(?:torch\.)?([A-Za-z][A-Za-z0-9_]*)")
_OPEN = {"（": "）", "(": ")"}


def _scan_list(text: str, pos: int, vocab: str) -> tuple[list[str], int]:
    """Read vocabulary words from ``pos`` on; stop at the first word that is not one.

    Parenthesised groups that hold only vocabulary words are read too ("int4（int32）");
    other groups ("（仅Atlas A2）") are skipped without ending the list.
    """
    found: list[str] = []
    i = pos
    while i < len(text):
        ch = text[i]
        if ch in _SEPARATORS:
            i += 1
            continue
        if ch in _OPEN:
            close = text.find(_OPEN[ch], i + 1)
            if close < 0 or close - i > 80:
                break
            inner, _ = _scan_list(text[i + 1 : close], 0, vocab)
            found += inner
            i = close + 1
            continue
        m = _WORD.match(text, i)
        if not m:
            break
        canon = normalize(vocab, m.group(1))
        if canon is None:
            break
        found.append(canon)
        i = m.end()
    return found, i


_CLAUSE_END = re.compile(r"[，。；;,\n（(]")
_IF_WORDS = ("当", "若", "如果", "仅在")


def _is_condition(text: str, end: int, start: int | None = None) -> bool:
    """A list inside "当 … 为 X，…" or followed by "时" states a condition, not support."""
    rest = text[end : end + 4].lstrip(" `$）)")
    if rest.startswith(("时", "的时候", "类型时", "场景")):
        return True
    if start is None:
        return False
    clause_start = 0
    for m in _CLAUSE_END.finditer(text, 0, start):
        clause_start = m.end()
    return any(w in text[clause_start:start] for w in _IF_WORDS)


def _extract(text: str, trigger: re.Pattern[str], vocab: str) -> list[str]:
    out: list[str] = []
    for m in trigger.finditer(text):
        items, end = _scan_list(text, m.end(), vocab)
        if not items or _is_condition(text, end, m.start()):
            continue
        for item in items:
            if item not in out:
                out.append(item)
    return out


def dtypes_in(text: str) -> list[str]:
    """Canonical dtypes named by the support statements of ``text``, in order."""
    plain = strip_tags(text)
    out = _extract(plain, _DTYPE_TRIGGER, "dtype")
    for block in _LIST_BELOW.finditer(plain):
        for line in block.group(1).split("\n"):
            colons = list(_BULLET_VALUE.finditer(line))
            if not colons:
                continue
            colon = colons[-1]
            items, end = _scan_list(line, colon.end(), "dtype")
            if _is_condition(line, end, colon.start()):
                continue
            out += [d for d in items if d not in out]
    return out


def formats_in(text: str) -> list[str]:
    """Canonical formats (ND, FRACTAL_NZ, …) named by the format statements of ``text``."""
    return _extract(strip_tags(text), _FORMAT_TRIGGER, "format")


_VALUE_TRIGGER = re.compile(
    r"(?:取值(?:只|仅)?(?:支持|为|范围为|可为|只能为|可选)?|可选值(?:为|有)?|(?:仅|只)支持(?:取值)?)\s*[:：]?\s*"
)
#: "`half`表示…，`interleaved`表示…": a string parameter's values, each defined in turn
_DEFINED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`\s*(?:表示|代表)")
_ATOM = re.compile(r"""\s*(?:`([^`]{1,40})`|'([^']{1,40})'|"([^"]{1,40})"|(-?\d+))\s*""")
_ATOM_SEP = re.compile(r"\s*(?:、|，|,|或|和|以及|及)\s*")


def _atoms(text: str, pos: int) -> tuple[list[str], list[bool], int]:
    values: list[str] = []
    quoted: list[bool] = []
    i = pos
    while True:
        m = _ATOM.match(text, i)
        if not m:
            break
        raw = next(g for g in m.groups() if g is not None)
        values.append(raw.strip("'\""))
        quoted.append(m.group(4) is None)
        i = m.end()
        sep = _ATOM_SEP.match(text, i)
        if not sep:
            break
        i = sep.end()
    return values, quoted, i


def _table_first_column(text: str, name: str = "") -> list[str]:
    """First-column values of a Markdown or HTML table whose header names values
    (or names the parameter itself)."""
    header_words = ("枚举值", "取值", "可选值", "模式", "value") + ((name.lower(),) if name else ())
    rows: list[list[str]] = []
    html_rows = re.findall(r"<tr[^>]*>(.*?)</tr>", text, re.S)
    if html_rows:
        for row in html_rows:
            cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
            rows.append([" ".join(strip_tags(c).split()) for c in cells])
    else:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("|") and not re.fullmatch(r"[|\s:\-]+", line):
                rows.append([strip_tags(c).strip() for c in line.strip("|").split("|")])
    if len(rows) < 2 or not rows[0] or not any(w in rows[0][0].lower() for w in header_words):
        return []
    out: list[str] = []
    for row in rows[1:]:
        if not row or not row[0]:
            continue
        for part in row[0].split("/"):
            part = part.strip().strip("`'\"")
            if part and re.fullmatch(r"-?\d+|[A-Za-z_][A-Za-z0-9_]*", part) and part not in out:
                out.append(part)
    return out


def allowed_values(text: str, type_: str, name: str = "") -> list[Scalar] | None:
    """The closed value set a scalar parameter's description states, else None.

    Only clear statements count: a table of enumerated values, or a list of at least
    two literals right after "取值为/仅支持/可选值".  Per-product statements are
    united (product limits belong in rules).  Values are converted to the parameter's
    schema type (``int`` or ``str``); other types get no value set.
    """
    base = type_.rstrip("?")
    if base not in ("int", "str", "SymInt"):
        return None
    candidates: list[str] = _table_first_column(text, name)
    plain = strip_tags(text)
    want_int = base != "str"
    for m in _VALUE_TRIGGER.finditer(plain):
        values, quoted, end = _atoms(plain, m.end())
        if len(values) < 2 or _is_condition(plain, end, m.start()):
            continue
        ints = all(not q and re.fullmatch(r"-?\d+", v) for v, q in zip(values, quoted, strict=True))
        if (want_int and ints) or (not want_int and all(quoted)):
            candidates += [v for v in values if v not in candidates]
    if base == "str" and not candidates:
        candidates = list(dict.fromkeys(_DEFINED.findall(plain)))
    if len(candidates) < 2:
        return None
    if base == "str":
        if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) for v in candidates):
            return None
        return list(dict.fromkeys(candidates))
    if not all(re.fullmatch(r"-?\d+", v) for v in candidates):
        return None
    return list(dict.fromkeys(int(v) for v in candidates))
