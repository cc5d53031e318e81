"""The HTTP backend: runs a ChatRequest on an OpenAI-compatible server (vLLM serving Holotron-12B).

HTTP goes through httpx (a maintained client: HTTP/1.1, TLS, streaming, timeouts). One new
connection per request, so a dropped connection never poisons the next step; HTTP(S)_PROXY is not
used (the server is expected on the LAN or a tunnel). Choices, briefly:

- Images go as PNG data URLs (lossless, so the model sees the same pixels the in-process backend
  would; UI screenshots are also smaller as PNG than as JPEG q90). `image_format="jpeg"` trades that
  for a smaller body on photo-heavy screens or slow links.
- Structured output uses the OpenAI field `response_format: {"type": "json_schema", ...}`, which vLLM
  has accepted since 0.6 and still accepts (its `guided_json` extra field was removed in 0.12). A 400
  that names the field is remembered and the request is sent once more without it.
- Answers are streamed (SSE with `stream_options.include_usage`) so the time to the first token
  (network + queue + prefill) and the decode time can be told apart; with `stream=False` those two
  stay 0 and only total_s and the token counts are filled.
- Retries: 429, most 5xx and dropped connections, with exponential backoff or the server's
  Retry-After, a bounded number of times. A refused connection, a timeout or a 4xx is not retried:
  waiting would not change the answer and the user is waiting.
- Every request is bounded: a total deadline (`request_deadline_s`, from the first byte sent to the
  last received, whatever the server drips), a bound on the bytes of one answer
  (`max_answer_bytes`), and on a stream that sends only keep-alive comments
  (`keepalive_silence_s`). `interrupt()` (a stop) shuts the socket down at once, which wakes the
  thread blocked reading it and releases the server; that request then fails with
  RequestStoppedError. The errors say in words what happened.
"""

from __future__ import annotations

import base64
import email.utils
import io
import json
import logging
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn, TypeVar
from urllib.parse import urlsplit

import httpx
from PIL import Image

from holodesk.inference.control_text import neutral_messages
from holodesk.inference.errors import BackendError
from holodesk.inference.fast_png import encode_png
from holodesk.inference.generation import Generation
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest, Message
from holodesk.inference.profiles.schema_bounds import UnboundedSchemaError, longest_answer_bytes
from holodesk.inference.secrets import find_api_key, where_keys_come_from

logger = logging.getLogger(__name__)

T = TypeVar("T")

ImageFormat = Literal["png", "jpeg"]

# Longest body excerpt kept in an error message: enough to recognise an HTML error page or a message.
_EXCERPT_CHARS = 300
# Encoded screenshots kept for reuse: a step sends at most a few, most of them again the next step.
ENCODED_IMAGES_KEPT = 8
# Guards against a misbehaving server sending an endless body; a 1,000-token answer is a few KB
# as JSON, a few tens of KB as an event stream (one event per token).
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024
# A whole answer, queueing and a long reasoning trace included, within this many seconds.
DEFAULT_REQUEST_DEADLINE_S = 600.0
# vLLM sends no keep-alive comments; proxies that do would otherwise hold a dead stream open forever.
DEFAULT_KEEPALIVE_SILENCE_S = 120.0
# Words a server uses when it refuses the structured-output field (vLLM, xgrammar, other servers).
_STRUCTURED_OUTPUT_MARKERS = ("response_format", "json_schema", "json schema", "structured", "guided", "grammar")
_USER_AGENT = "holodesk-remote/0.1"


# --- errors -------------------------------------------------------------------------------------


