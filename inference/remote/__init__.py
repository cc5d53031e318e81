"""The HTTP backend: runs a ChatRequest on an OpenAI-compatible server (vLLM serving Holotron-12B, Holo3...).

The parts, one concern each:

- `request`: the API root, images as data URLs, messages, the token budget and the JSON payload.
  Images go as PNG data URLs (lossless, so the model sees the same pixels the in-process backend
  would; UI screenshots are also smaller as PNG than as JPEG q90); `image_format="jpeg"` trades that
  for a smaller body. Structured output uses the OpenAI field `response_format: {"type":
  "json_schema", ...}`, which vLLM has accepted since 0.6 (its `guided_json` extra field was removed
  in 0.12); a 400 that names the field is remembered and the request is sent once more without it.
- `transport`: HTTP through httpx, one new connection per request, every request bounded (a total
  deadline, a bound on the bytes of one answer and on keep-alive-only silence), retries of 429, most
  5xx and dropped connections, `interrupt()` (a stop) shutting the socket down at once.
- `answers`: one JSON body or a server-sent event stream (`stream_options.include_usage`, so the
  time to the first token and the decode time can be told apart) read into text and timings.
- `errors`: what went wrong, in words that name the fix.
- `backend`: `RemoteBackend`, which composes them.
"""

from holodesk.inference.remote.backend import (
    DEFAULT_KEEPALIVE_SILENCE_S,
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_REQUEST_DEADLINE_S,
    ENCODED_IMAGES_KEPT,
    RemoteBackend,
    ServerCheck,
)
from holodesk.inference.remote.errors import (
    AmbiguousModelError,
    AnswerTooLongError,
    AuthenticationError,
    ContextLengthError,
    MalformedResponseError,
    ModelNotFoundError,
    RemoteBackendError,
    RequestRejectedError,
    RequestStoppedError,
    ServerCrashedError,
    ServerError,
    ServerTimeoutError,
    ServerUnreachableError,
    TooManyImagesError,
)
from holodesk.inference.remote.request import (
    ImageFormat,
    image_data_url,
    max_tokens_for,
    messages_with_images,
    normalize_base_url,
)
from holodesk.inference.remote.transport import RetryPolicy

__all__ = [
    "DEFAULT_KEEPALIVE_SILENCE_S",
    "DEFAULT_MAX_ANSWER_BYTES",
    "DEFAULT_REQUEST_DEADLINE_S",
    "ENCODED_IMAGES_KEPT",
    "AmbiguousModelError",
    "AnswerTooLongError",
    "AuthenticationError",
    "ContextLengthError",
    "ImageFormat",
    "MalformedResponseError",
    "ModelNotFoundError",
    "RemoteBackend",
    "RemoteBackendError",
    "RequestRejectedError",
    "RequestStoppedError",
    "RetryPolicy",
    "ServerCheck",
    "ServerCrashedError",
    "ServerError",
    "ServerTimeoutError",
    "ServerUnreachableError",
    "TooManyImagesError",
    "image_data_url",
    "max_tokens_for",
    "messages_with_images",
    "normalize_base_url",
]
