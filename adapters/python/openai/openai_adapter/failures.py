"""Failures before the stream starts (an HTTP error status, a connection
that cannot be made) as error codes and messages a user can act on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from moat_adapter.http import HttpError

from .config import BASE_URL_VAR, KEY_VAR, Config

#: Longest part of a server's message quoted in ours.
MAX_QUOTED = 500


@dataclass
class Failure:
    """An error event's content and what the `done` metadata says."""

    code: str
    message: str
    recoverable: bool
    metadata: dict[str, Any] = field(default_factory=dict)


def cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters."""
    return text if len(text) <= limit else text[:limit] + "…"


def server_message(body: bytes) -> Optional[str]:
    """The message of an error body (`{"error": {"message"}}`, `{"error":
    "…"}`, `{"message": "…"}`), or the body as text."""
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return cut(text, MAX_QUOTED)
    message = None
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        if message is None and isinstance(value.get("message"), str):
            message = value["message"]
    return cut(message if isinstance(message, str) else text, MAX_QUOTED)


def status_failure(config: Config, status: int, retry_after: Optional[str], body: bytes) -> Failure:
    """The server answered `status` (not 200)."""
    quoted = server_message(body)
    quoted = f": {quoted}" if quoted else ""
    url = config.url
    retry = ""
    if retry_after:
        retry = f"; retry after {retry_after}s" if retry_after.isdigit() else f"; retry after {retry_after}"
    if status == 401:
        hint = f"check the key in {KEY_VAR}" if config.api_key else f"{KEY_VAR} is not set (or not granted: --allow-env={KEY_VAR}); set it to a valid key"
        code, message, recoverable = "AUTH_FAILED", f"{url} refused the API key (HTTP 401){quoted}; {hint}", False
    elif status == 403:
        code, message, recoverable = "AUTH_FAILED", f"{url} denied access (HTTP 403){quoted}; the key in {KEY_VAR} may lack access to model `{config.model}`", False
    elif status == 404:
        code, message, recoverable = (
            "MODEL_NOT_FOUND",
            f"{url} answered HTTP 404{quoted}; check --model `{config.model}`, and that the base URL (from {config.source}) is the API root, e.g. http://localhost:11434/v1",
            False,
        )
    elif status == 429:
        code, message, recoverable = "RATE_LIMITED", f"{url} is rate limiting (HTTP 429){quoted}{retry}", True
    elif status in (503, 529):
        code, message, recoverable = "OVERLOADED", f"{url} is overloaded (HTTP {status}){quoted}{retry}", True
    elif 500 <= status <= 599:
        code, message, recoverable = "SERVER_ERROR", f"{url} failed (HTTP {status}){quoted}{retry}", True
    else:
        code, message, recoverable = "REQUEST_REJECTED", f"{url} rejected the request (HTTP {status}){quoted}", False
    metadata: dict[str, Any] = {"httpStatus": status}
    if retry_after:
        metadata["retryAfter"] = retry_after
    return Failure(code, message, recoverable, metadata)


def transport_failure(config: Config, error: HttpError) -> Failure:
    """The request could not be sent, or its answer not received."""
    if error.kind != "http" or error.code is None:
        return Failure("CONNECTION_FAILED", f"the request to {config.url} failed: {error}", True)
    kind = error.code.split("(")[0]
    if kind in ("HttpRequestDenied", "DestinationIpProhibited"):
        return Failure(
            "HOST_NOT_GRANTED",
            f"this run may not reach {config.grant} (base URL from {config.source}); run again with --allow-net={config.grant}",
            False,
        )
    if kind == "ConnectionRefused":
        return Failure(
            "CONNECTION_FAILED",
            f"connection refused by {config.grant}: is the server running? (base URL from {config.source}; set {BASE_URL_VAR} to use another)",
            True,
        )
    if kind in ("DnsError", "DnsTimeout", "DestinationNotFound"):
        return Failure("CONNECTION_FAILED", f"cannot resolve the host of {config.url} (DNS: {error.code}); check the base URL (from {config.source})", False)
    return Failure("CONNECTION_FAILED", f"the request to {config.url} failed: {error.code}", True)
