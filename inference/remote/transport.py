"""HTTP to an OpenAI-compatible server: sending, reading within bounds, status codes, retries, stopping.

One new connection per request (httpx, no keep-alive), so a dropped connection never poisons the
next step; HTTP(S)_PROXY is not used. Every request is bounded: a total deadline from the first
byte sent to the last received, a bound on the bytes of one answer, and on a stream that sends only
keep-alive comments. `interrupt()` shuts the socket down at once, which wakes the thread blocked
reading it and releases the server. Retries: 429, most 5xx and dropped connections, with
exponential backoff or the server's Retry-After, a bounded number of times; a refused connection,
a timeout or a 4xx is not retried (waiting would not change the answer and the user is waiting).
"""

from __future__ import annotations

import email.utils
import json
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import httpx

from holodesk.inference.remote.errors import (
    AnswerTooLongError,
    AuthenticationError,
    ContextLengthError,
    MalformedResponseError,
    ModelNotFoundError,
    RemoteBackendError,
    RequestRejectedError,
    RequestStoppedError,
    Retryable,
    ServerCrashedError,
    ServerError,
    ServerTimeoutError,
    ServerUnreachableError,
    TooManyImagesError,
)
from holodesk.inference.secrets import where_keys_come_from

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Longest body excerpt kept in an error message: enough to recognise an HTML error page or a message.
_EXCERPT_CHARS = 300
_USER_AGENT = "holodesk-remote/0.1"


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


def excerpt(body: bytes | str) -> str:
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "..."


def server_message(body: bytes) -> str:
    """What the server said in an error body, whatever shape it used.

    vLLM sends `{"error": {"message": ...}}` (flat `{"object": "error", "message": ...}` before
    0.10), its --api-key check sends `{"error": "Unauthorized"}`, FastAPI sends `{"detail": ...}`.
    """
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to read: its start is all we say
        return excerpt(body)
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return excerpt(error["message"])
        if isinstance(error, str):
            return excerpt(error)
        if isinstance(parsed.get("message"), str):
            return excerpt(parsed["message"])
        if "detail" in parsed:
            detail = parsed["detail"]
            return excerpt(detail if isinstance(detail, str) else json.dumps(detail))
    return excerpt(body)


def retry_after_s(value: str | None) -> float | None:
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


def is_retryable_status(status: int) -> bool:
    # 501 and 505 say the server will never do this; retrying cannot help.
    return status in (408, 429) or (500 <= status < 600 and status not in (501, 505))


