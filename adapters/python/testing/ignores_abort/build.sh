#!/usr/bin/env bash
# Builds the ignores-abort-py test adapter: $1, or
# target/py-sdk/components/ignores_abort.wasm.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
out="${1:-$root/target/py-sdk/components/ignores_abort.wasm}"
venv="$("$root/guest-sdk/python/setup-venv.sh")"
PYTHONDONTWRITEBYTECODE=1 exec "$venv/bin/python" -m moat_adapter_build component --app ignores_abort --path "$here" --output "$out"
