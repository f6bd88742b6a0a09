"""`m3 people MEMORY` and `m3 people show|name|merge|split`: the memory's people across its videos."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import typer
from typer.core import TyperGroup

from m3cli.terminal import echo, safe

if TYPE_CHECKING:
    from m3cli.stages.people.summary import PersonSummary


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
        "  m3 people show mem.lance '<person_2>'\n"
        "  m3 people show mem.lance '<person_2>' --summary --llm-base-url URL --llm-model NAME\n"
        "  m3 people summarize mem.lance --llm-base-url URL --llm-model NAME\n"
        "  m3 people name mem.lance '<person_2>' Alice\n"
        "  m3 people merge mem.lance '<person_2>' '<person_5>'\n"
        "  m3 people split mem.lance '<person_2>' --video day3.mp4\n"
        "\b\nPeople are matched when videos are indexed (m3 index, m3 run -o, m3 batch, m3 watch); edits\n"
        "live in the memory and bind every later addition. See docs/people.md."
    ),
)

_MEMORY = typer.Argument(..., help="The memory (directory).", show_default=False)
_PERSON = typer.Argument(..., help="A person: <person_N>, N, or a name.", show_default=False)
_FORMAT = typer.Option("text", "--format", "-f", help="text or jsonl.")
_LLM_BASE_URL = typer.Option(None, "--llm-base-url", help="OpenAI-compatible server (env M3_LLM_BASE_URL).")
_LLM_MODEL = typer.Option(None, "--llm-model", help="Chat model (env M3_LLM_MODEL).")
_LLM_API_KEY = typer.Option(None, "--llm-api-key", help="API key (env M3_LLM_API_KEY).")


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
def show(
    ctx: typer.Context,
    memory: str = _MEMORY,
    person: str = _PERSON,
    fmt: str = _FORMAT,
    summary: bool = typer.Option(
        False,
        "--summary",
        help="Add a profile across the person's videos, written by the LLM from their lines, citing them.",
    ),
    llm_base_url: str | None = _LLM_BASE_URL,
    llm_model: str | None = _LLM_MODEL,
    llm_api_key: str | None = _LLM_API_KEY,
) -> None:
    """One person's page: names, first/last seen, videos and days, who with, what they said most about
    (with --summary and an LLM, a profile across their videos that cites its lines)."""
    from m3cli.stages.people.pages import PeopleBook, page, said_most_about
    from m3cli.stages.people.summary import digest_of, person_lines, stored_profiles, summarize

    _check_format(fmt)
    client, cache = _llm(ctx, llm_base_url, llm_model, llm_api_key) if summary else (None, None)
    book = PeopleBook.open(memory)
    p = book.find(person)
    stored = stored_profiles(memory).get(p.id)
    lines = person_lines(memory, book, p) if stored is not None or summary else []
    if stored is not None:
        stored = {**stored, "current": stored["digest"] == digest_of(book, p, lines)}
    profile = summarize(client, book, p, lines, cache) if summary else None
    if fmt == "jsonl":
        rec = {
            **p.record(),
            "days": p.days(),
            "with": book.with_whom(p),
            "said_most_about": said_most_about(memory, p),
        }
        rec["profile"] = stored
        if summary:
            rec["summary"] = profile.as_json() if profile else None
        typer.echo(orjson.dumps(rec).decode())
        return
    for line in page(memory, book, p):
        echo(safe(line))
    if stored is not None:
        echo(safe(f"  profile ({stored['model']}, stored): {stored['text']}"))
        if not stored["current"]:
            echo("  (written before the person's latest lines: `m3 people summarize` renews it)")
    if summary:
        for line in _profile_lines(profile):
            echo(safe(line))


def _llm(ctx: typer.Context, base_url: str | None, model: str | None, api_key: str | None) -> tuple[Any, Any]:
    """The LLM client and cache a profile is written with; one clear line when no LLM is configured."""
    from m3cli import context
    from m3cli.stages.backends.llm import client_from_settings
    from m3cli.stages.core.errors import InputError

    settings = context.settings(ctx, **{"llm.base_url": base_url, "llm.model": model, "llm.api_key": api_key})
    client = client_from_settings(settings.llm)
    if client is None:
        raise InputError(
            "--summary needs an LLM: give --llm-base-url URL --llm-model NAME (or M3_LLM_BASE_URL and "
            "M3_LLM_MODEL); without one, the page above is what the memory says offline"
        )
    return client, context.cache(settings)


def _profile_lines(profile: PersonSummary | None) -> list[str]:
    if profile is None:
        return ["  summary: none (the memory holds no line about this person)"]
    cited = "; ".join(
        f"{Path(e.path).name}"
        + (f" {e.recorded[:10]}" if e.recorded else "")
        + (f" {e.t_start:.1f} s" if e.t_start is not None else "")
        for e in profile.evidence
    )
    return [f"  summary ({profile.model}): {profile.text}", f"  rests on: {cited}"]


@people_app.command("summarize")
def summarize_people(
    ctx: typer.Context,
    memory: str = _MEMORY,
    people: list[str] = typer.Argument(
        None, help="People to profile: <person_N>, N or a name [all].", show_default=False
    ),
    llm_base_url: str | None = _LLM_BASE_URL,
    llm_model: str | None = _LLM_MODEL,
    llm_api_key: str | None = _LLM_API_KEY,
) -> None:
    """Write and store each person's profile across their videos (LLM); a profile whose lines have not
    changed since it was written is kept. `m3 people show` and the answerer's [Character] tool read it."""
    from m3cli.stages.people.edit import save_profiles
    from m3cli.stages.people.pages import PeopleBook
    from m3cli.stages.people.summary import digest_of, person_lines, stored_profiles, summarize

    client, cache = _llm(ctx, llm_base_url, llm_model, llm_api_key)
    book = PeopleBook.open(memory)
    chosen = [book.find(ref) for ref in people] if people else list(book.people.values())
    stored = stored_profiles(memory)
    rows, kept, silent = [], 0, 0
    for p in chosen:
        lines = person_lines(memory, book, p)
        if p.id in stored and stored[p.id]["digest"] == digest_of(book, p, lines):
            kept += 1
            continue
        profile = summarize(client, book, p, lines, cache)
        if profile is None:
            silent += 1
            continue
        rows.append(profile.row())
        echo(safe(f"{book.display(p.id)}: {profile.text}"))
    save_profiles(memory, rows)
    note = f", {silent} with no line to profile" if silent else ""
    echo(
        f"m3: people summarize: {safe(memory)}: {len(rows)} profile(s) written, {kept} up to date{note}",
        err=True,
    )


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
