"""Every remote request is bounded and can be stopped: misbehaving servers on 127.0.0.1.

Each fault mode is a real server behaviour (bench/rigs/fake_openai_server.py): a stall, a status
line whose headers drip one byte at a time, an answer stream that never ends, a stream of keep-alive
comments only, and a stop while the answer is awaited. Times are bounds (a fault must not cost more
than this), with generous margins for a loaded CI machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from bench.rigs.fake_openai_server import (
    Completion,
    EndlessStream,
    FakeOpenAIServer,
    HeaderDrip,
    KeepAliveStream,
    SlowReply,
)
from holodesk.inference.remote import (
    AnswerTooLongError,
    RemoteBackend,
    RequestStoppedError,
    ServerTimeoutError,
    ServerUnreachableError,
)
from tests.inference.test_remote import make_backend, text_request


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def wait_for(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def timed_failure(backend: RemoteBackend, error: type[Exception]) -> tuple[Exception, float]:
    started = time.monotonic()
    with pytest.raises(error) as caught:
        backend.generate(text_request())
    return caught.value, time.monotonic() - started


def test_an_answer_dripping_slowly_hits_the_request_deadline(server: FakeOpenAIServer) -> None:
    # A token every 50 ms never trips the 5 s read timeout; the 0.5 s deadline ends it.
    server.queue(Completion(text="x" * 400, chunk_chars=1, token_delay_s=0.05))
    error, elapsed = timed_failure(make_backend(server, request_deadline_s=0.5), ServerTimeoutError)
    assert "0.5 s deadline" in str(error) and "too slowly" in str(error)
    assert elapsed < 1.5
    assert len(server.chat_requests) == 1  # a deadline is not retried: the user is waiting


def test_headers_that_never_end_hit_the_request_deadline_and_release_the_server(server: FakeOpenAIServer) -> None:
    server.queue(HeaderDrip(interval_s=0.02))
    error, elapsed = timed_failure(make_backend(server, request_deadline_s=0.5), ServerTimeoutError)
    assert "deadline" in str(error)
    assert elapsed < 1.5
    wait_for(lambda: server.released_at, timeout_s=1.0)


def test_a_stalled_server_hits_the_deadline_even_with_a_long_read_timeout(server: FakeOpenAIServer) -> None:
    server.queue(SlowReply(delay_s=30))
    backend = make_backend(server, stream=False, read_timeout_s=60, request_deadline_s=0.4)
    error, elapsed = timed_failure(backend, ServerTimeoutError)
    assert "0.4 s deadline" in str(error)
    assert elapsed < 1.5


def test_an_endless_stream_is_cut_at_the_answer_bound(server: FakeOpenAIServer) -> None:
    server.queue(EndlessStream(piece_chars=4096))
    backend = make_backend(server, max_answer_bytes=256 * 1024)
    error, elapsed = timed_failure(backend, AnswerTooLongError)
    assert "262,144 bytes" in str(error)
    assert elapsed < 3.0
    assert len(server.chat_requests) == 1
    wait_for(lambda: server.released_at, timeout_s=1.0)


def test_a_stream_of_keep_alive_comments_only_is_given_up(server: FakeOpenAIServer) -> None:
    server.queue(KeepAliveStream(interval_s=0.02))
    error, elapsed = timed_failure(make_backend(server, keepalive_silence_s=0.3), ServerTimeoutError)
    assert "keep-alive" in str(error) and "0.3 s" in str(error)
    assert elapsed < 1.5


@pytest.mark.parametrize(
    "reply",
    [SlowReply(delay_s=30), KeepAliveStream(interval_s=0.02), HeaderDrip(interval_s=0.02)],
    ids=["stalled", "keep-alive", "header-drip"],
)
def test_interrupt_releases_the_waiting_thread(server: FakeOpenAIServer, reply) -> None:
    server.queue(reply)
    backend = make_backend(server, stream=not isinstance(reply, SlowReply))
    failures: list[BaseException] = []
    finished_at: list[float] = []

    def ask() -> None:
        try:
            backend.generate(text_request())
        except BaseException as exc:
            failures.append(exc)
        finished_at.append(time.monotonic())

    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    wait_for(lambda: server.chat_requests)  # the server holds the request (for 30 s, or forever)
    stopped_at = time.monotonic()
    backend.interrupt()
    # Only the interrupt can end the request this soon, and it says so: a timeout is another error.
    worker.join(timeout=20)
    assert not worker.is_alive()
    latency_ms = 1000 * (finished_at[0] - stopped_at)
    print(f"\n{type(reply).__name__}: interrupted {latency_ms:.0f} ms after the stop (promise: 100 ms)")
    assert isinstance(failures[0], RequestStoppedError), failures
    assert "stopped" in str(failures[0])
    assert len(server.chat_requests) == 1  # a stop is not retried
    if not isinstance(reply, SlowReply):  # a server that writes notices the closed connection at once
        wait_for(lambda: server.released_at, timeout_s=1.0)


def test_https_to_a_plain_http_port_says_so(server: FakeOpenAIServer) -> None:
    backend = RemoteBackend(f"https://127.0.0.1:{server.port}/v1", model="m", api_key="")
    with pytest.raises(ServerUnreachableError) as caught:
        backend.generate(text_request())
    assert "does not speak TLS" in str(caught.value) and "http://" in str(caught.value)


def test_the_bounds_are_checked(server: FakeOpenAIServer) -> None:
    with pytest.raises(ValueError, match="positive"):
        RemoteBackend(server.base_url, request_deadline_s=0)
    with pytest.raises(ValueError, match="max_answer_bytes"):
        RemoteBackend(server.base_url, max_answer_bytes=10)
