"""The real vLLM's refusals and failures, each reaching the user in its own words.

Too long for the context and too many images are the shared server's own 400s. A server that dies
mid-answer gets a server of its own: its engine process is killed while it streams an answer, as an
out-of-memory kill or an engine crash would end it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from bench.nemotron_tiny import build_nemotron_tiny
from bench.rigs.vllm_server import VllmServer, serve
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.remote import (
    ContextLengthError,
    RemoteBackend,
    RemoteBackendError,
    ServerError,
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
    with serve(build_nemotron_tiny(work / "ckpt"), work, max_model_len=8192, env=vllm_pool.cache_env) as server:
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


def test_a_server_that_dies_mid_answer_is_reported_as_a_crash(doomed_server: VllmServer) -> None:
    backend = RemoteBackend(doomed_server.base_url, api_key="", read_timeout_s=60)
    outcome: dict[str, BaseException | str] = {}

    def ask() -> None:
        try:  # no schema and a long budget: random weights write until the engine is gone
            outcome["text"] = backend.generate(images_request(1, max_new_tokens=4000)).text
        except RemoteBackendError as exc:
            outcome["error"] = exc

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    # Kill the engine once the answer is streaming (the server's log shows the request running).
    deadline = time.monotonic() + 120
    while "POST /v1/chat/completions" not in doomed_server.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the request never reached the server"
        time.sleep(0.2)
    engine = descendants(doomed_server.pid)
    assert engine, "the server has no engine process to kill"
    for pid in engine:
        os.kill(pid, signal.SIGKILL)
    asking.join(timeout=180)
    assert not asking.is_alive(), "the request did not end after the engine died"

    error = outcome.get("error")
    assert isinstance(error, ServerError), outcome  # a crash (or a server that kept failing), never a text
    message = str(error)
    assert "Nothing is listening" not in message
    assert "failed while answering" in message or "kept failing" in message, message
