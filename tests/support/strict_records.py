"""Fields a clip record carries that neither the JSON Schema nor the typed records declare.

Records keep unknown fields on purpose (a user's own annotations pass through), so the published
schema allows them; a field a *stage* writes must still be declared. This reads a record against the
schema with every object closed (``additionalProperties: false`` wherever properties are listed) and
against the pydantic models (their ``model_extra``), and names each undeclared field by its path.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import jsonschema
from pydantic import BaseModel

from m3cli.schemas import load_schema
from m3cli.schemas.records import ClipRecord


def _close(node: Any) -> Any:
    if isinstance(node, dict):
        if "properties" in node and node.get("additionalProperties", True) is True:
            node["additionalProperties"] = False
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for value in node:
            _close(value)
    return node


@cache
def _closed_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_close(copy.deepcopy(load_schema("m3.clip/1"))))


def _extras(model: Any, path: str, out: list[str]) -> None:
    if isinstance(model, BaseModel):
        out += [f"{path}.{k}" for k in model.model_extra or {}]
        for name in type(model).model_fields:
            _extras(getattr(model, name), f"{path}.{name}", out)
    elif isinstance(model, (list, tuple)):
        for item in model:
            _extras(item, f"{path}[]", out)


def undeclared_fields(record: dict) -> list[str]:
    """Paths of the fields in ``record`` the schema or the models do not declare (empty when none)."""
    out = []
    for e in _closed_validator().iter_errors(record):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
        out.append(f"schema {where}: {e.message}")
    _extras(ClipRecord.model_validate(record), "model ", out)
    return out
