"""The cache folder kb finds without platformdirs on Linux is the one platformdirs names
in the plain cases (XDG_CACHE_HOME absolute, unset or empty; HOME absolute), and the
odd cases are left to platformdirs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kb.core import paths

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's rule")


@pytest.mark.parametrize(
    ("xdg", "home"),
    [
        (None, "/home/someone"),
        ("", "/home/someone"),
        ("/var/tmp/xdg-cache", "/home/someone"),
        ("/var/tmp/xdg-cache/", "/root"),
        ("relative/cache", "/home/someone"),
        (None, "relative-home"),
    ],
)
def test_the_plain_rule_agrees_with_platformdirs(
    xdg: str | None, home: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    platformdirs = pytest.importorskip("platformdirs")
    monkeypatch.delenv("KB_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", home)
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    want = Path(platformdirs.user_cache_dir("kb", appauthor=False))
    assert paths.cache_dir() == want
    plain = paths._xdg_cache()
    if plain is not None:
        assert plain == want  # the plain rule never disagrees where it answers


def test_a_cold_lookup_does_not_import_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KB_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # importing it would raise
    assert paths.cache_dir() == Path("/home/someone/.cache/kb")
