"""Tokenization shared by the index builder and the query side.

Latin text: lower-cased words, stop words dropped, light stemming; identifiers such as
``npu_mla_prolog_v3`` yield the whole identifier, its parts and joined neighbours
(``rms_norm`` → ``rms``, ``norm``, ``rmsnorm``) so "rmsnorm" and "rms norm" meet.
Chinese text: character unigrams and bigrams (the CJKAnalyzer approach), which needs
no dictionary — jieba's 0.7 s load never touches the query path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

_LETTERS = re.compile(r"[a-z]+")

#: The CJK ideograph blocks (unified, extension A, compatibility) as code point ranges.
#: Tested with comparisons, not a regex class: compiling a class over these ~28,000
#: code points costs several ms per pattern, on every cold ``kb search``.
CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))
#: A Latin word, or a run of non-ASCII text that may hold CJK runs.
_CHUNK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*|[^\x00-\x7f]+")
_PARTS = re.compile(r"[_.\-]+")


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def _chunks(text: str) -> Iterator[tuple[str, bool]]:
    """Latin words and CJK runs of ``text`` in order, each with whether it is CJK."""
    for match in _CHUNK.finditer(text):
        chunk = match.group(0)
        if chunk[0].isascii():
            yield chunk, False
            continue
        start = None
        for i, ch in enumerate(chunk):
            if is_cjk(ch):
                if start is None:
                    start = i
            elif start is not None:
                yield chunk[start:i], True
                start = None
        if start is not None:
            yield chunk[start:], True


STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "our",
        "should",
        "the",
        "this",
        "that",
        "to",
        "use",
        "used",
        "using",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "want",
        "need",
        "me",
        "we",
        "you",
        "your",
        "there",
        "their",
        "op",
        "ops",
        "operator",
        "operators",
        "api",
        # the glue of task phrases ("add then rmsnorm in one kernel")
        "then",
        "followed",
        "one",
        "kernel",
        "single",
        "together",
        "step",
        "steps",
    ]
)

#: Stems that mean what a short operator-name part means ("quantized" ~ "quant").
_FOLD_STEMS = {
    "quantiz": "quant",
    "dequantiz": "dequant",
    "normal": "norm",
    "embed": "emb",
    "posit": "pos",
    "rotari": "rotary",
    "multipli": "mul",
}


#: word -> stem of every word :func:`stem` gave in this process (an index build writes
#: them beside its terms, so a later query stems its words without whoosh)
_SEEN: dict[str, str] = {}
#: far above the words of every record (a build stems about 3,000)
_SEEN_LIMIT = 1 << 18
#: word -> stem read from an index (:func:`known_stems`): what whoosh's stemmer gave
_KNOWN: dict[str, str] = {}


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter stem of alphabetic words; identifiers and short words stay as they are."""
    if len(word) <= 3 or not word.isalpha():
        return word
    stemmed = _KNOWN.get(word)
    if stemmed is None:
        from whoosh.lang.porter import stem as porter

        stemmed = str(porter(word))
        stemmed = _FOLD_STEMS.get(stemmed, stemmed)
    if len(_SEEN) < _SEEN_LIMIT:  # a long-running server's queries cannot grow it forever
        _SEEN[word] = stemmed
    return stemmed


def seen_stems() -> dict[str, str]:
    """Every (word, stem) :func:`stem` gave in this process."""
    return dict(_SEEN)


def known_stems(pairs: dict[str, str]) -> None:
    """Stems already computed (by an index build, with the same function) for words a
    query is about to stem: they are used in place of importing the stemmer."""
    _KNOWN.update(pairs)


def stem_candidates(text: str) -> list[str]:
    """The words of ``text`` that :func:`stem` may be asked about (lower-case letters,
    longer than three): what a query looks up before tokenizing."""
    return sorted({w for w in _LETTERS.findall(text.lower()) if len(w) > 3})


def latin_tokens(word: str) -> Iterator[str]:
    word = word.lower().strip("._-")
    if not word:
        return
    parts = [p for p in _PARTS.split(word) if p]
    if len(parts) > 1:
        yield word
        for i, part in enumerate(parts):
            if part not in STOP:
                yield stem(part)
            if i + 1 < len(parts):
                yield part + parts[i + 1]
    elif word not in STOP:
        yield stem(word)


def cjk_tokens(run: str, *, unigrams: bool) -> Iterator[str]:
    if len(run) == 1 or unigrams:
        yield from run
    for i in range(len(run) - 1):
        yield run[i : i + 2]


def tokens(text: str, *, query: bool = False) -> list[str]:
    """Tokens of ``text``; the query side drops CJK unigrams when bigrams exist."""
    out: list[str] = []
    for chunk, cjk in _chunks(text):
        if cjk:
            out.extend(cjk_tokens(chunk, unigrams=not query))
        else:
            out.extend(latin_tokens(chunk))
    return out


def query_words(text: str) -> list[list[str]]:
    """The query's tokens grouped by the word they come from (a run of Chinese is one
    word), dropping words that are all stop words: how much of the query a record
    holds is counted per word, so a long Chinese term's bigrams count once."""
    return [toks for chunk, _ in _chunks(text) if (toks := tokens(chunk, query=True))]


#: Chinese technical terms → the English words of operator names, so a mixed or Chinese
#: query ("分页 kv cache", "稀疏注意力") also counts towards name matches.  Query side only.
GLOSSARY: dict[str, str] = {
    "分页": "paged",
    "稀疏": "sparse",
    "注意力": "attention",
    "量化": "quant",
    "反量化": "dequant",
    "伪量化": "antiquant weight quant",
    "预取": "prefetch",
    "归一化": "norm",
    "旋转位置编码": "rope rotary",
    "位置编码": "rope",
    "专家": "expert",
    "路由": "routing",
    "门控": "gating",
    "缓存": "cache",
    "矩阵乘": "matmul",
    "分组": "grouped",
    "通信": "communication",
    "分发": "dispatch",
    "合并": "combine",
    "索引": "indexer",
    "激活": "activation",
    "采样": "sampling",
    "格式转换": "format cast",
    "转置": "transpose",
    "融合": "fused",
    "动态": "dynamic",
    "增量": "incre",
    "全量": "prompt",
    "残差": "add",
    "均方根": "rms",
}


def glossary_tokens(text: str) -> list[str]:
    """English tokens for the Chinese glossary terms found in ``text``."""
    out: list[str] = []
    for zh, en in GLOSSARY.items():
        if zh in text:
            out.extend(tokens(en))
    return out
