"""A stand-in for `vllm serve` on 127.0.0.1: checks requests as vLLM would and answers as it does.

A real HTTP server (ThreadingHTTPServer on an ephemeral port, in a daemon thread), so the backend's
whole HTTP path runs in tests. It validates what vLLM validates (path, method, bearer key, JSON
shape, model name, image data URLs that decode to images, the structured-output field, stream
options), answers with vLLM's bodies (completions, SSE chunks with a usage chunk, error objects),
and records every request. Where it differs from vLLM 0.32 (tests/vllm shows the real one): it has
no POST /tokenize (it cannot count image tokens as the model's processor does), so `holodesk doctor`'s
context check says it cannot measure; it never crashes its engine (StreamError and a stop imitate
that); structured output is checked for shape, not decoded under the schema. Each chat request
takes the next scripted reply (`queue`), or `default_reply` when the script is empty. Anything it
finds wrong is answered with vLLM's 400 and also appended to `problems`, so a test can assert that
nothing was wrong.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from PIL import Image

DEFAULT_MODEL = "Hcompany/Holotron-12B"

_KNOWN_CHAT_FIELDS = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "n",
    "stream",
    "stream_options",
    "response_format",
    "chat_template_kwargs",
    "structured_outputs",
    "tools",  # native tool calls (the holo profiles)
    "tool_choice",
}
_ROLES = {"system", "user", "assistant", "tool"}
_DATA_URL_PREFIXES = {"data:image/png;base64,": "PNG", "data:image/jpeg;base64,": "JPEG"}


# --- scripted replies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """A successful answer, as JSON or as an SSE stream depending on the request's `stream`.

    Streaming sends the role chunk at once, waits `first_token_delay_s` (the prefill), then the text
    in pieces of `chunk_chars` with `token_delay_s` between them (the decode). `drop_after_chunks`
    resets the connection after that many text pieces; `end_without_done` stops before [DONE].
    """

    text: str = '{"action": "wait"}'
    prompt_tokens: int = 1234
    completion_tokens: int = 7
    reasoning: str = ""
    finish_reason: str = "stop"
    first_token_delay_s: float = 0.0
    token_delay_s: float = 0.0
    chunk_chars: int = 4
    drop_after_chunks: int | None = None
    end_without_done: bool = False


@dataclass(frozen=True)
class ErrorReply:
    """An error as vLLM sends it: `{"error": {...}}`, or the flat shape of vLLM before 0.10."""

    status: int
    message: str
    error_type: str = "BadRequestError"
    headers: Mapping[str, str] = field(default_factory=dict)
    shape: Literal["nested", "flat"] = "nested"


@dataclass(frozen=True)
class RawReply:
    """Exactly these bytes, for malformed answers (HTML error pages, truncated JSON, odd shapes)."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class SlowReply:
    """Wait `delay_s` before sending anything, then answer with `then`."""

    delay_s: float
    then: Reply = field(default_factory=Completion)


@dataclass(frozen=True)
class DropConnection:
    """Read the request, then reset the connection without a status line."""


@dataclass(frozen=True)
class StreamError:
    """A 200 stream that starts an answer and then carries vLLM's error event (then [DONE])."""

    text_before: str = '{"act'
    status: int = 500
    message: str = "EngineCore encountered an issue."
    error_type: str = "InternalServerError"


@dataclass(frozen=True)
class HeaderDrip:
    """A status line, then header bytes one at a time every `interval_s`, never ending the headers."""

    interval_s: float = 0.05


@dataclass(frozen=True)
class EndlessStream:
    """A 200 event stream of content pieces of `piece_chars` that never ends (no [DONE])."""

    piece_chars: int = 4096
    interval_s: float = 0.0


@dataclass(frozen=True)
class KeepAliveStream:
    """A 200 event stream that sends its role chunk, then only `: keep-alive` comments every `interval_s`."""

    interval_s: float = 0.05


Reply = (
    Completion
    | ErrorReply
    | RawReply
    | SlowReply
    | DropConnection
    | StreamError
    | HeaderDrip
    | EndlessStream
    | KeepAliveStream
)


