"""Facts from the wheel's operator docstrings, for operators without an official page.

The docstrings (``help(torch_npu.npu_x)``) follow a loose layout: "参数说明" with one
``name：…`` or ``name (Type) - …`` line per argument, "支持的型号" with product names
spelled a little differently from the pages.  Only dtype and format lists and the
product ids are taken; the sentences stay upstream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kb.vocab import PRODUCT_OFFICIAL_NAMES, collapse_products, normalize
from tools.upstream.pages import ParamFacts
from tools.upstream.text import dtypes_in, formats_in

_HEADINGS = (
    "接口原型",
    "功能描述",
    "参数说明",
    "输出说明",
    "返回值说明",
    "约束说明",
    "支持的型号",
    "支持的芯片型号",
    "调用示例",
    "示例",
    "支持版本",
    "计算公式",
    "图模式调用",
    "单算子模式调用",
    "关键字参数",
    "参数",
)
_HEADING = re.compile(r"^\s*(?:" + "|".join(_HEADINGS) + r")\s*[:：]?\s*$")
_PARAM = re.compile(
    r"^\s*[-*]?\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:[（(](?P<type>[^)）]*)[)）])?\s*(?:[:：]|-\s|-(?=\S))"
)

#: Docstring spellings of products that the official ``<term>`` names do not cover.
_DOC_PRODUCTS: dict[str, str] = {
    "昇腾950AI处理器": "ascend-950",
    "950DT": "ascend-950dt",
    "950PR": "ascend-950pr",
    "A2训练、推理系列产品": "atlas-a2",
    "A2训练与推理系列产品": "atlas-a2",
    "A3训练、推理系列产品": "atlas-a3",
    "A3训练与推理系列产品": "atlas-a3",
    "Atlas800IA2中的推理产品": "atlas-a2",
}
_SQUEEZED: dict[str, str] = {"".join(k.split()): v for k, v in PRODUCT_OFFICIAL_NAMES.items()}
_SQUEEZED.update(_DOC_PRODUCTS)


@dataclass
class DocFacts:
    params: dict[str, ParamFacts] = field(default_factory=dict)
    products: list[str] = field(default_factory=list)
    unknown_products: list[str] = field(default_factory=list)


def product_from_doc(name: str) -> str | None:
    squeezed = "".join(name.strip().lstrip("-").split())
    return _SQUEEZED.get(squeezed) or normalize("product", name.strip().lstrip("- "))


def _section(lines: list[str], names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    inside = False
    for line in lines:
        if _HEADING.match(line):
            head = line.strip().rstrip(":：").strip()
            inside = head in names
            continue
        if inside:
            out.append(line)
    return out


def parse_docstring(doc: str, arg_names: list[str]) -> DocFacts:
    lines = doc.replace("\r\n", "\n").split("\n")
    facts = DocFacts()
    wanted = set(arg_names)
    current: ParamFacts | None = None
    buf: list[str] = []

    def flush() -> None:
        if current is not None:
            text = "\n".join(buf)
            current.text = text
            current.dtypes = dtypes_in(text)
            current.formats = formats_in(text)
            facts.params.setdefault(current.name, current)

    for line in _section(lines, ("参数说明", "参数", "关键字参数")):
        m = _PARAM.match(line)
        if m and m.group("name") in wanted:
            flush()
            current = ParamFacts(m.group("name"), (m.group("type") or "").strip() or None)
            buf = [line[m.end() :]]
        elif current is not None:
            buf.append(line)
    flush()
    for line in _section(lines, ("支持的型号", "支持的芯片型号")):
        text = line.strip()
        if not text or set(text) <= {"-"}:
            continue
        whole = product_from_doc(text)
        parts = [text] if whole else [p for p in re.split(r"[/、]", text) if p.strip()]
        for part in parts:
            pid = product_from_doc(part)
            if pid is None:
                facts.unknown_products.append(part.strip())
            elif pid not in facts.products:
                facts.products.append(pid)
    facts.products = collapse_products(facts.products)
    return facts
