"""A server answer nested 100,000 levels deep is refused in Holodesk's words, whole or streamed.

Python's JSON reader raises RecursionError near its recursion limit, which is no ValueError: before,
it escaped as "maximum recursion depth exceeded while decoding a JSON array" (issue 48). The answers
come from a real HTTP server on 127.0.0.1 (bench/rigs/fake_openai_server.py) through the backend's
whole HTTP path.
"""

from __future__ import annotations

import pytest

from bench.rigs.fake_openai_server import FakeOpenAIServer, RawReply
from holodesk.inference.remote import MalformedResponseError, RequestRejectedError
from tests.inference.test_remote import make_backend, no_ambient_keys, server, text_request

__all__ = ["no_ambient_keys", "server"]  # the fixtures, shared with test_remote

DEPTH = 100_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
WORDS = "nested deeper than Holodesk reads"


@pytest.mark.parametrize(
    ("reply", "stream", "what"),
    [
        (RawReply(b'{"choices": ' + DEEP + b"}"), False, "an answer"),
        (RawReply(DEEP), False, "an answer"),
        (RawReply(b"data: " + DEEP + b"\n\n", content_type="text/event-stream"), True, "an event of its stream"),
        (RawReply(b'data: {"choices": [{"delta": ' + DEEP + b"}]}\n\n", content_type="text/event-stream"), True,
         "an event of its stream"),
    ],
    ids=["whole-in-choices", "whole", "streamed", "streamed-in-delta"],
)  # fmt: skip
def test_an_answer_nested_100000_deep_is_refused_in_words(
    server: FakeOpenAIServer, reply: RawReply, stream: bool, what: str
) -> None:
    server.queue(reply)
    with pytest.raises(MalformedResponseError) as caught:
        make_backend(server, stream=stream).generate(text_request())
    said = str(caught.value)
    assert f"sent {what} {WORDS}" in said and "levels of arrays or objects" in said, said
    assert "recursion" not in said.lower(), said  # Holodesk's words, not Python's
    assert caught.value.body_excerpt.count("[") > 10 and len(said) < 1000
    assert len(server.chat_requests) == 1  # a malformed answer is not asked again


def test_an_error_body_nested_100000_deep_still_gives_the_status_in_words(server: FakeOpenAIServer) -> None:
    server.queue(RawReply(b'{"error": ' + DEEP + b"}", status=400))
    with pytest.raises(RequestRejectedError) as caught:
        make_backend(server, stream=False).generate(text_request())
    assert caught.value.status == 400 and caught.value.server_message.startswith('{"error": [[[')
