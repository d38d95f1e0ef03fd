"""The committed JSON Schema text of a model: one format for every file under `schemas/`."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


def schema_text(model: type[BaseModel], file_name: str, **options: Any) -> str:
    """`model`'s JSON Schema with `$schema` and `$id`, sorted, as written to `schemas/`."""
    schema = model.model_json_schema(**options)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://github.com/clavain-dev/clavain/schemas/{file_name}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
