# m3 developer tasks. `just` comes from the dev extra (rust-just).

venv := ".venv"
py := venv / "bin/python"

# install into .venv for development (CPU-only torch, test and lint tools)
install:
    bash scripts/install.sh {{venv}} --editable --dev

# run the test suite (what CI runs after installing)
test *args:
    {{py}} -m pytest -q {{args}}

# run the benchmarks and write bench/out/results.md (e.g. `just bench segment`)
bench *names:
    {{py}} bench/run.py {{names}}

src := "m3cli stages schemas tests bench examples"

# lint
lint:
    {{venv}}/bin/ruff check {{src}}

# type check at a basic level (mypy on m3cli with stages/ and schemas/ mapped in as installed)
typecheck:
    {{py}} scripts/typecheck.py

# the quick gate: lint, format check, type check, then the fast tier (tests not marked slow);
# CI runs the first three before the full suite
check:
    {{venv}}/bin/ruff check {{src}}
    {{venv}}/bin/ruff format --check {{src}}
    {{py}} scripts/typecheck.py
    {{py}} -m pytest -q -p no:cacheprovider -m "not slow"

# run the pipeline on the bundled real sample
demo:
    bash examples/quickstart.sh

# the diarization dev table: every dev recording, per file, per group and pooled (speaker turns)
eval media="../shared/media" *args:
    {{py}} -m m3cli eval diarization --manifest tests/data/diarization_dev.manifest --media-root {{media}} --turns-only {{args}}

# build the documentation site into site/ (strict: a broken link fails) and check README's command
# lines; `python scripts/readme_tour.py` also runs the README's tour (about a minute)
docs:
    {{venv}}/bin/mkdocs build --strict
    {{py}} scripts/readme_tour.py --parse
