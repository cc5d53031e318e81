"""`holodesk run` against real servers on 127.0.0.1 that cannot serve: words, exit 2, no session.

Each case starts a real HTTP server (bench/rigs/fake_openai_server.py) or uses a closed port,
runs the real command in a subprocess, and checks what the user reads: what happened and what to
do, no traceback, no keyring noise, and no session folder for a run that never started.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import FakeOpenAIServer, closed_port
from holodesk.app.common.backend_problems import gpu_missing
from holodesk.automation.trajectory import iter_session_folders
from tests.support.holodesk_command import HOLODESK_COMMAND


def no_session_recorded(root: Path) -> bool:
    """The run never started: no session folder (the empty root may exist: it was checked writable first)."""
    return not root.exists() or not list(iter_session_folders(root))


def run_remote(base_url: str, sessions: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOLODESK_COMMAND, "run", "open the mail", "--backend", "remote", "--base-url", base_url,
         "--sessions", str(sessions), *extra],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def assert_refused_in_words(result: subprocess.CompletedProcess[str], sessions: Path, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "keyring" not in result.stderr.lower()  # no key was needed: no keyring warning
    assert not sessions.exists() or not any(sessions.iterdir()), "a run that never started left a session"
    assert result.stdout == ""  # not even "task: ..." : nothing started


def test_a_server_that_is_down(tmp_path):
    result = run_remote(f"http://127.0.0.1:{closed_port()}/v1", tmp_path / "sessions")
    assert_refused_in_words(result, tmp_path / "sessions", "connection refused", "Start the model server")


def test_a_wrong_url_that_gives_a_404_page(tmp_path):
    with FakeOpenAIServer() as server:
        result = run_remote(server.root_url + "/api", tmp_path / "sessions")
    assert_refused_in_words(result, tmp_path / "sessions", "does not exist", "ends in /v1")


def test_https_to_a_plain_http_server_is_a_tls_mismatch(tmp_path):
    with FakeOpenAIServer() as server:
        result = run_remote(server.base_url.replace("http://", "https://"), tmp_path / "sessions")
    assert_refused_in_words(result, tmp_path / "sessions", "TLS", "try http://")


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_a_server_that_wants_a_key(tmp_path, monkeypatch, key):
    if key is None:
        monkeypatch.delenv("HOLODESK_API_KEY", raising=False)
    else:
        monkeypatch.setenv("HOLODESK_API_KEY", key)
    with FakeOpenAIServer(api_key="the-right-key") as server:
        result = run_remote(server.base_url, tmp_path / "sessions")
    assert result.returncode == 2, result.stderr
    said = "needs an API key and none was found" if key is None else "refused the API key"
    assert said in result.stderr and "HOLODESK_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr and no_session_recorded(tmp_path / "sessions")


def test_a_model_the_server_does_not_serve(tmp_path):
    with FakeOpenAIServer() as server:
        result = run_remote(server.base_url, tmp_path / "sessions", "--model", "Hcompany/Holo-Nothing")
    assert_refused_in_words(result, tmp_path / "sessions", "does not serve the model", "Choose a model")


def test_a_wrong_local_model_path(tmp_path):
    result = subprocess.run(
        [*HOLODESK_COMMAND, "run", "open the mail", "--model", str(tmp_path / "no-such-checkpoint"),
         "--device", "cpu", "--sessions", str(tmp_path / "sessions")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "no-such-checkpoint" in result.stderr and "Traceback" not in result.stderr
    assert no_session_recorded(tmp_path / "sessions")


def test_the_local_backend_on_a_computer_without_a_gpu_points_at_the_server(tmp_path):
    if not gpu_missing():
        pytest.skip("this machine has an NVIDIA GPU")
    # No weights either: the reason would say to download 25 GB, which cannot help without a GPU.
    result = subprocess.run(
        [*HOLODESK_COMMAND, "run", "open the mail", "--backend", "local", "--device", "cuda",
         "--sessions", str(tmp_path / "sessions")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty")},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "error: This computer has no NVIDIA GPU" in result.stderr  # after the progress line
    assert "--backend remote --base-url" in result.stderr and "Traceback" not in result.stderr
    assert no_session_recorded(tmp_path / "sessions")
    assert "Download it once" not in result.stderr and "pip install" not in result.stderr
