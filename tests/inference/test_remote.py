"""RemoteBackend against a real local HTTP server that checks requests the way vLLM does."""

from __future__ import annotations

import email.utils
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import keyring
import keyring.backends.null
import pytest
from PIL import Image

from bench.rigs.fake_openai_server import (
    DEFAULT_MODEL,
    Completion,
    DropConnection,
    ErrorReply,
    FakeOpenAIServer,
    RawReply,
    SlowReply,
    StreamError,
    closed_port,
)
from holodesk.inference.errors import BackendError
from holodesk.inference.generation import TextGenerator
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.remote import (
    AmbiguousModelError,
    AuthenticationError,
    MalformedResponseError,
    ModelNotFoundError,
    RemoteBackend,
    RequestRejectedError,
    RetryPolicy,
    ServerError,
    ServerTimeoutError,
    ServerUnreachableError,
    normalize_base_url,
)

STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"note": {"type": "string"}, "action": {"type": "object"}},
    "required": ["action"],
}
RED, GREEN = (255, 0, 0), (0, 255, 0)


@pytest.fixture(autouse=True)
def no_ambient_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keys come only from what each test sets: no env vars, an empty keyring."""
    monkeypatch.delenv("HOLODESK_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.null.Keyring())
    yield
    keyring.set_keyring(previous)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


class SleepRecorder:
    """Stands in for time.sleep: records the backoff instead of waiting it."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_backend(server: FakeOpenAIServer, **overrides: Any) -> RemoteBackend:
    options: dict[str, Any] = {
        "model": DEFAULT_MODEL,
        "api_key": "",
        "read_timeout_s": 5.0,
        "retry": RetryPolicy(max_attempts=4, backoff_base_s=0.01, backoff_max_s=1.0, max_retry_after_s=30.0),
        "sleep": SleepRecorder(),
    }
    options.update(overrides)
    base_url = options.pop("base_url", server.base_url)
    return RemoteBackend(base_url, **options)


def two_image_request(**overrides: Any) -> ChatRequest:
    options: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": "You control a desktop."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Before:"},
                    {"type": "image"},
                    {"type": "text", "text": "Now:"},
                    {"type": "image"},
                    {"type": "text", "text": "Task: open the mail."},
                ],
            },
        ],
        "images": [Image.new("RGB", (64, 48), RED), Image.new("RGB", (80, 40), GREEN)],
        "max_new_tokens": 256,
        "response_schema": STEP_SCHEMA,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    options.update(overrides)
    return ChatRequest(**options)


def text_request() -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "Where is the OK button?"}], max_new_tokens=32)


# --- what goes over the wire --------------------------------------------------------------------


def test_sends_the_request_vllm_expects(server: FakeOpenAIServer) -> None:
    server.api_key = "sk-test"
    server.queue(Completion(text='{"action": {"name": "wait"}}', prompt_tokens=2345, completion_tokens=12))
    backend = make_backend(server, api_key="sk-test", stream=False)
    assert isinstance(backend, TextGenerator)

    generation = backend.generate(two_image_request())

    assert server.problems == []
    [received] = server.chat_requests
    assert received.method == "POST"
    assert received.headers["authorization"] == "Bearer sk-test"
    assert received.headers["content-type"] == "application/json"
    body = received.body
    assert body["model"] == DEFAULT_MODEL
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.0
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "holodesk_answer", "schema": STEP_SCHEMA},
    }
    assert "stream" not in body
    # Placeholders became data URLs in place, text parts kept around them, order preserved.
    kinds = [part["type"] for part in body["messages"][1]["content"]]
    assert kinds == ["text", "image_url", "text", "image_url", "text"]
    assert all(url.startswith("data:image/png;base64,") for url in received.image_urls())
    first, second = received.images()
    assert (first.size, first.convert("RGB").getpixel((0, 0))) == ((64, 48), RED)
    assert (second.size, second.convert("RGB").getpixel((0, 0))) == ((80, 40), GREEN)

    assert generation.text == '{"action": {"name": "wait"}}'
    timings = generation.timings
    assert (timings.tokens_in, timings.tokens_out) == (2345, 12)
    assert timings.preprocess_s > 0
    assert timings.total_s >= timings.preprocess_s
    # Without streaming, prefill and decode cannot be told apart.
    assert (timings.prefill_s, timings.decode_s) == (0.0, 0.0)


