"""The one place that imports the bindings componentize-py generates.

The build pins each interface's module name (`moat_adapter_build.wit`), so
these imports do not depend on which names happen to clash. Natively (unit
tests, type checking) the bindings come from `componentize-py bindings`;
their host functions raise `NotImplementedError` there.
"""

from componentize_py_types import Err, Ok, Some  # noqa: F401  (re-exported)
from wit_world import exports as world_exports  # noqa: F401
from wit_world.exports import adapter as adapter_exports  # noqa: F401
from wit_world.imports import http_outgoing  # noqa: F401
from wit_world.imports import http_types  # noqa: F401
from wit_world.imports import io_poll  # noqa: F401
from wit_world.imports import io_streams  # noqa: F401
from wit_world.imports import monotonic_clock  # noqa: F401
from wit_world.imports import moat_approvals  # noqa: F401
from wit_world.imports import moat_host  # noqa: F401
from wit_world.imports import moat_process  # noqa: F401
from wit_world.imports import moat_types as types  # noqa: F401
