"""A scripted stand-in for the Anthropic Messages API, served on 127.0.0.1 for the e2e tier.

A *script* is a callable ``(request: dict) -> Reply | None``. ``request`` is the parsed JSON body
of one ``POST /v1/messages`` call; the reply is a list of content blocks built with ``text()``
and ``tool_use()``. The stop reason is derived: ``tool_use`` when any block is a tool call, else
``end_turn`` (helpers ``bash()`` and ``agent()`` build the usual tool calls). Returning ``None``
(or raising ``Unhandled``) gives the harmless default reply, which is also what side queries get
(title generation, topic detection and other small requests the binary makes besides the main
conversation).

Helpers read a request: ``system_text``, ``system_messages``, ``context_text``, ``user_texts``,
``last_user_text``, ``all_text``, ``tool_results``, ``assistant_turns``, ``tool_names``,
``is_subagent``, ``is_side_query``. The server records every request it
receives (``ScriptedModel.requests``: path, query, parsed body and whether the script handled it)
so tests can assert on what the model was shown.

The wire format is the streaming one the binary asks for: ``message_start`` →
per block ``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` →
``message_delta`` (stop reason, output tokens) → ``message_stop``. ``usage`` carries non-zero
input/output token counts estimated from the request and reply sizes, so anything measuring tokens
downstream sees realistic numbers.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

Block = dict[str, Any]
Reply = list[Block]
Script = Callable[[dict[str, Any]], "Reply | None"]

DEFAULT_REPLY_TEXT = "OK."
_ids = itertools.count(1)


class Unhandled(Exception):
    """Raise from a script to give a request the default reply (same as returning None)."""


# ---------------------------------------------------------------------------------------------
# Building replies


def text(value: str) -> Block:
    """A text block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any], *, id: str | None = None) -> Block:
    """A tool call block; the id is generated unless given."""
    return {"type": "tool_use", "id": id or f"toolu_e2e_{next(_ids):04d}_{uuid.uuid4().hex[:8]}",
            "name": name, "input": input}


def bash(command: str, description: str = "Run a command") -> Block:
    """Shorthand for a Bash tool call."""
    return tool_use("Bash", {"command": command, "description": description})


def agent(subagent_type: str, prompt: str, description: str = "Run a subagent") -> Block:
    """Shorthand for an Agent tool call, e.g. ``agent("clavain:reviewer", "Lens: plan …")``."""
    return tool_use("Agent", {"description": description, "prompt": prompt,
                              "subagent_type": subagent_type})


def stop_reason(reply: Reply) -> str:
    return "tool_use" if any(block["type"] == "tool_use" for block in reply) else "end_turn"


# ---------------------------------------------------------------------------------------------
# Reading requests


def _block_texts(content: Any) -> list[str]:
    """The text of a message's content (a string or a list of blocks), tool results included."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            out.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            out.extend(_block_texts(block.get("content")))
    return out


def system_text(request: dict[str, Any]) -> str:
    """The system prompt as one string (it may be sent as a string or a list of blocks)."""
    return "\n".join(_block_texts(request.get("system")))


def user_texts(request: dict[str, Any]) -> list[str]:
    """Every text block of every user message, in order (tool results excluded)."""
    out: list[str] = []
    for message in request.get("messages", ()):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        out.extend(block.get("text", "") for block in content or ()
                   if isinstance(block, dict) and block.get("type") == "text")
    return out


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the last user message (tool results excluded), or ''."""
    for message in reversed(request.get("messages", ())):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(block.get("text", "") for block in content or ()
                             if isinstance(block, dict) and block.get("type") == "text")
    return ""


def system_messages(request: dict[str, Any]) -> list[str]:
    """Texts of the `role: "system"` messages inside `messages` (where 2.1.330 puts hook
    context such as "SessionStart hook additional context: ...")."""
    out: list[str] = []
    for message in request.get("messages", ()):
        if message.get("role") == "system":
            out.extend(_block_texts(message.get("content")))
    return out


def context_text(request: dict[str, Any]) -> str:
    """The system prompt plus every `role: "system"` message: all the context the model got
    besides the conversation."""
    return "\n".join([system_text(request), *system_messages(request)])


