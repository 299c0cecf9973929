"""JSON Schemas of the record models, for editors and external validators."""

from __future__ import annotations

import json
from pathlib import Path

from kb.catalog.models import MODELS


def schemas() -> dict[str, str]:
    """File name → JSON text, one schema per record kind."""
    out = {}
    for kind, model in MODELS.items():
        schema = model.model_json_schema(by_alias=True)
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"{kind}.schema.json"
        out[f"{kind}.schema.json"] = (
            json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
        )
    return out


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schemas().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