class RemoteBackendError(BackendError):
    """A request to the OpenAI-compatible server failed; the message is meant to be shown as it is.

    `status` is the HTTP status when there was one, `server_message` what the server said about it,
    `body_excerpt` the start of the raw body (for logs and bug reports).
    """

    def __init__(
        self, message: str, *, status: int | None = None, server_message: str = "", body_excerpt: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.server_message = server_message
        self.body_excerpt = body_excerpt


class ServerUnreachableError(RemoteBackendError):
    """No connection could be made: refused, unknown host, network down, TLS failure, connect timeout."""


class AuthenticationError(RemoteBackendError):
    """HTTP 401/403: the API key is missing or wrong."""


class ModelNotFoundError(RemoteBackendError):
    """HTTP 404 on a chat request, or the chosen model is not in the server's list."""


class AmbiguousModelError(RemoteBackendError):
    """No model was chosen and the server serves several (or none)."""


class RequestRejectedError(RemoteBackendError):
    """Another 4xx: the server refused this request (too many tokens, a bad field...)."""


class ServerError(RemoteBackendError):
    """429 or 5xx (or dropped connections) that did not clear within the allowed attempts."""


class ContextLengthError(RequestRejectedError):
    """HTTP 400: the prompt plus max_tokens is longer than the server's context (`--max-model-len`)."""


class TooManyImagesError(RequestRejectedError):
    """HTTP 400: the request carries more images than the server allows (`--limit-mm-per-prompt`)."""


class ServerCrashedError(ServerError):
    """The server failed while answering (an error event, a dropped stream) and then refused connections."""


class ServerTimeoutError(RemoteBackendError):
    """The server accepted the request but did not answer within the read timeout."""


class RequestStoppedError(RemoteBackendError):
    """The request was abandoned on purpose (a stop); its connection was closed at once."""


class AnswerTooLongError(RemoteBackendError):
    """The server sent more bytes for one answer than `max_answer_bytes` allows."""


class MalformedResponseError(RemoteBackendError):
    """The server answered, but not with the JSON (or event stream) an OpenAI-compatible server sends."""


# --- configuration and results ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry 429, 5xx and dropped connections.

    Attempt n (1-based) that fails waits `backoff_base_s * 2**(n-1)`, at most `backoff_max_s`, unless
    the server sent Retry-After, which is honoured. A Retry-After longer than `max_retry_after_s`
    ends the retries at once: the user is waiting on this step.
    """

    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    max_retry_after_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff and Retry-After bounds must not be negative")

    def backoff_s(self, failed_attempt: int) -> float:
        return min(self.backoff_max_s, self.backoff_base_s * 2 ** (failed_attempt - 1))


@dataclass(frozen=True, slots=True)
class ServerCheck:
    """What `RemoteBackend.check_server` found, for a doctor command to print line by line.

    `problem` is None when the server is reachable, the key is accepted and the model is served.
    `authenticated` is None when the check stopped before the key could be judged.
    """

    base_url: str
    reachable: bool
    authenticated: bool | None
    models: tuple[str, ...] = ()
    model: str | None = None
    model_listed: bool = False
    api_key_source: str | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(slots=True)
class _Answer:
    """One successful chat attempt, before it becomes a Generation."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    finish_reason: str | None = None


class _Retryable(Exception):
    """An attempt failed in a way that may clear up (429, 5xx, dropped connection); never leaves this module."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        server_message: str = "",
        body_excerpt: str = "",
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after_s = retry_after_s
        self.server_message = server_message
        self.body_excerpt = body_excerpt


# --- helpers ------------------------------------------------------------------------------------


def normalize_base_url(base_url: str) -> str:
    """The API root, without a trailing slash: "http://gpu:8000" and "gpu:8000/" become "http://gpu:8000/v1".

    A URL that already has a path (".../v1", a proxy's "/openai/v1") is kept as it is.
    """
    url = base_url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"the server URL must start with http:// or https://, got {base_url!r}")
    if not parts.hostname:
        raise ValueError(f"cannot find a host name in the server URL {base_url!r}")
    if parts.path in ("", "/"):
        url += "/v1"
    return url


def image_data_url(image: Image.Image, image_format: ImageFormat = "png") -> str:
    """`image` as a data URL. RGB only: servers convert to RGB anyway and alpha would only cost bytes."""
    if image.mode != "RGB":
        image = image.convert("RGB")
    if image_format == "png":
        # Lossless, without Pillow's per-row filter search: 2.5x cheaper on screenshots (see fast_png).
        data = encode_png(image)
        mime = "image/png"
    elif image_format == "jpeg":
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        data = buffer.getvalue()
        mime = "image/jpeg"
    else:
        raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def messages_with_images(messages: list[Message], image_urls: list[str]) -> list[Message]:
    """A copy of `messages` whose `{"type": "image"}` placeholders become image_url parts, in order.

    Their text is neutralised first (`control_text`): nothing in it can become a control token on the server.
    """
    urls = iter(image_urls)
    converted: list[Message] = []
    used = 0
    for message in neutral_messages(messages):
        content = message.get("content")
        if isinstance(content, list):
            parts: list[dict[str, Any]] = []
            for part in content:
                if part.get("type") == "image":
                    url = next(urls, None)
                    if url is None:
                        raise ValueError("more image placeholders than images")
                    used += 1
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    parts.append(part)
            message["content"] = parts
        converted.append(message)
    if used != len(image_urls):
        raise ValueError(f"{len(image_urls)} images but only {used} image placeholders")
    return converted


def max_tokens_for(request: ChatRequest, with_schema: bool) -> int:
    """The request's token budget, raised to what the longest answer its schema allows can take.

    A server that constrains decoding to the schema ends a string only at its closing quote: cut at
    max_tokens first, the answer never parses. The schema's bounds make that length finite (the
    profiles' schemas all have them); an unbounded schema keeps the request's own budget.
    """
    if not with_schema or request.response_schema is None:
        return request.max_new_tokens
    try:
        longest = longest_answer_bytes(request.response_schema)
    except UnboundedSchemaError:
        return request.max_new_tokens
    return max(request.max_new_tokens, longest)


def _excerpt(body: bytes | str) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "..."


def _server_message(body: bytes) -> str:
    """What the server said in an error body, whatever shape it used.

    vLLM sends `{"error": {"message": ...}}` (flat `{"object": "error", "message": ...}` before
    0.10), its --api-key check sends `{"error": "Unauthorized"}`, FastAPI sends `{"detail": ...}`.
    """
    try:
        parsed = json.loads(body)
    except ValueError:
        return _excerpt(body)
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return _excerpt(error["message"])
        if isinstance(error, str):
            return _excerpt(error)
        if isinstance(parsed.get("message"), str):
            return _excerpt(parsed["message"])
        if "detail" in parsed:
            detail = parsed["detail"]
            return _excerpt(detail if isinstance(detail, str) else json.dumps(detail))
    return _excerpt(body)


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date (seconds from now, never negative)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _is_retryable_status(status: int) -> bool:
    # 501 and 505 say the server will never do this; retrying cannot help.
    return status in (408, 429) or (500 <= status < 600 and status not in (501, 505))


def _mentions_structured_output(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _STRUCTURED_OUTPUT_MARKERS)


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- the backend --------------------------------------------------------------------------------


class RemoteBackend:
    """TextGenerator over an OpenAI-compatible /chat/completions endpoint.

    `api_key=None` looks the key up (HOLODESK_API_KEY, then the OS keyring; see
    `inference.secrets`); pass `api_key=""` for a server without authentication and no lookup.
    `model=None` uses the one model the server lists. `read_timeout_s` bounds each wait for data:
    the whole answer without streaming, the gap between two events with it.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.0,
        stream: bool = True,
        structured_output: bool = True,
        image_format: ImageFormat = "png",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 120.0,
        request_deadline_s: float = DEFAULT_REQUEST_DEADLINE_S,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        keepalive_silence_s: float = DEFAULT_KEEPALIVE_SILENCE_S,
        encoded_images_kept: int = ENCODED_IMAGES_KEPT,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if image_format not in ("png", "jpeg"):
            raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
        if connect_timeout_s <= 0 or read_timeout_s <= 0 or request_deadline_s <= 0 or keepalive_silence_s <= 0:
            raise ValueError("timeouts must be positive")
        if encoded_images_kept < 0:
            raise ValueError(f"encoded_images_kept must not be negative, got {encoded_images_kept}")
        if max_answer_bytes < 1024:
            raise ValueError(f"max_answer_bytes must be at least 1024, got {max_answer_bytes}")
        self.base_url = normalize_base_url(base_url)
        parts = urlsplit(self.base_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._path_prefix = parts.path
        if api_key is None:
            lookup = find_api_key(self.base_url)
            self._api_key = lookup.key or ""
            self.api_key_source = lookup.source
        else:
            self._api_key = api_key.strip()
            self.api_key_source = "given" if self._api_key else None
        self._model = model.strip() if model and model.strip() else None
        self._encoded: OrderedDict[int, tuple[Image.Image, str]] = OrderedDict()
        # A batch sends each image once: 0 keeps none (and none of their memory).
        self.encoded_images_kept = encoded_images_kept
        self.temperature = temperature
        self.stream = stream
        self.image_format: ImageFormat = image_format
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.request_deadline_s = request_deadline_s
        self.max_answer_bytes = max_answer_bytes
        self.keepalive_silence_s = keepalive_silence_s
        self.retry = retry or RetryPolicy()
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
            # No keep-alive: a fresh connection per request (see the module docstring).
            limits=httpx.Limits(max_keepalive_connections=0),
            trust_env=False,
            verify=ssl.create_default_context(),
            follow_redirects=False,
        )
        self._active: set[_Exchange] = set()
        self._active_lock = threading.Lock()
        self._sleep = sleep
        # Turned off for the rest of the session once the server refuses the field.
        self.structured_output = structured_output

    def __repr__(self) -> str:
        # Never the key itself.
        return f"RemoteBackend(base_url={self.base_url!r}, model={self._model!r}, key={self.api_key_source!r})"

    # -- public API --

    def interrupt(self) -> None:
        """Abandon every request in flight now: their sockets are shut down, their threads wake at once."""
        with self._active_lock:
            active = list(self._active)
        for exchange in active:
            exchange.abort("stopped")

    def close(self) -> None:
        self.interrupt()
        self._client.close()

    @property
    def model(self) -> str:
        """The model name sent with each request, asking the server once when none was given."""
        if self._model is None:
            self._model = self._choose_model(self.list_models())
        return self._model

    def list_models(self) -> tuple[str, ...]:
        """The model ids the server serves (GET /models), with retries."""
        return self._with_retries(self._list_models_once, "listing models")

    def _data_url(self, image: Image.Image) -> str:
        """Encode once per image: a step re-sends the previous screenshots, already encoded."""
        key = id(image)
        cached = self._encoded.get(key)
        if cached is not None and cached[0] is image:
            self._encoded.move_to_end(key)
            return cached[1]
        url = image_data_url(image, self.image_format)
        if self.encoded_images_kept == 0:
            return url
        self._encoded[key] = (image, url)  # the image is kept, so its id stays unique while cached
        while len(self._encoded) > self.encoded_images_kept:
            self._encoded.popitem(last=False)
        return url

    def generate(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        image_urls = [self._data_url(image) for image in request.images]
        preprocess_s = time.perf_counter() - started
        messages = messages_with_images(request.messages, image_urls)
        model = self.model

        with_schema = self.structured_output and request.response_schema is not None
        try:
            answer = self._with_retries(
                lambda: self._chat_once(self._payload(model, messages, request, with_schema)), "chat request"
            )
        except RequestRejectedError as exc:
            if not (with_schema and _mentions_structured_output(exc.server_message)):
                raise
            self.structured_output = False
            logger.warning(
                "The server at %s refused the structured-output field (%s); "
                "sending requests without a JSON schema from now on.",
                self.base_url,
                exc.server_message,
            )
            with_schema = False
            answer = self._with_retries(
                lambda: self._chat_once(self._payload(model, messages, request, False)), "chat request"
            )
        if answer.finish_reason == "length":
            cut_at = max_tokens_for(request, with_schema)
            logger.warning("The answer was cut at max_tokens=%d; it may not parse.", cut_at)
        timings = StepTimings(
            preprocess_s=preprocess_s,
            prefill_s=answer.prefill_s,
            decode_s=answer.decode_s,
            total_s=time.perf_counter() - started,
            tokens_in=answer.tokens_in,
            tokens_out=answer.tokens_out,
        )
        return Generation(text=answer.text, timings=timings)

    def check_server(self) -> ServerCheck:
        """One quick look (a single GET /models, no retries): reachable, key accepted, model served."""
        common: dict[str, Any] = {"base_url": self.base_url, "api_key_source": self.api_key_source}
        try:
            models = self._list_models_once()
        except ServerUnreachableError as exc:
            return ServerCheck(reachable=False, authenticated=None, problem=str(exc), **common)
        except AuthenticationError as exc:
            return ServerCheck(reachable=True, authenticated=False, problem=str(exc), **common)
        except RemoteBackendError as exc:  # no /models there, a malformed list
            return ServerCheck(reachable=True, authenticated=None, problem=str(exc), **common)
        except _Retryable as failure:
            busy = f"The server at {self.base_url} is not answering properly right now: {failure.reason}."
            return ServerCheck(reachable=True, authenticated=None, problem=busy, **common)
        if self._model is not None:
            listed = self._model in models
            problem = None if listed else self._not_listed_message(self._model, models)
            return ServerCheck(
                reachable=True,
                authenticated=True,
                models=models,
                model=self._model,
                model_listed=listed,
                problem=problem,
                **common,
            )
        try:
            chosen = self._choose_model(models)
        except AmbiguousModelError as exc:
            return ServerCheck(reachable=True, authenticated=True, models=models, problem=str(exc), **common)
        return ServerCheck(reachable=True, authenticated=True, models=models, model=chosen, model_listed=True, **common)

    def model_context_length(self) -> int | None:
        """The served model's context length (`max_model_len` in vLLM's GET /models); None where not said."""
        model = self.model
        with self._open("GET", "/models", None) as (exchange, response):
            body = self._read_body(response, exchange)
            if response.status_code != 200:
                self._raise_for_status(response, body, path="/models")
        parsed = self._parse_json(body, "the model list")
        entries = parsed.get("data") if isinstance(parsed, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("id") == model:
                length = entry.get("max_model_len")
                return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None
        return None

    def count_prompt_tokens(self, request: ChatRequest) -> int | None:
        """How many tokens the server makes of this request's prompt, images included (vLLM's POST /tokenize).

        None when the server has no such endpoint (not vLLM, or a URL whose API root is not .../v1).
        A refusal (too many images, say) raises RequestRejectedError with the server's words.
        """
        if self._server_root() is None:
            return None
        messages = messages_with_images(request.messages, [self._data_url(image) for image in request.images])
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "add_generation_prompt": True}
        if request.chat_template_kwargs:
            payload["chat_template_kwargs"] = dict(request.chat_template_kwargs)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        with self._open("POST", "/tokenize", body, root=True) as (exchange, response):
            raw = self._read_body(response, exchange)
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                self._raise_for_status(response, raw, path="/tokenize")
        parsed = self._parse_json(raw, "a token count")
        count = parsed.get("count") if isinstance(parsed, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            raise self._malformed("a token 'count'", raw)
        return count

    def _server_root(self) -> str | None:
        """The server's root when the API root is the usual <root>/v1 (vLLM's /tokenize lives there)."""
        return self.base_url.removesuffix("/v1") if self.base_url.endswith("/v1") else None

    # -- requests --

    def _payload(self, model: str, messages: list[Message], request: ChatRequest, with_schema: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens_for(request, with_schema),
            "temperature": self.temperature,
        }
        if request.chat_template_kwargs:
            payload["chat_template_kwargs"] = dict(request.chat_template_kwargs)
        if with_schema and request.response_schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "holodesk_answer", "schema": request.response_schema},
            }
        if self.stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        return payload

    def _list_models_once(self) -> tuple[str, ...]:
        with self._open("GET", "/models", None) as (exchange, response):
            body = self._read_body(response, exchange)
            if response.status_code != 200:
                self._raise_for_status(response, body, path="/models")
        parsed = self._parse_json(body, "the model list")
        data = parsed.get("data") if isinstance(parsed, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) and "id" in item for item in data):
            raise MalformedResponseError(
                f"The server at {self.base_url} answered GET /models without a list of models "
                f"(body starts: {_excerpt(body)!r}).",
                status=response.status_code,
                body_excerpt=_excerpt(body),
            )
        return tuple(str(item["id"]) for item in data)

    def _chat_once(self, payload: dict[str, Any]) -> _Answer:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        sent_at = time.perf_counter()
        with self._open("POST", "/chat/completions", body) as (exchange, response):
            content_type = (response.headers.get("Content-Type") or "").lower()
            if response.status_code == 200 and content_type.startswith("text/event-stream"):
                return self._read_stream(response, exchange, sent_at)
            raw = self._read_body(response, exchange)
            if response.status_code != 200:
                self._raise_for_status(response, raw, path="/chat/completions", model=payload["model"])
            # A server that ignores `stream` answers with one JSON body; take it as it is.
            return self._parse_completion(raw)

    @contextmanager
    def _open(
        self, method: str, path: str, body: bytes | None, *, root: bool = False
    ) -> Iterator[tuple[_Exchange, httpx.Response]]:
        """Send the request and yield the response with its headers read; every failure in words.

        The exchange is registered for `interrupt()` and watched by a deadline timer for as long as
        the caller reads the response; leaving the block closes the connection.
        """
        headers = {"Accept": "application/json, text/event-stream", "User-Agent": _USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        exchange = _Exchange()
        deadline = threading.Timer(self.request_deadline_s, exchange.abort, ("deadline",))
        deadline.daemon = True
        with self._active_lock:
            self._active.add(exchange)
        deadline.start()
        try:
            request = self._client.build_request(
                method,
                (self._server_root() or self.base_url if root else self.base_url) + path,
                content=body,
                headers=headers,
                extensions={"trace": exchange.trace},
            )
            try:
                response = self._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, exchange, "before the answer began") from exc
            try:
                exchange.raise_if_aborted(self)
                yield exchange, response
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, exchange, "mid-answer") from exc
            finally:
                response.close()
        finally:
            deadline.cancel()
            with self._active_lock:
                self._active.discard(exchange)

    def _transport_error(self, exc: httpx.HTTPError, exchange: _Exchange, when: str) -> Exception:
        """What an httpx failure means for the user, or a _Retryable when it may clear up."""
        aborted = exchange.aborted_error(self)
        if aborted is not None:
            return aborted
        cause = _root_cause(exc)
        if isinstance(exc, httpx.ConnectTimeout):
            return ServerUnreachableError(
                f"{self.base_url} did not accept a connection within {self.connect_timeout_s:g} s "
                f"(a firewall, a wrong address, or the machine is down)."
            )
        if isinstance(exc, httpx.ConnectError):
            if isinstance(cause, ConnectionRefusedError):
                return ServerUnreachableError(
                    f"Nothing is listening at {self.base_url} (connection refused). Is the server running "
                    f"(vllm serve ...) and is the port right?"
                )
            if isinstance(cause, socket.gaierror):
                return ServerUnreachableError(
                    f"The host name {self._host!r} in {self.base_url} could not be resolved ({cause})."
                )
            if isinstance(cause, ssl.SSLError):
                if _is_plain_reply_to_tls(cause):
                    return ServerUnreachableError(
                        f"{self.base_url} does not speak TLS on this port (the TLS handshake got a plain "
                        f"reply: {cause.reason or cause}); if the server is plain HTTP, use http:// in the URL."
                    )
                return ServerUnreachableError(f"The TLS handshake with {self.base_url} failed: {cause}.")
            return ServerUnreachableError(f"Could not connect to {self.base_url}: {cause or exc}.")
        if isinstance(exc, httpx.TimeoutException):
            return self._timeout_error(self.base_url)
        if isinstance(exc, httpx.RemoteProtocolError) and when == "before the answer began":
            if "without sending" in str(exc) or "disconnected" in str(exc).lower():
                return _Retryable(reason=f"the connection was dropped ({type(cause or exc).__name__})")
            return MalformedResponseError(
                f"The server at {self.base_url} did not answer with valid HTTP ({exc}); "
                f"if it expects TLS, use https:// in the URL."
            )
        if isinstance(exc, httpx.TransportError):
            return _Retryable(reason=f"the connection was dropped {when} ({type(cause or exc).__name__})")
        return MalformedResponseError(f"The request to {self.base_url} failed: {exc}.")

    def _chunks(self, response: httpx.Response, exchange: _Exchange) -> Iterator[bytes]:
        """The body's bytes as they arrive, at most `max_answer_bytes` of them."""
        received = 0
        for chunk in response.iter_raw():
            exchange.raise_if_aborted(self)
            received += len(chunk)
            if received > self.max_answer_bytes:
                raise AnswerTooLongError(
                    f"The server at {self.base_url} sent more than {self.max_answer_bytes:,} bytes for one "
                    f"answer; giving up on it (an endless answer, or raise max_answer_bytes)."
                )
            yield chunk
        exchange.raise_if_aborted(self)

    def _read_body(self, response: httpx.Response, exchange: _Exchange) -> bytes:
        return b"".join(self._chunks(response, exchange))

    def _timeout_error(self, url: str) -> ServerTimeoutError:
        return ServerTimeoutError(
            f"{url} accepted the request but sent nothing for {self.read_timeout_s:g} s "
            f"(the server may be overloaded; raise the read timeout for long answers)."
        )

    # -- answers --

    def _parse_json(self, body: bytes, what: str) -> Any:
        try:
            return json.loads(body)
        except ValueError:
            raise MalformedResponseError(
                f"The server at {self.base_url} sent {what} that is not JSON (body starts: {_excerpt(body)!r}).",
                body_excerpt=_excerpt(body),
            ) from None

    def _malformed(self, what: str, body: bytes | str) -> MalformedResponseError:
        return MalformedResponseError(
            f"The server at {self.base_url} answered without {what}; is it an OpenAI-compatible "
            f"server? (body starts: {_excerpt(body)!r})",
            body_excerpt=_excerpt(body),
        )

    def _parse_completion(self, body: bytes) -> _Answer:
        parsed = self._parse_json(body, "an answer")
        if not isinstance(parsed, dict):
            raise self._malformed("a JSON object", body)
        choices = parsed.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._malformed("'choices'", body)
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise self._malformed("'choices[0].message'", body)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise self._malformed("a text 'content'", body)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        raw_usage = parsed.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        return _Answer(
            text=_with_reasoning(reasoning if isinstance(reasoning, str) else "", content or ""),
            tokens_in=_as_int(usage.get("prompt_tokens")),
            tokens_out=_as_int(usage.get("completion_tokens")),
            finish_reason=choices[0].get("finish_reason"),
        )

    def _read_stream(self, response: httpx.Response, exchange: _Exchange, sent_at: float) -> _Answer:
        content: list[str] = []
        reasoning: list[str] = []
        first_token_at: float | None = None
        last_token_at: float | None = None
        usage: dict[str, Any] = {}
        finish_reason: str | None = None
        done = False
        for data in self._sse_data(response, exchange):
            if data.strip() == "[DONE]":
                done = True
                break
            try:
                event = json.loads(data)
            except ValueError:
                raise self._malformed("JSON in an event of its stream", data) from None
            if not isinstance(event, dict):
                raise self._malformed("a JSON object in an event of its stream", data)
            if "error" in event or event.get("object") == "error":
                self._raise_stream_error(event, data)
            choices = event.get("choices")
            if not isinstance(choices, list):
                raise self._malformed("'choices' in an event of its stream", data)
            for choice in choices:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if not isinstance(delta, dict):
                    raise self._malformed("'delta' in an event of its stream", data)
                piece = delta.get("content")
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(piece, str) and piece:
                    content.append(piece)
                if isinstance(thought, str) and thought:
                    reasoning.append(thought)
                if (isinstance(piece, str) and piece) or (isinstance(thought, str) and thought):
                    last_token_at = time.perf_counter()
                    if first_token_at is None:
                        first_token_at = last_token_at
                finish_reason = choice.get("finish_reason") or finish_reason
            if isinstance(event.get("usage"), dict):
                usage = event["usage"]
        if not done:
            # The stream ended without [DONE]: the server or a proxy cut it; the answer may be partial.
            raise _Retryable(reason="the answer stream ended before [DONE]")
        ended_at = time.perf_counter()
        return _Answer(
            text=_with_reasoning("".join(reasoning), "".join(content)),
            tokens_in=_as_int(usage.get("prompt_tokens")),
            tokens_out=_as_int(usage.get("completion_tokens")),
            prefill_s=(first_token_at if first_token_at is not None else ended_at) - sent_at,
            decode_s=(last_token_at - first_token_at) if first_token_at is not None and last_token_at else 0.0,
            finish_reason=finish_reason,
        )

    def _sse_data(self, response: httpx.Response, exchange: _Exchange) -> Iterator[str]:
        """The `data` of each server-sent event (multi-line data joined by newlines).

        Lines are split here rather than by httpx so that the answer's byte bound also bounds a
        line that never ends. Keep-alive comments count as silence: after `keepalive_silence_s`
        of nothing else the stream is given up.
        """
        data_lines: list[str] = []
        pending = b""
        last_data_at = time.monotonic()
        for chunk in self._chunks(response, exchange):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", errors="replace").rstrip("\r")
                if not line:
                    if data_lines:
                        yield "\n".join(data_lines)
                        data_lines = []
                    continue
                if line.startswith(":"):  # a comment (keep-alive)
                    if time.monotonic() - last_data_at > self.keepalive_silence_s:
                        raise ServerTimeoutError(
                            f"{self.base_url} kept the answer stream open with keep-alive comments only, "
                            f"sending no data for {self.keepalive_silence_s:g} s; giving up on it."
                        )
                    continue
                last_data_at = time.monotonic()
                name, _, value = line.partition(":")
                if name == "data":
                    data_lines.append(value.removeprefix(" "))
        if pending.strip():
            name, _, value = pending.decode("utf-8", errors="replace").rstrip("\r").partition(":")
            if name == "data":
                data_lines.append(value.removeprefix(" "))
        if data_lines:
            yield "\n".join(data_lines)

    def _raise_stream_error(self, event: dict[str, Any], data: str) -> NoReturn:
        """An error sent inside a 200 stream (vLLM does this when generation fails after it started)."""
        nested = event.get("error")
        error: dict[str, Any] = nested if isinstance(nested, dict) else event
        message = str(error.get("message") or error.get("error") or data)
        code = error.get("code")
        status = code if isinstance(code, int) else None
        if status is not None and _is_retryable_status(status):
            raise _Retryable(reason=f"HTTP {status} inside the stream", status=status, server_message=_excerpt(message))
        raise RequestRejectedError(
            f"The server at {self.base_url} stopped the answer with an error: {_excerpt(message)}",
            status=status,
            server_message=_excerpt(message),
            body_excerpt=_excerpt(data),
        )

    # -- status codes and retries --

    def _raise_for_status(
        self, response: httpx.Response, body: bytes, *, path: str, model: str | None = None
    ) -> NoReturn:
        status = response.status_code
        message = _server_message(body)
        excerpt = _excerpt(body)
        said = f"HTTP {status}: {message}" if message else f"HTTP {status}"
        details: dict[str, Any] = {"status": status, "server_message": message, "body_excerpt": excerpt}
        if status in (401, 403):
            if self._api_key:
                text = f"The server at {self.base_url} refused the API key from {self.api_key_source} ({said})."
            else:
                text = f"The server at {self.base_url} needs an API key and none was found ({said})."
            raise AuthenticationError(f"{text} To set one, {where_keys_come_from(self.base_url)}.", **details)
        if status == 404 and path == "/chat/completions":
            raise ModelNotFoundError(
                f"The server at {self.base_url} does not serve the model {model!r} ({said}). "
                f"Check the model name (GET {self.base_url}/models lists them) and that the URL is the API root "
                f"(it usually ends in /v1).",
                **details,
            )
        if status == 404:
            raise RequestRejectedError(
                f"{self.base_url}{path} does not exist ({said}): is this an OpenAI-compatible server, "
                f"and does the URL end in /v1?",
                **details,
            )
        if status in (400, 413, 422):
            self._raise_if_too_big(message, details)
        if _is_retryable_status(status):
            raise _Retryable(
                reason=said,
                status=status,
                retry_after_s=_retry_after_s(response.headers.get("Retry-After")),
                server_message=message,
                body_excerpt=excerpt,
            )
        raise RequestRejectedError(f"The server at {self.base_url} refused the request ({said}).", **details)

    def _raise_if_too_big(self, message: str, details: dict[str, Any]) -> None:
        """A 400 that says the request does not fit the server's limits, with the server flag that sets each."""
        lowered = message.lower()
        if "context length" in lowered or "max_model_len" in lowered or "maximum model length" in lowered:
            raise ContextLengthError(
                f"The request is longer than the context of the model at {self.base_url} (HTTP 400: {message}). "
                "Restart the server with a larger --max-model-len (`holodesk doctor` measures what a task needs), "
                "or lower the step limit or the screenshots kept.",
                **details,
            )
        if "image" in lowered and ("at most" in lowered or "limit" in lowered or "too many" in lowered):
            raise TooManyImagesError(
                f"The server at {self.base_url} allows fewer images a request than this step sends "
                f'(HTTP 400: {message}). Restart it with --limit-mm-per-prompt \'{{"image":4,"video":0}}\', '
                "or keep fewer screenshots.",
                **details,
            )

    def _with_retries(self, attempt: Callable[[], T], what: str) -> T:
        policy = self.retry
        # The last failure that came from the server itself: if the next attempt finds nothing
        # listening, the server died answering, and that failure says how.
        answered: _Retryable | None = None
        for number in range(1, policy.max_attempts + 1):
            try:
                return attempt()
            except ServerUnreachableError as exc:
                if answered is None:
                    raise
                raise self._crashed(answered, exc) from None
            except _Retryable as failure:
                answered = failure
                if number >= policy.max_attempts:
                    raise self._gave_up(failure, number) from None
                if failure.retry_after_s is not None and failure.retry_after_s > policy.max_retry_after_s:
                    raise ServerError(
                        f"The server at {self.base_url} is busy ({failure.reason}) and asked to wait "
                        f"{failure.retry_after_s:g} s; not waiting that long for one step. Try again later.",
                        status=failure.status,
                        server_message=failure.server_message,
                        body_excerpt=failure.body_excerpt,
                    ) from None
                delay = failure.retry_after_s if failure.retry_after_s is not None else policy.backoff_s(number)
                logger.warning(
                    "%s to %s failed (%s); retrying in %.2f s (attempt %d of %d).",
                    what,
                    self.base_url,
                    failure.reason,
                    delay,
                    number + 1,
                    policy.max_attempts,
                )
                self._sleep(delay)
        raise AssertionError("unreachable: the last attempt either returns or raises")

    def _crashed(self, failure: _Retryable, refused: ServerUnreachableError) -> ServerCrashedError:
        said = f": {failure.server_message}" if failure.server_message else ""
        return ServerCrashedError(
            f"The server at {self.base_url} failed while answering ({failure.reason}{said}) and then stopped "
            f"accepting connections: it crashed or is restarting. The end of its log says why; start it again.",
            status=failure.status,
            server_message=failure.server_message or str(refused),
            body_excerpt=failure.body_excerpt,
        )

    def _gave_up(self, failure: _Retryable, attempts: int) -> ServerError:
        busy = " The server is busy (rate limited); try again later." if failure.status == 429 else ""
        said = f": {failure.server_message}" if failure.server_message else ""
        return ServerError(
            f"The server at {self.base_url} kept failing ({failure.reason}{said}); gave up after "
            f"{attempts} attempt{'s' if attempts != 1 else ''}.{busy}",
            status=failure.status,
            server_message=failure.server_message,
            body_excerpt=failure.body_excerpt,
        )

    # -- models --

    def _choose_model(self, models: tuple[str, ...]) -> str:
        if len(models) == 1:
            return models[0]
        if not models:
            raise AmbiguousModelError(f"The server at {self.base_url} lists no models; is it still loading?")
        raise AmbiguousModelError(
            f"The server at {self.base_url} serves several models ({', '.join(models)}); choose one in the settings."
        )

    def _not_listed_message(self, model: str, models: tuple[str, ...]) -> str:
        served = ", ".join(models) if models else "none"
        return f"The server at {self.base_url} does not serve the model {model!r} (it serves: {served})."


