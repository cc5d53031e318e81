"""Server failures each in their own words, on the loopback fake (the vLLM tier shows them on the real server).

A server that answered and then died is a crash, never "nothing is listening"; a request too long for
the context or with too many images names the server flag that would let it through.
"""

from __future__ import annotations

import pytest

from bench.rigs.fake_openai_server import Completion, ErrorReply, FakeOpenAIServer, StreamError
from holodesk.app.common.backend_problems import in_words
from holodesk.inference.remote import (
    ContextLengthError,
    ServerCrashedError,
    ServerError,
    ServerUnreachableError,
    TooManyImagesError,
)
from tests.inference.test_remote import make_backend, text_request, two_image_request

# vLLM 0.32's own words, as the tier's real server sends them.
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
TOO_LONG = (
    "This model's maximum context length is 32768 tokens. However, your request has 41234 input tokens. "
    "Please reduce the length of the input messages."
)
TOO_MANY_IMAGES = "At most 4 image(s) may be provided in one prompt."


def test_an_error_event_and_then_nothing_listening_is_a_crash_in_the_servers_words() -> None:
    server = FakeOpenAIServer().start()
    server.queue(StreamError(status=500, message=ENGINE_DEAD))
    # Between the attempts the server goes away, as vLLM's API server exits when its engine dies.
    backend = make_backend(server, sleep=lambda _seconds: server.stop())
    with pytest.raises(ServerCrashedError) as caught:
        backend.generate(text_request())
    message = str(caught.value)
    assert ENGINE_DEAD in message and "HTTP 500 inside the stream" in message
    assert "stopped accepting connections" in message and "Nothing is listening" not in message
    assert in_words(caught.value) == message  # no "start the server" advice pasted on: it says what to do


def test_a_stream_dropped_mid_answer_and_then_nothing_listening_is_a_crash() -> None:
    server = FakeOpenAIServer().start()
    server.queue(Completion(text='{"note": "x", "thought": "a long one"}', chunk_chars=2, drop_after_chunks=3))
    backend = make_backend(server, sleep=lambda _seconds: server.stop())
    with pytest.raises(ServerCrashedError, match=r"failed while answering \(the connection was dropped mid-answer"):
        backend.generate(text_request())


def test_nothing_listening_from_the_start_is_still_said_so() -> None:
    server = FakeOpenAIServer().start()
    server.stop()
    with pytest.raises(ServerUnreachableError, match="Nothing is listening"):
        make_backend(server).generate(text_request())


def test_a_server_that_keeps_failing_says_what_it_said() -> None:
    with FakeOpenAIServer() as server:
        server.default_reply = StreamError(status=500, message=ENGINE_DEAD)
        with pytest.raises(ServerError) as caught:
            make_backend(server).generate(text_request())
    assert not isinstance(caught.value, ServerCrashedError)
    assert f"HTTP 500 inside the stream: {ENGINE_DEAD}" in str(caught.value) and "gave up after 4 attempts" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("said", "error", "fix"),
    [
        (TOO_LONG, ContextLengthError, "--max-model-len"),
        ("'max_tokens' is too large: 40000. This model's maximum context length is 32768 tokens", ContextLengthError,
         "--max-model-len"),
        (TOO_MANY_IMAGES, TooManyImagesError, "--limit-mm-per-prompt"),
    ],
)  # fmt: skip
def test_a_request_too_big_for_the_server_names_the_flag(said: str, error: type, fix: str) -> None:
    with FakeOpenAIServer() as server:
        server.queue(ErrorReply(400, said))
        with pytest.raises(error) as caught:
            make_backend(server).generate(two_image_request())
        assert len(server.chat_requests) == 1  # not retried: the same request would be refused again
    assert said in str(caught.value) and fix in str(caught.value)
