"""Stage options by name: ``--set STAGE.OPTION=VALUE``, ``[pipeline.STAGE]`` tables and flags as one
option tree ``{stage: {option: value}}``, checked against each stage's config dataclass.

Why one module: the same tree shape comes from three places (a config file, ``--set``, named flags)
and every one of them must be merged the same way and fail with the same one-line errors, naming the
option and the ones that exist. :func:`merge_trees` is also how the settings layers (file, ``M3_*``
environment, flags) are merged (stages/core/config.py).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

import tomllib

from m3cli.stages.core.errors import InputError


def option(default: Any, *flags: str, help: str = "", **extra: Any) -> Any:  # noqa: A002 - typer's name
    """A config field declared once: its default, the command-line flags that set it and their help.

    ``flags`` empty: the option is reached through ``--set`` and ``m3.toml`` only. ``extra`` holds
    what a command-line option needs beyond that (``show_default``, ``metavar``...)."""
    return field(default=default, metadata={"flags": flags, "help": help, "extra": extra})


def parse_assignment(text: str) -> tuple[str, list[str], Any]:
    """``faces.fps=2`` -> ("faces", ["fps"], 2). Values are read as TOML (numbers, true/false, quoted
    strings, lists); anything that is not valid TOML is taken as a plain string (paths, names)."""
    name, sep, raw = text.partition("=")
    parts = [p.strip() for p in name.strip().split(".")]
    if not sep or len(parts) < 2 or not all(parts):
        raise InputError(f"--set {text!r}: expected STAGE.OPTION=VALUE, e.g. faces.fps=2")
    raw = raw.strip()
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return parts[0], parts[1:], value


def set_path(tree: dict[str, Any], path: list[str], value: Any) -> None:
    """``tree[path[0]][path[1]]... = value``, creating the tables on the way."""
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
    tree[path[-1]] = value


def assignments(texts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Several ``--set`` values as one ``{stage: {option: value}}`` tree (later ones win)."""
    tree: dict[str, Any] = {}
    for text in texts:
        stage, path, value = parse_assignment(text)
        set_path(tree, [stage, *path], value)
    return tree


def merge_trees(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Option trees merged left to right, later layers winning leaf by leaf; tables are merged, not
    replaced, and no layer is changed."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merge_trees(out[key], value)
            else:
                out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the type a config field declares (ints for floats, numbers for strings...)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, where)
            except InputError as exc:
                errors.append(str(exc))
        raise InputError(errors[0] if errors else f"{where}: cannot use {value!r}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise InputError(f"{where}: expected options of {hint.__name__}, got {value!r}")
        return build_config(hint, value, where)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
            return value.lower() in ("true", "yes", "1")
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    else:
        return value
    raise InputError(f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


def build_config(cls: type, options: Mapping[str, Any], where: str) -> Any:
    """An instance of the config dataclass ``cls`` from its defaults and ``options`` (checked by name)."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in options.items():
        if key not in names:
            raise InputError(f"{where}.{key}: unknown option; {where} has {', '.join(names)}")
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    return cls(**kwargs)


def option_paths(cls: type, prefix: str = "") -> list[str]:
    """Every option of the config dataclass ``cls`` as a dotted path (nested configs flattened)."""
    hints = typing.get_type_hints(cls)
    out: list[str] = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += option_paths(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out
