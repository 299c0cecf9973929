"""The README's counts agree with the records (scripts/readme_figures.py --write fixes them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _figures():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "readme_figures", ROOT / "scripts" / "readme_figures.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_figures_are_the_records_counts() -> None:
    figures = _figures()
    problems = figures.check((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems) + "\n(python scripts/readme_figures.py --write)"


def test_a_wrong_figure_is_named_with_the_right_number_and_rewritten() -> None:
    figures = _figures()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    chains = len(__import__("kb.catalog.compiled", fromlist=["x"]).open_catalog().names("chain"))
    import re

    wrong = re.sub(r"\d+ reference chains", f"{chains + 18} reference chains", text, count=1)
    assert figures.check(wrong) == [
        f"README.md says {chains + 18} reference chains; the records have {chains}"
    ]
    assert figures.write(wrong) == figures.write(text)
    assert figures.check(figures.write(wrong)) == []