class Transport:
    """HTTP to one OpenAI-compatible server: requests sent and read within their bounds, failures in
    words, retries of what may clear up, and `interrupt()` for every request in flight."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        api_key_source: str | None,
        connect_timeout_s: float,
        read_timeout_s: float,
        request_deadline_s: float,
        max_answer_bytes: int,
        keepalive_silence_s: float,
        retry: RetryPolicy,
        sleep: Callable[[float], None],
    ) -> None:
        self.base_url = base_url
        parts = urlsplit(base_url)
        self._host = parts.hostname or ""
        self._api_key = api_key
        self.api_key_source = api_key_source
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.request_deadline_s = request_deadline_s
        self.max_answer_bytes = max_answer_bytes
        self.keepalive_silence_s = keepalive_silence_s
        self.retry = retry
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
            # No keep-alive: a fresh connection per request (see the package docstring).
            limits=httpx.Limits(max_keepalive_connections=0),
            trust_env=False,
            verify=ssl.create_default_context(),
            follow_redirects=False,
        )
        self._active: set[Exchange] = set()
        self._active_lock = threading.Lock()
        self._sleep = sleep

    @property
    def has_key(self) -> bool:
        return bool(self._api_key)

    def interrupt(self) -> None:
        """Abandon every request in flight now: their sockets are shut down, their threads wake at once."""
        with self._active_lock:
            active = list(self._active)
        for exchange in active:
            exchange.abort("stopped")

    def close(self) -> None:
        self.interrupt()
        self._client.close()

    def server_root(self) -> str | None:
        """The server's root when the API root is the usual <root>/v1 (vLLM's /tokenize lives there)."""
        return self.base_url.removesuffix("/v1") if self.base_url.endswith("/v1") else None

    @contextmanager
    def open(
        self, method: str, path: str, body: bytes | None, *, root: bool = False
    ) -> Iterator[tuple[Exchange, httpx.Response]]:
        """Send the request and yield the response with its headers read; every failure in words.

        The exchange is registered for `interrupt()` and watched by a deadline timer for as long as
        the caller reads the response; leaving the block closes the connection.
        """
        headers = {"Accept": "application/json, text/event-stream", "User-Agent": _USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        exchange = Exchange()
        deadline = threading.Timer(self.request_deadline_s, exchange.abort, ("deadline",))
        deadline.daemon = True
        with self._active_lock:
            self._active.add(exchange)
        deadline.start()
        try:
            request = self._client.build_request(
                method,
                (self.server_root() or self.base_url if root else self.base_url) + path,
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

    def _transport_error(self, exc: httpx.HTTPError, exchange: Exchange, when: str) -> Exception:
        """What an httpx failure means for the user, or a Retryable when it may clear up."""
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
                return Retryable(reason=f"the connection was dropped ({type(cause or exc).__name__})")
            return MalformedResponseError(
                f"The server at {self.base_url} did not answer with valid HTTP ({exc}); "
                f"if it expects TLS, use https:// in the URL."
            )
        if isinstance(exc, httpx.TransportError):
            return Retryable(reason=f"the connection was dropped {when} ({type(cause or exc).__name__})")
        return MalformedResponseError(f"The request to {self.base_url} failed: {exc}.")

    def chunks(self, response: httpx.Response, exchange: Exchange) -> Iterator[bytes]:
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

    def read_body(self, response: httpx.Response, exchange: Exchange) -> bytes:
        return b"".join(self.chunks(response, exchange))

    def _timeout_error(self, url: str) -> ServerTimeoutError:
        return ServerTimeoutError(
            f"{url} accepted the request but sent nothing for {self.read_timeout_s:g} s "
            f"(the server may be overloaded; raise the read timeout for long answers)."
        )

    def parse_json(self, body: bytes | str, what: str) -> Any:
        """`body` decoded as JSON; MalformedResponseError, in words, when it is not JSON or is nested too deeply."""
        try:
            return json.loads(body)
        except RecursionError:
            raise self.nested_too_deeply(what, body) from None
        except ValueError:
            raise MalformedResponseError(
                f"The server at {self.base_url} sent {what} that is not JSON (body starts: {excerpt(body)!r}).",
                body_excerpt=excerpt(body),
            ) from None

    def nested_too_deeply(self, what: str, body: bytes | str) -> MalformedResponseError:
        """Python's JSON reader gives up near its recursion limit (about a thousand levels of arrays and objects
        inside each other); an OpenAI-compatible answer is a handful of levels deep, so this is no answer."""
        return MalformedResponseError(
            f"The server at {self.base_url} sent {what} nested deeper than Holodesk reads (its JSON reader stops "
            f"near {sys.getrecursionlimit()} levels of arrays or objects inside each other; an answer needs a "
            f"few): nothing of it was used (body starts: {excerpt(body)!r}).",
            body_excerpt=excerpt(body),
        )

    def malformed(self, what: str, body: bytes | str) -> MalformedResponseError:
        return MalformedResponseError(
            f"The server at {self.base_url} answered without {what}; is it an OpenAI-compatible "
            f"server? (body starts: {excerpt(body)!r})",
            body_excerpt=excerpt(body),
        )

    def raise_for_status(
        self, response: httpx.Response, body: bytes, *, path: str, model: str | None = None
    ) -> NoReturn:
        status = response.status_code
        message = server_message(body)
        start = excerpt(body)
        said = f"HTTP {status}: {message}" if message else f"HTTP {status}"
        details: dict[str, Any] = {"status": status, "server_message": message, "body_excerpt": start}
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
        if is_retryable_status(status):
            raise Retryable(
                reason=said,
                status=status,
                retry_after_s=retry_after_s(response.headers.get("Retry-After")),
                server_message=message,
                body_excerpt=start,
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

    def with_retries(self, attempt: Callable[[], T], what: str) -> T:
        policy = self.retry
        # The last failure that came from the server itself: if the next attempt finds nothing
        # listening, the server died answering, and that failure says how.
        answered: Retryable | None = None
        for number in range(1, policy.max_attempts + 1):
            try:
                return attempt()
            except ServerUnreachableError as exc:
                if answered is None:
                    raise
                raise self._crashed(answered, exc) from None
            except Retryable as failure:
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

    def _crashed(self, failure: Retryable, refused: ServerUnreachableError) -> ServerCrashedError:
        said = f": {failure.server_message}" if failure.server_message else ""
        return ServerCrashedError(
            f"The server at {self.base_url} failed while answering ({failure.reason}{said}) and then stopped "
            f"accepting connections: it crashed or is restarting. The end of its log says why; start it again.",
            status=failure.status,
            server_message=failure.server_message or str(refused),
            body_excerpt=failure.body_excerpt,
        )

    def _gave_up(self, failure: Retryable, attempts: int) -> ServerError:
        busy = " The server is busy (rate limited); try again later." if failure.status == 429 else ""
        said = f": {failure.server_message}" if failure.server_message else ""
        return ServerError(
            f"The server at {self.base_url} kept failing ({failure.reason}{said}); gave up after "
            f"{attempts} attempt{'s' if attempts != 1 else ''}.{busy}",
            status=failure.status,
            server_message=failure.server_message,
            body_excerpt=failure.body_excerpt,
        )


class Exchange:
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

    def aborted_error(self, backend: Transport) -> RemoteBackendError | None:
        if self.reason == "stopped":
            return RequestStoppedError(f"The request to {backend.base_url} was stopped; its connection is closed.")
        if self.reason == "deadline":
            return ServerTimeoutError(
                f"{backend.base_url} did not finish its answer within the {backend.request_deadline_s:g} s "
                f"deadline of one request (it stalled or sent its answer too slowly); giving up on it."
            )
        return None

    def raise_if_aborted(self, backend: Transport) -> None:
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