def test_the_request_object_is_not_modified(server: FakeOpenAIServer) -> None:
    request = two_image_request()
    make_backend(server).generate(request)
    assert request.messages[1]["content"][1] == {"type": "image"}


def test_an_image_sent_again_is_encoded_once(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import holodesk.inference.remote.backend as remote

    encoded: list[tuple[int, int]] = []
    real = remote.image_data_url

    def counting(image: Image.Image, image_format: Any = "png") -> str:
        encoded.append(image.size)
        return real(image, image_format)

    monkeypatch.setattr(remote, "image_data_url", counting)
    backend = make_backend(server)
    first = two_image_request()
    backend.generate(first)
    # The next step re-sends the second screenshot (same object) and a new one.
    newer = Image.new("RGB", (32, 32), RED)
    backend.generate(two_image_request(images=[first.images[1], newer]))
    assert encoded == [(64, 48), (80, 40), (32, 32)]
    assert server.problems == []
    again = server.chat_requests[1].images()
    assert (again[0].size, again[0].convert("RGB").getpixel((0, 0))) == ((80, 40), GREEN)
    # An equal but different image object is encoded afresh (identity, not equality, is the key).
    backend.generate(two_image_request(images=[newer.copy(), newer]))
    assert encoded[-1] == (32, 32) and len(encoded) == 4


def test_jpeg_images_when_asked(server: FakeOpenAIServer) -> None:
    make_backend(server, image_format="jpeg").generate(two_image_request())
    assert server.problems == []
    urls = server.chat_requests[0].image_urls()
    assert len(urls) == 2 and all(url.startswith("data:image/jpeg;base64,") for url in urls)
    assert [image.format for image in server.chat_requests[0].images()] == ["JPEG", "JPEG"]


def test_the_server_root_url_gets_v1(server: FakeOpenAIServer) -> None:
    backend = make_backend(server, base_url=server.root_url + "/")
    assert backend.base_url == server.base_url
    assert backend.generate(text_request()).text
    assert server.problems == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://gpu:8000", "http://gpu:8000/v1"),
        ("gpu:8000/", "http://gpu:8000/v1"),
        ("https://gpu.example/v1/", "https://gpu.example/v1"),
        ("https://proxy.example/openai/v1", "https://proxy.example/openai/v1"),
    ],
)
def test_normalize_base_url(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


def test_normalize_base_url_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="http"):
        normalize_base_url("ftp://gpu/v1")


