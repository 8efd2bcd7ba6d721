"""What one run sends: the endpoint, the key and the request body, decided
from the prompt, the run's options and the environment the run was granted.
Refusals happen here, before anything is sent (the same rules as the
built-in openai adapter, docs/llm-adapters.md)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional

from moat_adapter import INVALID_OPTIONS, UNSUPPORTED_OPTION, Options, Refused, extra_object, permits
from moat_adapter.http import Request

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_HOST = "api.openai.com:443"
KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VAR = "OPENAI_BASE_URL"
PATH = "/chat/completions"

#: Keys of `options.extra` the adapter sets itself, and how to set them.
RESERVED = {
    "model": "pass the model with --model (options.model)",
    "messages": "the prompt and options.system-prompt make the messages",
    "stream": "the adapter always streams",
    "stream_options": "the adapter always asks for usage",
}
#: Keys that only make sense with tools, dropped with them.
WITH_TOOLS = ("tool_choice", "parallel_tool_calls")


@dataclass
class Config:
    """One run's request, ready to send."""

    url: str
    #: Where the base URL came from, for messages.
    source: str
    #: `host:port`, as `--allow-net` takes it.
    grant: str
    api_key: Optional[str]
    model: str
    tools: list[str]
    body: dict[str, Any]

    def request(self) -> Request:
        """The HTTP request; the key, when set, as a bearer token."""
        headers = [("content-type", b"application/json"), ("accept", b"text/event-stream")]
        if self.api_key:
            headers.append(("authorization", f"Bearer {self.api_key.strip()}".encode()))
        body = json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode()
        return Request("POST", self.url, headers=headers, body=body)


def grant_of(url: str) -> Optional[str]:
    """`host:port` of an http(s) URL (the port filled in from the scheme)."""
    scheme, sep, rest = url.partition("://")
    ports = {"http": 80, "https": 443}
    if not sep or scheme.lower() not in ports:
        return None
    authority = rest.split("/")[0].split("?")[0].split("#")[0].rsplit("@", 1)[-1].lower()
    if not authority:
        return None
    has_port = ":" in authority[authority.rfind("]") + 1 :] if "]" in authority else ":" in authority
    return authority if has_port else f"{authority}:{ports[scheme.lower()]}"


def _refuse_unsupported(options: Options) -> None:
    if options.directories:
        raise Refused(UNSUPPORTED_OPTION, "the openai-py adapter gives the model no files, so extra directories cannot be honoured")
    if options.agents is not None:
        raise Refused(UNSUPPORTED_OPTION, "Chat Completions has no sub-agents")
    if options.mcp_servers is not None:
        raise Refused(UNSUPPORTED_OPTION, "the openai-py example runs no MCP servers; use the built-in openai adapter")
    if options.resume is not None:
        raise Refused(UNSUPPORTED_OPTION, "Chat Completions keeps no session on the server, so a resume token cannot be honoured")
    if options.max_budget_usd is not None:
        raise Refused(UNSUPPORTED_OPTION, "the openai-py adapter has no price table and cannot enforce a budget; leave max-budget-usd out")


def configure(prompt: str, options: Options) -> Config:
    """The run's request; raises `Refused` for what cannot be honoured."""
    _refuse_unsupported(options)
    model = (options.model or "").strip()
    if not model:
        raise Refused(INVALID_OPTIONS, "the openai-py adapter needs a model: pass --model (e.g. gpt-4o-mini, or llama3.2 for Ollama)")
    extra = extra_object(options)
    base = extra.pop("base_url", None)
    source = "options.extra.base_url"
    if base is not None and not isinstance(base, str):
        raise Refused(INVALID_OPTIONS, "options.extra.base_url must be a string")
    if base is None:
        # The run sees only the variables it was granted.
        base, source = os.environ.get(BASE_URL_VAR, "").strip() or None, BASE_URL_VAR
    if base is None:
        base, source = DEFAULT_BASE_URL, "the default base URL"
    for key, why in RESERVED.items():
        if key in extra:
            raise Refused(INVALID_OPTIONS, f"options.extra.{key} cannot be set: {why}")
    base = base.strip().rstrip("/")
    grant = grant_of(base)
    if grant is None:
        raise Refused(INVALID_OPTIONS, f"the base URL {base!r} (from {source}) is not an http:// or https:// URL")
    tools = _filter_tools(extra, options)
    if options.effort is not None:
        extra.setdefault("reasoning_effort", options.effort)
    messages = []
    if options.system_prompt is not None:
        messages.append({"role": "system", "content": options.system_prompt})
    messages.append({"role": "user", "content": prompt})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    # The caller's fields win over the adapter's defaults.
    body.update(extra)
    key = os.environ.get(KEY_VAR, "").strip() or None
    return Config(url=base + PATH, source=source, grant=grant, api_key=key, model=model, tools=tools, body=body)


def _filter_tools(extra: dict[str, Any], options: Options) -> list[str]:
    """Keeps the tools of `extra.tools` the run allows; their names."""
    tools = extra.pop("tools", None)
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise Refused(INVALID_OPTIONS, "options.extra.tools must be an array of tools")
    kept, names = [], []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            raise Refused(INVALID_OPTIONS, "each of options.extra.tools needs function.name (the Chat Completions tool schema)")
        if permits(options, name):
            kept.append(tool)
            names.append(name)
    if kept:
        extra["tools"] = kept
    else:
        # An empty `tools` array is refused by some servers.
        for key in WITH_TOOLS:
            extra.pop(key, None)
    return names
