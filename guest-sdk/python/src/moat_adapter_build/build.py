"""Runs componentize-py: the bindings, then the component."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from . import strip, wit

#: The SDK's runtime package (`moat_adapter`) lives here; it goes into every
#: component.
SDK_SOURCE = wit.SDK_ROOT / "src"


def componentize_py() -> str:
    """The componentize-py of the Python running this build (its venv)."""
    beside = Path(sys.executable).with_name("componentize-py")
    if beside.exists():
        return str(beside)
    found = shutil.which("componentize-py")
    if found is None:
        raise FileNotFoundError("componentize-py is not installed (pip install componentize-py==0.25.1)")
    return found


def _run(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        # componentize-py prints a Rust backtrace after the Python one; the
        # first lines say what went wrong.
        output = (done.stdout + done.stderr).strip().splitlines()
        summary = "\n".join(line for line in output if not line.startswith("  "))[-4000:]
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{summary}")


def bindings(folder: Path, work: Path, contract_wit: Path = wit.DEFAULT_CONTRACT_WIT) -> Path:
    """Generates the Python bindings (`wit_world`, for type checkers and the
    SDK's native tests) into `folder`, replacing what was there."""
    staged = wit.stage(work / "wit", contract_wit)
    if folder.exists():
        shutil.rmtree(folder)
    _run([componentize_py(), *wit.componentize_py_args(staged), "bindings", str(folder)], "componentize-py bindings")
    return folder


def _copy_sources(source: Path, into: Path, work: Path) -> Path:
    """A copy of a Python path entry: the interpreter componentize-py runs
    at build time writes `__pycache__` into its path, which must not land in
    the source tree. The build's own `work` folder (a project may keep it
    inside its sources) and built components are left out."""
    if into.exists():
        shutil.rmtree(into)
    work = work.resolve()
    leave_out = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc", "*.wasm")

    def ignore(folder: str, names: list[str]) -> set[str]:
        ignored = set(leave_out(folder, names))
        ignored.update(name for name in names if (Path(folder) / name).resolve() == work)
        return ignored

    shutil.copytree(source, into, ignore=ignore)
    return into


def component(
    app: str,
    paths: list[Path],
    output: Path,
    work: Path,
    contract_wit: Path = wit.DEFAULT_CONTRACT_WIT,
) -> Path:
    """Builds the module `app` (found in `paths`, with the SDK) into the
    component `output`. `work` holds the staged WIT, the bindings and the
    unstripped component."""
    work.mkdir(parents=True, exist_ok=True)
    bindings(work / "bindings", work, contract_wit)
    staged = work / "wit"
    raw = work / f"{app}.componentize-py.wasm"
    python_path: list[str] = []
    for index, path in enumerate([*paths, SDK_SOURCE]):
        python_path += ["--python-path", str(_copy_sources(path, work / "python-path" / str(index), work))]
    _run(
        [componentize_py(), *wit.componentize_py_args(staged), "componentize", app, *python_path, "--output", str(raw)],
        f"componentize-py componentize {app}",
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    stripped = strip.strip_export(raw.read_bytes())
    temporary = output.with_suffix(output.suffix + ".tmp")
    temporary.write_bytes(stripped)
    temporary.replace(output)
    return output