def test_the_key_comes_from_the_environment(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.api_key = "sk-env"
    monkeypatch.setenv("HOLODESK_API_KEY", "sk-env")
    backend = make_backend(server, api_key=None)
    backend.generate(text_request())
    assert server.chat_requests[0].headers["authorization"] == "Bearer sk-env"
    assert backend.api_key_source == "HOLODESK_API_KEY"
    assert "sk-env" not in repr(backend)


# --- streaming ----------------------------------------------------------------------------------


def test_streaming_splits_prefill_and_decode(server: FakeOpenAIServer) -> None:
    text = '{"action": {"name": "click", "x": 500, "y": 250}}'
    server.queue(
        Completion(text=text, first_token_delay_s=0.3, token_delay_s=0.02, chunk_chars=5, completion_tokens=15)
    )
    generation = make_backend(server).generate(two_image_request())

    assert server.problems == []
    body = server.chat_requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert generation.text == text
    timings = generation.timings
    assert (timings.tokens_in, timings.tokens_out) == (1234, 15)
    pieces = -(-len(text) // 5)
    assert 0.3 <= timings.prefill_s < 2.0
    assert 0.02 * (pieces - 1) * 0.8 <= timings.decode_s < 2.0
    assert timings.prefill_s + timings.decode_s <= timings.total_s


def test_split_off_reasoning_is_kept_in_the_text(server: FakeOpenAIServer) -> None:
    server.queue(Completion(text='{"action": "wait"}', reasoning="The page is loading."))
    generation = make_backend(server).generate(text_request())
    assert generation.text == '<think>The page is loading.</think>{"action": "wait"}'


def test_a_server_that_ignores_stream_is_understood(server: FakeOpenAIServer) -> None:
    completion = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    server.queue(RawReply(json.dumps(completion).encode()))
    generation = make_backend(server).generate(text_request())
    assert (generation.text, generation.timings.tokens_in, generation.timings.tokens_out) == ("ok", 3, 1)


BOUNDED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string", "maxLength": 100},
        "x": {"type": "integer", "minimum": 0, "maximum": 1000},
    },
    "required": ["thought", "x"],
    "additionalProperties": False,
}


def test_a_bounded_schema_gets_the_tokens_its_longest_answer_needs(server: FakeOpenAIServer) -> None:
    """Constrained decoding can end the answer only where the schema allows: max_tokens must reach there."""
    from holodesk.inference.profiles.schema_bounds import longest_answer_bytes

    request = two_image_request(response_schema=BOUNDED_SCHEMA, max_new_tokens=32)
    server.queue(Completion(), Completion(), Completion())
    make_backend(server).generate(request)
    make_backend(server, structured_output=False).generate(request)
    make_backend(server).generate(two_image_request(max_new_tokens=32))  # STEP_SCHEMA has no bounds
    longest = len('{"thought":"",') + 4 * 100 + len('"x":1000}')
    assert longest_answer_bytes(BOUNDED_SCHEMA) == longest
    assert [r.body["max_tokens"] for r in server.chat_requests] == [longest, 32, 32]


