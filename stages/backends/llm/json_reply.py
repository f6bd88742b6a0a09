"""Reading a model's JSON reply: pull the value out of chatty text, list its schema violations, and word
the repair request that goes back to the model.

Kept apart from the client (:mod:`m3cli.stages.backends.llm`), which only sends and retries: the same
reading serves the client's ``chat_json`` and callers that parse a plain reply themselves.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where schemas are checked: `m3 ask` without an LLM never needs it
    import jsonschema


def _strip_fences(text: str) -> str:
    """The body of the first ``` fenced block if there is one, else the text itself."""
    start = text.find("```")
    if start < 0:
        return text
    body_start = text.find("\n", start)
    if body_start < 0:
        return text
    end = text.find("```", body_start)
    return text[body_start + 1 : end if end >= 0 else len(text)]


def _balanced_end(text: str, start: int) -> int:
    """Index just past the object opening at `start`, or -1 if it never closes (truncated)."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def extract_json(text: str) -> Any:
    """Pull the JSON value out of a chatty reply: whole text, else fenced block, else first balanced object.

    Raises ValueError with a message fit to show the model in a repair request.
    """
    for candidate in (text, _strip_fences(text)):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            pass
    source = _strip_fences(text)
    first_error = None
    pos = source.find("{")
    while pos >= 0:
        end = _balanced_end(source, pos)
        if end < 0:
            truncated = "the JSON object is incomplete (unbalanced braces; was it cut off?)"
            raise ValueError(first_error or truncated)
        try:
            return json.loads(source[pos:end])
        except json.JSONDecodeError as exc:
            first_error = first_error or f"the JSON object does not parse: {exc}"
        pos = source.find("{", end)
    raise ValueError(first_error or "no JSON object found in the reply")


def _path(error: jsonschema.ValidationError) -> str:
    out = "$"
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def schema_problems(obj: Any, schema: dict, limit: int = 10) -> list[str]:
    """Human-readable schema violations, each naming where in the object it is."""
    import jsonschema

    validator_cls = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_cls(schema).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [f"at {_path(e)}: {e.message[:300]}" for e in errors[:limit]]


def repair_prompt(problems: list[str]) -> str:
    listed = "\n".join(f"- {p}" for p in problems)
    return (
        "Your previous reply could not be used. Problems:\n"
        f"{listed}\n"
        "Reply again with the corrected JSON object only: no prose, no code fences."
    )
