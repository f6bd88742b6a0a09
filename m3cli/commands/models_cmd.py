"""`m3 models [list|check|export|prepare]`"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from m3cli import context
from m3cli.terminal import echo, safe

models_app = typer.Typer(
    help="List the models m3 can use, verify their files, export them, prepare them once.",
    invoke_without_command=True,
    epilog=(
        "\b\nExamples:\n  m3 models\n  m3 models check\n  m3 models export /media/usb/m3-models\n"
        "  M3_MODEL_DIR=/media/usb/m3-models m3 run talk.mp4 -o mem.lance\n  m3 models prepare"
    ),
)


@models_app.callback()
def _default(ctx: typer.Context) -> None:
    """Without a subcommand: the list."""
    if ctx.invoked_subcommand is None:
        list_models(json_out=False)


@models_app.command("list")
def list_models(
    json_out: bool = typer.Option(False, "--json", help="One JSON object per model on stdout."),
) -> None:
    """Every model m3 can use: task, default or optional, package, upstream, licence, size, SHA-256."""
    import orjson

    from m3cli.stages.backends import models
    from m3cli.stages.core.sizes import human

    for m in models.CATALOGUE:
        here = models.installed(m)
        if json_out:
            row = {
                "id": m.id,
                "task": m.task,
                "use": "default" if m.default else "optional",
                "option": m.option,
                "package": m.package or None,
                "upstream": m.upstream,
                "licence": m.licence,
                "upstream_check": m.upstream_check,
                "installed": here,
                "size": m.size,
                "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in m.files],
            }
            echo(orjson.dumps(row).decode())
            continue
        state = ("installed" if here else "not installed") if m.shipped else "not shipped by m3"
        use = "default" if m.default else "optional"
        echo(f"{m.id}  ({use}; {state}; {human(m.size) if m.shipped else '-'})")
        echo(f"  task      {m.task}: {m.option}")
        echo(f"  package   {m.package or '-'}")
        echo(f"  upstream  {m.upstream}")
        echo(f"  licence   {m.licence}")
        echo(f"  checked   {m.upstream_check}")
        for f in m.files:
            echo(f"  file      {f.name}  {human(f.size)}  sha256 {f.sha256}")
        echo()


@models_app.command()
def check(
    model: list[str] = typer.Option(
        [], "--model", "-m", help="Only this model id (repeatable; default: every installed model)."
    ),
) -> None:
    """Hash every installed model file afresh and compare it with the SHA-256 pinned in m3."""
    from m3cli.stages.backends import models
    from m3cli.stages.core.errors import M3Error

    where = models.model_dir()
    chosen = tuple(models.model(i) for i in model) if model else models.CATALOGUE
    bad = 0
    files = 0
    for item in models.check(chosen):
        files += 1
        if item.problem is None:
            echo(f"ok\t{item.model.id}\t{item.file.name}\t{safe(item.path)}")
        else:
            bad += 1
            echo(f"FAILED\t{item.model.id}\t{item.file.name}\t{safe(item.problem)}")
    source = f"{models.MODEL_DIR_ENV}={where}" if where is not None else "the installed packages"
    if bad:
        raise M3Error(f"models check: {bad} of {files} files differ from m3's pinned digests ({source})")
    echo(f"m3: models check: {files} files match their pinned SHA-256 ({source})", err=True)


@models_app.command()
def export(
    ctx: typer.Context,
    directory: Path = typer.Argument(..., help="Where to write the models (created if missing)."),
    model: list[str] = typer.Option(
        [], "--model", "-m", help="Only this model id (repeatable; default: every installed model)."
    ),
) -> None:
    """Copy the installed models' files into DIRECTORY for a machine without the model packages or a
    network; there, set M3_MODEL_DIR=DIRECTORY."""
    from m3cli.stages.backends import models
    from m3cli.stages.core.sizes import human

    quiet = context.state(ctx).quiet
    started = time.monotonic()

    def say(name: str) -> None:
        if not quiet:
            echo(f"copying {safe(name)}", err=True)

    written = models.export(directory, tuple(model), progress=say)
    size = sum(p.stat().st_size for p in written)
    echo(
        f"m3: models export: {len(written)} files, {human(size)} in {safe(directory)} "
        f"({time.monotonic() - started:.1f} s); use them with M3_MODEL_DIR={safe(directory)}",
        err=True,
    )


@models_app.command()
def prepare(ctx: typer.Context) -> None:
    """Do the one-time work now (ONNX exports, the text embedder's graph, OCR's model table) so the
    first `m3 run` does not: each is made once per machine in the model store, then only loaded."""
    from m3cli.stages.backends import model_prep
    from m3cli.stages.core import model_store
    from m3cli.stages.core.errors import M3Error

    quiet = context.state(ctx).quiet
    started = time.monotonic()

    def say(line: str) -> None:
        if not quiet:
            echo(safe(line), err=True)

    done = model_prep.prepare(say)
    failed = [(name, problem) for name, _, _, problem in done if problem]
    if failed:
        raise M3Error(f"models prepare: {failed[0][0]}: {failed[0][1]}")
    echo(
        f"m3: models prepare: {len(done)} files ready in {safe(model_store.root())} "
        f"({time.monotonic() - started:.1f} s)",
        err=True,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
