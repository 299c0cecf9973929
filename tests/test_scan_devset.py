"""The development set of ``kb scan``'s plan (issue 19): its manifest is consistent and
its citations point at port lines that call the family's operators; and, when the
released wheels are unpacked where ``KB_SCAN_DEVSET`` says (``transformers/`` and
``diffusers/`` below it), the plan meets the issue's bar on every file.  The wheels are
never stored in the project; without them that part is skipped.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
MANIFEST = yaml.safe_load((HERE / "data" / "scan-devset.yaml").read_text(encoding="utf-8"))
CORPUS = HERE.parent.parent / "shared" / "corpus"
CITE = re.compile(r"^(vllm-ascend|diffusers):([\w./-]+\.py):(\d+)$")


def _measure() -> Any:
    spec = importlib.util.spec_from_file_location(
        "scan_devset", HERE.parent / "scripts" / "scan_devset.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.measure


def test_manifest_has_enough_files_and_known_families() -> None:
    files = MANIFEST["files"]
    assert sum(f["file"].startswith("transformers/") for f in files) >= 20
    assert sum(f["file"].startswith("diffusers/") for f in files) >= 5
    for item in files:
        assert item["families"], item["file"]
        assert set(item["families"]) <= set(MANIFEST["families"]), item["file"]
        for cites in item["families"].values():
            assert all(CITE.match(c) for c in cites), cites


def test_vllm_ascend_citations_call_the_family() -> None:
    root = CORPUS / "vllm-ascend"
    if not root.is_dir():
        pytest.skip("../shared/corpus is not here")
    for item in MANIFEST["files"]:
        for family, cites in item["families"].items():
            for cite in cites:
                port, path, line = CITE.match(cite).groups()  # type: ignore[union-attr]
                if port != "vllm-ascend":
                    continue
                lines = (root / path).read_text(encoding="utf-8").splitlines()
                near = "\n".join(lines[int(line) - 3 : int(line) + 2])
                assert any(op in near for op in MANIFEST["families"][family]), (cite, family)


@pytest.mark.skipif(
    not os.environ.get("KB_SCAN_DEVSET"), reason="set KB_SCAN_DEVSET to the unpacked wheels"
)
def test_plan_meets_the_bar_on_the_development_set() -> None:
    rows = _measure()(Path(os.environ["KB_SCAN_DEVSET"]))
    present = [r for r in rows if not r.get("missing")]
    if not present:
        pytest.skip("no development-set file under KB_SCAN_DEVSET")
    wanted = sum(len(r["wanted"]) for r in present)
    found = sum(len(r["found"]) for r in present)
    assert found >= 0.9 * wanted, [(r["file"], r["missed"]) for r in present if r["missed"]]
    for r in present:
        assert r["wrong"] == [] and r["check_errors"] == [] and r["false"] == [], r
