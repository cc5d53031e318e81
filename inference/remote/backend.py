"""RemoteBackend: a TextGenerator over an OpenAI-compatible server, made of the request, transport and answer parts."""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from holodesk.inference.generation import Generation
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest, Message
from holodesk.inference.remote.answers import Answer, parse_completion, read_stream
from holodesk.inference.remote.errors import (
    AmbiguousModelError,
    AuthenticationError,
    MalformedResponseError,
    RemoteBackendError,
    RequestRejectedError,
    Retryable,
    ServerUnreachableError,
)
from holodesk.inference.remote.request import (
    ImageFormat,
    build_payload,
    image_data_url,
    max_tokens_for,
    mentions_structured_output,
    messages_with_images,
    normalize_base_url,
)
from holodesk.inference.remote.transport import RetryPolicy, Transport, excerpt
from holodesk.inference.secrets import find_api_key

logger = logging.getLogger(__name__)

# Encoded screenshots kept for reuse: a step sends at most a few, most of them again the next step.
ENCODED_IMAGES_KEPT = 8
# Guards against a misbehaving server sending an endless body; a 1,000-token answer is a few KB
# as JSON, a few tens of KB as an event stream (one event per token).
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024
# A whole answer, queueing and a long reasoning trace included, within this many seconds.
DEFAULT_REQUEST_DEADLINE_S = 600.0
# vLLM sends no keep-alive comments; proxies that do would otherwise hold a dead stream open forever.
DEFAULT_KEEPALIVE_SILENCE_S = 120.0


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
        if api_key is None:
            lookup = find_api_key(self.base_url)
            key = lookup.key or ""
            self.api_key_source = lookup.source
        else:
            key = api_key.strip()
            self.api_key_source = "given" if key else None
        self._model = model.strip() if model and model.strip() else None
        self._encoded: OrderedDict[int, tuple[Image.Image, str]] = OrderedDict()
        # A batch sends each image once: 0 keeps none (and none of their memory).
        self.encoded_images_kept = encoded_images_kept
        self.temperature = temperature
        self.stream = stream
        self.image_format: ImageFormat = image_format
        self._http = Transport(
            self.base_url,
            api_key=key,
            api_key_source=self.api_key_source,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
            request_deadline_s=request_deadline_s,
            max_answer_bytes=max_answer_bytes,
            keepalive_silence_s=keepalive_silence_s,
            retry=retry or RetryPolicy(),
            sleep=sleep,
        )
        # Turned off for the rest of the session once the server refuses the field.
        self.structured_output = structured_output

    def __repr__(self) -> str:
        # Never the key itself.
        return f"RemoteBackend(base_url={self.base_url!r}, model={self._model!r}, key={self.api_key_source!r})"

    # -- public API --

    def interrupt(self) -> None:
        """Abandon every request in flight now: their sockets are shut down, their threads wake at once."""
        self._http.interrupt()

    def close(self) -> None:
        self._http.close()

    @property
    def model(self) -> str:
        """The model name sent with each request, asking the server once when none was given."""
        if self._model is None:
            self._model = self._choose_model(self.list_models())
        return self._model

    def list_models(self) -> tuple[str, ...]:
        """The model ids the server serves (GET /models), with retries."""
        return self._http.with_retries(self._list_models_once, "listing models")

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
            answer = self._http.with_retries(
                lambda: self._chat_once(self._payload(model, messages, request, with_schema=with_schema)),
                "chat request",
            )
        except RequestRejectedError as exc:
            if not (with_schema and mentions_structured_output(exc.server_message)):
                raise
            self.structured_output = False
            logger.warning(
                "The server at %s refused the structured-output field (%s); "
                "sending requests without a JSON schema from now on.",
                self.base_url,
                exc.server_message,
            )
            with_schema = False
            answer = self._http.with_retries(
                lambda: self._chat_once(self._payload(model, messages, request, with_schema=False)), "chat request"
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
        except Retryable as failure:
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
        with self._http.open("GET", "/models", None) as (exchange, response):
            body = self._http.read_body(response, exchange)
            if response.status_code != 200:
                self._http.raise_for_status(response, body, path="/models")
        parsed = self._http.parse_json(body, "the model list")
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
        if self._http.server_root() is None:
            return None
        messages = messages_with_images(request.messages, [self._data_url(image) for image in request.images])
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "add_generation_prompt": True}
        if request.chat_template_kwargs:
            payload["chat_template_kwargs"] = dict(request.chat_template_kwargs)
        if request.tools:  # the template writes the declared tools into the prompt: they count
            payload["tools"] = list(request.tools)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        with self._http.open("POST", "/tokenize", body, root=True) as (exchange, response):
            raw = self._http.read_body(response, exchange)
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                self._http.raise_for_status(response, raw, path="/tokenize")
        parsed = self._http.parse_json(raw, "a token count")
        count = parsed.get("count") if isinstance(parsed, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            raise self._http.malformed("a token 'count'", raw)
        return count

    # -- requests --

    def _list_models_once(self) -> tuple[str, ...]:
        with self._http.open("GET", "/models", None) as (exchange, response):
            body = self._http.read_body(response, exchange)
            if response.status_code != 200:
                self._http.raise_for_status(response, body, path="/models")
        parsed = self._http.parse_json(body, "the model list")
        data = parsed.get("data") if isinstance(parsed, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) and "id" in item for item in data):
            raise MalformedResponseError(
                f"The server at {self.base_url} answered GET /models without a list of models "
                f"(body starts: {excerpt(body)!r}).",
                status=response.status_code,
                body_excerpt=excerpt(body),
            )
        return tuple(str(item["id"]) for item in data)

    def _chat_once(self, payload: dict[str, Any]) -> Answer:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        sent_at = time.perf_counter()
        with self._http.open("POST", "/chat/completions", body) as (exchange, response):
            content_type = (response.headers.get("Content-Type") or "").lower()
            if response.status_code == 200 and content_type.startswith("text/event-stream"):
                return read_stream(self._http, response, exchange, sent_at)
            raw = self._http.read_body(response, exchange)
            if response.status_code != 200:
                self._http.raise_for_status(response, raw, path="/chat/completions", model=payload["model"])
            # A server that ignores `stream` answers with one JSON body; take it as it is.
            return parse_completion(self._http, raw)

    def _payload(
        self, model: str, messages: list[Message], request: ChatRequest, *, with_schema: bool
    ) -> dict[str, Any]:
        return build_payload(
            model, messages, request, with_schema=with_schema, temperature=self.temperature, stream=self.stream
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
