"""kb.text.wrapping gives textwrap's lines: the record views did not change when it
replaced textwrap on the hot path of ``kb show``."""

from __future__ import annotations

import random
import textwrap

import pytest

from kb.text.wrapping import wrap_words


def _textwrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        " ".join(text.split()),
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
    )


def test_generated_text_wraps_as_textwrap_wraps_it() -> None:
    rnd = random.Random(34)
    letters = "ab-c.,x…权"
    for _ in range(20_000):
        words = [
            "".join(rnd.choice(letters) for _ in range(rnd.choice((1, 2, 3, 5, 8, 13, 30))))
            for _ in range(rnd.randint(0, 12))
        ]
        text = rnd.choice((" ", "  ", "\t", " \n ", "\u3000")).join(words)
        width = rnd.randint(1, 30)
        first, rest = " " * rnd.randint(0, 12), " " * rnd.randint(0, 12)
        assert wrap_words(text, width, first, rest) == _textwrap(text, width, first, rest), (
            text,
            width,
            first,
            rest,
        )


@pytest.mark.parametrize(
    ("text", "width", "first", "rest"),
    [
        ("", 10, "  ", "  "),
        ("   ", 10, "", ""),
        ("one", 3, "", ""),
        ("averyveryverylongword tail", 8, "  ", "    "),  # cut to fill the line
        ("ab cdefghijklmnop", 6, "", ""),  # the cut starts after the space
        ("a b c", 2, "      ", "      "),  # indent wider than the line
        ("x " * 50, 80, "  label: ", "      "),
    ],
)
def test_corner_cases_match(text: str, width: int, first: str, rest: str) -> None:
    assert wrap_words(text, width, first, rest) == _textwrap(text, width, first, rest)


def test_a_width_below_one_is_refused_as_textwrap_refuses_it() -> None:
    with pytest.raises(ValueError, match="invalid width"):
        wrap_words("text", 0)