# --- what was received --------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    body: Any = None
    received_at: float = 0.0

    def parts(self) -> list[dict[str, Any]]:
        """Every content part of every message, in order (string contents become text parts)."""
        found: list[dict[str, Any]] = []
        for message in (self.body or {}).get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                found.append({"type": "text", "text": content})
            elif isinstance(content, list):
                found.extend(content)
        return found

    def image_urls(self) -> list[str]:
        return [part["image_url"]["url"] for part in self.parts() if part.get("type") == "image_url"]

    def images(self) -> list[Image.Image]:
        """The images the request carried, decoded, in order."""
        decoded = []
        for url in self.image_urls():
            _, _, payload = url.partition(",")
            image = Image.open(io.BytesIO(base64.b64decode(payload)))
            image.load()
            decoded.append(image)
        return decoded


# --- the server ---------------------------------------------------------------------------------


class FakeOpenAIServer:
    """Use as a context manager: `with FakeOpenAIServer() as server: ... server.base_url ...`."""

    def __init__(
        self,
        models: tuple[str, ...] = (DEFAULT_MODEL,),
        api_key: str | None = None,
        reject_structured_output: bool = False,
        structured_output_refusal: str = "The provided JSON schema contains features not supported by xgrammar.",
        models_reply: Reply | None = None,
    ) -> None:
        self.models = models
        self.api_key = api_key
        self.reject_structured_output = reject_structured_output
        self.structured_output_refusal = structured_output_refusal
        self.models_reply = models_reply
        self.max_model_len = 32768  # what GET /models reports for each model, as vLLM does
        self.default_reply: Reply = Completion()
        self.requests: list[RecordedRequest] = []
        self.problems: list[str] = []
        # When a never-ending reply found its client gone (the write failed): the handler was released.
        self.released_at: list[float] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a SlowReply
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start the server first"
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- script and records --

    def queue(self, *replies: Reply) -> None:
        """Answer the next chat requests with these replies, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else self.default_reply

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _problem(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or are reset leave broken pipes behind; that is the point of those tests.
        pass


# --- request checking, as vLLM does it ----------------------------------------------------------


class _Rejected(Exception):
    """A request vLLM would refuse. `scripted` refusals were asked for by the test, so they are no problem."""

    def __init__(
        self, status: int, message: str, error_type: str = "BadRequestError", *, scripted: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type
        self.scripted = scripted


def _check_image_url(url: Any, where: str) -> None:
    if not isinstance(url, str):
        raise _Rejected(400, f"{where}: image_url.url must be a string")
    prefix = next((p for p in _DATA_URL_PREFIXES if url.startswith(p)), None)
    if prefix is None:
        raise _Rejected(400, f"{where}: expected a PNG or JPEG base64 data URL, got {url[:40]!r}")
    try:
        data = base64.b64decode(url[len(prefix) :], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Rejected(400, f"{where}: invalid base64 ({exc})") from None
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as exc:
        raise _Rejected(400, f"{where}: not a decodable image ({exc})") from None
    if image.format != _DATA_URL_PREFIXES[prefix]:
        raise _Rejected(400, f"{where}: data URL says {prefix} but the bytes are {image.format}")


def _check_chat_body(body: Any, server: FakeOpenAIServer) -> None:
    if not isinstance(body, dict):
        raise _Rejected(400, "the request body must be a JSON object")
    for name in body:
        if name not in _KNOWN_CHAT_FIELDS:
            # vLLM accepts unknown fields with a warning; a test double should flag them instead.
            server._problem(f"unknown field {name!r}")
    model = body.get("model")
    if not isinstance(model, str):
        raise _Rejected(400, "model: field required")
    if model not in server.models:
        raise _Rejected(404, f"The model `{model}` does not exist.", "NotFoundError", scripted=True)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Rejected(400, "messages: a non-empty list is required")
    for m_index, message in enumerate(messages):
        where = f"messages[{m_index}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise _Rejected(400, f"{where}: a role of {sorted(_ROLES)} is required")
        content = message.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise _Rejected(400, f"{where}.content must be a string or a list of parts")
        for p_index, part in enumerate(content):
            part_where = f"{where}.content[{p_index}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                if not isinstance(part.get("text"), str):
                    raise _Rejected(400, f"{part_where}: text must be a string")
            elif kind == "image_url":
                image_url = part.get("image_url")
                if not isinstance(image_url, dict):
                    raise _Rejected(400, f"{part_where}: image_url must be an object with a url")
                _check_image_url(image_url.get("url"), part_where)
            else:
                raise _Rejected(400, f"{part_where}: unsupported content part type {kind!r}")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise _Rejected(400, "max_tokens must be a positive integer")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float) or not 0 <= temperature <= 2):
        raise _Rejected(400, "temperature must be a number between 0 and 2")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _Rejected(400, "stream must be a boolean")
    if "stream_options" in body:
        if not stream:
            raise _Rejected(400, "Stream options can only be defined when `stream=True`.")
        if not isinstance(body["stream_options"], dict):
            raise _Rejected(400, "stream_options must be an object")
    if "chat_template_kwargs" in body and not isinstance(body["chat_template_kwargs"], dict):
        raise _Rejected(400, "chat_template_kwargs must be an object")
    response_format = body.get("response_format")
    if response_format is not None:
        if not isinstance(response_format, dict) or response_format.get("type") not in (
            "text",
            "json_object",
            "json_schema",
        ):
            raise _Rejected(400, "response_format.type must be one of text, json_object, json_schema")
        if response_format["type"] == "json_schema":
            spec = response_format.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise _Rejected(400, "response_format.json_schema needs a name")
            if not isinstance(spec.get("schema"), dict):
                raise _Rejected(400, "response_format.json_schema.schema must be a JSON schema object")
        if server.reject_structured_output:
            raise _Rejected(400, server.structured_output_refusal, scripted=True)


# --- answering ----------------------------------------------------------------------------------


def _error_body(status: int, message: str, error_type: str, shape: str = "nested") -> bytes:
    error = {"message": message, "type": error_type, "param": None, "code": status}
    return json.dumps({"object": "error", **error} if shape == "flat" else {"error": error}).encode()


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def finish(self) -> None:
            # After a deliberate reset the socket is gone; flushing it fails, which is expected.
            with contextlib.suppress(OSError):
                super().finish()

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        # -- dispatch --

        def _handle(self, method: str) -> None:
            self.close_connection = True
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body: Any = None
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
            server._record(
                RecordedRequest(
                    method=method,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw_body=raw,
                    body=body,
                    received_at=time.perf_counter(),
                )
            )
            try:
                self._route(method, raw, body)
            except _Rejected as rejected:
                if not rejected.scripted:
                    server._problem(rejected.message)
                self._send_bytes(rejected.status, _error_body(rejected.status, rejected.message, rejected.error_type))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test) or was reset on purpose

        def _route(self, method: str, raw: bytes, body: Any) -> None:
            routes = {"/v1/models": "GET", "/v1/chat/completions": "POST"}
            if self.path not in routes:
                server._problem(f"{method} {self.path}: no such route in vLLM's API")
                self._send_bytes(404, b'{"detail":"Not Found"}')
                return
            if routes[self.path] != method:
                self._send_bytes(405, b'{"detail":"Method Not Allowed"}')
                return
            if server.api_key is not None and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                # vLLM's --api-key middleware answers exactly this.
                self._send_bytes(401, b'{"error":"Unauthorized"}')
                return
            if self.path == "/v1/models":
                if server.models_reply is not None:
                    self._reply(server.models_reply, stream=False, model="")
                else:
                    self._send_json(200, self._model_list())
                return
            if "application/json" not in (self.headers.get("Content-Type") or ""):
                raise _Rejected(400, "Content-Type must be application/json")
            if body is None:
                raise _Rejected(400, f"the body is not JSON: {raw[:60]!r}")
            _check_chat_body(body, server)
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._reply(
                server._next_reply(), stream=body.get("stream") is True, model=body["model"], usage=include_usage
            )

        def _model_list(self) -> dict[str, Any]:
            created = int(time.time())
            return {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": created,
                        "owned_by": "vllm",
                        "root": name,
                        "parent": None,
                        "max_model_len": server.max_model_len,
                    }
                    for name in server.models
                ],
            }

        # -- replies --

        def _reply(self, reply: Reply, *, stream: bool, model: str, usage: bool = False) -> None:
            if isinstance(reply, SlowReply):
                server._wait(reply.delay_s)
                self._reply(reply.then, stream=stream, model=model, usage=usage)
            elif isinstance(reply, ErrorReply):
                self._send_bytes(
                    reply.status, _error_body(reply.status, reply.message, reply.error_type, reply.shape), reply.headers
                )
            elif isinstance(reply, RawReply):
                self._send_bytes(reply.status, reply.body, content_type=reply.content_type)
            elif isinstance(reply, DropConnection):
                self._reset()
            elif isinstance(reply, StreamError):
                self._start_stream()
                self._event(_chunk(model, {"role": "assistant", "content": ""}))
                self._event(_chunk(model, {"content": reply.text_before}))
                error = {"message": reply.message, "type": reply.error_type, "param": None, "code": reply.status}
                self._event({"error": error})
                self._write_chunk(b"data: [DONE]\n\n")
                self._write_chunk(b"")
            elif isinstance(reply, HeaderDrip | EndlessStream | KeepAliveStream):
                try:
                    self._never_ending(reply, model)
                except OSError:  # the client closed the connection
                    with server._lock:
                        server.released_at.append(time.monotonic())
            elif stream:
                self._stream_completion(reply, model, usage)
            else:
                server._wait(reply.first_token_delay_s + reply.token_delay_s * len(_pieces(reply)))
                self._send_json(200, _completion(reply, model))

        def _stream_completion(self, reply: Completion, model: str, usage: bool) -> None:
            self._start_stream()
            self._event(_chunk(model, {"role": "assistant", "content": ""}))
            server._wait(reply.first_token_delay_s)
            if reply.reasoning:
                self._event(_chunk(model, {"reasoning_content": reply.reasoning}))
            for index, piece in enumerate(_pieces(reply)):
                if reply.drop_after_chunks is not None and index >= reply.drop_after_chunks:
                    self._reset()
                    return
                if index:
                    server._wait(reply.token_delay_s)
                self._event(_chunk(model, {"content": piece}))
            self._event(_chunk(model, {"content": ""}, finish_reason=reply.finish_reason))
            if usage:
                self._event({**_chunk(model, {}), "choices": [], "usage": _usage(reply)})
            if not reply.end_without_done:
                self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")

        def _never_ending(self, reply: HeaderDrip | EndlessStream | KeepAliveStream, model: str) -> None:
            """Write until the client goes away (OSError) or the server stops."""
            if isinstance(reply, HeaderDrip):
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                while not server._stopping.is_set():
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    server._wait(reply.interval_s)
                return
            self._start_stream()
            self._event(_chunk(model, {"role": "assistant", "content": ""}))
            while not server._stopping.is_set():
                if isinstance(reply, EndlessStream):
                    self._event(_chunk(model, {"content": "x" * reply.piece_chars}))
                else:
                    self._write_chunk(b": keep-alive\n\n")
                server._wait(reply.interval_s)

        # -- HTTP plumbing --

        def _send_json(self, status: int, payload: Any) -> None:
            self._send_bytes(status, json.dumps(payload).encode())

        def _send_bytes(
            self,
            status: int,
            body: bytes,
            headers: Mapping[str, str] | None = None,
            content_type: str = "application/json",
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _start_stream(self) -> None:
            # uvicorn streams with chunked transfer encoding; so does this.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()

        def _event(self, payload: Any) -> None:
            self._write_chunk(f"data: {json.dumps(payload)}\n\n".encode())

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _reset(self) -> None:
            # SO_LINGER 0: close sends RST, so the client sees a reset, not a clean end of stream.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    return Handler


def _pieces(reply: Completion) -> list[str]:
    size = max(1, reply.chunk_chars)
    return [reply.text[i : i + size] for i in range(0, len(reply.text), size)] or [""]


def _usage(reply: Completion) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _chunk(model: str, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def _completion(reply: Completion, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "tool_calls": []}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": _usage(reply),
    }


def closed_port() -> int:
    """A local port nothing listens on (bound, then released): connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
