"""Which operators kb.emulate runs, as kb show and the site say it (no torch needed)."""

from __future__ import annotations

import json

import pytest

from kb.catalog.compiled import open_catalog
from kb.cli import main
from kb.emulate import emulated, emulated_names
from kb.emulate.names import PLUMBING, how, in_words
from kb.reference import available
from site_plugins.common import SiteData
from site_plugins.operators import operator_page


def test_every_reference_and_the_plumbing_are_emulated() -> None:
    names = emulated_names()
    assert set(available()) <= set(names) and set(PLUMBING) <= set(names)
    catalog = open_catalog()
    for name in PLUMBING:  # each plumbing operator has a record with a schema to register
        rec = catalog.get(name)
        assert rec is not None and rec["kind"] == "operator" and rec["signature"], name
    assert how("npu_swiglu") == "reference" and how("npu_format_cast") == "plumbing"
    other = _not_emulated()
    assert not emulated(other) and how(other) is None


def _not_emulated() -> str:
    """An operator record no reference computes (picked from the records, so a new
    reference never breaks these tests)."""
    names = set(emulated_names())
    return next(
        r["name"]
        for r in open_catalog().records()
        if r["kind"] == "operator" and r["name"] not in names
    )


def _show(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["show", *argv]) == 0
    return capsys.readouterr().out


def test_kb_show_says_whether_an_operator_is_emulated(capsys: pytest.CaptureFixture[str]) -> None:
    assert json.loads(_show(capsys, "npu_swiglu", "--format", "json"))["emulated"] is True
    other = _not_emulated()
    assert json.loads(_show(capsys, other, "--format", "json"))["emulated"] is False
    assert (
        json.loads(_show(capsys, "npu_swiglu", "--brief", "--format", "json"))["emulated"] is True
    )
    assert "emulated: yes: kb emulate runs it on the CPU" in _show(capsys, "npu_swiglu", "--brief")
    assert "emulated: no: there is no numpy reference" in _show(capsys, other)
    assert "emulated: yes: kb emulate returns a copy" in _show(capsys, "npu_format_cast", "--brief")
    chain = json.loads(_show(capsys, "npu_swiglu", "--section", "parameters", "--format", "json"))
    assert "emulated" not in chain  # a section is the record's field alone


def test_the_operator_page_says_it_too() -> None:
    catalog = open_catalog()
    data = SiteData.from_records(catalog.records(), [])
    assert f"Emulated\n:   {in_words('npu_swiglu')}" in operator_page(
        data.operators["npu_swiglu"], data
    )
    page = operator_page(data.operators[_not_emulated()], data)
    assert "Emulated\n:   no: there is no numpy reference" in page
