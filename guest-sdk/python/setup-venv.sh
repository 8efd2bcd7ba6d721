#!/usr/bin/env bash
# Creates the Python SDK's build environment: a venv (target/py-sdk/venv by
# default, or $MOAT_PY_SDK_VENV) with componentize-py 0.25.1 and this SDK
# (editable, so its WIT and sources are read from the repository). Never
# touches the system Python. Prints the venv's path on success.
set -euo pipefail
sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$sdk/../.." && pwd)"
venv="${MOAT_PY_SDK_VENV:-$root/target/py-sdk/venv}"
python="${PYTHON:-python3}"

# Already set up for this pyproject: nothing to do (a stamp, not pip, says so:
# pip would reach the network to check).
stamp="$venv/.moat-adapter-stamp"
want="$(sha256sum "$sdk/pyproject.toml" | cut -d' ' -f1)"
if [[ -x "$venv/bin/componentize-py" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "$venv"
    exit 0
fi

"$python" -m venv "$venv" >&2
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$sdk" >&2
# setuptools leaves its metadata in the source tree; the venv has its own.
rm -rf "$sdk/src/moat_adapter.egg-info"
"$venv/bin/componentize-py" --version >&2
echo "$want" > "$stamp"
echo "$venv"
