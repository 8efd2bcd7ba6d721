"""`python -m moat_adapter_build`: build a Python adapter's component, or
generate the bindings.

    python -m moat_adapter_build component --app echo_adapter --path adapters/python/echo -o echo.wasm
    python -m moat_adapter_build bindings target/py-sdk/bindings
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

from . import build, wit


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="moat-adapter-build", description=__doc__.splitlines()[0])
    parser.add_argument("--contract-wit", type=Path, default=wit.DEFAULT_CONTRACT_WIT, help=f"moat's WIT folder (wit/v{wit.CONTRACT_VERSION})")
    commands = parser.add_subparsers(dest="command", required=True)
    component = commands.add_parser("component", help="build a component")
    component.add_argument("--app", required=True, help="the module that binds `Adapter`")
    component.add_argument("--path", type=Path, action="append", default=[], help="where the module is (repeatable)")
    component.add_argument("-o", "--output", type=Path, required=True)
    component.add_argument("--work", type=Path, help="scratch folder (default: beside the output)")
    generate = commands.add_parser("bindings", help="generate the Python bindings (wit_world)")
    generate.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "component":
            work = args.work or args.output.parent / f".{args.output.stem}-build"
            started = time.monotonic()
            out = build.component(args.app, args.path or [Path.cwd()], args.output, work, args.contract_wit)
            size = out.stat().st_size / (1024 * 1024)
            print(f"built {out} ({size:.1f} MiB) in {time.monotonic() - started:.1f} s")
        else:
            build.bindings(args.folder, args.folder.parent / f".{args.folder.name}-wit", args.contract_wit)
            print(f"bindings in {args.folder}")
    except (RuntimeError, FileNotFoundError, ValueError) as error:
        print(f"moat-adapter-build: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
