"""Line breaks inside table cells: identifiers wrap after an underscore, never mid-word.

Browsers find no break in ``npu_fused_infer_attention_score_v2`` or ``KB001``; the theme
then lets code break anywhere, so a narrow column cut codes into ``KB00`` / ``1``.  kb.css
stops that, and this pass gives identifiers in cells (record and hand-written pages
alike) a break opportunity after each underscore, so tables still fit a 390 px phone.
"""

from __future__ import annotations

import re

_TABLE = re.compile(r"<table\b.*?</table>", re.S | re.I)
_TEXT = re.compile(r">([^<]+)<")
_UNDERSCORE = re.compile(r"_(?=[A-Za-z0-9])")


def table_breaks(html: str) -> str:
    """``html`` with ``<wbr>`` after every underscore inside a word in table text."""

    def text(m: re.Match[str]) -> str:
        return ">" + _UNDERSCORE.sub("_<wbr>", m.group(1)) + "<"

    return _TABLE.sub(lambda m: _TEXT.sub(text, m.group(0)), html)
