"""The record names behind the search box's "did you mean"."""

from __future__ import annotations

import json

from site_plugins.common import SiteData
from site_plugins.names import names_json


def _op(name: str, **extra: object) -> dict[str, object]:
    return {"kind": "operator", "name": name, "calls": [f"torch_npu.{name}"], **extra}


def test_current_names_come_first_and_superseded_ones_are_flagged() -> None:
    data = SiteData.from_records(
        [
            _op("npu_x_v1", status="deprecated", superseded_by="npu_x_v2"),
            _op("npu_x_v2", aliases=["x_two"], calls=["torch_npu.npu_x_v2", "torch.ops.npu.x2"]),
            {"kind": "chain", "name": "x-chain"},
        ]
    )
    entries = _expanded(json.loads(names_json(data)))
    assert entries[0] == ["npu_x_v2", "operators/npu_x_v2/", 1]
    assert ["npu_x_v1", "operators/npu_x_v1/", 0] in entries
    assert ["x-chain", "chains/x-chain/", 1] in entries
    # Aliases and call paths that differ from the name point at the record.
    assert ["x_two", "operators/npu_x_v2/", 1] in entries
    assert ["torch.ops.npu.x2", "operators/npu_x_v2/", 1] in entries
    assert "torch_npu.npu_x_v2" not in [e[0] for e in entries]  # folds to the name anyway


def _expanded(got: object) -> list[list[object]]:
    """What kb.js's expand() makes of kb-names.json: [[name, url, current], …]."""
    assert isinstance(got, dict) and set(got) == {"dirs", "names"}
    out: list[list[object]] = []
    for name, current, where in got["names"]:
        url = got["dirs"][where] + name + "/" if isinstance(where, int) else where
        out.append([name, url, current])
    return out


def test_flat_urls_follow_the_site_setting() -> None:
    data = SiteData.from_records([_op("npu_y")], directory_urls=False)
    assert json.loads(names_json(data)) == [["npu_y", "operators/npu_y.html", 1]]
