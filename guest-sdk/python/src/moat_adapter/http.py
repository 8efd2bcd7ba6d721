"""A small blocking HTTP client over `wasi:http/outgoing-handler`, the only
way an adapter reaches the network.

The host sends a request only to a destination the run was granted
(`--allow-net`); anything else fails with `HttpError` whose `code` is the
host's `wasi:http` error code (`HttpRequestDenied`, or
`DestinationIpProhibited` for a granted name resolving to a private
address), and the user sees a `CAPABILITY_DENIED` event naming the flag that
would allow it.

    response = send(Request("POST", url, headers=[("content-type", b"application/json")], body=payload))
    while (chunk := response.read_chunk()) is not None:
        ...

While `send` waits for the answer, or `read_chunk` for the next bytes, the
run's abort flag is read every 20 ms: once it is set, the wait raises
`Interrupted` (the request is dropped), which ends the run with `done`
interrupted unless the adapter catches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ._bindings import Err, http_outgoing, http_types, io_poll, io_streams, monotonic_clock
from .host import Interrupted, interrupted

#: Largest chunk read from a response body at once.
CHUNK = 64 * 1024
#: How often a wait looks at the abort flag, in nanoseconds.
INTERRUPT_CHECK_NS = 20_000_000
#: Largest piece written at once (the host accepts 4096 bytes per blocking
#: write).
WRITE_PIECE = 4096


class HttpError(Exception):
    """A request failed. `kind` is one of "invalid-url", "invalid-header",
    "http" (then `code` is the host's error code, e.g. "HttpRequestDenied"),
    "io" and "too-large"."""

    def __init__(self, kind: str, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code


@dataclass
class Request:
    """An HTTP request: method, `http(s)://` URL, headers in order, body."""

    method: str
    url: str
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    body: bytes = b""


@dataclass
class Url:
    """The parts of a URL `wasi:http` takes separately."""

    https: bool
    authority: str
    path_with_query: str


def parse_url(url: str) -> Url:
    """Splits an `http(s)://authority[/path][?query]` URL; the fragment is
    never sent."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise HttpError("invalid-url", f"invalid URL {url!r}")
    rest = rest.split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if not authority:
        raise HttpError("invalid-url", f"invalid URL {url!r}")
    return Url(https=scheme.lower() == "https", authority=authority, path_with_query=path or "/")


def _error_code_name(code: object) -> str:
    """`ErrorCode_HttpRequestDenied` → `HttpRequestDenied` (with its payload
    when it has one)."""
    name = type(code).__name__.removeprefix("ErrorCode_")
    value = getattr(code, "value", None)
    return f"{name}({value})" if value is not None else name


def _wait(pollable: io_poll.Pollable) -> None:
    """Waits until `pollable` is ready; raises `Interrupted` once the run is
    aborted."""
    while not pollable.ready():
        if interrupted():
            raise Interrupted()
        with monotonic_clock.subscribe_duration(INTERRUPT_CHECK_NS) as tick:
            io_poll.poll([pollable, tick])


_METHODS = {
    "GET": http_types.Method_Get,
    "HEAD": http_types.Method_Head,
    "POST": http_types.Method_Post,
    "PUT": http_types.Method_Put,
    "DELETE": http_types.Method_Delete,
    "CONNECT": http_types.Method_Connect,
    "OPTIONS": http_types.Method_Options,
    "TRACE": http_types.Method_Trace,
    "PATCH": http_types.Method_Patch,
}


def _method(name: str) -> object:
    known = _METHODS.get(name.upper())
    return known() if known is not None else http_types.Method_Other(name)


class Response:
    """A response whose body is read in chunks. Close it (or use `with`)
    when done: that drops the request."""

    def __init__(self, response: http_types.IncomingResponse) -> None:
        self.status: int = response.status()
        with response.headers() as headers:
            self.headers: list[tuple[str, bytes]] = headers.entries()
        self._response: Optional[http_types.IncomingResponse] = response
        try:
            self._body: Optional[http_types.IncomingBody] = response.consume()
            self._stream: Optional[io_streams.InputStream] = self._body.stream()
        except Err:
            self.close()
            raise HttpError("io", "the response body is unavailable") from None

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name`, as text."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value.decode("utf-8", errors="replace").strip()
        return None

    def read_chunk(self) -> Optional[bytes]:
        """The next chunk of the body; None at its end."""
        stream = self._stream
        if stream is None:
            return None
        while True:
            try:
                chunk = stream.read(CHUNK)
            except Err as error:
                if isinstance(error.value, io_streams.StreamError_Closed):
                    return None
                with error.value.value as failure:
                    detail = failure.to_debug_string()
                raise HttpError("io", f"reading the body failed: {detail}") from None
            if chunk:
                return chunk
            with stream.subscribe() as ready:
                _wait(ready)

    def read_to_end(self, limit: int) -> bytes:
        """The whole body; `HttpError("too-large")` past `limit` bytes."""
        body = bytearray()
        while (chunk := self.read_chunk()) is not None:
            body += chunk
            if len(body) > limit:
                raise HttpError("too-large", f"the response body exceeds {limit} bytes")
        return bytes(body)

    def close(self) -> None:
        """Drops the body stream, the body and the response, in that order
        (the host refuses a parent dropped before its children)."""
        for name in ("_stream", "_body", "_response"):
            resource = getattr(self, name, None)
            if resource is not None:
                setattr(self, name, None)
                resource.__exit__(None, None, None)

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _write_body(body: http_types.OutgoingBody, data: bytes) -> None:
    with body.write() as stream:
        for start in range(0, len(data), WRITE_PIECE):
            stream.blocking_write_and_flush(data[start : start + WRITE_PIECE])
    http_types.OutgoingBody.finish(body, None)


def send(request: Request) -> Response:
    """Sends `request` and waits for the response's head; read the body from
    the `Response`."""
    url = parse_url(request.url)
    entries = list(request.headers)
    # A known length goes as such: without it the body is sent chunked,
    # which some servers refuse.
    if request.body and not any(name.lower() == "content-length" for name, _ in entries):
        entries.append(("content-length", str(len(request.body)).encode()))
    try:
        headers = http_types.Fields.from_list(entries)
    except Err as error:
        raise HttpError("invalid-header", f"invalid header: {type(error.value).__name__}") from None
    outgoing = http_types.OutgoingRequest(headers)
    try:
        outgoing.set_method(_method(request.method))
        outgoing.set_scheme(http_types.Scheme_Https() if url.https else http_types.Scheme_Http())
        outgoing.set_authority(url.authority)
        outgoing.set_path_with_query(url.path_with_query)
        body = outgoing.body()
    except Err:
        raise HttpError("invalid-url", f"the host refused the request line of {request.url!r}") from None
    # Sent first, so the host reads the body while it is written.
    try:
        pending = http_outgoing.handle(outgoing, None)
    except Err as error:
        raise HttpError("http", f"HTTP error: {_error_code_name(error.value)}", _error_code_name(error.value)) from None
    written: Optional[HttpError] = None
    try:
        _write_body(body, request.body)
    except Err as error:
        written = HttpError("io", f"writing the body failed: {error.value}")
    with pending:
        with pending.subscribe() as ready:
            _wait(ready)
        outcome = pending.get()
    # A refused request (denied, refused connection, DNS) also breaks the
    # body being written: the request's own error says why, so it goes first.
    if outcome is None or isinstance(outcome, Err):
        raise HttpError("http", "the response was already taken")
    inner = outcome.value
    if isinstance(inner, Err):
        code = _error_code_name(inner.value)
        raise HttpError("http", f"HTTP error: {code}", code)
    if written is not None:
        inner.value.__exit__(None, None, None)
        raise written
    return Response(inner.value)