def all_text(request: dict[str, Any]) -> str:
    """System prompt and every message's text, tool results included: for substring matching."""
    parts = [system_text(request)]
    for message in request.get("messages", ()):
        parts.extend(_block_texts(message.get("content")))
    return "\n".join(parts)


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    content: str
    is_error: bool


def tool_results(request: dict[str, Any]) -> list[ToolResult]:
    """Every tool_result block in the request's user messages, in order."""
    out: list[ToolResult] = []
    for message in request.get("messages", ()):
        if message.get("role") != "user" or isinstance(message.get("content"), str):
            continue
        for block in message.get("content") or ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(ToolResult(block.get("tool_use_id", ""),
                                      "\n".join(_block_texts(block.get("content"))),
                                      bool(block.get("is_error"))))
    return out


def assistant_turns(request: dict[str, Any]) -> int:
    """How many assistant messages the conversation already holds (0 on the first call)."""
    return sum(1 for message in request.get("messages", ()) if message.get("role") == "assistant")


def tool_names(request: dict[str, Any]) -> list[str]:
    """The names of the tools the request offers the model."""
    return [tool.get("name", "") for tool in request.get("tools", ()) or ()]


def is_subagent(request: dict[str, Any], agent_body_snippet: str) -> bool:
    """True when the request is a subagent's: its system prompt holds the agent's markdown body."""
    return agent_body_snippet in system_text(request)


def is_side_query(request: dict[str, Any]) -> bool:
    """True for the binary's small helper requests (titles, topic checks): no tools offered.

    The main conversation and subagents always offer tools; side queries never do.
    """
    return not request.get("tools")


# ---------------------------------------------------------------------------------------------
# The server


