"""The real vLLM's refusals and failures, each reaching the user in its own words.

Too long for the context and too many images are the shared server's own 400s. A server that dies
mid-answer gets a server of its own: its engine process is killed while it streams an answer, as an
out-of-memory kill or an engine crash would end it. The moment of death is fixed by a proxy between
the backend and that server (DyingProxy): after the answer's fourth event, never sooner or later.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from PIL import Image

from bench.nemotron_tiny import build_nemotron_tiny
from bench.rigs.vllm_server import VllmServer, serve
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.remote import (
    ContextLengthError,
    RemoteBackend,
    RemoteBackendError,
    ServerCrashedError,
    TooManyImagesError,
)
from tests.support.vllm_pool import VllmPool

pytestmark = pytest.mark.vllm


def backend_for(server: VllmServer) -> RemoteBackend:
    return RemoteBackend(server.base_url, api_key="", read_timeout_s=120)


def images_request(count: int, max_new_tokens: int = 4) -> ChatRequest:
    parts = [{"type": "text", "text": "What changed?"}] + [{"type": "image"}] * count
    return ChatRequest(
        messages=[{"role": "user", "content": parts}],
        images=[Image.new("RGB", (320, 200), (40 * i, 90, 160)) for i in range(count)],
        max_new_tokens=max_new_tokens,
    )


def test_a_request_longer_than_the_context_names_max_model_len(vllm_server: VllmServer) -> None:
    with pytest.raises(ContextLengthError) as caught:
        backend_for(vllm_server).generate(images_request(1, max_new_tokens=vllm_server.max_model_len + 1000))
    message = str(caught.value)
    assert str(vllm_server.max_model_len) in caught.value.server_message  # the server's own words
    assert "--max-model-len" in message and "holodesk doctor" in message


def test_more_images_than_the_server_allows_names_limit_mm_per_prompt(vllm_server: VllmServer) -> None:
    with pytest.raises(TooManyImagesError) as caught:
        backend_for(vllm_server).generate(images_request(vllm_server.max_images + 1))
    assert "image" in caught.value.server_message.lower()
    assert "--limit-mm-per-prompt" in str(caught.value)


@pytest.fixture(scope="module")
def doomed_server(tmp_path_factory: pytest.TempPathFactory, vllm_pool: VllmPool) -> Iterator[VllmServer]:
    """A server of its own, for the test that kills its engine (the pool's cache of model facts only)."""
    work = tmp_path_factory.mktemp("vllm-doomed")
    with serve(
        build_nemotron_tiny(work / "ckpt"), work, max_model_len=LONG_ANSWER + 2048, env=vllm_pool.cache_env
    ) as server:
        yield server


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), children first."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found.extend(children)
            pending.extend(children)
    return found


EVENTS_BEFORE_DEATH = 4  # the answer's events the backend has been sent when the engine is killed
# The dying answer's budget. The tiny model writes 4,000 tokens in seconds, and a loaded run once
# starved the API server until its engine had written them all: the kill then came after the answer,
# which arrived whole (a text, not a crash). 30,000 leaves that race half a minute.
LONG_ANSWER = 30000
EVENT = b"data: "  # how each server-sent event starts


