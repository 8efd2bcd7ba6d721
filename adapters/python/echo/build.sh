#!/usr/bin/env bash
# Builds the echo-py adapter into a component: $1, or
# target/py-sdk/components/echo.wasm. Sets up the SDK's venv first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$root/target/py-sdk/components/echo.wasm}"
venv="$("$root/guest-sdk/python/setup-venv.sh")"
PYTHONDONTWRITEBYTECODE=1 exec "$venv/bin/python" -m moat_adapter_build component --app echo_adapter --path "$here" --output "$out"
