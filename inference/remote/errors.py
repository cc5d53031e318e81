"""The remote backend's errors: each says in words what happened and, where there is one, the fix."""

from __future__ import annotations

from holodesk.inference.errors import BackendError


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


class Retryable(Exception):
    """An attempt failed in a way that may clear up (429, 5xx, dropped connection); never leaves this package."""

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
