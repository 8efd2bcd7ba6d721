"""moat-adapter: write moat adapters in Python.

An adapter is a generator of events, exported with `define_adapter`:

    from collections.abc import Iterator
    from moat_adapter import Event, Options, adapter_info, define_adapter, events

    def run(prompt: str, options: Options) -> Iterator[Event]:
        yield events.init(model="hello", cwd=options.cwd)
        yield events.text(f"hello, {prompt}")
        yield events.done(result=f"hello, {prompt}")

    Adapter = define_adapter(adapter_info("hello", "0.1.0", "Says hello"), run)

`python -m moat_adapter_build` builds the module into a WebAssembly
component (componentize-py), which `moat run ./hello.wasm "you"` runs.

- `events`: one builder per event kind, and usage/token/cost records;
- `adapter`: `define_adapter`, the start phase, abort and failures;
- `info`: `adapter_info`, `Refused`, reading `Options`;
- `host`: the abort flag and logging; `http`: HTTP over `wasi:http`;
  `sse`: server-sent events; `process`: the process capability;
- `approvals`: asking the run's user before a tool call
  (`request_approval`, `ask_tools`; `moat run --ask`).
"""

from . import approvals, events, host, http, process, sse
from .adapter import ADAPTER_ERROR, define_adapter
from .approvals import Approval, ApprovalBehavior, ask_tools, request_approval
from .events import (
    SESSION_NOT_FOUND,
    TURNS_METADATA_KEY,
    Cost,
    CostSource,
    DoneStatus,
    Event,
    TokenCoverage,
    TokenReport,
    ToolStatus,
    Usage,
)
from .host import Interrupted, LogLevel, interrupted
from .info import (
    INVALID_OPTIONS,
    UNSUPPORTED_OPTION,
    AdapterInfo,
    Needs,
    Options,
    Refused,
    TrustLevel,
    adapter_info,
    extra_object,
    permits,
)

__all__ = [
    "ADAPTER_ERROR",
    "INVALID_OPTIONS",
    "SESSION_NOT_FOUND",
    "TURNS_METADATA_KEY",
    "UNSUPPORTED_OPTION",
    "AdapterInfo",
    "Approval",
    "ApprovalBehavior",
    "Cost",
    "CostSource",
    "DoneStatus",
    "Event",
    "Interrupted",
    "LogLevel",
    "Needs",
    "Options",
    "Refused",
    "TokenCoverage",
    "TokenReport",
    "ToolStatus",
    "TrustLevel",
    "Usage",
    "adapter_info",
    "approvals",
    "ask_tools",
    "define_adapter",
    "events",
    "extra_object",
    "host",
    "http",
    "interrupted",
    "permits",
    "process",
    "request_approval",
    "sse",
]