def test_a_cut_answer_is_logged(server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    server.queue(Completion(text='{"action": {"na', finish_reason="length"))
    with caplog.at_level(logging.WARNING, logger="holodesk.inference.remote"):
        make_backend(server).generate(text_request())
    assert "max_tokens=32" in caplog.text


# --- retries ------------------------------------------------------------------------------------


def test_retries_429_and_5xx_with_backoff_then_succeeds(server: FakeOpenAIServer) -> None:
    server.queue(
        ErrorReply(429, "Too many requests", "RateLimitError", headers={"Retry-After": "2"}),
        ErrorReply(500, "EngineCore encountered an issue.", "InternalServerError"),
        ErrorReply(503, "Service Unavailable", "ServiceUnavailableError"),
        Completion(text="done"),
    )
    sleep = SleepRecorder()
    generation = make_backend(server, sleep=sleep).generate(text_request())

    assert generation.text == "done"
    assert len(server.chat_requests) == 4
    # Retry-After honoured for the 429, then exponential backoff: base * 2**(n-1) for attempts 2 and 3.
    assert sleep.calls == [2.0, 0.02, 0.04]


def test_retry_after_as_an_http_date(server: FakeOpenAIServer) -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    server.queue(ErrorReply(503, "loading", "ServiceUnavailableError", headers={"Retry-After": when}))
    sleep = SleepRecorder()
    make_backend(server, sleep=sleep).generate(text_request())
    assert len(sleep.calls) == 1 and 3.0 <= sleep.calls[0] <= 5.0


def test_gives_up_after_the_bound_with_a_clear_error(server: FakeOpenAIServer) -> None:
    server.default_reply = ErrorReply(503, "Service Unavailable", "ServiceUnavailableError")
    sleep = SleepRecorder()
    with pytest.raises(ServerError) as caught:
        make_backend(server, sleep=sleep).generate(text_request())
    assert len(server.chat_requests) == 4
    assert len(sleep.calls) == 3
    assert caught.value.status == 503
    message = str(caught.value)
    assert "4 attempts" in message and "HTTP 503" in message and server.base_url in message


def test_a_long_retry_after_is_not_waited_for(server: FakeOpenAIServer) -> None:
    server.default_reply = ErrorReply(429, "Too many requests", "RateLimitError", headers={"Retry-After": "3600"})
    sleep = SleepRecorder()
    with pytest.raises(ServerError, match="3600 s") as caught:
        make_backend(server, sleep=sleep).generate(text_request())
    assert caught.value.status == 429
    assert len(server.chat_requests) == 1 and sleep.calls == []


def test_a_reset_connection_is_retried(server: FakeOpenAIServer) -> None:
    server.queue(DropConnection(), Completion(text="after reset"))
    assert make_backend(server, stream=False).generate(text_request()).text == "after reset"
    assert len(server.chat_requests) == 2


@pytest.mark.parametrize(
    "broken",
    [Completion(text="abcdefgh", drop_after_chunks=1), Completion(text="abcdefgh", end_without_done=True)],
    ids=["reset-mid-stream", "no-done"],
)
def test_a_cut_stream_is_retried(server: FakeOpenAIServer, broken: Completion) -> None:
    server.queue(broken, Completion(text="complete answer"))
    assert make_backend(server).generate(text_request()).text == "complete answer"
    assert len(server.chat_requests) == 2


def test_an_engine_error_inside_the_stream_is_retried(server: FakeOpenAIServer) -> None:
    server.queue(StreamError(status=500), Completion(text="second try"))
    assert make_backend(server).generate(text_request()).text == "second try"
    assert len(server.chat_requests) == 2


def test_a_request_error_inside_the_stream_is_not_retried(server: FakeOpenAIServer) -> None:
    server.default_reply = StreamError(status=400, message="bad token", error_type="BadRequestError")
    with pytest.raises(RequestRejectedError, match="bad token"):
        make_backend(server).generate(text_request())
    assert len(server.chat_requests) == 1


# --- errors a user can act on -------------------------------------------------------------------


def test_a_wrong_key_names_where_keys_come_from(server: FakeOpenAIServer) -> None:
    server.api_key = "sk-right"
    sleep = SleepRecorder()
    with pytest.raises(AuthenticationError) as caught:
        make_backend(server, api_key="sk-wrong", sleep=sleep).generate(text_request())
    message = str(caught.value)
    assert "refused the API key" in message
    assert "HOLODESK_API_KEY" in message and "keyring" in message and "'127.0.0.1'" in message
    assert "sk-wrong" not in message
    assert caught.value.status == 401 and caught.value.server_message == "Unauthorized"
    assert len(server.requests) == 1 and sleep.calls == []


def test_a_missing_key_says_none_was_found(server: FakeOpenAIServer) -> None:
    server.api_key = "sk-right"
    with pytest.raises(AuthenticationError, match="none was found"):
        make_backend(server, api_key="").generate(text_request())


def test_an_unknown_model_names_the_model_and_the_url(server: FakeOpenAIServer) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        make_backend(server, model="Hcompany/Holo9").generate(text_request())
    message = str(caught.value)
    assert "'Hcompany/Holo9'" in message and server.base_url in message
    assert "The model `Hcompany/Holo9` does not exist." in message
    assert caught.value.status == 404
    assert len(server.chat_requests) == 1


def test_connection_refused_names_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    sleep = SleepRecorder()
    backend = RemoteBackend(url, model=DEFAULT_MODEL, api_key="", sleep=sleep)
    started = time.perf_counter()
    with pytest.raises(ServerUnreachableError) as caught:
        backend.generate(text_request())
    assert url in str(caught.value) and "refused" in str(caught.value)
    assert time.perf_counter() - started < 2.0
    assert sleep.calls == []


def test_a_slow_answer_hits_the_read_timeout(server: FakeOpenAIServer) -> None:
    server.queue(SlowReply(delay_s=5.0))
    backend = make_backend(server, stream=False, read_timeout_s=0.3)
    started = time.perf_counter()
    with pytest.raises(ServerTimeoutError, match=r"0\.3 s"):
        backend.generate(text_request())
    assert time.perf_counter() - started < 2.0
    assert len(server.chat_requests) == 1


def test_a_stalled_stream_hits_the_read_timeout(server: FakeOpenAIServer) -> None:
    server.queue(Completion(text="abcdefgh", first_token_delay_s=5.0))
    started = time.perf_counter()
    with pytest.raises(ServerTimeoutError):
        make_backend(server, read_timeout_s=0.3).generate(text_request())
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("reply", "stream", "shown"),
    [
        (RawReply(b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"), False, "502 Bad Gateway"),
        (RawReply(b'{"choices": [{"mess'), False, '{"choices": [{"mess'),
        (RawReply(b'{"id": "chatcmpl-1", "choices": []}'), False, "chatcmpl-1"),
        (RawReply(b'{"choices": [{"message": {"content": 42}}]}'), False, "42"),
        (RawReply(b"data: {not json}\n\n", content_type="text/event-stream"), True, "{not json}"),
        (RawReply(b'data: {"id": "x"}\n\n', content_type="text/event-stream"), True, '{"id": "x"}'),
    ],
    ids=["html", "truncated-json", "no-choices", "content-not-text", "sse-not-json", "sse-no-choices"],
)
def test_malformed_bodies_keep_an_excerpt(server: FakeOpenAIServer, reply: RawReply, stream: bool, shown: str) -> None:
    server.queue(reply)
    with pytest.raises(MalformedResponseError) as caught:
        make_backend(server, stream=stream).generate(text_request())
    assert shown in caught.value.body_excerpt
    assert shown in str(caught.value)
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize("shape", ["nested", "flat"])
def test_an_unrelated_400_is_reported_not_retried(server: FakeOpenAIServer, shape: str) -> None:
    refusal = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."
    server.default_reply = ErrorReply(400, refusal, shape=shape)  # type: ignore[arg-type]
    backend = make_backend(server)
    with pytest.raises(RequestRejectedError) as caught:
        backend.generate(two_image_request())
    assert caught.value.server_message == refusal
    assert "maximum context length" in str(caught.value)
    assert len(server.chat_requests) == 1
    assert backend.structured_output is True


# --- structured output --------------------------------------------------------------------------


def test_a_refused_schema_is_dropped_once_and_remembered(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.reject_structured_output = True
    backend = make_backend(server)
    with caplog.at_level(logging.WARNING, logger="holodesk.inference.remote"):
        first = backend.generate(two_image_request())
        second = backend.generate(two_image_request())

    assert first.text and second.text
    sent = [request.body for request in server.chat_requests]
    assert ["response_format" in body for body in sent] == [True, False, False]
    assert "without a JSON schema" in caplog.text
    assert backend.structured_output is False
    assert server.problems == []


def test_no_schema_field_without_a_schema(server: FakeOpenAIServer) -> None:
    make_backend(server).generate(text_request())
    assert "response_format" not in server.chat_requests[0].body


# --- models -------------------------------------------------------------------------------------


def test_the_single_served_model_is_discovered_once(server: FakeOpenAIServer) -> None:
    backend = make_backend(server, model=None)
    backend.generate(text_request())
    backend.generate(text_request())
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
    ]
    assert server.chat_requests[0].body["model"] == DEFAULT_MODEL


def test_several_models_and_none_chosen_is_a_clear_error() -> None:
    with FakeOpenAIServer(models=("Hcompany/Holotron-12B", "Hcompany/Holo1.5-7B")) as server:
        with pytest.raises(AmbiguousModelError) as caught:
            make_backend(server, model=None).generate(text_request())
        assert "Hcompany/Holotron-12B, Hcompany/Holo1.5-7B" in str(caught.value)
        assert server.chat_requests == []


def test_a_malformed_model_list_is_reported() -> None:
    with (
        FakeOpenAIServer(models_reply=RawReply(b'{"models": ["a"]}')) as server,
        pytest.raises(MalformedResponseError, match="list of models"),
    ):
        make_backend(server, model=None).generate(text_request())


# --- check_server -------------------------------------------------------------------------------


def test_check_server_all_good(server: FakeOpenAIServer) -> None:
    server.api_key = "sk-test"
    check = make_backend(server, api_key="sk-test").check_server()
    assert check.ok and check.reachable and check.authenticated and check.model_listed
    assert check.models == (DEFAULT_MODEL,) and check.model == DEFAULT_MODEL
    assert check.api_key_source == "given"


def test_check_server_bad_key(server: FakeOpenAIServer) -> None:
    server.api_key = "sk-test"
    check = make_backend(server, api_key="sk-nope").check_server()
    assert check.reachable and check.authenticated is False and not check.ok
    assert check.problem is not None and "API key" in check.problem


def test_check_server_model_not_listed(server: FakeOpenAIServer) -> None:
    check = make_backend(server, model="Hcompany/Holo9").check_server()
    assert check.reachable and check.authenticated and not check.model_listed
    assert check.problem is not None and DEFAULT_MODEL in check.problem and "Hcompany/Holo9" in check.problem


def test_check_server_unreachable() -> None:
    check = RemoteBackend(f"http://127.0.0.1:{closed_port()}", api_key="").check_server()
    assert not check.reachable and check.authenticated is None and not check.ok
    assert check.problem is not None and "refused" in check.problem


def test_check_server_wrong_path(server: FakeOpenAIServer) -> None:
    check = make_backend(server, base_url=server.root_url + "/api").check_server()
    assert check.reachable and check.authenticated is None and not check.ok
    assert check.problem is not None and "/api/models does not exist" in check.problem and "/v1" in check.problem


def test_check_server_a_busy_server(server: FakeOpenAIServer) -> None:
    server.models_reply = ErrorReply(503, "Service Unavailable", "ServiceUnavailableError")
    check = make_backend(server).check_server()
    assert check.reachable and not check.ok
    assert check.problem is not None and "HTTP 503" in check.problem
    assert len(server.requests) == 1  # a doctor check does not retry


def test_check_server_chooses_the_only_model(server: FakeOpenAIServer) -> None:
    check = make_backend(server, model=None).check_server()
    assert check.ok and check.model == DEFAULT_MODEL


def test_errors_are_backend_errors() -> None:
    for error in (AuthenticationError, ModelNotFoundError, ServerUnreachableError, MalformedResponseError, ServerError):
        assert issubclass(error, BackendError)


# --- the fake server itself checks what vLLM checks ---------------------------------------------


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": [{"type": "image"}]}]}, "unsupported"),
        (
            {
                "model": DEFAULT_MODEL,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
                    }
                ],
            },
            "not a decodable image",
        ),
        (
            {"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream_options": {}},
            "stream=True",
        ),
        (
            {
                "model": DEFAULT_MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "response_format": {"type": "json_schema", "json_schema": {"schema": {}}},
            },
            "name",
        ),
    ],
    ids=["placeholder-left", "bad-image", "stream-options-without-stream", "schema-without-name"],
)
def test_the_fake_server_rejects_what_vllm_rejects(
    server: FakeOpenAIServer, body: dict[str, Any], complaint: str
) -> None:
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 400
    assert complaint in json.loads(caught.value.read())["error"]["message"]
    assert len(server.problems) == 1 and complaint in server.problems[0]
