"""Read the official per-API Markdown pages of op-plugin into facts.

A page has a title (``# torch_npu.npu_x``, ``# （beta）torch_npu.npu_x``), a product
table (``<term>`` names marked √ or x), a prototype in a ``python`` block, and a
parameter section in one of several layouts: bold bullets
(``- **name**（`Tensor`）：…``), bold paragraphs, nested bullets, or a Markdown table
with one row per parameter.  Only facts are kept; the sentences stay upstream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from kb.vocab import collapse_products, products_from_official
from tools.upstream.ctext import split_top
from tools.upstream.text import (
    Scalar,
    allowed_values,
    clean_markdown,
    dtypes_in,
    formats_in,
    strip_tags,
)

UPSTREAM_DOCS = "docs/zh/custom_APIs/torch_npu"
"""Where the pages live in a real op-plugin checkout; records cite this path."""

URL_BASE = "https://gitcode.com/Ascend/op-plugin/blob/master/" + UPSTREAM_DOCS
BETA_PREFIX = "（beta）"
"""How upstream names a beta page (``（beta）torch_npu-X.md``, full-width parentheses)."""
LOCAL_BETA_PREFIX = "beta-"
"""The ASCII spelling some local copies use instead; never cited."""


def upstream_file(name: str) -> str:
    """The page's file name as upstream spells it: a local ``beta-`` copy is cited by the
    name it has in op-plugin, so the citation resolves at the commit it names."""
    if name.startswith(LOCAL_BETA_PREFIX):
        return BETA_PREFIX + name[len(LOCAL_BETA_PREFIX) :]
    return name


NOT_API_PAGES = ("torch_npu.md", "torch_npu_list.md")


@dataclass
class ParamFacts:
    """What a page (or docstring) states about one parameter or return value."""

    name: str
    type_text: str | None = None
    dtypes: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    text: str = ""  # the raw block, kept in memory only to derive value sets

    def allowed(self, schema_type: str) -> list[Scalar] | None:
        return allowed_values(self.text, schema_type, self.name)


@dataclass
class Page:
    """Facts of one API page; ``apis`` lists every API it documents."""

    file: str
    apis: list[str]
    namespace: str  # "torch_npu" or "torch.npu"
    beta: bool
    prototypes: dict[str, str]  # api name → prototype text as on the page
    products: list[str]
    unknown_products: list[str]
    has_product_table: bool
    unsupported_products: list[str]
    params: dict[str, ParamFacts]
    returns: list[ParamFacts]
    deprecated: bool
    replacement_hint: str | None

    @property
    def upstream_path(self) -> str:
        return f"{UPSTREAM_DOCS}/{upstream_file(self.file)}"

    @property
    def url(self) -> str:
        return f"{URL_BASE}/{quote(upstream_file(self.file))}"

    def call(self, api: str) -> str:
        return f"{self.namespace}.{api}"

    def prototype_args(self, api: str) -> list[str]:
        """Argument names of the page prototype, in order (``*`` dropped)."""
        proto = self.prototypes.get(api)
        if not proto:
            return []
        open_at = proto.find("(")
        depth, close_at = 0, -1
        for i in range(open_at, len(proto)):
            if proto[i] in "([":
                depth += 1
            elif proto[i] in ")]":
                depth -= 1
                if depth == 0:
                    close_at = i
                    break
        inner = proto[open_at + 1 : close_at] if close_at > 0 else proto[open_at + 1 :]
        names = []
        for part in split_top(inner):
            part = part.strip()
            if not part or part in ("*", "/") or part.startswith("*"):
                continue
            decl = part.split("=", 1)[0].split()
            name = decl[-1] if decl else ""
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                names.append(name)
        return names


def docs_dir(op_plugin: Path) -> Path:
    """The page folder of an op-plugin tree, in either supported layout."""
    for rel in (UPSTREAM_DOCS, "docs/torch_npu"):
        if (op_plugin / rel).is_dir():
            return op_plugin / rel
    raise FileNotFoundError(
        f"no API pages under {op_plugin} (looked for {UPSTREAM_DOCS}/ and docs/torch_npu/)"
    )


def api_page_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.md") if p.name not in NOT_API_PAGES and p.is_file())


_HEADING = re.compile(r"^(#{1,6})\s*(.*?)\s*$")


def _sections(text: str) -> tuple[str, dict[str, str]]:
    """Title line and the level-2 sections (heading text → body)."""
    title = ""
    sections: dict[str, str] = {}
    current: str | None = None
    buf: list[str] = []
    in_code = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        m = None if in_code else _HEADING.match(line)
        if m and len(m.group(1)) == 1 and not title:
            title = m.group(2)
            continue
        if m and len(m.group(1)) == 2:
            if current is not None:
                sections[current] = "\n".join(buf)
            current = strip_tags(m.group(2)).strip()
            buf = []
            continue
        if current is not None:
            buf.append(line)
    if current is not None:
        sections[current] = "\n".join(buf)
    return title, sections


def _section(sections: dict[str, str], *names: str) -> str:
    for name in names:
        for key, body in sections.items():
            if key.startswith(name):
                return body
    return ""


_TITLE = re.compile(
    r"^(?P<beta>[（(]\s*beta\s*[）)])?\s*(?P<ns>torch_npu|torch\.npu)[.\-](?P<name>[A-Za-z_][A-Za-z0-9_]*)"
)
_FILE = re.compile(
    r"^(?P<beta>beta-|[（(]beta[）)])?torch_npu-(?P<name>[A-Za-z_][A-Za-z0-9_]*)\.md$"
)
_SUPPORTED = {"√", "✓", "✔", "y", "yes", "是", "支持"}
_UNSUPPORTED = {"x", "×", "✗", "✘", "n", "no", "否", "不支持", "-"}


def _products(body: str) -> tuple[list[str], list[str], bool, list[str]]:
    """(supported, unknown names, has a table, unsupported) from the product table.

    Ids keep the precision the page has: a row naming only the Atlas A2 training series
    is ``atlas-a2-training``; rows covering every sub-series of a family collapse to it.
    """
    supported: list[str] = []
    unsupported: list[str] = []
    unknown: list[str] = []
    seen_table = False
    for line in body.split("\n"):
        line = line.strip()
        if not line.startswith("|") or re.fullmatch(r"[|\s:\-]+", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 2:
            continue
        name = " ".join(strip_tags(cells[0]).split())
        mark = strip_tags(cells[1]).strip().lower()
        if mark not in _SUPPORTED and mark not in _UNSUPPORTED:
            continue  # header row
        seen_table = True
        ids = products_from_official(name)
        if ids is None:
            unknown.append(name)
            continue
        bucket = unsupported if mark in _UNSUPPORTED else supported
        bucket.extend(i for i in ids if i not in bucket)
    return collapse_products(supported), unknown, seen_table, collapse_products(unsupported)


_CALL_IN_CODE = re.compile(
    r"^\s*(?:(?:torch_npu|torch\.npu|torch\.ops\.npu|torch)\.)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\("
)


def _prototypes(body: str) -> dict[str, str]:
    """api name → one-line prototype, from the code blocks of the section.

    A prototype starts on a line that opens a call and runs over continuation lines
    until the next call opens.
    """
    out: dict[str, str] = {}
    for block in re.findall(r"```[a-zA-Z]*\n(.*?)```", body, re.S):
        name: str | None = None
        parts: list[str] = []
        for line in block.split("\n") + ["\x00("]:
            m = _CALL_IN_CODE.match(line)
            if m or line == "\x00(":
                if name and name not in out:
                    out[name] = " ".join(p for p in parts if p)
                name = m.group("name") if m else None
                parts = [line.strip()[line.strip().find(name) :]] if m and name else []
                continue
            if name:
                parts.append(line.strip())
    return {k: v for k, v in out.items() if k not in ("def", "import", "print")}


_PARAM_START = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*+]\s+|\d+\.\s+)?(?:\*\*|<strong>)\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*"
    r"(?:\*\*|</strong>)\s*(?:(?P<paren>[（(])(?P<type>[^）)]*)[）)])?\s*(?P<colon>[:：])?"
)


def _bullet_params(body: str) -> dict[str, ParamFacts]:
    """Bold-name layouts: bullets, paragraphs and nested lists, one block per name."""
    out: dict[str, ParamFacts] = {}
    current: ParamFacts | None = None
    lines: list[str] = []

    def flush() -> None:
        if current is not None:
            text = "\n".join(lines)
            current.text = text
            current.dtypes = dtypes_in(text)
            current.formats = formats_in(text)
            out.setdefault(current.name, current)

    for line in body.split("\n"):
        m = _PARAM_START.match(line)
        if m and (m.group("paren") or m.group("colon")):
            flush()
            type_text = (m.group("type") or "").replace("`", "").strip() or None
            current = ParamFacts(m.group("name"), type_text)
            lines = [line[m.end() :]]
            continue
        if _HEADING.match(line):
            flush()
            current, lines = None, []
            continue
        if current is not None:
            lines.append(line)
    flush()
    return out


_NAME_HEADERS = ("参数", "参数名", "参数名称", "名称", "parameter", "name")


def _table_params(body: str) -> dict[str, ParamFacts]:
    """Markdown tables with one row per parameter (a name column first)."""
    out: dict[str, ParamFacts] = {}
    header: list[str] | None = None
    for raw in body.split("\n") + [""]:
        line = raw.strip()
        if not line.startswith("|"):
            header = None
            continue
        if re.fullmatch(r"[|\s:\-]+", line):
            continue
        cells = [strip_tags(c).strip() for c in line.strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            if header[0] not in _NAME_HEADERS:
                header = ["-"]  # not a parameter table: skip its rows
            continue
        if header == ["-"]:
            continue
        name = cells[0].strip("`* ")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue
        facts = ParamFacts(name)
        texts: list[str] = []
        for title, cell in zip(header[1:], cells[1:], strict=False):
            if title in ("类型", "type"):
                facts.type_text = cell.strip("` ") or None
            elif title in ("数据类型", "dtype", "dtypes"):
                facts.dtypes = dtypes_in("数据类型支持" + cell)
            elif title in ("数据格式", "format", "formats"):
                facts.formats = formats_in("数据格式支持" + cell)
            else:
                texts.append(cell)
        text = "\n".join(texts)
        facts.text = text
        for d in dtypes_in(text):
            if d not in facts.dtypes:
                facts.dtypes.append(d)
        for f in formats_in(text):
            if f not in facts.formats:
                facts.formats.append(f)
        out.setdefault(name, facts)
    return out


def parse_params(body: str) -> dict[str, ParamFacts]:
    """Every layout merged; a bullet block wins over a summary table row."""
    params = _bullet_params(body)
    for name, facts in _table_params(body).items():
        have = params.get(name)
        if have is None:
            params[name] = facts
            continue
        have.type_text = have.type_text or facts.type_text
        for d in facts.dtypes:
            if d not in have.dtypes:
                have.dtypes.append(d)
        for f in facts.formats:
            if f not in have.formats:
                have.formats.append(f)
    return params


_DEPRECATED = re.compile(r"(?:该|此)接口(?:计划|已|将)?(?:被)?废弃")
_REPLACEMENT = re.compile(r"`((?:torch_npu|torch)\.[A-Za-z0-9_.]+)`")


def parse_page(path: Path) -> Page:
    text = clean_markdown(path.read_text(encoding="utf-8-sig"))
    title, sections = _sections(text)
    tm = _TITLE.match(strip_tags(title).strip())
    fm = _FILE.match(path.name)
    beta = bool((tm and tm.group("beta")) or (fm and fm.group("beta")))
    namespace = tm.group("ns") if tm else "torch_npu"
    title_name = tm.group("name") if tm else (fm.group("name") if fm else path.stem)
    protos = _prototypes(_section(sections, "函数原型"))
    apis = list(protos) or [title_name]
    products, unknown, has_table, unsupported = _products(_section(sections, "产品支持情况"))
    params = parse_params(_section(sections, "参数说明"))
    returns = list(parse_params(_section(sections, "返回值说明", "输出说明", "返回值")).values())
    dep = _DEPRECATED.search(text)
    hint = None
    if dep:
        line_end = text.find("\n", dep.end())
        rm = _REPLACEMENT.search(text[dep.end() : line_end if line_end > 0 else None])
        hint = rm.group(1) if rm else None
    return Page(
        file=path.name,
        apis=apis,
        namespace=namespace,
        beta=beta,
        prototypes=protos,
        products=products,
        unknown_products=unknown,
        has_product_table=has_table,
        unsupported_products=unsupported,
        params=params,
        returns=returns,
        deprecated=dep is not None,
        replacement_hint=hint,
    )


def load_pages(op_plugin: Path) -> list[Page]:
    return [parse_page(p) for p in api_page_files(docs_dir(op_plugin))]
