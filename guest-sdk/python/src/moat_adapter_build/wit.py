"""The WIT a Python adapter is built against, staged in one folder.

componentize-py takes one package folder with its dependencies in `deps/`:
the SDK's world (`guest-sdk/python/wit/world.wit`), moat's contract (the
repository's `wit/v0.4.0`, one source for every SDK) and the WASI packages
the host implements (`guest-sdk/python/wit/wasi/`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

#: guest-sdk/python (this file is guest-sdk/python/src/moat_adapter_build/wit.py;
#: the SDK is installed editable, so the path leads into the repository).
SDK_ROOT = Path(__file__).resolve().parents[2]
#: The contract version the SDK builds against (the newest).
CONTRACT_VERSION = "0.4.0"
#: moat's WIT for that version, in the repository.
DEFAULT_CONTRACT_WIT = SDK_ROOT.parents[1] / "wit" / f"v{CONTRACT_VERSION}"
#: The world every Python adapter targets (wit/world.wit).
WORLD = "adapter"
WASI_VERSION = "0.2.12"

#: Stable Python module names for the interfaces the SDK uses: without them
#: componentize-py picks names by what clashes (`types` is both moat's and
#: wasi:http's), and the SDK's imports would depend on the world.
INTERFACE_NAMES = {
    f"moat:adapter/types@{CONTRACT_VERSION}": "moat_types",
    f"moat:adapter/host@{CONTRACT_VERSION}": "moat_host",
    f"moat:adapter/process@{CONTRACT_VERSION}": "moat_process",
    f"moat:adapter/runs@{CONTRACT_VERSION}": "moat_runs",
    f"moat:adapter/approvals@{CONTRACT_VERSION}": "moat_approvals",
    f"wasi:http/types@{WASI_VERSION}": "http_types",
    f"wasi:http/outgoing-handler@{WASI_VERSION}": "http_outgoing",
    f"wasi:io/poll@{WASI_VERSION}": "io_poll",
    f"wasi:io/streams@{WASI_VERSION}": "io_streams",
    f"wasi:io/error@{WASI_VERSION}": "io_error",
    f"wasi:clocks/monotonic-clock@{WASI_VERSION}": "monotonic_clock",
}


def stage(folder: Path, contract_wit: Path = DEFAULT_CONTRACT_WIT) -> Path:
    """Writes the world and its dependencies into `folder` (replacing what
    was there) and returns it."""
    contract = contract_wit / "adapter.wit"
    if not contract.is_file():
        raise FileNotFoundError(f"moat's WIT contract is not at {contract}")
    if folder.exists():
        shutil.rmtree(folder)
    deps = folder / "deps"
    (deps / "moat-adapter").mkdir(parents=True)
    shutil.copy2(SDK_ROOT / "wit" / "world.wit", folder / "world.wit")
    shutil.copy2(contract, deps / "moat-adapter" / "adapter.wit")
    for package in sorted((SDK_ROOT / "wit" / "wasi").glob("*.wit")):
        shutil.copy2(package, deps / package.name)
    return folder


def componentize_py_args(folder: Path) -> list[str]:
    """The options that point componentize-py at the staged world."""
    args = ["--wit-path", str(folder), "--world", WORLD]
    for interface, module in INTERFACE_NAMES.items():
        args += ["--import-interface-name", f"{interface}={module}"]
    return args