class _Exchange:
    """One request in flight: its socket once connected, and why it was aborted, if it was.

    Aborting shuts the socket down (both ways), which wakes a thread blocked reading it at once and
    tells the server the client is gone. A request aborted before its socket exists is shut down
    the moment it connects (httpx reports that through its `trace` extension).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.reason: str | None = None  # "stopped" or "deadline"
        self.started = time.monotonic()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._socket = sock
            aborted = self.reason is not None
        if aborted:
            _shutdown(sock)

    def abort(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            sock = self._socket
        if sock is not None:
            _shutdown(sock)

    def aborted_error(self, backend: RemoteBackend) -> RemoteBackendError | None:
        if self.reason == "stopped":
            return RequestStoppedError(f"The request to {backend.base_url} was stopped; its connection is closed.")
        if self.reason == "deadline":
            return ServerTimeoutError(
                f"{backend.base_url} did not finish its answer within the {backend.request_deadline_s:g} s "
                f"deadline of one request (it stalled or sent its answer too slowly); giving up on it."
            )
        return None

    def raise_if_aborted(self, backend: RemoteBackend) -> None:
        error = self.aborted_error(backend)
        if error is not None:
            raise error


def _shutdown(sock: socket.socket) -> None:
    with suppress(OSError):  # already closed by the other side
        sock.shutdown(socket.SHUT_RDWR)


def _root_cause(exc: BaseException) -> BaseException | None:
    """The innermost exception httpx wrapped (ConnectionRefusedError, ssl.SSLError...)."""
    seen: set[int] = set()
    cause: BaseException | None = None
    current: BaseException | None = exc.__cause__ or exc.__context__
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cause = current
        current = current.__cause__ or current.__context__
    return cause


def _is_plain_reply_to_tls(error: ssl.SSLError) -> bool:
    """A TLS handshake answered in plain text: the port serves http://, not https://."""
    text = f"{error.reason} {error}".upper()
    return any(marker in text for marker in ("WRONG_VERSION_NUMBER", "RECORD LAYER FAILURE", "HTTP_REQUEST"))


def _with_reasoning(reasoning: str, content: str) -> str:
    """Keep reasoning a server split off (vLLM's --reasoning-parser) in the text, as the model wrote it."""
    return f"<think>{reasoning}</think>{content}" if reasoning else content
