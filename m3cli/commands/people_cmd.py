"""`m3 people MEMORY` and `m3 people show|name|merge|split`: the memory's people across its videos."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from typer.core import TyperGroup

from m3cli.terminal import echo, safe


class _ListByDefault(TyperGroup):
    """`m3 people MEMORY` is `m3 people list MEMORY`: a first word that is no subcommand is a memory."""

    def parse_args(self, ctx, args):
        first = next((a for a in args if not a.startswith("-")), None)
        if (
            first is not None
            and first not in self.commands
            and not any(a in ("-h", "--help") for a in args[:1])
        ):
            args = ["list", *args]
        return super().parse_args(ctx, args)


people_app = typer.Typer(
    cls=_ListByDefault,
    help="List the memory's people across its videos; show one, name, merge or split them.",
    no_args_is_help=True,
    epilog=(
        "\b\nExamples:\n  m3 people mem.lance\n  m3 people mem.lance --format jsonl\n"
        "  m3 people show mem.lance '<person_2>'\n  m3 people name mem.lance '<person_2>' Alice\n"
        "  m3 people merge mem.lance '<person_2>' '<person_5>'\n"
        "  m3 people split mem.lance '<person_2>' --video day3.mp4\n"
        "\b\nPeople are matched when videos are indexed (m3 index, m3 run -o, m3 batch, m3 watch); edits\n"
        "live in the memory and bind every later addition. See docs/people.md."
    ),
)

_MEMORY = typer.Argument(..., help="The memory (directory).", show_default=False)
_PERSON = typer.Argument(..., help="A person: <person_N>, N, or a name.", show_default=False)
_FORMAT = typer.Option("text", "--format", "-f", help="text or jsonl.")


def _check_format(fmt: str) -> None:
    from m3cli.stages.core.errors import InputError

    if fmt not in ("text", "jsonl"):
        raise InputError(f"--format: {fmt!r} is not text or jsonl")


@people_app.command("list")
def list_people(memory: str = _MEMORY, fmt: str = _FORMAT) -> None:
    """One line per person: id, name, videos, first and last seen."""
    from m3cli.stages.people.pages import PeopleBook

    _check_format(fmt)
    book = PeopleBook.open(memory)
    for p in book.people.values():
        rec = p.record()
        if fmt == "jsonl":
            typer.echo(orjson.dumps(rec).decode())
            continue
        files = ", ".join(Path(v["path"]).name for v in rec["videos"])
        n = len(rec["videos"])
        echo(
            f"{safe(p.id)}\t{safe(p.name or '-')}\t{n} video{'' if n == 1 else 's'}\t"
            f"{_shown(rec['first_seen'])} .. {_shown(rec['last_seen'])}\t{safe(files)}"
        )


def _shown(iso: str | None) -> str:
    """An ISO 8601 time as a person reads it in a table: to the second, UTC named ('-' unknown)."""
    if not iso:
        return "-"
    from datetime import datetime

    t = datetime.fromisoformat(iso)
    zone = (
        " UTC" if t.utcoffset() is not None and not t.utcoffset() else t.strftime(" %z") if t.tzinfo else ""
    )
    return t.strftime("%Y-%m-%d %H:%M:%S") + zone


@people_app.command("show")
def show(memory: str = _MEMORY, person: str = _PERSON, fmt: str = _FORMAT) -> None:
    """One person's page: names, first/last seen, videos and days, who with, what they said most about."""
    from m3cli.stages.people.pages import PeopleBook, page, said_most_about

    _check_format(fmt)
    book = PeopleBook.open(memory)
    p = book.find(person)
    if fmt == "jsonl":
        rec = {
            **p.record(),
            "days": p.days(),
            "with": book.with_whom(p),
            "said_most_about": said_most_about(memory, p),
        }
        typer.echo(orjson.dumps(rec).decode())
        return
    for line in page(memory, book, p):
        echo(safe(line))


@people_app.command("name")
def name(
    memory: str = _MEMORY, person: str = _PERSON, new_name: str = typer.Argument(..., metavar="NAME")
) -> None:
    """Name a person (across all their videos; '' removes the name you gave)."""
    from m3cli.stages.people.edit import name_person

    out = name_person(memory, person, new_name)
    echo(f"{out['person']}: name {safe(out['name'] or '(none)')}")


@people_app.command("merge")
def merge(
    memory: str = _MEMORY,
    keep: str = typer.Argument(..., help="The person kept."),
    other: str = typer.Argument(..., help="The person merged into it."),
) -> None:
    """Two people are one: the second's appearances join the first."""
    from m3cli.stages.people.edit import merge_people

    out = merge_people(memory, keep, other)
    echo(f"{out['merged']} merged into {out['person']} ({out['appearances']} appearance(s))")


@people_app.command("split")
def split(
    memory: str = _MEMORY,
    person: str = _PERSON,
    video: list[str] = typer.Option(
        ..., "--video", help="A video to split off (path, file name or id); repeatable."
    ),
) -> None:
    """The person's appearances in these videos become a new person, never rejoined automatically."""
    from m3cli.stages.people.edit import split_person

    out = split_person(memory, person, video)
    echo(f"{out['new']} split from {out['person']} ({out['appearances']} appearance(s))")


def register(app: typer.Typer) -> None:
    app.add_typer(people_app, name="people")