class DyingProxy:
    """Forwards each connection to the server, byte for byte, and makes the server die at a set point.

    The chat request is forwarded with `ignore_eos`, so that random weights cannot end the answer
    before the point; once EVENTS_BEFORE_DEATH events of its answer have been sent on, the proxy stops
    accepting connections (the port is gone, as a dead server's) and runs `kill`, then forwards
    whatever the dying server still sends. Without it the kill raced the answer (an answer that
    ended first is a text), and the retries raced the API server, which outlives its engine for a
    while: still listening, it took a retry and sent nothing (a timeout after 60 s, seen with the
    port left open on purpose); answering 500s it read as "kept failing"; gone, as a crash.

    The engine is paused (`pause`) as soon as the answer's first bytes arrive and let run only in
    short steps (`step`) while the point is still ahead: on a loaded fresh machine the API server
    was starved while its engine wrote all 30,000 tokens, vLLM merged them into a few large events,
    and the kill at the fifth event came after an answer that was already whole.
    """

    def __init__(
        self, upstream_port: int, kill: Callable[[], None], pause: Callable[[], None], step: Callable[[], None]
    ) -> None:
        self.upstream_port = upstream_port
        self.kill = kill
        self.pause = pause
        self.step = step
        self.killed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.problems: list[str] = []  # what went wrong in a forwarding thread, for the test to show
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop listening: a connection attempt from now on is refused."""
        # close() alone leaves the socket listening while the accepting thread is blocked on it
        # (Linux): a retry would still connect. shutdown() ends the accept and the listening.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()

    def _accept(self) -> None:
        while not self.killed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed: the server is dead, or the test is over
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        try:
            with client, socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
                head, body = _read_request(client)
                chat = head.split(b" ", 2)[1].endswith(b"/chat/completions")
                if chat:
                    body = json.dumps({**json.loads(body), "ignore_eos": True}).encode()
                upstream.sendall(_with_length(head, len(body)) + body)
                self._relay(upstream, client, count_events=chat)
        except (OSError, ValueError, AssertionError) as exc:  # shown by the test's own assertions
            self.problems.append(f"{type(exc).__name__}: {exc}")

    def _relay(self, upstream: socket.socket, client: socket.socket, *, count_events: bool) -> None:
        received = b""  # the answer so far, while the point is still ahead
        while data := self._receive(upstream, paced=bool(received) and not self.killed.is_set()):
            if count_events and not self.killed.is_set():
                if not received:
                    self.pause()
                received += data
                if received.count(EVENT) >= EVENTS_BEFORE_DEATH + 1:
                    # The events before the point go to the backend; the rest only after the kill.
                    point = _start_of(received, EVENT, EVENTS_BEFORE_DEATH + 1) - (len(received) - len(data))
                    client.sendall(data[:point])
                    data = data[point:]
                    self.close()  # a retry finds nothing listening, as at a dead server
                    self.killed.set()
                    self.kill()
            client.sendall(data)

    def _receive(self, upstream: socket.socket, *, paced: bool) -> bytes:
        """The server's next bytes; while the point is ahead and nothing comes, the paused engine takes a step."""
        if not paced:
            return upstream.recv(65536)
        deadline = time.monotonic() + 120
        upstream.settimeout(0.1)
        try:
            while True:
                try:
                    return upstream.recv(65536)
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise
                    self.step()
        finally:
            upstream.settimeout(None)


def _start_of(data: bytes, marker: bytes, number: int) -> int:
    """Where the `number`th `marker` in `data` starts."""
    index = -1
    for _ in range(number):
        index = data.index(marker, index + 1)
    return index


def _read_request(client: socket.socket) -> tuple[bytes, bytes]:
    """One HTTP request from the backend: its head (through the blank line) and its body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(65536)
        if not chunk:
            raise ValueError("the backend closed the connection before a whole request")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = client.recv(65536)
        if not chunk:
            raise ValueError("the backend closed the connection before the whole body")
        body += chunk
    return head, body


def _with_length(head: bytes, length: int) -> bytes:
    """The request head with its Content-Length set to `length`, and the connection closed after the answer."""
    lines = [
        line
        for line in head.split(b"\r\n")
        if line.partition(b":")[0].strip().lower() not in (b"content-length", b"connection")
    ]
    return b"\r\n".join([*lines, b"Content-Length: %d" % length, b"Connection: close"]) + b"\r\n\r\n"


def test_a_server_that_dies_mid_answer_is_reported_as_a_crash(doomed_server: VllmServer) -> None:
    engine = descendants(doomed_server.pid)
    assert engine, "the server has no engine process to kill"

    def signal_the_engine(number: signal.Signals) -> None:
        for pid in engine:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def step_the_engine() -> None:
        signal_the_engine(signal.SIGCONT)
        time.sleep(0.02)  # a token or so on this tiny model, or a slice of its prefill
        signal_the_engine(signal.SIGSTOP)

    port = urlsplit(doomed_server.base_url).port
    assert port is not None
    proxy = DyingProxy(
        port,
        kill=lambda: signal_the_engine(signal.SIGKILL),
        pause=lambda: signal_the_engine(signal.SIGSTOP),
        step=step_the_engine,
    )
    try:
        backend = RemoteBackend(proxy.base_url, api_key="", read_timeout_s=60)
        outcome: dict[str, BaseException | str] = {}
        try:  # no schema and a long budget that ignore_eos holds it to: the answer outlives the point
            outcome["text"] = backend.generate(images_request(1, max_new_tokens=LONG_ANSWER)).text
        except RemoteBackendError as exc:
            outcome["error"] = exc
    finally:
        proxy.close()
        signal_the_engine(signal.SIGCONT)  # a failure before the point leaves no engine paused for the teardown

    assert proxy.killed.is_set(), f"the answer ended before event {EVENTS_BEFORE_DEATH + 1}: {outcome} {proxy.problems}"
    error = outcome.get("error")
    assert isinstance(error, ServerCrashedError), outcome  # a crash, never a text
    message = str(error)
    assert "failed while answering" in message and "then stopped accepting connections" in message, message
