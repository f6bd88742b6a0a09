#!/usr/bin/env bash
# Proves that m3 installs beside PyPI's unrelated `stages` and `schemas` projects without either
# breaking the other:  scripts/check_install_beside.sh [DEPS_VENV]
#
# A fresh virtualenv gets PyPI's `stages` and `schemas`, then m3 from this checkout with `pip install .`
# (non-editable, --no-deps; its dependencies are borrowed from DEPS_VENV, default .venv, through a .pth
# file so nothing is downloaded twice). It then checks that each import name still belongs to the
# project that installed it, that `m3` runs, and that uninstalling m3 leaves the other two intact.
set -euo pipefail
cd "$(dirname "$0")/.."
deps_venv=$(cd "${1:-.venv}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
py="$scratch/venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$py" -m pip install -q "stages==1.0.dev0" "schemas==0.7.1"
"$py" -m pip install -q --no-deps --no-build-isolation . 2>/dev/null || "$py" -m pip install -q --no-deps .
deps_site=$("$deps_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
own_site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$deps_site" > "$own_site/zz_m3_deps.pth"   # after our own site-packages on sys.path

cd "$scratch"
"$py" - "$own_site" <<'PY'
import importlib.metadata as md
import importlib.util
import sys
from pathlib import Path

site = Path(sys.argv[1])

def owner(path: Path) -> str:
    for dist in ("stages", "schemas", "m3-video"):
        files = {site / f for f in md.distribution(dist).files or []}
        if path in files:
            return dist
    return "nobody"

# PyPI's stages imports; PyPI's schemas is Python 2 code, so check its files rather than import it.
import stages
assert owner(Path(stages.__file__)) == "stages", stages.__file__
assert owner(site / "schemas" / "__init__.py") == "schemas"
for name in ("m3cli", "m3cli.stages", "m3cli.stages.core.cache", "m3cli.schemas", "m3cli.schemas.records"):
    spec = importlib.util.find_spec(name)
    assert spec and owner(Path(spec.origin)) == "m3-video", (name, spec and spec.origin)
from m3cli.schemas import load_schema
assert load_schema()["$id"] == "m3.clip/1"
print("ok: stages, schemas and m3cli each belong to their own distribution")
PY
"$scratch/venv/bin/m3" --version
"$scratch/venv/bin/m3" schema --list >/dev/null
"$py" -m pip uninstall -q -y m3-video
"$py" -c 'import stages, importlib.metadata as md; md.distribution("schemas"); print("ok: stages and schemas intact after uninstalling m3")'
