"""Arguments and options that every stage command shares, declared once so they read the same in
every `--help`."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# typer.Argument and typer.Option are typed Any so that they can stand as a parameter's default
# (`inputs: list[str] = inputs_argument()`); these two are the same.


def inputs_argument() -> Any:
    """``FILE...``: clip record files; none or ``-`` reads stdin."""
    return typer.Argument(
        None, help="Clip record files (JSONL); '-' or nothing reads stdin.", show_default=False
    )


def output_option() -> Any:
    """``-o FILE``: write the records to a file, atomically, instead of stdout."""
    return typer.Option(
        None, "--output", "-o", help="Write records to this file (atomically) instead of stdout."
    )


#: Old spelling -> the one spelling of its concept (docs/reference/options.md). The old spelling still
#: works, hidden from --help, until the next release; then these lines and OldSpellings go.
OLD_SPELLINGS: dict[str, str] = {
    "--offline": "--no-llm",  # memorize, abstract, run, batch, watch: never call an LLM
    "--det-side": "--detect-side",  # sight, eval sight: the longer side the (text) detector sees
}


def no_llm_option(help: str) -> Any:  # noqa: A002 - typer's name
    """``--no-llm``: never call an LLM, even if one is configured (retrieval-only, offline memorizer)."""
    return typer.Option(False, "--no-llm", help=help)


class OldSpellings(TyperCommand):
    """A command that also takes the old spelling of each of its renamed flags (``OLD_SPELLINGS``):
    the same option under its old name, hidden from --help, with the same type, default and effect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import copy

        super().__init__(*args, **kwargs)
        renamed = {new: old for old, new in OLD_SPELLINGS.items()}
        for param in list(self.params):
            olds = [renamed[n] for n in getattr(param, "opts", []) if n in renamed]
            if param.param_type_name != "option" or not olds:
                continue
            alias = copy.copy(param)  # same name: whichever spelling is given sets the one value
            alias.opts, alias.secondary_opts, alias.hidden = olds, [], True  # type: ignore[attr-defined]
            self.params.append(alias)


class GlobalOptionsAnywhere(TyperGroup):
    """The root ``m3`` group, which also takes its own options after the subcommand.

    ``m3 faces -q clips.jsonl`` and ``m3 -q faces clips.jsonl`` mean the same: before the command
    line is parsed, root options found after the subcommand (``-q``, ``-vv``, ``--device cuda``,
    ``--cache-dir=DIR`` ...) move in front of it. A subcommand that declares an option of the same
    name (``m3 diarize --device``) keeps it, and nothing after ``--`` moves.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_root_options(self, ctx, args))


def _option_names(command: Any) -> dict[str, Any]:
    """``{"--quiet": param, "-q": param, ...}`` for every option ``command`` declares."""
    return {
        name: p
        for p in getattr(command, "params", [])
        if getattr(p, "param_type_name", "") == "option"
        for name in (*p.opts, *p.secondary_opts)
    }


def _takes_value(param: Any) -> bool:
    return not (getattr(param, "is_flag", False) or getattr(param, "count", False))


def hoist_root_options(group: Any, ctx: Any, args: list[str]) -> list[str]:
    """``args`` with the root options that follow the subcommand moved in front of it."""
    root = _option_names(group)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":  # root options already first
        p = root.get(args[i].split("=", 1)[0])
        i += 2 if p is not None and _takes_value(p) and "=" not in args[i] else 1
    if i >= len(args) or args[i] == "--":
        return args
    taken: set[str] = set()  # option names the subcommand (or a nested group on the way) declares
    command, j = group, i
    while j < len(args) and hasattr(command, "get_command") and not args[j].startswith("-"):
        command = command.get_command(ctx, args[j])
        if command is None:
            return args  # unknown command: let the parser say so
        taken |= set(_option_names(command))
        j += 1
    shorts = {n[1]: p for n, p in root.items() if len(n) == 2 and n not in taken and not _takes_value(p)}
    moved: list[str] = []
    rest: list[str] = []
    k = j
    while k < len(args):
        arg = args[k]
        if arg == "--":
            rest += args[k:]
            break
        name = arg.split("=", 1)[0]
        param = root.get(name) if name not in taken else None
        if param is not None and arg.startswith("-"):
            moved.append(arg)
            if _takes_value(param) and "=" not in arg and k + 1 < len(args):
                moved.append(args[k + 1])
                k += 1
        elif len(arg) > 2 and arg[0] == "-" and arg[1] != "-" and all(c in shorts for c in arg[1:]):
            moved.append(arg)  # bundled root flags: -vv, -qv
        else:
            rest.append(arg)
        k += 1
    return args[:i] + moved + args[i:j] + rest


def stage_option(config: type, name: str, help: str | None = None) -> Any:  # noqa: A002 - typer's name
    """The command-line option of a stage option, from its one declaration in stages/configs/
    (default, flags, help: see ``m3cli.stages.core.options.option``).

    A flag that turns an option off (``--no-fts`` for ``fts = True``) is declared with ``off=True``:
    it defaults to off-not-given and hands the command the option's value, not the flag's. ``help``
    words the option for a command of its own (`m3 eval diarization` scores with diarize's options)."""
    import dataclasses

    f = next((f for f in dataclasses.fields(config) if f.name == name), None)
    if f is None or not f.metadata.get("flags"):
        raise AssertionError(f"{config.__name__}.{name} declares no command-line flag")
    extra = dict(f.metadata["extra"])
    text = f.metadata["help"] if help is None else help
    if extra.pop("off", False):
        return typer.Option(False, *f.metadata["flags"], help=text, callback=_negate, **extra)
    return typer.Option(f.default, *f.metadata["flags"], help=text, **extra)


def _negate(value: bool) -> bool:
    return not value


def stage_config(config: type, params: dict[str, Any], **renamed: str) -> Any:
    """An instance of ``config`` from a command's parsed parameters (``ctx.params``): each option
    whose flag the command declares, under the option's own name (or ``renamed[option]``), and the
    options of a nested config under ``FIELD_OPTION`` (``cluster_threshold``)."""
    import dataclasses

    kwargs = {}
    for f in dataclasses.fields(config):
        key = renamed.get(f.name, f.name)
        if f.metadata.get("flags") and key in params:
            kwargs[f.name] = params[key]
        elif dataclasses.is_dataclass(f.default_factory):  # nested options: `cluster_threshold`
            prefix = f"{f.name}_"
            nested = {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
            kwargs[f.name] = stage_config(f.default_factory, nested)
    return config(**kwargs)
