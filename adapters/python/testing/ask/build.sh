#!/usr/bin/env bash
# Builds the ask-py test adapter: $1, or target/py-sdk/components/ask.wasm.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
out="${1:-$root/target/py-sdk/components/ask.wasm}"
venv="$("$root/guest-sdk/python/setup-venv.sh")"
PYTHONDONTWRITEBYTECODE=1 exec "$venv/bin/python" -m moat_adapter_build component --app ask_adapter --path "$here" --output "$out"