def _strings(value: Any) -> list[str]:
    """Every string leaf of a JSON value: what the model reads of it."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def request_text(request: dict[str, Any]) -> str:
    """Everything the model reads of a request, one string."""
    return "\n".join(_strings(request.get("system")) + _strings(request.get("tools"))
                     + _strings(request.get("messages")))


def added_parts(bare: str, with_plugin: str) -> dict[str, str]:
    """The lines a plugin added to a request's text (`request_text` without and with it),
    grouped by what added them: 2.1.330 puts the SessionStart context, the agent listing
    (`- clavain:<agent>: … (Tools: …)`) and the skill listing in one system message."""
    import difflib

    groups: dict[str, list[str]] = {"SessionStart context": [], "agent listing": [],
                                    "skill/command listing": [], "other": []}
    current = "other"
    for line in difflib.ndiff(bare.splitlines(), with_plugin.splitlines()):
        if not line.startswith("+ "):
            current = "other"
            continue
        added = line[2:]
        if "SessionStart hook additional context" in added:
            current = "SessionStart context"
        elif added.startswith("- clavain:"):
            current = "agent listing" if "(Tools:" in added else "skill/command listing"
        groups[current].append(added)
    return {name: "\n".join(lines) for name, lines in groups.items()}


@dataclass
class Recorded:
    path: str
    query: str
    body: Any
    handled: bool = False
    reply: Reply = field(default_factory=list)

    @property
    def is_messages(self) -> bool:
        return self.path.rstrip("/") == "/v1/messages"


def _estimate_tokens(value: Any) -> int:
    """A rough, always positive token count (~4 characters a token)."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def sse_stream(reply: Reply, *, model: str, input_tokens: int) -> bytes:
    """The whole SSE body for one reply."""
    output_tokens = _estimate_tokens(reply)
    message_id = f"msg_e2e_{uuid.uuid4().hex[:20]}"
    chunks = [_sse("message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})]
    for index, block in enumerate(reply):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        chunks.append(_sse("content_block_start", {"type": "content_block_start",
                                                   "index": index, "content_block": start}))
        chunks.append(_sse("content_block_delta", {"type": "content_block_delta",
                                                   "index": index, "delta": delta}))
        chunks.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    chunks.append(_sse("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None},
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}))
    chunks.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(chunks)


def message_json(reply: Reply, *, model: str, input_tokens: int) -> dict[str, Any]:
    """The non-streaming form of one reply (for a request without `stream: true`)."""
    return {"id": f"msg_e2e_{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
            "model": model, "content": reply, "stop_reason": stop_reason(reply),
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": _estimate_tokens(reply),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


class ScriptedModel:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) that answers with a script.

    Use as a context manager or call ``start()`` / ``stop()``. Set ``script`` before the run (the
    e2e runner does it). ``requests`` holds every request received; ``messages()`` only the
    ``/v1/messages`` ones, ``conversation()`` only those the script handled. Errors raised by the
    script (other than ``Unhandled``) are kept in ``errors`` and answered with the default reply,
    so a broken script shows up as a test failure rather than a hung binary.
    """

    def __init__(self, script: Script | None = None, *, default_text: str = DEFAULT_REPLY_TEXT):
        self.script: Script | None = script
        self.default_text = default_text
        self.requests: list[Recorded] = []
        self.errors: list[str] = []
        self.unknown_paths: list[str] = []
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> ScriptedModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with model._lock:
                    model._connections.add(self.connection)
                    model._workers.add(threading.current_thread())

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with model._lock:
                        model._connections.discard(self.connection)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("scripted model: " + format, *args)

            def do_POST(self) -> None:
                model._handle(self, "POST")

            def do_GET(self) -> None:
                model._handle(self, "GET")

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop kept-alive connections and wait for every handler thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            connections, workers = list(self._connections), list(self._workers)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for worker in workers:
            worker.join(timeout=10)
        self._server = self._thread = None

    def live_threads(self) -> list[threading.Thread]:
        """Server threads still running (empty after stop())."""
        with self._lock:
            threads = [*self._workers, *([self._thread] if self._thread else [])]
        return [t for t in threads if t.is_alive()]

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # inspection --------------------------------------------------------------------------
    def messages(self) -> list[dict[str, Any]]:
        """Bodies of every POST /v1/messages, in arrival order."""
        with self._lock:
            return [r.body for r in self.requests if r.is_messages and isinstance(r.body, dict)]

    def conversation(self) -> list[dict[str, Any]]:
        """Bodies of the /v1/messages requests the script handled (not defaulted)."""
        with self._lock:
            return [r.body for r in self.requests if r.is_messages and r.handled]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.errors.clear()
            self.unknown_paths.clear()

    # serving -----------------------------------------------------------------------------
    def _reply_for(self, body: dict[str, Any]) -> tuple[Reply, bool]:
        script = self.script
        if script is not None:
            try:
                reply = script(body)
            except Unhandled:
                reply = None
            except Exception as exc:
                with self._lock:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                reply = None
            if reply:
                return list(reply), True
        return [text(self.default_text)], False

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        record = Recorded(parts.path, parts.query, body)
        with self._lock:
            self.requests.append(record)
        path = parts.path.rstrip("/")

        if method == "POST" and path == "/v1/messages" and isinstance(body, dict):
            reply, handled = self._reply_for(body)
            record.handled, record.reply = handled, reply
            model = body.get("model") or "claude-scripted"
            input_tokens = _estimate_tokens(body)
            if body.get("stream"):
                payload = sse_stream(reply, model=model, input_tokens=input_tokens)
                self._send(handler, 200, payload, "text/event-stream")
            else:
                payload = json.dumps(message_json(reply, model=model,
                                                  input_tokens=input_tokens)).encode()
                self._send(handler, 200, payload, "application/json")
            return
        if path == "/v1/messages/count_tokens":
            count = _estimate_tokens(body) if body is not None else 1
            self._send(handler, 200, json.dumps({"input_tokens": count}).encode(),
                       "application/json")
            return
        with self._lock:
            self.unknown_paths.append(f"{method} {handler.path}")
        log.info("scripted model: unknown path %s %s", method, handler.path)
        self._send(handler, 200, b"{}", "application/json")

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: bytes, kind: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(payload)))
        if kind == "text/event-stream":
            handler.send_header("Cache-Control", "no-cache")
        handler.send_header("request-id", f"req_e2e_{uuid.uuid4().hex[:16]}")
        handler.end_headers()
        handler.wfile.write(payload)
        handler.wfile.flush()
